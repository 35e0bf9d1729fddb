"""The paper as a dependency graph: steps of jobs, built from ``conf/paper/<name>.yaml`` and the task specs, pure (a
login node, every job and the tests build the same graph). A sweep selecting on selection sets is followed by
``<step>.select`` and ``<step>.report``; a ``depends_on`` (GLUE's MNLI) splits it into ``.<datasets>``, ``.chained``."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from harness import specs
from harness.core.errors import HarnessError, closest_first, one_line, unknown_name
from harness.core.typed import choices
from harness.specs import dependencies

AFTER_OK, AFTER_ANY = "afterok", "afterany"
#: sweep parameters that name a task's datasets (GLUE sweeps its tasks, retrieval its datasets)
DATASET_KEYS = ("task.tasks", "task.datasets")


@dataclass(frozen=True)
class Job:
    """One unit of work: ``mode`` ``run``, ``select`` (over ``source``'s records), ``report`` or ``leaderboard``."""

    key: str
    step: str
    mode: str
    task: str
    overrides: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    source: str | None = None
    datasets: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Job:
        return cls(**{"step" if k == "stage" else k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


@dataclass
class Step:
    """Jobs of one kind (``train`` | ``eval`` | ``cpu``) that start together, after ``after`` (step, condition)."""

    name: str
    kind: str
    jobs: list[Job]
    after: list[tuple[str, str]] = field(default_factory=list)
    task: str = ""
    devices: int = 1        # the processes (GPUs) each of its jobs trains on: task.devices
    mem_gb: float | None = None   # host memory its jobs need (harness.paper.cost.host_memory), where modelled

    def resources(self, cluster: Mapping[str, Any]) -> dict[str, Any]:
        """What one job of this step asks for: the profile's entry for its kind, times its ``devices``."""
        res = dict(cluster[self.kind])
        for key in ("gpus", "cpus", "mem_gb"):
            res[key] = (res.get(key) or 0) * self.devices
        res["mem_gb"] = max(res["mem_gb"], self.mem_gb or 0)
        return res

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "jobs": [asdict(j) for j in self.jobs],   # tuples: JSON lists
                "after": [list(a) for a in self.after], "task": self.task}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Step:
        return cls(d["name"], d["kind"], [Job.from_dict(j) for j in d["jobs"]], [tuple(a) for a in d["after"]],
                   d.get("task", ""))


#: the kinds of job a cluster profile has resources for
KINDS = ("train", "eval", "cpu")


@dataclass(kw_only=True)
class StepSettings:
    """One configured step (``paper.stages.<name>``): a task, optionally over a sweep."""

    task: str
    sweep: str | None = None
    overrides: list[str] = field(default_factory=list)
    kind: str | None = choices(None, *KINDS, default=None)
    params: dict[str, Any] | None = None
    shards: int | None = None       # its evaluation as this many shard jobs at once plus a merge (task.shards)
    devices: int | None = None      # its trainings on this many GPUs of one node each (task.devices)
    enabled: bool = True            # false: declared, not in the graph (paper.stages.<name>.enabled=true adds it)


def load_paper(name: str = "paper", dotlist: Sequence[str] = ()) -> dict[str, Any]:
    """``conf/paper/<name>.yaml`` (or a YAML file's path) with ``paper.<key>=<value>`` overrides applied."""
    from omegaconf import OmegaConf
    path = Path(name) if name.endswith(".yaml") else Path(str(resources.files("conf"))) / "paper" / f"{name}.yaml"
    if not path.is_file():
        graphs = [g.stem for g in path.parent.glob("*.yaml") if g.stem != "cost"] if not name.endswith(".yaml") else []
        shown = f"graphs in conf/paper/ (closest first): {', '.join(closest_first(name, graphs))}" if graphs else \
            "a paper graph is conf/paper/<name>.yaml or a .yaml path"
        raise HarnessError(f"no paper graph {name!r}: {path} does not exist; {shown}. Pass paper=<graph>.")
    from omegaconf.errors import OmegaConfBaseException
    from yaml import YAMLError
    try:
        cfg = OmegaConf.merge(OmegaConf.load(path), OmegaConf.from_dotlist([d.removeprefix("paper.") for d in dotlist]))
        out = OmegaConf.to_container(cfg, resolve=True)
    except (OmegaConfBaseException, YAMLError, ValueError) as exc:   # a ??? left unset, a YAML syntax error
        unset = re.search(r"Missing mandatory value: ([\w.]+)", str(exc))
        how = f"set it with paper.{unset.group(1)}=<value>" if unset else "fix the file, or set the value with " \
            "paper.<key>=<value>"
        raise HarnessError(f"paper graph {path}: {one_line(exc)[:300]}: {how}") from None
    if not isinstance(out, dict):
        raise HarnessError(f"paper graph {path} is not a mapping of paper settings: see conf/paper/paper.yaml")
    return out


def sweep_params(sweep: str, replace: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """``hydra.sweeper.params`` of ``conf/sweep/<sweep>.yaml`` (or ``replace``), each value list as override strings."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf
    path = Path(str(resources.files("conf"))) / "sweep" / f"{sweep}.yaml"
    if not path.is_file():
        raise HarnessError(f"no sweep {sweep!r}: conf/sweep/{sweep}.yaml does not exist")
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    params = replace or ((raw.get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    parser = OverridesParser.create()
    out = {}
    for key, values in params.items():
        (o,) = parser.parse_overrides([f"{key}={values}"])
        out[str(key)] = list(o.sweep_string_iterator()) if o.is_sweep_override() else [str(o.value())]
    return out


def _key(step: str, point: Mapping[str, str]) -> str:
    return step + ("[" + ",".join(f"{k.removeprefix('task.')}={v}" for k, v in point.items()) + "]" if point else "")


def build(paper: Mapping[str, Any], common: Sequence[str] = ()) -> list[Step]:
    """Every step of the graph, in dependency order. ``common``: overrides every run job gets (``model=...``)."""
    confs = {name: StepSettings(**{**c, "overrides": c.get("overrides") or []})
             for name, c in (paper.get("stages") or {}).items() if c.get("enabled", True)}
    base = [*common, *(paper.get("overrides") or ())]
    steps: list[Step] = []
    for name, conf in confs.items():
        spec = specs.get(conf.task)
        run = [*base, f"task={conf.task}", *conf.overrides]
        if conf.sweep:
            steps += _sweep_steps(name, conf, spec, run, base)
        else:
            kind = conf.kind or "eval"
            steps.append(Step(name, kind, [Job(name, name, "run", conf.task, (*run, *_devices(name, conf, kind)))],
                                task=conf.task, devices=conf.devices or 1))
    _link_dependencies(steps, confs)
    for name, conf in confs.items():
        if conf.shards and conf.shards > 1:
            evaluation = f"{name}.report" if conf.sweep else name
            steps = [x for s in steps for x in (_sharded(s, conf.shards) if s.name == evaluation else [s])]
    if paper.get("leaderboard", True):
        ends = [(s.name, AFTER_ANY) for s in steps]
        steps.append(Step("leaderboard", "cpu", [Job("leaderboard", "leaderboard", "leaderboard", "", tuple(base))],
                            ends))
    return order(steps)


def _sweep_steps(name: str, conf: StepSettings, spec: specs.TaskSpec, run: list[str], base: list[str]) -> list[Step]:
    """A sweep's steps: its jobs (split where the task depends on its own datasets' selection), selections, report."""
    assert conf.sweep is not None
    kind = conf.kind or "train"
    params = sweep_params(conf.sweep, conf.params)
    points = [dict(zip(params, values, strict=True)) for values in itertools.product(*params.values())]
    jobs = [Job(_key(name, p), name, "run", conf.task, (*run, *_devices(name, conf, kind), f"sweep={conf.sweep}",
                                                         *(f"{k}={v}" for k, v in p.items()))) for p in points]
    inner = dependencies.inner(spec)
    out: list[Step] = []
    if inner:
        d = inner[0]
        first, chained, rest = [], [], []
        for job in jobs:
            ds = _datasets_of(job)
            (first if ds & set(d.datasets) else chained if ds & set(d.for_datasets) else rest).append(job)
        head = f"{name}.{'+'.join(d.datasets)}"
        n = conf.devices or 1
        out += [Step(head, kind, _restep(first, head), task=conf.task, devices=n),
                Step(f"{head}.select", "cpu", [Job(f"{head}.select", f"{head}.select", "select", conf.task,
                                                    tuple(base), source=head, datasets=d.datasets)],
                      [(head, AFTER_ANY)], task=conf.task),
                Step(name, kind, rest, task=conf.task, devices=n),
                Step(f"{name}.chained", kind, _restep(chained, f"{name}.chained"), [(f"{head}.select", AFTER_OK)],
                      task=conf.task, devices=n)]
        swept = [head, name, f"{name}.chained"]
    else:
        out.append(Step(name, kind, jobs, task=conf.task, devices=conf.devices or 1))
        swept = [name]
    select = f"{name}.select"
    out.append(Step(select, "cpu", [Job(select, select, "select", conf.task, tuple(base), source=name)],
                     [(s, AFTER_ANY) for s in swept], task=conf.task))
    if spec.selection.rule == "best_run_on_sets" and spec.selection.sets:
        chosen = tuple(k for k in params if k not in DATASET_KEYS)
        report = f"{name}.report"
        out.append(Step(report, "eval", [Job(report, report, "report", conf.task, tuple(run), chosen, source=name)],
                         [(select, AFTER_OK)], task=conf.task))
    return [s for s in out if s.jobs]


def _devices(name: str, conf: StepSettings, kind: str) -> tuple[str, ...]:
    """A training step's ``devices: N``: each of its runs trains on N processes of one node."""
    if not conf.devices or conf.devices == 1:
        return ()
    if kind != "train":
        raise HarnessError(f"paper.stages.{name}.devices={conf.devices}: only a training step trains on several "
                           f"devices (this one is {kind!r}); its evaluation spreads with shards: K")
    return (f"task.devices={conf.devices}",)


def _sharded(step: Step, k: int) -> list[Step]:
    """An evaluation step as ``<step>.shards`` (one job per corpus shard) and the step itself as the merge."""
    if step.kind != "eval":
        raise HarnessError(f"paper.stages.{step.name}.shards: only an evaluation step can be sharded (this one "
                           f"is {step.kind!r}); a sweep's report is")
    common = (f"task.shards={k}", "task.shard_launcher=external")
    name = f"{step.name}.shards"
    shard_jobs = [replace(j, key=f"{j.key}.shard[{i}]", step=name,
                          overrides=(*j.overrides, *common, f"task.shard={i}")) for j in step.jobs for i in range(k)]
    merge = [replace(j, overrides=(*j.overrides, *common)) for j in step.jobs]
    return [Step(name, step.kind, shard_jobs, list(step.after), step.task),
            Step(step.name, step.kind, merge, [(name, AFTER_OK)], step.task)]


def _restep(jobs: list[Job], step: str) -> list[Job]:
    return [Job(j.key.replace(j.step, step, 1), step, j.mode, j.task, j.overrides) for j in jobs]


def _datasets_of(job: Job) -> set[str]:
    out: set[str] = set()
    for o in job.overrides:
        key, _, value = o.partition("=")
        if key in DATASET_KEYS:
            out |= {v.strip() for v in value.strip("[]").split(",")}
    return out


def _link_dependencies(steps: list[Step], confs: Mapping[str, StepSettings]) -> None:
    """A step that depends on another task's selection waits for that task's ``.select`` step in the graph."""
    selects = {s.task: s.name for s in steps if s.name.endswith(".select") and s.name.count(".") == 1}
    for step in steps:
        conf = confs.get(step.name)
        if conf is None:
            continue
        for dep in specs.get(conf.task).depends_on:
            task = _override_value(conf.overrides, dep.task_key) or dep.task
            if task != conf.task and task in selects:
                step.after.append((selects[task], AFTER_OK))


def _override_value(overrides: Sequence[str], key: str | None) -> str | None:
    return next((o.partition("=")[2] for o in overrides if key and o.partition("=")[0] == key), None)


def order(steps: list[Step]) -> list[Step]:
    """Steps in dependency order (stable: the configured order where nothing forces another)."""
    by_name = {s.name: s for s in steps}
    for s in steps:
        for up, _ in s.after:
            if up not in by_name:
                raise unknown_name("step", up, by_name, f"Step {s.name} waits for it.")
    out: list[Step] = []
    done: set[str] = set()
    while len(out) < len(steps):
        ready = [s for s in steps if s.name not in done and all(u in done for u, _ in s.after)]
        if not ready:
            raise HarnessError("the paper graph has a dependency cycle among: "
                               + ", ".join(s.name for s in steps if s.name not in done))
        out.append(ready[0])
        done.add(ready[0].name)
    return out
