"""mteb's results format, both ways: export harness records as mteb result files; read mteb result files (e.g. a
checkout of the public results repository) for the leaderboard's published rows.

mteb's layout (its ``ResultCache`` and the ``embeddings-benchmark/results`` repository):
``<org>__<model>/<revision>/<TaskName>.json`` (a ``TaskResult``: ``task_name``, ``dataset_revision``,
``mteb_version``, ``evaluation_time``, ``scores.<split>[{hf_subset, languages, main_score, ...}]``) beside
``model_meta.json`` (a ``ModelMeta``). Which harness dataset is which mteb task is data: the ``mteb_task`` (and
``mteb_subset``) of each catalog entry in ``conf/task/<family>.yaml``; records of ``task=mteb`` carry their task.

Export writes through mteb's own classes (``TaskResult``, ``ModelMeta``), so mteb must be installed
(``pip install 'harness[mteb]'``); reading needs only the JSON, so the leaderboard does not depend on mteb.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from harness import specs
from harness.data.catalog import DatasetEntry
from harness.errors import HarnessError
from harness.results import STATUS_OK, ResultRecord, iter_records, nonfinite_metrics

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'harness[mteb]'"
#: the task family whose records are mteb tasks by name (its datasets are mteb task names)
MTEB_FAMILY = "mteb"
#: split preference when a result file has several and the catalog names none
SPLITS = ("test", "dev", "validation", "train")


def require_mteb(what: str):
    """The mteb module, or a one-line error naming the install command."""
    try:
        import mteb
    except ImportError as exc:
        raise HarnessError(f"{what} needs the mteb package, which is not installed: {INSTALL_HINT}") from exc
    return mteb


# ---------------------------------------------------------------------------------------------- task names
@dataclass(frozen=True)
class MtebColumn:
    """Where one mteb task's main score lands on the leaderboard, and which part of the result file it is."""

    task: str
    table: str
    column: str
    split: str | None = None     # the catalog entry's evaluation split
    subset: str | None = None    # the hf_subset (None: mteb's main score, the mean over subsets)


def _catalog_file(family: str) -> Path | None:
    path = resources.files("conf") / "task" / f"{family}.yaml"
    return Path(str(path)) if path.is_file() else None


def own_catalog(family: str) -> dict[str, Any]:
    """The catalog ``conf/task/<family>.yaml`` declares itself: its ``catalog`` plus a shared one it includes
    (``defaults: - [override] /catalog@catalog: <name>`` -> ``conf/catalog/<name>.yaml``), not entries of inherited
    tasks."""
    from omegaconf import OmegaConf

    path = _catalog_file(family)
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False) if path else None
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    for item in raw.get("defaults") or []:
        name = next((v for k, v in item.items() if k.split()[-1] == "/catalog@catalog"), None) \
            if isinstance(item, dict) else None
        if name:
            shared = resources.files("conf") / "catalog" / f"{name}.yaml"
            out |= OmegaConf.to_container(OmegaConf.load(Path(str(shared))), resolve=False) or {}
    return out | (raw.get("catalog") or {})


def catalog_columns() -> dict[str, MtebColumn]:
    """mteb task name -> leaderboard column, from the ``mteb_task`` of each registered family's own catalog
    (``conf/task/<family>.yaml``, not inherited entries), placed where that family puts a record of the dataset.
    A family that adds ``mteb_task`` to its catalog entries (NanoBEIR: ``NanoSciFactRetrieval``, ...) is picked up
    with no change here. When two families name the same task, the first registered wins."""

    out: dict[str, MtebColumn] = {}
    for fam in specs.all_specs().values():
        for name, entry in own_catalog(fam.name).items():
            if not isinstance(entry, dict) or not entry.get("mteb_task") or entry["mteb_task"] in out:
                continue
            probe = ResultRecord(task=fam.name, dataset=str(name), split=str(entry.get("split", DatasetEntry.split)), model={},
                                 metrics={}, main_score=fam.main_metric, run_id="")
            try:
                table, column = fam.column_of(probe)
            except (KeyError, ValueError, TypeError, AttributeError):   # a family that needs more than the name
                continue
            out[entry["mteb_task"]] = MtebColumn(entry["mteb_task"], table, column, probe.split,
                                                 entry.get("mteb_subset"))
    return out


def configured_subsets(family: str = MTEB_FAMILY) -> dict[str, str]:
    """Task -> hf_subset for the tasks ``conf/task/<family>.yaml`` restricts to one subset (STS17: en-en), so a
    published score is read the way ``task=mteb`` measures it by default."""
    from omegaconf import OmegaConf

    path = _catalog_file(family)
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False) if path else {}
    subsets = raw.get("hf_subsets") if isinstance(raw, dict) else None
    return {str(t): str(v[0]) for t, v in (subsets or {}).items() if isinstance(v, list) and len(v) == 1}


def _entry_of(record: ResultRecord) -> Mapping[str, Any] | None:
    """The record's own catalog entry, from the config it was run with (composite members: the parent's)."""
    catalog = ((record.config or {}).get("task") or {}).get("catalog") or {}
    parent = (record.details or {}).get("member_of")
    if parent:
        members = (catalog.get(parent) or {}).get("members") or {}
        return members.get(record.dataset[len(parent) + 1:]) if record.dataset.startswith(f"{parent}-") else None
    entry = catalog.get(record.dataset)
    return entry if isinstance(entry, Mapping) else None


