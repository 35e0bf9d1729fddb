"""The GPU check's figures against issue 39's "done when": python benchmarks/gpu/summary.py <OUT> <records folder>.

Reads what check.sh wrote (efficiency.json, retrieval.json, gradients.json from benchmarks/gpu_unpadded.py) and the
records of its harness runs; prints one line per criterion with the figure, its threshold and PASS/FAIL (MISSING
when a step did not produce it). Only the standard library: it runs wherever the check ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def records(folder: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted(folder.glob("**/*.json")):
        rec = load(path)
        if "metrics" in rec and "task" in rec:
            found.append({**rec, "_path": str(path)})
    return found


def line(what: str, value: float | None, threshold: float, fmt: str = "{:,.3f}") -> str:
    if value is None:
        return f"MISSING  {what}"
    verdict = "PASS" if value >= threshold else "FAIL"
    return f"{verdict:8s} {what}: {fmt.format(value)} (needs >= {fmt.format(threshold)})"


def main() -> None:
    out, recs_dir = Path(sys.argv[1]), Path(sys.argv[2])
    eff, ret, grad = load(out / "efficiency.json"), load(out / "retrieval.json"), load(out / "gradients.json")
    sets = eff.get("sets", {})

    def tps(name: str, precision: str = "fp32") -> float | None:
        return sets.get(f"{name}/{precision}", {}).get("harness")

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a and b else None

    print(f"device: {eff.get('device') or ret.get('device') or '?'}; harness attention: {eff.get('attn', '?')}")
    lines = [line("short variable / short fixed (fp32)", ratio(tps("short_variable"), tps("short_fixed")), 0.9),
             line("long variable / long fixed (fp32)", ratio(tps("long_variable"), tps("long_fixed")), 0.9)]
    for name in ("short_fixed", "short_variable", "long_fixed", "long_variable"):
        paper = sets.get(f"{name}/fp32", {}).get("paper_4090")
        lines.append(line(f"{name} fp32 tokens/s vs the paper's RTX 4090 ({paper or 0:,.0f})", tps(name), paper or 0,
                          "{:,.0f}"))
    lines.append(line("short_fixed bf16 tokens/s", tps("short_fixed", "bf16"), 1.2e6, "{:,.0f}"))
    for precision, cos in eff.get("parity", {}).items():
        lines.append(line(f"packed vs padded, smallest per-text cosine ({precision})", cos, 0.999, "{:.6f}"))
    lines += [line("SciFact encode, harness vs best sentence-transformers (bf16)", ret.get("speedup_vs_best_st"), 3.0,
                   "{:.2f}x"),
              line("GPU busy during the harness encode (profiler)", ret.get("harness_gpu_busy"), 0.9, "{:.1%}"),
              line("SciFact embeddings vs the padded path, smallest cosine", ret.get("parity_min_cosine_vs_padded_sdpa"),
                   0.999, "{:.6f}")]
    if "harness_wait" in ret:
        lines.append(f"info     the harness encoder waited for input {ret['harness_wait']:.1%} of its wall time")
    for precision, g in grad.items():
        if isinstance(g, dict):
            lines.append(line(f"gradients through {g['attn']} vs padded sdpa, cosine ({precision})",
                              g["gradient_cosine"], 0.99, "{:.6f}"))
    recs = records(recs_dir)
    ndcg = {r["_path"].split("/scifact_")[1].split("/")[0]: r["metrics"].get("ndcg_at_10")
            for r in recs if "/scifact_" in r["_path"] and r.get("dataset") == "scifact"}
    if "auto" in ndcg and "sdpa" in ndcg and None not in ndcg.values():
        diff = abs(ndcg["auto"] - ndcg["sdpa"])
        lines.append(f"{'PASS' if diff <= 1e-4 else 'FAIL':8s} SciFact nDCG@10 unpadded {ndcg['auto']:.6f} vs padded "
                     f"{ndcg['sdpa']:.6f}: |diff| {diff:.2e} (needs <= 1e-4)")
    else:
        lines.append(f"MISSING  SciFact nDCG@10 of both paths (found {ndcg})")
    for r in recs:
        if r.get("task") == "efficiency":
            d = r.get("details", {})
            lines.append(f"record   efficiency/{r.get('dataset')}: {r['metrics'].get('tokens_per_s', 0):,.0f} tokens/s; "
                         f"{d.get('attn_implementation')} ({d.get('attn_requested')}), kernel {d.get('attention_kernel')}, "
                         f"unpadded {d.get('unpadded')}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
