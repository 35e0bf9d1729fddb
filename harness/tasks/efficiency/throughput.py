"""Inference throughput as the paper measured it: tokens per second over real tokens, the largest batch, dense matmul
throughput as the roofline. Our own: ModernBERT's script is a GPU-only one-off; this runs anywhere, padded or packed."""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harness.encoding.packing import pack_rows, packed_inputs, padded_inputs
from harness.models import autocast_for, layer_list
from harness.tasks.efficiency.settings import SetSpec

log = logging.getLogger(__name__)


def set_lengths(spec: SetSpec, n_docs: int, seed: int) -> np.ndarray:
    """A set's document lengths as :class:`SetSpec` draws them (seed 42, 8,192 documents: Table 10 exactly)."""
    if spec.length is not None:
        return np.full(n_docs, spec.length, dtype=np.int64)
    g = torch.Generator().manual_seed(seed)
    drawn = torch.normal(mean=float(spec.mean), std=float(spec.std), size=(n_docs,), generator=g)  # type: ignore[arg-type]
    return drawn.int().clamp(int(spec.min), int(spec.max)).numpy().astype(np.int64)  # type: ignore[arg-type]


def set_stats(lengths: np.ndarray) -> dict[str, float]:
    """Table 10's statistics of a set."""
    return {"total_tokens": int(lengths.sum()), "std": float(lengths.std()), "mean": float(lengths.mean()),
            "longest": int(lengths.max()), "shortest": int(lengths.min()), "n_docs": len(lengths)}


def batch_token_ids(lengths: Sequence[int], seed: int, batch_index: int, low: int, high: int) -> list[np.ndarray]:
    """Random ordinary token ids in [low, high) for one batch, seeded by (seed, batch index): never all in memory."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + batch_index)
    flat = torch.randint(low, high, (int(sum(lengths)),), generator=g).numpy()
    return np.split(flat, np.cumsum(lengths)[:-1])


def model_inputs(hf_model: Any, seqs: list[np.ndarray], *, mode: str | None, pad_to: int | None, pad_id: int,
                 device: str) -> dict[str, Any]:
    """Forward kwargs for one batch: padded to ``pad_to`` (or the longest), or packed (``mode``: varlen or mask)."""
    if mode is None:
        return padded_inputs(seqs, pad_to or max(len(s) for s in seqs), pad_id, device)
    packed = pack_rows([list(s) for s in seqs], None if mode == "varlen" else (pad_to or max(map(len, seqs))), pad_id)
    return packed_inputs(hf_model, packed, mode, device)


# --------------------------------------------------------------------------------------------- FLOPs, roofline
def forward_flops(hf_model: Any, lengths: Sequence[int]) -> float:
    """Dense FLOPs of a forward over sequences of ``lengths`` real tokens: 2 x encoder linear weights per token, plus
    QK^T and AV (4 x context x hidden per token and layer; local: the window); embeddings, norms etc. not counted."""
    owner, attr = layer_list(hf_model)
    layers = getattr(owner, attr)
    hidden = int(hf_model.config.hidden_size)
    lens = np.asarray(lengths, dtype=np.float64)
    total = 0.0
    for layer in layers:
        linear = sum(m.weight.numel() for m in layer.modules() if isinstance(m, torch.nn.Linear))
        window = getattr(getattr(layer, "attn", None), "sliding_window", None)
        ctx = np.minimum(lens, 2 * window - 1) if window else lens   # ModernBERT stores half-window + 1
        total += 2.0 * linear * lens.sum() + 4.0 * hidden * float((lens * ctx).sum())
    return total


def matmul_flops(precision: str, device: str, size: int = 2048, repeats: int = 10) -> float:
    """Measured dense matmul FLOP/s (best of ``repeats``) in the model's matmul dtype: the roofline compared with."""
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    return 2.0 * size**3 / min(time_passes(lambda: a @ b, repeats=repeats, warmup=2, device=device, show=False))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def device_name(device: str) -> str:
    """GPU name, or the CPU model and thread count (what the numbers were measured on)."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), model)
    return f"{model} ({torch.get_num_threads()} threads)"


def machine_facts() -> str:
    """One line for benchmarks: CPU model and threads, the ISA flags that decide bf16 speed, versions, load."""
    from harness.models import cpu_flags
    flags = cpu_flags()
    isa = ",".join(f for f in ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16") if f in flags) or "-"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{device_name('cpu')}; {os.cpu_count()} cpus; isa: {isa}; torch {torch.__version__}; "
            f"python {platform.python_version()}; load average {load}")


#: the float32 matmul precision Table 2 was measured under: torch's default, TF32 off (no efficiency notebook sets it,
#: and MB@815a267:efficiency/notebooks/large/modernbert/modernbert_success.ipynb shows torch's TF32-not-enabled warning)
PAPER_MATMUL_PRECISION = "highest"


@contextlib.contextmanager
def paper_matmul(device: str) -> Iterator[dict[str, Any]]:
    """fp32 matmuls as the paper's notebooks ran them, for the block; yields what a record says of it."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(PAPER_MATMUL_PRECISION)
    try:
        yield {"float32_matmul_precision": PAPER_MATMUL_PRECISION,
               **({"tf32": bool(torch.backends.cuda.matmul.allow_tf32)} if device.startswith("cuda") else {})}
    finally:
        torch.set_float32_matmul_precision(before)


# --------------------------------------------------------------------------------------------- timing
@dataclass
class Timing:
    seconds: list[float]           # one per timed pass
    real_tokens: int               # per pass

    @property
    def tokens_per_s(self) -> np.ndarray:
        return self.real_tokens / np.asarray(self.seconds)


def time_passes(run_pass: Callable[[], None], *, repeats: int, warmup: int, device: str,
                desc: str = "timed passes", show: bool = True, budget_s: float | None = None) -> list[float]:
    """Seconds of each of ``repeats`` timed passes after ``warmup`` ones, within ``budget_s`` if given."""
    from harness.core.console import Progress
    out: list[float] = []
    t_start = time.perf_counter()
    with Progress(warmup + repeats, desc, "passes", show=show, each_update_is_a_step=True) as bar:
        for i in range(warmup + repeats):
            spent = time.perf_counter() - t_start
            if budget_s is not None and out and spent + spent / i > budget_s:
                bar.stop(f"{len(out)} of {repeats} timed passes fit in the {budget_s:g} s budget per set")
                break
            _sync(device)
            t0 = time.perf_counter()
            run_pass()
            _sync(device)
            seconds = time.perf_counter() - t0
            if i >= warmup:
                out.append(seconds)
            spent, todo = time.perf_counter() - t_start, warmup + repeats - i - 1
            mean = spent / (i + 1)      # the passes the rule above will still start (a timed one always runs)
            more = todo if budget_s is None else min(todo, max(int((budget_s - spent) // mean), 0 if out else 1))
            left = more * mean
            bar.update(1, f"{'warm-up' if i < warmup else 'timed'} {seconds:.1f} s", left)
    return out


def measure(hf_model: Any, lengths: np.ndarray, *, batch_size: int, mode: str | None, pad_to: int | None,
            pad_id: int, seed: int, id_range: tuple[int, int], precision: str, device: str, repeats: int,
            warmup: int, desc: str = "timed passes", show: bool = True, budget_s: float | None = None) -> Timing:
    """Time ``repeats`` passes over the set in order (as the paper); every batch's inputs are built before timing."""
    batches = []
    for b, start in enumerate(range(0, len(lengths), batch_size)):
        seqs = batch_token_ids(lengths[start : start + batch_size].tolist(), seed, b, *id_range)
        with autocast_for(hf_model, precision, device):
            batches.append(model_inputs(hf_model, seqs, mode=mode, pad_to=pad_to, pad_id=pad_id, device=device))

    def one_pass() -> None:
        with torch.inference_mode(), autocast_for(hf_model, precision, device):
            for kwargs in batches:
                hf_model(**kwargs)

    seconds = time_passes(one_pass, repeats=repeats, warmup=warmup, device=device, desc=desc, show=show,
                          budget_s=budget_s)
    return Timing(seconds, int(lengths.sum()))
