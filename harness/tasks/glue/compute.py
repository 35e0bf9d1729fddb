"""``task=glue``'s computation: every task's data loaded first (fails before any training), the decay check, then
each grid point fine-tuned and evaluated in order, one record each; torch and transformers imported inside."""

from __future__ import annotations

import logging
import shutil
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.core import results
from harness.core.errors import HarnessError, TrainingDivergedError
from harness.core.results import ResultRecord
from harness.tasks.glue import data as glue_data
from harness.tasks.glue.decay import adamw_weight_decay
from harness.tasks.glue.grid import GridPoint, InitSource
from harness.tasks.glue.spec import TASK_FAMILY
from harness.tasks.runplan import Cell, RunPlan

log = logging.getLogger(__name__)


@dataclass
class RunContext:
    """What every grid point of one invocation shares beyond its plan: the model's folder, block, tokenizer."""

    plan: RunPlan
    model_dir: str
    model: dict[str, Any]
    tokenizer: Any
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def tokenized(self, data: glue_data.GlueData):
        """Train and (concatenated) dev sets tokenised once per (model, data, max length), in memory and on disk."""
        import datasets
        tcfg = self.plan.settings
        max_length = int(tcfg.max_length)
        key = tokenization_key(self.model["fingerprint"], data, tcfg)
        if key not in self._cache:
            from harness.tasks.glue.tokens import cached_tokenize
            root = self.plan.layout.glue_tokenized(key)
            reg = data.task.is_regression
            train = cached_tokenize(data.train, self.tokenizer, max_length, reg, root / "train")
            devs = [cached_tokenize(s, self.tokenizer, max_length, reg, root / f"dev-{n}") for n, s in data.dev.items()]
            self._cache[key] = (train, devs[0] if len(devs) == 1 else datasets.concatenate_datasets(devs))
        return self._cache[key]


def tokenization_key(model_fingerprint: str, data: glue_data.GlueData, tcfg: Any) -> str:
    """The tokenised-data cache key of one task's data: the weights' tokenizer, the data, the length, the subsample."""
    return results.stable_hash([model_fingerprint, data.fingerprint, data.task.name, int(tcfg.max_length),
                                tcfg.max_train_samples, tcfg.max_eval_samples, int(tcfg.subsample_seed)], 16)


def load_data(tasks: Sequence[glue_data.GlueTask], tcfg: Any) -> dict[str, glue_data.GlueData]:
    """Every task's data, subsampled as configured: fails before any training if one is missing."""
    out = {}
    for t in tasks:
        data = glue_data.load(t, tcfg.data_dir, str(tcfg.hub.path), tcfg.hub.revision)
        seed = int(tcfg.subsample_seed)
        data.train = data.train.subsample(tcfg.max_train_samples, seed)
        data.dev = {k: v.subsample(tcfg.max_eval_samples, seed) for k, v in data.dev.items()}
        out[t.name] = data
    return out


def hyperparameters(point: GridPoint, tcfg: Any, init: InitSource) -> dict[str, Any]:
    """The record's hyperparameters: the grid point and the settings that shape its training."""
    t = tcfg.training
    return {"lr": point.lr, "weight_decay": point.weight_decay,
            "weight_decay_convention": str(tcfg.weight_decay_convention),
            "adamw_weight_decay": adamw_weight_decay(point, tcfg), "epochs": point.epochs, "seed": point.seed,
            "batch_size": int(t.batch_size), "gradient_accumulation_steps": int(t.gradient_accumulation_steps),
            "max_length": int(tcfg.max_length), "warmup_ratio": float(t.warmup_ratio),
            "adam_betas": [float(t.adam_beta1), float(t.adam_beta2)], "adam_epsilon": float(t.adam_epsilon),
            "max_grad_norm": float(t.max_grad_norm), **protocol_hyperparameters(point, tcfg),
            "early_stopping_min_delta": float(t.early_stopping.min_delta), "init_from": init.kind,
            "max_train_samples": tcfg.max_train_samples, "max_eval_samples": tcfg.max_eval_samples}


def monitor(task: glue_data.GlueTask, groups: Sequence[tuple[str, int]]) -> str:
    """The metric early stopping watches under ``authors``: one metric (MNLI: its first dev set), not the score."""
    from harness.tasks.glue.scores import MONITOR
    key = MONITOR[task.metric]
    return f"{key}_{groups[0][0]}" if len(groups) > 1 else key


