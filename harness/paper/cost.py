"""The graph's cost model (``conf/paper/cost.yaml``): tokens each job processes, over a throughput for the model.

GPU-hours = (training tokens x ``train_factor`` + evaluation tokens) / (tokens/s x the GPU's ``gpu_speed``) / 3600.
Tokens come from the job's own config (datasets, epochs, samples, lengths) and the sizes in the cost file; the
throughput from the paper's Table 2 for the model's family and size, or from this results folder's own
``task=efficiency`` records of the model once there are any. Pure: reads config, YAML, CSV and records.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from harness import results

LONG = 512    # documents past this many tokens use the long-document throughput


@dataclass
class Work:
    """Tokens a job processes: training tokens (forward + backward), short and long evaluation tokens."""

    train: float = 0.0
    short: float = 0.0
    long: float = 0.0

    def __iadd__(self, other: Work) -> Work:
        self.train, self.short, self.long = self.train + other.train, self.short + other.short, self.long + other.long
        return self


@dataclass(frozen=True)
class Throughput:
    """Tokens/s of the model on short (<= 512) and long inputs, and where the figures come from."""

    short: float
    long: float
    source: str
    measured: bool = False


@cache
def cost_data() -> dict[str, Any]:
    from omegaconf import OmegaConf

    out = OmegaConf.to_container(OmegaConf.load(Path(str(resources.files("conf"))) / "paper" / "cost.yaml"))
    assert isinstance(out, dict)
    return out


def _docs(size: list[float], length_cap: int, per_word: bool) -> Work:
    """Evaluation tokens of one dataset: its documents (capped at ``length_cap``) and its queries."""
    c = cost_data()
    docs, queries, length = size
    tokens = min(length * (c["tokens_per_word"] if per_word else 1.0), length_cap)
    w = Work(short=queries * c["query_tokens"])
    if tokens > LONG:
        w.long += docs * tokens
    else:
        w.short += docs * tokens
    return w


def retrieval_eval(datasets: list[str], cap: int) -> Work:
    c, w = cost_data(), Work()
    for d in datasets:
        if d in c["beir"]:
            w += _docs(c["beir"][d], cap, per_word=True)
        elif d in c["code"]:
            w += _docs(c["code"][d], cap, per_word=False)
        elif d in c:
            w += _docs(c[d], cap, per_word=False)
    return w


def job_work(cfg: Any, mode: str, skip: tuple[str, ...] = ()) -> Work:
    """What one job of ``cfg`` processes; ``mode`` report: evaluation only (the training is the sweep's), on the
    datasets the sweep did not already encode (``skip``)."""
    t, c = cfg.task, cost_data()
    runner = str(t.spec.runner)
    if runner == "glue":
        return _glue(t)
    if runner == "efficiency":
        return _efficiency(t)
    cap = int(t.get("document_length") or t.max_length)
    w = retrieval_eval([d for d in t.datasets if d not in skip], cap)
    if t.get("shard_launcher") == "external" and isinstance(t.get("shards"), int) and t.shards > 1:
        # a shard job encodes 1/K of the corpora (queries: each shard searches with every query); the merge only reads
        k = int(t.shards)
        return Work(short=w.short / k, long=w.long / k) if t.get("shard") is not None else Work()
    if mode == "report" or not _trains(t):
        return w
    d = t.train_data
    if runner == "colbert":
        per = c["query_tokens"] + int(d.n_ways) * min(c["kd_doc_tokens"], int(t.train_document_length))
        w.train += float(d.max_samples or 0) * per * int(t.epochs)
    elif runner == "mldr":
        docs = min(c["mldr-en"][2], int(t.max_seq_length)) * (int(d.num_negatives) + 1)
        w.train += c["mldr_train_queries"] * (docs + c["query_tokens"]) * int(t.epochs)
    else:
        w.train += float(d.max_samples or 0) * c["dpr_sample_tokens"] * int(t.epochs)
    return w


def _trains(t: Any) -> bool:
    return str(t.get("setting")) == "id" if t.spec.runner == "mldr" else bool(t.get("train"))


def _glue(t: Any) -> Work:
    c, w = cost_data(), Work()
    for name in [t.tasks] if isinstance(t.tasks, str) else list(t.tasks):
        train, dev, tokens = c["glue"][name]
        epochs = _glue_epochs(t, name)
        w.train += train * tokens * epochs
        w.short += dev * tokens * epochs * int(t.evals_per_epoch)
    return w


def _glue_epochs(t: Any, name: str) -> int:
    group = list(t.grid.epochs[t.definitions[name].epoch_group])
    if t.epochs is not None:
        return int(t.epochs)
    return int(group[int(t.epoch_slot)]) if t.epoch_slot is not None else sum(int(e) for e in group)


def _efficiency(t: Any) -> Work:
    w = Work()
    for name in t.datasets:
        s = t.sets[name]
        length = float(s.length if s.get("length") is not None else s.mean)
        tokens = float(t.n_docs) * length * (int(t.repeats) + int(t.warmup))
        if length > LONG:
            w.long += tokens
        else:
            w.short += tokens
    return w


def throughput(model: Mapping[str, Any], results_dir: str | None) -> Throughput:
    """The model's measured throughput in this results folder, else the paper's Table 2 row (RTX 4090)."""
    measured = _measured(str(model.get("name")), results_dir) if results_dir else None
    if measured is not None:
        return measured
    rows = _table2()
    key = (str(model.get("size")), str(model.get("family")))
    row, note = rows.get(key), f"Table 2, {key[1]} {key[0]} (RTX 4090)"
    if row is None:
        row, note = rows[("base", "BERT")], f"Table 2 has no {key[1]} {key[0]}: BERT base's figures (RTX 4090)"
    short = float(row["short_variable"]) * 1000
    long = float(row["long_variable"] or row["short_variable"]) * 1000
    return Throughput(short, long, note)


@cache
def _table2() -> dict[tuple[str, str], dict[str, str]]:
    path = Path(str(resources.files("harness"))) / "leaderboard" / "baselines" / cost_data()["throughput_table"]
    with open(path, newline="") as fh:
        return {(r["size"], r["model"]): r for r in csv.DictReader(fh)}


def _measured(model: str, results_dir: str) -> Throughput | None:
    folder = Path(results_dir) / "efficiency" / results._safe(model)
    if not folder.is_dir():
        return None
    got: dict[str, tuple[str, float, str]] = {}
    for _, r in results.iter_records(folder, warn=False):
        rate = (r.metrics or {}).get("tokens_per_s")
        usable = r.status == results.STATUS_OK and rate and r.dataset in ("short_variable", "long_variable")
        if usable and (r.dataset not in got or r.created_at > got[r.dataset][0]):
            got[r.dataset] = (r.created_at, float(rate), str((r.details or {}).get("device", "")))
    if "short_variable" not in got:
        return None
    short = got["short_variable"][1]
    long = got.get("long_variable", got["short_variable"])[1]
    return Throughput(short, long, f"measured here (task=efficiency records, {got['short_variable'][2]})", True)


def gpu_hours(work: Work, tp: Throughput, gpu: str) -> float:
    """GPU-hours of ``work`` at ``tp`` on ``gpu`` (a measured throughput is not rescaled: it is that device's)."""
    c = cost_data()
    speed = 1.0 if tp.measured else float(c["gpu_speed"].get(gpu, 1.0))
    seconds = (work.train * c["train_factor"] + work.short) / (tp.short * speed) + work.long / (tp.long * speed)
    return seconds / 3600.0
