"""Peak memory of encoding long documents: what fits in a 24 GiB CPU and an 80 GiB GPU at 8,192 tokens.

    python benchmarks/long_docs_memory.py                 # tiny ModernBERT + base/large geometry, CPU, fp32 + bf16
    python benchmarks/long_docs_memory.py --models tiny --lengths 512,2048,8192 --batches 1,2,4 --attn sdpa,eager

Each point runs in a fresh subprocess that loads the model, then encodes one batch of ``batch`` sequences of
``length`` tokens as harness.encoding.encode does (inference mode, autocast); the figure is the growth of peak
RSS (VmHWM) over the loaded model. ``tiny`` is the committed test ModernBERT given 8,192 positions (RoPE: same
weights); ``base``/``large`` are random-init ModernBERTs with ModernBERT-base/-large's width, heads and MLP size but
2 layers (one global, one local attention): at inference one layer's activations are live at a time, so the peak
over the weights does not grow with depth (the tiny model's 4 layers check this). From two batch sizes the script
separates a per-batch part (masks) from a per-document part and prints how many 8,192-token documents a batch can
hold. GPU figures are not measured here: they reuse the CPU activation sizes and say so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "fixtures" / "tiny-modernbert"
#: name -> (hidden, heads, intermediate, layers) of random-init stand-ins with the paper models' geometry
GEOMETRY = {"base": (768, 12, 1152, 2), "large": (1024, 16, 2624, 2)}
WEIGHTS_GIB = {"tiny": 0.001, "base": 149e6 * 4 / 2**30, "large": 395e6 * 4 / 2**30}   # fp32 weights of the real models


def long_model(out: Path, name: str, positions: int = 8192) -> Path:
    """The committed tiny ModernBERT with ``positions`` positions, or a random-init stand-in of ``name``'s
    geometry (the tiny tokenizer; vocabulary size does not change activation memory)."""
    shutil.copytree(TINY, out, dirs_exist_ok=True)
    cfg = json.loads((out / "config.json").read_text())
    cfg["max_position_embeddings"] = positions
    if name != "tiny":
        import torch
        from transformers import ModernBertConfig, ModernBertModel

        hidden, heads, inter, layers = GEOMETRY[name]
        cfg |= {"hidden_size": hidden, "num_attention_heads": heads, "intermediate_size": inter,
                "num_hidden_layers": layers, "local_attention": 128, "global_attn_every_n_layers": 2}
        cfg.pop("layer_types", None)
        torch.manual_seed(0)
        model = ModernBertModel(ModernBertConfig(**{k: v for k, v in cfg.items() if k != "architectures"}))
        model.save_pretrained(out)
    else:
        (out / "config.json").write_text(json.dumps(cfg, indent=2))
    tok = json.loads((out / "tokenizer_config.json").read_text())
    tok["model_max_length"] = positions
    (out / "tokenizer_config.json").write_text(json.dumps(tok, indent=2))
    return out


def child(model_dir: str, length: int, batch: int, precision: str, attn: str) -> dict:
    """One measurement, in this (fresh) process."""
    import time

    import torch

    from harness.models import ModelSpec, autocast, load_sentence_transformer

    model, _ = load_sentence_transformer(ModelSpec.based_on("bert-base", name="m", path=model_dir, max_length=length,
                                                   attn_implementation=attn))
    model.eval()
    ids = torch.randint(5, 2000, (batch, length))
    feats = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    with torch.inference_mode(), autocast(precision, "cpu"):   # warm-up on a short batch (allocator, kernels)
        model({k: v[:1, :16] for k, v in feats.items()})
    Path("/proc/self/clear_refs").write_text("5")             # reset VmHWM to the current RSS
    base = _vm("VmRSS")
    t0 = time.perf_counter()
    with torch.inference_mode(), autocast(precision, "cpu"):
        model(feats)
    secs = time.perf_counter() - t0
    return {"length": length, "batch": batch, "precision": precision, "attn": attn,
            "peak_mib": (_vm("VmHWM") - base) / 1024, "tokens_per_s": batch * length / secs}


def _vm(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])   # kB
    raise RuntimeError(key)


def measure(model_dir: Path, length: int, batch: int, precision: str, attn: str) -> dict | None:
    p = subprocess.run([sys.executable, __file__, "--child", str(model_dir), str(length), str(batch), precision, attn],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    if p.returncode != 0:
        print(p.stderr[-2000:])
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="tiny,base,large")
    ap.add_argument("--lengths", default="8192")
    ap.add_argument("--batches", default="1,4,8")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        d, length, batch, precision, attn = args.child
        print(json.dumps(child(d, int(length), int(batch), precision, attn)))
        return
    import torch

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; peak RSS growth over the loaded model (VmHWM)")
    batches = sorted(map(int, args.batches.split(",")))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model_dir = long_model(Path(tmp) / name, name)
            for attn in args.attn.split(","):
                for precision in args.precisions.split(","):
                    for length in map(int, args.lengths.split(",")):
                        rows = [r for b in batches if (r := measure(model_dir, length, b, precision, attn))]
                        for r in rows:
                            print(f"  {name:5s} {attn:5s} {precision} length {length:5d} x batch {r['batch']}: peak "
                                  f"+{r['peak_mib']:8.1f} MiB  {r['tokens_per_s']:8.0f} tokens/s", flush=True)
                        if len(rows) >= 2 and length == 8192:
                            report(name, precision, attn, rows[-2], rows[-1])


def report(name: str, precision: str, attn: str, lo: dict, hi: dict) -> None:
    """Split the peak into a per-batch and a per-document part (from the two largest batches: at small batches a
    transient of the mask construction, freed before the layers run, can be the peak); how many documents fit."""
    per_doc = max((hi["peak_mib"] - lo["peak_mib"]) / (hi["batch"] - lo["batch"]), 1e-3) / 1024   # GiB
    fixed = max(lo["peak_mib"] / 1024 - lo["batch"] * per_doc, 0.0)
    free_cpu = 24 - 2 - WEIGHTS_GIB[name] - fixed    # 2 GiB for the OS, Python, the tokenised corpus
    free_gpu = 80 - 2 - WEIGHTS_GIB[name] - fixed
    print(f"    -> {name}/{attn}/{precision} at 8,192 tokens: {fixed:.2f} GiB per batch (masks) + {per_doc:.3f} GiB "
          f"per document; a 24 GiB CPU holds ~{int(free_cpu / per_doc)} documents per batch "
          f"(task.batch_tokens={int(free_cpu / per_doc) * 8192}); at the same activation sizes an 80 GiB GPU "
          f"~{int(free_gpu / per_doc)} (estimate, not measured)")


if __name__ == "__main__":
    main()
