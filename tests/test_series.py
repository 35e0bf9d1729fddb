"""A training run's checkpoints as one series (python -m harness.series): the tiny ModernBERT perturbed
deterministically into ``checkpoint-<step>`` folders, evaluated on a local BEIR folder: records keyed by step, a
resume that runs nothing, a half-written checkpoint skipped until complete, ``--watch`` picking up a checkpoint
dropped in later, a rewritten checkpoint evaluated again, the best step selected and handed on."""

from __future__ import annotations

import json
import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from harness.core import results
from harness.series.discover import compile_pattern, incomplete, listed, under
from tests.conftest import TINY_MODEL, paths, write_beir_folder

STEPS = (100, 200, 300, 400)


def write_checkpoint(root: Path, step: int, *, seed: int | None = None, marker: bool = True,
                     name: str | None = None) -> Path:
    """The tiny model with its weights moved by deterministic noise (less as the step grows, as training would),
    saved as ``checkpoint-<step>`` with the trainer's ``trainer_state.json`` written last."""
    from safetensors.numpy import load_file, save_file

    folder = root / (name or f"checkpoint-{step}")
    folder.mkdir(parents=True, exist_ok=True)
    for file in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(TINY_MODEL / file, folder / file)
    rng = np.random.default_rng(step if seed is None else seed)
    scale = 150.0 / step
    weights = {k: v + (rng.standard_normal(v.shape) * scale * v.std()).astype(v.dtype) if v.dtype.kind == "f" else v
               for k, v in load_file(str(TINY_MODEL / "model.safetensors")).items()}
    save_file(weights, str(folder / "model.safetensors"))
    if marker:
        (folder / "trainer_state.json").write_text(json.dumps(
            {"global_step": step, "epoch": step / 400, "num_input_tokens_seen": step * 4096, "log_history": []}))
    return folder


