"""The paper's GPU path against its peers, step by step (benchmarks/gpu/check.sh runs them in this order: every
figure with a target first, then the information only, the cold torch.compile last):

    python benchmarks/gpu_unpadded.py window                  # the window probe (benchmarks/gpu/window.py)
    python benchmarks/gpu_unpadded.py efficiency              # Table 2's four sets, fp32 weights, the harness
    python benchmarks/gpu_unpadded.py bf16                    # short fixed, bf16 weights
    python benchmarks/gpu_unpadded.py encode --model-dir MB   # SciFact, ModernBERT-base's shape: the encoder target
    python benchmarks/gpu_unpadded.py parity                  # per-text max |diff|, packed vs padded, fp32
    python benchmarks/gpu_unpadded.py gradients               # a classifier's gradients vs padded sdpa
    python benchmarks/gpu_unpadded.py information             # information only, one process, these parts in order
                                                              # (--parts): padded, autocast, retrieval, compile
    python benchmarks/gpu_unpadded.py padded                  # the notebook-style padded loop beside the harness
    python benchmarks/gpu_unpadded.py autocast                # short fixed, autocast over fp32 weights
    python benchmarks/gpu_unpadded.py retrieval --data DIR    # a BEIR corpus, MiniLM: harness vs sentence-transformers
    python benchmarks/gpu_unpadded.py compile                 # short fixed, bf16 weights through a cold torch.compile

Without ``--model-dir`` a random ModernBERT (``--random tiny|base|base2``: 2 layers of 64 with window 16 and 8,192
positions, ModernBERT-base's shape, or its first 2 layers) is made in a temporary folder (speed does not depend on
the weights). ``--shrink N`` divides every length by N (the check's CPU dry run). ``--out DIR``: each figure is
appended to DIR/figures.jsonl the moment it exists (benchmarks/gpu/figures.py), with the device, torch and the
attention kernel counted while it was measured; a step that compares with an earlier step's figure (padded,
autocast, compile) reads it there. ``information`` runs its parts in one process (one import of torch and
transformers, not four), each part's failure printed and the next part run (exit 1 after the last), its figures
under the step ``information``; ``--minilm-dir`` is its retrieval part's model folder.

The Table 2 steps are benchmarks/gpu/table2.py's (the harness runs task=efficiency's measurement,
:func:`harness.tasks.efficiency.throughput.measure`, with the attention ``auto`` resolves to: CUDA harness_varlen,
packed; CPU ``harness_varlen``'s reference; fp32 matmuls as the authors' notebooks, TF32 off), the encoder steps
benchmarks/gpu/retrieval.py's, the exactness steps benchmarks/gpu/parity.py's. Each step imports only what it needs.
"""

from __future__ import annotations

import argparse
import atexit
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))        # benchmarks/gpu/ as the package ``gpu``

REPO = Path(__file__).resolve().parents[1]


def random_modernbert(shape: str) -> str:
    """A folder with a random-weight ModernBERT: ``base`` (ModernBertConfig's defaults are ModernBERT-base's
    shape), ``base2`` (its first 2 layers: one global, one local) or ``tiny`` (2 layers of 64, window 16, 8,192
    positions); the tiny fixture's tokenizer (speed does not depend on the weights or the vocabulary's words)."""
    import shutil
    import tempfile

    from transformers import ModernBertConfig, ModernBertModel

    folder = Path(tempfile.mkdtemp(prefix=f"modernbert-{shape}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    small = dict(vocab_size=2000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 local_attention=16, pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)
    torch.manual_seed(0)
    config = {"tiny": small, "base": {}, "base2": {"num_hidden_layers": 2}}[shape]
    ModernBertModel(ModernBertConfig(**config)).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(REPO / "tests" / "fixtures" / "tiny-modernbert" / name, folder / name)
    return str(folder)


#: ``information``'s parts, in order: the cold torch.compile last
PARTS = ("padded", "autocast", "retrieval", "compile")


def run_information(args: argparse.Namespace, steps: dict[str, tuple[str, str]]) -> None:
    """Each of ``args.parts`` in order, in this process, its figures under the step ``information``; a part that
    fails is printed and the next one runs; exit 1 after the last if one failed."""
    import importlib
    import traceback

    failed = []
    for part in args.parts:
        module, function = steps[part]
        part_args = argparse.Namespace(**{**vars(args), "what": part, "figures_step": "information"})
        if part == "retrieval":
            part_args.model_dir = args.minilm_dir
        print(f"[information] part {part}", flush=True)
        try:
            getattr(importlib.import_module(f"gpu.{module}"), function)(part_args)
        except Exception:
            traceback.print_exc()
            failed.append(part)
    if failed:
        sys.exit(f"[information] failed: {', '.join(failed)} (tracebacks above)")


def main() -> None:
    steps = {"window": ("window", "run"), "efficiency": ("table2", "run_efficiency"), "bf16": ("table2", "run_bf16"),
             "encode": ("retrieval", "run"), "parity": ("parity", "run_parity"),
             "gradients": ("parity", "run_gradients"), "padded": ("table2", "run_padded"),
             "autocast": ("table2", "run_autocast"), "retrieval": ("retrieval", "run"),
             "compile": ("table2", "run_compile"), "information": ("", "")}
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=list(steps))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=None, help="append each figure to OUT/figures.jsonl as it is measured")
    ap.add_argument("--model-dir", default=None, help="a ModernBERT folder (else --random); retrieval: a "
                    "sentence-transformers folder (default all-MiniLM-L6-v2 from its package); encode: a ModernBERT")
    ap.add_argument("--random", default="tiny", choices=["tiny", "base", "base2"])
    ap.add_argument("--attn", default=None, help="the harness' attention (default: auto on CUDA; CPU: harness_varlen)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--shrink", type=int, default=1, help="divide every length by this (a CPU dry run)")
    ap.add_argument("--n-short", type=int, default=512, help="documents in each short set")
    ap.add_argument("--n-long", type=int, default=32, help="documents in each long set")
    ap.add_argument("--n-bf16", type=int, default=1024, help="bf16, autocast, compile: short fixed's documents")
    ap.add_argument("--parity-docs", type=int, default=64)
    ap.add_argument("--tf32", action="store_true", help="padded: also short fixed with TF32 on (information)")
    ap.add_argument("--compile-backend", default="inductor", help="compile: torch.compile's backend")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--n-docs", type=int, default=0, help="retrieval: the first N documents (0: all)")
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"], help="retrieval's precision")
    ap.add_argument("--batch-tokens", type=int, default=None, help="retrieval: the encoder's budget (default auto)")
    ap.add_argument("--st-batch-sizes", type=int, nargs="+", default=[32, 128, 512])
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS, help="information: its parts, in order")
    ap.add_argument("--minilm-dir", default=None, help="information: its retrieval part's sentence-transformers "
                    "folder (default all-MiniLM-L6-v2 from its package)")
    args = ap.parse_args()
    if args.what != "window":                       # the probe needs no transformers (nor its import time)
        import transformers

        transformers.logging.set_verbosity_error()  # load reports of the random-weight folders
        transformers.logging.disable_progress_bar()
    if args.what not in ("retrieval", "window") and not args.model_dir:
        args.model_dir = random_modernbert(args.random)
    if args.what == "information":
        return run_information(args, steps)
    import importlib

    module, function = steps[args.what]
    getattr(importlib.import_module(f"gpu.{module}"), function)(args)


if __name__ == "__main__":
    main()
