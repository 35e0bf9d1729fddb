"""``attn_implementation=harness_varlen``: attention over packed sequences, with torch's own kernels on CUDA.

Registered with transformers (:func:`register`) under :data:`~harness.models.attention.VARLEN`; its mask function
is flash-attention's (a 2-D padding mask or nothing, never a dense 4-D mask). A layer's call arrives as

- **packed**: one row of concatenated sequences with ``cu_seq_lens_q``/``max_length_q`` (what the encoder, the
  efficiency task and the unpadding hook of :mod:`harness.models.unpad` pass): attention within each sequence;
- **whole rows** (no mask): every row is one sequence, run as packed rows of equal length;
- **padded** with a 2-D mask (a caller that keeps padded positions, e.g. PyLate's expanded queries): as sdpa runs
  it, every position a query and padded keys masked, so even outputs at padded positions are sdpa's.

ModernBERT's local layers pass ``sliding_window`` = half-window + 1 (transformers' convention); a token sees the
tokens at most half-window away on either side, through the kernel's own window (never a dense mask).

Kernels (:func:`varlen`): on CUDA flash-attn's ``flash_attn_varlen_func`` where flash-attn is installed, else
torch's ``aten._flash_attention_forward`` (cumulative lengths, a left/right window, autograd for training); fp32
inputs are cast to bf16 around the kernel and the output back (the flash kernels take fp16/bf16 only; the
research ModernBERT behind the paper's Table 2 did the same). Elsewhere :func:`reference`: each sequence's
attention on its own in plain torch (sdpa with the window as a mask), in the inputs' dtype, which is how the CPU
tests check the whole packed path against the padded model. Each call is counted under the kernel it ran
(:mod:`harness.models.kernel_calls`): what the records say ran.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from harness.models import kernel_calls
from harness.models.attention import VARLEN, flash_attn_importable, kernel_name


def register() -> None:
    """Make ``attn_implementation="harness_varlen"`` loadable (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register(VARLEN, attention_forward)
    AttentionMaskInterface.register(VARLEN, flash_attention_mask)


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      sliding_window: int | None = None, cu_seq_lens_q: torch.Tensor | None = None,
                      max_length_q: int | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: ``query``/``key``/``value`` [batch, heads, tokens, dim] ->
    ([batch, tokens, heads, dim], None). Self-attention only (``cu_seq_lens_k`` is ``cu_seq_lens_q``)."""
    causal = bool(getattr(module, "is_causal", False))
    window = sliding_window - 1 if sliding_window else -1
    batch, heads, width, dim = query.shape
    if cu_seq_lens_q is None and attention_mask is not None:
        if not torch.compiler.is_compiling():
            kernel_calls.count(module, kernel_calls.PADDED_MASK)
        return padded(query, key, value, attention_mask, scale=scaling, window=window, causal=causal,
                      dropout=dropout), None
    if cu_seq_lens_q is None:   # whole rows: each one sequence
        cu_seq_lens_q = torch.arange(0, (batch + 1) * width, width, dtype=torch.int32, device=query.device)
        max_length_q = width
    q, k, v = (t.transpose(1, 2).reshape(batch * width, heads, dim) for t in (query, key, value))
    if not torch.compiler.is_compiling():     # a compiled graph's calls are counted as compiled forwards
        kernel_calls.count(module, kernel_name(VARLEN, cuda=on_cuda(q), flash_attn=flash_attn_importable()))
    out = varlen(q, k, v, cu_seq_lens_q, int(max_length_q), scale=scaling, window=window,  # type: ignore[arg-type]
                 causal=causal, dropout=dropout)
    return out.view(batch, width, heads, dim), None


def kernel_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the flash kernels run in: bf16 for fp32 inputs (fp32 weights), else the inputs' own."""
    return torch.bfloat16 if dtype == torch.float32 else dtype


def varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_len: int, *,
           scale: float | None, window: int, causal: bool = False, dropout: float = 0.0) -> torch.Tensor:
    """Attention within each packed sequence: ``q``/``k``/``v`` [tokens, heads, dim], sequence i at
    ``cu_seqlens[i]:cu_seqlens[i+1]``; ``window`` tokens either side (-1: all). Returns [tokens, heads, dim]."""
    if not on_cuda(q):
        return reference(q, k, v, cu_seqlens, scale=scale, window=window, causal=causal, dropout=dropout)
    dtype = q.dtype
    q, k, v = (t.to(kernel_dtype(dtype)) for t in (q, k, v))
    kernel = flash_attn_kernel if flash_attn_importable() else torch_kernel
    out = kernel(q, k, v, cu_seqlens.to(torch.int32), max_len, scale=scale, window=window, causal=causal,
                 dropout=dropout)
    return out.to(dtype)


