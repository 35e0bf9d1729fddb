"""The largest batch that runs (Table 2's BS columns): each probe one forward in its own process under a memory
budget, so an out-of-memory probe never poisons the next; on a CPU a time budget too (a lower bound)."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queues
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from harness.core.console import step
from harness.core.errors import HarnessError
from harness.models import autocast_for, cast_for_inference
from harness.tasks.efficiency.throughput import _sync, batch_token_ids, model_inputs

#: how long a probe may take to start (spawn, imports, model load) before it counts as an error
START_TIMEOUT = 1800.0


@dataclass
class Probe:
    """What one isolated probe needs: model spec, device, precision, input shape, memory and time budgets."""

    spec: dict[str, Any]
    device: str
    precision: str
    length: int
    mode: str | None
    memory_bytes: int | None
    id_range: tuple[int, int]
    pad_id: int
    seconds: float | None = None


@dataclass
class ProbeOutcome:
    """ok | oom (out of memory) | slow (stopped at the time budget) | error, with what was measured."""

    status: str
    message: str = ""
    seconds: float | None = None       # the forward's wall time (for "slow": when it was stopped)
    peak_bytes: int | None = None      # the probe process' peak memory (CUDA: peak allocated)

    def entry(self, batch_size: int) -> dict[str, Any]:
        return {"batch_size": batch_size, **{k: v for k, v in asdict(self).items() if v not in (None, "")}}


@dataclass
class SearchResult:
    size: int                          # the largest batch that ran (0: not even one sequence)
    probes: list[dict[str, Any]] = field(default_factory=list)
    lower_bound: bool = False          # the search stopped at a probe's time budget: the true size may be larger
    stopped: str = ""                  # why it stopped early


def probe_for(spec: Any, *, device: str, precision: str, length: int, mode: str | None, memory_gb: float | None,
              id_range: tuple[int, int], pad_id: int, seconds: float | None = None) -> Probe:
    return Probe(spec=asdict(spec), device=device, precision=precision, length=length, mode=mode,
                 memory_bytes=None if memory_gb is None else int(memory_gb * 2**30), id_range=id_range,
                 pad_id=pad_id, seconds=seconds)


def start_within(batch_size: int, length: int, tokens_per_s: float | None, seconds: float | None) -> int:
    """``batch_size`` halved until a forward takes at most half the time budget (none, as on a GPU: unchanged)."""
    n = max(1, batch_size)
    if seconds is None or not tokens_per_s or tokens_per_s <= 0:
        return n
    while n > 1 and n * length / tokens_per_s > seconds / 2:
        n //= 2
    return n


# --------------------------------------------------------------------------------------------- one probe
def _peak_bytes(device: str) -> int:
    if device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated(torch.device(device)))
    import resource
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024   # Linux: KiB


def _probe_child(probe: Probe, batch_size: int, out: Any) -> None:
    """In a fresh process: one forward of ``batch_size`` x ``length`` tokens under the memory budget."""
    try:
        import transformers.utils.logging as tlog

        from harness.models import ModelSpec, load_sentence_transformer
        tlog.set_verbosity_error()     # a probe's loading chatter (LOAD REPORT, weight bars) is noise: its outcome
        tlog.disable_progress_bar()    # and any error reach the parent through the queue
        model, _ = load_sentence_transformer(ModelSpec(**probe.spec), device=probe.device)
        hf = model[0].auto_model.eval()
        cast_for_inference(hf, probe.precision, probe.device)   # as the measured model runs (bf16 weights on CUDA)

        def forward(n: int, length: int) -> None:
            seqs = batch_token_ids([length] * n, 0, 0, *probe.id_range)
            with torch.inference_mode(), autocast_for(hf, probe.precision, probe.device):
                kwargs = model_inputs(hf, seqs, mode=probe.mode, pad_to=length, pad_id=probe.pad_id,
                                      device=probe.device)
                hf(**kwargs)
            _sync(probe.device)

        forward(1, 8)                                         # threads, kernels and allocator set up
        _limit_memory(probe.device, probe.memory_bytes)
        out.put(ProbeOutcome("ready"))
        t0 = time.perf_counter()
        forward(batch_size, probe.length)
        out.put(ProbeOutcome("ok", "", time.perf_counter() - t0, _peak_bytes(probe.device)))
    except (MemoryError, torch.OutOfMemoryError) as exc:
        out.put(ProbeOutcome("oom", str(exc)[:200], peak_bytes=_peak_bytes(probe.device)))
    except RuntimeError as exc:
        text = str(exc)
        oom = any(s in text.lower() for s in ("out of memory", "can't allocate", "not enough memory", "bad_alloc"))
        out.put(ProbeOutcome("oom" if oom else "error", text[:300], peak_bytes=_peak_bytes(probe.device)))
    except Exception as exc:   # anything else is a real error, reported to the parent
        out.put(ProbeOutcome("error", f"{type(exc).__name__}: {exc}"[:300]))


def _limit_memory(device: str, memory_bytes: int | None) -> None:
    """Cap the probe's memory (CUDA: the allocator's fraction; CPU: the address space, so it raises, not OOM-kills)."""
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


def _receive(out: Any, proc: Any, timeout: float) -> ProbeOutcome | None:
    """The child's next report; None after ``timeout``. A child dead without reporting (OOM killer) did not fit."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return out.get(timeout=max(0.01, min(1.0, deadline - time.monotonic())))
        except queues.Empty:
            if not proc.is_alive():
                try:
                    return out.get(timeout=1.0)
                except queues.Empty:
                    return ProbeOutcome("oom", f"probe process exited with code {proc.exitcode}")
            if time.monotonic() >= deadline:
                return None


