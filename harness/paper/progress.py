"""What each job of the graph has done, from records alone: its cells planned exactly as its run would plan them, then
looked up; a job that cannot be planned yet (its upstream selection has no records) is waiting, with the reason."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from harness import specs
from harness.core import results
from harness.core.console import seconds
from harness.core.errors import HarnessError, one_line
from harness.paper import cost
from harness.paper.graph import Job, Step
from harness.run import planning
from harness.selection.comparable import comparable_records
from harness.selection.rules import rule_for
from harness.tasks import runplan


@dataclass
class JobState:
    """A job's cells: how many, how many have an ok record, the failed ones' one-line errors."""

    job: Job
    cells: int = 0
    done: int = 0
    failed: list[str] = field(default_factory=list)
    run_ids: tuple[str, ...] = ()
    waiting: str | None = None
    results: str | None = None      # the results folder its records go to
    work: cost.Work = field(default_factory=cost.Work)
    seconds: float = 0.0            # what its records say they took
    model: dict[str, Any] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)   # '<record path> (why)': a record there, not readable
    paths: list[Path] = field(default_factory=list)       # where its cells' records are, one per cell
    pending: list[Any] = field(default_factory=list)      # its cells not done (harness.tasks.runplan.done)
    stale: list[str] = field(default_factory=list)        # 'dataset (run id)': a finished record of other data
    plan: Any = None                # its first round's RunPlan

    @property
    def finished(self) -> bool:
        return self.waiting is None and self.cells > 0 and self.done == self.cells


@cache
def base_config(overrides: tuple[str, ...]) -> Any:
    """The config ``overrides`` compose, once per set (shared: changed only inside :func:`composed`, undone there)."""
    from harness.run.overrides import compose_config
    return compose_config(overrides)


def config_of(overrides: Sequence[str]) -> Any:
    """:func:`base_config`, Hydra's own errors as one line (callers do not change the config)."""
    try:
        return base_config(tuple(overrides))
    except Exception as exc:   # Hydra's own errors, after harness.run.overrides' checks: one line
        raise HarnessError(f"the overrides {' '.join(overrides)} do not compose: {one_line(exc)}; fix them as for "
                           "python -m harness") from None


@cache
def config_groups() -> frozenset[str]:
    """The config groups (``conf/<group>/``, and hydra's): an override naming one is composed by Hydra."""
    from importlib import resources
    return frozenset(p.name for p in Path(str(resources.files("conf"))).iterdir() if p.is_dir()) | {"hydra"}


def is_group(override: str) -> bool:
    """Whether Hydra composes ``override`` (a group choice, an added or deleted key), not a value (``task.lr=1e-5``)."""
    key = override.partition("=")[0]
    return override.startswith(("+", "~")) or key.split("/")[0] in config_groups()


@contextmanager
def composed(overrides: Sequence[str]) -> Iterator[Any]:
    """The job's config as the CLI composes it, group choices composed once per set (a 384-point grid: a few)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf
    groups = tuple(o for o in overrides if is_group(o))
    cfg = base_config(groups)
    parser = OverridesParser.create()
    saved: list[tuple[str, Any]] = []
    try:
        for text in overrides:
            if text not in groups:   # typed as Hydra types them: 1e-5 a float, [a,b] a list
                (o,) = parser.parse_overrides([text])
                saved.append((o.key_or_group, OmegaConf.select(cfg, o.key_or_group, throw_on_missing=False)))
                OmegaConf.update(cfg, o.key_or_group, o.value(), merge=False)
        yield cfg
    finally:
        for key, old in reversed(saved):
            OmegaConf.update(cfg, key, old, merge=False)


def job_state(job: Job, overrides: Sequence[str] | None = None) -> JobState:
    """A ``run`` (or resolved ``report``) job's cells and their records."""
    state = JobState(job)
    try:
        with composed(overrides if overrides is not None else job.overrides) as cfg:
            spec = specs.get(str(cfg.task.name))
            skip = spec.selection.sets if job.mode == "report" else ()
            try:
                first = planning.plan(cfg, mode=job.mode, skip=skip)
            except HarnessError:   # its source run not selected yet: what it will cost all the same
                with suppress(HarnessError):
                    state.work = cost.job_work(planning.plan(cfg, mode=job.mode, skip=skip, source=False))
                raise
            state.work = cost.job_work(first)
            state.model = {k: cfg.model.get(k) for k in ("name", "family", "size")}
            cells = planning.every_cell(cfg, first)
            res = first.layout.results
    except HarnessError as exc:
        state.waiting = str(exc).split(". ")[0]
        return state
    paths = [_cell_path(res, first.task, first.model_name, c) for c in cells]
    state.results, state.cells, state.paths, state.plan = res, len(cells), paths, first
    state.run_ids = tuple(sorted({c.run_id for c in cells} | {p.parent.name for p in paths}))
    trained: dict[str, float] | None = None if job.mode == "report" else {}
    for c, path in zip(cells, paths, strict=True):
        rec = results.finished_at(path)
        if runplan.done(rec, c, overwrite=first.overwrite):   # the runner's own answer: it skips this cell
            state.done += 1
            state.seconds += _seconds(rec, trained)
            continue
        state.pending.append(c)
        if rec is not None:   # finished, but on data the dataset no longer holds (or overwrite): computed again
            if runplan.stale(rec, c):
                state.stale.append(f"{c.dataset} ({c.run_id})")
        elif path.is_file():
            try:
                failed = results.read_record(path)
            except (ValueError, OSError, TypeError) as exc:   # truncated, not a record: the cell's state is unknown
                state.unreadable.append(f"{path} ({' '.join(str(exc).split())[:120]})")
                continue
            state.failed.append(f"{c.dataset} ({c.run_id}): {failed.error}")
            state.seconds += _seconds(failed, trained)
    return state


