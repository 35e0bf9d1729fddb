"""The registry of runners: how a task is computed. A task spec (``spec.runner`` in ``conf/task/<name>.yaml``)
names one of these; the class composes the task's stages. Imported on first use (importing the registry loads no
model library). ``harness.select``, the leaderboard and the paper graph never import it: they read specs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.registry import Registry

if TYPE_CHECKING:
    from harness.families.base import Family

REGISTRY: Registry[type[Family]] = Registry("runner", {
    "beir": "harness.families.beir:BeirFamily",
    "code": "harness.families.code:CodeFamily",
    "colbert": "harness.families.colbert:ColbertFamily",
    "efficiency": "harness.families.efficiency:EfficiencyFamily",
    "glue": "harness.families.glue:GlueFamily",
    "mldr": "harness.families.mldr:MldrFamily",
    "mteb": "harness.families.mteb:MtebFamily",
}, hint="Register it in harness/families/__init__.py.", lazy=True)


def register(name: str, target: str | type[Family]) -> None:
    """Add a family (``"package.module:Class"`` or the class); another target under a taken name is an error."""
    REGISTRY.register(name, target)


def get(name: str) -> type[Family]:
    """The family class registered as ``name``; an unknown name lists the known ones, closest first."""
    return REGISTRY.lookup(name)


def find(name: str) -> type[Family] | None:
    """``get(name)``, or None for a name no family is registered under (e.g. records of a removed family)."""
    return REGISTRY.get(name)


def all_families() -> list[type[Family]]:
    """Every registered family, in registry order."""
    return list(REGISTRY.values())
