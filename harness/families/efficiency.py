"""``task=efficiency``: inference throughput as the ModernBERT paper measured it (section 4; Tables 2, 10, 11).

Four synthetic sets of random ordinary token ids (8,192 documents each: fixed 512, normal(256, 64) in [32, 512],
fixed 8,192, normal(4,096, 1,024) in [32, 8,192]); tokens per second over real tokens, mean and std over 10
timed passes after a warm-up; the largest batch that fits (each probe in its own process); the device's dense
matmul throughput as the roofline and the model's achieved fraction of it. One record per (model, set).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from harness import results
from harness.console import step
from harness.errors import HarnessError
from harness.evaluation.throughput import SetSpec
from harness.families.base import Cell, Family
from harness.models import usable_positions
from harness.results import ResultRecord
from harness.typed import at_least, build, choices, count, excluded, nonempty, positive
from harness.work import Work

if TYPE_CHECKING:
    from harness.evaluation.max_batch import SearchResult

log = logging.getLogger(__name__)

SETS = ("short_fixed", "short_variable", "long_fixed", "long_variable")
#: Table 2's columns: max batch size, fixed-length and variable-length throughput (thousands of tokens/s)


@dataclass(kw_only=True)
class MaxBatchSettings:
    search: bool                      # find the largest batch that fits (one process per probe)
    limit: int = count()              # never probe above this (ModernBERT's script stopped at 4,096)
    resolution: int = count()         # stop bisecting when the bracket is this narrow
    #: budget per probe; null: the device's memory (CPU: 80% of MemAvailable)
    memory_gb: float | None = positive(null="the device's memory")
    #: CPU: time budget of a probe's forward (default in conf/task/efficiency.yaml)
    probe_seconds: float | None = positive(null="no time budget")


@dataclass(kw_only=True)
class EfficiencySettings:
    name: str
    datasets: list[str] = nonempty("sets", excluded="which sets to measure: each one is its own cell of the same run")
    sets: dict[str, Any] = excluded("each cell's own set definition is part of its data spec")
    n_docs: int = count()
    repeats: int = count()
    warmup: int = at_least(0)
    seed: int
    token_low: int = at_least(0)
    token_high: int = count()
    unpad: str = choices("auto", "on", "off")
    pad_to: str = choices("set_max", "longest")
    max_batch: MaxBatchSettings
    #: CPU: time budget of a set's passes (default in conf/task/efficiency.yaml)
    set_seconds: float | None = positive(null="no time budget")
    roofline: bool
    roofline_size: int = count()
    precision: str | None = choices(None, "auto", "fp32", "bf16", "fp16")


def attention_facts(requested: str, hf: Any, since: dict[str, int] | None = None) -> dict[str, Any]:
    """Which attention ran (``auto`` stays the config value; what it resolved to is here) and on which kernel: the
    calls counted into each kernel since the counts ``since`` (:mod:`harness.models.kernel_calls`)."""
    from harness.models.kernel_calls import observed_kernel, watch

    counts = watch(hf).snapshot()
    calls = {k: n - (since or {}).get(k, 0) for k, n in counts.items() if n - (since or {}).get(k, 0)}
    return {"attn_implementation": hf.config._attn_implementation, "attn_requested": requested,
            "attention_kernel": observed_kernel(calls), "attention_calls": calls}


class EfficiencyFamily(Family):
    settings_class = EfficiencySettings

    @cached_property
    def precision(self) -> str:
        """``task.precision`` (the paper's fp32 by default) where set, else the top-level ``precision``."""
        from harness.models import resolve_precision

        chosen = self.settings.precision
        return resolve_precision(str(self.cfg.precision if chosen is None else chosen), self.device)

    # ---------------------------------------------------------------------------------------- leaderboard
    # ---------------------------------------------------------------------------------------- planning
    def set_spec(self, name: str) -> SetSpec:
        if name not in self.settings.sets:
            from harness.errors import unknown_name

            raise unknown_name("synthetic set", name, self.settings.sets,
                               "Define it under task.sets (length, or mean/std/min/max, and batch_size).")
        return build(SetSpec, self.settings.sets[name], f"task.sets.{name}")

    def work(self, mode: str, skip: Sequence[str] = ()) -> Work:
        """The tokens of every set's timed and warm-up passes."""
        s, w = self.settings, Work()
        for name in s.datasets:
            spec = self.set_spec(name)
            length = float(spec.length if spec.length is not None else spec.mean)   # type: ignore[arg-type]
            w.add_tokens(float(s.n_docs) * length * (s.repeats + s.warmup), length)
        return w

    def hardware(self) -> dict[str, Any]:
        """Part of the run identity: throughput depends on the device (excluded from other families' ids)."""
        from harness.evaluation import throughput as tp

        return {"device": self.device, "name": tp.device_name(self.device)}

    @property
    def compiled(self) -> bool:
        """``compile=true`` on a CUDA device: the encoder's forward through torch.compile (CPU: ignored)."""
        return bool(self.cfg.get("compile")) and self.device.startswith("cuda")

    def cells(self) -> list[Cell]:
        s = self.settings
        if s.token_low >= s.token_high:   # each bound alone is typed (harness.typed.count, at_least)
            raise HarnessError(f"task.token_low={s.token_low} must be below task.token_high={s.token_high}: token "
                               "ids are drawn from [token_low, token_high)")
        # compile changes the speed, this task's number: in the identity where it is on (off keeps the ids as before)
        ident = self.identity(replace={"hardware": self.hardware(), **({"compile": True} if self.compiled else {})})
        rid = results.run_id(ident, {"prec": self.precision, "n": s.n_docs})
        plan_key = results.stable_hash(self.identity())   # what a planner on another machine computes too
        cells = []
        for name in s.datasets:
            spec = self.set_spec(name)
            data = {"set": asdict(spec), "n_docs": s.n_docs, "seed": s.seed, "ids": [s.token_low, s.token_high]}
            cells.append(Cell(name, rid, ident, results.stable_hash(data), spec, plan_key=plan_key))
        return cells

    def hyperparameters(self) -> dict[str, Any]:
        s = self.settings
        return {"precision": self.precision, "n_docs": s.n_docs, "repeats": s.repeats, "warmup": s.warmup,
                "unpad": s.unpad, "pad_to": s.pad_to, "seed": s.seed}

    # ---------------------------------------------------------------------------------------- running
    def run(self, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
        from harness.evaluation import throughput as tp

        with tp.paper_matmul(self.device) as matmul:
            yield from self._run(todo, matmul)

    def _run(self, todo: Sequence[Cell], matmul: dict[str, Any]) -> Iterator[ResultRecord]:
        from harness.evaluation import throughput as tp
        from harness.evaluation.encode import pack_mode
        from harness.models import cast_for_inference, load_sentence_transformer
        from harness.models.compiled import compile_encoder

        with step(f"efficiency: loading {self.spec.name} on {self.device}"):
            model, block = load_sentence_transformer(self.spec, device=self.device)
        hf = model[0].auto_model.eval()
        runs = cast_for_inference(hf, self.precision, self.device)      # CUDA bf16/fp16: the weights themselves
        if self.compiled:
            compile_encoder(hf)
        mode = pack_mode(model, self.settings.unpad, self.device)
        roofline = None
        if self.settings.roofline:
            n = self.settings.roofline_size
            with step(f"efficiency: roofline, {n}x{n} {self.precision} matmul") as done:
                roofline = tp.matmul_flops(self.precision, self.device, n)
                done.outcome = f"{roofline / 1e9:,.1f} GFLOP/s"
        found: dict[int, SearchResult] = {}              # max length -> its max-batch search
        facts = {**matmul, "runs": runs, "compiled": self.compiled}
        for cell in todo:
            try:
                yield self.measure_cell(cell, model, hf, block, mode, roofline, found, facts)
            except HarnessError as exc:
                log.error("efficiency/%s failed: %s", cell.dataset, exc)
                yield self.failed(cell, exc, model=block, split="synthetic")

    def id_range(self, hf: Any) -> tuple[int, int]:
        """[token_low, token_high) as configured, cut to the vocabulary (a tiny test model has a small one)."""
        s = self.settings
        vocab = int(hf.config.vocab_size)
        return min(s.token_low, max(vocab - 1, 0)), min(s.token_high, vocab)

    def measure_cell(self, cell: Cell, model: Any, hf: Any, block: dict[str, Any], mode: str | None,
                     roofline: float | None, found: dict[int, SearchResult], facts: dict[str, Any]) -> ResultRecord:
        from harness.evaluation import throughput as tp
        from harness.models.kernel_calls import watch

        s = self.settings
        spec: SetSpec = cell.payload
        lengths = tp.set_lengths(spec, s.n_docs, s.seed)
        positions = usable_positions(hf)   # None: the config does not say, nothing is skipped
        before = watch(hf).snapshot()
        base = {"device": self.device, "device_name": tp.device_name(self.device), "dtype": self.precision,
                **attention_facts(self.spec.attn_implementation, hf, before), "set": asdict(spec),
                "set_stats": tp.set_stats(lengths), "positions": positions, **facts}
        if positions is not None and spec.max_length > positions:
            reason = (f"the model's positions stop at {positions}; set {cell.dataset!r} has sequences of up to "
                      f"{spec.max_length} tokens")
            log.info("efficiency/%s skipped: %s", cell.dataset, reason)
            return self.new_record(cell, model=block, split="synthetic", metrics={}, status=results.STATUS_SKIPPED,
                                   error=reason, details=base)
        pad_id = model[0].tokenizer.pad_token_id or 0
        ids = self.id_range(hf)
        pad_to = spec.max_length if s.pad_to == "set_max" else None
        t0 = time.perf_counter()
        timing = tp.measure(hf, lengths, batch_size=spec.batch_size, mode=mode, pad_to=pad_to, pad_id=pad_id,
                            seed=s.seed, id_range=ids, precision=self.precision, device=self.device,
                            repeats=s.repeats, warmup=s.warmup, desc=f"efficiency/{cell.dataset}",
                            budget_s=None if self.device.startswith("cuda") else s.set_seconds)
        measure_s = time.perf_counter() - t0
        tps = timing.tokens_per_s
        flops = tp.forward_flops(hf, lengths.tolist())
        metrics: dict[str, float] = {
            "tokens_per_s": float(tps.mean()), "tokens_per_s_std": float(tps.std()),
            "seconds_mean": float(np.mean(timing.seconds)), "seconds_std": float(np.std(timing.seconds)),
            "model_flops_per_s": flops / float(np.mean(timing.seconds)),
        }
        details = {**base, **attention_facts(self.spec.attn_implementation, hf, before), "unpadded": mode is not None, "pack_mode": mode, "pad_to": s.pad_to,
                   "batch_size": spec.batch_size, "n_docs": s.n_docs, "repeats": s.repeats, "warmup": s.warmup,
                   "timed_passes": len(timing.seconds),
                   "token_ids": list(ids), "real_tokens_per_pass": timing.real_tokens, "pass_seconds": timing.seconds,
                   "flops_per_token": flops / timing.real_tokens}
        if roofline:
            metrics["roofline_fraction"] = metrics["model_flops_per_s"] / roofline
            details["matmul_flops_per_s"] = roofline
            details["roofline"] = f"{self.settings.roofline_size}x{self.settings.roofline_size} {self.precision} matmul"
        timings = {"measure_s": measure_s}
        if s.max_batch.search:
            t1 = time.perf_counter()
            search = self.max_batch(spec, mode, ids, pad_id, found, metrics["tokens_per_s"])
            metrics["max_batch_size"] = float(search.size)
            details["max_batch"] = {**asdict(s.max_batch), "probes": search.probes,
                                    "lower_bound": search.lower_bound, "stopped": search.stopped or None,
                                    "start": search.probes[0]["batch_size"] if search.probes else None,
                                    "inputs": f"batches of {spec.max_length}-token sequences"}
            timings["max_batch_s"] = time.perf_counter() - t1
        log.info("efficiency/%s: %.0f +- %.0f tokens/s (%s, %s)", cell.dataset, metrics["tokens_per_s"],
                 metrics["tokens_per_s_std"], self.precision, "unpadded" if mode else "padded")
        return self.new_record(cell, model=block, split="synthetic", metrics=metrics, details=details,
                               timings=timings, hyperparameters=self.hyperparameters(), data_fingerprint=cell.spec)

    def max_batch(self, spec: SetSpec, mode: str | None, ids: tuple[int, int], pad_id: int,
                  found: dict[int, SearchResult], tokens_per_s: float) -> SearchResult:
        """The largest batch of the set's longest sequences that fits (sets of equal length share the search).
        On a CPU each probe's forward stops at ``task.max_batch.probe_seconds`` and the search starts where the
        measured throughput says a forward takes half that; on a GPU it starts at the set's batch size and every
        probe runs to the end."""
        from harness.evaluation import max_batch as mbs

        if spec.max_length in found:
            return found[spec.max_length]
        mb = self.settings.max_batch
        probe = mbs.probe_for(self.spec, device=self.device, precision=self.precision, length=spec.max_length,
                              mode=mode, memory_gb=mb.memory_gb if mb.memory_gb is not None else self.default_memory_gb(),
                              id_range=ids, pad_id=pad_id,
                              seconds=None if self.device.startswith("cuda") else mb.probe_seconds)
        start = mbs.start_within(spec.batch_size, spec.max_length, tokens_per_s, probe.seconds)
        found[spec.max_length] = mbs.max_batch_size(probe, start=start, limit=mb.limit,
                                                    resolution=mb.resolution, run=mbs.probe_once,
                                                    label=f"max batch at {spec.max_length} tokens")
        return found[spec.max_length]

    def default_memory_gb(self) -> float | None:
        """CUDA: none (the device's memory is the limit). CPU: 80% of the memory available now, so a probe that
        does not fit fails inside its own process instead of pushing the machine into swap or the OOM killer."""
        if self.device.startswith("cuda"):
            return None
        try:
            with open("/proc/meminfo") as fh:
                kb = next(int(line.split()[1]) for line in fh if line.startswith("MemAvailable:"))
            return 0.8 * kb / 2**20
        except (OSError, StopIteration):
            return None
