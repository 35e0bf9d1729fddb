"""Checks before any expensive work (a model load, a corpus read, training), so a bad path, device or output folder
costs a second; each failure is one line naming the key and the fix, and none writes anything."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError

#: config keys of the folders a run writes to, and what goes there
OUTPUT_PATHS = {"paths.results": "result records", "paths.outputs": "trained models and logs",
                "paths.cache": "embedding caches"}


def existing_ancestor(path: Path) -> Path:
    """``path`` or its nearest existing parent."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_records_dir(folder: str | Path, label: str, example: str) -> None:
    """A folder a command reads records from exists: else one line naming it (``label``) and the fix (``example``)."""
    if not Path(folder).is_dir():
        what = "is a file" if Path(folder).exists() else "does not exist"
        raise HarnessError(f"{label} {folder} {what}: pass the folder the records were written to (a run's "
                           f"paths.results), e.g. {example}")


def check_writable_dir(path: Path, key: str) -> None:
    """``path`` is a directory we can write in, or can be created: checked without creating anything."""
    found = existing_ancestor(path)
    if not found.is_dir():
        what = "is a file" if found == path else f"is under {found}, which is a file"
        raise HarnessError(f"{key}={path} {what}, not a directory: point {key} at a directory (it is created if "
                           "missing).")
    try:
        with tempfile.TemporaryFile(dir=found):
            pass
    except OSError as exc:
        where = "" if found == path else f" (its existing parent {found} is not writable)"
        raise HarnessError(f"cannot write to {key}={path}{where}: {exc.strerror or exc}. Choose a writable folder "
                           f"with {key}=<dir>.") from None


def check_output_files(files: Mapping[Path, str]) -> None:
    """Each file a run will write (path -> what it holds) can be written: the path is not a folder, no parent part a
    file. Checked before any work (else it would fail after the whole evaluation, losing its record)."""
    for path, what in files.items():
        if path.is_dir():
            raise HarnessError(f"{path} is a folder, but this run writes {what} there: move or remove that folder "
                               "(or choose another paths.results=<dir>).")
        found = existing_ancestor(path.parent)
        if not found.is_dir():
            raise HarnessError(f"{found} is a file, but this run writes {what} to {path} under it: move or remove "
                               "that file (or choose another paths.results=<dir>).")


def check_output_paths(paths: Mapping[str, Any]) -> None:
    """Every output folder of the config (``paths.results``, ``paths.outputs``, ``paths.cache``) is writable."""
    for key in OUTPUT_PATHS:
        value = paths.get(key.split(".", 1)[1])
        if value is None or str(value) == "":
            raise HarnessError(f"{key} is empty: set {key}=<dir> (for {OUTPUT_PATHS[key]}).")
        check_writable_dir(Path(str(value)).expanduser(), key)
