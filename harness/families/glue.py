"""``task=glue``: the paper's GLUE sweeps: plan the grid, skip finished points, fine-tune, write one record each.

:class:`GlueFamily` plans every grid point as a cell (MNLI and the tasks that do not chain first, then the tasks
that start from the selected MNLI checkpoint, ``task.chain_from_mnli``, once MNLI's records exist); a point with an
ok record is skipped unless ``overwrite=true``; the others load every task's data first (a missing file or an
offline hub fails before any training), then train in order. Under a Hydra multirun every job is one grid point; the GLUE sweep configs
make each task one batch (one SLURM array), MNLI first, and :class:`StagingCheck` refuses a sweep whose
batches would start a chained task before MNLI has finished.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from harness import results
from harness.data import glue as glue_data
from harness.errors import HarnessError, TrainingDivergedError
from harness.families.base import Cell, Family
from harness.results import ResultRecord
from harness.selection.rules import BestConfigPerDataset, Choice
from harness.typed import choices

log = logging.getLogger(__name__)

TASK_FAMILY = "glue"
PROTOCOL_VERSION = 1    # bump when a change in this module changes the numbers
GLUE_PAPER_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte")
GLUE_LABELS = {
    "cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "qqp": "QQP", "mnli": "MNLI", "qnli": "QNLI",
    "rte": "RTE",
}
#: how each GLUE task's score is defined, written into the selection so a reader knows
GLUE_SCORE_NOTES = {
    "mnli": "mean of matched and mismatched accuracy (the paper's MNLI)",
    "qqp": "mean of F1 and accuracy (both recorded)",
    "mrpc": "mean of F1 and accuracy (both recorded)",
    "stsb": "Spearman correlation (Pearson recorded)",
    "cola": "Matthews correlation",
}


# ---------------------------------------------------------------------------------------------- settings
@dataclass
class Grid:
    learning_rates: list[float]
    weight_decays: list[float]
    epochs: dict[str, list[int]]


@dataclass
class EarlyStopping:
    patience: int = 2
    min_delta: float = 0.0


@dataclass
class Hub:
    path: str = "nyu-mll/glue"
    revision: str | None = None


@dataclass(kw_only=True)
class GlueSettings:
    """``task.*`` of conf/task/glue.yaml (documented there)."""

    name: str
    tasks: list[str] | str
    definitions: dict[str, Any]
    grid: Grid
    data_dir: str | None = None
    hub: Hub = field(default_factory=Hub)
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    subsample_seed: int = 0
    lr: float | None = None
    weight_decay: float | None = None
    epochs: int | None = None
    epoch_slot: int | None = None
    seed: int | None = None
    batch_size: int = 32
    eval_batch_size: int = 128
    gradient_accumulation_steps: int = 1
    max_length: int = 128
    warmup_ratio: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-6
    max_grad_norm: float = 1.0
    evals_per_epoch: int = 1
    early_stopping: EarlyStopping = field(default_factory=EarlyStopping)
    logging_steps: int = 50
    dataloader_num_workers: int = 0
    chain_from_mnli: list[str] = field(default_factory=list)
    mnli_init: str | bool = "if_available"
    init_from: str | None = None
    keep_checkpoints: bool = False
    weight_decay_convention: str = choices("composer", "torch")


@dataclass(frozen=True)
class GridPoint:
    """One cell of the sweep: one fine-tuning run."""

    task: str
    lr: float
    weight_decay: float
    epochs: int
    seed: int


# ---------------------------------------------------------------------------------------------- planning (pure)
def order_tasks(tasks: Sequence[glue_data.GlueTask], chained: Sequence[str]) -> list[glue_data.GlueTask]:
    """MNLI first, then tasks that do not chain, then the MNLI-chained ones (each group in the given order)."""
    rank = {t.name: (0 if t.name == "mnli" else 2 if t.name in chained else 1) for t in tasks}
    return sorted(tasks, key=lambda t: rank[t.name])


def epoch_values(task: glue_data.GlueTask, tcfg: Any) -> list[int]:
    """The epochs this task runs: ``task.epochs``, or the ``task.epoch_slot``-th of its group, or the group."""
    groups = tcfg.grid.epochs
    if task.epoch_group not in groups:
        raise HarnessError(
            f"GLUE task {task.name} has epoch_group {task.epoch_group!r}, but task.grid.epochs defines only "
            f"{list(groups)}; add it or fix task.definitions.{task.name}.epoch_group"
        )
    values = [int(v) for v in groups[task.epoch_group]]
    if tcfg.epochs is not None:
        return [int(tcfg.epochs)]
    if tcfg.epoch_slot is not None:
        slot = int(tcfg.epoch_slot)
        if not 0 <= slot < len(values):
            raise HarnessError(
                f"task.epoch_slot={slot} is out of range for {task.name}'s epoch set {values} "
                f"(valid: 0-{len(values) - 1}); or set task.epochs=<n> directly"
            )
        return [values[slot]]
    return values


def plan(tasks: Sequence[glue_data.GlueTask], tcfg: Any, default_seed: int) -> list[GridPoint]:
    """Every grid point the config implies, in run order. A set ``task.lr`` etc. pins that axis."""
    lrs = [float(tcfg.lr)] if tcfg.lr is not None else [float(v) for v in tcfg.grid.learning_rates]
    wds = [float(tcfg.weight_decay)] if tcfg.weight_decay is not None else [float(v) for v in tcfg.grid.weight_decays]
    seed = int(tcfg.seed) if tcfg.seed is not None else int(default_seed)
    return [
        GridPoint(t.name, lr, wd, ep, seed)
        for t in tasks
        for lr in lrs
        for wd in wds
        for ep in epoch_values(t, tcfg)
    ]


# ---------------------------------------------------------------------------------------------- MNLI chaining
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


# ---------------------------------------------------------------------------------------------- one grid point
def hyperparameters(point: GridPoint, tcfg: Any, init: InitSource) -> dict[str, Any]:
    return {
        "lr": point.lr,
        "weight_decay": point.weight_decay,
        "weight_decay_convention": str(tcfg.weight_decay_convention),
        "adamw_weight_decay": adamw_weight_decay(point, tcfg),
        "epochs": point.epochs,
        "seed": point.seed,
        "batch_size": int(tcfg.batch_size),
        "gradient_accumulation_steps": int(tcfg.gradient_accumulation_steps),
        "max_length": int(tcfg.max_length),
        "warmup_ratio": float(tcfg.warmup_ratio),
        "adam_betas": [float(tcfg.adam_beta1), float(tcfg.adam_beta2)],
        "adam_epsilon": float(tcfg.adam_epsilon),
        "max_grad_norm": float(tcfg.max_grad_norm),
        "evals_per_epoch": int(tcfg.evals_per_epoch),
        "early_stopping_patience": int(tcfg.early_stopping.patience),
        "early_stopping_min_delta": float(tcfg.early_stopping.min_delta),
        "init_from": init.kind,
        "max_train_samples": tcfg.max_train_samples,
        "max_eval_samples": tcfg.max_eval_samples,
    }


def adamw_weight_decay(point: GridPoint, tcfg: Any) -> float:
    """The ``weight_decay`` torch's AdamW gets: ``composer`` (the authors' DecoupledAdamW decays by
    weight_decay x lr_t / lr, so AdamW's lr_t x wd needs wd = weight_decay / lr) | ``torch`` (as given)."""
    if tcfg.weight_decay_convention == "composer":
        return float(point.weight_decay) / float(point.lr)
    return float(point.weight_decay)