def half_written(root: Path, step: int) -> Path:
    """A checkpoint the trainer is still writing: config.json and the first half of the weights, no marker."""
    folder = write_checkpoint(root, step, marker=False)
    weights = folder / "model.safetensors"
    blob = weights.read_bytes()
    weights.write_bytes(blob[: len(blob) // 2])
    return folder


def series_args(tmp: Path, *extra: str) -> list[str]:
    return ["task=beir", "model=modernbert-base", f"model.path={tmp / 'run'}", "model.max_length=64",
            "precision=fp32", "device=cpu", "task.train=false", f"task.data_dir={tmp / 'data'}",
            "task.datasets=[scifact]", *paths(tmp), *extra]


def make_run(tmp: Path) -> Path:
    """Four checkpoints, a folder that is not one (logs/), and the local data (a BEIR folder named scifact)."""
    for step in STEPS:
        write_checkpoint(tmp / "run", step)
    (tmp / "run" / "logs").mkdir()
    write_beir_folder(tmp / "data", "scifact")
    return tmp / "run"


def series(args: list[str], capsys) -> tuple[int, str]:
    from harness.series.__main__ import main

    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    return code, out + err


def records(tmp: Path) -> dict[int, list[results.ResultRecord]]:
    """Step -> the series' records (every fingerprint), oldest first."""
    out: dict[int, list[results.ResultRecord]] = {}
    for _, r in results.iter_records(tmp / "results"):
        out.setdefault(r.details["series"]["step"], []).append(r)
    return {k: sorted(v, key=lambda r: r.created_at) for k, v in sorted(out.items())}


def test_series_end_to_end(tmp_path: Path, capsys) -> None:
    make_run(tmp_path)
    code, out = series(series_args(tmp_path), capsys)
    assert code == 0, out
    assert "series run: 4 checkpoints under" in out and "(steps 100, 200, 300, 400)" in out
    assert "not checkpoints (no step in the name, 'checkpoint-(\\d+)'): logs" in out
    assert "4 to run, 0 done, 0 skipped; estimate" in out and "GPU-hours" in out
    got = records(tmp_path)
    assert list(got) == list(STEPS) and all(len(v) == 1 for v in got.values())     # four records keyed by step
    first = {step: v[0] for step, v in got.items()}
    for step, rec in first.items():
        s = rec.details["series"]
        assert rec.model["name"] == f"run-step{step}" and s["name"] == "run"
        assert s["folder"] == str(tmp_path / "run" / f"checkpoint-{step}")
        assert s["fingerprint"] == rec.model["ref"]["fingerprint"] and s["tokens_seen"] == step * 4096
    assert len({r.run_id for r in first.values()}) == 4                               # never a shared run id
    table = out[out.index("series run: beir / scifact (ndcg_at_10)"):]
    assert [int(m) for m in re.findall(r"^\s+(\d+)\s+0\.\d{4}", table, re.M)] == list(STEPS)

    code, out = series(series_args(tmp_path), capsys)                                  # resume: nothing to run
    assert code == 0 and "0 to run, 4 done, 0 skipped" in out and "[series run] step" not in out
    assert records(tmp_path) == got

    half_written(tmp_path / "run", 500)                                                # being written: skipped
    code, out = series(series_args(tmp_path), capsys)
    assert code == 0 and "0 to run, 4 done, 1 skipped" in out
    assert re.search(r"500\s+checkpoint-500\s+beir\s+skipped: still being written: model\.safetensors: \d+ bytes, "
                     r"shorter than its header says", out)
    assert list(records(tmp_path)) == list(STEPS)

    watch_picks_up_the_fifth(tmp_path, capsys)
    rewritten_is_evaluated_again(tmp_path, capsys)
    best_step_handed_on(tmp_path, capsys)


def watch_picks_up_the_fifth(tmp: Path, capsys) -> None:
    """--watch: the half-written checkpoint is completed while the watch polls; it is evaluated once, then the watch
    stops after --idle seconds with nothing new (no timing is asserted)."""
    from harness.series.__main__ import main

    capsys.readouterr()
    done: dict[str, int] = {}
    thread = threading.Thread(target=lambda: done.update(
        code=main(series_args(tmp, "--watch", "--poll", "0.2", "--idle", "5"))))
    thread.start()
    write_checkpoint(tmp / "run", 500)                    # the trainer finishes writing: weights, then its marker
    thread.join(timeout=600)
    assert not thread.is_alive() and done["code"] == 0
    out = capsys.readouterr().out
    assert out.count("[series run] step 500 (") == 1, out                   # evaluated once
    assert "stopped watching" in out
    assert list(records(tmp)) == [*STEPS, 500]


def rewritten_is_evaluated_again(tmp: Path, capsys) -> None:
    """A checkpoint rewritten on disk has new weights: a new fingerprint, a new run id, evaluated again; the older
    record stays beside it."""
    before = records(tmp)[200]
    write_checkpoint(tmp / "run", 200, seed=7)
    code, out = series(series_args(tmp), capsys)
    assert code == 0 and "1 to run, 4 done, 0 skipped" in out
    after = records(tmp)[200]
    assert len(after) == 2 and after[0].run_id == before[0].run_id and after[1].run_id != before[0].run_id
    assert after[1].details["series"]["fingerprint"] != before[0].details["series"]["fingerprint"]


def best_step_handed_on(tmp: Path, capsys) -> None:
    """harness.select --series picks the best step on the task (newest weights only) and writes it beside the
    results; --best prints the overrides for the next step; the paper graph reads model.path=series:<name>."""
    from harness.paper.__main__ import best_step
    from harness.select import main as select

    capsys.readouterr()
    assert select(["--series", "run", "--results", str(tmp / "results")]) == 0
    printed = capsys.readouterr().out
    chosen = json.loads((tmp / "selected" / "series-run.json").read_text())
    newest = {step: recs[-1].score for step, recs in records(tmp).items()}
    best = max(newest, key=lambda s: (newest[s], -s))
    assert chosen["best"]["step"] == best and chosen["task"] == "beir" and chosen["datasets"] == ["scifact"]
    assert [s["step"] for s in chosen["steps"]] == [*STEPS, 500] and f"best: step {best}" in printed
    folder = tmp / "run" / f"checkpoint-{best}"
    code, out = series(["--best", "run", f"paths.results={tmp / 'results'}"], capsys)
    assert code == 0 and out.strip() == f"model.path={folder} model.name=run-step{best}"
    assert best_step(["task=mldr", "model.path=series:run", f"paths.results={tmp / 'results'}"]) == [
        "task=mldr", f"model.path={folder}", f"model.name=run-step{best}", f"paths.results={tmp / 'results'}"]
    write_checkpoint(tmp / "run", best, seed=99)                                    # rewritten since selected
    code, out = series(["--best", "run", f"paths.results={tmp / 'results'}"], capsys)
    assert code == 2 and "was rewritten since it was selected" in out


# ------------------------------------------------------------------------------------------------ units
def test_discovery_by_trainer_folders_a_pattern_or_a_list(tmp_path: Path) -> None:
    for rel in ("checkpoint-20", "checkpoint-3", "runs", "ep0-ba10/hf", "ep1-ba40/hf", "step_7"):
        (tmp_path / rel).mkdir(parents=True)
    found = under(tmp_path, compile_pattern(r"checkpoint-(\d+)"))
    assert [(c.step, c.folder.name) for c in found.checkpoints] == [(3, "checkpoint-3"), (20, "checkpoint-20")]
    assert "runs" in found.ignored
    deep = under(tmp_path, compile_pattern(r"ep\d+-ba(\d+)/hf"))
    assert [(c.step, c.folder.relative_to(tmp_path).as_posix()) for c in deep.checkpoints] == [
        (10, "ep0-ba10/hf"), (40, "ep1-ba40/hf")]
    explicit = listed([str(tmp_path / "step_7"), f"9={tmp_path / 'runs'}"], compile_pattern(r"step_(\d+)"))
    assert [(c.step, c.folder.name) for c in explicit.checkpoints] == [(7, "step_7"), (9, "runs")]


def test_completeness_rules(tmp_path: Path) -> None:
    """Complete: config.json, whole weights and the trainer's marker (or, without one, --settle seconds of quiet)."""
    folder = write_checkpoint(tmp_path, 100)
    assert incomplete(folder, settle=60) is None
    (folder / "trainer_state.json").write_text('{"global_step": ')                  # marker half written
    assert "trainer_state.json is not whole JSON yet" in incomplete(folder, settle=60)
    (folder / "trainer_state.json").unlink()                                         # no Trainer: quiet period
    assert "changed 0 s ago (read after 60 s of quiet, --settle)" in incomplete(folder, settle=60)
    assert incomplete(folder, settle=60, now=folder.stat().st_mtime + 3600) is None
    (folder / "config.json").unlink()
    assert incomplete(folder, settle=0) == "still being written: no config.json yet"
    sharded = write_checkpoint(tmp_path, 200)
    (sharded / "model.safetensors").rename(sharded / "model-00001-of-00002.safetensors")
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    assert "1 of 2 shards missing (model-00002-of-00002.safetensors" in incomplete(sharded, settle=0)


def test_series_table_marks_best_and_differences() -> None:
    from harness.core.console import format_series

    text = format_series("series s: beir / scifact (ndcg_at_10)",
                         [(100, 0.5, ""), (200, 0.62, ""), (300, None, "FAILED: boom"), (400, 0.6, "")])
    lines = text.splitlines()
    assert lines[2].split() == ["100", "0.5000", "-"] and lines[3].split() == ["200", "0.6200*", "+0.1200"]
    assert lines[4].split() == ["300", "-", "FAILED:", "boom"] and lines[5].split() == ["400", "0.6000", "-0.0200"]
    assert lines[-1] == "  * best step: 200 (highest score)"


@pytest.mark.parametrize("text", ["checkpoint-(\\d+", "step_\\d+", "(a)(\\d+)"])
def test_a_bad_step_pattern_is_refused(text: str) -> None:
    from harness.core.errors import HarnessError

    with pytest.raises(HarnessError, match="--step-pattern"):
        compile_pattern(text)


# ------------------------------------------------------------------------------------------------ SLURM
@pytest.mark.slurm
def test_each_checkpoint_is_one_array_task_on_slurm(tmp_path: Path, capsys, monkeypatch) -> None:
    """slurm/local-cluster.sh's cluster: two checkpoints submitted as two steps of the paper graph's kind (an array
    each, in the graph's ledger); a second look while they are queued or running submits nothing; once they have
    ended, their records are there, ``--status`` shows both steps done, and a third look has nothing to run."""
    import subprocess
    import time

    from tests.conftest import REPO

    monkeypatch.setenv("PYTHONPATH", str(REPO))          # the jobs run this checkout's code
    for step in STEPS[:2]:
        write_checkpoint(tmp_path / "run", step)
    write_beir_folder(tmp_path / "data", "scifact")
    args = series_args(tmp_path, "--launcher", "slurm", "--cluster", "local")
    ids: list[str] = []
    try:
        code, out = series(args, capsys)
        assert code == 0 and out.count("submitted as SLURM job") == 2, out
        ids = list(json.loads((tmp_path / "series" / "run" / "ledger.json").read_text()).values())
        assert len(ids) == 2 and len({i.split("_")[0] for i in ids}) == 2              # one array per checkpoint
        assert (tmp_path / "series" / "run" / "attempts.json").is_file()              # the paper graph's ledger
        code, out = series(args, capsys)
        assert code == 0 and "submitted as SLURM job" not in out                       # queued: not again
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            queued = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True).stdout.split()
            if not set(ids) & set(queued):
                break
            time.sleep(2)
        got = records(tmp_path)
        assert list(got) == list(STEPS[:2]), out
        slurm = [r[0].scheduler["slurm"] for r in got.values()]                     # a one-job array is a job
        assert {x.get("array_job_id", x["job_id"]) for x in slurm} == {i.split("_")[0] for i in ids}
        code, out = series([*args, "--status"], capsys)
        rows = [ln.split() for ln in out.splitlines() if ln.startswith("step") and ln.split()[0] != "step"]
        assert code == 0 and [row[1] for row in rows] == ["done"] * 2, out   # the header names the graph's step
        code, out = series(args, capsys)
        assert code == 0 and "0 to run, 2 done, 0 skipped" in out and "submitted" not in out
    finally:
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True)


