"""The series command's settings: flags and harness overrides, checked before anything is read (one ``error:`` line)."""

from __future__ import annotations

import argparse
import math
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.layout import safe_name
from harness.paper import hydra_overrides
from harness.paper.validate import LAUNCHERS
from harness.series.discover import TRAINER_PATTERN, compile_pattern

#: the keys the series command sets for each checkpoint's run: a user's value would be silently replaced
OWN_KEYS = ("series",)
#: seconds: the quiet period of a folder without the trainer's marker, the watch's poll and idle time
SETTLE, POLL, IDLE = 60.0, 30.0, 3600.0


@dataclass
class Settings:
    """What the command line asks for."""

    overrides: list[str]                  # the harness overrides every checkpoint's run gets (no model.path, task)
    tasks: list[str | None]               # task=a,b: each checkpoint runs each; [None]: the config's default task
    root: Path | None                     # model.path: the training run's folder
    entries: list[str]                    # --checkpoints
    pattern: re.Pattern[str]
    name: str
    settle: float
    watch: bool = False
    poll: float = POLL
    idle: float = IDLE
    launcher: str = "local"
    cluster: str = "gpu"
    dry_run: bool = False
    status: bool = False
    argv: list[str] = field(default_factory=list)   # the command line as given (for the hints it prints)
    log_dir: str | None = None            # hydra.run.dir: each checkpoint run's logs in <it>/<run key>/

    def task_overrides(self, task: str | None) -> list[str]:
        return [*self.overrides, *([f"task={task}"] if task else [])]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness.series",
        description="Evaluate every checkpoint of a training run as its own run (resumable), watch for new ones, "
        "or submit each to SLURM. Overrides are python -m harness's (task=..., model=..., task.datasets=...); "
        "model.path= is the training run's folder.")
    p.add_argument("overrides", nargs="*", help="model=..., model.path=<run folder>, task=<t>[,<t2>], task.*=...")
    p.add_argument("--name", help="the series' name (default: model.name if given, else the run folder's name)")
    p.add_argument("--step-pattern", help=r"a regex with one group for the step, matched against each folder's path "
                   rf"below model.path (default '{TRAINER_PATTERN}', the trainers' folders), e.g. 'step_(\d+)/hf'")
    p.add_argument("--checkpoints", help="an explicit list instead: PATH or STEP=PATH, separated by commas")
    p.add_argument("--settle", default=None, help="seconds without a change after which a folder with no "
                   f"trainer_state.json counts as written (default {SETTLE:g})")
    p.add_argument("--watch", action="store_true", help="keep polling for new checkpoints; stop after --idle")
    p.add_argument("--poll", default=None, help=f"seconds between looks at the folder when watching (default {POLL:g})")
    p.add_argument("--idle", default=None, help=f"stop watching after this many seconds with nothing new "
                   f"(default {IDLE:g})")
    p.add_argument("--launcher", default="local", help="local (here, one checkpoint after another) or slurm (one "
                   "array task per checkpoint, submitted as they appear)")
    p.add_argument("--cluster", default="gpu", help="conf/cluster/<name>.yaml: resources of the SLURM jobs and the "
                   "GPU of the cost estimate (default gpu)")
    p.add_argument("--dry-run", action="store_true", help="print the series and its cost; run nothing")
    p.add_argument("--status", action="store_true", help="each checkpoint's state from its records and the SLURM "
                   "queue (the paper graph's --status); run nothing")
    p.add_argument("--best", metavar="NAME", help="print model.path=... model.name=... of series NAME's selected step "
                   "(python -m harness.select --series NAME --task T) for the next step; takes paths.results= only")
    return p


