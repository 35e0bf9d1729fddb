"""End-to-end retrieval runs: evaluation, DPR training (file / mined), resume, failures, CLI, multirun, selection."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import results
from harness.core.errors import HarnessError, TrainingDivergedError
from harness.run.runner import run
from tests.conftest import REPO, TINY_MODEL, compose, write_beir_folder, write_triplets
from tests.forked import run_module

TINY = [
    "model=all-minilm-l6-v2", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert", "model.normalize=false",
    "model.max_length=64", "precision=fp32",
]


def overrides(tmp: Path, data_dir: Path, *extra: str) -> list[str]:
    return [
        "task=beir", *TINY, f"task.data_dir={data_dir}", "task.datasets=[toy]", "+task.catalog.toy={split: test}",
        f"paths.results={tmp}/results", f"paths.outputs={tmp}/outputs", f"paths.cache={tmp}/cache", *extra,
    ]


def records_in(tmp: Path) -> list[results.ResultRecord]:
    return [r for _, r in results.iter_records(tmp / "results")]


def test_eval_only_writes_record_and_skips_rerun(tmp_path: Path, toy_beir: Path, capsys) -> None:
    cfg = compose(overrides(tmp_path, toy_beir, "task.train=false"))
    (rec,) = run(cfg)
    assert rec.task == "beir" and rec.dataset == "toy" and rec.split == "test" and rec.status == "ok"
    assert set(rec.metrics) >= {"ndcg_at_10", "recall_at_100", "map_at_10", "mrr_at_10"}
    assert 0 < rec.metrics["ndcg_at_10"] <= 1
    assert rec.model["name"] == "tiny-modernbert" and rec.model["fingerprint"]
    assert rec.precision == "fp32" and rec.data_fingerprint.startswith("sha256:")
    assert rec.config["task"]["name"] == "beir" and rec.git_sha is not None
    assert {"encode_corpus_s", "search_s"} <= set(rec.timings)
    assert "ndcg_at_10" in capsys.readouterr().out          # the summary table
    path = next((tmp_path / "results").rglob("toy.json"))
    before = path.read_text()
    (again,) = run(cfg)                                       # finished: skipped, record untouched
    assert path.read_text() == before and again.created_at == rec.created_at
    (redo,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false", "overwrite=true")))
    assert redo.details["embedding_cache_hit"] is True      # second evaluation reuses corpus embeddings
    assert redo.metrics == rec.metrics


def test_train_from_triplet_file_then_evaluate(tmp_path: Path, toy_beir: Path) -> None:
    triplets = write_triplets(tmp_path / "triplets.tsv")
    cfg = compose(overrides(
        tmp_path, toy_beir, "task.train_data.source=file", f"task.train_data.path={triplets}", "task.batch_size=8",
        "task.gradient_accumulation_steps=1", "task.lr=1e-4", "task.loss=mnrl",
    ))
    (rec,) = run(cfg)
    trained = rec.model["trained"]
    assert trained["steps"] == 6 and trained["n_triplets"] == 48 and Path(trained["model_dir"]).is_dir()
    assert trained["fingerprint"] != rec.model["fingerprint"]
    assert rec.hyperparameters["lr"] == 1e-4 and rec.hyperparameters["train"]["data"]["file_sha"]
    assert rec.run_id.startswith("lr=0.0001-")


def test_mined_negatives_from_beir_train_split(tmp_path: Path, toy_beir: Path) -> None:
    cfg = compose(overrides(
        tmp_path, toy_beir, "task.train_data.source=beir", "task.train_data.dataset=toy", "task.batch_size=4",
        "task.gradient_accumulation_steps=1", "task.train_data.range_min=1", "task.train_data.range_max=10",
    ))
    (rec,) = run(cfg)
    assert rec.status == "ok" and rec.model["trained"]["n_triplets"] > 0
    assert rec.hyperparameters["train"]["data"]["source"] == "beir"


def test_mining_with_default_ranges_on_a_small_corpus(tmp_path: Path, toy_beir: Path) -> None:
    """The toy corpus (40 docs, 8 positives per query) is smaller than range_max=50 + positives: mining caps the
    range instead of crashing inside sentence-transformers; a range that leaves nothing is a clear error."""
    base = overrides(tmp_path, toy_beir, "task.train_data.source=beir", "task.train_data.dataset=toy",
                     "task.batch_size=4", "task.gradient_accumulation_steps=1")
    (rec,) = run(compose(base))
    assert rec.status == "ok" and rec.model["trained"]["n_triplets"] > 0
    with pytest.raises(HarnessError, match=r"40 documents leave no room to mine negatives between rank 35 and 32"):
        run(compose([*base, "task.train_data.range_min=35"]))


def test_nan_loss_records_failure_and_keeps_earlier_results(
    tmp_path: Path, toy_beir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(compose(overrides(tmp_path, toy_beir, "task.train=false")))     # an earlier, good result
    import torch

    from harness.tasks.retrieval import seeding as dense

    class NaNLoss(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, features, labels):
            emb = self.model(features[0])["sentence_embedding"]
            return emb.sum() * float("nan")

    monkeypatch.setattr(dense, "make_loss", lambda model, cfg: NaNLoss(model))
    triplets = write_triplets(tmp_path / "t.tsv")
    cfg = compose(overrides(tmp_path, toy_beir, "task.train_data.source=file", f"task.train_data.path={triplets}",
                            "task.batch_size=8", "task.gradient_accumulation_steps=1"))
    with pytest.raises(TrainingDivergedError, match=r"training loss became nan .*diverged; lower task\.lr"):
        run(cfg)
    recs = {r.run_id.split("-")[0]: r for r in records_in(tmp_path)}
    assert recs["eval=fp32"].status == "ok"
    failed = recs["lr=2e"]
    assert failed.status == "failed" and "nan" in failed.error


def test_bad_dataset_fails_alone(tmp_path: Path, toy_beir: Path) -> None:
    write_beir_folder(toy_beir, "broken")
    (toy_beir / "broken" / "corpus.jsonl").write_text("")
    cfg = compose(overrides(tmp_path, toy_beir, "task.train=false", "task.datasets=[toy,broken]",
                            "+task.catalog.broken={split: test}"))
    with pytest.raises(HarnessError, match=r"broken: .*corpus\.jsonl is empty"):
        run(cfg)
    by_ds = {r.dataset: r for r in records_in(tmp_path)}
    assert by_ds["toy"].status == "ok" and by_ds["broken"].status == "failed"


def test_too_few_distinct_queries_for_batch(tmp_path: Path, toy_beir: Path) -> None:
    triplets = write_triplets(tmp_path / "t.tsv", n=6)
    cfg = compose(overrides(tmp_path, toy_beir, "task.train_data.source=file", f"task.train_data.path={triplets}",
                            "task.batch_size=8"))
    with pytest.raises(HarnessError, match=r"6 distinct queries .* task\.batch_size=8.*Set task\.batch_size<=6"):
        run(cfg)


def test_unknown_dataset_suggests_closest(tmp_path: Path, toy_beir: Path) -> None:
    cfg = compose(overrides(tmp_path, toy_beir, "task.train=false", "task.datasets=[scifcat]"))
    with pytest.raises(HarnessError, match=r"unknown dataset 'scifcat'\. Valid datasets \(closest first\): scifact,"):
        run(cfg)


def test_triplet_file_errors(tmp_path: Path) -> None:
    from harness.core.errors import DataError
    from harness.tasks.retrieval.data.triplets import load_triplets_file

    bad = tmp_path / "t.tsv"
    bad.write_text("question\tpositive\tother\nq\tp\tn\n")
    with pytest.raises(DataError, match=r"no 'negative' column .*columns found: \['question', 'positive', 'other'\]"):
        load_triplets_file(bad)
    bad.write_text("query\tpositive\tnegative\nq\tp\tn\textra\n")
    with pytest.raises(DataError, match=r"t\.tsv line 2: 4 fields, header has 3"):
        load_triplets_file(bad)
    with pytest.raises(DataError, match=r"training file not found"):
        load_triplets_file(tmp_path / "missing.tsv")


@pytest.mark.slow
def test_real_triplets_flatten(shared_data: Path) -> None:
    from harness.tasks.retrieval.data.triplets import load_triplets_file

    tsv = load_triplets_file(shared_data / "msmarco-hardneg-sample" / "triplets.tsv")
    jsonl = load_triplets_file(shared_data / "msmarco-hardneg-sample" / "bge_example_msmarco.jsonl")
    assert len(tsv) == 580 and len(jsonl) == 250          # 10 records x 25 negatives
    assert tsv[0]["anchor"].startswith(")what was the immediate impact")


# --- through the command line ------------------------------------------------------------------------------

def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return run_module("harness", *args, cwd=cwd, env=env, timeout=600)


def test_cli_unknown_names_closest_first() -> None:
    p = cli("task=beri")
    assert p.returncode == 2 and "unknown task 'beri'. Valid tasks (closest first): beir," in p.stderr
    p = cli("model=modernbert-bas")
    assert p.returncode == 2
    assert "Valid models (closest first): modernbert-base, modernbert-large," in p.stderr
    assert "model.path=" in p.stderr


def test_cli_cfg_job_shows_composed_config() -> None:
    p = cli("task=beir", "model=modernbert-base", "--cfg", "job")
    assert p.returncode == 0, p.stderr
    for needle in ("path: answerdotai/ModernBERT-base", "hub_config: triplet-hard", "max_samples: 1250000",
                   "loss: cached_mnrl", "warmup_ratio: 0.05", "ignore_identical_ids: true"):
        assert needle in p.stdout


def test_cli_hub_model_offline_fails_fast() -> None:
    p = cli("task=beir", "model=modernbert-base")
    assert p.returncode == 2
    assert "'answerdotai/ModernBERT-base' needs the Hugging Face hub" in p.stderr
    assert "model.path=" in p.stderr


def test_cli_multirun_lr_sweep_and_selection(tmp_path: Path, toy_beir: Path) -> None:
    triplets = write_triplets(tmp_path / "t.tsv")
    args = overrides(tmp_path, toy_beir, "task.train_data.source=file", f"task.train_data.path={triplets}",
                     "task.batch_size=8", "task.gradient_accumulation_steps=1", "task.spec.selection.sets=[toy]",
                     f"hydra.sweep.dir={tmp_path}/multirun")
    p = cli("-m", *args, "task.lr=1e-5,1e-3")
    assert p.returncode == 0, p.stderr[-3000:]
    recs = records_in(tmp_path)
    assert sorted(r.hyperparameters["lr"] for r in recs) == [1e-5, 1e-3]
    out = tmp_path / "selected"
    sel = subprocess.run([sys.executable, "-m", "harness.select", "--task", "beir", "--results",
                          str(tmp_path / "results"), "--out", str(out)], capture_output=True, text=True, cwd=REPO)
    assert sel.returncode == 0, sel.stderr
    chosen = json.loads((out / "beir-tiny-modernbert.json").read_text())
    best = max(recs, key=lambda r: r.metrics["ndcg_at_10"])
    assert chosen["selected_run_id"] == best.run_id
    assert "task.lr=" in chosen["next_command"]


@pytest.mark.slow
def test_cli_minilm_trains_on_real_triplets(tmp_path: Path, shared_data: Path, toy_beir: Path) -> None:
    """The issue's DPR path on MiniLM: the real MS MARCO hard-negative sample through the CLI."""
    p = cli("task=beir", "model=all-minilm-l6-v2", "task.train_data.source=file",
            f"task.train_data.path={shared_data}/msmarco-hardneg-sample/triplets.tsv", "task.batch_size=8",
            "task.gradient_accumulation_steps=1", "task.loss=cached_mnrl", "task.mini_batch_size=4",
            "task.train_data.max_samples=64", "task.max_seq_length=128", "precision=fp32",
            f"task.data_dir={toy_beir}", "task.datasets=[toy]", "+task.catalog.toy={split: test}",
            f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs", f"paths.cache={tmp_path}/c")
    assert p.returncode == 0, p.stderr[-3000:]
    (rec,) = records_in(tmp_path)
    assert rec.model["name"] == "all-minilm-l6-v2" and rec.model["trained"]["steps"] > 0
    assert rec.metrics["ndcg_at_10"] > 0.5


@pytest.mark.slow
def test_main_job_default_command_offline(tmp_path: Path) -> None:
    """`python -m harness` with no task/model: packaged MiniLM on the stdlib-mined code set (smaller here)."""
    p = cli("task.catalog.stdlib.max_queries=40", "task.catalog.stdlib.max_corpus=300", "precision=fp32",
            f"paths.results={tmp_path}/results", f"paths.cache={tmp_path}/c", f"paths.outputs={tmp_path}/o")
    assert p.returncode == 0, p.stderr[-3000:]
    (rec,) = records_in(tmp_path)
    assert (rec.task, rec.dataset, rec.model["name"]) == ("code", "stdlib", "all-minilm-l6-v2")
    assert rec.details["n_docs"] == 300 and rec.details["n_queries"] == 40
    assert rec.metrics["ndcg_at_10"] > 0.3          # docstring -> code is a real, learnable task for MiniLM
    assert re.search(r"code\s+stdlib\s+all-minilm-l6-v2\s+eval=fp32-\w+\s+ndcg_at_10\s+0\.\d{4}\s+ok", p.stdout)  # summary


def test_console_script_subcommands(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-c", "import sys; from harness.cli import main; sys.argv=['harness','select','--task','nope','--results',str(sys.argv)]; main()"],
                       capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2 and "unknown task 'nope'" in p.stderr


@pytest.mark.slow
def test_cli_evaluates_packaged_minilm_on_local_scifact(tmp_path: Path, shared_data: Path) -> None:
    """The issue's offline command (on a deterministic 60-query / 400-doc slice to keep CI short)."""
    p = cli("task=beir", "model=all-minilm-l6-v2", "task.train=false", "task.datasets=[scifact]",
            f"task.data_dir={shared_data}", "task.max_queries=60", "task.max_docs=400", "precision=fp32",
            f"paths.results={tmp_path}/results", f"paths.cache={tmp_path}/c", f"paths.outputs={tmp_path}/o")
    assert p.returncode == 0, p.stderr[-3000:]
    (rec,) = records_in(tmp_path)
    assert (rec.dataset, rec.split, rec.details["n_docs"], rec.details["n_queries"]) == ("scifact", "test", 400, 60)
    assert rec.hyperparameters["max_queries"] == 60 and rec.details["ignore_identical_ids"] is False
    assert 0.5 < rec.metrics["ndcg_at_10"] < 1.0


def test_changed_dataset_definition_is_not_skipped(tmp_path: Path, toy_beir: Path) -> None:
    """Same run, but the dataset now means other data (another folder): evaluate again, keep the old record."""
    (first,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false")))
    other = tmp_path / "other"
    write_beir_folder(other, "toy", docs_per_topic=3)
    (second,) = run(compose(overrides(tmp_path, other, "task.train=false")))
    assert second.run_id == first.run_id and second.details["n_docs"] == 15 != first.details["n_docs"]
    assert second.data_fingerprint != first.data_fingerprint
    aside = sorted(p.name for p in (tmp_path / "results").rglob("toy.superseded-*"))   # the record, its per-query
    assert len(aside) == 2 and aside[1] == aside[0] + ".perquery.npz"                   # scores beside it
    (third,) = run(compose(overrides(tmp_path, other, "task.train=false")))     # now it is done: skipped
    assert third.created_at == second.created_at
