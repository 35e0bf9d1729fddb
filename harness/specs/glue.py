"""GLUE as data beside its spec (``conf/task/glue.yaml``: the paper's eight tasks, their labels): the task's
name, how each task's score is defined, and Table 5's published rows. Pure: the leaderboard and the selection rule import it without any compute code."""

from __future__ import annotations

from typing import Any

TASK_FAMILY = "glue"
#: how each GLUE task's score is defined, written into the selection so a reader knows
GLUE_SCORE_NOTES = {
    "mnli": "mean of matched and mismatched accuracy (the paper's MNLI)",
    "qqp": "mean of F1 and accuracy (both recorded)",
    "mrpc": "mean of F1 and accuracy (both recorded)",
    "stsb": "Spearman correlation (Pearson recorded)",
    "cola": "Matthews correlation",
}


def paper_tasks() -> tuple[str, ...]:
    """The paper's eight GLUE tasks (the columns of Table 5, as the spec declares them)."""
    from harness import specs

    return specs.get(TASK_FAMILY).tables[0].columns or ()


def paper_baselines() -> list[dict[str, Any]]:
    """Table 5 of the ModernBERT paper (dev-set GLUE scores), shipped as conf/task/glue/paper_baselines.yaml."""
    from importlib import resources

    import yaml

    text = (resources.files("conf") / "task" / "glue" / "paper_baselines.yaml").read_text()
    return list(yaml.safe_load(text)["rows"])