def _seconds(flag: str, text: str | None, default: float, *, zero: bool = False) -> float:
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise HarnessError(f"{flag} {text}: not a number of seconds {'>= 0' if zero else '> 0'}: pass e.g. "
                           f"{flag} {default:g}")
    return value


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str | None], str | None, str | None]:
    """(the other overrides, the tasks of ``task=a,b``, model.path, model.name)."""
    rest: list[str] = []
    tasks: list[str | None] = [None]
    path = name = None
    for text in overrides:
        key, eq, value = text.partition("=")
        bare = key.lstrip("+~")
        if bare in OWN_KEYS or bare.startswith(tuple(f"{k}." for k in OWN_KEYS)):
            raise HarnessError(f"{text!r}: the series command sets {bare} itself for each checkpoint: drop it")
        if bare == "overwrite" and value.strip().lower() in ("true", "1", "yes"):
            raise HarnessError(f"{text!r}: a series computes what has no ok record yet and never redoes a finished "
                               "checkpoint; to compute one again, remove its records (results/<task>/<series>-step"
                               "<step>/), or evaluate it alone with python -m harness model.path=<it> overwrite=true")
        if not eq:
            rest.append(text)
        elif bare == "task":
            tasks = [t.strip() for t in value.split(",") if t.strip()] or [None]
        elif bare == "model.path":
            path = value
        elif bare == "model.name":
            name = value
        else:
            rest.append(text)
    return rest, tasks, path, name


def from_args(argv: Sequence[str]) -> Settings:
    """The settings of ``argv``, checked (no file is read but the folders named, nothing is written)."""
    args, unknown = parser().parse_known_args(list(argv))
    flags = [u for u in unknown if u.startswith("-")]
    if flags:
        raise HarnessError(f"unknown option {flags[0]}: python -m harness.series takes harness "
                           "overrides (task=..., model.path=...) and the flags of --help; a sweep is not a series")
    hydra = hydra_overrides.split([*args.overrides, *unknown], "python -m harness.series",
                                  "--launcher slurm --cluster <conf/cluster profile>")
    rest, tasks, path, name = split_overrides(hydra.rest)
    pattern = compile_pattern(args.step_pattern if args.step_pattern is not None else TRAINER_PATTERN)
    root = check_root(path, args.checkpoints)
    watch = bool(args.watch)
    for flag, value in (("--poll", args.poll), ("--idle", args.idle)):
        if value is not None and not watch:
            raise HarnessError(f"{flag} {value}: only a watching series polls; add --watch, or drop {flag}")
    if args.launcher not in LAUNCHERS:
        raise HarnessError(f"--launcher {args.launcher}: not a launcher; pass --launcher local or --launcher slurm")
    if args.launcher == "slurm" and not (args.dry_run or args.status) and shutil.which("sbatch") is None:
        raise HarnessError("--launcher slurm: sbatch is not on this machine's PATH: run the command on a SLURM "
                           "login node (or start the one-node cluster: bash slurm/local-cluster.sh start)")
    first = (args.checkpoints or "").split(",")[0]
    label = args.name or name or (root.name if root else Path(first.partition("=")[2] if re.match(r"\d+=", first)
                                                              else first).resolve().parent.name)
    if not safe_name(label).strip("._-"):
        raise HarnessError(f"--name {label!r}: the series needs a name with letters or digits: pass --name <name>")
    return Settings(
        overrides=rest, tasks=tasks, root=root, entries=[e for e in (args.checkpoints or "").split(",") if e],
        pattern=pattern, name=safe_name(label), settle=_seconds("--settle", args.settle, SETTLE, zero=True),
        watch=watch, poll=_seconds("--poll", args.poll, POLL), idle=_seconds("--idle", args.idle, IDLE),
        launcher=args.launcher, cluster=args.cluster, dry_run=bool(args.dry_run or args.status),
        status=bool(args.status), argv=list(argv), log_dir=hydra.log_dir)


def check_root(path: str | None, entries: str | None) -> Path | None:
    """``model.path``: the training run's folder (or, with ``--checkpoints``, nothing)."""
    if entries is not None:
        if path is not None:
            raise HarnessError(f"model.path={path} and --checkpoints both name checkpoints: pass model.path=<the run's "
                               "folder> to find them, or --checkpoints to list them, not both")
        if not entries.strip(","):
            raise HarnessError("--checkpoints is empty: list checkpoint folders as PATH or STEP=PATH, separated by "
                               "commas")
        return None
    if path is None:
        raise HarnessError("no training run named: pass model.path=<the run's folder, holding checkpoint-<step>/ "
                           "folders>, or list checkpoints with --checkpoints PATH,PATH")
    root = Path(path).expanduser()
    if not root.is_dir():
        what = "is a file" if root.exists() else "does not exist"
        raise HarnessError(f"model.path={path} {what}: pass the training run's folder (the one holding its "
                           "checkpoint-<step>/ folders) as model.path=<folder>")
    return root.resolve()
