"""What each argument of ``harness.compare`` brings, cell by cell: a record or run folder, a model name (what
``harness.select`` selects for it, or why a cell has none), or ``--all`` (the leaderboard's run rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from harness import specs
from harness.core.errors import HarnessError, closest_first
from harness.core.results import STATUS_OK, ResultRecord
from harness.selection.comparable import comparable_records  # one score per column (MRPC/QQP)
from harness.selection.rules import group_by

Cell = tuple[str, str]          # (table, column) as the leaderboard places a record
Located = tuple[Path, ResultRecord]


@dataclass
class Entrant:
    """One compared model: its records per cell (its seeds), the cells withheld (and why), how it was named."""

    label: str
    task: str
    cells: dict[Cell, list[Located]]
    withheld: dict[Cell, str] = field(default_factory=dict)
    how: str = "run"                      # run | selection

    def single(self) -> bool:
        """One record per cell: a run (the randomization test), not a configuration's seeds."""
        return all(len(recs) == 1 for recs in self.cells.values())


@dataclass
class Records:
    """The records under ``--results``, read once."""

    results: Path

    @cached_property
    def all(self) -> list[Located]:
        if not self.results.is_dir():
            raise HarnessError(f"--results {self.results} does not exist: pass the folder the records were "
                               "written to, e.g. --results results")
        return list(comparable_records([self.results], warn=False))


def entrants(args: list[str], records: Records, task: str | None, every: bool,
             labels: Sequence[str] | None = None) -> list[Entrant]:
    """The models compared (``args``, or ``every`` model of ``task``), labelled by ``labels`` or a telling part."""
    if every:
        if not task:
            raise HarnessError("--all needs --task: the task whose models are compared, e.g. --all --task beir")
        names = sorted({str(r.model.get("name")) for _, r in records.all if r.task == task and r.status == STATUS_OK})
        if len(names) < 2:
            raise HarnessError(f"--all: {len(names)} model(s) with ok {task} records under {records.results}; "
                               "a comparison needs two or more")
        args = [*args, *names]
    if len(args) < 2:
        raise HarnessError(f"{len(args)} run(s) given: pass two or more runs or model names, or --all --task "
                           "<task> for every model of a task")
    twice = sorted({a for a in args if args.count(a) > 1})
    if twice:
        raise HarnessError(f"{', '.join(twice)} given more than once: name each run or model once")
    out = [entrant(a, records, task) for a in args]
    tasks = sorted({e.task for e in out})
    if len(tasks) > 1:
        if len(out) == 2:
            raise HarnessError(f"A ({out[0].label}) holds {out[0].task} records and B ({out[1].label}) "
                               f"{out[1].task} ones: different tasks, nothing to compare; pass two runs of the same task")
        raise HarnessError(f"the runs hold records of different tasks ({', '.join(tasks)}): compare runs of one "
                           "task (pass --task to pick a model's records of one)")
    check_distinct(out)
    relabel(out, labels)
    return out


def entrant(arg: str, records: Records, task: str | None) -> Entrant:
    """A run folder or record as that run; a model name as its selection under ``--results``."""
    if Path(arg).exists():
        found = run_records(arg, task)
        return Entrant(arg, found[0][1].task, {specs.column_of(r): [(p, r)] for p, r in found})
    return selected(arg, records, task)


def run_records(arg: str, task: str | None) -> list[Located]:
    """The ok records of the record or folder ``arg`` (one model's, one per dataset, composites left out)."""
    path = Path(arg)
    found = list(comparable_records([path.parent if path.is_file() else path], warn=False))
    if path.is_file():
        found = [(p, r) for p, r in found if p.resolve() == path.resolve()]
        if not found:
            raise HarnessError(f"{arg} is not a harness result record")
    kept = [(p, r) for p, r in found if r.status == STATUS_OK and (task is None or r.task == task)]
    if not kept:
        aside = next((f": {r.error}" for _, r in found if (r.details or {}).get("set_aside")), "")
        raise HarnessError(f"no ok record for {arg}{f' (task {task})' if task else ''}{aside}")
    tasks = sorted({r.task for _, r in kept})
    if len(tasks) > 1:
        raise HarnessError(f"{arg} has records of several tasks ({', '.join(tasks)}): pass --task")
    models = sorted({str(r.model.get("name")) for _, r in kept})
    if len(models) > 1:
        raise HarnessError(f"{arg} holds records of {len(models)} models ({', '.join(models)}): one side is one "
                           "model's run; pass each run's own folder (results/<task>/<model>/<run id>)")
    by = group_by([(p, r) for p, r in kept if r.details.get("aggregate") is None], lambda pr: pr[1].dataset)
    twice = {d: rs for d, rs in by.items() if len({r.run_id for _, r in rs}) > 1}
    if twice:
        d, rs = next(iter(twice.items()))
        runs = ", ".join(sorted(str(p.parent) for p, _ in rs))
        raise HarnessError(f"{arg} has {len(rs)} runs of {d} ({runs}): pass one run folder instead")
    return [rs[0] for _, rs in sorted(by.items())]


