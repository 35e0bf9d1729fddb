"""MNLI chaining: which encoder a grid point starts from (the pretrained model, ``task.init_from``, or the best
MNLI record's kept checkpoint). Reads records only: no model, no data."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import results
from harness.errors import HarnessError
from harness.results import ResultRecord
from harness.specs.glue import TASK_FAMILY

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InitSource:
    """Where a run's encoder weights come from: the pretrained model, or a fine-tuned checkpoint."""

    kind: str                        # pretrained | mnli | path
    checkpoint: str | None = None
    run_id: str | None = None        # the MNLI record it came from
    candidates: int = 0              # MNLI records compared


PRETRAINED = InitSource("pretrained")


def mnli_candidates(results_dir: str | Path, model_ref: Mapping[str, Any], max_length: int) -> list[ResultRecord]:
    """Ok MNLI records of this model (same weights, same max length) whose checkpoint still exists."""
    root = Path(results_dir) / TASK_FAMILY
    out = []
    for _, rec in results.iter_records(root, warn=False) if root.exists() else []:
        if rec.dataset != "mnli" or rec.status != results.STATUS_OK:
            continue
        if rec.model.get("ref") != dict(model_ref) or rec.hyperparameters.get("max_length") != max_length:
            continue
        ckpt = rec.details.get("checkpoint")
        if ckpt and Path(ckpt, "config.json").exists():
            out.append(rec)
    return out


def resolve_init(task: str, tcfg: Any, results_dir: str | Path, model_ref: Mapping[str, Any], model_name: str
                 ) -> InitSource:
    """The encoder a run starts from: ``task.init_from`` if set; for ``task.chain_from_mnli`` tasks the best MNLI
    record's checkpoint (by dev score; ``task.mnli_init`` says whether one is required); else pretrained."""
    if tcfg.init_from:
        path = Path(str(tcfg.init_from)).expanduser()
        if not (path / "config.json").exists():
            raise HarnessError(f"task.init_from={tcfg.init_from} is not a saved model directory (no config.json)")
        return InitSource("path", str(path.resolve()))
    mode = "off" if tcfg.mnli_init is False else str(tcfg.mnli_init)
    if mode not in ("required", "if_available", "off"):
        raise HarnessError(f"task.mnli_init={mode!r}: use required, if_available or off")
    if mode == "off" or task not in list(tcfg.chain_from_mnli) or task == "mnli":
        return PRETRAINED
    found = mnli_candidates(results_dir, model_ref, int(tcfg.max_length))
    if not found:
        if mode == "required":
            raise HarnessError(
                f"{task} starts from the selected MNLI checkpoint (task.mnli_init=required), but {results_dir} has no "
                f"ok MNLI record with a kept checkpoint for model {model_name} at max_length={tcfg.max_length}. "
                "Run the MNLI grid first (task.tasks=[mnli]; multirun stage 1), or set task.mnli_init=if_available/off."
            )
        log.warning("%s: no MNLI checkpoint of %s found; starting from the pretrained encoder", task, model_name)
        return PRETRAINED
    best = max(found, key=lambda r: (r.score if r.score is not None else -math.inf, r.run_id))
    return InitSource("mnli", best.details["checkpoint"], best.run_id, len(found))
