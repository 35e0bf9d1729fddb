"""A PLAID build's host memory, measured against its estimate (harness.tasks.retrieval.retrievers.plaid_memory).

    python benchmarks/plaid_memory.py --docs 10000 50000            # synthetic stores, ~85 tokens, dim 128
    python benchmarks/plaid_memory.py --docs 10000 --kmeans-niters 1  # k-means iterations do not change memory

Each size: a deterministic synthetic TokenStore (random unit vectors, fp16, dim 128 like ModernBERT-base's ColBERT
head, document lengths 40-130 tokens), then, in a child process, ``build_plaid`` (the run's own build, Stanford
backend) and one search of 64 queries; the parent samples the child's anonymous memory (``RssAnon`` of
/proc/<pid>/status, every 5 ms) and prints the peak over the child's own baseline (imports done, store opened) next to
the estimate, with the phase the estimate names. Figures are only as good as the machine is quiet.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.tasks.retrieval.retrievers.plaid_memory import plaid_memory
from harness.tasks.retrieval.retrievers.token_store import TokenStore
from harness.tasks.retrieval.settings import PlaidSettings

DIM = 128
CHILD = """
import json, sys, time
from pathlib import Path
import numpy as np
from harness.core.typed import from_conf
from harness.tasks.retrieval.retrievers.plaid_index import build_plaid, plaid_search
from harness.tasks.retrieval.retrievers.token_store import TokenStore
from harness.tasks.retrieval.settings import PlaidSettings
store = TokenStore(Path(sys.argv[1]))
settings = from_conf(PlaidSettings, "plaid/default", backend="stanford", kmeans_niters=int(sys.argv[3]))
rng = np.random.default_rng(1)
queries = [q / np.linalg.norm(q, axis=1, keepdims=True) for q in rng.standard_normal((64, 32, store.dim)).astype(np.float32)]
print("ready", flush=True)
sys.stdin.readline()
t0 = time.perf_counter()
index = build_plaid(store, settings, "stanford", Path(sys.argv[2]), "cpu", show_progress=False)
built = time.perf_counter() - t0
plaid_search(index, queries, 10)
print(json.dumps({"build_s": built, "search_s": time.perf_counter() - t0 - built}), flush=True)
"""


def synthetic_store(root: Path, n_docs: int, seed: int = 0) -> TokenStore:
    """``n_docs`` documents of 40-130 random unit fp16 vectors (mean ~85 tokens), written 1,000 at a time."""
    rng = np.random.default_rng(seed)

    def batches():
        for lo in range(0, n_docs, 1000):
            idx = np.arange(lo, min(lo + 1000, n_docs))
            docs = []
            for _ in idx:
                x = rng.standard_normal((int(rng.integers(40, 131)), DIM)).astype(np.float32)
                docs.append((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16))
            yield idx, docs

    return TokenStore.write(root, batches(), n_docs, {"synthetic": seed})


def anon_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("RssAnon:"))


def measure(store_root: Path, index_dir: Path, niters: int) -> dict[str, float]:
    """The child's build + search: peak anonymous memory over its baseline (bytes), and its timings."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(store_root), str(index_dir), str(niters)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "ready"
    base = peak = anon_kib(child.pid)
    child.stdin.write("go\n")
    child.stdin.flush()
    while child.poll() is None:
        try:
            peak = max(peak, anon_kib(child.pid))
        except (FileNotFoundError, StopIteration, ProcessLookupError):
            break
        time.sleep(0.005)
    out = json.loads(child.stdout.read().strip().splitlines()[-1])
    if child.wait() != 0:
        raise SystemExit("the build failed")
    return {"peak_bytes": (peak - base) * 1024.0, **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--kmeans-niters", type=int, default=4)
    args = ap.parse_args()
    from harness.core.typed import from_conf

    settings = from_conf(PlaidSettings, "plaid/default", backend="stanford")
    print(f"{'docs':>8s} {'tokens':>10s} {'estimate':>9s} {'phase':>8s} {'measured':>9s} {'ratio':>6s} {'build s':>8s}")
    for n in args.docs:
        with tempfile.TemporaryDirectory(prefix="plaid-mem-") as tmp:
            store = synthetic_store(Path(tmp) / "store", n)
            est = plaid_memory(len(store), store.n_tokens, store.dim, settings, "stanford")
            got = measure(store.root, Path(tmp) / "index", args.kmeans_niters)
            print(f"{n:8,d} {store.n_tokens:10,d} {est.gb:8.2f}G {est.phase:>8s} {got['peak_bytes'] / 2**30:8.2f}G "
                  f"{got['peak_bytes'] / est.peak:6.2f} {got['build_s']:8.0f}", flush=True)


if __name__ == "__main__":
    main()