def protocol_hyperparameters(point: GridPoint, tcfg: Any) -> dict[str, Any]:
    """What the scoring protocol sets: evaluation schedule, patience, decayed parameters, the scored evaluation."""
    t = tcfg.training
    if str(t.scoring_protocol) == "authors":
        return {
            "scoring_protocol": "authors", "eval_interval_batches": int(tcfg.eval_interval[point.task]),
            "early_stopping_patience_batches": int(t.early_stopping.patience_batches),
            "early_stopping_metric": None,   # one dev metric, set by run_point (it knows the dev sets)
            "weight_decay_params": "all", "scored_evaluation": "last",
        }
    return {"scoring_protocol": "best_epoch", "evals_per_epoch": int(t.evals_per_epoch),
            "early_stopping_patience": int(t.early_stopping.patience), "early_stopping_metric": "score",
            "weight_decay_params": "hf_default (no bias, no LayerNorm)", "scored_evaluation": "best (restored)"}


def train_config(point: GridPoint, tcfg: Any, precision: str, device: str, metric: str = "score") -> Any:
    """The classification trainer's settings for one grid point; ``metric``: what ``authors`` stopping watches."""
    from harness.tasks.glue import classification as clf
    from harness.training.settings import TrainRun
    authors = tcfg.training.scoring_protocol == "authors"
    return clf.TrainConfig(
        node=tcfg.training, weight_decay=adamw_weight_decay(point, tcfg), monitor=metric,
        run=TrainRun(lr=point.lr, epochs=point.epochs, seed=point.seed, precision=precision, device=device),
        eval_steps=int(tcfg.eval_interval[point.task]) if authors else None,
    )


def run_point(point: GridPoint, data: glue_data.GlueData, init: InitSource, rec: ResultRecord, ctx: RunContext,
              tracker: Any = None) -> None:
    """Fine-tune and evaluate one grid point into ``rec`` (ok or failed; never raises on divergence)."""
    from harness.tasks.glue import classification as clf
    from harness.training import tracking
    tracker = tracker or tracking.NONE
    task, tcfg, spec, device = data.task, ctx.plan.settings, ctx.plan.model, ctx.plan.device
    out_dir = ctx.plan.layout.trained_model(TASK_FAMILY, rec.model["name"], rec.run_id)
    trainer_dir = out_dir / "trainer"
    groups = [(name, len(split)) for name, split in data.dev.items()]
    rec.details.update({   # over what the cell put there (its files: data_files, data_free_key)
        "init_from": init.checkpoint, "init_from_run_id": init.run_id, "mnli_candidates": init.candidates,
        "n_train": len(data.train), "n_eval": dict(groups), "source": data.source, "checkpoint": None,
        "run_name": ctx.plan.config.get("run_name"),
    })
    t0 = time.perf_counter()
    try:
        watched = monitor(task, groups) if str(tcfg.training.scoring_protocol) == "authors" else "score"
        rec.details["early_stopping_metric"] = rec.hyperparameters["early_stopping_metric"] = watched
        train_cfg = train_config(point, tcfg, rec.precision or "fp32", device, watched)
        train_ds, eval_ds = ctx.tokenized(data)
        from transformers import set_seed
        set_seed(point.seed)  # the fresh head's initialisation follows the run's seed
        model = clf.load_classifier(
            ctx.model_dir, task.num_labels, attn_implementation=spec.attn_implementation,
            init_from=init.checkpoint, trust_remote_code=spec.trust_remote_code, head=spec.glue, device=device,
        )
        describe_model(rec, model, ctx)
        if init.checkpoint is not None:   # what started fresh: the final classifier; every other weight was carried
            rec.details["init_fresh"] = clf.fresh_parameters(model)
        rec.details["tracking"] = tracker.describe()
        outcome = clf.train_and_evaluate(model, ctx.tokenizer, train_ds, eval_ds,
                                         clf.compute_metrics_fn(task.metric, groups), train_cfg, trainer_dir, tracker)
        rec.metrics = {k: v for k, v in outcome.metrics.items() if k != "score"}
        rec.details.update(
            best_epoch=outcome.best_epoch, best_step=outcome.best_step, epochs_run=outcome.epochs_run,
            stopped_early=outcome.stopped_early, eval_history=outcome.eval_history, train_loss=outcome.train_loss,
            scored=outcome.scored,
        )
        rec.timings = {"train": round(outcome.train_seconds, 3), "eval": round(outcome.eval_seconds, 3)}
        rec.per_query = per_example(outcome, groups, task.metric, rec.data_fingerprint)
        if task.name == "mnli" or tcfg.keep_checkpoints:  # kept for chaining (prune with harness.select)
            kept = out_dir / ("final" if outcome.scored == "last" else "best")   # the weights that were scored
            model.save_pretrained(kept)
            ctx.tokenizer.save_pretrained(kept)
            rec.details["checkpoint"] = str(kept.resolve())
    except TrainingDivergedError as exc:
        rec.status, rec.error = results.STATUS_FAILED, f"diverged: {exc}"
        log.error("%s %s failed: %s", point.task, rec.run_id, exc)
    except (RuntimeError, ValueError) as exc:  # e.g. out of memory: record it, keep the sweep going
        rec.status, rec.error = results.STATUS_FAILED, f"{type(exc).__name__}: {exc}"
        log.error("%s %s failed:\n%s", point.task, rec.run_id, traceback.format_exc())
    finally:
        shutil.rmtree(trainer_dir, ignore_errors=True)
        clf.free_memory()
    rec.timings["total"] = round(time.perf_counter() - t0, 3)


