"""The graph's cost model (``conf/paper/cost.yaml``): tokens each job processes, over a throughput for the model.

GPU-hours = ((training tokens x ``train_factor`` + evaluation tokens) / (tokens/s x the GPU's ``gpu_speed``)
+ ``job_overhead_s``) / 3600. Tokens come from the job's own config (datasets, epochs, samples, seeds, lengths) and
the sizes of its local data files where it has some (:mod:`harness.paper.sizes`), else the cost file's; the
throughput from the paper's Table 2 for the model's family and size, or from this results folder's own
``task=efficiency`` records of the model once there are any. Pure: reads config, YAML, CSV and records.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from harness import layout, results

LONG = 512    # documents past this many tokens use the long-document throughput


@dataclass
class Work:
    """Tokens a job processes: training tokens (forward + backward), short and long evaluation tokens."""

    train: float = 0.0
    short: float = 0.0
    long: float = 0.0
    fixed_s: float = 0.0            # seconds whatever the data: process start, imports, model load
    local: int = 0                  # datasets or files sized from the configured local data
    published: int = 0              # datasets sized from the cost file (hub copies)

    def __iadd__(self, other: Work) -> Work:
        self.train, self.short, self.long = self.train + other.train, self.short + other.short, self.long + other.long
        self.fixed_s += other.fixed_s
        self.local, self.published = self.local + other.local, self.published + other.published
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


def retrieval_eval(datasets: list[str], cap: int, data_dir: Any = None, catalog: Any = None) -> Work:
    """Evaluation tokens of ``datasets``: from the local files under ``data_dir`` (each in its catalog entry's
    ``local`` folder) where there are some, else from the cost file's published sizes."""
    from harness.paper import sizes

    c, w = cost_data(), Work()
    for d in datasets:
        entry = (catalog or {}).get(d) or {}
        local = sizes.retrieval_set(data_dir, str(entry.get("local") or d))
        if local is not None:
            w += _docs(local, cap, per_word=False)
            w.local += 1
            continue
        if d in c["beir"]:
            w += _docs(c["beir"][d], cap, per_word=True)
        elif d in c["code"]:
            w += _docs(c["code"][d], cap, per_word=False)
        elif d in c:
            w += _docs(c[d], cap, per_word=False)
        w.published += 1
    return w


def job_work(cfg: Any, mode: str, skip: tuple[str, ...] = ()) -> Work:
    """What one job of ``cfg`` processes; ``mode`` report: evaluation only (the training is the sweep's), on the
    datasets the sweep did not already encode (``skip``)."""
    w = _job_work(cfg, mode, skip)
    w.fixed_s += float(cost_data()["job_overhead_s"])
    return w


def _job_work(cfg: Any, mode: str, skip: tuple[str, ...]) -> Work:
    from harness.paper import sizes

    t, c = cfg.task, cost_data()
    runner = str(t.spec.runner)
    if runner == "glue":
        return _glue(t)
    if runner == "efficiency":
        return _efficiency(t)
    cap = int(t.get("document_length") or t.max_length)
    w = retrieval_eval([d for d in t.datasets if d not in skip], cap, t.get("data_dir"), t.get("catalog"))
    if t.get("shard_launcher") == "external" and isinstance(t.get("shards"), int) and t.shards > 1:
        # a shard job encodes 1/K of the corpora (queries: each shard searches with every query); the merge only reads
        k = int(t.shards)
        return Work(short=w.short / k, long=w.long / k) if t.get("shard") is not None else Work()
    if mode == "report" or not _trains(t):
        return w
    d = t.train_data
    rows = sizes.train_file(d.get("path")) if d.get("source") == "file" else None
    cap_rows = float(d.max_samples) if d.get("max_samples") else None
    if rows is not None:
        w.local += 1
    if runner == "colbert":
        per = c["query_tokens"] + int(d.n_ways) * min(c["kd_doc_tokens"], int(t.train_document_length))
        n = rows[0] if rows else float(d.max_samples or 0)
        w.train += min(n, cap_rows or n) * per * int(t.epochs)
    elif runner == "mldr":
        docs = min(c["mldr-en"][2], int(t.max_seq_length)) * (int(d.num_negatives) + 1)
        local = sizes.retrieval_set(t.get("data_dir"), str(((t.get("catalog") or {}).get("mldr-en") or {}).get("local")))
        queries = local[1] if local else c["mldr_train_queries"]
        w.train += queries * (docs + c["query_tokens"]) * int(t.epochs)
    elif rows is not None:
        w.train += min(rows[0], cap_rows or rows[0]) * rows[1] * int(t.epochs)
    else:
        w.train += float(d.max_samples or 0) * c["dpr_sample_tokens"] * int(t.epochs)
    return w


def _trains(t: Any) -> bool:
    return str(t.get("setting")) == "id" if t.spec.runner == "mldr" else bool(t.get("train"))


def _glue(t: Any) -> Work:
    """Training and dev-evaluation tokens of GLUE jobs: per task, every seed the protocol runs; dev passes every
    ``eval_interval`` batches plus one at the end (authors), or ``evals_per_epoch`` per epoch plus the restored
    best's (best_epoch). Early stopping makes both upper bounds."""
    from harness.paper import sizes

    c, w = cost_data(), Work()
    authors = str(t.get("scoring_protocol", "best_epoch")) == "authors"
    seeds = 1 if t.get("seed") is not None or not authors else len(list(t.seeds))
    for name in [t.tasks] if isinstance(t.tasks, str) else list(t.tasks):
        local = sizes.glue_task(t.get("data_dir"), t.definitions[name].get("local"))
        train, dev, tokens = local or c["glue"][name]
        w.local, w.published = w.local + (local is not None), w.published + (local is None)
        epochs = _glue_epochs(t, name)
        if authors:
            steps = math.ceil(train / int(t.batch_size)) * epochs
            passes = steps // max(int(t.eval_interval.get(name, steps) or steps), 1) + 1
        else:
            passes = epochs * int(t.evals_per_epoch) + 1
        w.train += train * tokens * epochs * seeds
        w.short += dev * tokens * passes * seeds
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
    folder = layout.model_folder(results_dir, "efficiency", model)
    if not folder.is_dir():
        return None
    got: dict[str, tuple[str, float, str]] = {}
    for _, r in results.iter_records(folder, warn=False):
        rate = (r.metrics or {}).get("tokens_per_s")
        finite = isinstance(rate, int | float) and not isinstance(rate, bool) and math.isfinite(rate) and rate > 0
        usable = r.status == results.STATUS_OK and finite and r.dataset in ("short_variable", "long_variable")
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
    return (seconds + work.fixed_s) / 3600.0
