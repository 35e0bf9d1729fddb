"""GLUE's tokenised splits: token ids (no padding: the collator pads per batch) and labels, cached on disk per
(model, data, max length) and reused only where an entry holds what its claim says (:func:`cached_tokenize`)."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.cache_entry import Unusable, get_or_build, publish

if TYPE_CHECKING:
    import datasets
    from transformers import PreTrainedTokenizerBase

    from harness.tasks.glue.data import Split


def tokenize(split: Split, tokenizer: PreTrainedTokenizerBase, max_length: int, regression: bool) -> datasets.Dataset:
    """Token ids (no padding: the collator pads per batch) and labels of one split."""
    import datasets
    enc = tokenizer(split.text_a, split.text_b, truncation=True, max_length=max_length)
    data = {k: enc[k] for k in enc if k in ("input_ids", "attention_mask", "token_type_ids")}
    data["labels"] = [float(v) for v in split.labels] if regression else [int(v) for v in split.labels]
    return datasets.Dataset.from_dict(data)


def cached_tokenize(
    split: Split, tokenizer: PreTrainedTokenizerBase, max_length: int, regression: bool, cache_dir: Path | None
) -> datasets.Dataset:
    """:func:`tokenize`, cached under ``cache_dir`` and reused only where its ``claim.json`` holds."""
    import datasets
    datasets.disable_progress_bars()
    if cache_dir is None:
        return tokenize(split, tokenizer, max_length, regression)
    claim = {"key": f"{cache_dir.parent.name}/{cache_dir.name}", "data": _split_hash(split), "max_length": max_length}
    labels = [float(v) for v in split.labels] if regression else [int(v) for v in split.labels]

    def read() -> datasets.Dataset | None:
        if not cache_dir.exists():
            return None
        try:
            ds = datasets.load_from_disk(str(cache_dir))
            found = json.loads((cache_dir / "claim.json").read_text())
        except Exception as exc:  # a corrupt or vanishing entry goes through the lock, never trusted
            raise Unusable(f"is unreadable ({type(exc).__name__}: {exc})") from None
        if {k: v for k, v in found.items() if k != "tokens"} != claim or len(ds) != len(split) \
                or list(ds["labels"]) != labels:
            raise Unusable("is not the texts and labels it claims (or has no claim)")
        if found.get("tokens") != token_hash(ds):
            raise Unusable("does not hold the token ids its claim hashes (altered in place, or an older entry)")
        return ds

    def build() -> datasets.Dataset:
        ds = tokenize(split, tokenizer, max_length, regression)
        tmp = cache_dir.with_name(f".{cache_dir.name}.tmp{time.time_ns()}")
        try:
            ds.save_to_disk(str(tmp))
            (tmp / "claim.json").write_text(json.dumps({**claim, "tokens": token_hash(ds)}))
            publish(tmp, cache_dir)   # an entry already there (another job finished it first) is kept
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return datasets.load_from_disk(str(cache_dir))

    return get_or_build(read, build, cache_dir, what=f"tokenisation cache {cache_dir}")[0]


def token_hash(ds: datasets.Dataset) -> str:
    """sha256 (24 hex) of a tokenised split's columns (lengths and values per row), so in-place changes are seen."""
    import pyarrow as pa
    import pyarrow.compute as pc
    table = ds.with_format("arrow")[:]
    h = hashlib.sha256()
    for name in sorted(table.column_names):
        col = table.column(name).combine_chunks()
        h.update(name.encode())
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            h.update(pc.list_value_length(col).to_numpy(zero_copy_only=False).tobytes())
            col = col.flatten()
        h.update(col.to_numpy(zero_copy_only=False).tobytes())
    return h.hexdigest()[:24]


def _split_hash(split: Split) -> str:
    h = hashlib.sha256()
    for a, b, y in zip(split.text_a, split.text_b or [None] * len(split.text_a), split.labels, strict=True):
        h.update(json.dumps([a, b, y]).encode())
    return h.hexdigest()[:24]