def _cell_path(res: str, task: str, model: str, cell: Any) -> Path:
    """``cell``'s record: its run id's path, or (a ``plan_key`` cell) the record claiming the key, finished first."""
    path = results.record_path(res, task, model, cell.run_id, cell.dataset)
    if cell.plan_key is None or path.is_file():
        return path
    claims = []
    for other in sorted(path.parent.parent.glob(f"*/{path.name}")):
        try:
            rec = results.read_record(other)
        except (ValueError, OSError, TypeError):
            continue
        if (rec.details or {}).get("plan_key") == cell.plan_key:
            claims.append((rec.status in (results.STATUS_OK, results.STATUS_SKIPPED), rec.created_at, other))
    return max(claims, key=lambda c: c[:2])[2] if claims else path   # the newest finished claim, else the newest


def _seconds(rec: results.ResultRecord, trained: dict[str, float] | None) -> float:
    """The seconds a record's timings add up to, plus its run's training once (``trained`` None: not)."""
    own = seconds(rec.timings or {})
    train = ((rec.model or {}).get("trained") or {}).get("train_s")
    if trained is not None and isinstance(train, int | float) and rec.run_id not in trained:
        trained[rec.run_id] = float(train)
        own += float(train)
    return own


def selected_overrides(job: Job, upstream: Sequence[JobState]) -> list[str] | None:
    """A report job's overrides plus the sweep values of the run its selection picks; None while there is none."""
    choice = choose(job.task, sweep_records(job.task, upstream, job.datasets))
    if choice is None:
        return None
    first = next(iter(choice.cells.values()))[0]
    return [*job.overrides, *(f"{k}={_get(first.config, k)}" for k in job.params)]


def choose(task: str, recs: Sequence[results.ResultRecord]) -> Any:
    """The task's selection rule over ``recs`` (the upstream jobs' runs, one model: :func:`sweep_records`), or None."""
    if not recs:
        return None
    spec = specs.get(task)
    choices = rule_for(spec.selection).choose(recs, key=spec.column_of)
    return next(iter(choices.values()), None)


def sweep_records(task: str, upstream: Sequence[JobState], datasets: Sequence[str] = ()) -> list[results.ResultRecord]:
    """The upstream jobs' records, each in its column's score (:mod:`harness.selection.comparable`)."""
    ids = {rid for s in upstream for rid in s.run_ids}
    res = next((s.results for s in upstream if s.results), None)
    if not ids or res is None:
        return []
    return [r for _, r in comparable_records(res, warn=False)
            if r.task == task and r.run_id in ids and (not datasets or r.dataset in datasets)]


def _get(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node


def job_states(steps: Sequence[Step]) -> dict[str, JobState]:
    """Every job's state, by job key, step by step (report jobs resolved through their upstream's records)."""
    out: dict[str, JobState] = {}
    by_step: dict[str, list[JobState]] = {}
    for step in steps:
        by_step[step.name] = [_state_of(job, by_step) for job in step.jobs]
        out |= {s.job.key: s for s in by_step[step.name]}
    return out


def _state_of(job: Job, by_step: Mapping[str, list[JobState]]) -> JobState:
    if job.mode == "run":
        return job_state(job)
    upstream = [s for name, states in by_step.items() if feeds(name, job) for s in states]
    if job.mode == "report":
        overrides = selected_overrides(job, upstream)
        if overrides is None:
            state = job_state(job, [*job.overrides, "task.train=false"])   # its size, before the selection exists
            state.cells, state.done, state.failed, state.run_ids = 0, 0, [], ()
            state.waiting = f"waits for {job.source}.select"
            return state
        return job_state(job, overrides)
    state = JobState(job, cells=1)
    if job.mode == "select":
        state.done = int(bool(upstream) and all(s.finished for s in upstream))
    elif job.mode == "leaderboard":
        state.done = int(all(s.finished for states in by_step.values() for s in states))
    return state


def feeds(step: str, job: Job) -> bool:
    """Whether ``step``'s records are what ``job`` selects among (a sweep, its head and chained parts)."""
    return job.source is not None and (step == job.source or step.startswith(job.source + ".")) \
        and not step.endswith((".select", ".report", ".shards"))
