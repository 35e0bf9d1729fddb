"""A default is written once. Task settings, model specs and the root config's typed nodes keep no Python
defaults for what conf/ sets, so the YAML (what ``--cfg job`` shows) is the one place; the schemas that do keep
defaults (the task spec, efficiency sets) must not be restated by a YAML key. Every task, model and root YAML
composes and builds (a key the YAML forgets raises "needs the key").

Exempt: catalog rows (``DatasetEntry``). A row states its split and its mined-corpus knobs even where they equal the
entry's default, on purpose: ``--cfg job`` shows which split a number is measured on, and a key present in the row
is overridable from the command line without ``+`` (``task.catalog.stdlib-files.max_corpus=150``)."""

from __future__ import annotations

import dataclasses
import fnmatch
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from harness import specs
from harness.core.typed import build, key_fields
from harness.models.spec import ModelSpec
from harness.run.locks import LockSettings
from harness.run.planning import PLANNERS
from harness.specs.schema import TaskSpec
from harness.tasks.efficiency.settings import SetSpec
from harness.tasks.retrieval.data.catalog import DatasetEntry
from tests.conftest import REPO, compose

CONF = REPO / "conf"
TASKS = sorted((CONF / "task").glob("*.yaml"))
MODELS = sorted((CONF / "model").glob("*.yaml"))
#: keys whose value maps names to entries of a schema that keeps defaults for optional fields (None: exempt)
ENTRY_MAPS: dict[str, type | None] = {"catalog": None, "sets": SetSpec}
#: the root config's typed nodes (conf/config.yaml)
ROOT: dict[str, type] = {"run_lock": LockSettings}
#: schemas that keep Python defaults (each YAML states only what differs)
KEEP_DEFAULTS = (TaskSpec, DatasetEntry, SetSpec)


def raw(path: Path) -> dict[str, Any]:
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    assert isinstance(node, dict)
    return node


def runner_of(task: str) -> str:
    return str(specs.task_node(task)["spec"]["runner"])


def dataclass_in(tp: Any) -> type | None:
    """The dataclass ``tp`` is, or holds in an Optional/union."""
    for arg in typing.get_args(tp) or (tp,):
        if dataclasses.is_dataclass(arg):
            return arg   # type: ignore[return-value]
    return None


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return plain(dataclasses.asdict(value))
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def restated(node: Mapping[str, Any], cls: type, where: str, inherited: Mapping[str, Any] | None = None) -> Iterator[str]:
    """``where.key = value`` for each key of ``node`` equal to its default in ``cls`` (recursively). A key that
    overrides a different value inherited through the file's defaults list (code.yaml's ``selection.sets: []``
    over beir.yaml's) is needed, not restated."""
    inherited = inherited or {}
    fields = key_fields(cls)   # flat nodes' keys are the parent's own
    for key, value in node.items():
        if key not in fields:
            continue
        owner, f = fields[key]
        sub, parent = dataclass_in(typing.get_type_hints(owner)[key]), inherited.get(key)
        if sub is not None and isinstance(value, Mapping):
            yield from restated(value, sub, f"{where}.{key}", parent if isinstance(parent, Mapping) else None)
            continue
        if key in ENTRY_MAPS and isinstance(value, Mapping):
            yield from entries_restated(value, ENTRY_MAPS[key], f"{where}.{key}")
            continue
        default = default_of(f)
        needed = key in inherited and plain(parent) != value
        if default is not dataclasses.MISSING and plain(default) == value and not needed:
            yield f"{where}.{key} = {value!r}"


def entries_restated(entries: Mapping[str, Any], cls: type | None, where: str) -> Iterator[str]:
    if cls is None:
        return
    for name, entry in entries.items():
        if isinstance(entry, Mapping):
            yield from restated(entry, cls, f"{where}.{name}")
            if isinstance(entry.get("members"), Mapping):
                yield from entries_restated(entry["members"], cls, f"{where}.{name}.members")


def task_files(path: Path) -> tuple[dict[str, Any], dict[str, Any], list[tuple[str, Path]]]:
    """(the file's own keys, what it inherits from same-group parents, [(package, file)] of included groups)."""
    own = raw(path)
    inherited: dict[str, Any] = {}
    included = []
    for item in own.pop("defaults", []):
        if isinstance(item, str) and item != "_self_":
            inherited = OmegaConf.to_container(OmegaConf.merge(inherited, task_merged(CONF / "task" / f"{item}.yaml")))
        elif isinstance(item, Mapping):
            ((key, option),) = item.items()
            group, _, package = key.removeprefix("override ").lstrip("/").partition("@")
            included.append((package, CONF / group / f"{option}.yaml"))
    return own, inherited, included


