"""What evaluates a series' runs: here, or one SLURM array per checkpoint.

Here (:func:`run_all`): each checkpoint's run through the one loop (:func:`harness.runner.run`), one after another,
in step order. A checkpoint that fails is noted and the others go on; its failed records are beside any earlier good
ones (the runner's rule), and the next run of the series computes it again.

``--launcher slurm`` (:class:`Submitter`): each checkpoint's runs are one stage of the paper graph's kind, submitted
by the paper graph's SLURM executor (:func:`harness.paper.slurm.submit`: one array per stage, the same
``ledger.json`` and ``attempts.json``, the same job runner, the same ``--status``). A look at the folder that finds
new complete checkpoints submits them (with ``--watch``, as they appear). Nothing stays alive on the login node but
the watch.

The series' bookkeeping is ``<results>/../series/<name>/``: its ``context.json`` holds every stage submitted so far
(a job finds its own there), the ledger maps each run (task, step, weights' fingerprint) to its SLURM id. A run still
queued or running is not submitted again; a finished one has its records (the plan skips it); a failed one is
submitted again by the next command (a watch reports it and goes on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, one_line
from harness.results import atomic_write_json
from harness.series.plan import Plan, Unit, plan_unit, stages


def run_unit(unit: Unit, log_dir: str | None = None) -> str | None:
    """Compute one checkpoint's run (``log_dir``: ``hydra.run.dir``, under which its log goes); returns None when
    every cell has an ok record, else the one-line failure."""
    from harness import runner
    from harness.paper.hydra_overrides import job_log_dir, log_file
    from harness.paper.plan import composed

    assert unit.job is not None
    print(f"[series {unit.series['name']}] step {unit.step} ({unit.checkpoint.folder}): "
          f"{unit.task or 'default task'}, {unit.cells - unit.done} of {unit.cells} cells", flush=True)
    try:
        with composed(unit.job.overrides) as cfg, log_file(job_log_dir(log_dir, unit.key) if log_dir else None):
            runner.run(cfg)
    except HarnessError as exc:   # runner.RunFailed (failed cells) among them
        error = one_line(exc)
    else:
        error = None
    plan_unit(unit)
    if error is None and unit.todo:
        error = f"{unit.cells - unit.done} of {unit.cells} cells have no ok record"
    return error


def run_all(plan: Plan) -> tuple[dict[str, str], int]:
    """Every run the plan has left, here in step order: (unit key -> failure for those that failed, how many ran)."""
    failures: dict[str, str] = {}
    todo = sorted(plan.todo, key=lambda u: (u.step, u.task or ""))
    for unit in todo:
        error = run_unit(unit, plan.settings.log_dir)
        if error:
            failures[unit.key] = error
            print(f"[series {unit.series['name']}] step {unit.step} failed: {error}", flush=True)
    return failures, len(todo)


def folder_of(plan: Plan) -> Path:
    """Where the series' SLURM bookkeeping lives: ``series/<name>/`` beside the results folder."""
    unit = next(u for u in plan.units if u.state is not None and u.state.results)
    return Path(str(unit.state.results)).resolve().parent / "series" / plan.settings.name


def write_context(folder: Path, units: list[Unit], log_dir: str | None = None) -> Path:
    """``context.json`` with every stage submitted so far and ``units``' (by stage name; a stage submitted again
    is replaced by its new jobs), and where the jobs' logs go (``hydra.run.dir``, or None)."""
    path = folder / "context.json"
    known = {s["name"]: s for s in (json.loads(path.read_text())["stages"] if path.exists() else [])}
    known |= {s.name: s.to_dict() for s in stages(units)}
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"stages": list(known.values()), "log_dir": log_dir})
    return path


class Submitter:
    """The SLURM launcher of one command: submits a plan's runs that are not queued or running already through the
    paper graph's executor, one array per checkpoint; each run is submitted at most once by it (a watch does not
    resubmit a job that failed every poll: it reports it; the next command submits it again)."""

    def __init__(self, cluster: dict[str, Any]) -> None:
        self.cluster = cluster
        self.submitted: dict[str, str] = {}   # run key -> SLURM id, by this command

    def __call__(self, plan: Plan) -> tuple[dict[str, str], int]:
        from harness.paper.slurm import LIVE, queue, read_ledger, submit

        if not plan.todo:
            return {}, 0
        q = queue()
        live = {k for k, i in self.submitted.items() if q.get(i, ("", ""))[0] in LIVE}
        failures = {u.key: f"SLURM job {self.submitted[u.key]} ended without every record (python -m harness.series"
                           " ... --status has its error line)"
                    for u in plan.todo if u.key in self.submitted and u.key not in live}
        todo = [u for u in plan.todo if u.key not in self.submitted]
        if not todo:
            return failures, 0
        folder = folder_of(plan)
        before = read_ledger(folder)[0]
        context = write_context(folder, todo, plan.settings.log_dir)
        submit(stages(todo), {u.key: u.state for u in todo}, context, self.cluster, folder, q)
        ledger = read_ledger(folder)[0]
        started = {u.key: ledger[u.key] for u in todo if u.key in ledger and ledger[u.key] != before.get(u.key)}
        for unit in todo:
            if unit.key in started:
                print(f"[series {plan.settings.name}] step {unit.step}: submitted as SLURM job {started[unit.key]}",
                      flush=True)
        self.submitted |= started
        return failures, len(started)


def status_lines(plan: Plan, cluster: dict[str, Any]) -> list[str]:
    """The paper graph's ``--status`` over the series' stages: each checkpoint's state from its records and the
    SLURM queue, the failed cells' (or jobs') error lines, device-hours spent against the estimate."""
    from harness.paper import cost, show

    units = [u for u in plan.units if u.state is not None]
    if not units:
        return ["nothing planned: no checkpoint could be read"]
    states = {u.key: u.state for u in units}
    tp = cost.throughput(units[0].state.model, units[0].state.results)
    return show.status(stages(units), states, tp, cluster, folder_of(plan))
