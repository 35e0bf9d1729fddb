"""Model specs (conf/model/*.yaml) -> loaded encoders: hub id, local directory or a packaged model.

Importing it imports no torch; the names below are its interface."""

from __future__ import annotations

from harness.models.load import _check_attn, layer_list, load_sentence_transformer, model_identity
from harness.models.paths import check_available, hub_reachable, model_ref, require_hub, resolve_path
from harness.models.positions import model_config, usable_positions
from harness.models.precision import (
    autocast,
    autocast_for,
    bf16_faster,
    bf16_supported,
    cast_for_inference,
    cpu_flags,
    resolve_device,
    resolve_precision,
)
from harness.models.spec import ModelSpec
from harness.models.weights import fingerprint

__all__ = [
    "ModelSpec", "_check_attn", "autocast", "autocast_for", "bf16_faster", "bf16_supported", "cast_for_inference",
    "check_available", "cpu_flags", "fingerprint", "hub_reachable", "layer_list", "load_sentence_transformer",
    "model_config", "model_identity", "model_ref", "require_hub", "resolve_device", "resolve_path",
    "resolve_precision", "usable_positions",
]
