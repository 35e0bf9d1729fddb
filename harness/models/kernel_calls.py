"""The attention kernel that really ran, counted call by call with its inputs' dtype: what a record's ``kernel`` says
(never one inferred), counted by the attention function under ``harness_varlen``, else by a hook."""

from __future__ import annotations

import threading
from typing import Any

#: the harness' attention function for packed sequences (registered with transformers when a model needs it)
VARLEN = "harness_varlen"
#: what the unpadded path's attention function counts, by branch
TORCH_FLASH = "torch.ops.aten._flash_attention_forward"
FLASH_ATTN = "flash_attn.flash_attn_varlen_func"
REFERENCE = "reference: per-sequence sdpa with the window (plain torch)"
PADDED_MASK = "padded: sdpa with the 2-D mask (plain torch)"
COMPILED = "compiled forward (torch.compile)"


class KernelCalls:
    """Calls by kernel name and input dtype, from any thread; the attention blocks it keeps current (:meth:`keep`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.dtypes: dict[str, int] = {}
        self._blocks: list[dict[str, Any]] = []

    def add(self, kernel: str, n: int = 1, dtype: str | None = None) -> None:
        with self._lock:
            self.counts[kernel] = self.counts.get(kernel, 0) + n
            if dtype:
                self.dtypes[dtype] = self.dtypes.get(dtype, 0) + n
            for block in self._blocks:
                self._fill(block)

    def _fill(self, block: dict[str, Any]) -> None:
        block["calls"] = dict(self.counts)
        block["kernel"] = observed_kernel(self.counts)
        block["dtype"] = observed_kernel(self.dtypes)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def mark(self) -> tuple[dict[str, int], dict[str, int]]:
        """The counts by kernel and by dtype now, for :meth:`since`."""
        with self._lock:
            return dict(self.counts), dict(self.dtypes)

    def since(self, mark: tuple[dict[str, int], dict[str, int]] | None) -> tuple[dict[str, int], dict[str, int]]:
        """The calls by kernel and by dtype after ``mark`` (None: all of them): one run's own counts."""
        now = self.mark()
        return tuple({k: n - (old or {}).get(k, 0) for k, n in new.items() if n - (old or {}).get(k, 0)}  # type: ignore[return-value]
                     for new, old in zip(now, mark or ({}, {}), strict=True))

    def keep(self, block: dict[str, Any]) -> dict[str, Any]:
        """Keep ``block``'s ``calls``, ``kernel`` and ``dtype`` equal to the counts from now on (and fill them now)."""
        with self._lock:
            self._fill(block)
            self._blocks.append(block)
        return block

    def __deepcopy__(self, memo: dict) -> KernelCalls:     # a copied model counts afresh
        return KernelCalls()

    def __reduce__(self) -> tuple:                         # so does a pickled one
        return (KernelCalls, ())


def observed_kernel(counts: dict[str, int]) -> str | None:
    """The kernel (or dtype) the counts name: the one that ran, or each with its calls; None before any."""
    ran = {k: n for k, n in counts.items() if n}
    if len(ran) <= 1:
        return next(iter(ran), None)
    return ", ".join(f"{k} ({n} calls)" for k, n in sorted(ran.items(), key=lambda kv: -kv[1]))


def attention_modules(encoder: Any) -> list[Any]:
    """The innermost modules of ``encoder`` named ``*Attention``: those calling the attention function, per layer."""
    found = [m for m in encoder.modules() if type(m).__name__.endswith("Attention")]
    return [m for m in found if not any(c is not m and type(c).__name__.endswith("Attention") for c in m.modules())]


def watch(encoder: Any) -> KernelCalls:
    """Count every attention call of ``encoder`` by kernel (idempotent); its counter."""
    calls = getattr(encoder, "_harness_calls", None)
    if calls is not None:
        return calls
    import torch
    calls = KernelCalls()
    encoder._harness_calls = calls
    varlen = getattr(encoder.config, "_attn_implementation", None) == VARLEN

    def count_transformers(module: Any, args: tuple, kwargs: dict[str, Any]) -> None:
        if not torch.compiler.is_compiling():      # inside a compiled graph: the compiled forward is counted
            hidden = args[0] if args else kwargs.get("hidden_states")
            calls.add(f"transformers {getattr(module.config, '_attn_implementation', '?')}",
                      dtype=layer_dtype(hidden) if isinstance(hidden, torch.Tensor) else None)

    for module in attention_modules(encoder):
        module._harness_calls = calls
        if not varlen:                 # harness_varlen counts inside the function, by the branch it took
            module.register_forward_pre_hook(count_transformers, with_kwargs=True)
    return calls


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` -> ``bfloat16``."""
    return str(dtype).removeprefix("torch.")


def layer_dtype(hidden: Any) -> str:
    """The dtype an attention layer computes q, k, v in from ``hidden``: autocast's where on, else the tensor's."""
    import torch
    kind = hidden.device.type
    return dtype_name(torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else hidden.dtype)


def count(module: Any, kernel: str, dtype: Any = None) -> None:
    """One call of ``kernel`` on inputs of ``dtype`` by the attention ``module`` (of a watched encoder)."""
    calls = getattr(module, "_harness_calls", None)
    if calls is not None:
        calls.add(kernel, dtype=dtype_name(dtype) if dtype is not None else None)
