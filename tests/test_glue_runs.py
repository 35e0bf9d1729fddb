"""GLUE end to end on the tiny ModernBERT and tiny GLUE-shaped TSVs: records, resume, NaN, MNLI chaining, launchers."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module

from harness.core import layout, results
from harness.run.runner import RunFailed, run
from harness.tasks.glue.classification import load_classifier
from harness.trial.toy_data import WORDS, write_tiny_glue  # noqa: F401  (re-exported)
from harness.trial.toy_data import pair_file as _pair_file  # noqa: F401
from harness.trial.toy_data import sentence as _sentence  # noqa: F401
from tests.forked import run_module

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "fixtures" / "tiny-modernbert"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}








@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory) -> Path:
    return write_tiny_glue(tmp_path_factory.mktemp("glue"))





def tiny_overrides(glue_dir: Path, work: Path) -> list[str]:
    return [
        "task=glue", "model=all-minilm-l6-v2", f"model.path={TINY}", "model.name=tiny-modernbert",
        "model.family=tiny", f"task.data_dir={glue_dir}", "task.max_length=32", "task.batch_size=8",
        "task.logging_steps=1", "precision=fp32", "device=cpu", f"paths.results={work}/results",
        f"paths.outputs={work}/outputs", f"paths.cache={work}/cache",
    ]


def compose_cfg(overrides: list[str]):
    with initialize_config_module("conf", version_base="1.3"):
        return compose("config", overrides=overrides)


def records(work: Path) -> dict[str, results.ResultRecord]:
    return {f"{r.dataset}:{r.hyperparameters['lr']:g}": r for _, r in results.iter_records(work / "results")}


def harness_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return run_module("harness", *args, cwd=REPO, env=ENV, timeout=timeout)


def test_sweep_writes_records_resumes_and_survives_nan(glue_dir, tmp_path):
    base = [*tiny_overrides(glue_dir, tmp_path), "task.tasks=[rte]", "task.grid.learning_rates=[1e30,1e-4,3e-4]", "task.grid.weight_decays=[0.01]", "task.epochs=2", "task.seed=3",
            "task.scoring_protocol=best_epoch"]       # per-epoch evaluations, the best restored (authors: test_glue_protocol)
    with pytest.raises(RunFailed, match="diverged") as failed:   # the NaN run fails; the sweep goes on
        run(compose_cfg(base))
    recs = failed.value.records
    assert [r.status for r in recs] == ["failed", "ok", "ok"]
    assert "diverged" in recs[0].error and "lower task.lr" in recs[0].error
    ok = recs[1]
    assert ok.metrics.keys() == {"accuracy"} and ok.main_score == "accuracy" and 0 <= ok.score <= 100
    assert ok.hyperparameters["lr"] == 1e-4 and ok.hyperparameters["epochs"] == 2 and ok.hyperparameters["seed"] == 3
    assert ok.details["best_epoch"] in (1.0, 2.0) and len(ok.details["eval_history"]) == 2
    assert ok.details["n_train"] == 32 and ok.details["n_eval"] == {"validation": 12}
    assert ok.details["init_from"] is None and ok.data_fingerprint.startswith("sha256:")
    out = layout.trained_model_dir(tmp_path / "outputs", "glue", "tiny-modernbert", ok.run_id)
    assert out.is_dir() and not (out / "trainer").exists()                          # checkpoints removed
    selected = json.loads((tmp_path / "selected/glue-tiny-modernbert.json").read_text())
    assert selected["tasks"]["rte"]["score"]["mean"] == max(r.score for r in recs[1:])

    # an interrupted sweep: one finished point lost its record; only it (and the failed one) run again
    before = records(tmp_path)
    os.remove(results.path_of(tmp_path / "results", recs[2]))
    with pytest.raises(RunFailed) as failed_again:     # the diverging point is retried (and fails again)
        run(compose_cfg(base))
    again = failed_again.value.records
    after = records(tmp_path)
    assert after["rte:0.0001"].created_at == before["rte:0.0001"].created_at        # skipped, not retrained
    assert after["rte:0.0003"].run_id == recs[2].run_id and after["rte:0.0003"].status == "ok"
    assert again[1].timings == ok.timings
    assert after["rte:0.0003"].score == pytest.approx(recs[2].score)              # same seed, same number


def test_mnli_chaining_multirun_runs_mnli_first_and_loads_its_encoder(glue_dir, tmp_path):
    done = harness_cli(
        "-m", *tiny_overrides(glue_dir, tmp_path), "task.tasks=mnli,rte", "task.mnli_init=required",
        "task.lr=1e-3", "task.weight_decay=0", "task.epochs=1", "task.seed=1", "hydra.sweeper.max_batch_size=1",
        "+hydra.callbacks.glue_staging._target_=harness.run.hydra_callbacks.StagingCheck", f"hydra.sweep.dir={tmp_path}/multirun",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    recs = {r.dataset: r for _, r in results.iter_records(tmp_path / "results")}
    assert set(recs) == {"mnli", "rte"}, done.stderr[-3000:]
    mnli, rte = recs["mnli"], recs["rte"]
    assert mnli.main_score == "accuracy_mean"
    assert {"accuracy_matched", "accuracy_mismatched", "accuracy_mean"} <= set(mnli.metrics)
    assert mnli.metrics["accuracy_mean"] == pytest.approx(
        (mnli.metrics["accuracy_matched"] + mnli.metrics["accuracy_mismatched"]) / 2)
    assert mnli.details["n_eval"] == {"matched": 9, "mismatched": 6}
    ckpt = mnli.details["checkpoint"]
    assert Path(ckpt, "config.json").exists()
    assert rte.details["init_from"] == ckpt and rte.details["init_from_run_id"] == mnli.run_id
    assert rte.hyperparameters["init_from"] == "mnli" and rte.created_at >= mnli.created_at

    # what the RTE job loads: MNLI's encoder and pooling head, a fresh 2-way classifier
    torch.manual_seed(0)
    chained = load_classifier(str(TINY), 2, init_from=ckpt)
    mnli_model = load_classifier(ckpt, 3)
    pretrained = load_classifier(str(TINY), 2)
    for (name, p), q in zip(chained.base_model.state_dict().items(), mnli_model.base_model.state_dict().values(),
                            strict=True):
        assert torch.equal(p, q), name
    assert any(not torch.equal(p, q) for p, q in zip(chained.base_model.state_dict().values(),
                                                     pretrained.base_model.state_dict().values(), strict=True))
    assert chained.classifier.out_features == 2
    assert torch.equal(chained.head.dense.weight, mnli_model.head.dense.weight)   # the head is MNLI's (the authors'
    assert rte.details["init_fresh"] == ["classifier.weight", "classifier.bias"]    # rule: all but the classifier)


def test_submitit_local_runs_a_two_point_multirun(glue_dir, tmp_path):
    done = harness_cli(
        "-m", *tiny_overrides(glue_dir, tmp_path), "task.tasks=rte", "task.lr=1e-4,3e-4",
        "task.weight_decay=0", "task.epochs=1", "task.seed=1", "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10", "hydra.launcher.cpus_per_task=1", f"hydra.sweep.dir={tmp_path}/multirun",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    recs = records(tmp_path)
    assert set(recs) == {"rte:0.0001", "rte:0.0003"} and all(r.status == "ok" for r in recs.values())
    assert list((tmp_path / "multirun" / ".submitit").iterdir())   # the jobs went through submitit


def test_cli_hub_path_fails_fast_offline(tmp_path):
    done = harness_cli("task=glue", "model=all-minilm-l6-v2", f"model.path={TINY}", "task.tasks=[rte]",
                       f"paths.results={tmp_path}/results", timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 2
    assert "needs the Hugging Face hub" in out and "task.data_dir=" in out
    assert not (tmp_path / "results").exists()


def test_cli_bad_task_name(tmp_path):
    done = harness_cli("task=glue", "task.tasks=[rtx]", f"paths.results={tmp_path}", timeout=120)
    assert done.returncode == 2 and "unknown GLUE task 'rtx'" in done.stdout + done.stderr
