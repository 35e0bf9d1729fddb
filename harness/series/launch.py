"""What evaluates a series' runs: here (:func:`run_all`, in step order), or ``--launcher slurm`` (:class:`Submitter`:
through the paper graph's SLURM executor); a queued or running run is not submitted again, a failed one is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, one_line
from harness.core.results import atomic_write_json
from harness.series.units import Series, Unit, steps, with_state


def run_unit(unit: Unit, log_dir: str | None = None) -> str | None:
    """Compute one checkpoint's run (its log under ``log_dir``); None when every cell is ok, else the failure line."""
    from harness.paper.hydra_overrides import job_log_dir, log_file
    from harness.paper.progress import composed
    from harness.run import runner
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
    with_state(unit)
    if error is None and unit.todo:
        error = f"{unit.cells - unit.done} of {unit.cells} cells have no ok record"
    return error


def run_all(series: Series) -> tuple[dict[str, str], int]:
    """Every run the series has left, here in step order: (unit key -> failure for those that failed, how many ran)."""
    failures: dict[str, str] = {}
    todo = sorted(series.todo, key=lambda u: (u.step, u.task or ""))
    for unit in todo:
        error = run_unit(unit, series.settings.log_dir)
        if error:
            failures[unit.key] = error
            print(f"[series {unit.series['name']}] step {unit.step} failed: {error}", flush=True)
    return failures, len(todo)


def folder_of(series: Series) -> Path:
    """Where the series' SLURM bookkeeping lives: ``series/<name>/`` beside the results folder."""
    unit = next(u for u in series.units if u.state is not None and u.state.results)
    return Path(str(unit.state.results)).resolve().parent / "series" / series.settings.name


def write_context(folder: Path, units: list[Unit], log_dir: str | None = None) -> Path:
    """``context.json``: every step submitted so far with ``units``' (replacing a resubmitted step), and ``log_dir``."""
    path = folder / "context.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    known = {s["name"]: s for s in old.get("steps", old.get("stages", []))}   # "stages": before steps were named so
    known |= {s.name: s.to_dict() for s in steps(units)}
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"steps": list(known.values()), "log_dir": log_dir})
    return path


class Submitter:
    """The SLURM launcher of one command: a series's runs through the paper graph's executor, each once."""

    def __init__(self, cluster: dict[str, Any]) -> None:
        self.cluster = cluster
        self.submitted: dict[str, str] = {}   # run key -> SLURM id, by this command

    def __call__(self, series: Series) -> tuple[dict[str, str], int]:
        from harness.paper.slurm import LIVE, queue, read_ledger, submit
        if not series.todo:
            return {}, 0
        q = queue()
        live = {k for k, i in self.submitted.items() if q.get(i, ("", ""))[0] in LIVE}
        failures = {u.key: f"SLURM job {self.submitted[u.key]} ended without every record (python -m harness.series"
                           " ... --status has its error line)"
                    for u in series.todo if u.key in self.submitted and u.key not in live}
        todo = [u for u in series.todo if u.key not in self.submitted]
        if not todo:
            return failures, 0
        folder = folder_of(series)
        before = read_ledger(folder)[0]
        context = write_context(folder, todo, series.settings.log_dir)
        submit(steps(todo), {u.key: u.state for u in todo}, context, self.cluster, folder, q)
        ledger = read_ledger(folder)[0]
        started = {u.key: ledger[u.key] for u in todo if u.key in ledger and ledger[u.key] != before.get(u.key)}
        for unit in todo:
            if unit.key in started:
                print(f"[series {series.settings.name}] step {unit.step}: submitted as SLURM job {started[unit.key]}",
                      flush=True)
        self.submitted |= started
        return failures, len(started)


def status_lines(series: Series, cluster: dict[str, Any]) -> list[str]:
    """The paper graph's ``--status`` over the series' steps."""
    from harness.paper import cost, show
    units = [u for u in series.units if u.state is not None]
    if not units:
        return ["nothing planned: no checkpoint could be read"]
    states = {u.key: u.state for u in units}
    tp = cost.throughput(units[0].state.model, units[0].state.results)
    return show.status(steps(units), states, tp, cluster, folder_of(series))
