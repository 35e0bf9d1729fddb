"""The GPU check (benchmarks/gpu/check.sh) is one call with a deadline, writes each figure as it is measured and its
summary from an exit trap: its CPU dry run (tiny shapes) runs every step and the summary; a check cut short by its
deadline still writes the summary, naming what is missing; the summary reads a cut-off figures file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.trial.toy_data import write_beir_folder
from tests.conftest import REPO


def _load_summary():
    """benchmarks/gpu/summary.py (standard library only), loaded from its file: benchmarks/ is no package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check_summary", REPO / "benchmarks" / "gpu" / "summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_summary = _load_summary()


def _check(tmp_path: Path, *args: str, seconds: int | None = None, timeout: int = 600) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    data = write_beir_folder(tmp_path / "data", name="scifact")
    env = {**os.environ, "OUT": str(out), "CHECK_DATA": str(data), "PYTHON": sys.executable,
           "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if seconds is not None:
        env["CHECK_SECONDS"] = str(seconds)
    proc = subprocess.run(["bash", "benchmarks/gpu/check.sh", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, out


@pytest.mark.slow
def test_the_dry_run_runs_every_step_and_the_summary(tmp_path: Path) -> None:
    rc, output, out = _check(tmp_path, "--cpu")
    assert rc == 0, output[-3000:]
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == list(check_summary.STEPS) and all(s["rc"] == 0 for s in steps), steps
    figures = [json.loads(line) for line in (out / "figures.jsonl").read_text().splitlines()]
    assert {f["step"] for f in figures} == set(check_summary.STEPS)
    assert all(f["gpu"] and f["torch"] for f in figures)
    counted = {f["step"]: f["kernel"] for f in figures if f["kernel"]}
    assert counted["efficiency"].startswith("reference") and "compiled forward" in " ".join(
        f["kernel"] for f in figures if f["step"] == "bf16")
    lines = (out / "summary.txt").read_text().splitlines()
    assert lines[0].startswith("CPU dry run") and lines[-1].startswith("total ")
    body = [line for line in lines[1:-2]]
    assert body and all(" [" in line and "; torch " in line and "; kernel " in line for line in body)
    order = [line.split()[1].rstrip(":") for line in body]
    assert order == sorted(order, key=list(check_summary.STEPS).index)           # the order
    assert not any(line.startswith(("MISSING", "STOPPED", "FAIL")) for line in body)
    assert "0 MISSING/STOPPED" in lines[-2]
    for step in check_summary.STEPS:
        assert (out / f"{step}.log").exists()


def test_a_check_cut_by_its_deadline_still_writes_its_summary(tmp_path: Path) -> None:
    """With 4 s left the first step does not start: the exit trap writes the summary, every step MISSING."""
    rc, output, out = _check(tmp_path, "--cpu", seconds=4, timeout=120)
    assert rc == 0, output[-2000:]
    text = (out / "summary.txt").read_text()
    for step in check_summary.STEPS:
        assert f"MISSING  {step}: not started" in text
    assert "not started, the check's deadline" in output


def test_the_summary_reads_what_a_cut_off_check_left(tmp_path: Path) -> None:
    def figure(step: str, name: str, value: float, target: list | None = None) -> str:
        return json.dumps({"step": step, "name": name, "value": value, "unit": "x", "target": target,
                           "kernel": "torch.ops.aten._flash_attention_forward", "gpu": "NVIDIA H100 80GB HBM3",
                           "torch": "2.9.0 CUDA 12.8", "note": ""})

    (tmp_path / "figures.jsonl").write_text("\n".join([
        figure("efficiency", "short variable / short fixed", 0.95, [">=", 0.9]),
        figure("window", "window probe", 15, [">=", 15]),
        figure("efficiency", "long variable / long fixed", 0.5, [">=", 0.9]),
        figure("bf16", "short_fixed bf16 autocast", 9e5),
        '{"step": "bf16", "name": "cut off mid-wri',                      # the step was killed while writing
    ]) + "\n")
    (tmp_path / "steps.jsonl").write_text("\n".join(json.dumps(s) for s in [
        {"step": "window", "rc": 0, "seconds": 9, "limit": 45, "last": ""},
        {"step": "efficiency", "rc": 0, "seconds": 80, "limit": 150, "last": ""},
        {"step": "bf16", "rc": 124, "seconds": 110, "limit": 110, "last": "compiling"},
        {"step": "retrieval", "rc": 1, "seconds": 3, "limit": 90, "last": "RuntimeError: boom"}]) + "\n")
    rows = check_summary.summary(tmp_path, dry=False)
    assert rows[1].startswith("PASS     window: window probe: 15 x (needs >= 15) [NVIDIA H100 80GB HBM3; torch 2.9.0")
    assert rows[2].startswith("PASS     efficiency: short variable") and rows[3].startswith("FAIL     efficiency: long")
    assert rows[4].startswith("INFO     bf16:")
    assert rows[5].startswith("STOPPED  bf16: time limit after 110 s of its 110 s; last line of bf16.log: compiling")
    assert rows[6].startswith("MISSING  retrieval: exit code 1") and "RuntimeError: boom" in rows[6]
    assert [r.split()[1] for r in rows[7:-1]] == ["parity:", "gradients:", "records:"]
    assert rows[-1] == "2 PASS, 1 FAIL, 5 MISSING/STOPPED, 1 INFO"
    assert check_summary.summary(tmp_path, dry=True)[1].startswith("DRY ")