def selected(name: str, records: Records, task: str | None) -> Entrant:
    """``name``'s cells as ``harness.select`` picks them (the seeds of the selected configuration), or withheld."""
    from harness.selection import choose
    if not records.results.is_dir():
        raise HarnessError(f"{name} is neither a record, a folder, nor a model under --results {records.results} "
                           "(no such folder); pass --results <folder>")
    mine = [(p, r) for p, r in records.all if r.model.get("name") == name and r.status == STATUS_OK
            and (task is None or r.task == task)]
    tasks = sorted({r.task for _, r in mine})
    if not tasks:
        raise no_model(name, records.results, task, records.all)
    if len(tasks) > 1:
        raise HarnessError(f"model {name} has records of several tasks ({', '.join(tasks)}): pass --task")
    where = {id(r): p for p, r in mine}
    choice = choose(tasks[0], [r for _, r in mine], name).get(name)
    if choice is None:
        raise HarnessError(f"model {name}: the {tasks[0]} selection picks nothing under {records.results}")
    cells = {_cell(c, tasks[0]): [(where[id(r)], r) for r in recs] for c, recs in choice.cells.items()}
    withheld = {_cell(c, tasks[0]): why for c, why in choice.withheld.items()}
    return Entrant(name, tasks[0], cells, withheld, "selection")


def _cell(key: object, task: str) -> Cell:
    return key if isinstance(key, tuple) else (task, str(key))


def no_model(name: str, results: Path, task: str | None, records: list[Located]) -> HarnessError:
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


def same_record(a: Located, b: Located) -> bool:
    """One record (or a copy of it): the same file, or the same cell of the same run written at the same time."""
    (pa, ra), (pb, rb) = a, b
    if pa.resolve() == pb.resolve():
        return True
    keys = ("task", "dataset", "split", "run_id", "created_at")
    return all(getattr(ra, k) == getattr(rb, k) for k in keys) and ra.model.get("name") == rb.model.get("name")


def check_distinct(found: Sequence[Entrant]) -> None:
    """No two arguments name the same run: its records compared with themselves say nothing."""
    for i, x in enumerate(found):
        for y in found[i + 1:]:
            shared = [c for c in x.cells if c in y.cells]
            if shared and all(len(x.cells[c]) == len(y.cells[c]) == 1 and same_record(x.cells[c][0], y.cells[c][0])
                              for c in shared):
                run = x.cells[shared[0]][0][1].run_id
                raise HarnessError(f"{'A' if i == 0 else x.label} ({x.label}) and {'B' if len(found) == 2 else y.label}"
                                   f" ({y.label}) are the same run ({run}): its records compared with themselves; pass "
                                   "two different runs")


def relabel(found: Sequence[Entrant], labels: Sequence[str] | None) -> None:
    """``--labels``, else a model name as given, a record or folder by the shortest name no other row has."""
    if labels:
        if len(labels) != len(found) or len(set(labels)) != len(labels):
            raise HarnessError(f"--labels {','.join(labels)}: give {len(found)} distinct labels, one per run or model "
                               "in the order given")
        for e, label in zip(found, labels, strict=True):
            e.label = label
        return
    runs = [e for e in found if e.how == "run"]
    taken = {e.label for e in found if e.how != "run"}
    for part in (_model, _run_ids, lambda e: f"{_model(e)}/{_run_ids(e)}"):
        names = [part(e) for e in runs]
        if len(set(names)) == len(names) and not taken & set(names):
            for e, name in zip(runs, names, strict=True):
                e.label = name
            return


def _model(e: Entrant) -> str:
    return str(next(iter(e.cells.values()))[0][1].model.get("name"))


def _run_ids(e: Entrant) -> str:
    return "+".join(sorted({r.run_id for recs in e.cells.values() for _, r in recs}))
