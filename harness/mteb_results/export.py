"""Exporting harness records as mteb result files through mteb's ``TaskResult`` and ``ModelMeta`` (needs mteb)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.results import STATUS_OK, ResultRecord, atomic_write_json, iter_records, nonfinite_metrics
from harness.mteb_results.catalog import mteb_task_of
from harness.tasks.mteb.compute import require_mteb

log = logging.getLogger(__name__)


@dataclass
class Export:
    """What an export wrote and what it left out (and why)."""

    written: list[Path] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)   # reason -> record paths

    def skip(self, reason: str, path: Path) -> None:
        self.skipped.setdefault(reason, []).append(str(path))


def _is_hub_id(path: str) -> bool:
    return bool(path) and "/" in path and not path.startswith(("package:", "/", ".", "~")) and not Path(path).exists()


def export_name(record: ResultRecord, org: str, names: Mapping[str, str]) -> tuple[str, str]:
    """(mteb model name, revision); a fine-tuned model is its own (its weights' fingerprint as revision)."""
    m = record.model or {}
    trained = m.get("trained") or {}
    base = str(m.get("name") or "model")
    if trained:
        default = f"{org}/{base}-{record.task}"
        return names.get(default, default), str(trained.get("fingerprint") or record.run_id)
    default = m["path"] if _is_hub_id(str(m.get("path") or "")) else f"{org}/{base}"
    revision = m.get("revision") or m.get("fingerprint") or "no_revision_available"
    return names.get(base, names.get(default, default)), str(revision)


def _data_revision(record: ResultRecord) -> str:
    fp = record.data_fingerprint or ""
    if fp.startswith("hub:") and "@" in fp:
        return fp.rsplit("@", 1)[1]
    return f"local:{fp}" if fp else "unknown"


@dataclass
class _Item:
    record: ResultRecord
    path: Path
    task: str
    subset: str | None


NONFINITE = "a metric is NaN or infinite: a failed record, never exported"


def _nonfinite_subset_scores(record: ResultRecord) -> bool:
    """A task=mteb record's own subset scores (exported as they are) hold a NaN or infinite number."""
    info = (record.details or {}).get("mteb")
    subsets = info.get("scores") if isinstance(info, Mapping) else None
    return any(nonfinite_metrics(s) for s in subsets or () if isinstance(s, Mapping))


def _collect(dirs: Sequence[str | os.PathLike], report: Export) -> list[_Item]:
    items = []
    for path, rec in ((p, r) for d in dirs for p, r in iter_records(d) if p.relative_to(d).parts[0] != "selected"):
        if rec.status != STATUS_OK:
            report.skip(NONFINITE if nonfinite_metrics(rec.metrics) else "failed record", path)
            continue
        if _nonfinite_subset_scores(rec):
            report.skip(NONFINITE, path)
            continue
        hp = rec.hyperparameters or {}
        if hp.get("max_queries") or hp.get("max_docs"):
            report.skip("evaluated on a subset (task.max_queries/max_docs), not the whole dataset", path)
            continue
        info = (rec.details or {}).get("mteb")
        if isinstance(info, Mapping) and info.get("local"):
            report.skip("a local task, not one of mteb's", path)
            continue
        named = mteb_task_of(rec)
        if named is None:
            report.skip("no mteb task for this dataset (no mteb_task in its catalog entry)", path)
            continue
        items.append(_Item(rec, path, *named))
    return items


def _scores(item: _Item, main_score_name: str) -> dict[str, dict[str, Any]]:
    """{hf_subset: scores} of one record for ``TaskResult.from_task_results``."""
    rec = item.record
    info = (rec.details or {}).get("mteb")
    if isinstance(info, Mapping) and info.get("scores"):   # a task=mteb record keeps mteb's own subset scores
        return {str(s["hf_subset"]): {k: v for k, v in s.items() if k not in ("hf_subset", "languages")}
                for s in info["scores"]}
    metrics = {k: float(v) for k, v in rec.metrics.items() if isinstance(v, int | float)}
    return {item.subset or "default": {**metrics, "main_score": float(rec.metrics[main_score_name])}}


def export_mteb(dirs: Sequence[str | os.PathLike], out: str | os.PathLike, *, org: str = "harness",
                names: Mapping[str, str] | None = None) -> Export:
    """Write every exportable record under ``dirs`` as mteb result files under ``out``, the newest winning."""
    report = Export()
    items = _collect(dirs, report)
    if not items:
        return report
    mteb = require_mteb("harness export --format mteb")
    groups: dict[tuple[str, str, str], dict[str, _Item]] = {}
    for item in sorted(items, key=lambda i: i.record.created_at):
        name, revision = export_name(item.record, org, names or {})
        by_split = groups.setdefault((name, revision, item.task), {})
        if item.record.split in by_split:
            report.skip(f"older than another record of the same model, task and split ({item.record.split})",
                        by_split[item.record.split].path)
        by_split[item.record.split] = item
    for (name, revision, task_name), by_split in groups.items():
        path = _write_task_result(mteb, Path(out), name, revision, task_name, by_split, report)
        if path is not None:
            report.written.append(path)
            meta = _write_model_meta(path.parent, name, revision, next(iter(by_split.values())).record)
            if meta not in report.written:
                report.written.append(meta)
    return report


def _write_task_result(mteb: Any, out: Path, name: str, revision: str, task_name: str, by_split: dict[str, _Item],
                       report: Export) -> Path | None:
    from mteb.results import TaskResult
    try:
        task = mteb.get_task(task_name)
    except (KeyError, ValueError) as exc:
        for item in by_split.values():
            report.skip(f"mteb {mteb.__version__} has no task {task_name!r} ({exc})", item.path)
        return None
    main = task.metadata.main_score
    scores: dict[str, dict[str, dict[str, Any]]] = {}
    for split, item in by_split.items():
        measured = item.record.main_score
        if (item.record.details or {}).get("mteb") is None and measured != main:
            report.skip(f"mteb's main score for {task_name} is {main}, the record's is {measured}", item.path)
            continue
        scores[split] = _scores(item, measured)
    if not scores:
        return None
    records = [by_split[s].record for s in scores]
    result = TaskResult.from_task_results(task, scores, evaluation_time=sum(sum(r.timings.values()) for r in records))
    info = (records[0].details or {}).get("mteb") or {}
    result.dataset_revision = str(info.get("dataset_revision") or _data_revision(records[0]))
    path = out / name.replace("/", "__").replace(" ", "_") / revision / f"{task_name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        result.to_disk(Path(tmp))   # mteb's own writer (rounds scores to 6 decimals, as mteb does)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def _write_model_meta(folder: Path, name: str, revision: str, record: ResultRecord) -> Path:
    from mteb.models import ModelMeta
    m = record.model or {}
    model_cfg = (record.config or {}).get("model") or {}
    similarity = ((record.config or {}).get("task") or {}).get("similarity", "cosine")
    meta = ModelMeta(
        loader=None, name=name, revision=revision, release_date=None, languages=None, n_parameters=None,
        memory_usage_mb=None, max_tokens=model_cfg.get("max_length"), embed_dim=None, license=None, open_weights=None,
        public_training_code=None, public_training_data=None, framework=["Sentence Transformers", "PyTorch"],
        similarity_fn_name=similarity if similarity in ("cosine", "dot") else None, use_instructions=False,
        training_datasets=None,
        adapted_from=m.get("path") if m.get("trained") and _is_hub_id(str(m.get("path") or "")) else None,
    )
    path = folder / "model_meta.json"
    atomic_write_json(path, json.loads(json.dumps(meta.to_dict(), default=str)))
    return path


def describe(report: Export) -> Iterable[str]:
    """Lines for the command's output."""
    yield f"wrote {sum(1 for p in report.written if p.name != 'model_meta.json')} mteb result file(s)"
    for p in report.written:
        yield f"  {p}"
    for reason, paths in report.skipped.items():
        yield f"skipped {len(paths)} record(s): {reason}"
        for p in paths[:3]:
            yield f"  {p}"
        if len(paths) > 3:
            yield f"  ... and {len(paths) - 3} more"
