"""The paper's GPU path against its peers, step by step (benchmarks/gpu/check.sh runs them in the issue's order):

    python benchmarks/gpu_unpadded.py window                  # the window probe (benchmarks/gpu/window.py)
    python benchmarks/gpu_unpadded.py efficiency              # Table 2's four sets, fp32: harness vs notebook loop
    python benchmarks/gpu_unpadded.py bf16                    # short fixed in bf16: autocast, bf16 weights, compiled
    python benchmarks/gpu_unpadded.py retrieval --data DIR    # a BEIR corpus, MiniLM: harness vs sentence-transformers
    python benchmarks/gpu_unpadded.py encode --model-dir MB   # the same, ModernBERT-base's shape: the encoder target
    python benchmarks/gpu_unpadded.py parity                  # per-text max |diff|, packed vs padded, fp32
    python benchmarks/gpu_unpadded.py gradients               # a classifier's gradients vs padded sdpa

Without ``--model-dir`` a random ModernBERT (``--random tiny|base|base2``: 4 layers of 64 with window 16 and 8,192
positions, ModernBERT-base's shape, or its first 2 layers) is made in a temporary folder (speed does not depend on
the weights). ``--shrink N`` divides every length by N (the check's CPU dry run). ``--out DIR``: each figure is
appended to DIR/figures.jsonl the moment it exists (benchmarks/gpu/figures.py), with the device, torch and the
attention kernel counted while it was measured.

``efficiency``: the harness runs task=efficiency's measurement (:func:`harness.tasks.efficiency.throughput.measure`)
with the attention ``auto`` resolves to (CUDA: harness_varlen, packed; CPU: ``harness_varlen``'s reference) and
fp32 matmuls as the authors' notebooks (TF32 off; ``--tf32`` adds short fixed with TF32 on, for information); the
notebook loop is an sdpa model with batches padded to the set's longest length, fp32, random ids in [100, 16,000),
a synchronise per pass. Tokens/s count real tokens, mean of ``--repeats`` passes after one warm-up. With fp32
weights the flash kernel still runs in bf16 (q, k and v cast around it, as the authors' research ModernBERT did):
each figure's kernel says ``... on bfloat16``, counted per run (:func:`gpu.figures.kernel_of`).
"""

from __future__ import annotations

import argparse
import atexit
import csv
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))        # benchmarks/gpu/ as the package ``gpu``

from harness.encoding import encode as enc
from harness.models import ModelSpec, load_sentence_transformer
from harness.tasks.efficiency import throughput as tp
from harness.tasks.efficiency.settings import SetSpec

REPO = Path(__file__).resolve().parents[1]
TABLE2 = REPO / "harness" / "leaderboard" / "baselines" / "modernbert_table2_efficiency.csv"
SETS = {"short_fixed": dict(length=512, batch_size=512),
        "short_variable": dict(mean=256, std=64, min=32, max=512, batch_size=512),
        "long_fixed": dict(length=8192, batch_size=32),
        "long_variable": dict(mean=4096, std=1024, min=32, max=8192, batch_size=32)}
#: issue 39's targets: variable-length throughput at least this fraction of fixed-length; bf16 short fixed
VARIABLE_VS_FIXED, BF16_SHORT_FIXED = 0.9, 1.2e6


def paper_row(size: str = "base") -> dict[str, str]:
    with open(TABLE2) as fh:
        return next(r for r in csv.DictReader(fh) if r["model"] == "ModernBERT" and r["size"] == size)


