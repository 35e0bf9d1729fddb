"""BEIR at the paper's sizes: what `task=beir` and `task=colbert` need in memory and on disk as the corpus grows.

    python benchmarks/scale.py                                  # 10k, 100k and 1M documents, every run
    python benchmarks/scale.py --sizes 10000,50000 --runs colbert-plaid
    python benchmarks/scale.py --project-only --fit results.json  # the projection from saved figures

Builds synthetic BEIR folders (deterministic: documents of 40-120 words of the tiny test model's vocabulary, about
85 tokens each; one judged document per query; never committed) and runs the real CLI on each with the tiny test
ModernBERT (CPU, fp32), sampling the process' anonymous memory (``RssAnon``: what a node must hold; file pages of
the memory-mapped caches are not counted) every 20 ms. Runs: ``dpr-cold`` (encode into the embedding cache, then
search it), ``dpr-warm`` (the same run again: the cache hit, search only), ``colbert-exact`` (token store + exact
MaxSim), ``colbert-plaid`` (token store + a PLAID index) and ``plaid-refusal`` (task.plaid_max_memory_gb below the
estimate: the one-line refusal, before encoding). For each: wall time, peak anonymous memory, disk written, the
record's stage timings. Then the per-document costs fitted over the sizes, and the projection to each of the 15
BEIR sets at ModernBERT-base's geometry (:func:`project`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "fixtures" / "tiny-modernbert"
MODEL = ["model=all-minilm-l6-v2", f"model.path={TINY}", "model.name=tiny-scale", "model.normalize=false",
         "model.max_length=128", "precision=fp32", "task.train=false"]
RUNS = ("dpr-cold", "dpr-warm", "colbert-exact", "colbert-plaid", "plaid-refusal")
QUERIES = 200


# ------------------------------------------------------------------------------------------------ the data
def vocabulary() -> list[str]:
    """Whole-word tokens of the tiny model's vocabulary (each one token), sorted: the same words on every machine."""
    vocab = json.loads((TINY / "tokenizer.json").read_text())["model"]["vocab"]
    return sorted(w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2)


def make_beir(root: Path, n_docs: int, seed: int = 0) -> Path:
    """``root/synth-<n>/`` in BEIR layout (kept between runs: a ``.done`` marker says it is whole)."""
    folder = root / f"synth-{n_docs}"
    if (folder / ".done").exists():
        return folder
    words = np.array(vocabulary())
    rng = np.random.default_rng(seed)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    judged = rng.choice(n_docs, QUERIES, replace=False)
    query_of = {int(d): q for q, d in enumerate(judged)}
    queries = {}
    with open(folder / "corpus.jsonl", "w") as fh:
        for start in range(0, n_docs, 10_000):
            n = min(10_000, n_docs - start)
            lengths = rng.integers(40, 121, n)
            picks = rng.integers(0, len(words), int(lengths.sum()))
            at = 0
            for i, length in enumerate(lengths.tolist()):
                text = " ".join(words[picks[at : at + length]])
                at += length
                fh.write(json.dumps({"_id": f"d{start + i}", "title": "", "text": text}) + "\n")
                if start + i in query_of:
                    queries[query_of[start + i]] = " ".join(text.split()[:8])
    with open(folder / "queries.jsonl", "w") as fh:
        fh.writelines(json.dumps({"_id": f"q{q}", "text": queries[q]}) + "\n" for q in range(QUERIES))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{q}\td{d}\t1\n" for q, d in enumerate(judged.tolist())))
    (folder / ".done").touch()
    return folder


