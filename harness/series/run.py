"""Running a series here: each checkpoint's run through the one loop (:func:`harness.runner.run`), one after
another, in step order. A checkpoint that fails is noted and the others go on; its failed records are beside any
earlier good ones (the runner's rule), and the next run of the series computes it again."""

from __future__ import annotations

from harness.errors import HarnessError, one_line
from harness.series.plan import Plan, Unit, plan_unit


def run_unit(unit: Unit) -> str | None:
    """Compute one checkpoint's run; returns None when every cell has an ok record, else the one-line failure."""
    from harness import runner
    from harness.paper.plan import composed

    assert unit.job is not None
    print(f"[series {unit.series['name']}] step {unit.step} ({unit.checkpoint.folder}): "
          f"{unit.task or 'default task'}, {unit.cells - unit.done} of {unit.cells} cells", flush=True)
    try:
        with composed(unit.job.overrides) as cfg:
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
    """Every run the plan has left, in step order: (unit key -> failure for those that failed, how many ran)."""
    failures: dict[str, str] = {}
    todo = sorted(plan.todo, key=lambda u: (u.step, u.task or ""))
    for unit in todo:
        error = run_unit(unit)
        if error:
            failures[unit.key] = error
            print(f"[series {unit.series['name']}] step {unit.step} failed: {error}", flush=True)
    return failures, len(todo)
