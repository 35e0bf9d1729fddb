"""``hydra.*`` overrides given to the commands that start jobs themselves: ``hydra.run.dir=<dir>`` puts each job's logs
in ``<dir>/<job key>/``; the rest is refused in one line naming it (the command launches its own jobs)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.layout import safe_name


@dataclass(frozen=True)
class HydraOverrides:
    """A command line split: other overrides, and ``hydra.run.dir`` (None: ``${paths.outputs}/hydra/<time>``)."""

    rest: list[str]
    log_dir: str | None = None

    def note(self, command: str) -> str | None:
        """The line that says what was applied (None when nothing was)."""
        if self.log_dir is None:
            return None
        return f"[{command}] hydra.run.dir: each job's log goes to {self.log_dir}/<job key>/"


def is_hydra(override: str) -> bool:
    key = override.partition("=")[0].lstrip("+~")
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


def split(overrides: Sequence[str], command: str, launcher: str) -> HydraOverrides:
    """``overrides`` without their ``hydra`` ones, applied or refused (``launcher``: named when refusing it)."""
    rest: list[str] = []
    log_dir = None
    for text in overrides:
        if not is_hydra(text):
            rest.append(text)
            continue
        key, _, value = text.partition("=")
        key, value = key.lstrip("+~"), value.strip().strip("'\"")
        if key == "hydra.run.dir" and value:
            log_dir = str(Path(value).expanduser().resolve())
        elif key == "hydra.job.chdir" and value.lower() in ("false", "0", "no"):
            continue   # what every job does: it runs in the folder the command runs in
        elif key == "hydra.job.chdir":
            raise HarnessError(f"{text!r}: {command} runs its jobs in the folder it runs in, so that a relative "
                               "paths.results is the folder it reads their records from: drop it")
        elif key.startswith(("hydra/launcher", "hydra.launcher")):
            raise HarnessError(f"{text!r}: {command} launches its own jobs; ask for SLURM with {launcher}")
        else:
            raise HarnessError(f"{text!r}: {command} takes hydra.run.dir=<folder> (each job's logs in "
                               "<folder>/<job key>/) and no other hydra setting: drop it")
    return HydraOverrides(rest, log_dir)


def job_log_dir(log_dir: str, key: str) -> str:
    """Job ``key``'s log folder under ``hydra.run.dir``."""
    return str(Path(log_dir) / safe_name(key))


def run_dir_override(log_dir: str, key: str) -> str:
    """``hydra.run.dir=<its folder>`` for job ``key``'s ``python -m harness`` run (quoted: a key holds ``[]=``)."""
    folder = job_log_dir(log_dir, key).replace("\\", "\\\\").replace("'", "\\'")
    return f"hydra.run.dir='{folder}'"


@contextmanager
def log_file(folder: str | None) -> Iterator[None]:
    """While a job runs in this process outside Hydra: its log records also go to ``<folder>/run.log``."""
    if folder is None:
        yield
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    handler = logging.FileHandler(Path(folder) / "run.log")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    before, shown = root.level, [(h, h.level) for h in root.handlers]
    for h, level in shown:
        h.setLevel(max(level, before))
    root.setLevel(min(before, logging.INFO))
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(before)
        for h, level in shown:
            h.setLevel(level)
