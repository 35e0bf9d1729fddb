"""The registry of planners: how a task is planned (and, through its plan, computed). A task spec (``spec.runner``
in ``conf/task/<name>.yaml``) names one of these: a :class:`~harness.tasks.base.Family` class, or a declaration
that makes one (the retrieval tasks: :class:`~harness.tasks.retrieval.planner.RetrievalKind`, one planner composed from
the stages their specs list). Called with a composed config, it gives the planner of that config; its
``settings_class`` types ``cfg.task``. Importing it loads no model library. ``harness.select`` and the leaderboard
never import it: they read specs.
"""

from __future__ import annotations

from typing import Any

from harness.core.registry import Registry
from harness.tasks.efficiency import planner as efficiency
from harness.tasks.glue import planner as glue
from harness.tasks.mteb import planner as mteb
from harness.tasks.retrieval import beir, code, colbert, mldr

#: ``spec.runner`` -> its planner (called with ``(cfg, spec=None)``: a Family)
REGISTRY: Registry[Any] = Registry("runner", {
    "beir": beir.BEIR,
    "code": code.CODE,
    "colbert": colbert.COLBERT,
    "efficiency": efficiency.EfficiencyFamily,
    "glue": glue.GlueFamily,
    "mldr": mldr.MLDR,
    "mteb": mteb.MtebFamily,
}, hint="Register it in harness/tasks/planners.py.", lazy=True)


def get(name: str) -> Any:
    """The family class registered as ``name``; an unknown name lists the known ones, closest first."""
    return REGISTRY.lookup(name)

