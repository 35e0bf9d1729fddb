"""Which trained weights a family evaluates: the training lineage of MLDR and code records.

The paper evaluates MLDR (out-of-domain), CodeSearchNet and StackOverflow-QA with the DPR model ``task=beir``
trained on MS MARCO, never retraining it. ``task.source`` names that model: the run a family's selection rule
picks (``selected``, the same code as ``harness.select``), one run id, or ``null`` for ``model.path`` as is (any
local checkpoint). The resolved run id and the trained weights' fingerprint replace ``model.ref`` in the run
identity, so a new selection is a new run, and every record carries the lineage in ``details.lineage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import layout, results
from harness.core.errors import HarnessError, closest_first

if TYPE_CHECKING:
    from harness.core.results import ResultRecord


@dataclass(kw_only=True)
class SourceSettings:
    """``task.source``: the weights a run evaluates."""

    task: str                       # the family whose trained runs are read
    run: str | None                 # selected | <run id> | null (model.path as is)
    required: bool                  # run=selected and this model has no run: error (true) or model.path (false)
    results: str | None             # where that family's records are read (null: paths.results)


@dataclass(frozen=True)
class Lineage:
    """The resolved source: ``model_dir`` is None when ``model.path`` itself is evaluated."""

    mode: str                       # selected | run | model
    task: str | None = None
    run_id: str | None = None
    model_dir: str | None = None    # the run's trained model directory
    fingerprint: str | None = None  # its weights fingerprint, as the run recorded it
    lr: float | None = None         # the run's learning rate (the selected DPR LR)
    note: str = ""

    def ref(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """What the run identity hashes instead of ``model.ref``."""
        if self.model_dir is None:
            return {**base, **({"source_run": self.run_id, "source_task": self.task} if self.run_id else {})}
        return {"fingerprint": self.fingerprint, "source_run": self.run_id, "source_task": self.task}

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}


def resolve(source: SourceSettings, results_dir: str, model_name: str) -> Lineage:
    """The lineage ``source`` names for ``model_name`` (reads records only; loads no model)."""
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


#: why ``task.source`` is left out of the run identity: it is hashed as what it resolves to
SOURCE = "resolved into model.ref: the source run id and its trained weights' fingerprint"
