"""Two DPR recipes, one column (issue 60): where a later paper's column declares the recipe its numbers were
fine-tuned under, a run cell not fine-tuned under it (by its records, or their source run's) is footnoted ¶."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from harness.core.results import ResultRecord
from harness.leaderboard.cells import OTHER_PROTOCOL_MARK, Cell
from harness.leaderboard.transcribed import PaperSource

#: what each recipe name a record may carry means (conf/task/beir.yaml ``recipes``; docs/fidelity.md)
RECIPES = {
    "ettin": "Ettin's train_st.py recipe (sweep=beir-lr-ettin: per-device batch 1024 x accumulation 1, CachedMNRL "
             "mini-batch 256, the model's maximum length)",
    "modernbert": "the ModernBERT paper's DPR recipe as task=beir configures it (the model's dpr batch x "
                  "accumulation, mini-batch 16, length 512)",
    "custom": "a DPR fine-tune matching neither recipe of conf/task/beir.yaml",
}


def column_recipes(sources: Iterable[PaperSource]) -> dict[tuple[str, str], str]:
    """(table, column) -> the recipe the published numbers of that column were fine-tuned under."""
    return {source.cells[header]: recipe for source in sources for header, recipe in source.recipes.items()}


def run_recipes(records: Iterable[ResultRecord]) -> dict[tuple[str, str], str]:
    """(task, run id) -> the recipe its trained records name."""
    return {(r.task, r.run_id): str(recipe) for r in records if (recipe := (r.details or {}).get("recipe"))}


def _why(record: ResultRecord, want: str, recipes: Mapping[tuple[str, str], str]) -> tuple[str, str]:
    """(short, why) where ``record``'s DPR model was not shown to be fine-tuned under ``want``; empty where it was."""
    lineage: Mapping[str, Any] = (record.model or {}).get("lineage") or {}
    run, task = lineage.get("run_id"), lineage.get("task")
    if not run or not lineage.get("model_dir"):
        return "no DPR fine-tune", (f"model.path evaluated as is, not a DPR model fine-tuned here under "
                                    f"{RECIPES[want]}, as the published rows beside it were")
    got = recipes.get((str(task), str(run)))
    if got == want:
        return "", ""
    if got is None:
        return "recipe unknown", (f"its DPR model (task={task} run {run}) names no recipe among the records read; "
                                  f"the published rows beside it: {RECIPES[want]}")
    return f"{got} recipe", (f"its DPR model (task={task} run {run}) was fine-tuned under "
                             f"{RECIPES.get(got, got)}; the published rows beside it under {RECIPES[want]}")


def mark_recipe(cell: Cell, records: Iterable[ResultRecord], want: str | None,
                recipes: Mapping[tuple[str, str], str]) -> Cell:
    """``cell`` footnoted ¶ where its records were not fine-tuned under ``want`` (the column's recipe)."""
    if want is None or cell.value is None or cell.other_protocol:
        return cell
    used = {s.get("run_id") for s in cell.sources if s.get("used")}
    found = [_why(r, want, recipes) for r in records if r.run_id in used]
    short, why = next(((s, w) for s, w in found if s), ("", ""))
    if not short:
        return cell
    return replace(cell, text=cell.text + OTHER_PROTOCOL_MARK, other_protocol=short,
                   note=f"{OTHER_PROTOCOL_MARK} {why}; {cell.note}" if cell.note else f"{OTHER_PROTOCOL_MARK} {why}")
