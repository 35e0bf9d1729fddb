"""Reading mteb result files (``<org>__<model>/<revision>/<TaskName>.json``) for published rows: JSON only, no mteb."""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.mteb_results.catalog import SPLITS

log = logging.getLogger(__name__)


@dataclass
class MtebFile:
    """One mteb result file, as far as the leaderboard needs it."""

    path: Path
    task: str
    mteb_version: str | None
    dataset_revision: str | None
    scores: dict[str, list[dict[str, Any]]]

    def main_score(self, split: str | None = None, subset: str | None = None) -> tuple[float, str, str] | None:
        """(score on 0-1, split used, what it is) by mteb's rule (``TaskResult.get_score``)."""
        if split not in self.scores:
            split = next((s for s in SPLITS if s in self.scores), next(iter(self.scores), None))
        if split is None:
            return None
        entries = [e for e in self.scores[split]   # a NaN or infinite score is no score
                   if isinstance(e.get("main_score"), int | float) and math.isfinite(e["main_score"])]
        if subset is not None:
            entries = [e for e in entries if e.get("hf_subset") == subset]
        if not entries:
            return None
        if len(entries) == 1:
            return float(entries[0]["main_score"]), split, f"{split}, subset {entries[0].get('hf_subset')}"
        return statistics.fmean(float(e["main_score"]) for e in entries), split, f"{split}, mean of {len(entries)} subsets"


def read_file(path: Path) -> MtebFile:
    """An mteb result file (format of mteb >= 1.11: ``scores`` by split, a list of subset dicts)."""
    data = json.loads(path.read_text())
    scores = data.get("scores") if isinstance(data, dict) else None
    if not isinstance(scores, dict) or not all(isinstance(v, list) for v in scores.values()):
        raise ValueError("not mteb's results format (scores.<split> must be a list of subset scores; files "
                         "written before mteb 1.11 can be converted with mteb's TaskResult.from_disk)")
    return MtebFile(path, str(data.get("task_name") or path.stem), data.get("mteb_version"),
                    data.get("dataset_revision"), scores)


@dataclass(frozen=True)
class MtebModel:
    """One ``<model>/<revision>/`` folder."""

    name: str
    revision: str
    folder: Path


def results_root(directory: str | os.PathLike) -> Path:
    """The folder holding ``<model>/<revision>/``: ``directory`` itself or its ``results/`` (a repository checkout)."""
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise HarnessError(f"mteb results directory {root} does not exist: pass a folder in mteb's layout "
                           "(<org>__<model>/<revision>/<Task>.json) or a checkout of embeddings-benchmark/results")
    return root / "results" if (root / "results").is_dir() else root


def models_in(directory: str | os.PathLike) -> list[MtebModel]:
    """Every model revision folder, named by its ``model_meta.json`` (else by the folder names, as mteb does)."""
    out = []
    for model_dir in sorted(p for p in results_root(directory).iterdir() if p.is_dir()):
        for rev_dir in sorted(p for p in model_dir.iterdir() if p.is_dir()):
            name, revision = model_dir.name.replace("__", "/"), rev_dir.name
            meta = rev_dir / "model_meta.json"
            if meta.is_file():
                try:
                    data = json.loads(meta.read_text())
                    name, revision = str(data.get("name") or name), str(data.get("revision") or revision)
                except (ValueError, OSError) as exc:
                    log.warning("%s: unreadable model_meta.json (%s); naming the model by its folder", rev_dir, exc)
            out.append(MtebModel(name, revision, rev_dir))
    return out
