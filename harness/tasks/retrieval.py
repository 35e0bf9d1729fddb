"""Single-vector retrieval runner (task=beir, task=code): plan -> skip -> train (optional) -> evaluate -> record."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from harness import results
from harness.cli import sweep_name
from harness.data.catalog import DatasetEntry, load_entry, resolve_entries
from harness.data.retrieval import subset
from harness.errors import HarnessError, TrainingDivergedError
from harness.evaluation.retrieval_evaluator import RetrievalEvalSettings, evaluate_retrieval
from harness.models import ModelSpec, load_sentence_transformer, resolve_device, resolve_precision
from harness.summary import print_summary

log = logging.getLogger(__name__)
MAIN_SCORE = "ndcg_at_10"


@dataclass
class RetrievalPlan:
    """Everything decided before any heavy work: which datasets, which run id, what is already done."""

    entries: list[DatasetEntry]
    run_id: str
    identity: dict[str, Any]
    hyperparameters: dict[str, Any]
    todo: list[DatasetEntry]
    done: list[DatasetEntry]
    stale: list[Path]          # ok records of this run whose dataset is now defined differently


def training_identity(t: DictConfig) -> dict[str, Any] | None:
    """The training settings that change the trained weights (None when not training)."""
    if not t.train:
        return None
    data = OmegaConf.to_container(t.train_data, resolve=True)
    assert isinstance(data, dict)
    relevant = {"source": data["source"]}
    if data["source"] == "hub":
        relevant |= {k: data[k] for k in ("hub_path", "hub_config", "hub_revision", "max_samples")}
    elif data["source"] == "file":
        relevant |= {"path": data["path"], "file_sha": _file_sha(data["path"]), "max_samples": data["max_samples"]}
    else:
        relevant |= {k: data[k] for k in ("dataset", "split", "num_negatives", "range_min", "range_max")}
    return {
        "data": relevant, "lr": float(t.lr), "epochs": t.epochs, "warmup_ratio": t.warmup_ratio,
        "batch_size": t.batch_size, "gradient_accumulation_steps": t.gradient_accumulation_steps,
        "loss": t.loss, "mini_batch_size": t.mini_batch_size, "max_seq_length": t.max_seq_length, "seed": t.train_seed,
    }


def _file_sha(path: str | None) -> str | None:
    import hashlib

    if not path or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def plan(cfg: DictConfig, model_identity: dict[str, Any], precision: str) -> RetrievalPlan:
    """Pure: the run id and the datasets still to do (no model or data is loaded)."""
    t = cfg.task
    catalog = OmegaConf.to_container(t.catalog, resolve=True)
    assert isinstance(catalog, dict)
    entries = resolve_entries(list(t.datasets), catalog)
    train = training_identity(t)
    identity = {
        "task": t.name,
        "model": {k: model_identity.get(k) for k in ("path", "revision", "fingerprint")}
        | {"pooling": cfg.model.pooling, "normalize": cfg.model.normalize},
        "train": train,
        "precision": precision, "train_precision": precision if train else None,
        "eval": {"max_length": t.max_length, "top_k": t.top_k, "similarity": t.similarity, "split": t.split,
                 "max_queries": t.max_queries, "max_docs": t.max_docs},
    }
    readable = {"lr": float(t.lr)} if train else {"eval": precision}
    rid = results.run_id(identity, readable)
    hyper = {"train": train, "precision": precision, "max_length": t.max_length, "top_k": t.top_k,
             "max_queries": t.max_queries, "max_docs": t.max_docs}
    if train:
        hyper |= {"lr": float(t.lr), "epochs": t.epochs, "batch_size": t.batch_size,
                  "gradient_accumulation_steps": t.gradient_accumulation_steps, "seed": t.train_seed}
    todo, done, stale = [], [], []
    for e in entries:
        rec = results.finished_record(cfg.paths.results, t.name, cfg.model.name, rid, e.name)
        if rec is not None and rec.details.get("data_spec") != data_spec(e, t):
            # same run, but the dataset is defined differently now: evaluate again, keep the old record aside
            stale.append(results.record_path(cfg.paths.results, t.name, cfg.model.name, rid, e.name))
            rec = None
        (done if rec is not None and not cfg.overwrite else todo).append(e)
    return RetrievalPlan(entries, rid, identity, hyper, todo, done, stale)


def set_aside(path: Path) -> None:
    """Move a superseded record out of the record tree's reach (not *.json), never overwriting it."""
    superseded = path.with_suffix(f".superseded-{int(time.time())}")
    path.rename(superseded)
    log.warning("dataset definition changed since %s was written; moved it to %s", path, superseded)