def on_cuda(t: torch.Tensor) -> bool:
    return t.is_cuda


def torch_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, max_len: int, *,
                 scale: float | None, window: int, causal: bool, dropout: float) -> torch.Tensor:
    """torch's own flash kernel (the one behind sdpa), on packed sequences with a left/right window."""
    return torch.ops.aten._flash_attention_forward(
        q, k, v, cu, cu, max_len, max_len, dropout, causal, False,
        scale=scale, window_size_left=window, window_size_right=window)[0]


def flash_attn_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, max_len: int, *,
                      scale: float | None, window: int, causal: bool, dropout: float) -> torch.Tensor:
    """flash-attn's varlen function (the optional ``[gpu]`` extra)."""
    from flash_attn import flash_attn_varlen_func

    return flash_attn_varlen_func(q, k, v, cu, cu, max_len, max_len, dropout_p=dropout, softmax_scale=scale,
                                  causal=causal, window_size=(window, window))


def band(n: int, window: int, causal: bool, device: torch.device) -> torch.Tensor | None:
    """[n, n] boolean mask of the keys each query sees (None: all of them)."""
    if window < 0 and not causal:
        return None
    i = torch.arange(n, device=device)
    gap = i[:, None] - i[None, :]
    ok = gap.abs() <= window if window >= 0 else None
    return ok if not causal else (gap >= 0 if ok is None else ok & (gap >= 0))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, *, scale: float | None,
              window: int, causal: bool = False, dropout: float = 0.0) -> torch.Tensor:
    """:func:`varlen` in plain torch: each sequence's attention on its own (sdpa, the window as a mask); the
    sequences of one length go through sdpa together, as a batch."""
    starts, lengths = cu_seqlens[:-1].long(), cu_seqlens.diff().long()
    indices, parts = [], []
    for n in lengths.unique().tolist():
        if n == 0:
            continue
        first = starts[lengths == n]
        index = (first[:, None] + torch.arange(n, device=q.device)).reshape(-1)
        qs, ks, vs = (t[index].view(len(first), n, *t.shape[1:]).transpose(1, 2) for t in (q, k, v))
        part = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=band(n, window, causal, q.device),
                                              dropout_p=dropout, scale=scale)           # [sequences, heads, n, dim]
        indices.append(index)
        parts.append(part.transpose(1, 2).reshape(-1, *q.shape[1:]))
    if not parts:
        return torch.zeros_like(q)
    return torch.zeros_like(q).index_copy(0, torch.cat(indices), torch.cat(parts))


def padded(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor, *,
           scale: float | None, window: int, causal: bool = False, dropout: float = 0.0) -> torch.Tensor:
    """A padded batch as sdpa runs it: [batch, heads, width, dim] with a 2-D key mask -> [batch, width, heads, dim]."""
    width = query.shape[2]
    allowed = mask.bool()[:, None, None, :]
    near = band(width, window, causal, query.device)
    if near is not None:
        allowed = allowed & near
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=allowed, dropout_p=dropout, scale=scale)
    return out.transpose(1, 2).contiguous()
