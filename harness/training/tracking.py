"""Experiment trackers for every trainer: the ``logger`` config group becomes the Trainer's ``report_to``, callbacks
and a tracker run labelled with the run id; wandb and mlflow are imported only when chosen."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.typed import build, choices

log = logging.getLogger(__name__)

#: logger name -> (module it imports, the install command)
PACKAGES = {"tensorboard": ("tensorboard", "pip install 'harness[tensorboard]'"),
            "wandb": ("wandb", "pip install 'harness[wandb]'"), "mlflow": ("mlflow", "pip install 'harness[mlflow]'")}


@dataclass(kw_only=True)
class LoggerSettings:
    """``logger.*`` (conf/logger/<name>.yaml)."""

    name: str = choices("none", "tensorboard", "wandb", "mlflow", default="none")
    dir: str | None = None            # tensorboard: event files root; wandb: its local files
    project: str | None = None        # wandb project / mlflow experiment
    entity: str | None = None         # wandb entity (user or team)
    mode: str | None = None           # wandb: online | offline | disabled (None: wandb's default)
    tracking_uri: str | None = None   # mlflow: server URL or folder (None: MLFLOW_TRACKING_URI or ./mlruns)
    tags: list[str] = field(default_factory=list)


def settings(cfg: Any) -> LoggerSettings:
    """The run's logger settings (no ``logger`` key: none)."""
    raw = cfg.get("logger") if hasattr(cfg, "get") else None
    return build(LoggerSettings, raw, "logger")


def check(cfg: Any) -> LoggerSettings:
    """Fail before any work when the chosen tracker's package is not installed (one line, with the install hint)."""
    s = settings(cfg)
    if s.name in PACKAGES:
        module, hint = PACKAGES[s.name]
        if importlib.util.find_spec(module) is None:
            raise HarnessError(f"logger={s.name} needs the {module} package, which is not installed: {hint}")
    return s


@dataclass
class Tracker:
    """One training run's link to the tracker: what it reports to, under which name, with which labels."""

    settings: LoggerSettings
    run_id: str = ""
    record_path: str = ""
    name: str = ""                    # <task>/<model>/<run id>
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return self.settings.name != "none"

    @property
    def log_dir(self) -> Path | None:
        if self.settings.name != "tensorboard":
            return None
        return Path(self.settings.dir or "tensorboard").expanduser() / self.name

    def training_args(self) -> dict[str, Any]:
        """``TrainingArguments`` keywords: TensorBoard goes through :meth:`callbacks` (to place its files)."""
        report_to = self.settings.name if self.settings.name in ("wandb", "mlflow") else "none"
        return {"report_to": report_to, "run_name": self.name or None}

    def callbacks(self) -> list[Any]:
        if self.settings.name != "tensorboard":
            return []
        from torch.utils.tensorboard import SummaryWriter
        from transformers.integrations import TensorBoardCallback
        writer = SummaryWriter(log_dir=str(self.log_dir))
        writer.add_text("harness/run_id", self.run_id)
        writer.add_text("harness/record_path", self.record_path)
        writer.flush()
        return [TensorBoardCallback(tb_writer=writer)]

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """The tracker run around training (wandb/mlflow: opened here so it carries the harness labels)."""
        with {"wandb": self._wandb, "mlflow": self._mlflow}.get(self.settings.name, contextlib.nullcontext)():
            yield
        if self.log_dir is not None:
            log.info("TensorBoard: %s (tensorboard --logdir %s)", self.log_dir, self.log_dir.parent.parent.parent)

    def labels(self) -> dict[str, str]:
        return {"harness_run_id": self.run_id, "harness_record_path": self.record_path}

    @contextlib.contextmanager
    def _wandb(self) -> Iterator[None]:
        import wandb
        s = self.settings
        run = wandb.init(project=s.project, entity=s.entity, name=self.name, dir=s.dir, mode=s.mode,
                         tags=list(s.tags) or None, config={**self.labels(), "harness": dict(self.config)})
        try:
            yield
            run.summary.update(self.labels())
        finally:
            run.finish()

    @contextlib.contextmanager
    def _mlflow(self) -> Iterator[None]:
        import mlflow
        s = self.settings
        if s.tracking_uri:
            mlflow.set_tracking_uri(s.tracking_uri)
        mlflow.set_experiment(s.project or "harness")
        tags = {**self.labels(), **{f"tag.{t}": "1" for t in s.tags}}
        with mlflow.start_run(run_name=self.name, tags=tags):
            yield

    def describe(self) -> dict[str, Any] | None:
        """What a record notes about where the training curves are."""
        if not self.enabled:
            return None
        out: dict[str, Any] = {"logger": self.settings.name, "run_name": self.name}
        if self.log_dir is not None:
            out["dir"] = str(self.log_dir)
        if self.settings.project:
            out["project"] = self.settings.project
        return out


NONE = Tracker(LoggerSettings())


def tracker(cfg: Any, *, run_id: str, record_path: str | Path, task: str, model: str) -> Tracker:
    """The tracker of one training run of ``cfg`` (``logger=none``: reports nowhere)."""
    s = settings(cfg)
    if s.name == "none":
        return NONE
    from omegaconf import OmegaConf
    config = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)
    return Tracker(s, run_id=run_id, record_path=str(record_path), name=f"{task}/{model}/{run_id}",
                   config={k: v for k, v in config.items() if k != "hydra"})
