"""The schema of a task spec (``spec:`` of ``conf/task/<name>.yaml``, :class:`TaskSpec`): its metric, leaderboard place,
selection, stages and dependencies; the selection, the leaderboard and the paper graph read only specs and records."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError
from harness.core.identity import dotted
from harness.core.typed import build, choices

if TYPE_CHECKING:
    from harness.core.results import ResultRecord


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    """One leaderboard table: ``columns`` (None: the records' datasets) and ``scale`` (None: x100 if 0-1)."""

    id: str
    label: str                      # short name: filters, charts
    title: str                      # table heading
    columns: tuple[str, ...] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    scale: float | None = None
    decimals: int = 1
    note: str = ""
    average: bool = True            # with ``columns``: add a mean over them (not for mixed units, e.g. Table 2)
    column_scale: Mapping[str, float] = field(default_factory=dict)     # per-column overrides of ``scale``
    column_decimals: Mapping[str, int] = field(default_factory=dict)    # ... and of ``decimals``


@dataclass(frozen=True, kw_only=True)
class Placement:
    """The column a record fills: ``column`` formatted with its dataset, split and details, plus suffixes."""

    column: str = "{dataset}"
    defaults: Mapping[str, str] = field(default_factory=dict)
    suffixes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def column_of(self, record: ResultRecord) -> str:
        details = record.details or {}
        values = {**self.defaults, **{k: str(v) for k, v in details.items()},
                  "dataset": record.dataset, "split": record.split}
        col = self.column.format_map(values)
        return col + "".join(m.get(str(details.get(k)), "") for k, m in self.suffixes.items())


@dataclass(frozen=True, kw_only=True)
class ExtraColumn:
    """A further cell from another metric: ``metric`` in ``columns[dataset]`` of the first table (Table 2's BS)."""

    metric: str
    columns: Mapping[str, str]


@dataclass(frozen=True, kw_only=True)
class SelectionSpec:
    """The selection rule by name (:data:`harness.selection.rules.RULES`) and its selection datasets."""

    rule: str
    sets: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Dependency:
    """What a task needs first: the ``selection`` (or every ``record``) of ``task``, carried in by the key ``via``."""

    task: str
    needs: str = choices("selection", "records", default="selection")
    via: str
    task_key: str | None = None
    datasets: tuple[str, ...] = ()
    for_datasets: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TaskSpec:
    """What a task is: ``runner`` its computation; ``stages``, whose protocol versions enter its run identity."""

    runner: str
    main_metric: str
    higher_is_better: bool = True
    seed_keys: tuple[str, ...] = ("seed",)
    tables: tuple[TableSpec, ...]
    placement: Placement = field(default_factory=Placement)
    extra_columns: tuple[ExtraColumn, ...] = ()
    selection: SelectionSpec
    stages: tuple[str, ...]
    #: ``{stage: {dotted config key: value}}``: a stage that runs only under these values (MLDR's ColBERT stages
    #: only with ``task.retriever: multi_vector``); it versions only the runs it computes
    stage_when: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``{stage: [dotted config keys]}``: keys only that stage reads; a run that does not compute the stage leaves
    #: them out of its identity (MLDR's ``task.multi_vector`` node is read by ``retrieve.multi_vector`` alone)
    stage_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    depends_on: tuple[Dependency, ...] = ()
    name: str = ""                  # filled from the task config's ``name``

    def stages_for(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        """The stages that compute a run of ``config`` (``retrieve.{task.retriever}``: filled in)."""
        def holds(stage: str) -> bool:
            return all(dotted(config, key) == value for key, value in self.stage_when.get(stage, {}).items())

        return tuple(_filled(s, config) for s in self.stages if holds(s))

    def unused_keys(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        """The ``stage_keys`` of the stages that do not compute a run of ``config``."""
        active = set(self.stages_for(config))
        return tuple(k for stage, keys in self.stage_keys.items() if stage not in active for k in keys)

    def chosen_keys(self) -> tuple[str, ...]:
        """The config keys stage names are filled from (a run's ``protocol`` holds them: not hashed again)."""
        return tuple(k for s in self.stages for k in _TEMPLATE.findall(s))

    def column_of(self, record: ResultRecord) -> tuple[str, str]:
        """(table id, column) of a record; selection rules treat each column as a dataset."""
        return self.tables[0].id, self.placement.column_of(record)

    def extra_cells(self, record: ResultRecord) -> list[tuple[str, str, str]]:
        """(table, column, metric) of the further cells ``record`` fills."""
        return [(self.tables[0].id, x.columns[record.dataset], x.metric) for x in self.extra_columns
                if record.dataset in x.columns and x.metric in (record.metrics or {})]


def spec_from(node: Mapping[str, Any], name: str, where: str) -> TaskSpec:
    """A typed spec from a mapping (a YAML node or a record's config), named ``name``."""
    spec = replace(build(TaskSpec, node, where), name=name)
    stray = sorted(set(spec.stage_when) - set(spec.stages))
    if stray:
        raise HarnessError(f"{where}: stage_when names {', '.join(stray)}, which stages does not list; "
                           f"list it under stages or drop it from stage_when")
    return spec


_TEMPLATE = re.compile(r"\{([\w.]+)\}")


def _filled(stage: str, config: Mapping[str, Any]) -> str:
    return _TEMPLATE.sub(lambda m: str(dotted(config, m.group(1))), stage)
