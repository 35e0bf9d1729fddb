"""A run as a value: :class:`RunPlan` (all planning resolves from one composed config, what the computing stages
receive), :class:`Setup`, and what every planner shares (identity, record header, model checks); no torch."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from harness.core import results
from harness.core.identity import derived_key, drop, run_identity
from harness.core.layout import RunLayout, record_path
from harness.core.results import ResultRecord
from harness.core.work import Work
from harness.models.spec import ModelSpec
from harness.specs.schema import TaskSpec
from harness.specs.stages import Stage, declared, versions

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from harness.core.registry import Registry

S = TypeVar("S")    # a task's typed settings (the nodes of its stages)
T = TypeVar("T")    # what its stages read beyond the plan's own values (RetrievalStages, GlueStages, ...)


# The paper evaluates MLDR (out-of-domain), CodeSearchNet and StackOverflow-QA with task=beir's DPR model trained on MS
# MARCO. ``task.source`` names it (``selected``, a run id, or null: model.path as is); planning resolves it into a
# Lineage whose run id and weights' fingerprint replace ``model.ref`` in the run identity (``details.lineage``).
@dataclass(kw_only=True)
class SourceSettings:
    """``task.source``: the weights a run evaluates."""

    task: str | None                # the family whose trained runs are read (null: none, model.path as is)
    run: str | None                 # selected | <run id> | null (model.path as is)
    required: bool                  # run=selected and this model has no run: error (true) or model.path (false)
    results: str | None             # where that family's records are read (null: paths.results)


@dataclass(frozen=True)
class Lineage:
    """The resolved source: ``model_dir`` is None when ``model.path`` itself is evaluated."""

    mode: str                       # selected | run | model
    task: str | None = None
    run_id: str | None = None
    model_dir: str | None = None    # the run's trained model directory
    fingerprint: str | None = None  # its weights fingerprint, as the run recorded it
    lr: float | None = None         # the run's learning rate (the selected DPR LR)
    note: str = ""

    def ref(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """What the run identity hashes instead of ``model.ref``."""
        if self.model_dir is None:
            return {**base, **({"source_run": self.run_id, "source_task": self.task} if self.run_id else {})}
        return {"fingerprint": self.fingerprint, "source_run": self.run_id, "source_task": self.task}

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}

    def loaded(self, block: Mapping[str, Any], path: str) -> dict[str, Any]:
        """A loaded model's record block with this source's lineage, its weights checked to be the source's."""
        from harness.core.errors import HarnessError
        if self.model_dir and self.fingerprint and block["fingerprint"] != self.fingerprint:
            raise HarnessError(
                f"the weights in {self.model_dir} changed since task={self.task} run {self.run_id} recorded them "
                f"(fingerprint {block['fingerprint']} != {self.fingerprint}); re-run that configuration or pass "
                "the directory as model.path=<dir> with task.source.run=null."
            )
        return {"path": path, "lineage": self.record()}


def weights_of(plan: RunPlan[Any, Any]) -> ModelSpec:
    """The model spec a run loads: ``model.path``, or a trained source run's weights."""
    lin = plan.lineage
    return replace(plan.model, path=lin.model_dir) if lin is not None and lin.model_dir else plan.model


#: why ``task.source`` is left out of the run identity: it is hashed as what it resolves to
SOURCE = "resolved into model.ref: the source run id and its trained weights' fingerprint"


@dataclass(frozen=True)
class Cell:
    """One record to be: a (run, dataset) pair. ``spec``: a hash of the dataset's definition and local files (another
    spec: out of date); ``plan_key``: the identity's hash without what only the executing machine knows;
    ``data_free_key``: where the files' content is in the run id (GLUE), its hash with their paths instead."""

    dataset: str
    run_id: str
    identity: Mapping[str, Any]
    spec: str | None = None
    payload: Any = None
    plan_key: str | None = None
    files: Mapping[str, Any] | None = None
    data_free_key: str | None = None


def with_files(spec: str, files: Mapping[str, Any] | None) -> str:
    """A data spec that also holds what the local files hold; unchanged where nothing local is read."""
    return spec if not files else results.stable_hash({"data": spec, "files": files["fingerprint"]})


def data_free_key(identity: Mapping[str, Any], content_keys: Sequence[str], paths: Sequence[Any]) -> str:
    """The identity less the ``content_keys`` that hash local files' contents, with those files' ``paths``."""
    return results.stable_hash({"identity": drop(identity, content_keys),
                                "files": sorted(str(Path(p).expanduser().resolve()) for p in paths)})


@dataclass(frozen=True)
class RecordHeader:
    """What every record of one run shares: task, model, score, direction, precision, config, seed keys, details."""

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
        from harness.core import scheduler
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
            config=dict(self.config), sweep=scheduler.sweep_name(), experiment=self.experiment,
            scheduler=scheduler.facts(), **fields)
        if cell.spec is not None:
            rec.details.setdefault("data_spec", cell.spec)
        if cell.plan_key is not None:
            rec.details.setdefault("plan_key", cell.plan_key)
        if cell.files:
            rec.details.setdefault("data_files", copy.deepcopy(dict(cell.files)))
        if cell.data_free_key is not None:
            rec.details.setdefault("data_free_key", cell.data_free_key)
        for key, value in self.details.items():
            rec.details.setdefault(key, copy.deepcopy(value))   # failed records too: the right column
        return rec

    def failed(self, cell: Cell, error: BaseException | str, *, model: Mapping[str, Any] | None = None,
               **fields: Any) -> ResultRecord:
        """A failed record of ``cell`` saying ``error``."""
        fields.setdefault("split", "")
        return self.record(cell, model=model, metrics={}, status=results.STATUS_FAILED, error=str(error), **fields)


@dataclass(frozen=True, kw_only=True)
class RunPlan(Generic[S, T]):
    """One run, resolved. ``cells``: this round's (``later``: another round follows, GLUE's chained tasks); ``work``:
    what its job processes; ``compute(plan, todo)`` yields records (a ``part`` job none); ``check(plan, todo)``:
    cheap checks first; ``fitted``: lengths the model must position; ``weights``: their folder (None: hub, package);
    ``select_after``: selection after an in-process sweep (GLUE); ``stages``: what its stages read beyond these."""

    task: str
    model_name: str
    settings: S
    model: ModelSpec
    device: str
    precision: str
    seed: int
    lr: float | None
    trains: bool
    lineage: Lineage | None
    cells: list[Cell]
    later: bool
    layout: RunLayout
    header: RecordHeader
    work: Work
    config: Mapping[str, Any]
    overwrite: bool
    save_run: bool
    part: bool = False
    compute: Callable[[RunPlan[S, T], Sequence[Cell]], Iterable[ResultRecord] | None]
    check: Callable[[RunPlan[S, T], Sequence[Cell]], None]
    fitted: Mapping[str, int]
    weights: str | None
    select_after: bool = False
    stages: T

    def record_path(self, cell: Cell, dataset: str | None = None) -> Path:
        """Where ``cell``'s record (or a composite member's, ``dataset``) is written."""
        return record_path(self.layout.results, self.task, self.model_name, cell.run_id, dataset or cell.dataset)


