"""``task=mteb``: any mteb task or benchmark by name, evaluated by mteb itself on the model the harness loads, a record
per task and split; ``task.task_files``: Python files defining your own. mteb is imported only if it runs."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.core import file_hash, results
from harness.core.errors import HarnessError, closest_first
from harness.core.registry import Registry
from harness.core.typed import build, count, excluded, nonempty
from harness.core.work import Work
from harness.data.sizes import BYTES_PER_TOKEN
from harness.specs import task_node
from harness.specs.stages import Stage
from harness.tasks.mteb import compute
from harness.tasks.mteb.benchmark import aggregates, benchmark_tasks
from harness.tasks.mteb.compute import MtebStages
from harness.tasks.runplan import SOURCE, Cell, RunPlan, Setup, SourceSettings, excluded_keys, with_files

#: task=mteb's one stage, with its protocol version (its code: :mod:`harness.tasks.mteb.compute`)
STAGES: Registry[Stage] = Registry("stage", {
    "evaluate.mteb": Stage(1, what="mteb's own evaluation of a task by name"),
}, hint="Declare it in STAGES of harness/tasks/mteb/planner.py.")


@dataclass(kw_only=True)
class MtebSettings:
    """``task.*`` of conf/task/mteb.yaml (documented there)."""

    name: str
    tasks: list[str] = nonempty(excluded="which tasks to run: each task and split is its own cell of the same run")
    hf_subsets: dict[str, list[str]] = excluded("each cell's subsets are part of its task spec")
    eval_splits: dict[str, list[str]] = excluded("each cell's split is part of its task spec")
    task_files: list[str] = excluded("a local task's file content is part of its task spec")
    benchmark: str | None = excluded("which tasks to run (the benchmark's, in place of task.tasks)")
    task_types: list[str] = excluded("which of the benchmark's tasks to run")
    source: SourceSettings = excluded(SOURCE)
    batch_size: int = count(excluded="how texts are batched for the encoder")


@dataclass(frozen=True)
class LocalTask:
    """A task class from ``task.task_files`` and the file that defines it."""

    cls: type
    source: str
    sha: str


@dataclass(frozen=True)
class TaskFiles:
    """What ``task.task_files`` define: mteb tasks by name, and mteb benchmarks (``mteb.Benchmark`` values) by name."""

    tasks: dict[str, LocalTask]
    benchmarks: dict[str, Any]


def load_task_files(entries: Sequence[str]) -> TaskFiles:
    """The mteb task classes and benchmarks each file (``my_tasks.py``) or module (``pkg.tasks``) defines."""
    from mteb import Benchmark
    from mteb.abstasks import AbsTask
    out = TaskFiles({}, {})
    for entry in entries:
        module, path, sha = _import(entry)
        classes = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, AbsTask)
                   and c.__module__ == module.__name__ and getattr(c, "metadata", None) is not None]
        benchmarks = [b for b in vars(module).values() if isinstance(b, Benchmark)]
        if not classes and not benchmarks:
            raise HarnessError(f"task.task_files: {entry} defines no mteb task (a subclass of an mteb AbsTask* class "
                               "with a `metadata = TaskMetadata(...)`) and no mteb.Benchmark")
        for cls in classes:
            out.tasks[cls.metadata.name] = LocalTask(cls, str(path.resolve()) if path.is_file() else entry, sha)
        out.benchmarks.update({b.name: b for b in benchmarks})
    return out


def _import(entry: str) -> tuple[Any, Path, str]:
    """(module, its file, the file's sha256) of a task file's path or a module's name."""
    path = Path(entry).expanduser()
    if entry.endswith(".py") or "/" in entry:
        if not path.is_file():
            raise HarnessError(f"task.task_files: {entry} does not exist (give a .py file or a module name that "
                               "defines mteb tasks)")
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        spec = importlib.util.spec_from_file_location(f"harness_mteb_tasks_{sha[:12]}", path)
        if spec is None or spec.loader is None:
            raise HarnessError(f"task.task_files: cannot import {path} as Python")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module, path, sha
    try:
        module = importlib.import_module(entry)
    except ImportError as exc:
        raise HarnessError(f"task.task_files: cannot import module {entry!r}: {exc}") from exc
    source = Path(getattr(module, "__file__", "") or "")
    return module, source, hashlib.sha256(source.read_bytes()).hexdigest() if source.is_file() else entry


def dataset_files(path: str | None) -> list[Path]:
    """The files at a local task's ``metadata.dataset`` path (a hub id names none), hidden ones left out."""
    if not path or not str(path).startswith(("/", ".", "~")):
        return []
    where = Path(str(path)).expanduser()
    if where.is_file():
        return [where]
    return sorted(p for p in where.rglob("*")
                  if p.is_file() and not any(x.startswith(".") for x in p.relative_to(where).parts))


class MtebPlanner:
    """mteb's evaluation, the harness' model loading, one record per (task, split)."""

    settings_class = MtebSettings

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.settings = build(MtebSettings, setup.task, f"task {setup.name!r}", key="task")
        self.identity_exclude = excluded_keys(MtebSettings)

    # ---------------------------------------------------------------------------------------- planning
    @cached_property
    def mteb(self) -> Any:
        return compute.require_mteb("task=mteb")

    @cached_property
    def files(self) -> TaskFiles:
        return load_task_files(list(self.settings.task_files)) if self.settings.task_files else TaskFiles({}, {})

    @property
    def local_tasks(self) -> dict[str, LocalTask]:
        return self.files.tasks

    @cached_property
    def tasks(self) -> dict[str, Any]:
        """Task name -> mteb task object restricted to the configured subsets and splits, no data loaded."""
        s = self.settings
        if s.benchmark is None:
            if s.task_types:
                raise HarnessError(f"task.task_types={s.task_types} picks among a benchmark's tasks, and no "
                                   "task.benchmark is set: set task.benchmark=<an mteb benchmark's name>, or list "
                                   "the tasks in task.tasks")
            return {name: self._task(name) for name in s.tasks}
        if list(s.tasks) != list(task_node("mteb").get("tasks") or []):
            raise HarnessError(f"task.benchmark={s.benchmark!r} runs that benchmark's own tasks (its aggregate needs all "
                               f"of them) and task.tasks={list(s.tasks)} names tasks to run without one: it would be "
                               "ignored; drop task.tasks to run the benchmark, or set task.benchmark=null to run those "
                               "tasks alone")
        return {t.metadata.name: t for t in benchmark_tasks(self.mteb, s.benchmark, self.files.benchmarks,
                                                            s.task_types)}

    def _task(self, name: str) -> Any:
        s = self.settings
        splits, subsets = s.eval_splits.get(name), s.hf_subsets.get(name)
        if name in self.files.tasks:
            task = self.files.tasks[name].cls()
        else:
            try:
                task = self.mteb.get_task(name)
            except KeyError:
                known = [t.metadata.name for t in self.mteb.get_tasks()] + list(self.local_tasks)
                raise HarnessError(
                    f"unknown mteb task {name!r}; closest: {', '.join(closest_first(name, known)[:8])} (mteb "
                    f"{self.mteb.__version__} has {len(known)} tasks; tasks on your own data: "
                    "task.task_files=[my_tasks.py])") from None
        meta = task.metadata
        if splits and not set(splits) <= set(meta.eval_splits):
            raise HarnessError(f"task.eval_splits.{name}={splits}: {name} has splits {meta.eval_splits}")
        if subsets and not set(subsets) <= set(meta.hf_subsets):
            raise HarnessError(f"task.hf_subsets.{name}={subsets}: {name} has subsets {meta.hf_subsets}")
        if splits:
            task.filter_eval_splits(eval_splits=splits)
        return task.filter_languages(None, None, hf_subsets=subsets)   # as mteb.get_task does

    def run_identity(self) -> dict[str, Any]:
        from importlib.metadata import PackageNotFoundError, version
        try:
            mteb_version = version("mteb")
        except PackageNotFoundError:
            mteb_version = None
        return self.setup.identity(STAGES, self.identity_exclude, replace={"task.mteb_version": mteb_version})   # mteb's evaluator makes the number

    def mteb_task_spec(self, name: str, split: str) -> str:
        """What defines a cell's data and scoring: task, revision, split, subsets and its local files."""
        task = self.tasks[name]
        meta = task.metadata
        local = self.local_tasks.get(name)
        return with_files(results.stable_hash({
            "task": name, "type": meta.type, "dataset": dict(meta.dataset), "split": split,
            "subsets": sorted(task.hf_subsets), "main_score": meta.main_score, "file": local.sha if local else None,
        }), self.local_files(name))

    def local_files(self, name: str) -> dict[str, Any] | None:
        """The local files a task reads, fingerprinted (its task file, a local dataset); None for mteb's own."""
        local = self.local_tasks.get(name)
        if local is None or not Path(local.source).is_file():
            return None
        return file_hash.describe([local.source, *dataset_files(self.tasks[name].metadata.dataset.get("path"))])

    def cells(self) -> list[Cell]:
        ident = self.run_identity()
        rid = results.run_id(ident, {"eval": self.setup.precision})
        out, datasets = [], {}
        for name, task in self.tasks.items():
            first = task.metadata.eval_splits[0]
            for split in task.eval_splits:   # a record's dataset: the task for its main split, else <task>-<split>
                dataset = name if split == first else f"{name}-{split}"
                out.append(Cell(dataset, rid, ident, self.mteb_task_spec(name, split), (name, split),
                                files=self.local_files(name)))
                datasets[name] = (*datasets.get(name, ()), dataset)
        if self.settings.benchmark is not None:
            specs = {c.dataset: c.spec for c in out}
            for agg in aggregates(self.settings.benchmark, self.tasks, datasets, self.settings.task_types):
                spec = results.stable_hash({"members": [specs[d] for ds in agg.tasks.values() for d in ds],
                                            "type": agg.task_type, "benchmark": agg.benchmark})
                out.append(Cell(agg.column, rid, ident, spec, agg))
        return out

    def work(self) -> Work:
        """What the run encodes: each task's texts, from mteb's descriptive statistics (none: nothing counted)."""
        w = Work()
        for task in self.tasks.values():
            stats = task.metadata.descriptive_stats or {}
            for split in task.eval_splits:
                st = stats.get(split) or {}
                if not st.get("number_of_characters"):
                    continue
                docs = st.get("documents_text_statistics") or st.get("text_statistics") or {}
                w.add_tokens(st["number_of_characters"] / BYTES_PER_TOKEN,
                             float(docs.get("average_text_length") or 0) / BYTES_PER_TOKEN)
                w.published += 1
        return w

    @classmethod
    def plan(cls, setup: Setup, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0) -> RunPlan[Any, Any]:
        """The plan of the run ``setup`` holds (the planner made and asked for it: :meth:`runplan`)."""
        return cls(setup).runplan(mode=mode, skip=skip, round=round)

    def runplan(self, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0) -> RunPlan[MtebSettings, MtebStages]:
        """The run's :class:`~harness.tasks.runplan.RunPlan`: a cell per (task, split), mteb's task objects."""
        su = self.setup
        return RunPlan(
            task=su.name, model_name=su.model.name, model=su.model, device=su.device, layout=su.layout,
            config=su.config, overwrite=bool(su.cfg.overwrite), save_run=bool(su.cfg.get("save_run")), settings=self.settings,
            precision=su.precision, lr=None, trains=False, seed=int(su.cfg.seed),
            cells=self.cells() if round == 0 else [], later=False, header=su.header(),
            work=self.work() if round == 0 else Work(), compute=compute.run, check=compute.check, fitted={}, weights=su.weights_dir(),
            stages=MtebStages(tasks=self.tasks, local=self.local_tasks, mteb=self.mteb),
            lineage=su.lineage)
