"""What the harness' own task records say after running on the GPU, read by the step that wrote them (task=efficiency
in step ``task_efficiency``, task=beir on SciFact in ``task_beir``, so a cut in a later step keeps them): the kernel
counted and the dtype its inputs were in, the attention chosen and any fallback, fp32 matmul precision, bf16
weights or autocast, the batch budget ``auto`` chose; each written as a figure (benchmarks/gpu/figures.py).

    python benchmarks/gpu/records.py <records folder> <OUT> <device> <step>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # benchmarks/ (the package ``gpu``)


def kernel_on(kernel: str | None, dtype: str | None) -> str:
    """A record's kernel with the dtype its inputs were in, as the check's other figures name them."""
    return f"{kernel or ''} on {dtype}" if dtype else kernel or ""


def main() -> None:
    from gpu.figures import Figures

    folder, out, device, step = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    figures = Figures(out, step, device)
    found = 0
    for path in sorted(folder.glob("**/*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if "metrics" not in rec or "task" not in rec:
            continue
        found += 1
        where = f"task={rec['task']} {rec.get('dataset')} ({rec.get('status')})"
        if rec["task"] == "efficiency":
            d = rec.get("details", {})
            figures.add(f"{where}: tokens/s, weights {d.get('dtype')}", rec["metrics"].get("tokens_per_s"), "tokens/s",
                        kernel=kernel_on(d.get("attention_kernel"), d.get("attention_dtype")),
                        note=f"{d.get('attn_implementation')} ({d.get('attn_requested')}), unpadded {d.get('unpadded')}, "
                             f"{d.get('runs')}, float32 matmuls {d.get('float32_matmul_precision')}, TF32 "
                             f"{d.get('tf32')}, calls {d.get('attention_calls')}")
        else:
            attention = rec.get("model", {}).get("attention", {})
            chosen = rec.get("details", {}).get("batch_tokens", {})
            figures.add(f"{where}: nDCG@10", rec["metrics"].get("ndcg_at_10"), "",
                        kernel=kernel_on(attention.get("kernel"), attention.get("dtype")),
                        note=f"attention {attention.get('implementation')} ({attention.get('requested')})"
                             f"{', fallback: ' + attention['fallback'] if attention.get('fallback') else ''}; "
                             f"inference {rec.get('model', {}).get('inference')}; batch_tokens auto "
                             f"{ {k: v.get('batch_tokens') for k, v in chosen.items()} }; encode "
                             f"{rec.get('timings', {}).get('encode_corpus_s', 0):.1f} s")
    figures.add("task records read", found, "records", target=(">=", 1))


if __name__ == "__main__":
    main()
