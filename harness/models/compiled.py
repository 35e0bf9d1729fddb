"""``compile=true``: the encoder's forward through ``torch.compile`` on a GPU (off until measured faster than eager);
the forward is compiled, not the module's call, so the unpadding hooks stay outside the graph."""

from __future__ import annotations

from typing import Any

from harness.models.kernel_calls import COMPILED, watch


def wanted(config: Any, device: str) -> bool:
    """``compile=true`` on a CUDA device (ignored on a CPU): what identity, measurement and the encoder read."""
    return bool(config.get("compile")) and device.startswith("cuda")


def compile_encoder(encoder: Any, backend: str = "inductor") -> bool:
    """Compile ``encoder``'s forward in place (False if it was); ``backend``: torch.compile's (``eager``: a dry run)."""
    import torch

    from harness.models.attention import flash_attn_importable
    if getattr(encoder, "_harness_compiled", False):
        return False
    flash_attn_importable()               # looked up before tracing: the graph reads the answer, not the lookup
    calls = watch(encoder)
    compiled = torch.compile(encoder.forward, dynamic=True, backend=backend)

    def forward(*args: Any, **kwargs: Any) -> Any:
        calls.add(COMPILED)
        return compiled(*args, **kwargs)

    encoder.forward = forward
    encoder._harness_compiled = True
    return True


def compiled(encoder: Any) -> bool:
    return bool(getattr(encoder, "_harness_compiled", False))
