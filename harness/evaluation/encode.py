"""The retrieval encoder: tokenise once, sort by length, fill batches up to a token budget, run padded or packed.

Why not only ``SentenceTransformer.encode``: it re-tokenises per fixed-size batch of texts, so a batch of
8,192-token documents is as many texts as a batch of titles; a token budget keeps short-text batches large and
long-text batches within memory, and progress is counted in tokens. The pooling and normalisation after the
encoder are the model's own sentence-transformers modules, so the embeddings are the same (a test checks it).

Packed batches (no padding at all): where the attention implementation takes variable-length sequences
(flash-attn varlen: ``cu_seq_lens``), a batch is one row of concatenated sequences with restarting position
ids. ``pack="on"`` also packs with sdpa/eager by bin-packing sequences into rows of the batch's longest length
with a block-diagonal mask (ModernBERT: one per attention type), which is how the CPU test checks the packed
path equals the padded one.
"""

from __future__ import annotations

import inspect
import logging
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from harness.console import Progress
from harness.errors import HarnessError
from harness.models import autocast

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

#: architectures whose forward takes restarting ``position_ids`` and a prepared 4-D mask (or flash-attn
#: ``cu_seq_lens`` kwargs) as given; others are encoded padded
PACKABLE = ("bert", "modernbert")
PACK_MODES = ("auto", "on", "off")
#: on CPU, the most tokens one worker's batch holds: a few thousand tokens of activations stay in the caches
#: (all-MiniLM-L6-v2, one thread: 2-4k tokens per batch ran 5-10% faster than 16k)
CPU_BATCH_TOKENS = 4096


