"""``attn_implementation=harness_varlen``: attention over packed sequences, with torch's own kernels on CUDA (a call
arrives packed, as whole rows, or padded with a 2-D mask: run as sdpa runs it). Kernels: flash-attn's varlen function
if installed, else ``aten._flash_attention_forward``, fp32 inputs cast to bf16 around it (as the research ModernBERT
behind Table 2); elsewhere :func:`reference`, plain torch. :func:`install` unpads an encoder's padded batches into
one row of real tokens and scatters its last hidden state back (a caller needing padded outputs: ``keep_padded``)."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
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
    """transformers' attention interface ([b, heads, tokens, dim] -> ([b, tokens, heads, dim], None)), self only."""
    causal = bool(getattr(module, "is_causal", False))
    window = sliding_window - 1 if sliding_window else -1
    batch, heads, width, dim = query.shape
    if cu_seq_lens_q is None and attention_mask is not None:
        if not torch.compiler.is_compiling():
            kernel_calls.count(module, kernel_calls.PADDED_MASK, query.dtype)
        return padded(query, key, value, attention_mask, scale=scaling, window=window, causal=causal,
                      dropout=dropout), None
    if cu_seq_lens_q is None:   # whole rows: each one sequence
        cu_seq_lens_q = torch.arange(0, (batch + 1) * width, width, dtype=torch.int32, device=query.device)
        max_length_q = width
    q, k, v = (t.transpose(1, 2).reshape(batch * width, heads, dim) for t in (query, key, value))
    if not torch.compiler.is_compiling():     # a compiled graph's calls are counted as compiled forwards
        kernel_calls.count(module, kernel_name(VARLEN, cuda=on_cuda(q), flash_attn=flash_attn_importable()),
                           kernel_dtype(q.dtype) if on_cuda(q) else q.dtype)     # what the kernel computes in
    out = varlen(q, k, v, cu_seq_lens_q, int(max_length_q), scale=scaling, window=window,  # type: ignore[arg-type]
                 causal=causal, dropout=dropout)
    return out.view(batch, width, heads, dim), None


def kernel_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the flash kernels run in: bf16 for fp32 inputs (fp32 weights), else the inputs' own."""
    return torch.bfloat16 if dtype == torch.float32 else dtype


def varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_len: int, *,
           scale: float | None, window: int, causal: bool = False, dropout: float = 0.0) -> torch.Tensor:
    """Attention within each packed sequence (``cu_seqlens``): [tokens, heads, dim] in and out; ``window``: -1 all."""
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
    args, kwargs = torch_kernel_arguments(q, k, v, cu, max_len, scale=scale, window=window, causal=causal,
                                          dropout=dropout)
    return torch.ops.aten._flash_attention_forward(*args, **kwargs)[0]


def torch_kernel_arguments(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, max_len: int, *,
                           scale: float | None, window: int, causal: bool,
                           dropout: float) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments of ``aten._flash_attention_forward`` for one packed row (a test binds them)."""
    return ((q, k, v, cu, cu, max_len, max_len, dropout, causal, False),
            {"scale": scale, "window_size_left": window, "window_size_right": window})


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
    """:func:`varlen` in plain torch: each sequence on its own (sdpa, window as mask), equal lengths batched."""
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


#: inputs laid out per token, packed alongside ``input_ids``
PER_TOKEN = ("input_ids", "position_ids", "token_type_ids")


class _State(threading.local):
    """Per thread (the CPU encoder runs batches in threads): what each forward in flight unpadded, innermost last."""

    def __init__(self) -> None:
        self.stack: list[tuple[torch.Tensor, int, int] | None] = []

    def __reduce__(self) -> tuple:             # a copied or pickled model (deepcopy, torch.save) starts afresh
        return (_State, ())


def install(encoder: torch.nn.Module, keep_padded: Callable[[dict[str, Any]], bool] | None = None) -> None:
    """Unpad ``encoder``'s padded batches (idempotent). ``keep_padded(inputs)``: True for a batch to run padded."""
    if installed(encoder):
        return
    encoder._harness_unpad = _State()                                 # type: ignore[assignment]
    encoder._harness_keep_padded = keep_padded                        # type: ignore[assignment]
    encoder._harness_arg_names = list(inspect.signature(encoder.forward).parameters)  # type: ignore[assignment]
    encoder.register_forward_pre_hook(_pack, with_kwargs=True)
    encoder.register_forward_hook(_unpack, with_kwargs=True)


