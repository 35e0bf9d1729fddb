"""The local executor: the graph's stages in dependency order on this machine, one job after another, each in
its own process, skipping finished jobs. The processes are forked from one server that imported torch,
transformers and sentence-transformers once (multiprocessing's ``forkserver``; a fresh interpreter per job where it
is not available), so a job does not spend seconds importing them again. ``afterok`` is honoured (a stage whose
upstream failed is skipped, saying why); ``afterany`` stages run whatever their upstream's outcome."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.paper.graph import AFTER_OK, Stage
from harness.paper.plan import JobState

log = logging.getLogger("harness.paper")


#: this many jobs of a stage failing first, with one error line, stop the graph: the rest would fail alike
SAME_ERROR_JOBS = 2


def run_local(stages: Sequence[Stage], states: Mapping[str, JobState], context: Path) -> int:
    """Run every unfinished job; 0 when every stage ended well, 1 otherwise (the failures are printed), 2 when the
    first :data:`SAME_ERROR_JOBS` jobs of a stage stopped with the same error line (printed once)."""
    failed: dict[str, list[str]] = {}
    for k, stage in enumerate(stages, 1):
        todo = [j for j in stage.jobs if not states[j.key].finished]
        blocked = [up for up, cond in stage.after if cond == AFTER_OK and up in failed]
        head = f"stage {k} of {len(stages)}: {stage.name} ({len(stage.jobs)} jobs, {len(stage.jobs) - len(todo)} done)"
        if blocked:
            failed[stage.name] = [f"skipped: {', '.join(blocked)} failed"]
            log.warning("%s: skipped, %s failed", head, ", ".join(blocked))
            continue
        log.warning("%s", head)
        errors: list[str | None] = []
        for i, job in enumerate(todo, 1):
            log.warning("  [%d/%d] %s", i, len(todo), job.key)
            ok = run_job_process(context, job.key) == 0
            if not ok:
                failed.setdefault(stage.name, []).append(job.key)
            errors.append(None if ok else _error_of(context, job.key))
            if i == SAME_ERROR_JOBS < len(todo) and errors[0] and len(set(errors)) == 1:
                print(f"error: {stage.name}: its first {i} jobs stopped with the same error, so its other "
                      f"{len(todo) - i} would too; the graph stops: {errors[0]}", file=sys.stderr)
                return 2
    for name, keys in failed.items():
        log.warning("failed: %s: %s", name, ", ".join(keys))
    return 1 if failed else 0


def _error_of(context: Path, key: str) -> str | None:
    from harness.paper.job import outcomes

    note = outcomes(context.parent).get(key) or {}
    error = note.get("error") if note.get("status") == "failed" else None
    return error.removeprefix(f"{key}: ") if error else None


#: what the fork server imports once, before forking a process per job
PRELOAD = ["harness.paper.job", "harness.cli", "torch", "transformers", "sentence_transformers"]


def _job(context: str, key: str) -> None:
    from harness.paper.job import main

    sys.exit(main([context, key]))


def run_job_process(context: Path, key: str) -> int:
    """Run one job in its own process (forked from the warm server); its exit code."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return subprocess.run([sys.executable, "-m", "harness.paper.job", str(context), key], check=False).returncode
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    proc = ctx.Process(target=_job, args=(str(context), key), name=key)
    proc.start()
    proc.join()
    return int(proc.exitcode or 0)
