"""Which folders of a training run are its checkpoints, and at which step.

Three ways to say it: the Hugging Face / sentence-transformers trainers' ``checkpoint-<step>`` folders under the
run's folder (the default); a user's ``--step-pattern``, a regular expression with one group for the step,
matched against each folder's path below the run's folder (up to three levels: ``step_(\\d+)/hf``); or an explicit
``--checkpoints`` list (``PATH`` whose name the pattern reads, or ``STEP=PATH``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.series.complete import TRAINER_MARKER

#: the trainers' checkpoint folders (transformers' PREFIX_CHECKPOINT_DIR)
TRAINER_PATTERN = r"checkpoint-(\d+)"
#: how deep below the run's folder a --step-pattern is looked for
MAX_DEPTH = 3


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint folder and its training step."""

    step: int
    folder: Path

    def facts(self) -> dict[str, Any]:
        """What the folder says about its training progress (the trainer's ``trainer_state.json``): tokens seen,
        epoch, global step. Empty where it says nothing."""
        try:
            state = json.loads((self.folder / TRAINER_MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        out: dict[str, Any] = {}
        tokens = state.get("num_input_tokens_seen")
        if not tokens:   # older trainers log it per step only
            tokens = next((e["num_input_tokens_seen"] for e in reversed(state.get("log_history") or [])
                           if isinstance(e, dict) and e.get("num_input_tokens_seen")), None)
        if isinstance(tokens, int | float) and tokens > 0:
            out["tokens_seen"] = int(tokens)
        for key, name in (("epoch", "epoch"), ("global_step", "global_step")):
            if isinstance(state.get(key), int | float):
                out[name] = state[key]
        return out


@dataclass
class Found:
    """What a look at the run's folder found: checkpoints by step, and the folders passed over, with why."""

    checkpoints: list[Checkpoint] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def compile_pattern(text: str) -> re.Pattern[str]:
    """``--step-pattern``: a regular expression with exactly one group, the step."""
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise HarnessError(f"--step-pattern {text!r} is not a regular expression ({exc}): write one with one group "
                           r"for the step, e.g. --step-pattern 'step_(\d+)'") from None
    if pattern.groups != 1:
        raise HarnessError(f"--step-pattern {text!r} has {pattern.groups} groups, not one: put exactly the step in "
                           r"parentheses, e.g. --step-pattern 'ep\d+-ba(\d+)' (make other groups (?:...))")
    return pattern


def step_of(pattern: re.Pattern[str], name: str) -> int | None:
    """The step ``pattern`` reads from ``name`` (the whole name must match), or None."""
    match = pattern.fullmatch(name)
    if match is None:
        return None
    try:
        return int(match.group(1))
    except (TypeError, ValueError):
        return None


def under(root: Path, pattern: re.Pattern[str]) -> Found:
    """The checkpoints below ``root`` whose relative path matches ``pattern``; a matching folder is not looked
    into further."""
    found = Found()
    level = [p for p in sorted(root.iterdir()) if p.is_dir()]
    for _ in range(MAX_DEPTH):
        deeper = []
        for folder in level:
            rel = folder.relative_to(root).as_posix()
            step = step_of(pattern, rel)
            if step is not None:
                found.checkpoints.append(Checkpoint(step, folder))
            elif not folder.name.startswith("."):
                deeper += [p for p in sorted(folder.iterdir()) if p.is_dir()]
                if folder.parent == root:
                    found.ignored.append(rel)
        level = deeper
    found.checkpoints.sort(key=lambda c: c.step)
    check_unique(found.checkpoints)
    return found


def listed(entries: list[str], pattern: re.Pattern[str]) -> Found:
    """``--checkpoints``: each ``PATH`` (its folder name read by ``pattern``) or ``STEP=PATH``."""
    found = Found()
    for entry in entries:
        head, eq, tail = entry.partition("=")
        path = Path(tail if eq and head.isdigit() else entry).expanduser()
        if not path.is_dir():
            what = "is a file" if path.exists() else "does not exist"
            raise HarnessError(f"--checkpoints: {path} {what}: list checkpoint folders (each holding config.json "
                               "and the weights), as PATH or STEP=PATH, separated by commas")
        step = int(head) if eq and head.isdigit() else step_of(pattern, path.name)
        if step is None:
            raise HarnessError(f"--checkpoints: cannot tell the step of {path} (its name does not match "
                               f"{pattern.pattern!r}): write it as STEP={path}, or pass --step-pattern")
        found.checkpoints.append(Checkpoint(step, path.resolve()))
    found.checkpoints.sort(key=lambda c: c.step)
    check_unique(found.checkpoints)
    return found


def check_unique(checkpoints: list[Checkpoint]) -> None:
    """Two folders of one step would be one point of the series twice: refused, naming both."""
    seen: dict[int, Path] = {}
    for c in checkpoints:
        if c.step in seen:
            raise HarnessError(f"step {c.step} is both {seen[c.step]} and {c.folder}: a series has one checkpoint "
                               "per step; narrow --step-pattern or list the checkpoints with --checkpoints")
        seen[c.step] = c.folder
