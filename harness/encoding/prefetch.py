"""An encoder that never waits: inputs prepared ahead of the device in worker threads (:class:`Prefetcher`), outputs
copied back to pinned memory without stopping it (:class:`HostSink`), a tokenizer copy per thread (0.1-0.3 s each)."""

from __future__ import annotations

import contextlib
import copy
import os
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from typing import Any

import numpy as np
import torch

from harness.encoding.packing import chunk_bounds

#: characters per token assumed when sizing chunks before tokenising (English word pieces: about 4)
CHARS_PER_TOKEN = 4
#: a chunk holds about one batch's worth of text at first (the device starts at once), doubling up to this many
GROWTH = 4
#: output copies in flight before the sink waits for the oldest
PENDING_COPIES = 8


def text_chunks(texts: list[str], batch_tokens: int) -> list[tuple[int, int]]:
    """Chunks of ``texts`` for the preparing threads: about one batch of characters first, up to ``GROWTH``."""
    size = batch_tokens * CHARS_PER_TOKEN
    return chunk_bounds(np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)), size, GROWTH * size)


#: preparing threads: enough to keep a GPU fed (tokenizers release the GIL while they work), few enough that they
#: do not compete for the GIL with the thread that launches the kernels
MIN_WORKERS, MAX_WORKERS = 2, 4


def default_workers() -> int:
    """Preparing threads: the cores but one (the consumer's), within [MIN_WORKERS, MAX_WORKERS]."""
    return min(MAX_WORKERS, max(MIN_WORKERS, (os.cpu_count() or 2) - 1))


class TokenizerPool:
    """Copies of one tokenizer, each used by one thread at a time (:meth:`borrow`), reused by later calls."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.free: queue.SimpleQueue = queue.SimpleQueue()

    @contextlib.contextmanager
    def borrow(self) -> Iterator[Any]:
        try:
            tokenizer = self.free.get_nowait()
        except queue.Empty:
            tokenizer = copy.deepcopy(self.tokenizer)
        try:
            yield tokenizer
        finally:
            self.free.put(tokenizer)


_POOLS: weakref.WeakKeyDictionary[Any, TokenizerPool] = weakref.WeakKeyDictionary()
_POOLS_LOCK = threading.Lock()


def tokenizers(module: Any) -> TokenizerPool:
    """The pool of copies of ``module.tokenizer``, one per module for its life (new if its tokenizer was replaced)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(module)
        if pool is None or pool.tokenizer is not module.tokenizer:
            pool = _POOLS[module] = TokenizerPool(module.tokenizer)
        return pool


class GpuBusy:
    """The time a CUDA device spent inside :meth:`span` s (CUDA events), read once at the end."""

    def __init__(self, device: str) -> None:
        self.enabled = device.startswith("cuda")
        self.events: list[tuple[Any, Any]] = []

    @contextlib.contextmanager
    def span(self) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        yield
        end.record()
        self.events.append((start, end))

    def seconds(self) -> float:
        if not self.events:
            return 0.0
        self.events[-1][1].synchronize()
        return sum(a.elapsed_time(b) for a, b in self.events) / 1e3


class Prefetcher:
    """Every chunk's items in order, prepared ahead by ``workers`` threads; ``waited_s``: time blocked."""

    def __init__(self, prepare: Callable[[int, int], list[Any]], chunks: list[tuple[int, int]], *,
                 workers: int, ahead: int | None = None) -> None:
        self.prepare, self.chunks, self.workers = prepare, chunks, max(1, workers)
        self.ahead = max(1, ahead or 2 * self.workers)
        self.waited_s = self.first_wait_s = 0.0

    def __iter__(self) -> Iterator[Any]:
        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="encode-prefetch")
        todo, counted = iter(self.chunks), False     # counted: the first chunk's wait is in first_wait_s
        try:
            pending: deque[Future] = deque(pool.submit(self.prepare, *bounds) for bounds in islice(todo, self.ahead))
            while pending:
                future = pending.popleft()
                if (bounds := next(todo, None)) is not None:
                    pending.append(pool.submit(self.prepare, *bounds))
                t0 = time.perf_counter()
                items = future.result()
                waited = time.perf_counter() - t0
                self.first_wait_s = self.first_wait_s if counted else waited
                self.waited_s, counted = self.waited_s + waited, True
                yield from items
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def pinned(array: np.ndarray, pin: bool) -> torch.Tensor:
    """A host tensor of ``array``, page-locked when ``pin`` (copies to the device can then be asynchronous)."""
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    return tensor.pin_memory() if pin else tensor


#: numpy's dtype for an embedding of each torch dtype when its width is kept: numpy has no bfloat16, so bf16 is kept
#: as its 16 bits (uint16; :func:`harness.tasks.retrieval.retrievers.search.as_float32` reads them back exactly)
KEPT_DTYPES = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: np.uint16}


def host_array(tensor: torch.Tensor) -> np.ndarray:
    """A host tensor as numpy at its own width (bf16 as its bits, uint16)."""
    return tensor.view(torch.int16).numpy().view(np.uint16) if tensor.dtype == torch.bfloat16 else tensor.numpy()


class HostSink:
    """Rows of an [n, dim] result, filled from device tensors without stopping the device."""

    def __init__(self, n: int, device: str, keep_width: bool = False) -> None:
        self.n, self.cuda, self.keep_width = n, device.startswith("cuda"), keep_width
        self.out: np.ndarray | None = None
        self.pending: deque[tuple[np.ndarray, torch.Tensor, Any]] = deque()

    def put(self, idx: np.ndarray, emb: torch.Tensor) -> None:
        if not self.keep_width or emb.dtype not in KEPT_DTYPES:
            emb = emb.float()
        if self.out is None:
            self.out = np.empty((self.n, emb.shape[1]), dtype=KEPT_DTYPES[emb.dtype])
        if not self.cuda:
            self.out[idx] = host_array(emb.cpu())
            return
        host = torch.empty(emb.shape, dtype=emb.dtype, pin_memory=True)
        host.copy_(emb, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        self.pending.append((idx, host, done))
        self._drain(keep=PENDING_COPIES)

    def _drain(self, keep: int) -> None:
        while self.pending and (len(self.pending) > keep or self.pending[0][2].query()):
            idx, host, done = self.pending.popleft()
            done.synchronize()
            self.out[idx] = host_array(host)                              # type: ignore[index]

    def result(self) -> np.ndarray:
        self._drain(keep=0)
        assert self.out is not None
        return self.out
