"""Device and precision policy: ``device=auto``, the CPU's flags, ``precision=auto`` (bf16 only where faster) and
the autocast context. torch is imported inside the functions, so importing this module stays light."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from harness.core.errors import HarnessError


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> cuda if torch sees a GPU, else cpu; an explicit device must exist (checked before any work)."""
    if device == "cpu":   # nothing to check: planning a CPU run imports no torch
        return device
    import torch
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (index and (kind != "cuda" or not index.isdigit())):
        raise HarnessError(f"unknown device {device!r}: use device=auto, cpu, cuda or cuda:<N>.")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise HarnessError(f"device={device} but torch sees no CUDA device here (torch {torch.__version__}): "
                               "use device=auto or device=cpu, or run on a GPU node.")
        if index and int(index) >= count:
            raise HarnessError(f"device={device} but this machine has {count} CUDA device(s): use cuda:0..."
                               f"cuda:{count - 1} or device=auto.")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise HarnessError("device=mps but torch sees no Apple GPU here: use device=auto or device=cpu.")
    return device


def cpu_flags() -> set[str]:
    """The CPU's feature flags (``/proc/cpuinfo``), or ``HARNESS_CPU_FLAGS`` (space-separated) for tests and users."""
    override = os.environ.get("HARNESS_CPU_FLAGS")
    if override is not None:
        return set(override.split())
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def bf16_supported(device: str) -> bool:
    """Native bf16 instructions: CUDA with bf16, or a CPU with AVX512-BF16 or AMX-BF16."""
    if device.startswith("cuda"):
        import torch
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device == "cpu":
        return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())
    return False


def bf16_faster(device: str) -> bool:
    """bf16 matmuls faster than fp32: CUDA with bf16, or a CPU with AMX-BF16 (with AVX512-BF16 alone, the project's Xeon
    ran a bf16 matmul at 0.6x fp32 and SciFact 2x slower: benchmarks/encode_vs_st.py)."""
    if device.startswith("cuda"):
        return bf16_supported(device)
    return device == "cpu" and "amx_bf16" in cpu_flags()


def resolve_precision(precision: str, device: str) -> str:
    """auto -> bf16 where the hardware computes it faster than fp32 (:func:`bf16_faster`), else fp32."""
    if precision == "auto":
        return "bf16" if bf16_faster(device) else "fp32"
    if precision not in ("fp32", "bf16", "fp16"):
        raise HarnessError(f"unknown precision {precision!r}: use auto, fp32, bf16 or fp16")
    return precision


def autocast(precision: str, device: str) -> Any:
    """Autocast context for bf16/fp16, a no-op for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=dtype)


def cast_for_inference(model: Any, precision: str, device: str) -> str:
    """Cast ``model``'s weights to ``precision`` for inference on CUDA (CPUs keep autocast); what runs."""
    if precision == "fp32":
        return "fp32"
    if device.startswith("cuda") and precision in ("bf16", "fp16"):
        import torch
        cast_weights(model, torch.bfloat16 if precision == "bf16" else torch.float16)
        return f"{precision} weights"
    return f"autocast {precision} over fp32 weights"


#: buffers that stay fp32 under low-precision weights: rotary embeddings' inverse frequencies (non-persistent, so
#: never in a checkpoint; ModernBERT's ``{layer_type}_inv_freq`` and ``{layer_type}_original_inv_freq``)
FP32_BUFFERS = "inv_freq"


def cast_weights(model: Any, dtype: Any) -> None:
    """``model.to(dtype)`` with rotary frequencies kept in fp32 (in bf16 an angle is off by radians)."""
    kept = {name: buffer for name, buffer in model.named_buffers() if name.rsplit(".", 1)[-1].endswith(FP32_BUFFERS)
            and buffer.is_floating_point()}
    model.to(dtype)
    for name, buffer in kept.items():
        owner, _, leaf = name.rpartition(".")
        module = model.get_submodule(owner) if owner else model
        module._buffers[leaf] = buffer.to(module._buffers[leaf].device)     # the same fp32 values, persistence kept


def autocast_for(model: Any, precision: str, device: str) -> Any:
    """:func:`autocast` for ``model``'s forward; a no-op where its weights are already in a low precision."""
    import torch
    first = next(iter(model.parameters()), None)
    if first is not None and first.dtype in (torch.bfloat16, torch.float16):
        return contextlib.nullcontext()
    return autocast(precision, device)
