"""Which cells of a run still need computing, and a part job (one corpus shard, ``task.shard``): shared by the
runner and the per-device shard processes (``families/devices.py``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from harness import results
from harness.families.base import Cell, Family

log = logging.getLogger("harness.runner")


def pending(family: Family, cells: Sequence[Cell], results_dir: str, overwrite: bool) -> list[Cell]:
    """The cells without an ok record of the same definition (all of them with ``overwrite``)."""
    todo = []
    for cell in cells:
        rec = results.finished_record(results_dir, family.name, family.model_name, cell.run_id, cell.dataset)
        if rec is not None and cell.spec is not None and rec.details.get("data_spec") != cell.spec:
            rec = None   # same run, but the dataset means other data now: evaluate again (see store)
        if rec is None or overwrite:
            todo.append(cell)
        else:
            log.info("skip %s/%s: record exists for run %s (overwrite=true to redo)", family.name, cell.dataset,
                     cell.run_id)
    return todo


def run_part(family: Family, results_dir: str, overwrite: bool) -> None:
    """A part job (one corpus shard, ``task.shard``): the unfinished cells' part, into the cache. It takes no run
    lock (the parts of one run compute side by side) and writes no record (the run that merges them does)."""
    for cells in family.rounds():
        todo = pending(family, cells, results_dir, overwrite)
        if todo:
            family.check(todo)
            family.run_part(todo)
