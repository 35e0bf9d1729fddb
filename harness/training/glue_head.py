"""task=glue's classification head on a ModernBERT encoder as the authors' FlexBERT GLUE runs built it
(``model.glue``: conf/model/modernbert-*.yaml, docs/fidelity.md): the transformers config keys it sets before the
model is built, the two settings transformers' ModernBERT has no key for, and what a record says of the head built.

Why our own: transformers' ``ModernBertPredictionHead`` always applies a LayerNorm and its ``attention_dropout``
drops both the attention probabilities and the attention output, where FlexBERT's head had no norm and its
attention output had a dropout of its own (``attn_out_dropout_prob``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from harness.errors import HarnessError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from harness.models.spec import GlueHead


def head_config(head: GlueHead | None, model_dir: str) -> dict[str, Any]:
    """The config keys ``head`` sets before the model is built (transformers' ``ModernBertConfig`` keys); ``head``
    is for a ModernBERT encoder: any other is refused in one line (``model.glue=null`` keeps its own head)."""
    if head is None:
        return {}
    from harness.models.attention import model_type_of

    kind = model_type_of(model_dir)
    if kind != "modernbert":
        raise HarnessError(f"model.glue sets a ModernBERT classification head, but {model_dir} is a "
                           f"{kind or 'non-transformers'} model: set model.glue=null to keep its own head")
    return {"classifier_pooling": head.classifier_pooling, "classifier_activation": head.classifier_activation,
            "classifier_dropout": float(head.classifier_dropout), "attention_dropout": float(head.attention_dropout)}


def apply_head(model: PreTrainedModel, head: GlueHead | None) -> None:
    """The two FlexBERT settings transformers' ModernBERT has no config key for: no LayerNorm in the head
    (``classifier_norm: false``) and a dropout of its own on each attention output (``attention_output_dropout``)."""
    if head is None:
        return
    if not head.classifier_norm:
        model.head.norm = torch.nn.Identity()
    if head.attention_output_dropout is not None:
        p = float(head.attention_output_dropout)
        for layer in model.base_model.layers:
            layer.attn.out_drop = torch.nn.Dropout(p) if p > 0 else torch.nn.Identity()


def describe_head(model: PreTrainedModel) -> dict[str, Any]:
    """What the record says of the head that was built and trained (read from the model, not from the settings)."""
    cfg = model.config
    out: dict[str, Any] = {"class": type(model).__name__}
    for key in ("classifier_pooling", "classifier_activation", "classifier_dropout", "attention_dropout"):
        if hasattr(cfg, key):
            out[key] = getattr(cfg, key)
    head = getattr(model, "head", None)
    if head is not None and hasattr(head, "norm"):
        out["classifier_norm"] = not isinstance(head.norm, torch.nn.Identity)
    layers = getattr(model.base_model, "layers", None)
    if layers is not None and hasattr(layers[0], "attn") and hasattr(layers[0].attn, "out_drop"):
        drop = layers[0].attn.out_drop
        out["attention_output_dropout"] = float(drop.p) if isinstance(drop, torch.nn.Dropout) else 0.0
    return out
