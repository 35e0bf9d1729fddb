"""Batches of token sequences: grouped by a token budget, laid out padded or packed (``varlen``: one row with
``cu_seq_lens``; ``mask``: rows with a block-diagonal mask, how a CPU test checks the packed layout), as kwargs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


def token_budget_batches(lengths: np.ndarray, batch_tokens: int, max_batch_size: int) -> list[np.ndarray]:
    """Indices in batches, longest first, ``len(batch) * longest <= batch_tokens`` (a longer text: a batch alone)."""
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        longest = max(int(lengths[order[start]]), 1)
        size = max(1, min(max_batch_size, batch_tokens // longest))
        batches.append(order[start : start + size])
        start += size
    return batches


def packed_batches(lengths: np.ndarray, batch_tokens: int, max_batch_size: int) -> list[np.ndarray]:
    """Indices in packed batches, longest first, at most ``batch_tokens`` real tokens each."""
    order = np.argsort(-lengths, kind="stable")
    sizes = np.maximum(lengths[order], 1)
    return [order[a:b] for a, b in chunk_bounds(sizes, batch_tokens, batch_tokens, most_items=max_batch_size)]


def chunk_bounds(sizes: np.ndarray, first: int, most: int, most_items: int | None = None) -> list[tuple[int, int]]:
    """[start, stop) of chunks of items of ``sizes``, the first about ``first``, doubling up to ``most``."""
    ends = np.cumsum(sizes)
    bounds, start, target = [], 0, max(1, first)
    while start < len(sizes):
        before = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + target, side="right")))   # first that no longer fits
        stop = stop if most_items is None else min(stop, start + most_items)
        bounds.append((start, min(stop, len(sizes))))
        start, target = stop, min(target * 2, max(most, 1))
    return bounds


@dataclass
class Packed:
    """Sequences packed into rows; ``where[i]``: (row, start) of sequence i; ``segment``: sequence numbers (-1: pad)."""

    input_ids: np.ndarray
    position_ids: np.ndarray
    segment: np.ndarray
    where: list[tuple[int, int]]
    lengths: list[int]


def pack_rows(seqs: list[list[int]], capacity: int | None, pad_id: int) -> Packed:
    """First-fit packing of ``seqs`` (longest first) into rows of ``capacity`` tokens; ``None``: one row (varlen)."""
    lengths = [len(s) for s in seqs]
    cap = capacity or sum(lengths)
    free: list[int] = []
    where: list[tuple[int, int]] = []
    for n in lengths:
        row = next((r for r, left in enumerate(free) if left >= n), None)
        if row is None:
            free.append(cap)
            row = len(free) - 1
        where.append((row, cap - free[row]))
        free[row] -= n
    ids = np.full((len(free), cap), pad_id, dtype=np.int64)
    pos = np.zeros((len(free), cap), dtype=np.int64)
    seg = np.full((len(free), cap), -1, dtype=np.int64)
    for i, (seq, (row, start)) in enumerate(zip(seqs, where, strict=True)):
        ids[row, start : start + len(seq)] = seq
        pos[row, start : start + len(seq)] = np.arange(len(seq))
        seg[row, start : start + len(seq)] = i
    return Packed(ids, pos, seg, where, lengths)


def unpack_index(packed: Packed) -> tuple[np.ndarray, np.ndarray]:
    """[sequences, longest] indices of each sequence's tokens in the flattened rows, and the real-token mask."""
    offs, width = np.arange(max(packed.lengths)), packed.input_ids.shape[1]
    starts = np.array([row * width + start for row, start in packed.where])
    mask = offs[None, :] < np.asarray(packed.lengths)[:, None]
    index = np.minimum(starts[:, None] + offs[None, :], packed.input_ids.size - 1)
    return index, mask


def block_masks(hf_model: Any, segment: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | dict[str, torch.Tensor]:
    """Additive 4-D masks: a token sees its own sequence (padding only itself); ModernBERT: one per attention type."""
    same = segment[:, :, None] == segment[:, None, :]
    pad = segment < 0
    eye = torch.eye(segment.shape[1], dtype=torch.bool, device=segment.device)
    allowed = (same & ~pad[:, :, None]) | (pad[:, :, None] & eye)

    def additive(ok: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(ok.shape, dtype=dtype, device=ok.device)
        return out.masked_fill_(~ok, torch.finfo(dtype).min)[:, None]

    cfg = hf_model.config
    if getattr(cfg, "model_type", "") != "modernbert":
        return additive(allowed)
    idx = torch.arange(segment.shape[1], device=segment.device)
    near = (idx[:, None] - idx[None, :]).abs() <= cfg.sliding_window
    return {"full_attention": additive(allowed), "sliding_attention": additive(allowed & (near | (pad[:, :, None] & eye)))}


def padded_arrays(seqs: list, width: int, pad_id: int) -> dict[str, np.ndarray]:
    """``input_ids`` + ``attention_mask`` of sequences right-padded to ``width`` (host arrays)."""
    ids = np.full((len(seqs), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(seqs), width), dtype=np.int64)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return {"input_ids": ids, "attention_mask": mask}


def padded_inputs(seqs: list, width: int, pad_id: int, device: str) -> dict[str, torch.Tensor]:
    """``input_ids`` + ``attention_mask`` of sequences right-padded to ``width``."""
    return {k: torch.from_numpy(v).to(device) for k, v in padded_arrays(seqs, width, pad_id).items()}


def cu_seq_lens(lengths: list[int]) -> np.ndarray:
    """Cumulative sequence lengths of a packed row (int32, as the flash kernels take them)."""
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def packed_arrays(packed: Packed, mode: str) -> dict[str, np.ndarray]:
    """Host arrays of packed rows: ids, restarting positions, ``cu_seq_lens`` (varlen) or ``segment`` (mask)."""
    arrays = {"input_ids": packed.input_ids, "position_ids": packed.position_ids}
    return arrays | ({"cu_seq_lens": cu_seq_lens(packed.lengths)} if mode == "varlen" else {"segment": packed.segment})


def packed_kwargs(hf: Any, tensors: dict[str, torch.Tensor], mode: str, longest: int) -> dict[str, Any]:
    """Forward kwargs of packed rows: restarting positions plus ``cu_seq_lens`` or block-diagonal masks."""
    kwargs: dict[str, Any] = {"input_ids": tensors["input_ids"], "position_ids": tensors["position_ids"]}
    if mode == "varlen":
        cu = tensors["cu_seq_lens"]
        kwargs |= {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": longest, "max_length_k": longest}
    else:
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else hf.dtype
        kwargs["attention_mask"] = block_masks(hf, tensors["segment"], dtype)
    return kwargs


def packed_inputs(hf: Any, packed: Packed, mode: str, device: str) -> dict[str, Any]:
    """Forward kwargs of packed rows (:func:`packed_kwargs`), copied to ``device``."""
    tensors = {k: torch.from_numpy(v).to(device) for k, v in packed_arrays(packed, mode).items()}
    return packed_kwargs(hf, tensors, mode, max(packed.lengths))
