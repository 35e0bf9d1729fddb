"""Which attention a model loads with, and which kernel runs it: the paper's setting where the machine allows.

The ModernBERT paper timed and trained ModernBERT unpadded (flash-attention on packed sequences). ``auto`` gives
that on any CUDA machine for an architecture the harness packs (ModernBERT, BERT): the harness' own attention
function, ``harness_varlen`` (:mod:`harness.models.varlen_attention`), whose kernel is flash-attn's varlen function
where flash-attn is installed and torch's own flash kernel otherwise; everywhere else sdpa on padded batches. An
explicit ``flash_attention_2`` on such an architecture also loads ``harness_varlen`` (flash-attn's kernel, bf16
around it when the weights are fp32, which transformers' own path hands to flash-attn as fp32). The choice is a
pure function of facts (:func:`resolve_attention`), so it is tested without a GPU by faking them.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

#: the harness' attention function for packed sequences (registered with transformers when a model needs it)
VARLEN = "harness_varlen"
#: Hugging Face ``model_type``s whose forward the harness packs: restarting positions and ``cu_seq_lens`` reach
#: the attention function unchanged (tests compare them with the padded model)
PACKABLE_TYPES = ("modernbert", "bert")


def can_pack(model_type: str | None) -> bool:
    """Whether the harness runs an encoder of this architecture on packed sequences."""
    return (model_type or "").lower() in PACKABLE_TYPES


def flash_attn_importable() -> bool:
    """Whether flash-attn is installed; never imports it."""
    return importlib.util.find_spec("flash_attn") is not None


def cuda_available() -> bool:
    """Whether torch sees a CUDA device."""
    import torch

    return bool(torch.cuda.is_available())


def model_type_of(local: str | Path) -> str | None:
    """``model_type`` of the config.json in a model folder (None when there is none: nothing is packed)."""
    try:
        return json.loads((Path(local) / "config.json").read_text()).get("model_type")
    except (OSError, ValueError):
        return None


def resolve_attention(requested: str, *, cuda: bool, packs: bool) -> str:
    """The implementation to load: ``auto`` -> ``harness_varlen`` on CUDA for a packable architecture, else
    ``sdpa``; ``flash_attention_2`` on a packable architecture -> ``harness_varlen`` (its kernel is flash-attn's);
    any other name as given."""
    if requested == "flash_attention_2" and packs:
        return VARLEN
    if requested != "auto":
        return requested
    return VARLEN if cuda and packs else "sdpa"


def resolve_for(requested: str, model_type: str | None, device: str | None = None) -> str:
    """:func:`resolve_attention` on this machine for a model that runs on ``device`` (None: wherever torch finds a
    GPU; ``cpu`` never counts as CUDA). torch is imported only for ``auto`` on a packable model."""
    packs = can_pack(model_type)
    on_cpu = device is not None and not device.startswith("cuda")
    cuda = requested == "auto" and packs and not on_cpu and cuda_available()
    return resolve_attention(requested, cuda=cuda, packs=packs)


def kernel_name(implementation: str, *, cuda: bool, flash_attn: bool) -> str:
    """What computes attention under ``implementation``: for ``harness_varlen`` flash-attn's varlen function
    (installed, CUDA), torch's flash kernel (CUDA), or the plain-torch reference (elsewhere)."""
    if implementation != VARLEN:
        return f"transformers {implementation}"
    if not cuda:
        return "reference: per-sequence sdpa with the window (plain torch)"
    return "flash_attn.flash_attn_varlen_func" if flash_attn else "torch.ops.aten._flash_attention_forward"


def kernel_on(implementation: str, device: str) -> str:
    """:func:`kernel_name` for a model that runs on ``device`` on this machine."""
    return kernel_name(implementation, cuda=device.startswith("cuda"), flash_attn=flash_attn_importable())


def record(requested: str, implementation: str, device: str) -> dict[str, Any]:
    """What a record's model block says about attention where the config left the choice to the machine (``auto``)
    or the harness changed it (``flash_attention_2``, ``harness_varlen``); empty for a named sdpa/eager/flex."""
    if requested not in ("auto", "flash_attention_2", VARLEN):
        return {}
    return {"attention": {"requested": requested, "implementation": implementation,
                          "kernel": kernel_on(implementation, device), "unpadded": implementation == VARLEN}}


def describe(requested: str) -> str:
    """One line for ``--cfg``: what ``auto`` resolves to on this machine and why (empty unless ``auto``)."""
    if requested != "auto":
        return ""
    if not cuda_available():
        return ("# model.attn_implementation: auto -> sdpa on this machine (no CUDA: padded batches; "
                f"{VARLEN}, unpadded, on a CUDA machine)")
    kernel = kernel_name(VARLEN, cuda=True, flash_attn=flash_attn_importable())
    return (f"# model.attn_implementation: auto -> {VARLEN} on this machine for {'/'.join(PACKABLE_TYPES)} "
            f"architectures (CUDA: unpadded batches, kernel {kernel}), sdpa for others")