def task_merged(path: Path) -> dict[str, Any]:
    own, inherited, _ = task_files(path)
    return OmegaConf.to_container(OmegaConf.merge(inherited, own))   # type: ignore[return-value]


def at(cls: type, package: str) -> type | None:
    """The schema of the dotted ``package`` under ``cls`` (None: an entry map or untyped)."""
    for key in package.split("."):
        fields = key_fields(cls)
        if key not in fields:
            return None
        owner, _ = fields[key]
        sub = dataclass_in(typing.get_type_hints(owner)[key])
        if sub is None:
            return None
        cls = sub
    return cls


def violations() -> list[str]:
    out: list[str] = []
    for path in TASKS:
        name = path.relative_to(REPO)
        own, inherited, included = task_files(path)
        settings = PLANNERS.lookup(runner_of(path.stem)).settings_class
        spec = own.pop("spec", None)
        out += restated(own, settings, str(name), inherited)
        if spec:
            out += restated(spec, TaskSpec, f"{name}: spec", inherited.get("spec"))
        for package, file in included:
            node = raw(file)
            if package in ENTRY_MAPS:
                out += entries_restated(node, ENTRY_MAPS[package], f"{file.relative_to(REPO)} (as task.{package})")
            elif (cls := at(settings, package)) is not None:
                out += restated(node, cls, f"{file.relative_to(REPO)} (as task.{package})")
    for path in MODELS:
        out += restated(raw(path), ModelSpec, str(path.relative_to(REPO)))
    root = raw(CONF / "config.yaml")
    for key, cls in ROOT.items():
        out += restated(root[key], cls, f"conf/config.yaml: {key}")
    return sorted(set(out))


def test_no_yaml_key_restates_its_schema_default() -> None:
    found = violations()
    assert not found, "keys equal to their schema default (write a default once):\n" + "\n".join(found)


def schemas(cls: type) -> Iterator[type]:
    """``cls`` and every dataclass its fields hold, recursively."""
    yield cls
    for tp in typing.get_type_hints(cls).values():
        for arg in (tp, *typing.get_args(tp), *(a for t in typing.get_args(tp) for a in typing.get_args(t))):
            if dataclasses.is_dataclass(arg) and arg is not cls:
                yield from schemas(arg)   # type: ignore[arg-type]


def test_settings_schemas_carry_types_only() -> None:
    """The settings a YAML is validated against write no default (the YAML does): the design makes a restated
    default impossible there. Exempt: fields that are not config keys (``init=False``) and the schemas that
    keep defaults on purpose (:data:`KEEP_DEFAULTS`)."""
    classes = {PLANNERS.lookup(runner_of(p.stem)).settings_class for p in TASKS} | {ModelSpec, *ROOT.values()}
    found = []
    for top in classes:
        for cls in schemas(top):
            if cls in KEEP_DEFAULTS:
                continue
            found += [f"{cls.__qualname__}.{f.name}" for f in dataclasses.fields(cls)   # type: ignore[arg-type]
                      if f.init and default_of(f) is not dataclasses.MISSING]
    assert not found, "Python defaults for keys conf/ sets: " + ", ".join(sorted(set(found)))


@pytest.mark.parametrize("task", [p.stem for p in TASKS])
def test_every_task_composes_and_builds(task: str) -> None:
    cfg = compose([f"task={task}"])
    node = OmegaConf.to_container(cfg.task, resolve=True)
    assert isinstance(node, dict)
    spec = node.pop("spec")
    build(TaskSpec, spec, f"task {task!r}, spec")
    build(PLANNERS.lookup(spec["runner"]).settings_class, node, f"task {task!r}")


@pytest.mark.parametrize("model", [p.stem for p in MODELS])
def test_every_model_composes_and_builds(model: str) -> None:
    ModelSpec.from_config(compose([f"model={model}"]).model)


def test_the_root_config_builds() -> None:
    cfg = compose([])
    for key, cls in ROOT.items():
        build(cls, cfg[key], key)


def test_a_restated_default_is_found() -> None:
    """The check itself: a key equal to a kept default is named; one overriding an inherited value is not."""
    assert list(restated({"selection": {"sets": []}}, TaskSpec, "x")) == ["x.selection.sets = []"]
    assert not list(restated({"selection": {"sets": []}}, TaskSpec, "x", {"selection": {"sets": ["a"]}}))
    assert list(entries_restated({"d": {"split": "test"}}, DatasetEntry, "c")) == ["c.d.split = 'test'"]
    assert list(entries_restated({"s": {"length": 8, "batch_size": 8}}, SetSpec, "e")) == []