def installed(encoder: torch.nn.Module) -> bool:
    return getattr(encoder, "_harness_unpad", None) is not None


def _packable(inputs: dict[str, Any], keep_padded: Callable[[dict[str, Any]], bool] | None) -> bool:
    mask, ids = inputs.get("attention_mask"), inputs.get("input_ids")
    if ids is None or not isinstance(mask, torch.Tensor) or mask.dim() != 2:
        return False
    if inputs.get("cu_seq_lens_q") is not None or inputs.get("inputs_embeds") is not None:
        return False
    return keep_padded is None or not keep_padded(inputs)


def pack_padded(inputs: dict[str, Any]) -> tuple[dict[str, Any], tuple[torch.Tensor, int, int]]:
    """Forward kwargs of one packed row for a padded batch, and what :func:`repad` needs. The mask is read on the
    host once (the kernel needs the longest length); indices and ``cu_seq_lens`` return to the device unsynced."""
    mask = inputs["attention_mask"]
    device = mask.device
    host = mask.cpu().bool()
    batch, width = host.shape
    lengths = host.sum(1, dtype=torch.int32)
    longest = int(lengths.max())
    index = _to(host.reshape(-1).nonzero().squeeze(1), device)
    cu = _to(F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0)), device)
    if inputs.get("position_ids") is None:    # the padded model's own positions (restarting: right padding)
        inputs = {**inputs, "position_ids": torch.arange(width, device=device)}
    out = {k: v for k, v in inputs.items() if k != "attention_mask"}
    for name in PER_TOKEN:
        if inputs.get(name) is not None:
            out[name] = inputs[name].expand(batch, width).reshape(-1)[index][None]
    out.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=longest, max_length_k=longest)
    return out, (index, batch, width)


def _to(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device``: through pinned memory on CUDA, so the copy does not wait for the stream."""
    return host.to(device) if device.type != "cuda" else host.pin_memory().to(device, non_blocking=True)


def repad(packed: torch.Tensor, index: torch.Tensor, batch: int, width: int) -> torch.Tensor:
    """[1, tokens, hidden] -> [batch, width, hidden], zeros at the padded positions (differentiable)."""
    flat = packed.new_zeros(batch * width, packed.shape[-1]).index_copy(0, index, packed[0])
    return flat.view(batch, width, -1)


def _pack(module: torch.nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]] | None:
    inputs = {**dict(zip(module._harness_arg_names, args, strict=False)), **kwargs}
    if not _packable(inputs, module._harness_keep_padded):
        module._harness_unpad.stack.append(None)
        return None
    packed, state = pack_padded(inputs)
    module._harness_unpad.stack.append(state)
    return (), packed


def _unpack(module: torch.nn.Module, args: tuple, kwargs: dict[str, Any], output: Any) -> Any:
    state = module._harness_unpad.stack.pop()
    if state is None:
        return output
    index, batch, width = state
    pooler = getattr(module, "pooler", None)
    if isinstance(output, tuple):
        last = repad(output[0], index, batch, width)
        rest = list(output[1:])
        if rest and pooler is not None and rest[0] is not None:
            rest[0] = pooler(last)
        return (last, *rest)
    output.last_hidden_state = repad(output.last_hidden_state, index, batch, width)
    if getattr(output, "pooler_output", None) is not None and pooler is not None:
        output.pooler_output = pooler(output.last_hidden_state)
    if getattr(output, "hidden_states", None) is not None:
        output.hidden_states = tuple(repad(h, index, batch, width) for h in output.hidden_states)
    return output
