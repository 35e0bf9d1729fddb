"""Unpadding at the encoder's entry, re-padding at its exit: padded batches run as one packed row.

Every GPU job hands the encoder padded batches: sentence-transformers' and PyLate's collators, the GLUE Trainer's.
Rather than changing each collator, :func:`install` puts two hooks on the encoder module (``ModernBertModel``,
``BertModel``) loaded with ``harness_varlen``: before its forward, a padded batch (``input_ids`` + a 2-D
``attention_mask``) becomes one row of the real tokens with their positions (the padded model's own, restarting at
each sequence) and ``cu_seq_lens``, so embeddings, every MLP and attention (the varlen kernel) run on real tokens
only; after it, the last hidden state is scattered back to [batch, width, hidden] with zeros at the padded
positions (BERT's pooler is recomputed from it), which is what pooling, the classification heads and the losses
read. Gradients flow through both (gather and scatter). Batches that arrive packed (``cu_seq_lens_q``) or without
a mask pass through unchanged.

Exact wherever the outputs at padded positions are not used (pooling, heads, document tokens all mask them). A
caller whose padded positions carry outputs (PyLate's expanded queries: [MASK] tokens with attention mask 0, each
an embedding) passes ``keep_padded``, and such batches run padded through the attention function's mask path.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

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
    host once (the forward's one synchronisation: the kernel needs the longest length as a number); the indices
    and ``cu_seq_lens`` go back to the device without another."""
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
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


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
