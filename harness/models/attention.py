"""Which attention an ``attn_implementation: auto`` model runs with: the paper's setting where the machine allows.

The ModernBERT paper timed and trained ModernBERT with flash-attention 2 on unpadded batches. ``auto`` gives that
on a CUDA machine with flash-attn installed (the optional ``[gpu]`` extra) for encoders that can unpad, and sdpa
(padded) everywhere else. The choice is a pure function of three facts so it can be tested without a GPU.
"""

from __future__ import annotations

import importlib.util

#: model families (conf/model ``family``) whose Hugging Face implementation unpads under flash-attention 2
UNPADDING_FAMILIES = ("modernbert", "mmbert")


def can_unpad(family: str | None) -> bool:
    """Whether a model of ``family`` runs unpadded (varlen) under flash-attention 2."""
    return (family or "").lower() in UNPADDING_FAMILIES


def flash_attn_importable() -> bool:
    """Whether flash-attn is installed; never imports it."""
    return importlib.util.find_spec("flash_attn") is not None


def cuda_available() -> bool:
    """Whether torch sees a CUDA device."""
    import torch

    return bool(torch.cuda.is_available())


def resolve_attention(requested: str, *, cuda: bool, flash_attn: bool, unpads: bool) -> str:
    """The attention implementation to load: ``requested`` unless it is ``auto``, which gives
    ``flash_attention_2`` (unpadded batches) when all three facts hold and ``sdpa`` (padded) otherwise."""
    if requested != "auto":
        return requested
    return "flash_attention_2" if cuda and flash_attn and unpads else "sdpa"


def resolve_for(requested: str, family: str | None) -> str:
    """:func:`resolve_attention` on this machine (torch is imported only when the other two facts hold)."""
    if requested != "auto":
        return requested
    unpads, flash = can_unpad(family), flash_attn_importable()
    return resolve_attention(requested, cuda=unpads and flash and cuda_available(), flash_attn=flash, unpads=unpads)


def describe(requested: str, family: str | None) -> str:
    """One line for ``--cfg``: what ``auto`` resolves to on this machine and why (empty unless ``auto``)."""
    if requested != "auto":
        return ""
    got = resolve_for(requested, family)
    why = ("CUDA, flash-attn installed, an unpadding model: unpadded batches" if got == "flash_attention_2" else
           "padded batches; flash_attention_2 unpadded needs CUDA, the [gpu] extra and a ModernBERT-family model")
    return f"# model.attn_implementation: auto -> {got} on this machine ({why})"
