"""What a job owes its scheduler, through the CLI with Hydra's in-process launcher (the same on SLURM:
tests/test_slurm.py): the staging refusal, a non-zero exit when cells failed, the umask, experiment scopes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_glue_runs import ENV, REPO, tiny_overrides, write_tiny_glue

from harness.core import results
from tests.forked import run_module

RTE = ["task.tasks=rte", "task.weight_decay=0", "task.epochs=1", "task.seed=1"]   # one seed (authors: three)


@pytest.fixture(scope="module")
def glue(tmp_path_factory) -> Path:
    return write_tiny_glue(tmp_path_factory.mktemp("glue"))


def cli(*args: str, module: str = "harness", umask: int | None = None, timeout: int = 300):
    return run_module(module, *args, cwd=REPO, env=ENV, umask=umask, timeout=timeout)


def test_staging_check_refuses_a_bad_glue_sweep_before_running_anything(glue, tmp_path):
    """Defect 2: Hydra turned the callback's error into a warning and ran MNLI and RTE side by side."""
    done = cli("-m", "sweep=glue-paper", *tiny_overrides(glue, tmp_path), "task.tasks=mnli,rte", "task.lr=1e-3",
               "task.weight_decay=0", "task.epoch_slot=0", "hydra.sweeper.max_batch_size=null",
               f"hydra.sweep.dir={tmp_path}/multirun")
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: this multirun would start MNLI-chained jobs (batch 1) before every MNLI job")
    assert not list(tmp_path.rglob("*.json")) and not (tmp_path / "multirun" / "0").exists()   # no job ran


def test_multirun_with_a_failed_cell_exits_non_zero_after_its_siblings(glue, tmp_path):
    """Defect 3 with the in-process launcher: the diverging point fails, the next one still runs, the whole
    multirun exits 2 naming the failure."""
    done = cli("-m", *tiny_overrides(glue, tmp_path), *RTE, "task.lr=1e30,1e-4", f"hydra.sweep.dir={tmp_path}/m")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "diverged" in done.stderr.strip().splitlines()[-1]
    recs = {r.hyperparameters["lr"]: r.status for _, r in results.iter_records(tmp_path / "results")}
    assert recs == {1e30: "failed", 1e-4: "ok"}


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664)])
def test_records_and_selections_follow_the_umask(glue, tmp_path, umask, mode):
    """Defect 4: records and selection files were 0600 whatever the umask."""
    done = cli(*tiny_overrides(glue, tmp_path), *RTE, "task.lr=1e-4", umask=umask)
    assert done.returncode == 0, done.stderr[-3000:]
    paths = [p for p, _ in results.iter_records(tmp_path / "results")]
    assert paths and {p.stat().st_mode & 0o777 for p in paths} == {mode}
    sel = cli("--task", "glue", "--results", str(tmp_path / "results"), module="harness.select", umask=umask)
    assert sel.returncode == 0, sel.stderr
    assert (tmp_path / "selected" / "glue-tiny-modernbert.json").stat().st_mode & 0o777 == mode


def test_select_reads_only_its_experiments_records(glue, tmp_path):
    """Defect 5: two sweeps share a results folder; ``--experiment`` scopes the selection, the run ids ignore it,
    and without ``--experiment`` every record is selectable as before."""
    done = cli("-m", *tiny_overrides(glue, tmp_path), *RTE, "task.lr=1e-4,3e-4", "experiment=a",
               f"hydra.sweep.dir={tmp_path}/a")
    assert done.returncode == 0, done.stderr[-3000:]
    done = cli(*tiny_overrides(glue, tmp_path), *RTE, "task.lr=1e-3", "experiment=b")
    assert done.returncode == 0, done.stderr[-3000:]
    recs = {r.hyperparameters["lr"]: r for _, r in results.iter_records(tmp_path / "results")}
    assert {lr: r.experiment for lr, r in recs.items()} == {1e-4: "a", 3e-4: "a", 1e-3: "b"}
    plain = cli(*tiny_overrides(glue, tmp_path), *RTE, "task.lr=1e-3")   # no experiment: the same run id
    assert plain.returncode == 0, plain.stderr[-3000:]
    again = {r.hyperparameters["lr"]: r for _, r in results.iter_records(tmp_path / "results")}
    assert again[1e-3].created_at == recs[1e-3].created_at and len(again) == 3   # found, not run again

    def chosen(*scope: str) -> dict:
        sel = cli("--task", "glue", "--results", str(tmp_path / "results"), *scope, module="harness.select")
        assert sel.returncode == 0, sel.stderr
        path = tmp_path / "selected" / (scope[1] if scope else "") / "glue-tiny-modernbert.json"
        return json.loads(path.read_text())["tasks"]["rte"]

    a, b, everything = chosen("--experiment", "a"), chosen("--experiment", "b"), chosen()
    assert a["run_ids"][0] in {recs[1e-4].run_id, recs[3e-4].run_id} and b["run_ids"] == [recs[1e-3].run_id]
    assert everything["score"]["mean"] == max(r.score for r in recs.values())
    missing = cli("--task", "glue", "--results", str(tmp_path / "results"), "--experiment", "c",
                  module="harness.select")
    assert missing.returncode == 2 and "in experiment 'c'" in missing.stderr
