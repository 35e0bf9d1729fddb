"""``plan(cfg)``: the one planning of a run (runner, paper graph, series, cost preview), from config and records
only: the spec's planner (:data:`PLANNERS`) builds the :class:`~harness.tasks.runplan.RunPlan`."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from harness.core import file_hash, layout, results
from harness.core.errors import HarnessError, closest_first
from harness.core.layout import RunLayout
from harness.core.registry import Registry
from harness.core.results import ResultRecord
from harness.core.typed import build
from harness.tasks.efficiency.planner import EfficiencyPlanner
from harness.tasks.glue.planner import GluePlanner
from harness.tasks.mteb.planner import MtebPlanner
from harness.tasks.retrieval import beir, code, colbert, mldr
from harness.tasks.runplan import Cell, Lineage, RunPlan, Setup, SourceSettings

#: ``spec.runner`` -> its planner, called with the run's :class:`Setup` (its ``settings_class`` types ``cfg.task``)
PLANNERS: Registry[Any] = Registry("runner", {
    "beir": beir.BEIR, "code": code.CODE, "colbert": colbert.COLBERT, "efficiency": EfficiencyPlanner,
    "glue": GluePlanner, "mldr": mldr.MLDR, "mteb": MtebPlanner,
}, hint="Register it in PLANNERS of harness/run/planning.py.")


def setup_of(cfg: Any, *, source: bool = True) -> Setup:
    """What every planner starts from; ``source``: resolve ``task.source`` when the planner first asks."""
    from omegaconf import OmegaConf

    from harness.specs import spec_from
    config = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(config, dict)
    task = config["task"]
    name = str(task["name"])   # = the records' ``task`` and the record path's first folder
    spec = spec_from(task.get("spec") or {}, name, f"task {name!r}, spec")
    resolver = partial(source_of, cfg, task["source"], name) if source and task.get("source") is not None else None
    where = RunLayout.of(cfg.paths)
    file_hash.use_cache(where.file_hashes())   # the local files' hashes a data spec reads, kept with the run's caches
    return Setup(cfg=cfg, config=config, name=name, spec=spec, layout=where, resolve_source=resolver,
                 task={k: v for k, v in task.items() if k != "spec"})


def planner_for(setup: Setup) -> Any:
    """The planner the task's spec names, after the checks that need no model and no data."""
    from harness.selection.rules import rule_for
    spec = setup.spec
    planner = PLANNERS.lookup(spec.runner)
    produced = getattr(planner, "metrics", None)   # None: each record's own (GLUE, mteb, efficiency)
    if produced is not None and spec.main_metric not in produced:
        raise HarnessError(f"task {spec.name!r}: spec.main_metric={spec.main_metric!r} is not a metric the "
                           f"{spec.runner} scorer produces ({', '.join(produced)}): set spec.main_metric to one of them")
    rule_for(spec.selection)
    _ = setup.device
    return planner


def planner_of(cfg: Any, *, source: bool = True) -> Any:
    """The planner of the composed config ``cfg``, checked (:func:`planner_for`), its settings typed."""
    setup = setup_of(cfg, source=source)
    return planner_for(setup)(setup)


def plan(cfg: Any, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0, source: bool = True
         ) -> RunPlan[Any, Any]:
    """The run ``cfg`` composes, planned: round ``round``'s cells and the work of a ``mode`` job."""
    setup = setup_of(cfg, source=source)
    return planner_for(setup).plan(setup, mode=mode, skip=skip, round=round)


def every_cell(cfg: Any, first: RunPlan[Any, Any]) -> list[Cell]:
    """The cells of every round of the run whose first round is ``first``, as they can be planned now."""
    cells, last, i = list(first.cells), first, 0
    while last.later:
        i += 1
        last = plan(cfg, round=i)
        cells += last.cells
    return cells


# -------------------------------------------------------------------------------- task.source: the run evaluated
def source_of(cfg: Any, node: Any, name: str) -> Lineage | None:
    """The trained run ``task.source`` names for the config's model (from records); None: no source."""
    source = build(SourceSettings, node, f"task {name!r}", key="task.source")
    if source.task is None:
        return None
    results_dir = str(source.results or cfg.paths.results)
    model_name = str(cfg.model.name)
    if source.run is None:
        return Lineage("model", note="model.path evaluated as is (task.source.run=null)")
    from harness import specs
    specs.get(source.task)   # an unknown task fails with the valid names
    folder = layout.model_folder(results_dir, source.task, model_name)
    recs = [r for _, r in results.iter_records(folder, warn=False)
            if r.task == source.task and (r.model or {}).get("name") == model_name
            and r.status == results.STATUS_OK] if folder.is_dir() else []
    if source.run == "selected":
        if not recs:
            if not source.required:
                return Lineage("model", source.task, note=f"no task={source.task} run of {model_name} under "
                               f"{results_dir}: model.path evaluated as is")
            raise HarnessError(
                f"no task={source.task} record of model {model_name!r} under {results_dir}, so there is no selected "
                f"run to evaluate. Train it first (python -m harness -m sweep=beir-lr model={model_name}), name a run "
                "(\"task.source.run='<run id>'\", quoted: run ids contain =), point at other results "
                "(task.source.results=<dir>), or evaluate model.path as is (task.source.run=null)."
            )
        return _from_run(source, _selected_run(source.task, recs, model_name), recs, "selected")
    if not any(r.run_id == source.run for r in recs):
        known = closest_first(source.run, {r.run_id for r in recs})
        raise HarnessError(
            f"task.source.run={source.run!r}: no task={source.task} run with that id for model {model_name!r} under "
            f"{results_dir}. Known run ids (closest first): {', '.join(known) or 'none'}. Pick one (python -m "
            f"harness.select --task {source.task} lists them), or task.source.run=null to evaluate model.path as is."
        )
    return _from_run(source, source.run, recs, "run")


def _selected_run(task: str, recs: list[ResultRecord], model_name: str) -> str:
    from harness import selection
    choice = selection.choose(task, recs, model_name)[model_name]
    run_id = choice.summary.get("selected_run_id")
    if run_id:
        return str(run_id)
    runs = sorted({r.run_id for rs in choice.cells.values() for r in rs})
    if len(runs) != 1:
        raise HarnessError(f"task={task}'s selection picks {len(runs)} runs for {model_name!r} (one per dataset), "
                           "not one model; name the run to evaluate with \"task.source.run='<run id>'\".")
    return runs[0]


def _from_run(source: SourceSettings, run_id: str, recs: list[ResultRecord], mode: str) -> Lineage:
    run = [r for r in recs if r.run_id == run_id]
    trained = next((r.model["trained"] for r in run if (r.model or {}).get("trained")), None)
    hp = run[0].hyperparameters or {}
    if not trained:
        return Lineage(mode, source.task, run_id,
                       note=f"run {run_id} did not train: model.path evaluated as that run evaluated it")
    model_dir = str(trained.get("model_dir") or "")
    if not model_dir or not Path(model_dir).is_dir():
        raise HarnessError(
            f"the trained model of task={source.task} run {run_id} is gone ({model_dir or 'no model_dir recorded'}). "
            f"Re-run that configuration (python -m harness task={source.task} ... retrains it), or pass its "
            "checkpoint as model.path=<dir> with task.source.run=null."
        )
    lr = hp.get("lr")
    model_dir = str(Path(model_dir).resolve())
    return Lineage(mode, source.task, run_id, model_dir, trained.get("fingerprint"),
                   float(lr) if isinstance(lr, int | float) else None)
