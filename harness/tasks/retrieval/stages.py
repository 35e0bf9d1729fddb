"""The stages that compute a run, as code: each function or object gets values (the run's
:class:`~harness.tasks.runplan.RunPlan` and its nodes), never the runner, and returns what the runner writes. :data:`CODE` maps the stage names a task's spec lists
(``conf/task/<t>.yaml``: ``spec.stages``) to their code; their protocol versions are declared in
:mod:`harness.specs.stages`, where a user's own stage names its code by ``module:attribute``. Importing this package
imports no model library (each stage imports its own where it runs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.core.registry import load_target
from harness.specs.stages import STAGES
from harness.tasks.retrieval import load, retrieve, train
from harness.tasks.runplan import Cell, RunPlan

#: a stage's name -> its code (``load.*``: a loader, ``train.*``: a trainer, ``retrieve.*``: a retriever builder)
CODE: dict[str, Any] = {
    "load.encoder": load.encoder,
    "load.colbert": load.colbert,
    "train.dense": train.DENSE,
    "train.kd": train.KD,
    "retrieve.single_vector": retrieve.single_vector,
    "retrieve.multi_vector": retrieve.multi_vector,
}


def code_of(name: str) -> Any:
    """The code of stage ``name``: the harness's own (:data:`CODE`), else what its declaration names
    (``module:attribute``, a user's stage); an undeclared name lists the declared ones."""
    stage = STAGES.lookup(name)
    if name in CODE:
        return CODE[name]
    if not stage.code:
        raise KeyError(f"stage {name!r} is declared without code")
    return load_target(stage.code)


def check_model(plan: RunPlan, todo: Sequence[Cell]) -> None:
    """Every run's first check before any work (it loads no model and parses no data): the attention it asks for is
    available (one rule for every task: flash_attention_2 needs flash-attn, never another kernel), the weights are
    reachable (a source run's local weights were checked when planning), and each length the run fits is within the
    model's positions, read from its config.json (a series of checkpoints is refused once, not per checkpoint)."""
    from harness.models import _check_attn, check_available

    _check_attn(plan.model)
    if plan.lineage is None or plan.lineage.model_dir is None:
        check_available(plan.model)
    if plan.fitted and plan.weights is not None:
        from harness.models.positions import positions_in
        from harness.tasks.retrieval.load import check_length

        n = positions_in(plan.weights)
        for key, length in plan.fitted.items():
            check_length(n, length, plan.model_name, key)
