"""Which records a ``harness.compare`` argument names: a record file, a run folder, or a model name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError, closest_first
from harness.results import STATUS_OK, ResultRecord
from harness.selection.comparable import comparable_records  # one score per column (MRPC/QQP)


class SeveralRuns(HarnessError):
    """A model name with several runs of one dataset: a seed-averaged selection (the many-model comparison)."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a label and its ok records by dataset (with their paths)."""

    label: str
    records: dict[str, tuple[Path, ResultRecord]]
    task: str = ""


def resolve(arg: str, results: Path, task: str | None) -> Side:
    """``arg``: a record (``.json``), a folder of records (a run), or a model name under ``results`` (``task``
    picks among its tasks). One ok record per dataset, else a one-line error saying how to narrow it."""
    path = Path(arg)
    if path.is_file():
        found = list(comparable_records([path.parent], warn=False))
        found = [(p, r) for p, r in found if p.resolve() == path.resolve()]
        if not found:
            raise HarnessError(f"{arg} is not a harness result record")
        where = arg
    elif path.is_dir():
        found, where = list(comparable_records([path], warn=False)), arg
    else:
        if not results.is_dir():
            raise HarnessError(f"{arg} is neither a record, a folder, nor a model under --results {results} "
                               "(no such folder); pass --results <folder>")
        everything = list(comparable_records([results], warn=False))
        found = [(p, r) for p, r in everything if r.model.get("name") == arg]
        where = f"model {arg} in {results}"
        if not any(r.status == STATUS_OK and (task is None or r.task == task) for _, r in found):
            raise no_model(arg, results, task, everything)
    kept = [(p, r) for p, r in found if r.status == STATUS_OK and (task is None or r.task == task)]
    if not kept:
        aside = next((f": {r.error}" for _, r in found if (r.details or {}).get("set_aside")), "")
        raise HarnessError(f"no ok record for {where}{f' (task {task})' if task else ''}{aside}")
    found = kept
    tasks = sorted({r.task for _, r in found})
    if len(tasks) > 1:
        raise HarnessError(f"{where} has records of several tasks ({', '.join(tasks)}): pass --task")
    by: dict[str, list[tuple[Path, ResultRecord]]] = {}
    for p, r in found:
        if r.details.get("aggregate") is None:   # composite averages have no per-query scores of their own
            by.setdefault(r.dataset, []).append((p, r))
    twice = {d: rs for d, rs in by.items() if len({r.run_id for _, r in rs}) > 1}
    if twice:
        d, rs = next(iter(twice.items()))
        runs = ", ".join(sorted(str(p.parent) for p, _ in rs))
        raise (SeveralRuns if not path.exists() else HarnessError)(
            f"{where} has {len(rs)} runs of {d} ({runs}): pass one run folder instead")
    label = arg if path.exists() else f"{arg} ({tasks[0]})"
    return Side(label, {d: rs[0] for d, rs in sorted(by.items())}, tasks[0])


def no_model(name: str, results: Path, task: str | None, records: list[tuple[Path, ResultRecord]]) -> HarnessError:
    """A model name with no ok record (of ``task``) under ``results``: the models that have one, closest first."""
    ok = [r for _, r in records if r.status == STATUS_OK and (task is None or r.task == task)]
    models = closest_first(name, {str(r.model.get("name")) for r in ok})
    mine = [r for _, r in records if r.model.get("name") == name]
    had = f" (it has {len(mine)} record(s), none ok{f' for task {task}' if task else ''})" if mine else ""
    listed = (f"models with ok records there{f' for task {task}' if task else ''} (closest first): "
              f"{', '.join(models[:12])}{' ...' if len(models) > 12 else ''}" if models else "no model has an ok "
              "record there")
    return HarnessError(f"no ok record for model {name} in {results}{had}; {listed}. Pass one of them, a record "
                        "(.json) or a run folder, or --results <folder>")
