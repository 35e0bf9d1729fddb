"""A run as a value: :class:`RunPlan` is everything :func:`harness.planning.plan` resolves from one composed config
(the typed nodes, the model, device, precision, seed, learning rate, lineage, the cells, where files go, the record
header, the work estimate), and what the computing stages receive. Nothing here imports torch or a runner.

A :class:`Cell` is one record to be; the :class:`RecordHeader` turns a cell and what a stage measured into a
:class:`~harness.results.ResultRecord` (the fields every record of the run shares filled in), so compute returns
records without holding anything but values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness import results
from harness.identity import derived_key
from harness.layout import RunLayout
from harness.results import ResultRecord
from harness.work import Work


@dataclass(frozen=True)
class Cell:
    """One record to be: a (run, dataset) pair. ``identity`` is what ``run_id`` hashes; ``spec`` is a hash of the
    dataset's definition (an ok record with another spec is out of date); ``payload`` is the runner's own.
    ``plan_key``: where the run id holds what only the executing machine knows (the efficiency task's hardware),
    the hash of the identity without it, stored in the record, so a planner elsewhere still finds the record."""

    dataset: str
    run_id: str
    identity: Mapping[str, Any]
    spec: str | None = None
    payload: Any = None
    plan_key: str | None = None


@dataclass(frozen=True)
class RecordHeader:
    """What every record of one run shares: its task, model block and content reference, main score and direction,
    precision, the composed config, the keys that only pick a seed (``config_id`` leaves them out), the
    hyperparameters and details the run shows on every record (a failed one too)."""

    task: str
    model: Mapping[str, Any]
    model_ref: Mapping[str, Any]
    main_score: str
    higher_is_better: bool
    precision: str
    config: Mapping[str, Any]
    seed_keys: tuple[str, ...] = ()
    experiment: str | None = None
    hyperparameters: Mapping[str, Any] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def record(self, cell: Cell, *, model: Mapping[str, Any] | None = None, **fields: Any) -> ResultRecord:
        """A record of ``cell``: ``fields`` (metrics, split, details, ...) over the shared ones."""
        from harness import scheduler

        fields.setdefault("dataset", cell.dataset)
        fields.setdefault("main_score", self.main_score)
        fields.setdefault("precision", self.precision)
        if self.hyperparameters is not None:
            fields.setdefault("hyperparameters", copy.deepcopy(dict(self.hyperparameters)))
        block = copy.deepcopy(dict(self.model if model is None else model))   # as it is now: its attention entry
        # goes on counting kernel calls (harness.models.kernel_calls)
        rec = ResultRecord(
            task=self.task, model={**block, "ref": dict(self.model_ref)}, run_id=cell.run_id,
            higher_is_better=self.higher_is_better, config_id=derived_key(cell.identity, without=self.seed_keys),
            config=dict(self.config), sweep=scheduler.sweep_name(), experiment=self.experiment, scheduler=scheduler.facts(),
            **fields,
        )
        if cell.spec is not None:
            rec.details.setdefault("data_spec", cell.spec)
        if cell.plan_key is not None:
            rec.details.setdefault("plan_key", cell.plan_key)
        for key, value in self.details.items():
            rec.details.setdefault(key, copy.deepcopy(value))   # failed records too: the right column
        return rec

    def failed(self, cell: Cell, error: BaseException | str, *, model: Mapping[str, Any] | None = None,
               **fields: Any) -> ResultRecord:
        """A failed record of ``cell`` saying ``error``."""
        fields.setdefault("split", "")
        return self.record(cell, model=model, metrics={}, status=results.STATUS_FAILED, error=str(error), **fields)


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """One run, resolved. ``cells``: this round's (``later``: another round is planned once these have run: GLUE's
    chained tasks start from MNLI's records); ``work``: what its job processes (``mode`` run or report);
    ``compute``: the function that computes its cells (``compute(plan, todo)`` yields records, failed ones too);
    ``part``: a shard job (computes a part into the cache, writes no record); ``stages``: the runner's own resolved
    facts its stages read (a value: the retrieval stages' :class:`~harness.stages.context.RetrievalStages`)."""

    task: str
    runner: str
    model_name: str
    spec: Any                       # the task's TaskSpec
    settings: Any                   # the typed task settings (the nodes of its stages)
    model: Any                      # the ModelSpec
    device: str
    precision: str
    seed: int
    lr: float | None
    trains: bool
    lineage: Any = None             # families.lineage.Lineage, where the task evaluates another run's weights
    cells: list[Cell]
    later: bool = False
    layout: RunLayout
    header: RecordHeader
    work: Work
    config: Mapping[str, Any]       # the resolved config, as records carry it
    overwrite: bool = False
    save_run: bool = False
    part: bool = False
    compute: Any = None
    check: Any = None               # check(plan, todo): cheap checks before any work (data present, weights)
    fitted: Mapping[str, int] = field(default_factory=dict)   # lengths (by config key) the model must position
    weights: str | None = None      # the local folder of the weights it loads (None: a hub id or a package)
    finish: Any = None              # finish(plan, planned cells, records): after every round (GLUE's selection)
    stages: Any = None

    def record_path(self, cell: Cell, dataset: str | None = None) -> Any:
        """Where ``cell``'s record (or a composite member's, ``dataset``) is written."""
        return self.layout.record(self.task, self.model_name, cell.run_id, dataset or cell.dataset)


def done(rec: ResultRecord | None, cell: Cell, *, overwrite: bool) -> bool:
    """The one answer to "is this cell done?", for the runner (:func:`pending`), the paper graph and the series
    (:func:`harness.paper.plan.plan_run`): ``rec``, the finished (ok or skipped) record found for the cell, is of
    the same definition (a local dataset that now holds other data has another ``data_spec``: the runner evaluates
    it again) and the run is not to be redone (``overwrite``)."""
    return rec is not None and not overwrite and not stale(rec, cell)


def stale(rec: ResultRecord, cell: Cell) -> bool:
    """Whether ``rec`` was computed on other data than ``cell``'s dataset holds now (its ``data_spec`` differs)."""
    return cell.spec is not None and rec.details.get("data_spec") != cell.spec


def pending(plan: RunPlan, cells: Sequence[Cell]) -> list[Cell]:
    """The cells of ``plan`` that are not :func:`done` (all of them with ``overwrite``)."""
    import logging

    log = logging.getLogger("harness.runner")
    todo = []
    for cell in cells:
        rec = results.finished_record(plan.layout.results, plan.task, plan.model_name, cell.run_id, cell.dataset)
        if not done(rec, cell, overwrite=plan.overwrite):
            todo.append(cell)
        else:
            log.info("skip %s/%s: record exists for run %s (overwrite=true to redo)", plan.task, cell.dataset,
                     cell.run_id)
    return todo