@dataclass(frozen=True, kw_only=True)
class Setup:
    """What planning resolves before a task's planner: config, spec, layout; the model, device and source when asked."""

    cfg: DictConfig
    config: dict[str, Any]
    task: dict[str, Any]            # the config's task node, without its spec: what the task's settings type
    name: str
    spec: TaskSpec
    layout: RunLayout
    resolve_source: Callable[[], Lineage | None] | None = None

    @cached_property
    def model(self) -> ModelSpec:
        return ModelSpec.from_config(self.cfg.model)

    @cached_property
    def device(self) -> str:
        from harness.models import resolve_device
        return resolve_device(str(self.cfg.device))

    @cached_property
    def lineage(self) -> Lineage | None:
        return None if self.resolve_source is None else self.resolve_source()

    @cached_property
    def precision(self) -> str:
        """The resolved top-level ``precision`` (a task with its own precision key resolves that instead)."""
        from harness.models import resolve_precision
        return resolve_precision(str(self.cfg.precision), self.device)

    @cached_property
    def model_ref(self) -> dict[str, Any]:
        """The model's content reference (with a source run: that run and its trained weights' fingerprint)."""
        from harness.models import model_ref
        if self.lineage is None:
            return model_ref(self.model)
        return self.lineage.ref({} if self.lineage.model_dir is not None else model_ref(self.model))

    def weights_dir(self) -> str | None:
        """The local folder of the weights the run loads (None: a hub id or a package)."""
        if self.lineage is not None and self.lineage.model_dir is not None:
            return self.lineage.model_dir
        path = Path(str(self.model.path)).expanduser()
        return str(path) if path.is_dir() else None

    def identity(self, stages: Registry[Stage], exclude: Mapping[str, str], *, precision: str | None = None,
                 without: Sequence[str] = (), replace: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The run identity: the config less excluded keys, with precision, model reference and stage versions."""
        spec = self.spec
        for stage in spec.stage_keys:
            declared(stages, stage)   # an unknown stage fails with the closest names
        return run_identity(
            self.config, exclude=[*exclude, *spec.chosen_keys(), *spec.unused_keys(self.config), *without],
            replace={"precision": precision or self.precision, "model.ref": self.model_ref,
                     "protocol": versions(stages, spec.stages_for(self.config)), **(replace or {})},
        )

    def header(self, precision: str | None = None, **fields: Any) -> RecordHeader:
        """What every record of the run shares (``fields``: the task's hyperparameters and details)."""
        m, spec = self.model, self.spec
        model = {"name": m.name, "path": m.path, "revision": m.revision, "family": m.family, "size": m.size}
        return RecordHeader(task=self.name, model=model, model_ref=self.model_ref, main_score=spec.main_metric,
                            higher_is_better=spec.higher_is_better, precision=precision or self.precision,
                            config=self.config, seed_keys=spec.seed_keys, experiment=self.cfg.get("experiment"),
                            **fields)


def excluded_keys(settings_class: type, root: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every key (dotted from the root) that changes no number, and why, less the settings' ``kept`` ones."""
    from harness.core.typed import excluded_keys as declared
    kept = set(getattr(settings_class, "kept", ()))
    return {**(root or {}), **{k: v for k, v in declared(settings_class, "task").items() if k not in kept}}


def check_model(plan: RunPlan[Any, Any], todo: Sequence[Cell]) -> None:
    """Every run's first check, loading nothing: the attention is available, weights reachable, lengths fit."""
    from harness.models import _check_attn, check_available
    _check_attn(plan.model)
    if plan.lineage is None or plan.lineage.model_dir is None:
        check_available(plan.model)
    if plan.fitted and plan.weights is not None:
        from harness.models.positions import check_length, positions_in
        n = positions_in(plan.weights)
        for key, length in plan.fitted.items():
            check_length(n, length, plan.model_name, key)


def done(rec: ResultRecord | None, cell: Cell, *, overwrite: bool) -> bool:
    """The one answer to "is this cell done?": a finished record of the same definition, and no ``overwrite``."""
    return rec is not None and not overwrite and not stale(rec, cell)


def stale(rec: ResultRecord, cell: Cell) -> bool:
    """Whether ``rec`` was computed on other data than ``cell``'s dataset holds now (its ``data_spec`` differs)."""
    return cell.spec is not None and rec.details.get("data_spec") != cell.spec


def pending(plan: RunPlan[Any, Any], cells: Sequence[Cell]) -> list[Cell]:
    """The cells of ``plan`` that are not :func:`done` (all of them with ``overwrite``)."""
    import logging
    log = logging.getLogger("harness.runner")
    todo = []
    for cell in cells:
        if not done(results.finished_at(plan.record_path(cell)), cell, overwrite=plan.overwrite):
            todo.append(cell)
        else:
            log.info("skip %s/%s: record exists for run %s (overwrite=true to redo)", plan.task, cell.dataset,
                     cell.run_id)
    return todo