# ------------------------------------------------------------------------------------------------ the series view
def hand_record(res: Path, step: int, score: float, *, seed: int = 42, fingerprint: str = "", when: str = "") -> None:
    """A series record as the runner writes it (details.series), for the view's rules."""
    fp = fingerprint or f"fp{step}"
    model = {"name": f"s-step{step}", "path": f"/run/checkpoint-{step}", "revision": None, "family": "ModernBERT",
             "size": "base", "ref": {"fingerprint": fp}}
    results.write_record(res, results.ResultRecord(
        task="beir", dataset="scifact", split="test", model=model, metrics={"ndcg_at_10": score},
        main_score="ndcg_at_10", run_id=f"eval-{fp}-{seed}", hyperparameters={"seed": seed},
        details={"series": {"name": "s", "step": step, "folder": f"/run/checkpoint-{step}", "fingerprint": fp}},
        created_at=when or f"2026-01-0{1 + step // 100}T00:00:00+00:00"))


def test_series_view_seed_bands_newest_weights_and_latest_row(tmp_path: Path) -> None:
    """Two seeds at a step: mean ± 1 sd; a step rewritten on disk: only its newest weights count; the tables show the
    series' latest step only; the page draws every step with Table 7's SciFact lines."""
    import statistics

    from harness.leaderboard import build, build_leaderboard

    res = tmp_path / "results"
    for seed, score in ((1, 0.50), (2, 0.54)):
        hand_record(res, 100, score, seed=seed)
    hand_record(res, 200, 0.40, fingerprint="old", when="2026-01-01T00:00:00+00:00")
    hand_record(res, 200, 0.58, fingerprint="new", when="2026-02-01T00:00:00+00:00")
    hand_record(res, 300, 0.56)
    lb = build_leaderboard([res])
    (plot,) = lb.series
    by_step = {p.step: p for p in plot.points}
    sd = statistics.stdev([50.0, 54.0])
    assert by_step[100].band == "seeds" and by_step[100].value == pytest.approx(52.0)
    assert (by_step[100].lo, by_step[100].hi) == pytest.approx((52.0 - sd, 52.0 + sd))
    assert by_step[200].value == pytest.approx(58.0) and by_step[200].n == 1          # the old weights: history
    assert plot.best.step == 200 and [name for name, _, _ in plot.refs] == ["ModernBERT-large", "ModernBERT-base"]
    runs = [k.name for k in lb.rows if k.origin != "published"]
    assert runs == ["s-step300"]                                                      # the tables: latest step
    _, files = build([res], tmp_path / "site")
    page = (tmp_path / "site" / "series.html").read_text()
    assert tmp_path / "site" / "series.html" in files and page.count('class="point"') == 3
    assert page.count('class="ref"') == 2 and 'class="best" data-step="200"' in page and "nan" not in page.lower()


def test_task_list_and_own_keys_in_the_overrides() -> None:
    from harness.core.errors import HarnessError
    from harness.series.settings import split_overrides

    rest, tasks, path, name = split_overrides(["task=beir,nanobeir", "model.path=/r", "model.name=x", "seed=1"])
    assert (rest, tasks, path, name) == (["seed=1"], ["beir", "nanobeir"], "/r", "x")
    with pytest.raises(HarnessError, match="sets series itself"):
        split_overrides(["series={step: 3}"])
