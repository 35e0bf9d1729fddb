"""``python -m harness.select --task glue --results results``: pick the best configuration per task from records.

Reads result records only (never trains). For GLUE, records of one model and task are grouped by configuration
(every hyperparameter but the seed); the configuration with the best mean dev score wins, and its seeds give
mean and standard deviation. The GLUE average is the mean of the selected task scores (over the 8 paper tasks
when all are present). Output: ``<out>/<family>-<model>.json``, a selection file with its own schema key
(``"schema": "harness.selection/1"``), written by default to ``selected/`` beside the results directory so
that ``results.iter_records`` never meets it.

Task families plug in through :data:`SELECTORS`.
"""

from __future__ import annotations

import argparse
import logging
import math
import shutil
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from harness import results
from harness.errors import HarnessError, unknown_name
from harness.results import ResultRecord
from harness.selection_retrieval import format_retrieval_table, select_retrieval

log = logging.getLogger(__name__)

SCHEMA = "harness.selection/1"
GLUE_PAPER_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte")
#: how each GLUE task's score is defined, written into the selection so a reader knows
GLUE_SCORE_NOTES = {
    "mnli": "mean of matched and mismatched accuracy (the paper's MNLI)",
    "qqp": "mean of F1 and accuracy (both recorded)",
    "mrpc": "mean of F1 and accuracy (both recorded)",
    "stsb": "Spearman correlation (Pearson recorded)",
    "cola": "Matthews correlation",
}


def default_out_dir(results_dir: str | Path) -> Path:
    """``selected/`` beside the results directory (outside the record tree)."""
    return Path(results_dir).resolve().parent / "selected"


def _config_key(rec: ResultRecord) -> tuple:
    hp = {k: v for k, v in rec.hyperparameters.items() if k != "seed"}
    return (results.stable_hash(hp), results.stable_hash(rec.data_fingerprint), rec.precision)


def _summary(values: list[float]) -> dict[str, float | None]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
    }


def select_task(records: list[ResultRecord]) -> dict[str, Any]:
    """Best configuration (by mean score over its seeds) among one task's ok records of one model."""
    groups: dict[tuple, list[ResultRecord]] = defaultdict(list)
    for r in records:
        groups[_config_key(r)].append(r)

    def rank(recs: list[ResultRecord]) -> tuple:
        scores = [r.score for r in recs]
        return (statistics.fmean(scores), len(recs), min(r.run_id for r in recs))

    best = max(groups.values(), key=rank)
    best.sort(key=lambda r: r.hyperparameters.get("seed", 0))
    scores = [float(r.score) for r in best]
    metric_names = sorted(set().union(*(r.metrics for r in best)))
    hp = {k: v for k, v in best[0].hyperparameters.items() if k != "seed"}
    return {
        "main_score": best[0].main_score,
        "score": _summary(scores),
        "metrics": {m: _summary([float(r.metrics[m]) for r in best if m in r.metrics]) for m in metric_names},
        "hyperparameters": hp,
        "seeds": [r.hyperparameters.get("seed") for r in best],
        "n_seeds": len(best),
        "best_epochs": [r.details.get("best_epoch") for r in best],
        "init_from_run_ids": sorted({r.details.get("init_from_run_id") for r in best} - {None}),
        "run_ids": [r.run_id for r in best],
        "n_configurations": len(groups),
        "n_runs": len(records),
    }


def paper_baselines() -> list[dict[str, Any]]:
    """Table 5 of the ModernBERT paper (dev-set GLUE scores), shipped as conf/task/glue/paper_baselines.yaml."""
    text = (resources.files("conf") / "task" / "glue" / "paper_baselines.yaml").read_text()
    return list(yaml.safe_load(text)["rows"])


def select_glue(records: Iterable[ResultRecord], model: str | None = None) -> dict[str, dict[str, Any]]:
    """Selection per model name: ``{model: {"tasks": {...}, "glue_average": ..., ...}}``."""
    by_model: dict[str, dict[str, list[ResultRecord]]] = defaultdict(lambda: defaultdict(list))
    failed: dict[str, int] = defaultdict(int)
    for r in records:
        if r.task != "glue" or (model and r.model.get("name") != model):
            continue
        if r.status != results.STATUS_OK or r.score is None or not math.isfinite(r.score):
            failed[r.model.get("name")] += 1
            continue
        by_model[r.model["name"]][r.dataset].append(r)
    out = {}
    for name, tasks in sorted(by_model.items()):
        chosen = {t: select_task(recs) for t, recs in sorted(tasks.items())}
        for t, sel in chosen.items():
            if t in GLUE_SCORE_NOTES:
                sel["score_definition"] = GLUE_SCORE_NOTES[t]
        present = [t for t in GLUE_PAPER_TASKS if t in chosen]
        missing = [t for t in GLUE_PAPER_TASKS if t not in chosen]
        avg = statistics.fmean(chosen[t]["score"]["mean"] for t in present) if present else None
        any_rec = next(iter(tasks.values()))[0]
        out[name] = {
            "schema": SCHEMA,
            "task": "glue",
            "model": any_rec.model,
            "tasks": chosen,
            "glue_average": avg,
            "glue_average_over": present,
            "glue_average_complete": not missing,
            "missing_tasks": missing,
            "failed_runs": failed.get(name, 0),
            "selection_rule": "per task, the configuration (all hyperparameters but the seed) with the best mean "
                              "dev score over its seeds; scores x100",
            "paper_baselines": paper_baselines(),
        }
    return out


