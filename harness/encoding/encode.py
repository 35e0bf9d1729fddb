"""The retrieval encoder: tokenise, group by a token budget (not ``SentenceTransformer.encode``'s fixed count of texts),
run padded or packed, pool with the model's own modules; on a GPU tokenisation runs ahead in worker threads."""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from harness.core.console import Progress
from harness.core.errors import HarnessError
from harness.encoding.packing import (
    pack_rows,
    packed_arrays,
    packed_batches,
    packed_kwargs,
    padded_arrays,
    token_budget_batches,
    unpack_index,
)
from harness.encoding.prefetch import (
    GpuBusy,
    HostSink,
    Prefetcher,
    default_workers,
    pinned,
    text_chunks,
    tokenizers,
)
from harness.encoding.settings import Batching
from harness.models import autocast_for

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

PACK_MODES = ("auto", "on", "off")
#: on CPU, the most tokens one worker's batch holds: a few thousand tokens of activations stay in the caches
#: (all-MiniLM-L6-v2, one thread: 2-4k tokens per batch ran 5-10% faster than 16k)
CPU_BATCH_TOKENS = 4096


def batch_budget(device: str, batch_tokens: int, workers: int | None = None) -> int:
    """Padded tokens per batch :func:`encode` uses: on CPU a share per worker, at most ``CPU_BATCH_TOKENS``."""
    n_workers = workers or cpu_workers(device)
    return max(1, min(batch_tokens // n_workers, CPU_BATCH_TOKENS) if device == "cpu" else batch_tokens)


def resolve_batch_tokens(model: SentenceTransformer, batching: Batching, device: str, mode: str | None,
                         precision: str) -> int:
    """``batching``'s token budget: as given; ``auto``: :func:`gpu_batch_tokens` on CUDA, else ``AUTO_BATCH_TOKENS``."""
    if batching.batch_tokens != "auto" or not device.startswith("cuda"):
        return batching.fixed_tokens
    pad_id, type_ids = _setup(model)
    return gpu_batch_tokens(model, device, mode, precision, forward=forward_batch, host_batch=host_batch,
                            pad_id=pad_id, type_ids=type_ids)


def tokenize(model: SentenceTransformer, texts: list[str], tokenizer: Any = None,
             max_length: int | None = None) -> list[list[int]]:
    """Token ids per text as the model's sentence-transformers module tokenises, unpadded."""
    module = model[0]
    stripped = [str(t).strip() for t in texts]
    if getattr(module, "do_lower_case", False):
        stripped = [t.lower() for t in stripped]
    limit = model.max_seq_length if max_length is None else max_length
    enc = (tokenizer or module.tokenizer)(stripped, truncation="longest_first", max_length=limit, padding=False)
    return enc["input_ids"]


#: texts tokenised per call of :func:`token_ids`, their ids kept as int32 arrays (4 bytes a token, not a list's 36)
TOKENIZE_STEP = 4096


def token_ids(model: SentenceTransformer, texts: list[str], max_length: int | None = None) -> list[np.ndarray]:
    """:func:`tokenize`'s ids of ``texts``, as int32 arrays, tokenised ``TOKENIZE_STEP`` texts at a time."""
    return [np.asarray(ids, dtype=np.int32) for a in range(0, len(texts), TOKENIZE_STEP)
            for ids in tokenize(model, texts[a : a + TOKENIZE_STEP], max_length=max_length)]


def pack_mode(model: SentenceTransformer, pack: str, device: str) -> str | None:
    """How batches are packed: ``"varlen"`` (one row), ``"mask"`` (block-diagonal) or None (padded)."""
    from harness.models.attention import PACKABLE_TYPES, VARLEN, can_pack
    if pack not in PACK_MODES:
        raise HarnessError(f"pack={pack!r}: use one of {', '.join(PACK_MODES)}")
    if pack == "off":
        return None
    hf = model[0].auto_model
    impl = getattr(hf.config, "_attn_implementation", None)
    kind = getattr(hf.config, "model_type", "")
    if not can_pack(kind):           # others are encoded padded
        if pack == "on":
            raise HarnessError(f"packed batches are implemented for {', '.join(PACKABLE_TYPES)} encoders, not {kind!r}; "
                               "use pack=off (or auto)")
        return None
    if impl == VARLEN or (impl == "flash_attention_2" and device.startswith("cuda")):
        return "varlen"
    if pack == "on":
        if impl not in ("sdpa", "eager"):
            raise HarnessError(f"packed batches need attn_implementation {VARLEN}, flash_attention_2 (GPU), sdpa "
                               f"or eager, not {impl!r}; use pack=off")
        return "mask"
    return None


# ------------------------------------------------------------------------------------------------ batch_tokens=auto
# On a GPU the token budget is measured: one forward of a calibration batch gives the peak memory per token; the
# budget is the largest power of two whose batches take at most MEMORY_SHARE of the free memory. Once per (model,
# device, layout, precision), kept on the model; records carry ``details.batch_tokens``.

#: tokens of the calibration forward (whole sequences of the model's longest length; at least one)
CALIBRATION_TOKENS = 8192
#: the share of the free memory batches may take (the rest: embeddings, pinned copies in flight, fragmentation)
MEMORY_SHARE = 0.5
#: the most tokens a batch holds: beyond this an encoder gains nothing per token, and the pipeline's first batch waits
MAX_BATCH_TOKENS = 1 << 18


def _cache(model: Any) -> dict[tuple, dict[str, Any]]:
    if getattr(model, "_harness_batch_tokens", None) is None:
        model._harness_batch_tokens = {}
    return model._harness_batch_tokens


def batch_tokens_facts(model: Any) -> dict[str, Any]:
    """What ``auto`` chose for ``model`` on a GPU, per setting (empty where it never ran there)."""
    return {entry["key"]: {k: v for k, v in entry.items() if k != "key"} for entry in _cache(model).values()}


def gpu_batch_tokens(model: Any, device: str, mode: str | None, precision: str, *, forward: Any,
                     host_batch: Any, pad_id: int, type_ids: bool) -> int:
    """The budget ``auto`` gives ``model`` on CUDA ``device`` for layout ``mode`` (:func:`pack_mode`)."""
    key = (device, mode, precision)
    cache = _cache(model)
    if key in cache:
        return int(cache[key]["batch_tokens"])
    length = max(1, int(model.max_seq_length or 512))
    n = max(1, CALIBRATION_TOKENS // length)
    seqs = [[pad_id + 1] * length for _ in range(n)]
    batch = host_batch(seqs, np.arange(n), mode, pad_id)
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    with torch.inference_mode(), autocast_for(model, precision, device):
        forward(model, batch, mode, device, type_ids)
    torch.cuda.synchronize(device)
    per_token = max(1.0, (torch.cuda.max_memory_allocated(device) - base) / (n * length))
    free, total = torch.cuda.mem_get_info(device)
    fits = MEMORY_SHARE * free / per_token
    budget = int(min(MAX_BATCH_TOKENS, 2 ** max(0, math.floor(math.log2(max(fits, 1.0))))))
    budget = max(budget, length)               # one longest text per batch at least
    cache[key] = {"key": f"{device}/{'packed' if mode else 'padded'}/{precision}", "batch_tokens": budget,
                  "bytes_per_token": round(per_token), "free_bytes": int(free), "total_bytes": int(total),
                  "calibration": f"{n} x {length} tokens", "memory_share": MEMORY_SHARE, "cap": MAX_BATCH_TOKENS}
    return budget


# ------------------------------------------------------------------------------------------------ one batch
@dataclass
class HostBatch:
    """One batch laid out on the host: text positions, tensors (pinned for a GPU), longest sequence, real tokens."""

    idx: np.ndarray
    tensors: dict[str, torch.Tensor]
    longest: int
    tokens: int


def host_batch(seqs: list[list[int]], idx: np.ndarray, mode: str | None, pad_id: int, pin: bool = False) -> HostBatch:
    """``seqs`` padded (``mode`` None) or packed, with the indices that gather a packed output back per text."""
    longest = max(len(s) for s in seqs)
    if mode is None:
        arrays = padded_arrays(seqs, longest, pad_id)
    else:
        packed = pack_rows(seqs, None if mode == "varlen" else longest, pad_id)
        index, mask = unpack_index(packed)
        arrays = packed_arrays(packed, mode) | {"index": index, "mask": mask}
    return HostBatch(idx, {k: pinned(v, pin) for k, v in arrays.items()}, longest, sum(len(s) for s in seqs))


def forward_batch(model: SentenceTransformer, batch: HostBatch, mode: str | None, device: str,
                  type_ids: bool) -> torch.Tensor:
    """Sentence embeddings of one batch on ``device`` (inputs copied asynchronously from pinned memory)."""
    t = {k: v.to(device, non_blocking=True) for k, v in batch.tensors.items()}
    if mode is None:
        features = {"input_ids": t["input_ids"], "attention_mask": t["attention_mask"]}
        if type_ids:
            features["token_type_ids"] = torch.zeros_like(features["input_ids"])
        return model(features)["sentence_embedding"]
    hf = model[0].auto_model
    kwargs = packed_kwargs(hf, t, mode, batch.longest)
    if type_ids:
        kwargs["token_type_ids"] = torch.zeros_like(kwargs["input_ids"])
    tokens = hf(**kwargs, return_dict=True).last_hidden_state
    tokens, mask = tokens.reshape(-1, tokens.shape[-1]), t["mask"]           # every row's tokens, flattened
    features = {"token_embeddings": tokens[t["index"]] * mask[..., None].to(tokens.dtype),  # [batch, longest, hidden]
                "attention_mask": mask.long()}
    for module in list(model)[1:]:      # the modules after the encoder (pooling, dense, normalise), as the model runs
        features = module(features)
    return features["sentence_embedding"]


def cpu_workers(device: str) -> int:
    """Batches encoded at once: on CPU one per intra-op thread (each runs single-threaded), else one."""
    return max(1, torch.get_num_threads()) if device == "cpu" else 1


# ------------------------------------------------------------------------------------------------ the encoder
def encode(model: SentenceTransformer, texts: list[str], *, batching: Batching, device: str, precision: str = "fp32",
           pack: str = "auto", workers: int | None = None, prefetch: bool | None = None, desc: str = "encoding",
           show_progress: bool = True, stats: dict[str, float] | None = None, keep_width: bool = False) -> np.ndarray:
    """Embeddings (float32, [len(texts), dim]) in input order; ``prefetch`` (default: off a CPU): the GPU pipeline."""
    mode = pack_mode(model, pack, device)
    if not texts:
        return np.zeros((0, model.get_sentence_embedding_dimension() or 0), dtype=np.float32)
    model.eval()
    budget = resolve_batch_tokens(model, batching, device, mode, precision)
    run = _encode_prefetched if (device != "cpu" if prefetch is None else prefetch) else _encode_in_threads
    stats = stats if stats is not None else {}
    stats["batch_tokens"] = budget
    return run(model, texts, mode=mode, device=device, precision=precision, batch_tokens=budget,
               max_batch_size=batching.max_batch_size, workers=workers, desc=desc, show_progress=show_progress,
               stats=stats, keep_width=keep_width)


def _setup(model: SentenceTransformer) -> tuple[int, bool]:
    tokenizer = model[0].tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return pad_id, "token_type_ids" in inspect.signature(model[0].auto_model.forward).parameters


def _encode_prefetched(model: SentenceTransformer, texts: list[str], *, mode: str | None, device: str,
                       precision: str, batch_tokens: int, max_batch_size: int, workers: int | None, desc: str,
                       show_progress: bool, stats: dict[str, float], keep_width: bool = False) -> np.ndarray:
    """The GPU pipeline: chunks tokenised and laid out by worker threads ahead of the device."""
    pad_id, type_ids = _setup(model)
    pin = device.startswith("cuda")
    group = token_budget_batches if mode is None else packed_batches
    pool = tokenizers(model[0])

    def prepare(start: int, stop: int) -> list[HostBatch]:
        with pool.borrow() as tokenizer:          # a tokenizer is not safe to share between threads
            ids = tokenize(model, texts[start:stop], tokenizer)
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        return [host_batch([ids[i] for i in b], b + start, mode, pad_id, pin)
                for b in group(lengths, batch_tokens, max_batch_size)]

    feed = Prefetcher(prepare, text_chunks(texts, batch_tokens), workers=workers or default_workers())
    sink = HostSink(len(texts), device, keep_width)
    busy = GpuBusy(device)
    t0, tokens, n_batches = time.perf_counter(), 0, 0
    with Progress(len(texts), desc, "texts", show=show_progress) as bar, torch.inference_mode(), \
            autocast_for(model, precision, device), closing(iter(feed)) as batches:
        for batch in batches:
            with busy.span():
                emb = forward_batch(model, batch, mode, device, type_ids)
            sink.put(batch.idx, emb)
            tokens, n_batches = tokens + batch.tokens, n_batches + 1
            bar.update(len(batch.idx))
        out = sink.result()
    wall = time.perf_counter() - t0
    stats.update(wall_s=wall, wait_s=feed.waited_s, first_wait_s=feed.first_wait_s, tokens=tokens, batches=n_batches)
    if busy.enabled:
        stats.update(gpu_busy_s=busy.seconds(), gpu_busy=busy.seconds() / wall)
    if show_progress:
        log.info("%s: %s tokens in %.1f s (%s tokens/s, %s); the %s waited for input %.0f%% of the time%s", desc,
                 f"{tokens:,}", wall, f"{tokens / wall:,.0f}", "packed" if mode else "padded", device,
                 100 * feed.waited_s / wall,
                 f", busy {100 * stats['gpu_busy']:.0f}% (CUDA events)" if busy.enabled else "")
    return out


def _encode_in_threads(model: SentenceTransformer, texts: list[str], *, mode: str | None, device: str,
                       precision: str, batch_tokens: int, max_batch_size: int, workers: int | None, desc: str,
                       show_progress: bool, stats: dict[str, float], keep_width: bool = False) -> np.ndarray:
    """The CPU encoder: tokenised at once, sorted by length, batches run by ``workers`` threads."""
    pad_id, type_ids = _setup(model)
    input_ids = token_ids(model, texts)
    lengths = np.fromiter((len(x) for x in input_ids), dtype=np.int64, count=len(input_ids))
    n_workers = workers or cpu_workers(device)
    batches = token_budget_batches(lengths, batch_budget(device, batch_tokens, n_workers), max_batch_size)

    def run_batch(idx: np.ndarray) -> torch.Tensor:
        batch = host_batch([input_ids[i] for i in idx], idx, mode, pad_id)
        return forward_batch(model, batch, mode, device, type_ids)

    sink = HostSink(len(texts), "cpu", keep_width)   # each batch's rows copied into the result as it finishes
    t0 = time.perf_counter()
    with Progress(int(lengths.sum()), desc, "tokens", show=show_progress, unit_scale=True) as bar:
        for idx, emb in _run_batches(batches, run_batch, n_workers, lambda: autocast_for(model, precision, device)):
            sink.put(idx, emb)
            bar.update(int(lengths[idx].sum()))
    stats.update(wall_s=time.perf_counter() - t0, wait_s=0.0, first_wait_s=0.0, tokens=int(lengths.sum()),
                 batches=len(batches))
    return sink.result()


def _run_batches(batches: list[np.ndarray], run_batch, n_workers: int,
                 cast: Any) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
    """(indices, embeddings) per batch as they finish, here or in ``n_workers`` single-threaded threads."""
    if n_workers == 1 or len(batches) == 1:
        with torch.inference_mode(), cast():
            for idx in batches:
                yield idx, run_batch(idx)
        return

    def run(idx: np.ndarray) -> tuple[np.ndarray, torch.Tensor]:
        with torch.inference_mode(), cast():
            return idx, run_batch(idx)

    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    pool = ThreadPoolExecutor(n_workers, thread_name_prefix="encode", initializer=torch.set_num_threads, initargs=(1,))
    try:
        for done in as_completed([pool.submit(run, idx) for idx in batches]):
            yield done.result()        # a worker's error is raised here, in the caller's thread
    finally:
        pool.shutdown(wait=True, cancel_futures=True)   # after an error the others stop after their current batch
        torch.set_num_threads(threads_before)
