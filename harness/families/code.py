"""``task=code``: single-vector code retrieval, evaluated as is by default: a set mined from a Python source tree
(the installed stdlib: the offline main job), or the paper's CoIR sets from the hub."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from harness.families.base import TableSpec
from harness.families.beir import DenseFamily, DenseSettings
from harness.families.retrieval import RetrievalFamily
from harness.selection.rules import BestRunOnSelectionSets

CODE_LABELS = {"codesearchnet": "CodeSearchNet", "stackoverflow-qa": "StackOverflow-QA", "stdlib": "stdlib (mined)"}


@dataclass(kw_only=True)
class CodeSettings(DenseSettings):
    path: str | None = None      # datasets=[tree]: the source tree to mine


class CodeFamily(DenseFamily):
    name = "code"
    settings_class = CodeSettings
    identity_exclude: ClassVar[Mapping[str, str]] = {
        **RetrievalFamily.identity_exclude,
        "task.path": "the tree's root is part of the `tree` catalog entry (each cell's data spec)",
    }
    selection = BestRunOnSelectionSets(())   # the paper trains code with the selected DPR setting: no sweep here
    tables = (TableSpec("code", "Code", "Code retrieval nDCG@10", None, CODE_LABELS, scale=100),)