def describe_model(rec: ResultRecord, model: Any, ctx: RunContext) -> None:
    """What ran, read from the loaded model: the attention implementation and the head that was built."""
    from harness.models.load import attention_record
    from harness.tasks.glue.classification import describe_head
    rec.model = {**rec.model, **attention_record(ctx.plan.model.attn_implementation, model.base_model, ctx.plan.device)}
    rec.details["attn_implementation"] = str(getattr(model.config, "_attn_implementation", "") or "")
    rec.details["head"] = describe_head(model)


def per_example(outcome: Any, groups: Sequence[tuple[str, int]], metric: str, data: str | None) -> Any:
    """Each dev example's prediction and label, kept beside the record for paired tests."""
    from harness.core.per_query import PerQuery, fingerprint
    from harness.tasks.glue.scores import rescoring_kind
    if outcome.predictions is None or outcome.labels is None:
        return None
    ids = [f"{name}:{i}" for name, n in groups for i in range(n)]
    if len(ids) != len(outcome.labels):
        return None
    labels = outcome.labels.astype(np.float64)
    return PerQuery(ids, {"prediction": outcome.predictions.astype(np.float64), "label": labels},
                    {"dev": str(data), "labels": fingerprint(labels.tolist()), "glue_metric": rescoring_kind(metric),
                     "groups": fingerprint([list(g) for g in groups])}, unit="example")


def run(plan: RunPlan, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
    from harness.tasks.glue.decay import check_decay
    from harness.tasks.glue.scores import score_key
    from harness.training import tracking
    s = plan.settings
    names = {c.dataset for c in todo}
    data = load_data([t for t in plan.stages.tasks if t.name in names], s)   # data problems before any model
    check_decay([c.payload[0] for c in todo], {t: len(d.train) for t, d in data.items()}, s)
    ctx = context(plan)
    for i, cell in enumerate(todo, 1):
        point, init = cell.payload
        d = data[point.task]
        rec = plan.header.record(
            cell, model=ctx.model, split="validation", metrics={}, hyperparameters=hyperparameters(point, s, init),
            main_score=score_key(d.task.metric, len(d.dev) > 1), data_fingerprint=d.fingerprint,
        )
        log.info("[%d/%d] %s %s (init: %s)", i, len(todo), point.task, rec.run_id, init.kind)
        tracker = tracking.tracker(plan.config, run_id=cell.run_id, record_path=plan.record_path(cell),
                                   task=plan.task, model=plan.model_name)
        run_point(point, d, init, rec, ctx, tracker)
        log.info("[%d/%d] %s %s: %s %s", i, len(todo), point.task, rec.run_id, rec.status,
                 f"{rec.main_score}={rec.score:.2f}" if rec.status == results.STATUS_OK else rec.error)
        yield rec


def context(plan: RunPlan) -> RunContext:
    """What every grid point of the run shares: the model, its tokenizer."""
    from transformers import AutoTokenizer

    from harness import models
    spec = plan.model
    model_dir, revision = models.resolve_path(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=spec.trust_remote_code)
    except (OSError, ValueError) as exc:
        raise HarnessError(f"could not load the tokenizer of model {spec.name!r} from {model_dir}: {exc}") from exc
    return RunContext(plan, model_dir, models.model_identity(spec, model_dir, revision), tokenizer)
