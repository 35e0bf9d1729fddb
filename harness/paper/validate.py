"""Everything a paper graph needs, checked before the first job exists: every ``paper.*`` value, every step's run as a
single run checks it up front, the paper folder writable and its ledger readable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, unknown_name
from harness.core.typed import build, choices
from harness.paper.graph import StepSettings

LAUNCHERS = ("local", "slurm")


@dataclass(kw_only=True)
class PaperSettings:
    """``conf/paper/<name>.yaml`` with the ``paper.*`` overrides applied."""

    stages: dict[str, StepSettings]   # the config key paper.stages: the graph's steps
    leaderboard: bool
    min_finished: float
    overrides: list[str]
    launcher: str = choices(*LAUNCHERS)
    cluster: str
    site: str | None


def file_keys(name: str) -> dict[str, Any]:
    """The graph file's own top-level keys and step names, before any override (nothing resolved)."""
    from importlib import resources

    from omegaconf import OmegaConf
    path = Path(name) if name.endswith(".yaml") else Path(str(resources.files("conf"))) / "paper" / f"{name}.yaml"
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    return raw if isinstance(raw, dict) else {}


def check_paper(paper: Mapping[str, Any], base: Mapping[str, Any]) -> PaperSettings:
    """The typed graph settings; a step override naming no step of the graph is refused with the closest."""
    steps = list(base.get("stages") or {})
    for name, conf in (paper.get("stages") or {}).items():
        if name not in steps and not (isinstance(conf, Mapping) and conf.get("task")):
            raise unknown_name("paper step", name, steps, "Define a new step with its task: "
                               f"paper.stages.{name}.task=<task>.")
    schema = {f.name for f in fields(PaperSettings)}
    s = build(PaperSettings, {k: v for k, v in paper.items() if k in schema or k not in base}, "paper")
    if not 0 < s.min_finished <= 1:
        raise HarnessError(f"paper.min_finished={s.min_finished} must be in (0, 1]: the share of a sweep's points "
                           "that must finish before its selection runs")
    for name, st in s.stages.items():
        if st.shards is not None and st.shards < 1:
            raise HarnessError(f"paper.stages.{name}.shards={st.shards} must be >= 1 (1: not sharded)")
        if st.devices is not None and st.devices < 1:
            raise HarnessError(f"paper.stages.{name}.devices={st.devices} must be >= 1 (1: one process per training)")
    return s


def check_folder(folder: Path) -> None:
    """The paper folder is writable and its ledger, if any, readable and of its shape."""
    from harness.paper.slurm import read_ledger
    from harness.run.preflight import check_writable_dir
    check_writable_dir(folder, "the paper folder (beside paths.results)")
    read_ledger(folder)


def check_runs(steps: Sequence[Any], deep: bool = True) -> None:
    """Each step's first run, checked as ``python -m harness <its overrides>`` checks before any work."""
    from harness.run.overrides import check_overrides
    check_no_overwrite(steps)
    seen: set[tuple[str, ...]] = set()
    for step in steps:
        job = next((j for j in step.jobs if j.mode == "run"), None)
        if job is None or job.overrides in seen:
            continue
        seen.add(job.overrides)
        argv = list(job.overrides)
        try:
            check_overrides(argv)
            if deep:
                _check_composed(argv, plan=not step.after)   # a step that waits plans from its upstream's records
        except HarnessError as exc:
            raise HarnessError(f"step {step.name} ({job.key}): {exc}") from None


def check_no_overwrite(steps: Sequence[Any]) -> None:
    """``overwrite=true`` is refused: under it no job would ever be done, and each resubmit redo everything."""
    for step in steps:
        for job in step.jobs:
            for text in job.overrides:
                key, _, value = text.partition("=")
                if key.lstrip("+~") == "overwrite" and value.strip().lower() in ("true", "1", "yes"):
                    raise HarnessError(
                        f"{text!r} (step {step.name}): a paper graph computes what is not done yet and never "
                        "redoes a finished job; to compute one again, remove its records (results/<task>/<model>/"
                        "<run id>/), or run it alone with python -m harness <its overrides> overwrite=true")


def _check_composed(argv: list[str], plan: bool) -> None:
    """The single run's up-front checks on the composed config, without loading a model or reading data."""
    from harness.run.overrides import compose_config
    from harness.run.runner import checked
    checked(compose_config(argv), plan=plan)
