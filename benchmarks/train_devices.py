"""Step time of one training on 1 vs N processes (``task.devices``), on this machine: the same DPR training
(NO_DUPLICATES batches, (Cached)MNRL) run through the harness once per process count, each in fresh folders. For
each: the steps, the trainer's own time for them (``train_runtime``: from the first step to the last), seconds per
optimizer step and the speed-up against 1 process, then the whole training's wall time from the record (``train_s``:
the ranks' start, the weights and rows handed to them, the save), and whether the trained weights agree.

    python benchmarks/train_devices.py [--devices 2] [--triplets 2048] [--batch 8] [--accumulation 4]
        [--model tests/fixtures/tiny-modernbert] [--device cpu] [--loss mnrl] [--precision fp32]

On CPU the N processes share the cores (each gets cores / N threads, gloo between them); on a node with N GPUs,
``--device cuda --model <ModernBERT-base folder> --batch 64 --accumulation 64 --devices 8`` times the authors'
setup (64 per GPU x 8 x 8 GPUs).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def train(args: argparse.Namespace, n: int, tmp: Path) -> tuple[dict, float]:
    """One run on ``n`` processes: its training facts and the trainer's train_runtime (TensorBoard)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from harness.run.overrides import compose_config
    from harness.run.runner import run

    out = tmp / f"n{n}"
    (rec,) = run(compose_config([
        "task=beir", "model=all-minilm-l6-v2", f"model.path={args.model}", "model.name=bench", "model.normalize=false",
        "model.max_length=64", f"precision={args.precision}", f"device={args.device}", f"task.data_dir={tmp}/data",
        "task.datasets=[toy]", "+task.catalog.toy={split: test}", "task.train_data.source=file",
        f"task.train_data.path={tmp}/triplets.tsv", f"task.batch_size={args.batch}", f"task.loss={args.loss}",
        f"task.gradient_accumulation_steps={args.accumulation}", "task.max_seq_length=64", "task.lr=1e-4",
        f"task.devices={n}", "logger=tensorboard", f"paths.results={out}/results", f"paths.outputs={out}/outputs",
        f"paths.cache={out}/cache", "log_level=WARNING"]))
    trained = rec.model["trained"]
    acc = EventAccumulator(str(out / "outputs" / "tensorboard" / "beir" / "bench" / rec.run_id),
                           size_guidance={"scalars": 0})
    acc.Reload()
    return trained, acc.Scalars("train/train_runtime")[-1].value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=2, help="N: the processes to compare with 1")
    p.add_argument("--triplets", type=int, default=2048, help="synthetic training triplets (all queries distinct)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--accumulation", type=int, default=4, help="the configured accumulation (1 process)")
    p.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-modernbert"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--loss", default="mnrl", choices=["mnrl", "cached_mnrl"])
    p.add_argument("--precision", default="fp32")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    from harness.trial.toy_data import write_beir_folder, write_triplets

    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} "
          f"threads), device {args.device}{' x ' + str(torch.cuda.device_count()) if args.device == 'cuda' else ''}")
    print(f"workload: {args.triplets} triplets, batch {args.batch} x accumulation {args.accumulation} (1 process), "
          f"{args.loss}, model {args.model}")
    with tempfile.TemporaryDirectory(prefix="train-devices-") as tmp_name:
        tmp = Path(tmp_name)
        write_beir_folder(tmp / "data")
        write_triplets(tmp / "triplets.tsv", n=args.triplets)
        rows = {}
        for n in (1, args.devices):
            rows[n] = train(args, n, tmp)
        base = rows[1][1] / rows[1][0]["steps"]
        print(f"{'processes':>9s} {'steps':>6s} {'steps s':>8s} {'s/step':>8s} {'speed-up':>8s} {'training s':>10s} "
              f"{'train loss':>11s}")
        for n, (facts, runtime) in rows.items():
            per = runtime / facts["steps"]
            print(f"{n:9d} {facts['steps']:6d} {runtime:8.2f} {per:8.4f} {base / per:7.2f}x {facts['train_s']:10.1f} "
                  f"{facts['train_loss']:11.6f}")
        print("same fingerprint" if rows[1][0]["fingerprint"] == rows[args.devices][0]["fingerprint"] else
              "fingerprints differ (float summation order; tests/test_train_devices.py bounds the weights at 1e-5)")


if __name__ == "__main__":
    sys.exit(main())
