"""On-disk cache of corpus embeddings, keyed by everything that changes them (mteb's keys by text only), each entry
with a claim beside it checked before use (a bad file is computed again with a warning, never used), built once."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.cache_entry import Unusable, get_or_build, publish
from harness.core.results import atomic_write_json, stable_hash
from harness.tasks.retrieval.data.corpus import texts_key as texts_key

log = logging.getLogger(__name__)


def cache_key(identity: Mapping[str, Any], data_fingerprint: str, side: str = "corpus") -> str:
    """Key of one corpus' embeddings: what the encoder's output depends on (``identity``) and the corpus content."""
    return stable_hash({"identity": identity, "data": data_fingerprint, "side": side}, length=24)


#: files up to this size are hashed whole; larger ones by FILE_SAMPLES evenly spaced blocks plus their size
FULL_HASH_BYTES = 1 << 30
FILE_SAMPLES, SAMPLE_BYTES = 256, 1 << 16


def content_hash(path: Path) -> str:
    """sha256 of the file (``full:``), or of its size and spaced blocks over FULL_HASH_BYTES (``sampled:``)."""
    size = path.stat().st_size
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        if size <= FULL_HASH_BYTES:
            for block in iter(lambda: fh.read(SAMPLE_BYTES), b""):
                h.update(block)
            return "full:" + h.hexdigest()
        h.update(str(size).encode())
        for k in range(FILE_SAMPLES):
            fh.seek((size - SAMPLE_BYTES) * k // (FILE_SAMPLES - 1))
            h.update(fh.read(SAMPLE_BYTES))
    return "sampled:" + h.hexdigest()


def claim_problem(path: Path, claim_path: Path, key: str) -> str | None:
    """Why ``path`` is not what its claim says (or has none), or None when it is."""
    try:
        claim = json.loads(claim_path.read_text())
    except (OSError, ValueError):
        return "has no readable claim"
    if claim.get("key") != key:
        return f"claims key {claim.get('key')!r}, not {key!r} (a file of another run copied in)"
    if claim.get("bytes") != path.stat().st_size:
        return f"is {path.stat().st_size} bytes, its claim says {claim.get('bytes')} (truncated or replaced)"
    if claim.get("hash") != content_hash(path):
        return "does not match its claimed content hash (altered or replaced)"
    return None


def cached_embeddings(
    cache_dir: str | os.PathLike | None, key: str, compute: Callable[[], np.ndarray], meta: dict | None = None
) -> tuple[np.ndarray, bool]:
    """(embeddings, hit) of ``compute()``; ``cache_dir=None`` always computes, else :func:`cached_rows`."""
    if cache_dir is None:
        return compute(), False
    return cached_rows(cache_dir, key, ((0, compute()) for _ in range(1)), meta=meta)   # computed on a miss only


def cached_rows(cache_dir: str | os.PathLike, key: str | tuple[Mapping[str, Any], str],
                rows: Iterable[tuple[int, np.ndarray]], n_rows: int | None = None,
                meta: dict | None = None) -> tuple[np.ndarray, bool]:
    """(the memory-mapped [n_rows, dim] matrix of ``key``, hit): built once where no valid claim holds."""
    key = key if isinstance(key, str) else cache_key(*key)
    root = Path(cache_dir)
    path, claim_path = root / f"{key}.npy", root / f"{key}.claim.json"

    def read() -> np.ndarray | None:
        if not path.exists():
            return None
        why = claim_problem(path, claim_path, key)
        if why is not None:
            raise Unusable(why)
        try:
            return np.load(path, mmap_mode="r")
        except ValueError as exc:  # a damaged entry is recomputed, never trusted
            raise Unusable(f"is unreadable ({exc})") from None

    def build() -> np.ndarray:
        """Fill aside, claim, then rename into place (under the entry's lock), and read it back."""
        with written_aside(path, suffix=".npy.tmp") as tmp:
            writer = RowWriter(tmp, n_rows)
            for start, block in rows:
                writer.put(start, block)
            shape, dtype = writer.close()
            # what the file claims to be, written first: a file without its claim is never used
            atomic_write_json(claim_path, {"key": key, "shape": list(shape), "dtype": dtype,
                                           "bytes": tmp.stat().st_size, "hash": content_hash(tmp)})
            if meta is not None:
                atomic_write_json(root / f"{key}.json", meta)
        return np.load(path, mmap_mode="r")

    emb, built = get_or_build(read, build, path, what=f"embedding cache {path}")
    return emb, not built


class RowWriter:
    """An .npy file of ``n`` rows filled in place (memory-mapped) as rows come, of the first rows' dtype."""

    def __init__(self, path: Path, n: int | None) -> None:
        self.path, self.n, self.rows, self.filled = path, n, None, 0

    def put(self, start: int, rows: np.ndarray) -> None:
        if self.rows is None:
            shape = (len(rows) if self.n is None else self.n, *np.shape(rows)[1:])
            self.rows = np.lib.format.open_memmap(self.path, mode="w+", dtype=rows.dtype, shape=shape)
        self.rows[start : start + len(rows)] = rows
        self.filled += len(rows)

    def close(self) -> tuple[tuple[int, ...], str]:
        """(shape, dtype) written; every row must have been put."""
        if self.rows is None:
            np.save(self.path, np.zeros((0, 0), dtype=np.float32))
            return (0, 0), "float32"
        if self.filled != len(self.rows):
            raise RuntimeError(f"{self.path}: {self.filled} rows written of {len(self.rows)}")
        self.rows.flush()
        shape, dtype = self.rows.shape, str(self.rows.dtype)
        self.rows = None
        return shape, dtype


@contextlib.contextmanager
def written_aside(path: Path, *, folder: bool = False, **names: str) -> Iterator[Path]:
    """A temporary file (or ``folder``) beside ``path`` for the block, then published (one there is kept) or removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        tmp = Path(tempfile.mkdtemp(dir=path.parent, **names))
    else:
        fd, name = tempfile.mkstemp(dir=path.parent, **names)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        publish(tmp, path)
    except BaseException:
        if folder:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise
