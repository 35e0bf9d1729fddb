"""Issue 28: nothing of the paper graph is submitted or run before everything a single run checks up front holds:
each bad value is one ``error:`` line and exit 2, and ``sbatch`` is never called (a stand-in on PATH notes any
call). Also: the local launcher stops a step whose first jobs all stop with one error, and the cost preview
never prints NaN."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.forked import run_module
from tests.test_paper_runs import PAPER, REPO, common, write_paper_data


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_paper_data(tmp_path_factory.mktemp("paper-data"))


@pytest.fixture(scope="module")
def fake_sbatch(tmp_path_factory) -> Path:
    """A directory whose ``sbatch`` (and ``squeue``) note that they were called and fail."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for tool in ("sbatch", "squeue"):
        (bin_dir / tool).write_text(f"#!/bin/sh\necho {tool} >> {bin_dir}/CALLED\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    return bin_dir


def submit(work: Path, data: Path, fake: Path, *extra: str, graph: Path = PAPER) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "harness.paper", f"paper={graph}", f"paper.data={data}",
                           *common(work), "paper.launcher=slurm", *extra], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300)


CASES = {
    "launcher-typo": (["paper.launcher=slrum"], r"launcher='slrum' is not one of local, slurm \(closest: slurm\)"),
    "unknown-paper-key": (["paper.laucher=local"], r"unknown key 'laucher' in paper; did you mean 'launcher'"),
    "min-finished-range": (["paper.min_finished=1.5"], r"paper\.min_finished=1\.5 must be in \(0, 1\]"),
    "min-finished-type": (["paper.min_finished=abc"], r"min_finished must be a number, got 'abc'"),
    "shards-zero": (["paper.stages.dpr.shards=0"], r"paper\.stages\.dpr\.shards=0 must be >= 1"),
    "shards-negative": (["paper.stages.dpr.shards=-1"], r"paper\.stages\.dpr\.shards=-1 must be >= 1"),
    "shards-type": (["paper.stages.dpr.shards=x"], r"shards must be an integer, got 'x'"),
    "unknown-step": (["paper.stages.dprr.shards=2"], r"unknown paper step 'dprr'.*closest first\): dpr"),
    "model-typo": (["model=modernbert-bse"], r"unknown model 'modernbert-bse'.*modernbert-base"),
    "task-key-typo": (["task.lrr=1"], r"unknown config key 'task\.lrr'.*task\.lr"),
    "results-not-a-folder": (["paths.results=/etc/hostname/results"], r"paths\.results=/etc/hostname/results is under"),
    "data-folder-missing": (["paper.data=/nonexistent/data"], r"/nonexistent/data"),
    "cluster-typo": (["paper.cluster=locl"], r"unknown cluster profile 'locl'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_graph_is_refused_before_any_job_exists(case: str, data: Path, fake_sbatch: Path,
                                                      tmp_path: Path) -> None:
    extra, wanted = CASES[case]
    if case == "data-folder-missing":
        got = submit(tmp_path, Path("/nonexistent/data"), fake_sbatch, *extra[1:])
    else:
        got = submit(tmp_path, data, fake_sbatch, *extra)
    errors = [ln for ln in got.stderr.splitlines() if ln.startswith("error:")]
    assert got.returncode == 2, got.stderr[-2000:]
    assert len(errors) == 1 and "Traceback" not in got.stderr, got.stderr[-2000:]
    import re

    assert re.search(wanted, errors[0]), errors[0]
    assert not (fake_sbatch / "CALLED").exists() or "sbatch" not in (fake_sbatch / "CALLED").read_text()
    assert not (tmp_path / "paper").exists() or not list((tmp_path / "paper").rglob("ledger.json"))


def test_a_corrupt_ledger_is_refused_not_forgotten(data: Path, fake_sbatch: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "paper" / "tiny-modernbert" / "ledger.json"
    ledger.parent.mkdir(parents=True)
    ledger.write_text('{"dpr[lr=1e-4]": "12_0",')
    got = submit(tmp_path, data, fake_sbatch)
    assert got.returncode == 2 and got.stderr.strip().splitlines()[-1].startswith(f"error: {ledger} is not valid JSON")
    assert ledger.read_text() == '{"dpr[lr=1e-4]": "12_0",'                 # left as it was


def test_the_local_launcher_stops_a_stage_whose_first_jobs_stop_alike(data: Path, tmp_path: Path) -> None:
    """Three DPR points on a triplet file that exists (the up-front check passes) but holds a bad line: the first
    two stop with the same error, the graph stops there with that line, the third is never started."""
    bad = tmp_path / "triplets.tsv"
    bad.write_text("query\tpositive\tnegative\nonly two\tcolumns\n")
    graph = tmp_path / "graph.yaml"
    graph.write_text(json.dumps({
        "data": "???", "leaderboard": False, "min_finished": 0.5, "overrides": [], "launcher": "local",
        "cluster": "local", "site": None,
        "stages": {"dpr": {"task": "beir", "sweep": "beir-lr", "params": {"task.lr": "1e-4,2e-4,3e-4"},
                           "overrides": ["task.data_dir=${data}", "task.train_data.source=file",
                                         f"task.train_data.path={bad}", "task.batch_size=8", "task.loss=mnrl"]}}}))
    got = run_module("harness.paper", f"paper={graph}", f"paper.data={data}", *common(tmp_path),
                     "paper.launcher=local", cwd=REPO, timeout=600)
    stops = [ln for ln in got.stderr.splitlines() if ln.startswith("error:") and "the graph stops" in ln]
    assert got.returncode == 2, got.stderr[-3000:]
    assert got.stderr.strip().splitlines()[-1] == stops[0]                 # the last line the user sees
    assert len(stops) == 1 and "dpr: its first 2 jobs stopped with the same error, so its other 1 would too" in \
        stops[0] and "triplets.tsv line 2" in stops[0], got.stderr[-3000:]
    notes = list((tmp_path / "paper" / "tiny-modernbert" / "jobs").glob("*.json"))
    assert len(notes) == 2                                                  # the third job never ran


def test_the_preview_never_prints_nan_gpu_hours(data: Path, tmp_path: Path) -> None:
    """An efficiency record whose throughput is NaN or zero is not a measurement: the preview uses Table 2."""
    from harness.core import results
    from tests.test_record_rules import put

    model = {"name": "tiny-modernbert", "path": "x", "revision": None, "family": "ModernBERT", "size": "base",
             "fingerprint": "f"}
    for dataset, rate in (("short_variable", float("nan")), ("long_variable", 0.0)):
        path = put(tmp_path / "results", dataset, rate, model=model, metrics={"tokens_per_s": rate},
                   main_score="tokens_per_s")
        target = results.record_path(tmp_path / "results", "efficiency", "tiny-modernbert", "r1", dataset)
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
    got = run_module("harness.paper", f"paper={PAPER}", f"paper.data={data}", *common(tmp_path), "--dry-run",
                     cwd=REPO, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "nan" not in got.stdout.lower() and "Table 2" in got.stdout
