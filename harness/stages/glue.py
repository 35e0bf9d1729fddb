"""``task=glue``'s computation, from the run's plan: every task's data loaded first (a missing file or an offline hub
fails before any training), the decay check, then each grid point fine-tuned and evaluated in order
(:mod:`harness.families.glue.point`), one record each; after an in-process sweep, the GLUE selection."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from harness import results
from harness.errors import HarnessError
from harness.results import ResultRecord
from harness.runplan import Cell, RunPlan
from harness.specs.glue import TASK_FAMILY

log = logging.getLogger(__name__)


def run(plan: RunPlan, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
    from harness.families.glue.decay import check_decay
    from harness.families.glue.point import hyperparameters, load_data, run_point
    from harness.glue_scores import score_key
    from harness.training import tracking

    s = plan.settings
    names = {c.dataset for c in todo}
    data = load_data([t for t in plan.stages.tasks if t.name in names], s)   # data problems before any model
    check_decay([c.payload[0] for c in todo], {t: len(d.train) for t, d in data.items()}, s)
    ctx = context(plan)
    for i, cell in enumerate(todo, 1):
        point, init = cell.payload
        d = data[point.task]
        rec = plan.header.record(
            cell, model=ctx.model, split="validation", metrics={}, hyperparameters=hyperparameters(point, s, init),
            main_score=score_key(d.task.metric, len(d.dev) > 1), data_fingerprint=d.fingerprint,
        )
        log.info("[%d/%d] %s %s (init: %s)", i, len(todo), point.task, rec.run_id, init.kind)
        tracker = tracking.tracker(plan.config, run_id=cell.run_id, record_path=plan.record_path(cell),
                                   task=plan.task, model=plan.model_name)
        run_point(point, d, init, rec, ctx, tracker)
        log.info("[%d/%d] %s %s: %s %s", i, len(todo), point.task, rec.run_id, rec.status,
                 f"{rec.main_score}={rec.score:.2f}" if rec.status == results.STATUS_OK else rec.error)
        yield rec


def finish(plan: RunPlan, planned: Sequence[Cell], records: Sequence[ResultRecord]) -> None:
    """After an in-process sweep (more than one grid point planned), write the GLUE selection (best configuration
    per task)."""
    if len(planned) > 1:
        from harness import selection

        res, experiment = plan.layout.results, plan.header.experiment
        path = selection.write_selection(TASK_FAMILY, res, selection.default_out_dir(res, experiment),
                                         plan.model_name, experiment)
        if path is not None:
            log.info("GLUE selection (best configuration per task on dev): %s", path)


def context(plan: RunPlan) -> Any:
    """What every grid point of the run shares: the model, its tokenizer, the device, where its files go."""
    from transformers import AutoTokenizer

    from harness import models
    from harness.families.glue.point import RunContext

    spec = plan.model
    model_dir, revision = models.resolve_path(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=spec.trust_remote_code)
    except (OSError, ValueError) as exc:
        raise HarnessError(f"could not load the tokenizer of model {spec.name!r} from {model_dir}: {exc}") from exc
    return RunContext(
        tcfg=plan.settings, spec=spec, model_dir=model_dir, model=models.model_identity(spec, model_dir, revision),
        tokenizer=tokenizer, device=plan.device, precision=plan.precision, layout=plan.layout,
        run_name=plan.config.get("run_name"),
    )
