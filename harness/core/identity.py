"""Run identity fails closed: a run is defined by the resolved config minus an explicit exclude list (a new config key
is in the run id unless listed with why it changes no number); the cache keys and seed group derive from it."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from harness.core.results import stable_hash

#: config keys (dotted, from the root) that never change a number, and why
GLOBAL_EXCLUDE: Mapping[str, str] = {
    "paths": "where files are written",
    "overwrite": "whether to redo a finished run",
    "run_lock": "how concurrent processes share runs (lock staleness, waiting)",
    "run_name": "a free label stored in records",
    "save_run": "whether the ranking is also written as a TREC run file",
    "experiment": "which experiment's selection a run belongs to (scopes harness.select; stored in records)",
    "series": "which checkpoint of a series a run evaluates (step, folder, tokens seen; stored in records): the "
              "weights themselves enter the identity as model.ref",
    "hydra": "Hydra's own settings (output dirs, launcher, sweeper)",
    "logger": "which experiment tracker receives the logs",
    "log_level": "how much the run prints",
    "device": "where the run executes (recorded in each record, not part of the number)",
    "compile": "whether the encoder's forward runs through torch.compile (the same computation, fused; recorded in "
               "the model block): task=efficiency, whose number is the speed, puts it back in its identity",
    "model.name": "the leaderboard row label (it is part of the record path)",
    "model.family": "a leaderboard label",
    "model.size": "a leaderboard label",
    "model.path": "replaced by the model's content fingerprint (local) or hub id + revision",
    "model.keep_layers": "part of model.ref (a pruned variant's kept layers), so unpruned runs keep their ids",
    "model.dpr": "per-model defaults that reach the run only through task.* interpolation (hashed resolved)",
    "model.colbert": "per-model defaults that reach the run only through task.* interpolation (hashed resolved)",
    "model.glue": "task=glue's head on this encoder: a GLUE run's identity holds it as task.head; no other task "
                  "reads it",
    "task.runner": "legacy key, not read",
    "task.spec": "what the task means (tables, selection, dependencies); its stages' versions enter as `protocol`",
}


def dotted(tree: Mapping[str, Any], key: str) -> Any:
    """``tree[a][b]`` for ``a.b`` (None where a level is missing)."""
    node: Any = tree
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def drop(tree: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """A deep copy of ``tree`` without the dotted ``keys`` (missing keys are ignored)."""
    out = copy.deepcopy(dict(tree))
    for key in keys:
        parent, _, last = key.rpartition(".")
        node = dotted(out, parent) if parent else out
        if isinstance(node, dict):
            node.pop(last, None)
    return out


def put(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``tree[a][b][c] = value`` for ``a.b.c``, creating parents."""
    *parents, last = dotted.split(".")
    node = tree
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value


def run_identity(
    config: Mapping[str, Any], *, exclude: Iterable[str] = (), replace: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The resolved config minus :data:`GLOBAL_EXCLUDE` and ``exclude``, ``replace`` applied (dotted keys)."""
    out = drop(config, [*GLOBAL_EXCLUDE, *exclude])
    for key, value in (replace or {}).items():
        put(out, key, value)
    return out


def derived_key(identity: Mapping[str, Any], *, without: Iterable[str] = (), **extra: Any) -> str:
    """A hash of ``identity`` minus ``without`` plus ``extra``: embedding-cache keys, seed groups."""
    return stable_hash({"identity": drop(identity, without), **extra}, length=24)
