"""Promise "one process per run": a lock file in the run's results folder (host, pid, heartbeat) makes a second
process wait for, or skip, a run another live process is computing; a dead owner's lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.core import results
from harness.run import locks, planning
from harness.run.runner import run
from tests.conftest import REPO, compose
from tests.forked import run_module
from tests.test_retrieval_runs import overrides


def run_dir(cfg) -> Path:
    plan = planning.plan(cfg)
    (cell,) = plan.cells
    return plan.record_path(cell).parent


def write_lock(folder: Path, host: str, pid: int, age: float = 0.0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / locks.LOCK_NAME
    path.write_text(json.dumps({"host": host, "pid": pid, "token": "other", "started": "2026-11-22T10:00:00"}))
    if age:
        os.utime(path, (time.time() - age, time.time() - age))
    return path


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def cfg_for(tmp: Path, data: Path, *extra: str):
    return compose(overrides(tmp, data, "task.train=false", *extra))


def test_a_live_lock_on_another_host_skips_the_run_naming_its_owner(tmp_path: Path, toy_beir: Path, caplog) -> None:
    cfg = cfg_for(tmp_path, toy_beir, "run_lock.wait=0")
    lock = write_lock(run_dir(cfg), "node-17", 4242)
    with caplog.at_level("WARNING", logger="harness.run.locks"):
        assert run(cfg) == []
    assert "node-17:4242" in caplog.text and "run_lock.wait" in caplog.text
    assert not list((tmp_path / "results").rglob("*.json"))     # nothing computed
    assert lock.exists()                                        # another process's lock is left alone


@pytest.mark.parametrize("owner", ["silent for longer than stale_after", "dead process on this host"])
def test_a_dead_owners_lock_is_taken_over(owner: str, tmp_path: Path, toy_beir: Path) -> None:
    cfg = cfg_for(tmp_path, toy_beir, "run_lock.wait=0", "run_lock.stale_after=60")
    folder = run_dir(cfg)
    if owner.startswith("silent"):
        lock = write_lock(folder, "node-17", 4242, age=120)
    else:
        lock = write_lock(folder, socket.gethostname(), dead_pid())
    (rec,) = run(cfg)
    assert rec.status == "ok"
    assert not lock.exists() and not list(folder.glob(".lock*"))   # released after the run, nothing left over


def test_a_second_run_waits_then_computes_nothing_twice(tmp_path: Path, toy_beir: Path, monkeypatch) -> None:
    """Two runners of one run at once (threads of one process, two lock tokens): the first computes, the second
    waits for its lock, plans again, finds the record and loads no model."""
    from harness.tasks.retrieval import compute

    loads = []
    original = compute.load_model

    def slow_load(plan):
        loads.append(threading.current_thread().name)
        time.sleep(1.5)                    # holds the lock while the second runner arrives
        return original(plan)

    monkeypatch.setattr(compute, "load_model", slow_load)
    cfg = cfg_for(tmp_path, toy_beir, "run_lock.wait=60", "run_lock.stale_after=10")
    out: dict[str, list] = {}
    first = threading.Thread(target=lambda: out.setdefault("first", run(cfg)), name="first")
    second = threading.Thread(target=lambda: out.setdefault("second", run(cfg)), name="second")
    first.start()
    deadline = time.monotonic() + 30
    while not (run_dir(cfg) / locks.LOCK_NAME).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    second.start()
    first.join(60)
    second.join(60)
    assert loads == ["first"]                                  # the model was loaded once: one computation
    assert out["first"][0].created_at == out["second"][0].created_at
    assert len(list((tmp_path / "results").rglob("toy.json"))) == 1


HOLDER = """
import sys, time
from pathlib import Path
from harness.run import locks
lock = locks.RunLock(Path(sys.argv[1]))
assert lock.try_acquire(60) is None
with locks.Heartbeat([lock], 0.2):
    print("held", flush=True)
    while not Path(sys.argv[2]).exists():
        time.sleep(0.05)
lock.release()
"""


def test_another_process_holding_the_run_makes_the_cli_wait(tmp_path: Path, toy_beir: Path) -> None:
    """Across processes, through the command line: skipped at once with run_lock.wait=0; with a wait, computed
    once the holder releases."""
    args = overrides(tmp_path, toy_beir, "task.train=false")
    folder, release = run_dir(compose(args)), tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), str(release)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        cli = [sys.executable, "-m", "harness", *args]
        skip = run_module("harness", *args, "run_lock.wait=0", cwd=REPO, env=env, timeout=300)
        assert skip.returncode == 0, skip.stderr[-2000:]
        assert f"{socket.gethostname()}:{holder.pid}" in skip.stdout + skip.stderr
        assert not list((tmp_path / "results").rglob("toy.json"))
        waiter = subprocess.Popen([*cli, "run_lock.wait=300"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        assert waiter.stdout is not None
        seen = []
        for line in waiter.stdout:          # it reports the lock, then waits for it
            seen.append(line)
            if "is locked by" in line:
                break
        release.touch()
        seen += waiter.stdout.readlines()
        assert waiter.wait(300) == 0, "".join(seen)[-2000:]
    finally:
        release.touch()
        holder.wait(30)
    (path,) = (tmp_path / "results").rglob("toy.json")
    assert results.read_record(path).status == "ok"
    assert not (folder / locks.LOCK_NAME).exists()


def test_lock_settings_are_typed() -> None:
    from harness.core.errors import HarnessError
    from harness.run.runner import lock_settings

    with pytest.raises(HarnessError, match="stale_after"):
        lock_settings({"stale": 3})
    assert lock_settings(compose([]).run_lock).stale_after == 300   # conf/config.yaml writes the default
    with pytest.raises(HarnessError, match=r"run_lock needs the key 'stale_after'"):
        lock_settings(None)


def test_kill_9_mid_run_then_a_rerun_keeps_what_finished(tmp_path: Path) -> None:
    """Promise "resume": a run killed with SIGKILL (no clean-up at all) leaves whole records and a dead lock; the
    rerun takes the lock over at once (its owner is gone), keeps the finished record byte for byte and computes
    only the rest."""
    import signal

    from tests.conftest import write_beir_folder

    write_beir_folder(tmp_path / "data", "toy")
    write_beir_folder(tmp_path / "data", "big", docs_per_topic=400)
    args = [*overrides(tmp_path, tmp_path / "data", "task.train=false"), "task.datasets=[toy,big]",
            "+task.catalog.big={split: test}", "run_lock.stale_after=3600"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    first = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=REPO, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list((tmp_path / "results").rglob("toy.json")) and time.monotonic() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    (toy,) = (tmp_path / "results").rglob("toy.json")
    kept = toy.read_bytes()
    killed_mid_run = not list((tmp_path / "results").rglob("big.json"))
    rerun = run_module("harness", *args, cwd=REPO, env=env, timeout=300)    # the killed one needed a real process
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert toy.read_bytes() == kept                                   # finished before the kill: untouched
    assert "skip beir/toy" in rerun.stdout + rerun.stderr
    assert killed_mid_run and "taking over the stale lock" in rerun.stdout + rerun.stderr
    recs = {r.dataset: r.status for _, r in results.iter_records(tmp_path / "results")}
    assert recs == {"toy": "ok", "big": "ok"}
    assert not list((tmp_path / "results").rglob(".lock*"))
