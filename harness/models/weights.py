"""A model folder's weights: checked complete before loading (safetensors headers) and fingerprinted by content."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from harness.errors import HarnessError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")

#: what a usable model folder holds, for the messages below
MODEL_DIR_FIX = ("A model folder needs config.json, the weights (model.safetensors, sharded model-*.safetensors with "
                 "model.safetensors.index.json, or pytorch_model.bin) and the tokenizer files: write one with "
                 "model.save_pretrained(dir) and tokenizer.save_pretrained(dir), or fetch it with "
                 "`hf download <hub id> --local-dir <dir>`.")


def is_weight_file(path: Path) -> bool:
    return path.name in WEIGHT_FILES or path.suffix == ".safetensors"


def check_model_dir(local: str | os.PathLike) -> None:
    """A local model folder has a readable config.json and complete weights (each safetensors file's header is
    checked against its size, so a truncated download fails here in milliseconds, not inside the loader)."""
    root = Path(local)
    configs = sorted(root.glob("config.json")) or sorted(root.glob("*/config.json"))
    if not configs:
        raise HarnessError(f"model directory {root} has no config.json. {MODEL_DIR_FIX}")
    try:
        json.loads(configs[0].read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise HarnessError(f"model config {configs[0]} is not valid JSON ({exc}). Restore the file. "
                           f"{MODEL_DIR_FIX}") from None
    weights = [p for p in root.rglob("*") if is_weight_file(p)]
    if not weights:
        raise HarnessError(f"model directory {root} has no weights (found {sorted(p.name for p in root.iterdir())}). "
                           f"{MODEL_DIR_FIX}")
    for w in weights:
        if w.suffix == ".safetensors":
            check_safetensors(w)


def check_safetensors(path: Path) -> None:
    """The file is as long as its header says (8-byte header length, JSON header, tensor data)."""
    size = path.stat().st_size
    problem = None
    with open(path, "rb") as fh:
        head = fh.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 2 or 8 + n > size:
            problem = f"{size} bytes, too short for its header"
        else:
            try:
                header = json.loads(fh.read(n))
                end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
            except (ValueError, KeyError, TypeError, IndexError):
                problem = "its header is not valid safetensors JSON"
            else:
                if 8 + n + end != size:
                    problem = f"{size} bytes, its header describes {8 + n + end}"
    if problem:
        raise HarnessError(f"model weights {path} are truncated or corrupt ({problem}). Download or save the model "
                           "again (an interrupted copy leaves a short file).")


def fingerprint(model_dir: str | os.PathLike) -> str:
    """Content hash of a model directory (config + weights), so caches and records follow the weights."""
    h = hashlib.sha256()
    root = Path(model_dir)
    for name in ("config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json"):
        p = root / name
        if p.exists():
            h.update(name.encode() + p.read_bytes())
    for weights in sorted(root.rglob("*")):
        if is_weight_file(weights):
            st = weights.stat()
            h.update(f"{weights.relative_to(root)}:{st.st_size}".encode())
            with open(weights, "rb") as fh:  # head + tail: cheap for multi-GB files, still content-keyed
                h.update(fh.read(1 << 20))
                fh.seek(max(0, st.st_size - (1 << 20)))
                h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]