def data_spec(entry: DatasetEntry, t: DictConfig) -> str:
    """Hash of what defines a dataset's data (catalog entry, local folder, split): records carry it, and a
    record whose data was defined differently is not counted as done."""
    from dataclasses import asdict

    return results.stable_hash({
        "entry": asdict(entry), "data_dir": str(Path(t.data_dir).expanduser().resolve()) if t.data_dir else None,
        "split": t.split,
    })


def run(cfg: DictConfig) -> list[results.ResultRecord]:
    t = cfg.task
    spec = ModelSpec.from_config(cfg.model)
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)
    model, identity = load_sentence_transformer(spec, device=device)   # fails fast on an unreachable hub
    p = plan(cfg, identity, precision)
    config = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(config, dict)
    for path in p.stale:
        set_aside(path)
    for e in p.done:
        log.info("skip %s/%s: record exists for run %s (overwrite=true to redo)", t.name, e.name, p.run_id)
    written: list[results.ResultRecord] = []

    def record(entry_name: str, **kw: Any) -> results.ResultRecord:
        rec = results.ResultRecord(
            task=t.name, dataset=entry_name, model=dict(identity), main_score=MAIN_SCORE, run_id=p.run_id,
            hyperparameters=p.hyperparameters, config=config, precision=precision,
            sweep=sweep_name(), **kw,
        )
        results.write_record(cfg.paths.results, rec)
        written.append(rec)
        return rec

    if p.todo:
        try:
            train_info = _maybe_train(cfg, model, p, precision, device)
        except TrainingDivergedError as exc:
            for e in p.todo:
                record(e.name, split=e.split, metrics={}, status=results.STATUS_FAILED, error=str(exc))
            raise
        if train_info:
            identity["trained"] = train_info
        settings = RetrievalEvalSettings(
            device=device, precision=precision, max_length=t.max_length, top_k=t.top_k, similarity=t.similarity,
            batch_tokens=t.batch_tokens, max_batch_size=t.max_batch_size, corpus_chunk_size=t.corpus_chunk_size,
            cache_dir=str(Path(cfg.paths.cache) / "embeddings") if t.embedding_cache else None,
        )
        fp = train_info["fingerprint"] if train_info else identity["fingerprint"]
        failures = []
        for e in p.todo:
            try:
                _evaluate_entry(cfg, e, model, fp, settings, record)
            except HarnessError as exc:
                log.error("%s/%s failed: %s", t.name, e.name, exc)
                record(e.name, split=t.split or e.split, metrics={}, status=results.STATUS_FAILED, error=str(exc))
                failures.append(f"{e.name}: {exc}")
        if failures:
            print_summary(_all_records(cfg, p) or written)
            raise HarnessError("; ".join(failures))
    records = _all_records(cfg, p)
    print_summary(records)
    return records


def _all_records(cfg: DictConfig, p: RetrievalPlan) -> list[results.ResultRecord]:
    out = []
    for e in p.entries:
        path = results.record_path(cfg.paths.results, cfg.task.name, cfg.model.name, p.run_id, e.name)
        if path.exists():
            out.append(results.read_record(path))
    return out


