"""The GPU check's Table 2 steps (benchmarks/gpu_unpadded.py runs them; benchmarks/gpu/check.sh in this order):

- ``efficiency`` (targets): Table 2's four sets with fp32 weights through the harness (task=efficiency's
  measurement), each against the paper's RTX 4090 figure, and each length's variable / fixed the moment its
  variable set's rate exists;
- ``bf16`` (target): short fixed with bf16 weights, what the harness runs on CUDA;
Then the information, in one step (``information``: benchmarks/gpu_unpadded.py runs these parts in this order):
- ``padded``: the notebook-style padded sdpa loop on each set beside the harness' rate written by
  ``efficiency``, the ratio labelled for what it measures (unpadding plus precision: the harness' attention runs
  in bf16 around the flash kernel, the loop's sdpa in fp32), and short fixed with TF32 on (not the protocol);
- ``autocast``: short fixed under autocast over fp32 weights (what the harness ran before issue 46);
- ``compile`` (after the encoder's MiniLM case, the check's last part): short fixed in bf16 weights through a cold torch.compile.

With fp32 weights the flash kernel runs in bf16 (q, k and v cast around it, as the authors' research ModernBERT
did), so "fp32" figures are fp32 weights with bf16 attention, as the paper's; each figure's kernel says ``... on
bfloat16``, counted per run (:func:`gpu.figures.kernel_of`). Tokens/s count real tokens, mean of ``--repeats``
passes after one warm-up; the notebook loop: batches padded to the set's longest length, random ids in [100,
16,000), a synchronise per pass.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from harness.tasks.efficiency import throughput as tp
from harness.tasks.efficiency.settings import SetSpec

REPO = Path(__file__).resolve().parents[2]
TABLE2 = REPO / "harness" / "leaderboard" / "baselines" / "modernbert_table2_efficiency.csv"
SETS = {"short_fixed": dict(length=512, batch_size=512),
        "short_variable": dict(mean=256, std=64, min=32, max=512, batch_size=512),
        "long_fixed": dict(length=8192, batch_size=32),
        "long_variable": dict(mean=4096, std=1024, min=32, max=8192, batch_size=32)}
#: issue 39's targets: variable-length throughput at least this fraction of fixed-length; bf16 short fixed
VARIABLE_VS_FIXED, BF16_SHORT_FIXED = 0.9, 1.2e6
#: what an fp32 figure's attention ran in: fp32 weights, bf16 attention around the flash kernel (as the paper's)
FP32_WEIGHTS = "fp32 weights"


def paper_row(size: str = "base") -> dict[str, str]:
    with open(TABLE2) as fh:
        return next(r for r in csv.DictReader(fh) if r["model"] == "ModernBERT" and r["size"] == size)


def shrunk(name: str, shrink: int) -> SetSpec:
    """A set of Table 10 with every length divided by ``shrink`` (1: as the paper)."""
    return SetSpec(**{k: (v if k == "batch_size" else max(2, v // shrink)) for k, v in SETS[name].items()})


def n_docs(name: str, args: argparse.Namespace) -> int:
    return args.n_short if SETS[name].get("length", SETS[name].get("max")) <= 512 else args.n_long


def harness_model(args: argparse.Namespace) -> tuple[Any, Any, str | None]:
    """The harness' ModernBERT as task=efficiency loads it: (SentenceTransformer, encoder, pack mode)."""
    from harness.encoding import encode as enc
    from harness.models import ModelSpec, load_sentence_transformer

    cuda = args.device.startswith("cuda")
    spec = ModelSpec.based_on("modernbert-base", name="bench", path=args.model_dir, max_length=8192,
                              attn_implementation=args.attn or ("auto" if cuda else "harness_varlen"))
    model, _ = load_sentence_transformer(spec, device=args.device)
    return model, model[0].auto_model.eval(), enc.pack_mode(model, "auto", args.device)


def token_range(hf: Any) -> tuple[int, int]:
    return min(100, hf.config.vocab_size - 1), min(16000, hf.config.vocab_size)   # a tiny model's vocabulary


