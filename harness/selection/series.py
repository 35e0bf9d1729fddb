"""The best step of a series, from records only: a step's score is the mean over the chosen datasets of its newest
weights' main score, seeds averaged (a step lacking one is not eligible); ``selected/series-<name>.json`` keeps it."""

from __future__ import annotations

import datetime as _dt
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import specs
from harness.core import layout
from harness.core.errors import HarnessError
from harness.core.results import ResultRecord
from harness.selection.rules import group_by, usable

SCHEMA = "harness.series-selection/1"


def series_of(r: ResultRecord) -> dict[str, Any] | None:
    """A record's checkpoint (name, step, folder, fingerprint, ...), or None for a run outside a series."""
    s = (r.details or {}).get("series")
    return s if isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("step"), int) else None


def current(records: Iterable[ResultRecord]) -> dict[int, list[ResultRecord]]:
    """Step -> the usable records of its newest weights (the fingerprint of the step's newest record)."""
    mine = [r for r in records if series_of(r) is not None and usable(r)]
    out = {}
    for step, recs in sorted(group_by(mine, lambda r: int(series_of(r)["step"])).items()):   # type: ignore[index]
        newest = max(recs, key=lambda r: r.created_at)
        fp = series_of(newest)["fingerprint"]   # type: ignore[index]
        out[step] = [r for r in recs if series_of(r)["fingerprint"] == fp]   # type: ignore[index]
    return out


def names(records: Iterable[ResultRecord]) -> dict[str, set[str]]:
    """Series name -> the tasks it has records of."""
    out: dict[str, set[str]] = {}
    for r in records:
        s = series_of(r)
        if s is not None:
            out.setdefault(s["name"], set()).add(r.task)
    return out


@dataclass
class StepScore:
    step: int
    score: float | None
    per_dataset: dict[str, float]
    records: list[ResultRecord]
    missing: list[str] = field(default_factory=list)


def step_scores(recs: Sequence[ResultRecord], datasets: Sequence[str]) -> list[StepScore]:
    """Each step's mean over ``datasets`` of its seed-averaged main score (None where it lacks one)."""
    out = []
    for step, rs in current(recs).items():
        per = group_by(rs, lambda r: r.dataset)
        means = {d: statistics.fmean(float(r.score) for r in per[d]) for d in datasets if d in per}  # type: ignore[arg-type]
        missing = [d for d in datasets if d not in per]
        out.append(StepScore(step, None if missing else statistics.fmean(means.values()), means, rs, missing))
    return out


def _datasets(recs: Sequence[ResultRecord], task: str, given: Sequence[str]) -> list[str]:
    have = sorted({r.dataset for r in recs})
    if given:
        absent = [d for d in given if d not in have]
        if absent:
            raise HarnessError(f"--datasets {','.join(absent)}: the series has no {task} record of "
                               f"{', '.join(absent)} (it has {', '.join(have)}): pass datasets it has")
        return list(given)
    spec = specs.find(task)
    sets = [d for d in (spec.selection.sets if spec else ()) if d in have]
    return sets or have


def choose_step(records: Iterable[ResultRecord], name: str, task: str, datasets: Sequence[str] = ()) -> dict[str, Any]:
    """The best step of series ``name`` on ``task``, as the JSON the selection file holds."""
    recs = [r for r in records if r.task == task and (series_of(r) or {}).get("name") == name and usable(r)]
    if not recs:
        raise HarnessError(f"series {name!r} has no ok {task} record: run it first (python -m harness.series "
                           f"task={task} model.path=<run folder> --name {name}) or pass the --task it was run on")
    use = _datasets(recs, task, datasets)
    scored = step_scores(recs, use)
    eligible = [s for s in scored if s.score is not None]
    if not eligible:
        raise HarnessError(f"no step of series {name!r} has {task} records on every one of {', '.join(use)}: "
                           "complete the missing runs (run the series again) or pass --datasets <those it has>")
    spec = specs.find(task)
    hib = spec.higher_is_better if spec else True
    best = (max if hib else min)(eligible, key=lambda s: (s.score, -s.step if hib else s.step))
    s = series_of(best.records[0]) or {}
    return {
        "schema": SCHEMA, "series": name, "task": task, "metric": best.records[0].main_score, "datasets": use,
        "rule": f"{'highest' if hib else 'lowest'} mean main score over {', '.join(use)} (seeds averaged; the "
                "newest weights of each step); ties: the earlier step",
        "best": {"step": best.step, "score": best.score, "folder": s.get("folder"),
                 "fingerprint": s.get("fingerprint"), "model_name": best.records[0].model.get("name"),
                 "run_ids": sorted({r.run_id for r in best.records})},
        "steps": [{"step": x.step, "score": x.score, "per_dataset": x.per_dataset, "records": len(x.records),
                   **({"missing": x.missing} if x.missing else {})} for x in scored],
        "selected_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def format_choice(choice: dict[str, Any]) -> str:
    """What ``harness.select --series`` prints: each step's score, the best marked, the ineligible ones named."""
    best = choice["best"]["step"]
    lines = [f"series {choice['series']} on {choice['task']}: {choice['rule']}"]
    for s in choice["steps"]:
        mark = "  <- best" if s["step"] == best else ""
        score = f"{s['score']:.4f}" if s["score"] is not None else f"not eligible (no {', '.join(s['missing'])})"
        lines.append(f"  step {s['step']:>8}  {score}{mark}")
    lines.append(f"  best: step {best} ({choice['best']['folder']})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the hand-off to the next stage
#: ``model.path=series:<name>`` (python -m harness.paper): the best step of that series
PREFIX = "series:"


def best_overrides(results_dir: str | Path, name: str) -> list[str]:
    """``model.path=... model.name=...`` of series ``name``'s selected step (selected/ beside ``results_dir``)."""
    from harness.models.weights import fingerprint
    path = layout.selection_path(layout.selection_dir(results_dir), "series", name)
    select = f"python -m harness.select --series {name} --task <validation task> --results {results_dir}"
    try:
        best = json.loads(path.read_text())["best"]
        folder, fp, row = Path(best["folder"]), best["fingerprint"], best["model_name"]
    except FileNotFoundError:
        raise HarnessError(f"series {name!r} has no selected step ({path} does not exist): choose it first with "
                           f"{select}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{path} is not a series selection ({exc}): write it again with {select}") from None
    if not folder.is_dir():
        raise HarnessError(f"the selected step of series {name!r} ({folder}) is gone: restore the checkpoint, or "
                           f"select again among those left ({select})")
    now = fingerprint(folder)
    if now != fp:
        raise HarnessError(f"the selected step of series {name!r} ({folder}) was rewritten since it was selected "
                           f"(fingerprint {now}, selected {fp}): evaluate the series again, then "
                           f"{select}")
    return [f"model.path={folder}", f"model.name={row}"]


def resolve(overrides: list[str], results_dir: str | Path) -> list[str]:
    """``overrides`` with ``model.path=series:<name>`` replaced by that series' selected step (and its row name)."""
    out = []
    for text in overrides:
        key, _, value = text.partition("=")
        if key.lstrip("+") == "model.path" and value.startswith(PREFIX):
            out += best_overrides(results_dir, value[len(PREFIX):])
        else:
            out.append(text)
    named = [o for o in out if o.partition("=")[0].lstrip("+") == "model.name"]
    return [o for o in out if o not in named[:-1]]   # the step's row name wins over a model.name given before it
