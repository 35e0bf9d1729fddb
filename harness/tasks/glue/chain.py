"""MNLI chaining: which encoder a grid point starts from (pretrained, ``task.init_from``, or :func:`pick_mnli`'s)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.core import layout, results
from harness.core.errors import HarnessError
from harness.core.results import ResultRecord
from harness.tasks.glue.grid import GlueSettings, InitSource
from harness.tasks.glue.spec import TASK_FAMILY, planned_seeds

log = logging.getLogger(__name__)


PRETRAINED = InitSource("pretrained")


def mnli_candidates(results_dir: str | Path, model_ref: Mapping[str, Any], max_length: int,
                    protocol: str = "best_epoch", upstream: str = "mnli") -> list[ResultRecord]:
    """This model's ok MNLI records (same weights, max length, protocol; older: ``best_epoch``) with a checkpoint."""
    root = layout.task_folder(results_dir, TASK_FAMILY)
    out = []
    for _, rec in results.iter_records(root, warn=False) if root.exists() else []:
        if rec.dataset != upstream or rec.status != results.STATUS_OK:
            continue
        if rec.model.get("ref") != dict(model_ref) or rec.hyperparameters.get("max_length") != max_length:
            continue
        if rec.hyperparameters.get("scoring_protocol", "best_epoch") != protocol:
            continue
        ckpt = rec.details.get("checkpoint")
        if ckpt and Path(ckpt, "config.json").exists():
            out.append(rec)
    return out


def resolve_init(task: str, tcfg: GlueSettings, results_dir: str | Path, model_ref: Mapping[str, Any], model_name: str, *,
                 chain: Mapping[str, Sequence[str]]) -> InitSource:
    """The encoder a run starts from: ``task.init_from``, MNLI's checkpoint (chained tasks), else pretrained."""
    if tcfg.init_from:
        path = Path(str(tcfg.init_from)).expanduser()
        if not (path / "config.json").exists():
            raise HarnessError(f"task.init_from={tcfg.init_from} is not a saved model directory (no config.json)")
        return InitSource("path", str(path.resolve()))
    mode = "off" if tcfg.mnli_init is False else str(tcfg.mnli_init)
    if mode not in ("required", "if_available", "off"):
        raise HarnessError(f"task.mnli_init={mode!r}: use required, if_available or off")
    if mode == "off" or not chain.get(task):
        return PRETRAINED
    found = mnli_candidates(results_dir, model_ref, int(tcfg.max_length), str(tcfg.training.scoring_protocol),
                             chain[task][0])
    if not found:
        if mode == "required":
            raise HarnessError(
                f"{task} starts from the selected MNLI checkpoint (task.mnli_init=required), but {results_dir} has no "
                f"ok MNLI record with a kept checkpoint for model {model_name} at max_length={tcfg.max_length}. "
                "Run the MNLI grid first (task.tasks=[mnli]; multirun stage 1), or set task.mnli_init=if_available/off."
            )
        log.warning("%s: no MNLI checkpoint of %s found; starting from the pretrained encoder", task, model_name)
        return PRETRAINED
    best = pick_mnli(found, tcfg)
    if best is None:
        why = (f"no MNLI configuration of {model_name} has finished all {len(planned(tcfg))} seeds of task.seeds "
               f"({len(found)} MNLI record(s), all in incomplete configurations); the chain starts only from a "
               "complete one")
        if mode == "required":
            raise HarnessError(f"{task}: {why}. Finish the MNLI grid's missing seeds first (re-run task.tasks=[mnli]), "
                               "or set task.mnli_init=if_available/off.")
        log.warning("%s: %s; starting from the pretrained encoder", task, why)
        return PRETRAINED
    return InitSource("mnli", best.details["checkpoint"], best.run_id, len(found))


def planned(tcfg: GlueSettings) -> list[int]:
    """The seeds each MNLI configuration runs under the ``authors`` protocol (``task.seed`` or ``task.seeds``)."""
    return planned_seeds("authors", list(tcfg.seeds or ()), tcfg.seed, None)


def pick_mnli(found: list[ResultRecord], tcfg: GlueSettings) -> ResultRecord | None:
    """The MNLI record to chain from: the best (``best_epoch``), or the authors' first seed's run of the best config."""
    def score(r: ResultRecord) -> float:
        return r.score if r.score is not None else -math.inf

    if str(tcfg.training.scoring_protocol) != "authors":
        return max(found, key=lambda r: (score(r), r.run_id))
    configs: dict[str, list[ResultRecord]] = {}
    for r in found:
        configs.setdefault(r.config_id or r.run_id, []).append(r)
    order = planned(tcfg)
    complete = [rs for rs in configs.values() if set(order) <= {r.hyperparameters.get("seed") for r in rs}]
    if not complete:
        return None
    best = max(complete, key=lambda rs: (sum(map(score, rs)) / len(rs), min(r.run_id for r in rs)))

    def rank(r: ResultRecord) -> tuple[int, str]:
        seed = r.hyperparameters.get("seed")
        return (order.index(seed) if seed in order else len(order), r.run_id)

    return min(best, key=rank)