def run_point(point: GridPoint, data: glue_data.GlueData, init: InitSource, rec: ResultRecord, ctx: RunContext,
              tracker: Any = None) -> None:
    """Fine-tune and evaluate one grid point, filling ``rec`` (status ok or failed; never raises on divergence);
    ``tracker`` (``logger=``) receives the training curves."""
    from harness.training import tracking

    tracker = tracker or tracking.NONE
    from harness.training import classification as clf

    tcfg = ctx.tcfg
    task = data.task
    out_dir = Path(ctx.outputs) / TASK_FAMILY / results._safe(rec.model["name"]) / rec.run_id
    trainer_dir = out_dir / "trainer"
    groups = [(name, len(split)) for name, split in data.dev.items()]
    rec.details = {
        "init_from": init.checkpoint, "init_from_run_id": init.run_id, "mnli_candidates": init.candidates,
        "n_train": len(data.train), "n_eval": dict(groups), "source": data.source, "checkpoint": None,
        "run_name": ctx.run_name,
    }
    t0 = time.perf_counter()
    try:
        train_cfg = clf.TrainConfig(
            lr=point.lr, weight_decay=adamw_weight_decay(point, tcfg), epochs=point.epochs, seed=point.seed,
            batch_size=int(tcfg.batch_size), eval_batch_size=int(tcfg.eval_batch_size),
            gradient_accumulation_steps=int(tcfg.gradient_accumulation_steps), warmup_ratio=float(tcfg.warmup_ratio),
            adam_beta1=float(tcfg.adam_beta1), adam_beta2=float(tcfg.adam_beta2), adam_epsilon=float(tcfg.adam_epsilon),
            max_grad_norm=float(tcfg.max_grad_norm), evals_per_epoch=int(tcfg.evals_per_epoch),
            patience=int(tcfg.early_stopping.patience), min_delta=float(tcfg.early_stopping.min_delta),
            precision=rec.precision or "fp32", device=ctx.device, logging_steps=int(tcfg.logging_steps),
            dataloader_num_workers=int(tcfg.dataloader_num_workers),
        )
        train_ds, eval_ds = ctx.tokenized(data)
        from transformers import set_seed

        set_seed(point.seed)  # the fresh head's initialisation follows the run's seed
        model = clf.load_classifier(
            ctx.model_dir, task.num_labels, attn_implementation=ctx.spec.attn_implementation,
            init_from=init.checkpoint, trust_remote_code=ctx.spec.trust_remote_code,
        )
        rec.details["tracking"] = tracker.describe()
        outcome = clf.train_and_evaluate(
            model, ctx.tokenizer, train_ds, eval_ds,
            clf.compute_metrics_fn(task.metric, task.is_regression, groups), train_cfg, trainer_dir, tracker,
        )
        rec.metrics = {k: v for k, v in outcome.metrics.items() if k != "score"}
        rec.details.update(
            best_epoch=outcome.best_epoch, best_step=outcome.best_step, epochs_run=outcome.epochs_run,
            stopped_early=outcome.stopped_early, eval_history=outcome.eval_history, train_loss=outcome.train_loss,
        )
        rec.timings = {"train": round(outcome.train_seconds, 3), "eval": round(outcome.eval_seconds, 3)}
        if task.name == "mnli" or tcfg.keep_checkpoints:  # kept for chaining (prune with harness.select)
            best_dir = out_dir / "best"
            model.save_pretrained(best_dir)
            ctx.tokenizer.save_pretrained(best_dir)
            rec.details["checkpoint"] = str(best_dir.resolve())
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