def mteb_task_of(record: ResultRecord) -> tuple[str, str | None] | None:
    """(mteb task, hf_subset) of a record: ``task=mteb`` records name it; retrieval records take it from the catalog
    entry in their own config (so a user's catalog works too), else from the packaged catalog."""
    info = (record.details or {}).get("mteb")
    if isinstance(info, Mapping) and info.get("task"):
        return str(info["task"]), None
    entry = _entry_of(record)
    if entry is not None and entry.get("mteb_task"):
        return str(entry["mteb_task"]), entry.get("mteb_subset")
    if entry is None and not (record.details or {}).get("member_of"):
        for col in catalog_columns().values():
            if (col.table, col.column) == (record.task, record.dataset):
                return col.task, col.subset
    return None


# ---------------------------------------------------------------------------------------------- reading
@dataclass
class MtebFile:
    """One mteb result file, as far as the leaderboard needs it."""

    path: Path
    task: str
    mteb_version: str | None
    dataset_revision: str | None
    scores: dict[str, list[dict[str, Any]]]

    def main_score(self, split: str | None = None, subset: str | None = None) -> tuple[float, str, str] | None:
        """(score on 0-1, split used, what it is) by mteb's rule: the subset's ``main_score``, or the mean over
        subsets (``TaskResult.get_score``). ``split`` None or absent: the first of :data:`SPLITS` present."""
        if split not in self.scores:
            split = next((s for s in SPLITS if s in self.scores), next(iter(self.scores), None))
        if split is None:
            return None
        entries = [e for e in self.scores[split]   # a NaN or infinite score is no score
                   if isinstance(e.get("main_score"), int | float) and math.isfinite(e["main_score"])]
        if subset is not None:
            entries = [e for e in entries if e.get("hf_subset") == subset]
        if not entries:
            return None
        if len(entries) == 1:
            return float(entries[0]["main_score"]), split, f"{split}, subset {entries[0].get('hf_subset')}"
        return statistics.fmean(float(e["main_score"]) for e in entries), split, f"{split}, mean of {len(entries)} subsets"


def read_file(path: Path) -> MtebFile:
    """An mteb result file (format of mteb >= 1.11: ``scores`` by split, a list of subset dicts)."""
    data = json.loads(path.read_text())
    scores = data.get("scores") if isinstance(data, dict) else None
    if not isinstance(scores, dict) or not all(isinstance(v, list) for v in scores.values()):
        raise ValueError("not mteb's results format (scores.<split> must be a list of subset scores; files "
                         "written before mteb 1.11 can be converted with mteb's TaskResult.from_disk)")
    return MtebFile(path, str(data.get("task_name") or path.stem), data.get("mteb_version"),
                    data.get("dataset_revision"), scores)


@dataclass(frozen=True)
class MtebModel:
    """One ``<model>/<revision>/`` folder."""

    name: str
    revision: str
    folder: Path


def results_root(directory: str | os.PathLike) -> Path:
    """The folder holding ``<model>/<revision>/``: ``directory`` itself or its ``results/`` (a repository checkout)."""
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise HarnessError(f"mteb results directory {root} does not exist: pass a folder in mteb's layout "
                           "(<org>__<model>/<revision>/<Task>.json) or a checkout of embeddings-benchmark/results")
    return root / "results" if (root / "results").is_dir() else root


def models_in(directory: str | os.PathLike) -> list[MtebModel]:
    """Every model revision folder, named by its ``model_meta.json`` (else by the folder names, as mteb does)."""
    out = []
    for model_dir in sorted(p for p in results_root(directory).iterdir() if p.is_dir()):
        for rev_dir in sorted(p for p in model_dir.iterdir() if p.is_dir()):
            name, revision = model_dir.name.replace("__", "/"), rev_dir.name
            meta = rev_dir / "model_meta.json"
            if meta.is_file():
                try:
                    data = json.loads(meta.read_text())
                    name, revision = str(data.get("name") or name), str(data.get("revision") or revision)
                except (ValueError, OSError) as exc:
                    log.warning("%s: unreadable model_meta.json (%s); naming the model by its folder", rev_dir, exc)
            out.append(MtebModel(name, revision, rev_dir))
    return out


# ---------------------------------------------------------------------------------------------- export
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
    """(mteb model name ``org/model``, revision). ``names`` maps a harness model name (or a default export name) to
    an mteb name. A fine-tuned model is its own model (``<org>/<name>-<task>``, the trained weights' fingerprint as
    revision), never the base model it started from: a mapping of the base name does not apply to it."""
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
    """Write every exportable record under ``dirs`` as mteb result files under ``out``
    (``<org>__<model>/<revision>/<Task>.json`` + ``model_meta.json``); one file per (model, revision, task), its
    splits merged; when two runs give the same (model, revision, task, split), the newest record is written."""
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
            meta = _write_model_meta(mteb, path.parent, name, revision, next(iter(by_split.values())).record)
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


def _write_model_meta(mteb: Any, folder: Path, name: str, revision: str, record: ResultRecord) -> Path:
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
    from harness.results import atomic_write_json

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
