"""Which attention a model loads with, and which kernel runs it: ``auto`` gives the paper's unpadded flash-attention
(``harness_varlen``) on CUDA where the flash kernels run (:func:`kernel_blocker`), elsewhere sdpa on padded batches,
said in one line and the record; an explicit ``harness_varlen`` there is refused before any work."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.models import kernel_calls
from harness.models.kernel_calls import VARLEN

#: Hugging Face ``model_type``s whose forward the harness packs: restarting positions and ``cu_seq_lens`` reach
#: the attention function unchanged (tests compare them with the padded model)
PACKABLE_TYPES = ("modernbert", "bert")
#: what the flash kernels take (torch's ``_flash_attention_forward`` and flash-attn 2's varlen function): the GPU
#: generation, the head size (at most 256, a multiple of 8) and the inputs' dtype (fp32 weights: cast to bf16)
MIN_CAPABILITY = (8, 0)
MAX_HEAD_DIM = 256
HEAD_DIM_MULTIPLE = 8
KERNEL_DTYPES = ("float16", "bfloat16")


def can_pack(model_type: str | None) -> bool:
    """Whether the harness runs an encoder of this architecture on packed sequences."""
    return (model_type or "").lower() in PACKABLE_TYPES


_FLASH_ATTN: list[bool] = []      # flash-attn looked up once per process (a plain value: torch.compile reads it)


def flash_attn_importable() -> bool:
    """Whether flash-attn is installed; never imports it (looked up once per process: every layer call asks)."""
    if not _FLASH_ATTN:
        _FLASH_ATTN.append(importlib.util.find_spec("flash_attn") is not None)
    return _FLASH_ATTN[0]


def cuda_available() -> bool:
    """Whether torch sees a CUDA device."""
    import torch
    return bool(torch.cuda.is_available())


def cuda_capability(device: str | None) -> tuple[int, int]:
    """The compute capability of ``device`` (None: the current CUDA device)."""
    import torch
    return tuple(torch.cuda.get_device_capability(device if device and ":" in device else None))  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------- the model's facts
def transformer_config(local: str | Path) -> Path | None:
    """The transformers config.json of a model folder (or of its sentence-transformers Transformer module)."""
    root = Path(local)
    if (root / "config.json").is_file():
        return root / "config.json"
    try:
        modules = json.loads((root / "modules.json").read_text())
    except (OSError, ValueError):
        return None
    for module in modules if isinstance(modules, list) else []:
        kind = str(module.get("type", "")) if isinstance(module, dict) else ""
        if kind.rsplit(".", 1)[-1] == "Transformer":
            candidate = root / str(module.get("path", "")) / "config.json"
            return candidate if candidate.is_file() else None
    return None


def model_config_json(local: str | Path) -> dict[str, Any]:
    """The transformers config of a model folder as a mapping (empty when there is none)."""
    path = transformer_config(local)
    try:
        data = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def model_type_of(local: str | Path) -> str | None:
    """``model_type`` of a model folder's transformers config (None when there is none: nothing is packed)."""
    return model_config_json(local).get("model_type")


def head_dim_of(config: Any) -> int | None:
    """A transformers config's head size (mapping or object): ``head_dim``, else hidden size / heads; else None."""
    get = config.get if isinstance(config, dict) else lambda k: getattr(config, k, None)
    if isinstance(get("head_dim"), int):
        return int(get("head_dim"))
    hidden, heads = get("hidden_size"), get("num_attention_heads")
    return hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads else None


# --------------------------------------------------------------------------------------------- the choice
def kernel_blocker(*, capability: tuple[int, int] | None, head_dim: int | None, dtype: str | None) -> str:
    """Why the flash kernels cannot run a model on this GPU, in words ('' where they can)."""
    reasons = []
    if capability is not None and tuple(capability) < MIN_CAPABILITY:
        reasons.append(f"compute capability {capability[0]}.{capability[1]} (the flash kernels need "
                       f"{MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or above: A100, H100, RTX 30xx/40xx, ...)")
    if head_dim is not None and (head_dim > MAX_HEAD_DIM or head_dim % HEAD_DIM_MULTIPLE):
        reasons.append(f"head size {head_dim} (the flash kernels take at most {MAX_HEAD_DIM}, a multiple of "
                       f"{HEAD_DIM_MULTIPLE})")
    kernel_dtype = "bfloat16" if dtype == "float32" else dtype
    if dtype is not None and kernel_dtype not in KERNEL_DTYPES:
        reasons.append(f"{dtype} weights (the flash kernels take float16/bfloat16; float32 is cast to bfloat16)")
    return "; ".join(reasons)


