"""Which records each model of a many-model comparison brings, cell by cell: a run folder or record (that run),
a model name (what ``harness.select`` selects for it: a seed-averaged configuration, or why a cell has none), or
``--all`` (every model with records of the task: the leaderboard's run rows)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness import specs
from harness.compare.records import no_model, resolve
from harness.errors import HarnessError
from harness.results import STATUS_OK, ResultRecord
from harness.selection.comparable import comparable_records  # one score per column (MRPC/QQP)

Cell = tuple[str, str]          # (table, column) as the leaderboard places a record
Located = tuple[Path, ResultRecord]


@dataclass
class Entrant:
    """One model in the comparison: its records per cell (several: the seeds of its selected configuration),
    the cells its selection withheld (and why), and how it was named."""

    label: str
    task: str
    cells: dict[Cell, list[Located]]
    withheld: dict[Cell, str] = field(default_factory=dict)
    how: str = "run"                      # run | selection


class Records:
    """The records under ``--results``, read once."""

    def __init__(self, results: Path) -> None:
        self.results = results
        self._all: list[Located] | None = None

    def all(self) -> list[Located]:
        if self._all is None:
            if not self.results.is_dir():
                raise HarnessError(f"--results {self.results} does not exist: pass the folder the records were "
                                   "written to, e.g. --results results")
            self._all = list(comparable_records([self.results], warn=False))
        return self._all


def entrants(args: list[str], records: Records, task: str | None, every: bool) -> list[Entrant]:
    """The models compared: ``args`` (paths or model names), or with ``every`` all models of ``task``."""
    if every:
        if not task:
            raise HarnessError("--all needs --task: the task whose models are compared, e.g. --all --task beir")
        names = sorted({str(r.model.get("name")) for _, r in records.all() if r.task == task and r.status == STATUS_OK})
        if len(names) < 2:
            raise HarnessError(f"--all: {len(names)} model(s) with ok {task} records under {records.results}; "
                               "a comparison needs two or more")
        args = [*args, *names]
    twice = sorted({a for a in args if args.count(a) > 1})
    if twice:
        raise HarnessError(f"{', '.join(twice)} given more than once: name each run or model once")
    out = [entrant(a, records, task) for a in args]
    tasks = sorted({e.task for e in out})
    if len(tasks) > 1:
        raise HarnessError(f"the runs hold records of different tasks ({', '.join(tasks)}): compare runs of one "
                           "task (pass --task to pick a model's records of one)")
    return out


def entrant(arg: str, records: Records, task: str | None) -> Entrant:
    """A run folder or record as that run; a model name as its selection under ``--results``."""
    if Path(arg).exists():
        side = resolve(arg, records.results, task)
        cells = {specs.column_of(r): [(p, r)] for p, r in side.records.values()}
        return Entrant(arg, side.task, cells)
    return selected(arg, records, task)


def selected(name: str, records: Records, task: str | None) -> Entrant:
    """``name``'s cells as ``harness.select`` picks them: per cell the runs (seeds) of the selected configuration;
    a cell with no complete configuration is withheld, with the selection's reason."""
    from harness.selection import choose

    if not records.results.is_dir():
        raise HarnessError(f"{name} is neither a record, a folder, nor a model under --results {records.results} "
                           "(no such folder); pass --results <folder>")
    mine = [(p, r) for p, r in records.all() if r.model.get("name") == name and r.status == STATUS_OK
            and (task is None or r.task == task)]
    tasks = sorted({r.task for _, r in mine})
    if not tasks:
        raise no_model(name, records.results, task, records.all())
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