# ------------------------------------------------------------------------------------------------ module defaults
#: (module, parameter) defaults that equal a conf/ value of a key of the same name but are not that key, and why
NOT_THE_KEY: dict[tuple[str, str], str] = {
    ("harness/tasks/retrieval/data/*", "strict_qrels"): "the loaders' contract: qrels are checked strictly unless a caller says "
                                        "otherwise (every task passes its task.strict_qrels)",
    ("harness/tasks/retrieval/data/triplets.py", "batch_size"): "the mining encoder's batch, not task=glue's training batch",
    ("harness/tasks/efficiency/throughput.py", "repeats"): "the roofline matmul's repeats, not task=efficiency's passes",
    ("harness/tasks/retrieval/mldr.py", "train"): "not a config key of task=mldr (init=False: derived from task.setting)",
    ("harness/peers/*", "batch_size"): "mteb run as mteb runs by default (its encode batch of 32), for parity",
    ("harness/*", "precision"): "the run's resolved precision (fp32 | bf16 | fp16), not task=efficiency's "
                                "precision choice (auto | fp32 | ...)",
    ("harness/paper/graph.py", "devices"): "a graph stage's processes per job (paper.stages.<name>.devices, which "
                                           "sets task.devices only where given), not task.devices",
}


def conf_values() -> dict[str, set[tuple[str, Any]]]:
    """``{key: {(type name, value)}}`` of every scalar leaf of every task as composed (catalogs, GLUE's task
    definitions and specs aside: data, not settings), and the root ``seed``."""
    out: dict[str, set[tuple[str, Any]]] = {}

    def leaves(node: Any) -> None:
        items = node.items() if isinstance(node, Mapping) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, Mapping | list):
                leaves(value)
            elif value is not None and not isinstance(key, int):
                out.setdefault(str(key), set()).add((type(value).__name__, value))

    for path in TASKS:
        task = OmegaConf.to_container(compose([f"task={path.stem}"]).task, resolve=True)
        assert isinstance(task, dict)
        leaves({k: v for k, v in task.items() if k not in ("spec", "catalog", "definitions")})
    out.setdefault("seed", set()).add(("int", int(compose([]).seed)))
    return out


def module_defaults(path: Path) -> Iterator[tuple[str, int, Any]]:
    """(name, line, value) of every literal default in ``path``: function parameters and class fields (a field
    constructor's ``default=`` too)."""
    import ast

    def literal(node: ast.expr) -> Any:
        try:
            return ast.literal_eval(node)
        except ValueError:
            try:   # constant arithmetic (1 << 18)
                return eval(compile(ast.Expression(node), str(path), "eval"), {"__builtins__": {}})
            except Exception:
                return None

    for node in ast.walk(ast.parse(path.read_text())):
        pairs: list[tuple[str, ast.expr]] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            positional = [*a.posonlyargs, *a.args]
            pairs += [(x.arg, d) for x, d in zip(positional[len(positional) - len(a.defaults):], a.defaults,
                                                 strict=True)]
            pairs += [(x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        elif isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                    value = st.value
                    if isinstance(value, ast.Call):
                        value = next((k.value for k in value.keywords if k.arg == "default"), None)
                    if value is not None:
                        pairs.append((st.target.id, value))
        for name, value in pairs:
            got = literal(value)
            if got is not None:
                yield name, value.lineno, got


def restated_in_modules() -> list[str]:
    conf = conf_values()
    found = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        module = str(path.relative_to(REPO))
        for name, line, value in module_defaults(path):
            if (type(value).__name__, value) not in conf.get(name, ()):
                continue
            if not any(name == key and fnmatch.fnmatch(module, where) for where, key in NOT_THE_KEY):
                found.append(f"{module}:{line} {name}={value!r}")
    return found


def test_no_module_default_repeats_a_conf_default() -> None:
    """A default is written once, in conf/: no function or class under harness/ defaults a parameter to the value
    conf/ gives the key of that name (a stage takes its node, or the value is required)."""
    found = restated_in_modules()
    assert not found, "module defaults equal to conf/ (take the node, or make them required):\n" + "\n".join(found)


def test_a_module_default_equal_to_conf_is_found(tmp_path: Path) -> None:
    """The check itself: a parameter and a field defaulting to conf/'s values are read, literal or computed."""
    path = tmp_path / "m.py"
    path.write_text("def f(x, *, batch_tokens=16384, top_k=3):\n    pass\n\n\nclass C:\n"
                    "    maxsim_chunk_tokens: int = 1 << 18\n    similarity: str = field(default='cosine')\n")
    conf = conf_values()
    hits = [(name, value) for name, _, value in module_defaults(path) if (type(value).__name__, value) in
            conf.get(name, ())]
    assert hits == [("batch_tokens", 16384), ("maxsim_chunk_tokens", 262144), ("similarity", "cosine")]