#: task family -> selector(records, model name or None) -> {model: selection}
SELECTORS: dict[str, Callable[..., dict[str, dict[str, Any]]]] = {"glue": select_glue, "beir": select_retrieval}


def load_selections(family: str, results_dir: str | Path, model: str | None = None
                    ) -> tuple[dict[str, dict[str, Any]], list[ResultRecord]]:
    """Selections per model for ``family`` from the records under ``results_dir`` (and the records read)."""
    if family not in SELECTORS:
        raise unknown_name("task family", family, SELECTORS, "Selection exists for these families.")
    if not Path(results_dir).is_dir():
        raise HarnessError(f"results directory {results_dir} does not exist; run a sweep first or pass --results")
    recs = [r for _, r in results.iter_records(results_dir)]
    return SELECTORS[family](recs, model), recs


def selection_path(out_dir: str | Path, family: str, model: str) -> Path:
    return Path(out_dir) / f"{family}-{results._safe(model)}.json"


def write_selection(family: str, results_dir: str | Path, out_dir: str | Path, model: str | None = None) -> Path | None:
    """Select and write ``<out_dir>/<family>-<model>.json`` for each model; returns the last path written."""
    selections, _ = load_selections(family, results_dir, model)
    path = None
    for name, sel in selections.items():
        path = selection_path(out_dir, family, name)
        results.atomic_write_json(path, sel)
    return path


def prune_checkpoints(selection: dict[str, Any], records: Iterable[ResultRecord]) -> list[str]:
    """Delete kept checkpoints (MNLI's) of runs that were not selected; returns the removed directories."""
    keep = {rid for t in selection["tasks"].values() for rid in t["run_ids"]}
    removed = []
    for r in records:
        ckpt = r.details.get("checkpoint")
        if r.model.get("name") == selection["model"]["name"] and r.run_id not in keep and ckpt and Path(ckpt).is_dir():
            shutil.rmtree(ckpt)
            removed.append(ckpt)
    return removed


def format_table(sel: dict[str, Any]) -> str:
    """A plain-text summary: task, score (mean ± std over seeds), hyperparameters, paper's score of the family."""
    lines = [f"{sel['model']['name']}: GLUE dev (x100)"]
    for t, s in sel["tasks"].items():
        std = s["score"]["std"]
        spread = f" ± {std:.2f}" if std is not None else ""
        hp = s["hyperparameters"]
        lines.append(
            f"  {t:6s} {s['main_score']:18s} {s['score']['mean']:6.2f}{spread} (n={s['n_seeds']})  "
            f"lr={hp.get('lr')} wd={hp.get('weight_decay')} ep={hp.get('epochs')} init={hp.get('init_from')}"
        )
    if sel["glue_average"] is not None:
        scope = "" if sel["glue_average_complete"] else f" (partial: {len(sel['glue_average_over'])} of 8 tasks)"
        lines.append(f"  GLUE average {sel['glue_average']:.2f}{scope}")
    return "\n".join(lines)


FORMATTERS: dict[str, Callable[[dict[str, Any]], str]] = {"beir": format_retrieval_table}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.select", description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="glue", help=f"task family ({', '.join(SELECTORS)})")
    parser.add_argument("--results", default="results", help="results directory (the record tree)")
    parser.add_argument("--out", default=None, help="output directory (default: selected/ beside --results)")
    parser.add_argument("--model", default=None, help="only this model name")
    parser.add_argument("--prune-checkpoints", action="store_true",
                        help="delete kept checkpoints of runs that were not selected")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out_dir = Path(args.out) if args.out else default_out_dir(args.results)
    try:
        selections, recs = load_selections(args.task, args.results, args.model)
        if not selections:
            raise HarnessError(f"no {args.task} records under {args.results}" + (f" for model {args.model}" if args.model else ""))
        for name, sel in selections.items():
            path = selection_path(out_dir, args.task, name)
            results.atomic_write_json(path, sel)
            print(FORMATTERS.get(args.task, format_table)(sel))
            print(f"  -> {path}")
            if args.prune_checkpoints:
                for d in prune_checkpoints(sel, recs):
                    print(f"  pruned {d}")
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
