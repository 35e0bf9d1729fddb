"""How a task is planned. A task family is a :class:`Family` (the only harness base class a planner has: the
retrieval tasks share one, :class:`~harness.tasks.retrieval.planner.RetrievalFamily`, composed from their specs' stages),
one ``conf/task/<name>.yaml`` and one entry in :data:`harness.tasks.planners.REGISTRY`. What a task is (metric, tables,
selection, dependencies) is its spec; the family types its settings and plans: :meth:`Family.plan` is the
:class:`~harness.tasks.runplan.RunPlan` of one composed config (pure: no model, no data), with the function that
computes its cells (:mod:`harness.tasks.retrieval.stages`, given the plan, never the family).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness.core.identity import run_identity
from harness.core.typed import build, excluded_keys
from harness.core.work import Work
from harness.specs import TaskSpec, spec_from, stages
from harness.tasks.retrieval.stages import check_model
from harness.tasks.runplan import Cell, RecordHeader, RunPlan

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from harness.models import ModelSpec


class Family(abc.ABC):
    """A task family: declared by class attributes, run by an instance made from one composed config."""

    settings_class: ClassVar[type]            # typed task settings: unknown keys in cfg.task are an error
    #: keys outside ``task`` (dotted from the config root) that do not change a number, and why (a task key says
    #: so where its settings declare it: :func:`harness.core.typed.excluded`)
    root_exclude: ClassVar[Mapping[str, str]] = {}
    #: the metrics its scorer produces (a spec's main_metric must be one); None: set per record (GLUE, mteb)
    metrics: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, cfg: DictConfig, spec: TaskSpec | None = None) -> None:
        """``spec``: the task's spec, where the caller parsed it already (:func:`harness.run.planning.family_of`)."""
        from omegaconf import OmegaConf

        self.cfg = cfg
        config = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(config, dict)
        self.config: dict[str, Any] = config
        task = dict(config["task"])
        self.name: str = str(task["name"])    # = the records' ``task`` and the record path's first folder
        raw = task.pop("spec")
        self.task_spec: TaskSpec = spec or spec_from(raw, self.name, f"task {self.name!r}, spec")
        self.settings = build(self.settings_class, task, f"task {self.name!r}", key="task")

    @cached_property
    def identity_exclude(self) -> dict[str, str]:
        """Every key (dotted from the config root) that does not change a number, and why; everything else is
        identity. A task's ``kept`` (a settings class attribute): excluded keys its run ids have always hashed."""
        kept = set(getattr(self.settings_class, "kept", ()))
        task = {k: v for k, v in excluded_keys(self.settings_class, "task").items() if k not in kept}
        return {**self.root_exclude, **task}

    def rounds(self) -> list[Callable[[], list[Cell]]]:
        """What plans each round's cells: a round is planned only after the previous one has run (GLUE: chained
        tasks start from MNLI's records). Most families have one round. ("Stage" means one thing: a step of the
        computation, ``spec.stages``; the paper graph's stages are its SLURM job arrays.)"""
        return [self.cells]

    @abc.abstractmethod
    def cells(self) -> list[Cell]:
        """Every cell the config implies. Pure: reads config (and, at most, records and file hashes), never a
        model or a dataset, so a finished run is skipped without loading anything."""

    def fitted_lengths(self) -> dict[str, int]:
        """The token lengths (by config key) the encoder must be able to position; checked from its config before
        it is loaded (:func:`harness.tasks.retrieval.stages.check_model`). None by default."""
        return {}

    def weights_dir(self) -> str | None:
        """The local folder of the weights this run loads (None: a hub id or a package, checked when loaded)."""
        path = Path(str(self.spec.path)).expanduser()
        return str(path) if path.is_dir() else None

    def work(self, mode: str, skip: Sequence[str] = ()) -> Work:
        """The tokens a job of this run processes, for the paper graph's cost preview (:mod:`harness.core.work`);
        ``mode`` report: evaluation only, on the datasets not in ``skip``. A runner that does not estimate its work
        reports none."""
        return Work()

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

    def header(self, **fields: Any) -> RecordHeader:
        """What every record of this run shares (``fields``: the family's hyperparameters and details): the model
        block as the config states it (families that load weights add what they found), the spec's main metric,
        direction and the keys that only pick a seed (runs that differ only in these are averaged by selection)."""
        s, spec = self.spec, self.task_spec
        model = {"name": self.model_name, "path": s.path, "revision": s.revision, "family": s.family, "size": s.size}
        return RecordHeader(task=self.name, model=model, model_ref=self.model_ref, main_score=spec.main_metric,
                            higher_is_better=spec.higher_is_better, precision=self.precision, config=self.config,
                            seed_keys=spec.seed_keys, experiment=self.cfg.get("experiment"), **fields)

    # -------------------------------------------------------------------------------- the plan
    def plan(self, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0) -> RunPlan:
        """The :class:`~harness.tasks.runplan.RunPlan` of round ``round`` (its cells planned now: a later round reads the
        records of the earlier ones), its work estimate for a ``mode`` job (report: evaluation only, on the
        datasets not in ``skip``)."""
        from harness.core.layout import RunLayout

        rounds = self.rounds()
        cells = rounds[round]() if round < len(rounds) else []
        fields: dict[str, Any] = {
            "task": self.name, "runner": self.task_spec.runner, "model_name": self.model_name, "spec": self.task_spec,
            "settings": self.settings, "model": self.spec, "device": self.device, "precision": self.precision,
            "seed": int(self.cfg.seed), "lr": None, "trains": False, "cells": cells,
            "later": round + 1 < len(rounds), "layout": RunLayout.of(self.cfg.paths),
            "work": self.work(mode, skip), "config": self.config, "overwrite": bool(self.cfg.overwrite),
            "save_run": bool(self.cfg.get("save_run")), "check": check_model,
            "fitted": self.fitted_lengths(), "weights": self.weights_dir(),
        }
        fields |= self.computed_by(cells)
        if "header" not in fields:
            fields["header"] = self.header()
        return RunPlan(**fields)

    @abc.abstractmethod
    def computed_by(self, cells: Sequence[Cell]) -> dict[str, Any]:
        """The plan's ``compute`` (and where the family has them: ``check``, ``finish``, ``stages``, and the
        fields it resolves otherwise: ``lr``, ``seed``, ``trains``, ``lineage``, ``header``, ``part``); ``cells``:
        the round's, as planned."""