# ---------------------------------------------------------------------------------------------- the runner
@dataclass
class RunContext:
    """What every grid point of one invocation shares: model, tokenizer, devices, tokenised-data cache."""

    cfg: DictConfig
    tcfg: Any
    spec: Any
    model_dir: str
    model: dict[str, Any]
    tokenizer: Any
    device: str
    precision: str
    outputs: str
    run_name: str | None

    def __post_init__(self) -> None:
        self._cache: dict[str, Any] = {}

    def tokenized(self, data: glue_data.GlueData):
        """Train and (concatenated) dev sets tokenised once per (model, data, max length), in memory and on disk."""
        import datasets

        from harness.results import stable_hash

        max_length = int(self.tcfg.max_length)
        key = stable_hash([self.model["fingerprint"], data.fingerprint, data.task.name, max_length,
                           self.tcfg.max_train_samples, self.tcfg.max_eval_samples, int(self.tcfg.subsample_seed)], 16)
        if key not in self._cache:
            from harness.training.classification import cached_tokenize

            root = Path(str(self.cfg.paths.cache)).expanduser() / "glue-tokenized" / key
            reg = data.task.is_regression
            train = cached_tokenize(data.train, self.tokenizer, max_length, reg, root / "train")
            devs = [cached_tokenize(s, self.tokenizer, max_length, reg, root / f"dev-{n}") for n, s in data.dev.items()]
            self._cache[key] = (train, devs[0] if len(devs) == 1 else datasets.concatenate_datasets(devs))
        return self._cache[key]


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