def shrunk(name: str, shrink: int) -> SetSpec:
    """A set of Table 10 with every length divided by ``shrink`` (1: as the paper)."""
    return SetSpec(**{k: (v if k == "batch_size" else max(2, v // shrink)) for k, v in SETS[name].items()})


# --------------------------------------------------------------------------------------------- models
def random_modernbert(shape: str) -> str:
    """A folder with a random-weight ModernBERT: ``base`` (ModernBertConfig's defaults are ModernBERT-base's
    shape), ``base2`` (its first 2 layers: one global, one local) or ``tiny`` (4 layers of 64, window 16, 8,192
    positions); the tiny fixture's tokenizer (speed does not depend on the weights or the vocabulary's words)."""
    import shutil
    import tempfile

    from transformers import ModernBertConfig, ModernBertModel

    folder = Path(tempfile.mkdtemp(prefix=f"modernbert-{shape}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    small = dict(vocab_size=2000, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                 local_attention=16, pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)
    torch.manual_seed(0)
    config = {"tiny": small, "base": {}, "base2": {"num_hidden_layers": 2}}[shape]
    ModernBertModel(ModernBertConfig(**config)).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(REPO / "tests" / "fixtures" / "tiny-modernbert" / name, folder / name)
    return str(folder)


def harness_model(args: argparse.Namespace) -> tuple[Any, Any, str | None]:
    """The harness' ModernBERT as task=efficiency loads it: (SentenceTransformer, encoder, pack mode)."""
    cuda = args.device.startswith("cuda")
    spec = ModelSpec.based_on("modernbert-base", name="bench", path=args.model_dir, max_length=8192,
                              attn_implementation=args.attn or ("auto" if cuda else "harness_varlen"))
    model, _ = load_sentence_transformer(spec, device=args.device)
    return model, model[0].auto_model.eval(), enc.pack_mode(model, "auto", args.device)


def token_range(hf: Any) -> tuple[int, int]:
    return min(100, hf.config.vocab_size - 1), min(16000, hf.config.vocab_size)   # a tiny model's vocabulary


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


def harness_rate(hf: Any, spec: SetSpec, n: int, mode: str | None, args: argparse.Namespace,
                 precision: str = "fp32") -> float:
    lengths = tp.set_lengths(spec, n, 42)
    timing = tp.measure(hf, lengths, batch_size=spec.batch_size, mode=mode, pad_to=spec.max_length, pad_id=0, seed=42,
                        id_range=token_range(hf), precision=precision, device=args.device, repeats=args.repeats,
                        warmup=1, show=False)
    return float(timing.tokens_per_s.mean())


def run_efficiency(args: argparse.Namespace) -> None:
    """Each set: the harness, then the notebook loop, then their ratio; a length's variable / fixed the moment
    both of its sets exist (a step cut off later keeps them). Each figure's kernel counts that run's calls only."""
    from gpu.figures import Figures, kernel_of, marks
    from transformers import AutoModel

    from harness.models.kernel_calls import watch

    figures = Figures(args.out, "efficiency", args.device)
    _, hf, mode = harness_model(args)
    notebook = AutoModel.from_pretrained(args.model_dir, attn_implementation="sdpa").to(args.device).eval()
    watch(notebook)
    positions = int(getattr(hf.config, "max_position_embeddings", 8192))
    row, ids, rates = paper_row(), token_range(hf), {}
    with tp.paper_matmul(args.device) as matmul:
        for name in SETS:
            spec = shrunk(name, args.shrink)
            if spec.max_length > positions:
                figures.add(f"{name} fp32 weights", "skipped", note=f"the model's positions stop at {positions}")
                continue
            n = args.n_short if SETS[name].get("length", SETS[name].get("max")) <= 512 else args.n_long
            before = marks(hf)
            ours = rates[name] = harness_rate(hf, spec, n, mode, args)
            kernel = kernel_of(hf, since=before)
            paper = float(row[name]) * 1e3
            figures.add(f"{name} fp32 weights, harness ({'packed' if mode else 'padded'}), {n} docs", ours,
                        "tokens/s", kernel=kernel, target=(">=", paper) if args.shrink == 1 else None,
                        note=f"paper's RTX 4090: {paper:,.0f}; TF32 {matmul.get('tf32', 'n/a')}")
            lengths = tp.set_lengths(spec, n, 42).tolist()
            before_nb = marks(notebook)
            theirs = notebook_loop(notebook, lengths, spec.batch_size, spec.max_length, args.device, args.repeats, ids)
            figures.add(f"{name} fp32 weights, notebook-style padded sdpa loop", theirs, "tokens/s",
                        kernel=kernel_of(notebook, since=before_nb))
            figures.add(f"{name} fp32 weights, harness / notebook loop", ours / theirs, "x", kernel=kernel)
            kind = name.split("_")[0]
            if name.endswith("variable") and f"{kind}_fixed" in rates:
                figures.add(f"{kind} variable / {kind} fixed (fp32 weights, harness)",
                            rates[name] / rates[f"{kind}_fixed"], "x", kernel=kernel,
                            target=(">=", VARIABLE_VS_FIXED))
    if args.tf32 and args.device.startswith("cuda"):       # not the paper's protocol: what TF32 would give
        torch.set_float32_matmul_precision("high")
        before = marks(hf)
        figures.add("short_fixed fp32 weights with TF32 on (not the paper's protocol)",
                    harness_rate(hf, shrunk("short_fixed", args.shrink), args.n_short, mode, args), "tokens/s",
                    kernel=kernel_of(hf, since=before))


def run_bf16(args: argparse.Namespace) -> None:
    """Short fixed under precision=bf16: autocast over fp32 weights (what the harness ran before issue 46), bf16
    weights (what it runs now on CUDA; the rotary frequencies stay fp32), and bf16 weights through torch.compile
    (compile time shown). Each figure's kernel counts its own run's calls, not the runs before it."""
    from gpu.figures import Figures, kernel_of, marks

    from harness.models import cast_for_inference
    from harness.models.compiled import compile_encoder

    figures = Figures(args.out, "bf16", args.device)
    spec = shrunk("short_fixed", args.shrink)
    _, hf, mode = harness_model(args)
    before = marks(hf)
    autocast_rate = harness_rate(hf, spec, args.n_short, mode, args, "bf16")
    figures.add("short_fixed bf16, autocast over fp32 weights", autocast_rate, "tokens/s",
                kernel=kernel_of(hf, since=before))
    cast_for_inference(hf, "bf16", "cuda")                  # the weights themselves, on any device (the dry run)
    before = marks(hf)
    eager = harness_rate(hf, spec, args.n_short, mode, args, "bf16")
    figures.add("short_fixed bf16, bf16 weights (the harness on CUDA)", eager, "tokens/s",
                kernel=kernel_of(hf, since=before), target=(">=", BF16_SHORT_FIXED) if args.shrink == 1 else None,
                note=f"{eager / autocast_rate:.2f}x autocast")
    if args.compile_backend == "none":
        return
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 64
    compile_encoder(hf, args.compile_backend)
    t0 = time.perf_counter()
    harness_rate(hf, spec, min(args.n_short, spec.batch_size), mode, argparse.Namespace(**{**vars(args), "repeats": 1}),
                 "bf16")
    compile_s = time.perf_counter() - t0
    before = marks(hf)
    compiled = harness_rate(hf, spec, args.n_short, mode, args, "bf16")
    figures.add(f"short_fixed bf16 weights, torch.compile ({args.compile_backend})", compiled, "tokens/s",
                kernel=kernel_of(hf, since=before), note=f"{compiled / eager:.2f}x eager; first passes (compiling) "
                                                         f"{compile_s:.1f} s")


def main() -> None:
    from gpu import parity, retrieval, window

    steps = {"window": window.run, "efficiency": run_efficiency, "bf16": run_bf16, "retrieval": retrieval.run,
             "encode": retrieval.run, "parity": parity.run_parity, "gradients": parity.run_gradients}
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=list(steps))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=None, help="append each figure to OUT/figures.jsonl as it is measured")
    ap.add_argument("--model-dir", default=None, help="a ModernBERT folder (else --random); retrieval: a "
                    "sentence-transformers folder (default all-MiniLM-L6-v2 from its package); encode: a ModernBERT")
    ap.add_argument("--random", default="tiny", choices=["tiny", "base", "base2"])
    ap.add_argument("--attn", default=None, help="the harness' attention (default: auto on CUDA; CPU: harness_varlen)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--shrink", type=int, default=1, help="divide every length by this (a CPU dry run)")
    ap.add_argument("--n-short", type=int, default=512, help="documents in each short set")
    ap.add_argument("--n-long", type=int, default=32, help="documents in each long set")
    ap.add_argument("--parity-docs", type=int, default=64)
    ap.add_argument("--tf32", action="store_true", help="efficiency: also short fixed with TF32 on (information)")
    ap.add_argument("--compile-backend", default="inductor", help="bf16: torch.compile's backend (none: skip)")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--n-docs", type=int, default=0, help="retrieval: the first N documents (0: all)")
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"], help="retrieval's precision")
    ap.add_argument("--batch-tokens", type=int, default=None, help="retrieval: the encoder's budget (default auto)")
    ap.add_argument("--st-batch-sizes", type=int, nargs="+", default=[32, 128, 512])
    args = ap.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()      # load reports of the random-weight folders
    transformers.logging.disable_progress_bar()
    if args.what not in ("retrieval", "window") and not args.model_dir:
        args.model_dir = random_modernbert(args.random)
    steps[args.what](args)


if __name__ == "__main__":
    main()
