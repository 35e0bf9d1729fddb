"""Whether a record was computed on the official copy of its dataset (the pinned hub copy, or a local copy the entry
lists in ``official_fingerprints``); else it is marked :data:`LOCAL_MARK` and never ranked against published numbers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: beside every number computed on data that is not the official copy of its dataset
LOCAL_MARK = "‡"

#: what the mark means, for footnotes (terminal summary, leaderboard rules)
MEANING = ("computed on data that is not the pinned official copy of the dataset (a local folder or a toy set under "
           "its name): not comparable with published numbers, never marked best")


def origin(fingerprint: str, source: str, *, hub: str | None, revision: str | None,
           official_fingerprints: Iterable[str] = ()) -> dict[str, Any]:
    """``details.data`` for data of ``fingerprint`` from ``source``; ``hub``/``revision``: the official copy."""
    if fingerprint.startswith("hub:"):
        return {"source": "hub", "official": revision is not None, "fingerprint": fingerprint, "path": source}
    official = None if hub is None else fingerprint in set(official_fingerprints)
    return {"source": "local", "official": official, "fingerprint": fingerprint, "path": source}


def combined(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A composite's ``details.data`` from its members': official only if every member is; local data if any is."""
    flags = [p.get("official") for p in parts]
    official = False if False in flags else (True if flags and all(f is True for f in flags) else None)
    return {"source": "+".join(sorted({str(p.get("source")) for p in parts})), "official": official,
            "members": len(parts)}


def local_data(record: Any) -> str | None:
    """Why ``record``'s number is not on the official data (a short phrase), or None (official, or none exists)."""
    data = (record.details or {}).get("data")
    if isinstance(data, Mapping):
        if data.get("official") is False:
            return f"{data.get('source', 'local')} data at {data.get('path') or '?'}"
        return None
    task = (record.config or {}).get("task") or {}
    data_dir = task.get("data_dir") if isinstance(task, Mapping) else None
    if data_dir and _has_official_copy(task.get("catalog") or {}, record.dataset):
        return f"local data (task.data_dir={data_dir}; written before records said where their data came from)"
    return None


def file_version(record: Any) -> str:
    """`` (files sha256:...: 3 files, 1.2 MB)``: the version of its local files a record was computed on."""
    files = (record.details or {}).get("data_files")
    if not isinstance(files, Mapping) or not files.get("fingerprint"):
        return ""
    n, size = int(files.get("n") or 0), float(files.get("bytes") or 0)
    unit, factor = next(((u, f) for u, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)) if size >= f), ("B", 1.0))
    amount = f"{size:.0f} B" if unit == "B" else f"{size / factor:.1f} {unit}"
    return f" (files {files['fingerprint']}: {n} file{'s' if n != 1 else ''}, {amount})"


def _has_official_copy(catalog: Mapping[str, Any], dataset: str) -> bool:
    """The record's catalog names a hub copy of ``dataset`` (composite: a member's; member: its own or its parent's)."""
    entry = catalog.get(dataset)
    if entry is None and "-" in dataset:
        parent, _, member = dataset.partition("-")
        members = (catalog.get(parent) or {}).get("members") or {}
        if member in members:
            entry = {**catalog[parent], "members": {}, **(members[member] or {})}
    if not isinstance(entry, Mapping):
        return False
    members = entry.get("members") or {}
    return bool(entry.get("hub")) or any(isinstance(m, Mapping) and m.get("hub") for m in members.values())