def resolve_attention(requested: str, *, cuda: bool, packs: bool, blocker: str = "") -> str:
    """The implementation to load: ``auto`` (or ``flash_attention_2``) resolved as the module says; else as given."""
    requested_varlen = requested == VARLEN or (requested == "flash_attention_2" and packs)
    if requested_varlen and cuda and blocker:
        raise HarnessError(
            f"model.attn_implementation={requested} cannot run on this GPU: {blocker}. Use "
            "model.attn_implementation=auto (sdpa on padded batches where the flash kernels cannot run) or sdpa.")
    if requested_varlen:
        return VARLEN
    if requested != "auto":
        return requested
    return VARLEN if cuda and packs and not blocker else "sdpa"


def runs_on_cuda(device: str | None) -> bool:
    """Whether a model for ``device`` runs on CUDA here (None: wherever torch finds a GPU; ``cpu`` never)."""
    return (device is None or device.startswith("cuda")) and cuda_available()


def blocker_for(device: str | None, head_dim: int | None = None, dtype: str | None = None) -> str:
    """:func:`kernel_blocker` for a model that runs on CUDA ``device`` here (None: the current CUDA device)."""
    return kernel_blocker(capability=cuda_capability(device), head_dim=head_dim, dtype=dtype)


def resolve_for(requested: str, model_type: str | None, device: str | None = None, *, head_dim: int | None = None,
                dtype: str | None = None) -> str:
    """:func:`resolve_attention` here for a model on ``device`` (None: wherever torch finds a GPU)."""
    packs = can_pack(model_type)
    if requested != VARLEN and not (packs and requested in ("auto", "flash_attention_2")):
        return resolve_attention(requested, cuda=False, packs=packs)
    cuda = runs_on_cuda(device)
    blocker = blocker_for(device, head_dim, dtype) if cuda else ""
    return resolve_attention(requested, cuda=cuda, packs=packs, blocker=blocker)


def fallback_reason(requested: str, implementation: str, model_type: str | None, device: str | None, *,
                    head_dim: int | None, dtype: str | None) -> str:
    """Why ``auto`` chose padded sdpa on a CUDA machine for an architecture the harness packs ('' otherwise)."""
    if requested != "auto" or implementation != "sdpa" or not can_pack(model_type) or not runs_on_cuda(device):
        return ""
    return blocker_for(device, head_dim, dtype)


# --------------------------------------------------------------------------------------------- what ran
def kernel_name(implementation: str, *, cuda: bool, flash_attn: bool) -> str:
    """What computes attention under ``implementation`` (expected; records count what ran)."""
    if implementation != VARLEN:
        return f"transformers {implementation}"
    if not cuda:
        return kernel_calls.REFERENCE
    return kernel_calls.FLASH_ATTN if flash_attn else kernel_calls.TORCH_FLASH


def describe(requested: str) -> str:
    """One line for ``--cfg``: what ``auto`` resolves to on this machine and why (empty unless ``auto``)."""
    if requested != "auto":
        return ""
    if not cuda_available():
        return ("# model.attn_implementation: auto -> sdpa on this machine (no CUDA: padded batches; "
                f"{VARLEN}, unpadded, on a CUDA machine)")
    blocker = blocker_for(None)
    if blocker:
        return (f"# model.attn_implementation: auto -> sdpa on this machine (CUDA, but the flash kernels cannot "
                f"run here: {blocker}; padded batches)")
    kernel = kernel_name(VARLEN, cuda=True, flash_attn=flash_attn_importable())
    return (f"# model.attn_implementation: auto -> {VARLEN} on this machine for {'/'.join(PACKABLE_TYPES)} "
            f"architectures (CUDA: unpadded batches, kernel {kernel}; sdpa for a head size the kernel does not "
            "take), sdpa for others")
