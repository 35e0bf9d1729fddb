"""On-disk cache of corpus embeddings, keyed by everything that changes them.

Why our own: mteb's CachedEmbeddingWrapper keys by text only, not by the model settings that change embeddings.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness.results import stable_hash

log = logging.getLogger(__name__)


def cache_key(identity: Mapping[str, Any], data_fingerprint: str, side: str = "corpus") -> str:
    """Key of one corpus' embeddings: everything the encoder's output depends on (``identity``, derived from
    the run identity) and the corpus content."""
    return stable_hash({"identity": identity, "data": data_fingerprint, "side": side}, length=24)


def cached_embeddings(
    cache_dir: str | os.PathLike | None, key: str, compute: Callable[[], np.ndarray], meta: dict | None = None
) -> tuple[np.ndarray, bool]:
    """(embeddings, hit). With ``cache_dir=None`` always computes. Writes are atomic (temp file + rename)."""
    if cache_dir is None:
        return compute(), False
    root = Path(cache_dir)
    path = root / f"{key}.npy"
    if path.exists():
        try:
            return np.load(path, mmap_mode="r"), True
        except (OSError, ValueError) as exc:  # a damaged entry is recomputed, never trusted
            log.warning("ignoring unreadable embedding cache %s: %s", path, exc)
    emb = compute()
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=root, suffix=".npy.tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, emb)
        os.replace(tmp, path)
        if meta is not None:
            (root / f"{key}.json").write_text(json.dumps(meta, indent=2, default=str))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return emb, False
