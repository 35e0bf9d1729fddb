"""Inference throughput as the ModernBERT paper measured it (section 4, Tables 2, 10, 11): synthetic sets of
random ordinary token ids, tokens per second over real tokens, the largest batch that fits, and the device's
dense matmul throughput as the roofline.

Why our own: ModernBERT's efficiency script is a GPU-only one-off; this runs the same protocol on any device,
padded or packed (unpadded), with every number in a result record.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from harness.evaluation.encode import pack_rows, packed_inputs, padded_inputs
from harness.models import autocast, layer_list

if TYPE_CHECKING:
    from harness.families.efficiency import SetSpec

log = logging.getLogger(__name__)


def set_lengths(spec: SetSpec, n_docs: int, seed: int) -> np.ndarray:
    """Document lengths of a set, seeded: ``torch.normal(mean, std).int().clamp(min, max)`` after seeding with
    ``seed``, which with seed 42 and 8,192 documents reproduces Table 10's statistics exactly."""
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
    """Random ordinary token ids in [low, high) for one batch, seeded by (seed, batch index), so a set of
    8,192 x 8,192 tokens never has to sit in memory at once."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + batch_index)
    flat = torch.randint(low, high, (int(sum(lengths)),), generator=g).numpy()
    return np.split(flat, np.cumsum(lengths)[:-1])


def model_inputs(hf_model: Any, seqs: list[np.ndarray], *, mode: str | None, pad_to: int | None, pad_id: int,
                 device: str) -> dict[str, Any]:
    """Forward kwargs for one batch: padded to ``pad_to`` (or the longest), or packed (``mode`` ``varlen``: one
    row + ``cu_seq_lens``; ``mask``: rows of ``pad_to`` tokens with block-diagonal masks)."""
    if mode is None:
        return padded_inputs(seqs, pad_to or max(len(s) for s in seqs), pad_id, device)
    packed = pack_rows([list(s) for s in seqs], None if mode == "varlen" else (pad_to or max(map(len, seqs))), pad_id)
    return packed_inputs(hf_model, packed, mode, device)


# --------------------------------------------------------------------------------------------- FLOPs, roofline
def forward_flops(hf_model: Any, lengths: Sequence[int]) -> float:
    """Dense FLOPs of a forward over sequences of ``lengths`` real tokens: 2 x (linear weights of the encoder
    layers) per token, plus QK^T and AV (4 x context x hidden per token and layer; a local layer's context is
    its window). Embedding lookups, norms and activations are not counted (as usual for model FLOPs)."""
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
    """Measured dense matmul throughput (FLOP/s, best of ``repeats`` after a warm-up) for the dtype the
    model's matmuls run in: the roofline a model's achieved FLOP/s is compared with."""
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    best = float("inf")
    for i in range(repeats + 2):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        if i >= 2:
            best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best


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


# --------------------------------------------------------------------------------------------- timing
@dataclass
class Timing:
    seconds: list[float]           # one per timed pass
    real_tokens: int               # per pass

    @property
    def tokens_per_s(self) -> np.ndarray:
        return self.real_tokens / np.asarray(self.seconds)


def time_passes(run_pass: Callable[[], None], *, repeats: int, warmup: int, device: str) -> list[float]:
    """Seconds of each of ``repeats`` passes after ``warmup`` untimed ones."""
    for _ in range(warmup):
        run_pass()
    out = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        run_pass()
        _sync(device)
        out.append(time.perf_counter() - t0)
    return out


def measure(hf_model: Any, lengths: np.ndarray, *, batch_size: int, mode: str | None, pad_to: int | None,
            pad_id: int, seed: int, id_range: tuple[int, int], precision: str, device: str, repeats: int,
            warmup: int) -> Timing:
    """Time ``repeats`` passes over the set (batches in set order, as the paper's benchmark); the inputs of
    every batch are built once, before timing, so only the model is timed."""
    batches = []
    for b, start in enumerate(range(0, len(lengths), batch_size)):
        seqs = batch_token_ids(lengths[start : start + batch_size].tolist(), seed, b, *id_range)
        with autocast(precision, device):
            batches.append(model_inputs(hf_model, seqs, mode=mode, pad_to=pad_to, pad_id=pad_id, device=device))

    def one_pass() -> None:
        with torch.inference_mode(), autocast(precision, device):
            for kwargs in batches:
                hf_model(**kwargs)

    seconds = time_passes(one_pass, repeats=repeats, warmup=warmup, device=device)
    return Timing(seconds, int(lengths.sum()))


# --------------------------------------------------------------------------------------------- max batch size
@dataclass
class Probe:
    """What one isolated probe needs: the model spec (as a dict), device, precision, the inputs' shape."""

    spec: dict[str, Any]
    device: str
    precision: str
    length: int
    mode: str | None
    memory_bytes: int | None
    id_range: tuple[int, int]
    pad_id: int


def _probe_child(probe: Probe, batch_size: int, queue: Any) -> None:
    """In a fresh process: load the model, run one forward of ``batch_size`` x ``length`` tokens under the memory
    budget; report ok, out-of-memory, or another error."""
    try:
        import transformers.utils.logging as tlog

        from harness.models import ModelSpec, load_sentence_transformer

        tlog.set_verbosity_error()     # a probe's loading chatter (LOAD REPORT, weight bars) is noise: its outcome
        tlog.disable_progress_bar()    # and any error reach the parent through the queue
        model, _ = load_sentence_transformer(ModelSpec(**probe.spec), device=probe.device)
        hf = model[0].auto_model.eval()

        def forward(n: int, length: int) -> None:
            seqs = batch_token_ids([length] * n, 0, 0, *probe.id_range)
            with torch.inference_mode(), autocast(probe.precision, probe.device):
                kwargs = model_inputs(hf, seqs, mode=probe.mode, pad_to=length, pad_id=probe.pad_id,
                                      device=probe.device)
                hf(**kwargs)
            _sync(probe.device)

        forward(1, 8)                                         # threads, kernels and allocator set up
        _limit_memory(probe.device, probe.memory_bytes)
        forward(batch_size, probe.length)
        queue.put(("ok", ""))
    except (MemoryError, torch.OutOfMemoryError) as exc:
        queue.put(("oom", str(exc)[:200]))
    except RuntimeError as exc:
        text = str(exc)
        oom = any(s in text.lower() for s in ("out of memory", "can't allocate", "not enough memory", "bad_alloc"))
        queue.put(("oom" if oom else "error", text[:300]))
    except Exception as exc:   # anything else is a real error, reported to the parent
        queue.put(("error", f"{type(exc).__name__}: {exc}"[:300]))


def _limit_memory(device: str, memory_bytes: int | None) -> None:
    """Cap what the probe may allocate: CUDA through the caching allocator's fraction, CPU through the address
    space limit (so a failed allocation raises instead of waking the kernel's OOM killer)."""
    if memory_bytes is None:
        return
    if device.startswith("cuda"):
        total = torch.cuda.get_device_properties(torch.device(device)).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, memory_bytes / total), torch.device(device))
        return
    import resource

    with open("/proc/self/statm") as fh:
        vm_now = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (vm_now + memory_bytes, resource.getrlimit(resource.RLIMIT_AS)[1]))


