"""The registry of runners: how a task is computed. A task spec (``spec.runner`` in ``conf/task/<name>.yaml``)
names one of these; the class composes the task's stages. Imported on first use (importing the registry loads no
model library). ``harness.select``, the leaderboard and the paper graph never import it: they read specs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from harness.errors import HarnessError, unknown_name

if TYPE_CHECKING:
    from harness.families.base import Family

REGISTRY: dict[str, str] = {
    "beir": "harness.families.beir:BeirFamily",
    "code": "harness.families.code:CodeFamily",
    "colbert": "harness.families.colbert:ColbertFamily",
    "efficiency": "harness.families.efficiency:EfficiencyFamily",
    "glue": "harness.families.glue:GlueFamily",
    "mldr": "harness.families.mldr:MldrFamily",
    "mteb": "harness.families.mteb:MtebFamily",
}

_loaded: dict[str, type[Family]] = {}


def register(name: str, target: str | type[Family]) -> None:
    """Add a family (``"package.module:Class"`` or the class). Re-registering a name with another target is an
    error, so two plugins cannot silently shadow each other."""
    key = target if isinstance(target, str) else f"{target.__module__}:{target.__qualname__}"
    if REGISTRY.get(name, key) != key:
        raise HarnessError(f"task family {name!r} is already registered as {REGISTRY[name]}")
    REGISTRY[name] = key
    if not isinstance(target, str):
        _loaded[name] = target


def get(name: str) -> type[Family]:
    """The family class registered as ``name``; an unknown name lists the known ones, closest first."""
    if name not in REGISTRY:
        raise unknown_name("runner", name, REGISTRY, "Register it in harness/families/__init__.py.")
    if name not in _loaded:
        module, _, attr = REGISTRY[name].partition(":")
        _loaded[name] = getattr(importlib.import_module(module), attr)
    return _loaded[name]


def find(name: str) -> type[Family] | None:
    """``get(name)``, or None for a name no family is registered under (e.g. records of a removed family)."""
    return get(name) if name in REGISTRY else None


def all_families() -> list[type[Family]]:
    """Every registered family, in registry order."""
    return [get(name) for name in REGISTRY]