class GlueSelection(BestConfigPerDataset):
    """Best configuration per task (mean over seeds), plus the GLUE average and the paper's Table 5 rows."""

    def choose_model(self, records: list[ResultRecord], **kw: Any) -> Choice | None:
        choice = super().choose_model(records, **kw)
        if choice is None:
            return None
        tasks = choice.summary["tasks"] = {k[-1] if isinstance(k, tuple) else k: v
                                           for k, v in choice.summary["tasks"].items()}
        for t, sel in tasks.items():
            if t in GLUE_SCORE_NOTES:
                sel["score_definition"] = GLUE_SCORE_NOTES[t]
        present = [t for t in GLUE_PAPER_TASKS if t in tasks]
        missing = [t for t in GLUE_PAPER_TASKS if t not in tasks]
        choice.summary |= {
            "glue_average": sum(tasks[t]["score"]["mean"] for t in present) / len(present) if present else None,
            "glue_average_over": present, "glue_average_complete": not missing, "missing_tasks": missing,
            "paper_baselines": paper_baselines(),
        }
        return choice

    def format(self, choice: Choice) -> str:
        text = super().format(choice)
        s = choice.summary
        if s["glue_average"] is not None:
            scope = "" if s["glue_average_complete"] else f" (partial: {len(s['glue_average_over'])} of 8 tasks)"
            text += f"\n  GLUE average {s['glue_average']:.2f}{scope}"
        return text


def paper_baselines() -> list[dict[str, Any]]:
    """Table 5 of the ModernBERT paper (dev-set GLUE scores), shipped as conf/task/glue/paper_baselines.yaml."""
    from importlib import resources

    import yaml

    text = (resources.files("conf") / "task" / "glue" / "paper_baselines.yaml").read_text()
    return list(yaml.safe_load(text)["rows"])


class GlueFamily(Family):
    """``task=glue``: one cell per (grid point, GLUE task); RTE/MRPC/STS-B planned after MNLI has run."""

    settings_class = GlueSettings
    identity_exclude: ClassVar[Mapping[str, str]] = {
        "seed": "GLUE's seed is task.seed (which defaults to it), replaced by each grid point's seed",
        "task.tasks": "replaced by the grid point's task",
        "task.grid": "replaced by the grid point's values (task.lr, task.weight_decay, task.epochs)",
        "task.epoch_slot": "replaced by the grid point's epochs",
        "task.definitions": "replaced by the grid point's task definition",
        "task.data_dir": "replaced by the content fingerprint of the task's files (task.data)",
        "task.hub": "replaced by hub:<path>@<revision> (task.data)",
        "task.chain_from_mnli": "replaced by the MNLI run the point starts from (task.init)",
        "task.mnli_init": "replaced by the MNLI run the point starts from (task.init)",
        "task.init_from": "replaced by the checkpoint the point starts from (task.init)",
        "task.eval_batch_size": "how the dev set is batched",
        "task.logging_steps": "how often the loss is logged",
        "task.dataloader_num_workers": "data loading processes",
        "task.keep_checkpoints": "whether checkpoints are kept on disk",
    }

    n_planned = 0   # grid points planned by this invocation (done or not)

    @cached_property
    def tasks(self) -> list[glue_data.GlueTask]:
        s = self.settings
        defs = glue_data.task_definitions(s.definitions)
        return order_tasks(glue_data.select_tasks(s.tasks, defs), list(s.chain_from_mnli))

    def stages(self) -> Iterator[list[Cell]]:
        """MNLI and the tasks that do not chain first; the chained ones once MNLI's records exist."""
        chained = set(self.settings.chain_from_mnli)
        first = [t for t in self.tasks if t.name not in chained]
        if first:
            yield self.cells_for(first)
        if len(first) < len(self.tasks):
            yield self.cells_for([t for t in self.tasks if t.name in chained])

    def cells(self) -> list[Cell]:
        return [c for stage in self.stages() for c in stage]

    def cells_for(self, tasks: Sequence[glue_data.GlueTask]) -> list[Cell]:
        s = self.settings
        data = {t.name: glue_data.data_fingerprint(t, s.data_dir, s.hub.path, s.hub.revision) for t in tasks}
        out = []
        for point in plan(tasks, s, int(self.cfg.seed)):
            init = resolve_init(point.task, s, str(self.cfg.paths.results), self.model_ref, self.model_name)
            ident = self.identity(replace={
                "task.tasks": point.task, "task.lr": point.lr, "task.weight_decay": point.weight_decay,
                "task.epochs": point.epochs, "task.seed": point.seed, "task.definitions": s.definitions[point.task],
                "task.data": data[point.task], "task.init": init.run_id or init.checkpoint,
                "task.protocol": PROTOCOL_VERSION,
            })
            rid = results.run_id(ident, {"lr": point.lr, "wd": point.weight_decay, "ep": point.epochs,
                                         "seed": point.seed})
            out.append(Cell(point.task, rid, ident, payload=(point, init)))
        self.n_planned += len(out)
        return out

    def run(self, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
        from harness.evaluation.glue_metrics import score_key

        s = self.settings
        names = {c.dataset for c in todo}
        data = load_data([t for t in self.tasks if t.name in names], s)   # data problems before any model
        ctx = self.context
        for i, cell in enumerate(todo, 1):
            point, init = cell.payload
            d = data[point.task]
            rec = self.new_record(
                cell, model=ctx.model, split="validation", metrics={}, hyperparameters=hyperparameters(point, s, init),
                main_score=score_key(d.task.metric, len(d.dev) > 1), data_fingerprint=d.fingerprint,
            )
            log.info("[%d/%d] %s %s (init: %s)", i, len(todo), point.task, rec.run_id, init.kind)
            run_point(point, d, init, rec, ctx, self.tracker(cell, folder=False))
            log.info("[%d/%d] %s %s: %s %s", i, len(todo), point.task, rec.run_id, rec.status,
                     f"{rec.main_score}={rec.score:.2f}" if rec.status == results.STATUS_OK else rec.error)
            yield rec

    def finish(self, records: Sequence[ResultRecord]) -> None:
        """After an in-process sweep, write the GLUE selection (best configuration per task)."""
        if self.n_planned > 1:
            from harness import selection

            res = str(self.cfg.paths.results)
            path = selection.write_selection(TASK_FAMILY, res, selection.default_out_dir(res), self.model_name)
            if path is not None:
                log.info("GLUE selection (best configuration per task on dev): %s", path)

    @cached_property
    def context(self) -> RunContext:
        from transformers import AutoTokenizer

        from harness import models

        spec = self.spec
        model_dir, revision = models.resolve_path(spec)
        try:
            tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=spec.trust_remote_code)
        except (OSError, ValueError) as exc:
            raise HarnessError(f"could not load the tokenizer of model {spec.name!r} from {model_dir}: {exc}") from exc
        return RunContext(
            cfg=self.cfg, tcfg=self.settings, spec=spec, model_dir=model_dir,
            model=models.model_identity(spec, model_dir, revision), tokenizer=tokenizer, device=self.device,
            precision=self.precision, outputs=str(self.cfg.paths.outputs), run_name=self.cfg.get("run_name"),
        )


