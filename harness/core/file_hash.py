"""What a run's local files hold, known at plan time: each file's sha256, cached by its path and ``stat``, so a
corpus is hashed once and a re-plan costs a ``stat`` per file; one small JSON file per (file, stat) under
``<paths.cache>/file-hashes/``, written atomically (concurrent jobs share it without locks)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

#: a file modified this recently may change again within its clock tick unseen: its hash is not kept
RACY_S = 2.0
#: files above this size log their hashing's progress, a line every PROGRESS_S seconds
PROGRESS_BYTES = 64 << 20
PROGRESS_S = 10.0
#: a record lists its files one by one up to this many (beyond: their count and size)
LISTED = 50
_CHUNK = 8 << 20
_memo: dict[str, str] = {}
log = logging.getLogger("harness.progress")
_cache_dir: Path | None = None


def default_cache() -> Path:
    """``$HARNESS_CACHE/file-hashes`` (``~/.cache/harness``: ``paths.cache``'s default)."""
    return Path(os.environ.get("HARNESS_CACHE") or "~/.cache/harness").expanduser() / "file-hashes"


def use_cache(folder: str | os.PathLike | None) -> None:
    """Keep the hashes under ``folder`` (None: :func:`default_cache`); planning sets ``<paths.cache>/file-hashes``."""
    global _cache_dir
    _cache_dir = Path(folder).expanduser() if folder is not None else None


def cache_dir() -> Path:
    return _cache_dir or default_cache()


def stat_key(path: Path) -> list[Any]:
    """What says a file is unchanged: its resolved path, size, modification and change times and inode."""
    st = path.stat()
    return [str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def cached(tag: str, paths: Sequence[Path], compute: Callable[[], str]) -> str:
    """``compute()`` of the contents of ``paths``, kept while none changed (none within :data:`RACY_S` s)."""
    stats = [stat_key(p) for p in paths]
    key = hashlib.sha256(json.dumps([tag, *stats]).encode()).hexdigest()
    if key in _memo:
        return _memo[key]
    entry = cache_dir() / key[:2] / f"{key}.json"
    try:
        _memo[key] = str(json.loads(entry.read_text())["value"])
        return _memo[key]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = str(compute())
    if all(time.time() - st[2] / 1e9 >= RACY_S for st in stats):
        _store(entry, {"tag": tag, "files": [str(p) for p in paths], "value": value})
        _memo[key] = value
    return value


def _store(entry: Path, data: dict[str, Any]) -> None:
    """Write a cache entry atomically; a cache that cannot be written is skipped (the value is still right)."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, entry)
    except OSError:
        return


def sha256_of(path: Path) -> str:
    """The sha256 (hex) of a file's bytes, read in chunks; a big file logs its progress."""
    size = path.stat().st_size
    h = hashlib.sha256()
    shown = size >= PROGRESS_BYTES and log.isEnabledFor(logging.INFO)
    t0 = last = time.perf_counter()
    done = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            done += len(chunk)
            if shown and time.perf_counter() - last >= PROGRESS_S:
                last = time.perf_counter()
                log.info("hashing %s: %.1f of %.1f GB (%.0f%%)", path, done / 1e9, size / 1e9, 100 * done / size)
    if shown:
        log.info("hashed %s (%.1f GB) in %.0f s, once: kept in %s while it is unchanged", path, size / 1e9,
                 time.perf_counter() - t0, cache_dir())
    return h.hexdigest()


def file_digest(path: str | os.PathLike) -> str:
    """A file's sha256 (hex), from the cache while the file is unchanged."""
    p = Path(path).expanduser()
    return cached("sha256", [p], lambda: sha256_of(p))


def file_sha(path: str | os.PathLike | None) -> str | None:
    """The first 16 hex digits of a file's sha256 (as records and run ids store it); None if ``path`` is no file."""
    if not path or not Path(path).expanduser().is_file():
        return None
    return file_digest(path)[:16]


def _name(path: Path, base: Path | None) -> str:
    if base is not None:
        try:
            return path.relative_to(base).as_posix()
        except ValueError:
            pass
    return str(path)


def describe(paths: Iterable[str | os.PathLike], base: str | os.PathLike | None = None) -> dict[str, Any]:
    """A set of files as a record shows it: fingerprint, count, bytes and (at most :data:`LISTED`) the files."""
    root = Path(base).expanduser() if base is not None else None
    rows = sorted((_name(p, root), p.stat().st_size, file_digest(p)) for p in {Path(x).expanduser() for x in paths})
    h = hashlib.sha256(json.dumps(rows).encode())
    out: dict[str, Any] = {"fingerprint": "sha256:" + h.hexdigest()[:16], "n": len(rows),
                           "bytes": sum(size for _, size, _ in rows)}
    if root is not None:
        out["base"] = str(root.resolve())
    if len(rows) <= LISTED:
        out["files"] = {name: {"bytes": size, "sha256": digest[:16]} for name, size, digest in rows}
    return out


def files_fingerprint(paths: Iterable[str | os.PathLike], base: str | os.PathLike | None = None) -> str:
    """One string for what ``paths`` hold (names relative to ``base``, sizes, contents): ``sha256:<16 hex>``."""
    return str(describe(paths, base)["fingerprint"])
