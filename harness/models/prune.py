"""Layer-pruned variants (``model.keep_layers``): checked against the config, built in place at load time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError

if TYPE_CHECKING:
    import torch

    from harness.models.spec import ModelSpec


def layer_list(hf_model: torch.nn.Module) -> tuple[torch.nn.Module, str]:
    """(owner, attribute) of the encoder's layer ``ModuleList``: ModernBERT ``layers``, BERT-style
    ``encoder.layer``, DistilBERT ``transformer.layer``."""
    import torch

    for owner_path, attr in (("", "layers"), ("encoder", "layer"), ("transformer", "layer")):
        owner = hf_model.get_submodule(owner_path) if owner_path else hf_model
        if isinstance(getattr(owner, attr, None), torch.nn.ModuleList):
            return owner, attr
    raise HarnessError(f"cannot find the encoder layers of {type(hf_model).__name__}; model.keep_layers supports "
                       "ModernBERT and BERT-style encoders")


def check_keep_layers(spec: ModelSpec, local: str) -> None:
    """Fail before loading weights when ``keep_layers`` names a layer the model does not have."""
    cfg_file = Path(local) / "config.json"
    if spec.keep_layers is None or not cfg_file.is_file():
        return
    n = json.loads(cfg_file.read_text()).get("num_hidden_layers")
    if isinstance(n, int) and max(spec.keep_layers) >= n:
        raise HarnessError(f"model {spec.name!r}: keep_layers={spec.keep_layers} names layer {max(spec.keep_layers)}, "
                           f"but the model has {n} layers (0..{n - 1})")


def prune_layers(hf_model: torch.nn.Module, keep: list[int]) -> None:
    """Keep only the encoder layers ``keep`` (original indices, in order), in place, without copying weights.

    The kept modules are the original ones, so each keeps what its original index gave it: attention type
    (ModernBERT global or local/sliding window), its pre-attention norm (ModernBERT's layer 0 has none), RoPE
    table. ``config.layer_types`` is rewritten to the kept layers' own types, since the model picks each layer's
    mask and rotary embedding by that list; ``num_hidden_layers`` shrinks; ``config.keep_layers`` records it.
    """
    import torch

    owner, attr = layer_list(hf_model)
    layers = getattr(owner, attr)
    if max(keep) >= len(layers):
        raise HarnessError(f"keep_layers={keep} names layer {max(keep)}, but the model has {len(layers)} layers")
    setattr(owner, attr, torch.nn.ModuleList([layers[i] for i in keep]))
    cfg = hf_model.config
    types = getattr(cfg, "layer_types", None)
    if types is not None:
        cfg.layer_types = [types[i] for i in keep]
    cfg.num_hidden_layers = len(keep)
    cfg.keep_layers = list(keep)
