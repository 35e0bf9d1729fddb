"""One job of the paper graph, as SLURM or the local executor runs it: ``python -m harness.paper.job CONTEXT KEY``.

The job rebuilds the graph from the context file (the paper config and the overrides every job gets), finds its own
entry and runs it: a harness run, a selection over its sweep's records (refused with one line when too few points
finished), the selected configuration on every dataset, or the leaderboard. A failed job exits non-zero, so the
scheduler marks it FAILED and ``afterok`` dependents never start.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import layout, results, selection, specs
from harness.errors import HarnessError, one_line, print_error
from harness.paper import graph, plan
from harness.selection.rules import rule_for


class JobFailed(HarnessError):
    """A job of the graph did not finish its work (the message is its one line)."""


def load(context: str | Path) -> tuple[dict[str, Any], list[str], list[graph.Stage]]:
    """The graph a context file describes: the paper config and the overrides every job gets (rebuilt, as the
    login node built it), or the stages themselves (a checkpoint series: one stage per checkpoint)."""
    ctx = json.loads(Path(context).read_text())
    if "stages" in ctx:
        return {}, [], [graph.Stage.from_dict(s) for s in ctx["stages"]]
    return ctx["paper"], ctx["common"], graph.build(ctx["paper"], ctx["common"])


def outcome_path(folder: Path, key: str) -> Path:
    """Where job ``key`` notes its last attempt: ``<paper folder>/jobs/<key>.json``."""
    return folder / "jobs" / f"{key.replace('/', '_')}.json"


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


def _note(path: Path, key: str, started: str, error: str | None) -> None:
    from harness.scheduler import SLURM_VARS

    slurm = {k: os.environ[v] for k, v in SLURM_VARS.items() if os.environ.get(v)}
    results.atomic_write_json(path, {"key": key, "started": started, "ended": _now(), "status": "failed" if error
                                     else "ok", "error": error, "slurm": slurm})


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def run_job(context: str, key: str) -> None:
    """Run the job ``key`` of the graph in ``context``, noting the attempt beside the context (start, end, outcome:
    what ``--status`` shows for jobs that fail before any record, e.g. a refused selection); raises
    :class:`JobFailed` on failure."""
    path, started = outcome_path(Path(context).parent, key), _now()
    try:
        _run(context, key)
    except BaseException as exc:     # SystemExit too: a job stopped by SIGTERM (scancel, requeue) is noted
        _note(path, key, started, one_line(exc) if isinstance(exc, Exception) else f"stopped ({exc!r})")
        raise
    _note(path, key, started, None)


def _run(context: str, key: str) -> None:
    paper, common, stages = load(context)
    job = next((j for s in stages for j in s.jobs if j.key == key), None)
    if job is None:
        raise JobFailed(f"no job {key!r} in the paper graph of {context}")
    if job.mode == "run":
        _harness(job.key, job.overrides)
    elif job.mode == "report":
        overrides = plan.selected_overrides(job, _upstream(job, stages))
        if overrides is None:
            raise JobFailed(f"{job.key}: {job.source}'s runs have no usable record to select from")
        _harness(job.key, overrides)
    elif job.mode == "select":
        select(job, _upstream(job, stages), float(paper.get("min_finished", 0.5)))
    else:
        leaderboard(paper, common)


def _upstream(job: graph.Job, stages: Sequence[graph.Stage]) -> list[plan.JobState]:
    return [plan.plan_run(j) for s in stages if plan.feeds(s.name, job) for j in s.jobs]


def _harness(key: str, overrides: Sequence[str]) -> None:
    """``python -m harness OVERRIDES`` in this process (a job is one process per run already: SLURM's, or the
    local executor's), so torch and the libraries are imported once per job, not twice."""
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


def select(job: graph.Job, upstream: Sequence[plan.JobState], min_finished: float) -> None:
    """The selection over the sweep's own runs; refuses when fewer than ``min_finished`` of them finished."""
    relevant = [s for s in upstream if not job.datasets or set(job.datasets) & graph._datasets_of(s.job)]
    finished = [s for s in relevant if s.finished]
    failed = [f"{s.job.key}: {s.failed[0]}" for s in relevant if s.failed]
    if not relevant or len(finished) < min_finished * len(relevant):
        raise JobFailed(f"{job.key}: {len(finished)} of {len(relevant)} runs finished, fewer than "
                        f"{min_finished:.0%} (paper.min_finished); failed: {'; '.join(failed) or 'none recorded'}")
    choice = plan.choose(job.task, relevant, job.datasets)
    if choice is None:
        raise JobFailed(f"{job.key}: no usable record among {len(relevant)} runs")
    res = next(s.results for s in relevant if s.results)
    name = str(choice.model.get("name"))
    path = layout.selection_path(layout.selection_dir(res), job.task, name)
    results.atomic_write_json(path, selection.jsonable(choice.summary))
    print(rule_for(specs.get(job.task).selection).format(choice), f"\n  -> {path}", flush=True)
    if failed:
        print(f"{job.key}: {len(failed)} of {len(relevant)} runs failed: {'; '.join(failed)}", flush=True)


def settle(stages: Sequence[graph.Stage], states: dict[str, plan.JobState], paper: Mapping[str, Any]
           ) -> dict[str, plan.JobState]:
    """'Done' means the products are there and built from the records: a selection job is done only when its
    selection file was written after every attempt of its sweep's jobs ended (and its own last attempt did not fail
    since), the leaderboard only when every other job is done and the site is newer than every record and
    selection. A selection or site made before a re-run's records is made again."""
    res = next((s.results for s in states.values() if s.results), None)
    name = next((str(s.model.get("name")) for s in states.values() if s.model.get("name")), None)
    if res is None or name is None:
        return states
    notes = outcomes(Path(res).resolve().parent / "paper" / name)
    for stage in stages:
        for job in stage.jobs:
            state = states[job.key]
            if job.mode == "select" and state.finished and not _selection_current(job, stages, res, name, notes):
                state.done = 0
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


def _selection_current(job: graph.Job, stages: Sequence[graph.Stage], res: str, name: str,
                       notes: Mapping[str, Mapping[str, Any]]) -> bool:
    path = layout.selection_path(layout.selection_dir(res), job.task, name)
    if not path.is_file():
        return False
    made = path.stat().st_mtime
    ended = max((_stamp(notes.get(j.key)) for s in stages if plan.feeds(s.name, job) for j in s.jobs), default=0.0)
    own = notes.get(job.key) or {}
    return made >= ended and not (own.get("status") == "failed" and _stamp(own) >= made)


def _site_current(paper: Mapping[str, Any], res: str) -> bool:
    index = (Path(paper["site"]) if paper.get("site") else Path(res).resolve().parent / "site") / "index.html"
    inputs = [*Path(res).rglob("*.json"), *layout.selection_dir(res).glob("*.json")]
    newest = max((f.stat().st_mtime for f in inputs if f.is_file()), default=0.0)
    return index.is_file() and index.stat().st_mtime >= newest


def leaderboard(paper: dict[str, Any], common: Sequence[str]) -> Path:
    from harness.leaderboard import build

    with plan.composed(common) as cfg:
        res = Path(str(cfg.paths.results))
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


if __name__ == "__main__":
    sys.exit(main())