def _evaluate_entry(cfg, entry: DatasetEntry, model, model_fp: str, settings, record) -> None:
    t = cfg.task
    members = list(entry.members.values()) or [entry]
    per_member: list[tuple[dict, dict, dict, str]] = []
    for m in members:
        t0 = time.perf_counter()
        ds = load_entry(m, data_dir=t.data_dir, split=t.split, strict_qrels=t.strict_qrels)
        if t.max_queries or t.max_docs:
            ds = subset(ds, t.max_queries, t.max_docs)
        load_s = time.perf_counter() - t0
        log.info("%s: %d docs, %d queries (%s)", m.name, len(ds), len(ds.evaluated_queries()), ds.source)
        metrics, details, timings = evaluate_retrieval(
            model, model_fp, ds, settings, ignore_identical_ids=m.ignore_identical_ids
        )
        timings["load_s"] = load_s
        per_member.append((metrics, details, timings, ds.fingerprint))
        details["data_spec"] = data_spec(m, t)
        if entry.is_composite:
            record(m.name, split=ds.split, metrics=metrics, details=details | {"member_of": entry.name},
                   timings=timings, data_fingerprint=ds.fingerprint)
    if entry.is_composite:
        keys = per_member[0][0].keys()
        metrics = {k: float(np.mean([pm[0][k] for pm in per_member])) for k in keys}
        details = {"members": [m.name for m in members], "aggregate": "mean over members",
                   "data_spec": data_spec(entry, t)}
        timings = {k: float(sum(pm[2].get(k, 0.0) for pm in per_member)) for k in per_member[0][2]}
        fingerprint = results.stable_hash([pm[3] for pm in per_member], length=16)
        record(entry.name, split=t.split or entry.split, metrics=metrics, details=details, timings=timings,
               data_fingerprint=fingerprint)
    else:
        metrics, details, timings, fingerprint = per_member[0]
        record(entry.name, split=t.split or entry.split, metrics=metrics, details=details, timings=timings,
               data_fingerprint=fingerprint)


def _maybe_train(cfg: DictConfig, model, p: RetrievalPlan, precision: str, device: str) -> dict[str, Any] | None:
    """Fine-tune (or reuse the finished model of this run id, e.g. after a pre-emption during evaluation)."""
    t = cfg.task
    if not t.train:
        return None
    from harness.models import fingerprint
    from harness.training.dense import DenseTrainingConfig, train_dense

    out_dir = Path(cfg.paths.outputs) / "models" / t.name / cfg.model.name / p.run_id
    marker = out_dir / "train_done.json"
    if marker.exists() and not cfg.overwrite:
        info = json.loads(marker.read_text())
        log.info("reusing trained model %s", info["model_dir"])
        from sentence_transformers import SentenceTransformer

        trained = SentenceTransformer(info["model_dir"], device=device)
        model.load_state_dict(trained.state_dict())
        return info
    train_ds = _training_data(cfg, model)
    tcfg = DenseTrainingConfig(
        lr=float(t.lr), epochs=t.epochs, warmup_ratio=t.warmup_ratio, batch_size=t.batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps, loss=t.loss, mini_batch_size=t.mini_batch_size,
        max_seq_length=t.max_seq_length, seed=t.train_seed, precision=precision, use_cpu=device == "cpu",
    )
    t0 = time.perf_counter()
    info = train_dense(model, train_ds, tcfg, out_dir)
    info["train_s"] = time.perf_counter() - t0
    info["fingerprint"] = fingerprint(info["model_dir"])
    results.atomic_write_json(marker, info)
    return info


def _training_data(cfg: DictConfig, model):
    from harness.data import triplets

    t = cfg.task
    d = t.train_data
    if d.source == "file":
        if not d.path:
            raise HarnessError("task.train_data.source=file needs task.train_data.path=<triplets .tsv/.csv/.jsonl>")
        return triplets.sample(triplets.load_triplets_file(d.path), d.max_samples, t.train_seed)
    if d.source == "hub":
        return triplets.load_hub_triplets(d.hub_path, d.hub_config, d.hub_revision, d.max_samples, t.train_seed)
    if d.source == "beir":
        if not d.dataset:
            raise HarnessError("task.train_data.source=beir needs task.train_data.dataset=<BEIR name with a train split>")
        catalog = OmegaConf.to_container(t.catalog, resolve=True)
        assert isinstance(catalog, dict)
        (entry,) = resolve_entries([d.dataset], catalog)
        ds = load_entry(entry, data_dir=t.data_dir, split=d.split, strict_qrels=t.strict_qrels)
        return triplets.mine_from_beir(
            ds, model, num_negatives=d.num_negatives, range_min=d.range_min, range_max=d.range_max
        )
    raise HarnessError(f"unknown task.train_data.source {d.source!r}: use hub, file or beir")