def probe_once(probe: Probe, batch_size: int, timeout: float = 1800.0) -> tuple[str, str]:
    """One probe in its own process (nothing it allocates survives it): ("ok" | "oom" | "error", message)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_probe_child, args=(probe, batch_size, queue), daemon=True)
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return "error", f"probe of batch {batch_size} timed out after {timeout:.0f} s"
    try:
        return queue.get(timeout=5)
    except Exception:
        # killed without reporting (e.g. by the kernel's OOM killer): it did not fit
        return "oom", f"probe process exited with code {proc.exitcode}"


def max_batch_size(probe: Probe, *, start: int, limit: int, resolution: int,
                   run: Callable[[Probe, int], tuple[str, str]] = probe_once) -> tuple[int, list[dict[str, Any]]]:
    """The largest batch (<= ``limit``) that runs: double from ``start`` until a probe fails, halve until one
    runs, then bisect to ``resolution``. Returns (size, the probes made); 0 if not even one sequence fits."""
    history: list[dict[str, Any]] = []

    def fits(n: int) -> bool:
        status, msg = run(probe, n)
        history.append({"batch_size": n, "status": status, **({"message": msg} if msg else {})})
        if status == "error":
            from harness.errors import HarnessError

            raise HarnessError(f"max batch size probe of {n} failed with an error that is not out-of-memory: {msg}")
        return status == "ok"

    n = max(1, min(start, limit))
    if fits(n):
        lo, hi = n, None
        while hi is None and lo < limit:
            n = min(lo * 2, limit)
            if fits(n):
                lo = n
            else:
                hi = n
        if hi is None:
            return lo, history
    else:
        lo, hi = 0, n
        while lo == 0 and hi > 1:
            n = hi // 2
            if fits(n):
                lo = n
            else:
                hi = n
        if lo == 0:
            return 0, history
    while hi - lo > resolution:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, history


def probe_for(spec: Any, *, device: str, precision: str, length: int, mode: str | None, memory_gb: float | None,
              id_range: tuple[int, int], pad_id: int) -> Probe:
    return Probe(spec=asdict(spec), device=device, precision=precision, length=length, mode=mode,
                 memory_bytes=None if memory_gb is None else int(memory_gb * 2**30), id_range=id_range, pad_id=pad_id)