def harness_rate(hf: Any, spec: SetSpec, n: int, mode: str | None, args: argparse.Namespace,
                 precision: str = "fp32") -> float:
    lengths = tp.set_lengths(spec, n, 42)
    timing = tp.measure(hf, lengths, batch_size=spec.batch_size, mode=mode, pad_to=spec.max_length, pad_id=0, seed=42,
                        id_range=token_range(hf), precision=precision, device=args.device, repeats=args.repeats,
                        warmup=1, show=False)
    return float(timing.tokens_per_s.mean())


def notebook_loop(model: Any, lengths: list[int], batch_size: int, pad_to: int, device: str, repeats: int,
                  ids: tuple[int, int]) -> float:
    """Tokens/s of the authors' notebook-style loop: padded batches built on the device first, fp32, one
    synchronise per pass, mean over ``repeats`` passes after a warm-up."""
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
        with torch.inference_mode():
            for tokens, mask in batches:
                model(input_ids=tokens, attention_mask=mask)
        tp._sync(device)
        if p:
            times.append(time.perf_counter() - t0)
    return sum(lengths) / statistics.mean(times)


def attention_dtype(kernel: str) -> str:
    """The dtype a figure's kernel names (``... on bfloat16``), or ``?``."""
    return kernel.rsplit(" on ", 1)[-1] if " on " in kernel else "?"


def ratio_label(ours_kernel: str, loop_kernel: str) -> str:
    """What harness / notebook loop measures: unpadding, plus precision where the harness' attention ran in
    another dtype than the loop's (bf16 around the flash kernel against the loop's fp32 sdpa)."""
    ours, theirs = attention_dtype(ours_kernel), attention_dtype(loop_kernel)
    if ours != theirs:
        return f"unpadding plus precision (attention {ours} vs {theirs}), information only"
    return f"unpadding (attention {ours} in both), information only"


def run_efficiency(args: argparse.Namespace) -> None:
    """Each set through the harness (its target: the paper's figure); a length's variable / fixed right after its
    variable set. Each figure's kernel counts that run's calls only."""
    from gpu.figures import Figures, kernel_of, marks

    figures = Figures(args.out, "efficiency", args.device)
    _, hf, mode = harness_model(args)
    positions = int(getattr(hf.config, "max_position_embeddings", 8192))
    row, rates = paper_row(), {}
    with tp.paper_matmul(args.device) as matmul:
        for name in SETS:
            spec, n, paper = shrunk(name, args.shrink), n_docs(name, args), float(row[name]) * 1e3
            if spec.max_length > positions:
                figures.add(f"{name} {FP32_WEIGHTS}", "skipped", target=(">=", paper),
                            note=f"the model's positions stop at {positions}")
                continue
            before = marks(hf)
            rates[name] = harness_rate(hf, spec, n, mode, args)
            kernel = kernel_of(hf, since=before)
            figures.add(f"{name} {FP32_WEIGHTS}, harness ({'packed' if mode else 'padded'}), {n} docs", rates[name],
                        "tokens/s", kernel=kernel, target=(">=", paper),
                        note=f"paper's RTX 4090: {paper:,.0f} (fp32 weights, bf16 attention as here); TF32 "
                             f"{matmul.get('tf32', 'n/a')}")
            kind = name.split("_")[0]
            if name.endswith("variable") and f"{kind}_fixed" in rates:
                figures.add(f"{kind} variable / {kind} fixed ({FP32_WEIGHTS}, harness)",
                            rates[name] / rates[f"{kind}_fixed"], "x", kernel=kernel,
                            target=(">=", VARIABLE_VS_FIXED))


