"""A model folder's weights: checked complete before loading (safetensors headers), fingerprinted by content, and
checked to fit its config by transformers' own loader on the meta device (no encoder weight missing, mismatched or
unused), so a config of another architecture is refused instead of scoring a random model."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from harness.core.errors import HarnessError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")

#: what a usable model folder holds, for the messages below
MODEL_DIR_FIX = ("A model folder needs config.json, the weights (model.safetensors, sharded model-*.safetensors with "
                 "model.safetensors.index.json, or pytorch_model.bin) and the tokenizer files: write one with "
                 "model.save_pretrained(dir) and tokenizer.save_pretrained(dir), or fetch it with "
                 "`hf download <hub id> --local-dir <dir>`.")


def is_weight_file(path: Path) -> bool:
    return path.name in WEIGHT_FILES or path.suffix == ".safetensors"


def check_model_dir(local: str | os.PathLike) -> None:
    """A local model folder has a readable config.json and complete weights (safetensors headers)."""
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


#: what fixes a folder whose weights do not fit its config
FIT_FIX = ("The config and the weights come from different models: put back the config.json saved with these "
           "weights (model.save_pretrained writes both), or point model.path at the folder they came from.")


def encoder_dir(local: str | Path) -> Path:
    """The folder the encoder loads from: a sentence-transformers / PyLate folder's first module, else the folder."""
    root = Path(local)
    modules = root / "modules.json"
    if modules.is_file():
        try:
            first = json.loads(modules.read_text(encoding="utf-8"))[0]
            return root / str(first.get("path") or "")
        except (ValueError, IndexError, KeyError, AttributeError, TypeError):
            return root
    return root


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No "LOAD REPORT", meta-device chatter or "Loading weights" bar for the probe (its findings are raised)."""
    import transformers.utils.logging as tlog
    level, bars = tlog.get_verbosity(), tlog.is_progress_bar_enabled()
    tlog.set_verbosity(logging.ERROR)
    tlog.disable_progress_bar()
    try:
        yield
    finally:
        tlog.set_verbosity(level)
        if bars:
            tlog.enable_progress_bar()


def fit_problem(local: str, *, trust_remote_code: bool = False, device_map: str | None = "meta") -> str | None:
    """What loading ``local``'s encoder (on the meta device) finds missing, mismatched or unused; None: fits."""
    from transformers import AutoModel
    with _quiet_transformers():
        model, info = AutoModel.from_pretrained(str(local), output_loading_info=True, device_map=device_map,
                                                trust_remote_code=trust_remote_code)
    prefix = getattr(model, "base_model_prefix", "") or ""
    buffers = {name for name, _ in model.named_buffers()}
    has_prefix = bool(prefix) and any(k.startswith(f"{prefix}.") for k in _checkpoint_keys(Path(local)))

    def beside_encoder(key: str) -> bool:
        bare = key[len(prefix) + 1:] if prefix and key.startswith(f"{prefix}.") else key
        return bare in buffers or (has_prefix and not key.startswith(f"{prefix}."))

    missing = tuple(sorted(info["missing_keys"]))
    unused = tuple(sorted(k for k in info["unexpected_keys"] if not beside_encoder(k)))
    mismatched = tuple(sorted(str(m[0]) for m in info["mismatched_keys"]))
    parts = []
    if missing:
        parts.append(f"{len(missing)} of its {len(model.state_dict())} weights are missing from the files and would "
                     f"be random ({_examples(missing)})")
    if mismatched:
        parts.append(f"{len(mismatched)} have another shape in the files ({_examples(mismatched)})")
    if unused:
        parts.append(f"{len(unused)} weights in the files would go unused ({_examples(unused)})")
    if not parts:
        return None
    return (f"model weights in {local} do not fit its config.json, which describes a {type(model).__name__}: "
            f"{'; '.join(parts)}. {FIT_FIX}")


def _checkpoint_keys(folder: Path) -> set[str]:
    """Tensor names in the folder's safetensors files (header only); empty for pytorch_model.bin folders."""
    keys: set[str] = set()
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        with contextlib.suppress(ValueError, OSError, AttributeError):
            keys |= set(json.loads(index.read_text()).get("weight_map", {}))
    for path in folder.glob("*.safetensors"):
        with contextlib.suppress(ValueError, OSError), open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            keys |= set(json.loads(fh.read(n))) - {"__metadata__"}
    return keys


def _examples(keys: tuple[str, ...], n: int = 3) -> str:
    more = f", ... ({len(keys)} in all)" if len(keys) > n else ""
    return ", ".join(keys[:n]) + more


_LOAD_ERRORS = (OSError, ValueError, RuntimeError, KeyError, ImportError, TypeError, AttributeError)


@functools.cache
def _checked(folder: str, trust_remote_code: bool, stamp: tuple) -> str | None:
    """The problem with ``folder``'s weights (one line), or None; cached per folder content (``stamp``)."""
    tries = [{"device_map": "meta"}] + ([{"device_map": None}] if trust_remote_code else [])
    for i, kwargs in enumerate(tries):   # a model's own code may not load on the meta device: the real loader then
        try:
            return fit_problem(folder, trust_remote_code=trust_remote_code, **kwargs)
        except _LOAD_ERRORS as exc:
            if i == len(tries) - 1:
                return (f"could not load the encoder in {folder} with transformers to check its weights against its "
                        f"config.json ({type(exc).__name__}: {' '.join(str(exc).split())[:300]}). {FIT_FIX}")
    return None


def _stamp(folder: Path) -> tuple:
    """What identifies the files checked (name, size, mtime), so an edited folder is checked again."""
    return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()))


def check_weights_fit(local: str | Path, *, trust_remote_code: bool = False) -> None:
    """Raise a one-line HarnessError when ``local``'s weights do not fit its config (once per folder and content)."""
    folder = encoder_dir(local)
    if not (folder / "config.json").is_file():
        return   # check_model_dir names a folder without a config
    problem = _checked(str(folder), trust_remote_code, _stamp(folder))
    if problem:
        raise HarnessError(problem)
