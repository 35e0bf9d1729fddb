"""Which local files a catalog entry's data is read from (``DataKind.reads``), unread: what its data spec
fingerprints. It imports no catalog (the caller passes the kind lookup), so planning does not walk back through it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

#: a kind's name -> its class (``harness.tasks.retrieval.data.catalog.KINDS.lookup``)
KindOf = Callable[[str], Any]


def local_folder(data_dir: str, entry: Any) -> Path:
    """``<data_dir>/<name>``; a composite member (cqadupstack-android) lives in ``cqadupstack/android``."""
    return Path(data_dir).expanduser() / (entry.local or entry.name)


def _hidden(path: Path, base: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(base).parts)


def matching(base: Path, globs: tuple[str, ...], split: str) -> list[Path]:
    """The files under ``base`` (or ``base`` itself, a file) that ``globs`` name, hidden ones left out."""
    if base.is_file():
        return [base]
    if not base.is_dir():
        return []   # not there: the kind's check says so before any work
    found = {p for g in globs for p in base.glob(g.format(split=split)) if p.is_file() and not _hidden(p, base)}
    return sorted(found)


def entry_root(entry: Any, data_dir: str | None, kind_of: KindOf) -> Path | None:
    """The folder (or file) ``entry``'s local copy is read from, or None (its hub copy; a mined stdlib)."""
    if not kind_of(entry.kind).reads_data_dir:
        return Path(entry.root).expanduser() if entry.root else None
    return local_folder(data_dir, entry) if data_dir else None


def entry_files(entry: Any, data_dir: str | None, split: str | None, kind_of: KindOf) -> tuple[Path, list[Path]] | None:
    """(the folder, the files) a catalog entry's local copy reads; None where it reads none."""
    parts = list(entry.members.values()) or [entry]
    root = entry_root(entry, data_dir, kind_of) if entry.members else None
    files: list[Path] = []
    for part in parts:
        where = entry_root(part, data_dir, kind_of)
        if where is None:
            continue
        files += matching(where, kind_of(part.kind).reads, split or part.split)
        root = root or (where.parent if where.is_file() else where)
    return None if root is None else (root, sorted(set(files)))
