"""``python -m <module> ARGS`` for the tests, in a process forked from a server that imported torch, transformers
and sentence-transformers once (multiprocessing's ``forkserver``), instead of a fresh interpreter that spends
seconds importing them. The child gets the same argv, working directory, environment, umask and captured output
as a subprocess would; tests that need a real interpreter (signals, kill -9, SLURM) keep ``subprocess``.

No side effects on import: the fork server imports this module.
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

PRELOAD = ["tests.forked", "harness.cli", "harness.select", "torch", "transformers", "sentence_transformers"]


def _child(module: str, args: Sequence[str], cwd: str, env: Mapping[str, str], umask: int | None,
           out: str, err: str) -> None:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    if umask is not None:
        os.umask(umask)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def run_module(module: str, *args: str, cwd: str | Path, env: Mapping[str, str] | None = None,
               umask: int | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """What ``subprocess.run([python, "-m", module, *args], capture_output=True, text=True, ...)`` returns."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    with tempfile.TemporaryDirectory(prefix="forked-") as tmp:
        out, err = Path(tmp, "out"), Path(tmp, "err")
        out.touch()
        err.touch()
        proc = ctx.Process(target=_child, args=(module, list(args), str(cwd), dict(env or os.environ), umask,
                                                 str(out), str(err)))
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join()
            raise subprocess.TimeoutExpired([module, *args], timeout, out.read_text(), err.read_text())
        return subprocess.CompletedProcess([sys.executable, "-m", module, *args], int(proc.exitcode or 0),
                                           out.read_text(errors="replace"), err.read_text(errors="replace"))
