"""``task=efficiency``'s measurement, from the run's plan: the model loaded once, the roofline, then each synthetic
set's timed passes and (``task.max_batch.search``) the largest batch that fits; one record per set."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core import results
from harness.core.console import step
from harness.core.errors import HarnessError
from harness.core.results import ResultRecord
from harness.models import usable_positions
from harness.tasks.runplan import Cell, RunPlan

if TYPE_CHECKING:
    from harness.tasks.efficiency.max_batch import SearchResult
    from harness.tasks.efficiency.settings import SetSpec

log = logging.getLogger(__name__)


def attention_facts(requested: str, hf: Any, since: tuple[dict[str, int], dict[str, int]] | None = None
                    ) -> dict[str, Any]:
    """Which attention ran, on which kernel and in which dtype: the calls counted since the mark ``since``."""
    from harness.models.kernel_calls import observed_kernel, watch
    calls, dtypes = watch(hf).since(since)
    return {"attn_implementation": hf.config._attn_implementation, "attn_requested": requested,
            "attention_kernel": observed_kernel(calls), "attention_calls": calls,
            "attention_dtype": observed_kernel(dtypes)}


def run(plan: RunPlan, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
    """Table 2's fp32 matmuls as the paper's notebooks ran them (:func:`~.throughput.paper_matmul`), around it all."""
    from harness.encoding.encode import pack_mode
    from harness.models import cast_for_inference, load_sentence_transformer
    from harness.models.compiled import compile_encoder, wanted
    from harness.tasks.efficiency import throughput as tp
    with tp.paper_matmul(plan.device) as matmul:
        with step(f"efficiency: loading {plan.model.name} on {plan.device}"):
            model, block = load_sentence_transformer(plan.model, device=plan.device)
        hf = model[0].auto_model.eval()
        runs = cast_for_inference(hf, plan.precision, plan.device)      # CUDA bf16/fp16: the weights themselves
        compiled = wanted(plan.config, plan.device)
        if compiled:
            compile_encoder(hf)
        mode = pack_mode(model, plan.settings.unpad, plan.device)
        roofline = None
        if plan.settings.roofline:
            n = plan.settings.roofline_size
            with step(f"efficiency: roofline, {n}x{n} {plan.precision} matmul") as done:
                roofline = tp.matmul_flops(plan.precision, plan.device, n)
                done.outcome = f"{roofline / 1e9:,.1f} GFLOP/s"
        found: dict[int, SearchResult] = {}              # max length -> its max-batch search
        facts = {**matmul, "runs": runs, "compiled": compiled}
        for cell in todo:
            try:
                yield measure_cell(plan, cell, model, hf, block, mode, roofline, found, facts)
            except HarnessError as exc:
                log.error("efficiency/%s failed: %s", cell.dataset, exc)
                yield plan.header.failed(cell, exc, model=block, split="synthetic")

def id_range(plan: RunPlan, hf: Any) -> tuple[int, int]:
    """[token_low, token_high) as configured, cut to the vocabulary (a tiny test model has a small one)."""
    s = plan.settings
    vocab = int(hf.config.vocab_size)
    return min(s.token_low, max(vocab - 1, 0)), min(s.token_high, vocab)

def measure_cell(plan: RunPlan, cell: Cell, model: Any, hf: Any, block: dict[str, Any], mode: str | None,
                 roofline: float | None, found: dict[int, SearchResult], facts: dict[str, Any]) -> ResultRecord:
    from harness.models.kernel_calls import watch
    from harness.tasks.efficiency import throughput as tp
    s = plan.settings
    spec: SetSpec = cell.payload
    lengths = tp.set_lengths(spec, s.n_docs, s.seed)
    positions = usable_positions(hf)   # None: the config does not say, nothing is skipped
    before = watch(hf).mark()
    base = {"device": plan.device, "device_name": tp.device_name(plan.device), "dtype": plan.precision,
            **attention_facts(plan.model.attn_implementation, hf, before), "set": asdict(spec),
            "set_stats": tp.set_stats(lengths), "positions": positions, **facts}
    if positions is not None and spec.max_length > positions:
        reason = (f"the model's positions stop at {positions}; set {cell.dataset!r} has sequences of up to "
                  f"{spec.max_length} tokens")
        log.info("efficiency/%s skipped: %s", cell.dataset, reason)
        return plan.header.record(cell, model=block, split="synthetic", metrics={}, status=results.STATUS_SKIPPED,
                               error=reason, details=base)
    pad_id = model[0].tokenizer.pad_token_id or 0
    ids = id_range(plan, hf)
    pad_to = spec.max_length if s.pad_to == "set_max" else None
    t0 = time.perf_counter()
    timing = tp.measure(hf, lengths, batch_size=spec.batch_size, mode=mode, pad_to=pad_to, pad_id=pad_id,
                        seed=s.seed, id_range=ids, precision=plan.precision, device=plan.device,
                        repeats=s.repeats, warmup=s.warmup, desc=f"efficiency/{cell.dataset}",
                        budget_s=None if plan.device.startswith("cuda") else s.set_seconds)
    measure_s = time.perf_counter() - t0
    tps = timing.tokens_per_s
    flops = tp.forward_flops(hf, lengths.tolist())
    metrics: dict[str, float] = {
        "tokens_per_s": float(tps.mean()), "tokens_per_s_std": float(tps.std()),
        "seconds_mean": float(np.mean(timing.seconds)), "seconds_std": float(np.std(timing.seconds)),
        "model_flops_per_s": flops / float(np.mean(timing.seconds)),
    }
    details = {**base, **attention_facts(plan.model.attn_implementation, hf, before), "unpadded": mode is not None, "pack_mode": mode, "pad_to": s.pad_to,
               "batch_size": spec.batch_size, "n_docs": s.n_docs, "repeats": s.repeats, "warmup": s.warmup,
               "timed_passes": len(timing.seconds),
               "token_ids": list(ids), "real_tokens_per_pass": timing.real_tokens, "pass_seconds": timing.seconds,
               "flops_per_token": flops / timing.real_tokens}
    if roofline:
        metrics["roofline_fraction"] = metrics["model_flops_per_s"] / roofline
        details["matmul_flops_per_s"] = roofline
        details["roofline"] = f"{plan.settings.roofline_size}x{plan.settings.roofline_size} {plan.precision} matmul"
    timings = {"measure_s": measure_s}
    if s.max_batch.search:
        t1 = time.perf_counter()
        search = max_batch(plan, spec, mode, ids, pad_id, found, metrics["tokens_per_s"])
        metrics["max_batch_size"] = float(search.size)
        details["max_batch"] = {**asdict(s.max_batch), "probes": search.probes,
                                "lower_bound": search.lower_bound, "stopped": search.stopped or None,
                                "start": search.probes[0]["batch_size"] if search.probes else None,
                                "inputs": f"batches of {spec.max_length}-token sequences"}
        timings["max_batch_s"] = time.perf_counter() - t1
    log.info("efficiency/%s: %.0f +- %.0f tokens/s (%s, %s)", cell.dataset, metrics["tokens_per_s"],
             metrics["tokens_per_s_std"], plan.precision, "unpadded" if mode else "padded")
    return plan.header.record(cell, model=block, split="synthetic", metrics=metrics, details=details,
                           timings=timings, data_fingerprint=cell.spec)

def max_batch(plan: RunPlan, spec: SetSpec, mode: str | None, ids: tuple[int, int], pad_id: int,
              found: dict[int, SearchResult], tokens_per_s: float) -> SearchResult:
    """The largest batch of the set's longest sequences that fits (a CPU probe: at most ``probe_seconds``)."""
    from harness.tasks.efficiency import max_batch as mbs
    if spec.max_length in found:
        return found[spec.max_length]
    mb = plan.settings.max_batch
    probe = mbs.probe_for(plan.model, device=plan.device, precision=plan.precision, length=spec.max_length,
                          mode=mode, memory_gb=mb.memory_gb if mb.memory_gb is not None else default_memory_gb(plan),
                          id_range=ids, pad_id=pad_id,
                          seconds=None if plan.device.startswith("cuda") else mb.probe_seconds)
    start = mbs.start_within(spec.batch_size, spec.max_length, tokens_per_s, probe.seconds)
    found[spec.max_length] = mbs.max_batch_size(probe, start=start, limit=mb.limit,
                                                resolution=mb.resolution, run=mbs.probe_once,
                                                label=f"max batch at {spec.max_length} tokens")
    return found[spec.max_length]

def default_memory_gb(plan: RunPlan) -> float | None:
    """CPU: 80% of the memory available now (a probe that does not fit fails, not the machine); CUDA: None."""
    if plan.device.startswith("cuda"):
        return None
    try:
        with open("/proc/meminfo") as fh:
            kb = next(int(line.split()[1]) for line in fh if line.startswith("MemAvailable:"))
        return 0.8 * kb / 2**20
    except (OSError, StopIteration):
        return None