def run_padded(args: argparse.Namespace) -> None:
    """The notebook-style padded sdpa loop on each set, and its ratio to the harness rate ``efficiency`` wrote
    (information: unpadding plus precision); short fixed with TF32 on (``--tf32``, CUDA)."""
    from gpu.figures import Figures, earlier, kernel_of, marks
    from transformers import AutoModel

    from harness.models.kernel_calls import watch

    figures = Figures(args.out, getattr(args, "figures_step", "padded"), args.device)
    notebook = AutoModel.from_pretrained(args.model_dir, attn_implementation="sdpa").to(args.device).eval()
    watch(notebook)
    positions = int(getattr(notebook.config, "max_position_embeddings", 8192))
    ids = token_range(notebook)
    with tp.paper_matmul(args.device):
        for name in SETS:
            spec, n = shrunk(name, args.shrink), n_docs(name, args)
            if spec.max_length > positions:
                continue
            before = marks(notebook)
            theirs = notebook_loop(notebook, tp.set_lengths(spec, n, 42).tolist(), spec.batch_size, spec.max_length,
                                   args.device, args.repeats, ids)
            loop_kernel = kernel_of(notebook, since=before)
            figures.add(f"{name} {FP32_WEIGHTS}, notebook-style padded sdpa loop, {n} docs", theirs, "tokens/s",
                        kernel=loop_kernel)
            harness = earlier(args.out, "efficiency", f"{name} {FP32_WEIGHTS}, harness") or {}
            ours, ours_kernel = harness.get("value"), harness.get("kernel") or "?"
            figures.add(f"{name} harness / notebook loop: {ratio_label(ours_kernel, loop_kernel)}",
                        ours / theirs if isinstance(ours, int | float) else "no harness rate written (step "
                        "efficiency)", "x",
                        kernel=f"{ours_kernel} | {loop_kernel}")
    if args.tf32 and args.device.startswith("cuda"):       # not the paper's protocol: what TF32 would give
        _, hf, mode = harness_model(args)
        torch.set_float32_matmul_precision("high")
        before = marks(hf)
        figures.add("short_fixed fp32 weights with TF32 on, harness (not the paper's protocol)",
                    harness_rate(hf, shrunk("short_fixed", args.shrink), args.n_short, mode, args), "tokens/s",
                    kernel=kernel_of(hf, since=before))


def run_bf16(args: argparse.Namespace) -> None:
    """Short fixed in bf16 weights (what the harness runs on CUDA; the rotary frequencies stay fp32): the target."""
    from gpu.figures import Figures, kernel_of, marks

    from harness.models import cast_for_inference

    figures = Figures(args.out, "bf16", args.device)
    _, hf, mode = harness_model(args)
    cast_for_inference(hf, "bf16", "cuda")                  # the weights themselves, on any device (the dry run)
    before = marks(hf)
    figures.add("short_fixed bf16 weights (the harness on CUDA)",
                harness_rate(hf, shrunk("short_fixed", args.shrink), args.n_bf16, mode, args, "bf16"), "tokens/s",
                kernel=kernel_of(hf, since=before), target=(">=", BF16_SHORT_FIXED))


def run_autocast(args: argparse.Namespace) -> None:
    """Short fixed under autocast over fp32 weights (what the harness ran before issue 46), beside bf16 weights."""
    from gpu.figures import Figures, kernel_of, marks, written

    figures = Figures(args.out, getattr(args, "figures_step", "autocast"), args.device)
    _, hf, mode = harness_model(args)
    before = marks(hf)
    rate = harness_rate(hf, shrunk("short_fixed", args.shrink), args.n_bf16, mode, args, "bf16")
    weights = written(args.out, "bf16", "short_fixed bf16 weights")
    figures.add("short_fixed bf16, autocast over fp32 weights", rate, "tokens/s", kernel=kernel_of(hf, since=before),
                note=f"bf16 weights {weights / rate:.2f}x this" if weights else "no bf16-weights rate written")


def run_compile(args: argparse.Namespace) -> None:
    """Short fixed in bf16 weights through a cold torch.compile (compile time shown): the check's last step."""
    from gpu.figures import Figures, kernel_of, marks, written

    from harness.models import cast_for_inference
    from harness.models.compiled import compile_encoder

    figures = Figures(args.out, getattr(args, "figures_step", "compile"), args.device)
    spec = shrunk("short_fixed", args.shrink)
    _, hf, mode = harness_model(args)
    cast_for_inference(hf, "bf16", "cuda")
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 64
    compile_encoder(hf, args.compile_backend)
    t0 = time.perf_counter()
    harness_rate(hf, spec, min(args.n_bf16, spec.batch_size), mode, argparse.Namespace(**{**vars(args), "repeats": 1}),
                 "bf16")
    compile_s = time.perf_counter() - t0
    before = marks(hf)
    compiled = harness_rate(hf, spec, args.n_bf16, mode, args, "bf16")
    eager = written(args.out, "bf16", "short_fixed bf16 weights")
    figures.add(f"short_fixed bf16 weights, torch.compile ({args.compile_backend})", compiled, "tokens/s",
                kernel=kernel_of(hf, since=before),
                note=(f"{compiled / eager:.2f}x eager; " if eager else "") + f"first passes (compiling) {compile_s:.1f} s")