def probe_once(probe: Probe, batch_size: int) -> ProbeOutcome:
    """One probe in its own process; its forward is stopped at ``probe.seconds`` (status "slow")."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_probe_child, args=(probe, batch_size, out), daemon=True)
    proc.start()
    try:
        got = _receive(out, proc, START_TIMEOUT)
        if got is None:
            return ProbeOutcome("error", f"probe of batch {batch_size} did not start within {START_TIMEOUT:.0f} s")
        if got.status != "ready":
            return got
        t0 = time.perf_counter()
        got = _receive(out, proc, probe.seconds if probe.seconds is not None else START_TIMEOUT)
        if got is not None:
            return got
        if probe.seconds is None:
            return ProbeOutcome("error", f"probe of batch {batch_size} timed out after {START_TIMEOUT:.0f} s")
        return ProbeOutcome("slow", f"stopped at the {probe.seconds:g} s budget per probe", time.perf_counter() - t0)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()


# --------------------------------------------------------------------------------------------- the search
class _Search:
    """The bracket [lo, hi): ``lo`` the largest batch that ran, ``hi`` the smallest that ran out of memory."""

    def __init__(self, probe: Probe, run: Callable[[Probe, int], ProbeOutcome], label: str, show: bool) -> None:
        self.probe, self.run, self.label, self.show = probe, run, label, show
        self.lo, self.hi = 0, None
        self.history: list[dict[str, Any]] = []
        self.stopped = ""

    def fits(self, n: int) -> str:
        """Probe batch ``n``, narrow the bracket, say so in one line; the probe's status."""
        with step(f"{self.label}: probe batch {n}", show=self.show) as st:
            got = self.run(self.probe, n)
            self.history.append(got.entry(n))
            if got.status == "error":
                raise HarnessError(f"max batch size probe of {n} failed with an error that is not out-of-memory: "
                                   f"{got.message}")
            if got.status == "ok":
                self.lo = max(self.lo, n)
            elif got.status == "oom":
                self.hi = n if self.hi is None else min(self.hi, n)
            elif not self.stopped:
                budget = getattr(self.probe, "seconds", None)
                self.stopped = f"the probe of batch {n} reached the time budget per probe ({budget} s)"
            st.outcome = self.describe(got)
        return got.status

    def describe(self, got: ProbeOutcome) -> str:
        what = {"ok": "fits", "oom": "out of memory", "slow": "over the time budget"}[got.status]
        facts = [f"forward {got.seconds:.1f} s" if got.seconds is not None else "",
                 f"peak {got.peak_bytes / 2**30:.2f} GiB" if got.peak_bytes else ""]
        bracket = f"[{self.lo}, {'?' if self.hi is None else self.hi})"
        then = ""
        if got.status == "slow":
            then = "; halving until one runs in time" if self.lo == 0 else f"; stopping: {self.lo} is a lower bound"
        return ", ".join([what, *[f for f in facts if f]]) + f"; bracket {bracket}{then}"


def max_batch_size(probe: Probe, *, start: int, limit: int, resolution: int,
                   run: Callable[[Probe, int], ProbeOutcome] = probe_once, label: str = "max batch",
                   show: bool = True) -> SearchResult:
    """The largest batch (<= ``limit``) that runs: double, halve, bisect; 0 if one sequence won't fit."""
    s = _Search(probe, run, label, show)
    n = max(1, min(start, limit))
    status = s.fits(n)
    while status == "ok" and s.hi is None and s.lo < limit:
        status = s.fits(min(s.lo * 2, limit))
    while s.lo == 0 and n > 1:
        n //= 2
        s.fits(n)
    while not s.stopped and s.lo and s.hi is not None and s.hi - s.lo > resolution:
        s.fits((s.lo + s.hi) // 2)
    return SearchResult(s.lo, s.history, lower_bound=bool(s.stopped), stopped=s.stopped)
