"""Records read in one score per column: a GLUE record scored otherwise (MRPC/QQP by F1 before the fourth fidelity
pass) is rescored from its kept predictions where that is exact, else set aside with the command that reruns it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from harness.core import per_query
from harness.core.results import STATUS_OK, STATUS_SKIPPED, ResultRecord, iter_records, read_record
from harness.tasks.glue.spec import TASK_FAMILY, compared_score

Located = tuple[Path, ResultRecord]
#: what a set-aside record's error begins with (readers group them by it)
SET_ASIDE = "not comparable"


def comparable_records(dirs: str | Path | Iterable[str | Path], **kw: object) -> Iterator[Located]:
    """:func:`harness.core.results.iter_records` read through :func:`comparable` (the same arguments)."""
    for path, rec in iter_records(dirs, **kw):   # type: ignore[arg-type]
        yield path, comparable(path, rec)


def read_comparable(path: Path) -> ResultRecord:
    """One record file read through :func:`comparable`."""
    return comparable(path, read_record(path))


def comparable(path: Path, rec: ResultRecord) -> ResultRecord:
    """``rec`` in its column's score: itself, a rescored copy, or a copy set aside (skipped, saying why)."""
    want = compared_score(rec.dataset) if rec.task == TASK_FAMILY else None
    if want is None or rec.status != STATUS_OK or rec.main_score == want:
        return rec
    why = _not_exact(rec, want)
    if why is None and not (rec.details or {}).get("per_query"):
        why = "it keeps no predictions to rescore from (written before GLUE records kept them)"
    if why is None:
        try:
            return _rescored(path, rec, want)
        except (per_query.PerQueryError, OSError, ValueError, KeyError) as exc:
            why = f"its kept predictions cannot be rescored ({exc})"
    return _set_aside(rec, want, why)


def _not_exact(rec: ResultRecord, want: str) -> str | None:
    """Why rescoring ``rec`` to ``want`` would not give what a run scored by ``want`` records (None: it would)."""
    hp = rec.hyperparameters or {}
    if want != "accuracy":
        return f"its {rec.main_score} score cannot be turned into {want} from its predictions here"
    if hp.get("scored_evaluation") != "last":
        return (f"its scoring protocol ({hp.get('scoring_protocol', 'best_epoch')}) restored the evaluation that was "
                f"best by {rec.main_score}, not by {want}")
    watched = str(hp.get("early_stopping_metric") or "")
    if watched != "accuracy":   # what early stopping watches for a task scored by accuracy (glue_metrics.MONITOR)
        return f"its early stopping watched {watched or 'an unrecorded metric'}, not accuracy"
    return None


def _rescored(path: Path, rec: ResultRecord, want: str) -> ResultRecord:
    """``rec`` with ``want`` (accuracy) computed from its kept predictions, checked against what it recorded."""
    claim = (rec.details or {}).get("per_query")
    pq = per_query.read(path, claim)
    preds, labels = pq.scores["prediction"], pq.scores["label"]
    if len(preds) == 0:
        raise ValueError("no predictions")
    value = float(np.mean(preds == labels) * 100.0)
    recorded = rec.metrics.get(want)
    if recorded is not None and abs(float(recorded) - value) > 1e-6:
        raise ValueError(f"they give {want} {value:.4f}, the record says {recorded}")
    details = {**rec.details, "rescored": {"from": rec.main_score, "to": want, "how": "from the kept predictions"},
               "per_query": {**claim, "data": {**claim.get("data", {}), "glue_metric": "accuracy"}}}
    return replace(rec, main_score=want, metrics={**rec.metrics, want: value}, details=details)


def _set_aside(rec: ResultRecord, want: str, why: str) -> ResultRecord:
    error = (f"{SET_ASIDE}: {rec.dataset} scored by {rec.main_score} (an earlier default), its column compares "
             f"{want}, and {why}; rerun it: {rerun_command(rec)}")
    return replace(rec, status=STATUS_SKIPPED, error=error,
                   details={**rec.details, "set_aside": {"score": rec.main_score, "compared": want, "why": why}})


def rerun_command(rec: ResultRecord) -> str:
    """The command that computes ``rec``'s cell under today's definitions (its grid point and seed)."""
    hp = rec.hyperparameters or {}
    parts = ["python -m harness task=glue", f"model={rec.model.get('name')}", f"task.tasks={rec.dataset}"]
    for key, name in (("lr", "task.lr"), ("weight_decay", "task.weight_decay"), ("epochs", "task.epochs"),
                      ("seed", "task.seed")):
        if hp.get(key) is not None:
            parts.append(f"{name}={hp[key]}")
    if hp.get("scoring_protocol", "best_epoch") != "authors":
        parts.append(f"task.scoring_protocol={hp.get('scoring_protocol', 'best_epoch')}")
    return " ".join(parts)


def set_aside_lines(records: Iterable[ResultRecord]) -> list[str]:
    """One line per (model, dataset, reason) of the set-aside ``records``: how many, why, one rerun command."""
    groups: dict[tuple[str, str, str], list[ResultRecord]] = {}
    for r in records:
        aside = (r.details or {}).get("set_aside")
        if aside:
            groups.setdefault((str(r.model.get("name")), r.dataset, str(aside["why"])), []).append(r)
    out = []
    for (model, dataset, why), recs in groups.items():
        first = recs[0].details["set_aside"]
        out.append(f"{model} {dataset}: {len(recs)} record(s) scored by {first['score']} (an earlier default) set "
                   f"aside, not shown beside {first['compared']}: {why}; rerun them, e.g. {rerun_command(recs[0])}")
    return out