def token_budget_batches(lengths: np.ndarray, batch_tokens: int, max_batch_size: int) -> list[np.ndarray]:
    """Indices grouped into batches, longest first, with ``len(batch) * longest <= batch_tokens``.

    A single text longer than the budget still gets a batch of its own.
    """
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    n = len(order)
    while start < n:
        longest = max(int(lengths[order[start]]), 1)
        size = max(1, min(max_batch_size, batch_tokens // longest))
        batches.append(order[start : start + size])
        start += size
    return batches


def batch_budget(device: str, batch_tokens: int, workers: int | None = None) -> int:
    """Padded tokens per batch :func:`encode` uses: on CPU each of ``workers`` threads gets a share, at most
    ``CPU_BATCH_TOKENS``."""
    n_workers = workers or cpu_workers(device)
    return max(1, min(batch_tokens // n_workers, CPU_BATCH_TOKENS) if device == "cpu" else batch_tokens)


def tokenize(model: SentenceTransformer, texts: list[str]) -> list[list[int]]:
    """Token ids per text, exactly as the model's sentence-transformers module tokenises (strip, lower-case
    when the module says so, truncation at ``max_seq_length``), without padding."""
    module = model[0]
    stripped = [str(t).strip() for t in texts]
    if getattr(module, "do_lower_case", False):
        stripped = [t.lower() for t in stripped]
    enc = module.tokenizer(stripped, truncation="longest_first", max_length=model.max_seq_length, padding=False)
    return enc["input_ids"]


def pack_mode(model: SentenceTransformer, pack: str, device: str) -> str | None:
    """How batches are packed: ``"varlen"`` (flash-attn, one row + ``cu_seq_lens``), ``"mask"`` (rows with a
    block-diagonal mask) or None (padded). ``auto`` packs only where it saves work: flash-attn varlen."""
    if pack not in PACK_MODES:
        raise HarnessError(f"pack={pack!r}: use one of {', '.join(PACK_MODES)}")
    if pack == "off":
        return None
    hf = model[0].auto_model
    impl = getattr(hf.config, "_attn_implementation", None)
    kind = getattr(hf.config, "model_type", "")
    if kind not in PACKABLE:
        if pack == "on":
            raise HarnessError(f"packed batches are implemented for {', '.join(PACKABLE)} encoders, not {kind!r}; "
                               "use pack=off (or auto)")
        return None
    if impl == "flash_attention_2" and device.startswith("cuda"):
        return "varlen"
    if pack == "on":
        if impl not in ("sdpa", "eager"):
            raise HarnessError(f"packed batches need attn_implementation flash_attention_2 (GPU), sdpa or eager, "
                               f"not {impl!r}; use pack=off")
        return "mask"
    return None


@dataclass
class Packed:
    """Sequences packed into rows: ``input_ids``/``position_ids`` [rows, width]; ``where[i]`` = (row, start) of
    sequence i; ``segment`` [rows, width] numbers the sequences of a row (-1 for the tail padding)."""

    input_ids: np.ndarray
    position_ids: np.ndarray
    segment: np.ndarray
    where: list[tuple[int, int]]
    lengths: list[int]


def pack_rows(seqs: list[list[int]], capacity: int | None, pad_id: int) -> Packed:
    """First-fit packing of ``seqs`` (longest first works best) into rows of ``capacity`` tokens; ``None``:
    one row holding everything (flash-attn varlen)."""
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


def block_masks(hf_model: Any, segment: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | dict[str, torch.Tensor]:
    """Additive 4-D masks [rows, 1, width, width]: a token sees the tokens of its own sequence (padding sees only
    itself, so no row of the softmax is empty). ModernBERT gets one mask per attention type (local layers also
    limit the distance to ``config.sliding_window``, as transformers' own sliding mask does)."""
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


def _pool(model: SentenceTransformer, features: dict[str, torch.Tensor]) -> torch.Tensor:
    """The modules after the encoder (pooling, dense, normalise) on token embeddings, as the model runs them."""
    for module in list(model)[1:]:
        features = module(features)
    return features["sentence_embedding"]


def padded_inputs(seqs: list, width: int, pad_id: int, device: str) -> dict[str, torch.Tensor]:
    """``input_ids`` + ``attention_mask`` of sequences right-padded to ``width``."""
    ids = np.full((len(seqs), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(seqs), width), dtype=np.int64)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return {"input_ids": torch.from_numpy(ids).to(device), "attention_mask": torch.from_numpy(mask).to(device)}


def packed_inputs(hf: Any, packed: Any, mode: str, device: str) -> dict[str, Any]:
    """Forward kwargs of packed rows: restarting position ids plus ``cu_seq_lens`` (``varlen``, flash-attn) or a
    block-diagonal mask per attention type (``mask``, sdpa/eager)."""
    kwargs: dict[str, Any] = {"input_ids": torch.from_numpy(packed.input_ids).to(device),
                              "position_ids": torch.from_numpy(packed.position_ids).to(device)}
    if mode == "varlen":
        cu = torch.tensor(np.concatenate([[0], np.cumsum(packed.lengths)]), dtype=torch.int32, device=device)
        longest = max(packed.lengths)
        kwargs |= {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": longest, "max_length_k": longest}
    else:
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else hf.dtype
        kwargs["attention_mask"] = block_masks(hf, torch.from_numpy(packed.segment).to(device), dtype)
    return kwargs


def _forward_padded(model: SentenceTransformer, seqs: list[list[int]], pad_id: int, device: str,
                    type_ids: bool) -> torch.Tensor:
    features = padded_inputs(seqs, max(len(s) for s in seqs), pad_id, device)
    if type_ids:
        features["token_type_ids"] = torch.zeros_like(features["input_ids"])
    return model(features)["sentence_embedding"]


def _forward_packed(model: SentenceTransformer, seqs: list[list[int]], pad_id: int, device: str, mode: str,
                    type_ids: bool) -> torch.Tensor:
    hf = model[0].auto_model
    packed = pack_rows(seqs, None if mode == "varlen" else max(len(s) for s in seqs), pad_id)
    kwargs = packed_inputs(hf, packed, mode, device)
    if type_ids:
        kwargs["token_type_ids"] = torch.zeros_like(kwargs["input_ids"])
    tokens = hf(**kwargs, return_dict=True).last_hidden_state          # [rows, width, hidden]
    # back to [batch, longest, hidden] + mask, for the model's own pooling modules
    longest = max(packed.lengths)
    rows = torch.tensor([r for r, _ in packed.where], device=device)
    starts = torch.tensor([s for _, s in packed.where], device=device)
    lens = torch.tensor(packed.lengths, device=device)
    offs = torch.arange(longest, device=device)
    mask = offs[None, :] < lens[:, None]
    cols = (starts[:, None] + offs[None, :]).clamp(max=tokens.shape[1] - 1)
    token_embeddings = tokens[rows[:, None], cols] * mask[..., None].to(tokens.dtype)
    return _pool(model, {"token_embeddings": token_embeddings, "attention_mask": mask.long()})


def cpu_workers(device: str) -> int:
    """Batches encoded at once: on CPU one per intra-op thread (each runs single-threaded), else one."""
    return max(1, torch.get_num_threads()) if device == "cpu" else 1


def encode(
    model: SentenceTransformer,
    texts: list[str],
    *,
    device: str,
    precision: str = "fp32",
    batch_tokens: int = 16384,
    max_batch_size: int = 512,
    pack: str = "auto",
    workers: int | None = None,
    desc: str = "encoding",
    show_progress: bool = True,
) -> np.ndarray:
    """Embeddings (float32, shape [len(texts), dim]) in input order. Progress is shown in tokens.

    ``batch_tokens`` bounds the padded tokens in flight. On CPU, ``workers`` threads (default: torch's intra-op
    thread count) each encode their own batches single-threaded, with at most ``CPU_BATCH_TOKENS`` tokens per
    batch: whole batches in parallel instead of every operator split across threads with a barrier after it.
    """
    mode = pack_mode(model, pack, device)
    if not texts:
        return np.zeros((0, model.get_sentence_embedding_dimension() or 0), dtype=np.float32)
    input_ids = tokenize(model, texts)
    tokenizer = model[0].tokenizer
    type_ids = "token_type_ids" in inspect.signature(model[0].auto_model.forward).parameters
    lengths = np.fromiter((len(x) for x in input_ids), dtype=np.int64, count=len(input_ids))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    n_workers = workers or cpu_workers(device)
    batches = token_budget_batches(lengths, batch_budget(device, batch_tokens, n_workers), max_batch_size)

    def run_batch(idx: np.ndarray) -> np.ndarray:
        seqs = [input_ids[i] for i in idx]
        if mode is None:
            emb = _forward_padded(model, seqs, pad_id, device, type_ids)
        else:
            emb = _forward_packed(model, seqs, pad_id, device, mode, type_ids)
        return emb.float().cpu().numpy()

    model.eval()
    out: np.ndarray | None = None
    with Progress(int(lengths.sum()), desc, "tokens", show=show_progress, unit_scale=True) as bar:
        for idx, emb in _run_batches(batches, run_batch, n_workers, precision, device):
            if out is None:
                out = np.empty((len(texts), emb.shape[1]), dtype=np.float32)
            out[idx] = emb
            bar.update(int(lengths[idx].sum()))
    assert out is not None
    return out


def _run_batches(batches: list[np.ndarray], run_batch, n_workers: int, precision: str,
                 device: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(indices, embeddings) per batch, as they finish: in this thread, or in ``n_workers`` threads that each
    take the next batch from a shared queue (longest first) and run it with one intra-op thread. inference
    mode and autocast are per thread, so each worker enters them itself."""
    if n_workers == 1 or len(batches) == 1:
        with torch.inference_mode(), autocast(precision, device):
            for idx in batches:
                yield idx, run_batch(idx)
        return
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for i, idx in enumerate(batches):
        todo.put((i, idx))
    done: queue.SimpleQueue = queue.SimpleQueue()

    def worker() -> None:
        torch.set_num_threads(1)
        try:
            with torch.inference_mode(), autocast(precision, device):
                while True:
                    try:
                        _, idx = todo.get_nowait()
                    except queue.Empty:
                        return
                    done.put((idx, run_batch(idx), None))
        except BaseException as exc:   # handed to the caller's thread, raised there
            done.put((None, None, exc))

    threads_before = torch.get_num_threads()
    threads = [threading.Thread(target=worker, daemon=True, name=f"encode-{k}") for k in range(n_workers)]
    torch.set_num_threads(1)
    try:
        for t in threads:
            t.start()
        for _ in range(len(batches)):
            idx, emb, exc = done.get()
            if exc is not None:
                while not todo.empty():   # stop the other workers after their current batch
                    todo.get_nowait()
                raise exc
            yield idx, emb
    finally:
        for t in threads:
            t.join()
        torch.set_num_threads(threads_before)
