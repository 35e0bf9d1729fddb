"""A stage as a task declares it: its protocol version, and where its code is. A version enters the identity of every
run using the stage: bump it when a code change changes its numbers (earlier records then no longer count as done)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.core.registry import Registry, load_target


@dataclass(frozen=True)
class Stage:
    """One stage: its protocol version, its code (``module:attribute``; none if computed inline), what it does."""

    version: int
    code: str = ""
    what: str = ""


#: the stages more than one protocol composes (retrieval, efficiency and mteb load an encoder)
SHARED: Registry[Stage] = Registry("stage", {
    "load.encoder": Stage(1, "harness.tasks.retrieval.compute:encoder",
                          "a SentenceTransformer from a hub id, folder or package (harness.models); pruning"),
}, hint="Declare it in SHARED of harness/specs/stages.py.")


def declared(stages: Registry[Stage], name: str) -> Stage:
    """Stage ``name`` as its protocol (``stages``) or :data:`SHARED` declares it; an unknown name lists the closest."""
    return SHARED[name] if name in SHARED else stages.lookup(name)


def versions(stages: Registry[Stage], names: Iterable[str]) -> dict[str, int]:
    """``{stage: version}`` for ``names`` (what a run identity holds); an unknown stage is an error."""
    return {name: declared(stages, name).version for name in names}


def code_of(stages: Registry[Stage], name: str) -> Any:
    """The code of stage ``name``, found the one way: its declaration's ``module:attribute``."""
    stage = declared(stages, name)
    if not stage.code:
        raise KeyError(f"stage {name!r} is declared without code")
    return load_target(stage.code)
