"""Model specs (conf/model/*.yaml) -> loaded encoders: hub id, local directory or a packaged model.

One module per job: :mod:`~harness.models.spec` (what a model config says), :mod:`~harness.models.hub` (hub
reachability, cached snapshots), :mod:`~harness.models.paths` (where the files are, what identifies them),
:mod:`~harness.models.weights` (safetensors checks, fingerprints), :mod:`~harness.models.precision` (device,
CPU flags, precision policy, autocast), :mod:`~harness.models.load` (SentenceTransformer loading),
:mod:`~harness.models.prune` (layer-pruned variants), :mod:`~harness.models.positions` (usable token positions).
Importing the package imports no torch; the names below are the package's interface.
"""

from __future__ import annotations

from harness.models.hub import HUB_MODEL_FIX, cached_snapshot, hub_reachable, require_hub
from harness.models.load import _check_attn, apply_head, load_sentence_transformer, model_identity
from harness.models.paths import PACKAGE_PREFIX, check_available, model_ref, resolve_path
from harness.models.positions import model_config, usable_positions
from harness.models.precision import (
    autocast,
    autocast_for,
    bf16_faster,
    bf16_supported,
    cast_for_inference,
    cpu_flags,
    low_precision_weights,
    resolve_device,
    resolve_precision,
)
from harness.models.prune import check_keep_layers, layer_list, prune_layers
from harness.models.spec import ColbertDefaults, DprDefaults, ModelSpec, variant_suffix
from harness.models.weights import MODEL_DIR_FIX, check_model_dir, check_safetensors, fingerprint

__all__ = [
    "HUB_MODEL_FIX", "MODEL_DIR_FIX", "PACKAGE_PREFIX", "ColbertDefaults", "DprDefaults", "ModelSpec", "_check_attn",
    "apply_head", "autocast", "autocast_for", "bf16_faster", "bf16_supported", "cached_snapshot", "cast_for_inference",
    "check_available",
    "check_keep_layers", "check_model_dir", "check_safetensors", "cpu_flags", "fingerprint", "hub_reachable",
    "layer_list", "load_sentence_transformer", "low_precision_weights", "model_config", "model_identity", "model_ref", "prune_layers",
    "require_hub", "resolve_device", "resolve_path", "resolve_precision", "usable_positions", "variant_suffix",
]
