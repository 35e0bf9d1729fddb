"""The GPU check (benchmarks/gpu/check.sh) is one call with a deadline on a machine that returns at most 8 files
from $OUT, none more than 2 folders down: it writes four at the top of $OUT (figures, steps, logs.tar.gz, summary),
each as it goes, and its summary from an exit trap. One CPU dry run (tiny shapes) is shared by the tests that read
it (a module fixture: the dry run is the suite's cost, run once): its set-up is laid as on the GPU (a carried copy
of the interpreter's hydra, installed with pip --target, wins over the interpreter's), it runs every step, every
figure with a target before anything without one, sentence-transformers with tokenizer parallelism on, the busy
fraction with and without the first chunk's host time, the fp32 ratios labelled. A check with a short deadline
names every figure with a target or its MISSING line; the summary reads a cut-off figures file; each figure's
kernel counts its own run. (The preparation and the set-up's refusals: tests/test_gpu_prepare.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.trial.toy_data import write_beir_folder
from tests.conftest import REPO


def _load(name: str):
    """A module of benchmarks/gpu/ as the check's steps import it (``gpu.<name>``: benchmarks/ on the path)."""
    import importlib

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return importlib.import_module(f"gpu.{name}")
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


check_summary = _load("summary")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", **extra}


def _check(tmp: Path, *args: str, seconds: int | None = None, timeout: int = 900, **extra: str):
    out = tmp / "out"
    data = write_beir_folder(tmp / "data", name="scifact")
    env = _env(OUT=str(out), CHECK_DATA=str(data), CHECK_WORK=str(tmp / "work"), **extra)
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