# ---------------------------------------------------------------------------------------------- multirun staging
def sweep_batches(params: Mapping[str, str], cli_overrides: Sequence[str], max_batch_size: int | None) -> list:
    """The job batches Hydra's basic sweeper will launch, in order (each batch = one SLURM array, and the
    next batch starts only when the previous one has finished)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()] + list(cli_overrides))
    return BasicSweeper.split_arguments(parsed, max_batch_size)


def _job_tasks(job: Sequence[str]) -> list[str] | None:
    for o in job:
        key, _, value = o.partition("=")
        if key.lstrip("+~") == "task.tasks":
            return [v.strip() for v in value.strip("[]").split(",") if v.strip()]
    return None


def check_staging(batches: Sequence[Sequence[Sequence[str]]], chained: Sequence[str]) -> None:
    """Fail unless every job of an MNLI-chained task is in a later batch than every MNLI job."""
    last_mnli, first_chained = -1, None
    for i, batch in enumerate(batches):
        for job in batch:
            names = _job_tasks(job) or []
            if "mnli" in names:
                last_mnli = i
            if any(n in chained for n in names) and "mnli" not in names and first_chained is None:
                first_chained = i
    if first_chained is not None and last_mnli >= first_chained:
        raise HarnessError(
            f"this multirun would start MNLI-chained jobs (batch {first_chained + 1}) before every MNLI job has "
            f"finished (batch {last_mnli + 1}). Keep task.tasks the first sweep parameter with mnli first, and set "
            "hydra.sweeper.max_batch_size to the number of grid points per task (lr x weight decay x epochs x "
            "seeds), so each task is its own batch; or run MNLI in a separate multirun first."
        )


class StagingCheck(Callback):
    """Hydra callback (``hydra.callbacks`` in the GLUE sweep configs): before a multirun launches anything,
    check that MNLI's jobs finish before the jobs that start from MNLI's checkpoint."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweeper = config.hydra.sweeper
        cli = [o for o in config.hydra.overrides.task]
        batches = sweep_batches(dict(sweeper.get("params") or {}), cli, sweeper.get("max_batch_size"))
        chained = list(config.task.chain_from_mnli) if str(config.task.mnli_init) != "off" else []
        check_staging(batches, chained)
        log.info("GLUE multirun: %d job(s) in %d batch(es), MNLI before the chained tasks",
                 sum(len(b) for b in batches), len(batches))
