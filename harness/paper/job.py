"""One job of the paper graph as SLURM or the local executor runs it (``python -m harness.paper.job CONTEXT KEY``; a
failed job exits non-zero, so ``afterok`` dependents never start), and the local executor (:func:`run_local`)."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import selection, specs
from harness.core import layout, results
from harness.core.errors import HarnessError, one_line, print_error
from harness.paper import graph, progress
from harness.paper.hydra_overrides import run_dir_override
from harness.selection.comparable import set_aside_lines
from harness.selection.rules import rule_for

log = logging.getLogger("harness.paper")


class JobFailed(HarnessError):
    """A job of the graph did not finish its work (the message is its one line)."""


def load(context: str | Path) -> tuple[dict[str, Any], list[str], list[graph.Step]]:
    """The graph a context file describes: rebuilt from the paper config and overrides, or its steps (a series)."""
    ctx = json.loads(Path(context).read_text())
    steps = ctx.get("steps", ctx.get("stages"))   # "stages": written before the graph's steps were named so
    if steps is not None:
        return {}, [], [graph.Step.from_dict(s) for s in steps]
    return ctx["paper"], ctx["common"], graph.build(ctx["paper"], ctx["common"])


def outcomes(folder: Path) -> dict[str, dict[str, Any]]:
    """Every job's last attempt in ``folder`` (key -> started, ended, status, error, slurm ids)."""
    out = {}
    for path in sorted((folder / "jobs").glob("*.json")):
        try:
            got = json.loads(path.read_text())
        except (ValueError, OSError):
            continue
        if isinstance(got, dict):    # a job's own note of its attempt; the records stay what decides 'done'
            out[str(got.get("key"))] = got
    return out


def _note(context: str, key: str, started: str, error: str | None) -> None:
    """Job ``key``'s last attempt, noted beside the context: ``<paper folder>/jobs/<key>.json``."""
    from harness.core.scheduler import SLURM_VARS
    slurm = {k: os.environ[v] for k, v in SLURM_VARS.items() if os.environ.get(v)}
    path = Path(context).parent / "jobs" / f"{key.replace('/', '_')}.json"
    results.atomic_write_json(path, {"key": key, "started": started, "ended": _now(), "status": "failed" if error
                                     else "ok", "error": error, "slurm": slurm})


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def run_job(context: str, key: str) -> None:
    """Run the job ``key`` of ``context``'s graph, noting the attempt for ``--status``; raises :class:`JobFailed`."""
    started, error = _now(), None
    try:
        _run(context, key)
    except BaseException as exc:     # SystemExit too: a job stopped by SIGTERM (scancel, requeue) is noted
        error = one_line(exc) if isinstance(exc, Exception) else f"stopped ({exc!r})"
        raise
    finally:
        _note(context, key, started, error)


def _run(context: str, key: str) -> None:
    paper, common, steps = load(context)
    job = next((j for s in steps for j in s.jobs if j.key == key), None)
    if job is None:
        raise JobFailed(f"no job {key!r} in the paper graph of {context}")
    logs = json.loads(Path(context).read_text()).get("log_dir")   # hydra.run.dir given to the command
    where = [run_dir_override(logs, job.key)] if logs else []
    if job.mode == "run":
        _harness(job.key, [*job.overrides, *where])
    elif job.mode == "report":
        overrides = progress.selected_overrides(job, _upstream(job, steps))
        if overrides is None:
            raise JobFailed(f"{job.key}: {job.source}'s runs have no usable record to select from")
        _harness(job.key, [*overrides, *where])
    elif job.mode == "select":
        select(job, _upstream(job, steps), float(paper.get("min_finished", 0.5)))
    else:
        leaderboard(paper, common)


def _upstream(job: graph.Job, steps: Sequence[graph.Step]) -> list[progress.JobState]:
    return [progress.job_state(j) for s in steps if progress.feeds(s.name, job) for j in s.jobs]


def _harness(key: str, overrides: Sequence[str]) -> None:
    """``python -m harness OVERRIDES`` in this process (one per job already), so the libraries are imported once."""
    from harness import cli
    print(f"[{key}] python -m harness {' '.join(overrides)}", flush=True)
    argv, sys.argv = sys.argv, [sys.argv[0], *overrides]
    stderr = sys.stderr = _ErrorLine(sys.stderr)
    try:
        cli.main()
        rc: object = 0
    except SystemExit as exc:
        rc = exc.code
    finally:
        sys.argv, sys.stderr = argv, stderr.stream
    if rc not in (0, None):
        said = stderr.line or f"exited {rc} without an error line (see the job's log)"
        raise JobFailed(f"{key}: python -m harness: {said.removeprefix('error: ')}")


class _ErrorLine:
    """``sys.stderr`` as it is, remembering the last ``error: ...`` line written to it (the harness's own)."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.line, self._part = stream, "", ""

    def write(self, text: str) -> int:
        self._part += text
        *lines, self._part = self._part.split("\n")
        self.line = next((x for x in reversed(lines) if x.startswith("error: ")), self.line)
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def select(job: graph.Job, upstream: Sequence[progress.JobState], min_finished: float) -> None:
    """The selection over the sweep's own runs; refuses when fewer than ``min_finished`` of them finished."""
    relevant = [s for s in upstream if not job.datasets or set(job.datasets) & graph._datasets_of(s.job)]
    finished = [s for s in relevant if s.finished]
    failed = [f"{s.job.key}: {s.failed[0]}" for s in relevant if s.failed]
    if not relevant or len(finished) < min_finished * len(relevant):
        raise JobFailed(f"{job.key}: {len(finished)} of {len(relevant)} runs finished, fewer than "
                        f"{min_finished:.0%} (paper.min_finished); failed: {'; '.join(failed) or 'none recorded'}")
    recs = progress.sweep_records(job.task, relevant, job.datasets)
    choice = progress.choose(job.task, recs)
    if choice is None:
        aside = set_aside_lines(recs)
        raise JobFailed(f"{job.key}: no usable record among {len(relevant)} runs"
                        + (f"; set aside: {aside[0]}" if aside else ""))
    res = next(s.results for s in relevant if s.results)
    name = str(choice.model.get("name"))
    path = layout.selection_path(layout.selection_dir(res), job.task, name)
    results.atomic_write_json(path, selection.jsonable(choice.summary))
    print(rule_for(specs.get(job.task).selection).format(choice), f"\n  -> {path}", flush=True)
    if failed:
        print(f"{job.key}: {len(failed)} of {len(relevant)} runs failed: {'; '.join(failed)}", flush=True)


