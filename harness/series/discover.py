"""Which folders of a training run are its checkpoints, at which step, and whether each is complete (one still being
written is never read): ``config.json`` parses, safetensors are whole, its writer done (``trainer_state.json``)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.models.weights import check_safetensors

#: the file the Hugging Face Trainer (and sentence-transformers' trainer) writes last into a checkpoint folder
TRAINER_MARKER = "trainer_state.json"
SHARD_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
SINGLE_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def newest_change(folder: Path) -> float:
    """The newest modification time of the folder or anything in it (0.0 when it is gone)."""
    try:
        times = [folder.stat().st_mtime, *(p.stat().st_mtime for p in folder.rglob("*"))]
    except FileNotFoundError:   # removed while we looked (a trainer rotating its checkpoints)
        return 0.0
    return max(times)


def _json(path: Path) -> str | None:
    """Why ``path`` is not a readable JSON file, or None."""
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no {path.name} yet"
    except (ValueError, UnicodeDecodeError):
        return f"{path.name} is not whole JSON yet"
    except OSError as exc:
        return f"{path.name} cannot be read ({exc.strerror or exc})"
    return None


def _shards(folder: Path, index: Path) -> str | None:
    """Why a sharded model's weights are not whole yet, or None."""
    problem = _json(index)
    if problem:
        return problem
    wanted = sorted(set((json.loads(index.read_text()).get("weight_map") or {}).values()))
    missing = [name for name in wanted if not (folder / name).is_file()]
    if missing:
        return f"{len(missing)} of {len(wanted)} shards missing ({missing[0]}, ...)"
    return _whole([folder / name for name in wanted])


def _whole(files: list[Path]) -> str | None:
    for path in files:
        if path.suffix == ".safetensors":
            try:
                check_safetensors(path)
            except HarnessError:
                return f"{path.name}: {path.stat().st_size} bytes, shorter than its header says"
            except FileNotFoundError:
                return f"{path.name} vanished"
    return None


def _weights(folder: Path) -> str | None:
    """Why the folder's weights are not whole, or None."""
    index = next((folder / n for n in SHARD_INDEXES if (folder / n).exists()), None)
    if index is not None:
        return _shards(folder, index)
    single = [folder / n for n in SINGLE_WEIGHTS if (folder / n).is_file()]
    if not single:
        single = sorted(folder.glob("*.safetensors"))
    if not single:
        return "no weights yet (model.safetensors, a sharded index, or pytorch_model.bin)"
    return _whole(single)


#: how a checkpoint that will never complete is described (its writer finished, its files are not whole)
BROKEN = "broken"


def incomplete(folder: Path, settle: float, now: float | None = None) -> str | None:
    """Why ``folder`` cannot be read yet (one phrase; :data:`BROKEN`: waiting will not help), or None when complete."""
    problem = _json(folder / "config.json") or _weights(folder)
    if problem:
        if (folder / TRAINER_MARKER).exists() and _json(folder / TRAINER_MARKER) is None:
            problem = problem.replace(" yet", "").replace("not whole JSON", "not valid JSON")
            return (f"{BROKEN}: {problem}, though its {TRAINER_MARKER} (which the trainer writes last) is there: "
                    "it will not complete; rewrite or remove the checkpoint")
        return f"still being written: {problem}"
    if (folder / TRAINER_MARKER).exists():
        marker = _json(folder / TRAINER_MARKER)
        return f"still being written: {marker}" if marker else None
    quiet = (time.time() if now is None else now) - newest_change(folder)
    if quiet < settle:
        return (f"still being written: no {TRAINER_MARKER}, and changed {max(quiet, 0):.0f} s ago (read after "
                f"{settle:g} s of quiet, --settle)")
    return None


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
        """What ``trainer_state.json`` says of the training progress: tokens seen, epoch, global step (or nothing)."""
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
    """The checkpoints below ``root`` whose relative path matches ``pattern`` (a match is not looked into further)."""
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
