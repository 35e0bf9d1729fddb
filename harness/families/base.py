"""The runner interface. A runner is a :class:`Family` (the only harness base class a runner has: the retrieval
tasks share one, :class:`~harness.families.retrieval.RetrievalFamily`, composed from their specs' stages), one
``conf/task/<name>.yaml`` and one entry in :data:`harness.families.REGISTRY`. What a task is (metric, tables,
selection, dependencies) is its spec; the runner types its settings, plans its cells and computes them.

The shared loop (:mod:`harness.runner`) asks a family for its :class:`Cell` s (pure: no model, no data), skips
the cells that already have an ok record, and asks it to run the rest; the family yields result records and the
loop writes them.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from harness import results
from harness.identity import derived_key, run_identity
from harness.results import ResultRecord
from harness.specs import TaskSpec, spec_from, stages
from harness.typed import build, excluded_keys
from harness.work import Work

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from harness.models import ModelSpec


@dataclass(frozen=True)
class Cell:
    """One record to be: a (run, dataset) pair. ``identity`` is what ``run_id`` hashes; ``spec`` is a hash of the
    dataset's definition (an ok record with another spec is out of date); ``payload`` is the family's own.
    ``plan_key``: where the run id holds what only the executing machine knows (the efficiency task's hardware),
    the hash of the identity without it, stored in the record, so a planner elsewhere still finds the record."""

    dataset: str
    run_id: str
    identity: Mapping[str, Any]
    spec: str | None = None
    payload: Any = None
    plan_key: str | None = None


class Family(abc.ABC):
    """A task family: declared by class attributes, run by an instance made from one composed config."""

    settings_class: ClassVar[type]            # typed task settings: unknown keys in cfg.task are an error
    #: keys outside ``task`` (dotted from the config root) that do not change a number, and why (a task key says
    #: so where its settings declare it: :func:`harness.typed.excluded`)
    root_exclude: ClassVar[Mapping[str, str]] = {}
    #: the metrics its scorer produces (a spec's main_metric must be one); None: set per record (GLUE, mteb)
    metrics: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, cfg: DictConfig) -> None:
        from omegaconf import OmegaConf

        self.cfg = cfg
        config = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(config, dict)
        self.config: dict[str, Any] = config
        task = dict(config["task"])
        self.name: str = str(task["name"])    # = the records' ``task`` and the record path's first folder
        self.task_spec: TaskSpec = spec_from(task.pop("spec"), self.name, f"task {self.name!r}, spec")
        self.settings = build(self.settings_class, task, f"task {self.name!r}", key="task")

    @cached_property
    def identity_exclude(self) -> dict[str, str]:
        """Every key (dotted from the config root) that does not change a number, and why; everything else is
        identity. A task's ``kept`` (a settings class attribute): excluded keys its run ids have always hashed."""
        kept = set(getattr(self.settings_class, "kept", ()))
        task = {k: v for k, v in excluded_keys(self.settings_class, "task").items() if k not in kept}
        return {**self.root_exclude, **task}

    # -------------------------------------------------------------------------------- declared by the spec
    @property
    def main_metric(self) -> str:
        return self.task_spec.main_metric

    @property
    def higher_is_better(self) -> bool:
        return self.task_spec.higher_is_better

    @property
    def seed_keys(self) -> tuple[str, ...]:
        """Identity keys that only pick a seed: runs that differ only in these are averaged by selection."""
        return self.task_spec.seed_keys

    def rounds(self) -> Iterator[list[Cell]]:
        """Cells in rounds: a round is planned only after the previous one has run (GLUE: chained tasks start
        from MNLI's records). Most families have one round. ("Stage" means one thing: a step of the computation,
        ``spec.stages``; the paper graph's stages are its SLURM job arrays.)"""
        yield self.cells()

    def part_job(self) -> bool:
        """Whether this run computes only a part of its cells' work (a corpus shard) for another run to merge."""
        return False

    def run_part(self, todo: Sequence[Cell]) -> None:
        """A part job's work (no records)."""
        raise NotImplementedError(f"{type(self).__name__} has no part jobs")

    @abc.abstractmethod
    def cells(self) -> list[Cell]:
        """Every cell the config implies. Pure: reads config (and, at most, records and file hashes), never a
        model or a dataset, so a finished run is skipped without loading anything."""

    @abc.abstractmethod
    def run(self, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
        """Run the cells not done yet and yield one record each (failed ones too, with their error). Setup
        problems (unreachable hub, missing model) are raised, before any record."""

    def check(self, todo: Sequence[Cell]) -> None:
        """Cheap checks before any work on ``todo`` (the model's weights reachable, data folders and files present,
        the hub reachable for hub-only data): raise a HarnessError naming the problem and the fix. Loads no
        model, parses no data. Families add their data checks to this one."""
        self.check_model()

    def check_model(self) -> None:
        """The weights this run loads are reachable (a local folder was checked when planning)."""
        from harness.models import check_available

        check_available(self.spec)

    def work(self, mode: str, skip: Sequence[str] = ()) -> Work:
        """The tokens a job of this run processes, for the paper graph's cost preview (:mod:`harness.work`);
        ``mode`` report: evaluation only, on the datasets not in ``skip``. A runner that does not estimate its work
        reports none."""
        return Work()

    def finish(self, records: Sequence[ResultRecord]) -> None:  # noqa: B027 - optional hook
        """Called once after every stage has run (e.g. GLUE writes its selection)."""

    # -------------------------------------------------------------------------------- shared helpers
    @cached_property
    def spec(self) -> ModelSpec:
        from harness.models import ModelSpec

        return ModelSpec.from_config(self.cfg.model)

    @property
    def model_name(self) -> str:
        """The leaderboard row and the record path's model directory."""
        return self.spec.name

    @cached_property
    def device(self) -> str:
        from harness.models import resolve_device

        return resolve_device(str(self.cfg.device))

    @cached_property
    def precision(self) -> str:
        from harness.models import resolve_precision

        return resolve_precision(str(self.cfg.precision), self.device)

    @cached_property
    def model_ref(self) -> dict[str, Any]:
        from harness.models import model_ref

        return model_ref(self.spec)

    def identity(self, exclude: Sequence[str] = (), replace: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The run identity: resolved config minus the global and family exclusions (and ``exclude``), with the
        resolved precision and the model's content reference in place of ``precision`` and ``model.path``, and the
        protocol version of every stage that computes this run (``protocol``: the spec's stages_for the config); the
        keys only a stage that does not run reads (``spec.stage_keys``) are left out."""
        return run_identity(
            self.config, exclude=[*self.identity_exclude, *self.task_spec.chosen_keys(),
                                  *self.task_spec.unused_keys(self.config), *exclude],
            replace={"precision": self.precision, "model.ref": self.model_ref,
                     "protocol": stages.versions(self.task_spec.stages_for(self.config)), **(replace or {})},
        )

    @property
    def model_info(self) -> dict[str, Any]:
        """The record's model block as the config states it (families that load weights add what they found)."""
        s = self.spec
        return {"name": self.model_name, "path": s.path, "revision": s.revision, "family": s.family, "size": s.size}

    def new_record(self, cell: Cell, *, model: Mapping[str, Any] | None = None, **fields: Any) -> ResultRecord:
        """A record for ``cell`` with the fields every family shares filled in; the model block as it is now (a
        copy: its attention entry goes on counting kernel calls, :mod:`harness.models.kernel_calls`)."""
        model = copy.deepcopy(dict(self.model_info if model is None else model))
        from harness import scheduler
        from harness.hydra_runtime import sweep_name

        fields.setdefault("dataset", cell.dataset)
        fields.setdefault("main_score", self.main_metric)
        fields.setdefault("precision", self.precision)
        rec = ResultRecord(
            task=self.name, model={**model, "ref": self.model_ref}, run_id=cell.run_id, higher_is_better=self.higher_is_better,
            config_id=derived_key(cell.identity, without=self.seed_keys), config=self.config, sweep=sweep_name(),
            experiment=self.cfg.get("experiment"), scheduler=scheduler.facts(), **fields,
        )
        if cell.spec is not None:
            rec.details.setdefault("data_spec", cell.spec)
        if cell.plan_key is not None:
            rec.details.setdefault("plan_key", cell.plan_key)
        return rec

    def tracker(self, cell: Cell, *, folder: bool = True) -> Any:
        """The experiment tracker (``logger=``) of the training run behind ``cell``, labelled with its run id and
        its record path (``folder``: the run's record folder, for a run that writes one record per dataset)."""
        from harness.training import tracking

        path = results.record_path(str(self.cfg.paths.results), self.name, self.model_name, cell.run_id, cell.dataset)
        return tracking.tracker(self.cfg, run_id=cell.run_id, record_path=path.parent if folder else path,
                                task=self.name, model=self.model_name)

    def failed(self, cell: Cell, error: BaseException | str, *, model: Mapping[str, Any] | None = None,
               **fields: Any) -> ResultRecord:
        fields.setdefault("split", "")
        return self.new_record(cell, model=model, metrics={}, status=results.STATUS_FAILED, error=str(error), **fields)
