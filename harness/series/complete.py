"""Whether a checkpoint folder is complete: a checkpoint still being written is never read.

A folder is complete when (1) ``config.json`` is there and parses, (2) its weights are whole: every safetensors
file is as long as its header says (:func:`harness.models.weights.check_safetensors`), a sharded model's index
names only shards that are there (and whole), and (3) its writer is done: the Hugging Face Trainer's
``trainer_state.json`` is there and parses (the Trainer writes it last, after the weights, optimizer and RNG
states), or, for folders no Trainer wrote, nothing in the folder has changed for ``settle`` seconds. ``.bin``
weights have no header to check, so (3) is what vouches for them. A folder whose writer is done (3) but whose
config or weights are not whole is broken, never "still being written".
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.errors import HarnessError
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
    """Why ``folder`` cannot be read yet (one phrase), or None when it is a complete checkpoint. A folder whose
    ``trainer_state.json`` (written last) is whole while its config or weights are not is :data:`BROKEN`, not in
    progress: waiting will not complete it."""
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