def carried_hydra(folder: Path) -> tuple[Path, str]:
    """A wheel of the interpreter's own hydra, its version marked ``+carried``: laid over the interpreter, the dry
    run then runs on a carried library, as the GPU check runs on the carried wheels."""
    import hydra

    version = f"{hydra.__version__}+carried"
    info = f"hydra_core-{version}.dist-info"
    path = folder / f"hydra_core-{version}-py3-none-any.whl"
    source = Path(hydra.__file__).parent
    with zipfile.ZipFile(path, "w") as zf:
        for file in sorted(source.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                text = file.read_bytes()
                if file == source / "__init__.py":
                    text = text.replace(hydra.__version__.encode(), version.encode())
                zf.writestr(f"hydra/{file.relative_to(source)}", text)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: hydra-core\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return path, version


def _setup(tmp: Path, wheels: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "benchmarks/gpu/setup.sh", sys.executable, str(tmp / "work" / "site"),
                           str(tmp / "work" / "models"), "tiny", str(tmp / "setup-out"), "cpu", str(wheels)],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def dry(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The set-up as on the GPU (the carried hydra laid over the interpreter, tiny models made), then the dry run
    with the same wheels on the same work folder (its set-up finds both made: the second call)."""
    tmp = tmp_path_factory.mktemp("dry")
    (tmp / "whl").mkdir()
    _, version = carried_hydra(tmp / "whl")
    setup = _setup(tmp, tmp / "whl")
    rc, output, out = _check(tmp, "--cpu", CHECK_WHEELS=str(tmp / "whl"))
    lines = lambda name: [json.loads(line) for line in (out / name).read_text().splitlines()]  # noqa: E731
    return SimpleNamespace(tmp=tmp, setup=setup, hydra=version, rc=rc, output=output, out=out,
                           figures=lines("figures.jsonl"), steps=lines("steps.jsonl"),
                           summary=(out / "summary.txt").read_text().splitlines())


@pytest.mark.slow
def test_the_setup_lays_the_carried_wheels_over_the_interpreter_and_makes_tiny_models(dry: SimpleNamespace) -> None:
    """As on the GPU machine: pip --no-index --target <site>, PYTHONPATH=<site>:<repo>. The carried hydra wins over
    the interpreter's; torch stays the interpreter's; the harness is the checkout's; the models are made at tiny
    shapes (2 layers: one global, one local); the check's own set-up (a second call) installs and makes nothing."""
    assert dry.setup.returncode == 0, dry.setup.stdout[-2000:] + dry.setup.stderr[-2000:]
    assert "wheels: 1 from" in dry.setup.stdout and (dry.tmp / "work" / "site" / "hydra" / "__init__.py").is_file()
    (versions,) = [json.loads(line) for line in (dry.tmp / "setup-out" / "figures.jsonl").read_text().splitlines()]
    assert versions["step"] == "setup" and f"hydra {dry.hydra} (carried)" in versions["value"]
    assert "torch 2." in versions["value"] and "(image)" in versions["value"].split(";")[0]
    assert "harness " in versions["value"] and "(repo)" in versions["value"]
    for name, width, layers in (("mb", 64, 2), ("minilm", 32, 2)):
        config = json.loads((dry.tmp / "work" / "models" / name / "config.json").read_text())
        assert (config["hidden_size"], config["num_hidden_layers"]) == (width, layers)
    with tarfile.open(dry.out / "logs.tar.gz") as tar:
        again = tar.extractfile("logs/setup.log").read().decode()
    assert "already holds the 1 wheels" in again and "already in" in again
    assert f"hydra {dry.hydra} (carried)" in dry.summary[0]                     # the whole dry run ran on it


@pytest.mark.slow
def test_the_dry_run_runs_every_step_and_the_summary(dry: SimpleNamespace) -> None:
    assert dry.rc == 0, dry.output[-3000:]
    out, figures = dry.out, dry.figures
    assert {p.name for p in _returned(out)} == {"figures.jsonl", "steps.jsonl", "logs.tar.gz", "summary.txt"}
    assert all(p.parent == out for p in _returned(out))                      # none in a folder at all
    assert [s["step"] for s in dry.steps] == list(check_summary.STEPS) and all(s["rc"] == 0 for s in dry.steps)
    assert {f["step"] for f in figures} == set(check_summary.STEPS)
    assert all(f["gpu"] and f["torch"] for f in figures)
    counted = {f["step"]: f["kernel"] for f in figures if f["kernel"]}
    assert counted["efficiency"].startswith("reference") and counted["efficiency"].endswith(" on float32")
    compiled = [f for f in figures if "torch.compile" in f["name"]]
    assert [f["kernel"] for f in compiled] == ["compiled forward (torch.compile)"]     # its own run's calls only
    assert any("on float32" in f["kernel"] for f in figures if f["step"] == "task_efficiency")  # the record's dtype
    assert any(f["name"].startswith("harness encode of scifact") and "modernbert-base's shape" in f["name"]
               for f in figures if f["step"] == "encode")
    lines = dry.summary
    assert lines[0].startswith("CPU dry run") and "torch 2." in lines[0] and "transformers 5." in lines[0]
    assert lines[-1].startswith("total ") and "CHECK_SECONDS unset" in lines[-1] and "limits x" in lines[-1]
    body = lines[1:-2]
    assert body and all(" [" in line and "; torch " in line and "; kernel " in line for line in body)
    order = [line.split()[1].rstrip(":") for line in body]
    assert order == sorted(order, key=list(check_summary.STEPS).index)           # the check's order
    assert not any(line.startswith(("MISSING", "CUT", "ERROR", "FAIL")) for line in body)
    assert lines[-2].startswith("0 PASS, 0 FAIL, 0 MISSING, ") and lines[-2].endswith("; every step finished")
    with tarfile.open(out / "logs.tar.gz") as tar:
        names = tar.getnames()
    assert {f"logs/{step}.log" for step in check_summary.STEPS} <= set(names)
    assert any(n.startswith("records/eff/") and n.endswith(".json") for n in names)


@pytest.mark.slow
def test_every_figure_with_a_target_comes_before_anything_without_one(dry: SimpleNamespace) -> None:
    """The figures with a target are the summary's list (each written, with its target); they are all written
    before the information step's first figure, whose last part is the cold torch.compile; each length's variable /
    fixed comes right after its variable set's harness rate (not after the padded loop)."""
    names = [(f["step"], f["name"]) for f in dry.figures]
    targeted = [i for i, f in enumerate(dry.figures) if f["target"]]
    for step, start in check_summary.targets(dry=True):
        assert any(s == step and n.startswith(start) and dry.figures[i]["target"] for i, (s, n) in enumerate(names)), \
            (step, start)
    assert all(any(s == step and n.startswith(start) for step, start in check_summary.targets(dry=True))
               for s, n in (names[i] for i in targeted))                        # no target outside the list
    information = [i for i, (s, _) in enumerate(names) if s == "information"]
    assert max(targeted) < min(information) and "torch.compile" in names[-1][1]
    for kind in ("short", "long"):
        rate = next(i for i, (_, n) in enumerate(names) if n.startswith(f"{kind}_variable fp32 weights, harness"))
        assert names[rate + 1][1].startswith(f"{kind} variable / {kind} fixed")


@pytest.mark.slow
def test_the_figures_say_what_they_measure(dry: SimpleNamespace) -> None:
    """sentence-transformers with tokenizer parallelism on (its users' default), the harness with its own setting;
    the busy fraction with the first chunk's host time (the target) and without it (information); the harness /
    padded-loop ratios labelled as unpadding (plus precision where the attention dtypes differ), information only."""
    encode = {f["name"]: f for f in dry.figures if f["step"] == "encode"}
    st = [f for name, f in encode.items() if name.startswith("sentence-transformers encode")]
    assert st and all("tokenizer parallelism on (TOKENIZERS_PARALLELISM=true" in f["name"] for f in st)
    (ratio,) = [f for name, f in encode.items() if name.startswith("harness / best sentence-transformers")]
    assert "tokenizer parallelism on" in ratio["name"] and ratio["target"]
    (ours,) = [f for name, f in encode.items() if name.startswith("harness encode of")]
    assert "TOKENIZERS_PARALLELISM=false" in ours["note"]
    (busy,) = [f for name, f in encode.items() if name.startswith("harness encoder: GPU busy, kernel time only")]
    (without,) = [f for name, f in encode.items() if "without the first chunk's host time" in name]
    assert busy["target"] and "first chunk's host time included" in busy["name"] and "first chunk" in busy["note"]
    assert without["target"] is None and without["value"] >= busy["value"]
    ratios = [f for f in dry.figures if f["step"] == "information" and "harness / notebook loop" in f["name"]]
    assert len(ratios) == 4 and all(f["name"].endswith(", information only") and not f["target"] for f in ratios)


def test_the_sentence_transformers_side_tokenises_in_parallel() -> None:
    """Its encodes run with TOKENIZERS_PARALLELISM=true whatever the check exported, which is restored after."""
    retrieval = _load("retrieval")
    seen = []
    st = SimpleNamespace(encode=lambda docs, batch_size: seen.append(os.environ.get("TOKENIZERS_PARALLELISM")))
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        assert retrieval.st_seconds(st, ["a", "b"], 32, 2, "cpu") >= 0
        assert seen == ["true"] * 3 and os.environ["TOKENIZERS_PARALLELISM"] == "false"
    finally:
        os.environ.pop("TOKENIZERS_PARALLELISM") if before is None else os.environ.update(TOKENIZERS_PARALLELISM=before)


def test_the_busy_fraction_with_and_without_the_first_chunk() -> None:
    """The encoder's wait for its first chunk is counted (the prefetcher's first wait), and the busy fraction is
    given over the whole wall time and over the wall time less that wait."""
    import time

    from harness.encoding.prefetch import Prefetcher

    def slow(start: int, stop: int) -> list[int]:
        time.sleep(0.05 * (stop - start))
        return list(range(start, stop))

    feed = Prefetcher(slow, [(0, 4), (4, 5)], workers=1, ahead=1)
    assert list(feed) == list(range(5)) and 0.15 <= feed.first_wait_s <= feed.waited_s
    with_first, without_first, note = _load("retrieval").busy_figures(
        1.0, {"wall_s": 2.0, "first_wait_s": 0.75, "tokens": 1000}, 130)
    assert (with_first, without_first) == (0.5, 0.8) and "0.750 s" in note and "13%" in note


def test_the_fp32_ratio_labels() -> None:
    label = _load("table2").ratio_label
    assert label("torch.ops.aten._flash_attention_forward on bfloat16", "transformers sdpa on float32") == \
        "unpadding plus precision (attention bfloat16 vs float32), information only"
    assert label("reference: ... on float32", "transformers sdpa on float32").startswith("unpadding (attention")


def test_a_check_with_a_short_deadline_names_every_target_figure_or_its_missing_line(tmp_path: Path) -> None:
    """With CHECK_SECONDS=6 the set-up is cut by the deadline or finishes and the next step does not start: either
    way every figure with a target is in the summary or has its MISSING line saying why, every step that did not
    finish is named with why (the deadline, or the set-up), and the call exits 3 (nothing ran after the set-up)."""
    rc, output, out = _check(tmp_path, "--cpu", seconds=6, timeout=120)
    assert rc == 3, output[-2000:]
    text = (out / "summary.txt").read_text()
    rows = text.splitlines()
    for step, start in check_summary.targets(dry=True):
        assert any(r.split()[0] in ("DRY", "MISSING") and f" {step}: {start}" in r for r in rows), (step, start)
    steps = {s["step"]: s for s in (json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines())}
    assert list(steps) == list(check_summary.STEPS)                    # each step recorded, run or not
    assert steps["setup"]["rc"] == 0 or steps["setup"]["cut"] == "the check's deadline"
    later = [steps[s] for s in check_summary.STEPS[1:]]
    assert all(s["started"] == "no" and s["why"].startswith(("the check's deadline", "the set-up did not finish"))
               for s in later)
    assert "from CHECK_SECONDS," in rows[-1] and "steps not finished: " in rows[-2] and "window (not started: " in text
    assert {p.name for p in _returned(out)} == {"figures.jsonl", "steps.jsonl", "logs.tar.gz", "summary.txt"}


def test_the_summary_reads_what_a_cut_off_check_left(tmp_path: Path) -> None:
    def figure(step: str, name: str, value: float | str, target: list | None = None) -> str:
        return json.dumps({"step": step, "name": name, "value": value, "unit": "x", "target": target,
                           "kernel": "torch.ops.aten._flash_attention_forward on bfloat16",
                           "gpu": "NVIDIA H200", "torch": "2.11.0+cu130 CUDA 13.0", "note": ""})

    (tmp_path / "figures.jsonl").write_text("\n".join([
        figure("setup", "versions", "torch 2.11.0+cu130 (image); transformers 5.3.0 (carried)"),
        figure("window", "window probe: cases where the kernel ran its own window", 15, [">=", 15]),
        figure("efficiency", "short_fixed fp32 weights, harness", 2e5, [">=", 1.48e5]),
        figure("efficiency", "short_variable fp32 weights, harness", 1e5, [">=", 1.47e5]),
        figure("efficiency", "short variable / short fixed (fp32 weights, harness)", 0.5, [">=", 0.9]),
        '{"step": "efficiency", "name": "long_fixed fp32 weights, harn',       # the step was killed while writing
    ]) + "\n")
    (tmp_path / "steps.jsonl").write_text("\n".join(json.dumps(s) for s in [
        {"step": "setup", "rc": 0, "seconds": 20, "limit": 180},
        {"step": "window", "rc": 0, "seconds": 9, "limit": 45},
        {"step": "efficiency", "rc": 124, "seconds": 60, "limit": 60, "own_limit": 90, "cut": "the check's deadline",
         "last": "long_fixed"},
        {"step": "bf16", "started": "no", "why": "the check's deadline (2 s left)"}]) + "\n")
    rows = check_summary.summary(tmp_path, dry=False)
    assert rows[0].startswith("GPU check") and rows[0].endswith(": torch 2.11.0+cu130 (image); transformers 5.3.0 "
                                                                 "(carried)")
    assert rows[1].startswith("INFO     setup: versions")
    assert rows[2].startswith("PASS     window: window probe: cases where the kernel ran its own window: 15 x (needs "
                              ">= 15) [NVIDIA H200; torch 2.11.0")
    assert "kernel torch.ops.aten._flash_attention_forward on bfloat16]" in rows[2]
    assert rows[3].startswith("PASS     efficiency: short_fixed") and rows[4].startswith("FAIL     efficiency: short_v")
    assert rows[5].startswith("FAIL     efficiency: short variable / short fixed")
    cut = "not written (stopped by the check's deadline after 60 s (limit 60 s, its own 90 s))"
    assert [r for r in rows if r.startswith("MISSING  efficiency:")] == [
        f"MISSING  efficiency: {name}...: {cut}" for name in ("long_fixed fp32 weights", "long_variable fp32 weights",
                                                               "long variable / long fixed")]
    assert "CUT      efficiency: stopped by the check's deadline after 60 s" in rows[9]
    assert rows[9].endswith("last line of efficiency.log: long_fixed")
    assert rows[10] == "MISSING  bf16: short_fixed bf16 weights...: not written (not started: the check's deadline (2 s left))"
    assert rows[11] == "CUT      bf16: not started: the check's deadline (2 s left)"
    assert any(r.startswith("MISSING  encode: harness / best sentence-transformers...: not written (not started: "
                            "no record of it") for r in rows)
    assert rows[-1].startswith("2 PASS, 2 FAIL, 11 MISSING, 1 INFO; steps not finished: efficiency (stopped by the "
                               "check's deadline after 60 s (limit 60 s, its own 90 s)), bf16 (not started: the "
                               "check's deadline (2 s left)), encode (not started: no record of it")
    assert check_summary.summary(tmp_path, dry=True)[2].startswith("DRY ")
    (tmp_path / "figures.jsonl").write_text(figure("window", "window probe", 15, [">=", 15]) + "\n")
    assert "versions unknown (the set-up wrote none)" in check_summary.summary(tmp_path, dry=False)[0]


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
