"""GLUE as data beside its spec (``conf/task/glue.yaml``: the paper's eight tasks, their labels): the task's
name, how each task's score is defined, and Table 5's published rows. Pure: the leaderboard and the selection rule import it without any compute code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from harness import specs
from harness.tasks.glue.scores import score_key

TASK_FAMILY = "glue"
#: how each GLUE task's score is defined, written into the selection so a reader knows
GLUE_SCORE_NOTES = {
    "mnli": "mean of matched and mismatched accuracy (the paper's MNLI)",
    "qqp": "accuracy, as Table 5 prints it and the authors' sweep selected by it (F1 and mean(F1, accuracy) recorded)",
    "mrpc": "accuracy, as Table 5 prints it (our reading: no arithmetic bound as QQP's) and the authors' sweep selected "
            "by it (F1 and mean(F1, accuracy) recorded)",
    "stsb": "Spearman correlation (Pearson recorded)",
    "cola": "Matthews correlation",
}

#: a score key whose definition does not depend on the task (a user's ``task.definitions.<t>.metric``)
SCORE_KEY_NOTES = {"f1_accuracy_mean": "mean of F1 and accuracy (both recorded)",
                   "f1": "F1 of the positive class (what the authors' eval.py printed; accuracy recorded)"}


def score_note(task: str, main_score: str | None) -> str | None:
    """How ``task``'s score is defined, read from the record's main score where that says it."""
    if main_score is not None and main_score != compared_score(task):
        return SCORE_KEY_NOTES.get(str(main_score)) or GLUE_SCORE_NOTES.get(task)
    return GLUE_SCORE_NOTES.get(task) or SCORE_KEY_NOTES.get(str(main_score))


@cache
def compared_scores() -> dict[str, str]:
    """The score each GLUE task's column compares (MRPC and QQP: accuracy, Table 5's)."""
    definitions = specs.task_node(TASK_FAMILY).get("definitions") or {}
    return {name: score_key(str(d["metric"]), len(d["hub"]["dev"]) > 1) for name, d in definitions.items()}


def compared_score(task: str) -> str | None:
    """:func:`compared_scores` of one task (None: not a GLUE task this harness defines)."""
    return compared_scores().get(task)


def paper_tasks() -> tuple[str, ...]:
    """The paper's eight GLUE tasks (the columns of Table 5, as the spec declares them)."""
    return specs.get(TASK_FAMILY).tables[0].columns or ()


def paper_baselines() -> list[dict[str, Any]]:
    """Table 5 of the ModernBERT paper (dev-set GLUE scores), shipped as conf/task/glue/paper_baselines.yaml."""
    import yaml
    text = (resources.files("conf") / "task" / "glue" / "paper_baselines.yaml").read_text()
    return list(yaml.safe_load(text)["rows"])


def planned_seeds(protocol: str, seeds: Sequence[int] | None, seed: int | None, default_seed: int | None) -> list[int]:
    """The seeds every GLUE grid point runs: ``task.seed``, else ``task.seeds`` or ``seed`` by protocol."""
    if seed is not None:
        return [int(seed)]
    if protocol == "authors":
        return [int(s) for s in seeds or ()]
    return [] if default_seed is None else [int(default_seed)]


def expected_seed_count(config: Mapping[str, Any] | None) -> int | None:
    """Seeds per configuration the protocol of a GLUE record's config asks for (None: no config, protocol unknown)."""
    task = (config or {}).get("task")
    if not isinstance(task, Mapping):
        return None
    protocol = str(task.get("scoring_protocol", "best_epoch"))
    seeds = task.get("seeds") if isinstance(task.get("seeds"), list) else None
    return len(planned_seeds(protocol, seeds, task.get("seed"), 0)) or None