def settle(steps: Sequence[graph.Step], states: dict[str, progress.JobState], paper: Mapping[str, Any]
           ) -> dict[str, progress.JobState]:
    """'Done' for a selection or the leaderboard: built after every input it reads was last written."""
    res = next((s.results for s in states.values() if s.results), None)
    name = next((str(s.model.get("name")) for s in states.values() if s.model.get("name")), None)
    if res is None or name is None:
        return states
    notes = outcomes(Path(res).resolve().parent / "paper" / name)
    for s in states.values():
        if s.job.mode == "select" and s.finished and not _selection_current(s.job, steps, res, name, notes):
            s.done = 0
    others = all(s.finished for s in states.values() if s.job.mode != "leaderboard")
    for state in states.values():
        if state.job.mode == "leaderboard" and state.finished and not (others and _site_current(paper, res)):
            state.done = 0
    return states


def _stamp(note: Mapping[str, Any] | None) -> float:
    try:
        return _dt.datetime.fromisoformat(str((note or {})["ended"])).timestamp()
    except (KeyError, ValueError):
        return 0.0


def _selection_current(job: graph.Job, steps: Sequence[graph.Step], res: str, name: str,
                       notes: Mapping[str, Mapping[str, Any]]) -> bool:
    path = layout.selection_path(layout.selection_dir(res), job.task, name)
    if not path.is_file():
        return False
    made = path.stat().st_mtime
    ended = max((_stamp(notes.get(j.key)) for s in steps if progress.feeds(s.name, job) for j in s.jobs), default=0.0)
    own = notes.get(job.key) or {}
    return made >= ended and not (own.get("status") == "failed" and _stamp(own) >= made)


def _site_current(paper: Mapping[str, Any], res: str) -> bool:
    index = (Path(paper["site"]) if paper.get("site") else Path(res).resolve().parent / "site") / "index.html"
    inputs = [*Path(res).rglob("*.json"), *layout.selection_dir(res).glob("*.json")]
    newest = max((f.stat().st_mtime for f in inputs if f.is_file()), default=0.0)
    return index.is_file() and index.stat().st_mtime >= newest


def leaderboard(paper: dict[str, Any], common: Sequence[str]) -> Path:
    from harness.leaderboard import build
    res = Path(str(progress.config_of(common).paths.results))
    out = Path(paper["site"]) if paper.get("site") else res.resolve().parent / "site"
    build([res], out)
    print(f"leaderboard: {out / 'index.html'}", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m harness.paper.job CONTEXT.json JOB_KEY", file=sys.stderr)
        return 2
    try:
        run_job(*args)
    except HarnessError as exc:
        return print_error(exc, 1)
    return 0


#: this many jobs of a step failing first, with one error line, stop the graph: the rest would fail alike
SAME_ERROR_JOBS = 2


def run_local(steps: Sequence[graph.Step], states: Mapping[str, progress.JobState], context: Path) -> int:
    """Run every unfinished job; 0: every step ended well, 1: failures, 2: a step's first jobs failed alike."""
    failed: dict[str, list[str]] = {}
    for k, step in enumerate(steps, 1):
        todo = [j for j in step.jobs if not states[j.key].finished]
        blocked = [up for up, cond in step.after if cond == graph.AFTER_OK and up in failed]
        head = f"step {k} of {len(steps)}: {step.name} ({len(step.jobs)} jobs, {len(step.jobs) - len(todo)} done)"
        if blocked:
            failed[step.name] = [f"skipped: {', '.join(blocked)} failed"]
            log.warning("%s: skipped, %s failed", head, ", ".join(blocked))
            continue
        log.warning("%s", head)
        errors: list[str | None] = []
        for i, job in enumerate(todo, 1):
            log.warning("  [%d/%d] %s", i, len(todo), job.key)
            ok = run_job_process(context, job.key) == 0
            if not ok:
                failed.setdefault(step.name, []).append(job.key)
            errors.append(None if ok else _error_of(context, job.key))
            if i == SAME_ERROR_JOBS < len(todo) and errors[0] and len(set(errors)) == 1:
                print(f"error: {step.name}: its first {i} jobs stopped with the same error, so its other "
                      f"{len(todo) - i} would too; the graph stops: {errors[0]}", file=sys.stderr)
                return 2
    for name, keys in failed.items():
        log.warning("failed: %s: %s", name, ", ".join(keys))
    return 1 if failed else 0


def _error_of(context: Path, key: str) -> str | None:
    note = outcomes(context.parent).get(key) or {}
    error = note.get("error") if note.get("status") == "failed" else None
    return error.removeprefix(f"{key}: ") if error else None


#: what the fork server imports once, before forking a process per job
PRELOAD = ["harness.paper.job", "harness.cli", "torch", "transformers", "sentence_transformers"]


def _job(context: str, key: str) -> None:
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


if __name__ == "__main__":
    sys.exit(main())