# ------------------------------------------------------------------------------------------------ one run
def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def anon_bytes(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def run_cli(args: list[str], work: Path) -> dict[str, Any]:
    """The CLI with ``args``: wall time, exit code, peak anonymous memory of its process tree, its last lines."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args, "log_level=INFO"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak, samples = [0], []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            now = anon_bytes(tree(proc.pid))
            peak[0] = max(peak[0], now)
            samples.append((time.perf_counter() - t0, now))

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    out, _ = proc.communicate()
    done.set()
    watcher.join()
    return {"rc": proc.returncode, "wall_s": time.perf_counter() - t0, "peak_anon": peak[0],
            "tail": out.strip().splitlines()[-3:], "log": out}


def record(results: Path) -> dict[str, Any]:
    """The (one) record of a run: its timings and metric."""
    found = sorted(results.rglob("synth-*.json"))
    if not found:
        return {}
    rec = json.loads(found[-1].read_text())
    return {"timings": rec.get("timings", {}), "ndcg_at_10": rec.get("metrics", {}).get("ndcg_at_10"),
            "details": {k: rec.get("details", {}).get(k) for k in ("n_doc_tokens", "index_memory_gb_estimate")}}


def args_for(run: str, data: Path, name: str, work: Path, cache: Path) -> list[str]:
    common = [*MODEL, f"task.data_dir={data.parent}", f"task.datasets=[{name}]", f"+task.catalog.{name}={{split: test}}",
              f"paths.results={work}/results", f"paths.outputs={work}/outputs", f"paths.cache={cache}"]
    if run.startswith("dpr"):
        return ["task=beir", *common]
    index = "exact" if run == "colbert-exact" else "plaid"
    extra = ["task.plaid_max_memory_gb=0.001"] if run == "plaid-refusal" else []
    return ["task=colbert", f"task.index={index}", *common, *extra]


def measure(run: str, data: Path, n_docs: int, scratch: Path) -> dict[str, Any]:
    name = data.name
    work = scratch / f"{run}-{n_docs}"
    cache = scratch / f"cache-{n_docs}-{run.split('-')[0]}"
    shutil.rmtree(work, ignore_errors=True)
    if run in ("dpr-cold", "colbert-exact", "colbert-plaid", "plaid-refusal"):
        shutil.rmtree(cache, ignore_errors=True)   # cold: nothing cached (dpr-warm reads dpr-cold's cache)
    before = disk_bytes(cache)
    out = run_cli(args_for(run, data, name, work, cache), work)
    out |= {"run": run, "n_docs": n_docs, "disk": disk_bytes(cache) - before, **record(work / "results")}
    if run == "plaid-refusal":
        out["refused"] = any("plaid_max_memory_gb" in line for line in out["log"].splitlines())
        out["encoded"] = "corpus:" in out["log"] and "documents in" in out["log"]
    out.pop("log")
    return out


# ------------------------------------------------------------------------------------------------ fit and project
def fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    """(fixed bytes, bytes per document) of peak memory over (documents, peak) points, least squares."""
    n, y = np.array([p[0] for p in points], float), np.array([p[1] for p in points], float)
    if len(points) < 2:
        return float(y[0]), 0.0
    slope, intercept = np.polyfit(n, y, 1)
    return float(intercept), float(slope)


def show(rows: list[dict[str, Any]]) -> None:
    print(f"{'run':15} {'docs':>9} {'rc':>3} {'wall s':>8} {'peak anon MiB':>14} {'disk MiB':>9}  stages (s)")
    for r in rows:
        stages = ", ".join(f"{k.removesuffix('_s')} {v:.1f}" for k, v in (r.get("timings") or {}).items()
                           if isinstance(v, float) and v >= 0.05)
        print(f"{r['run']:15} {r['n_docs']:>9,} {r['rc']:>3} {r['wall_s']:>8.1f} {r['peak_anon'] / 2**20:>14,.0f} "
              f"{r['disk'] / 2**20:>9,.0f}  {stages}")
        if r["rc"] and r["run"] != "plaid-refusal":
            print("   failed:", *r["tail"], sep="\n   ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("--scratch", default="/tmp/harness-scale", help="synthetic data and caches (large: ~5 GB at 1M)")
    ap.add_argument("--out", default=None, help="write every figure as JSON here")
    ap.add_argument("--fit", default=None, help="with --project-only: JSON files written by --out, comma-separated")
    ap.add_argument("--project-only", action="store_true")
    args = ap.parse_args()
    scratch = Path(args.scratch)
    if args.project_only:
        rows = [r for f in args.fit.split(",") for r in json.loads(Path(f).read_text())["rows"]]
    else:
        rows = []
        for n in (int(x) for x in args.sizes.split(",")):
            data = make_beir(scratch / "data", n)
            for run in args.runs.split(","):
                rows.append(measure(run, data, n, scratch))
                show(rows[-1:])
                if args.out:
                    Path(args.out).write_text(json.dumps({"rows": rows}, indent=2))
    print(f"\n{platform.node()}: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; tiny ModernBERT, "
          "CPU, fp32")
    show(rows)
    from scale_projection import report

    report(rows)


if __name__ == "__main__":
    main()
