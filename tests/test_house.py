"""The house a maintainer finds their way in (issue 55): a root of a few modules; one folder per protocol; the
import graph with no circle and no arrow up the layers docs/layout.md draws; one plan, typed, built in one place;
the walk of the main job (scripts/walk.py), counted."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED_DATA, TINY_MODEL, compose

HARNESS = REPO / "harness"

#: the layers of docs/layout.md, top to bottom: a module imports only from its own layer or below
LAYERS = (
    ("entry points", ("harness.__main__", "harness.cli", "harness.select", "harness.export", "harness.paper",
                      "harness.series", "harness.leaderboard", "harness.compare", "harness.trial", "harness.peers")),
    ("running", ("harness.run",)),
    ("reading records", ("harness.selection", "harness.mteb_results")),
    ("the protocols", ("harness.tasks",)),
    ("shared machinery", ("harness.models", "harness.training", "harness.encoding", "harness.data", "harness.specs")),
    ("the ground", ("harness.core", "harness")),
)
#: machinery every protocol shares, by what it is: a module here may name a protocol (its records, its rule, its
#: row on the page) without belonging to its folder
MACHINERY = ("harness.core", "harness.run", "harness.specs", "harness.selection", "harness.leaderboard",
             "harness.compare", "harness.paper", "harness.series", "harness.mteb_results", "harness.trial",
             "harness.peers", "harness.cli", "harness.select", "harness.export", "harness.tasks.runplan")
#: a protocol's folder and what naming it in code means (GLUE, not CodeXGLUE; DPR retrieval: dense or single-vector
#: retrieval, BEIR, its triplets)
PROTOCOLS = {
    "harness.tasks.glue": re.compile(r"(?<![a-z])glue(?![a-z])", re.I),
    "harness.tasks.retrieval": re.compile(r"(?<![a-z])(dpr|beir|triplets?|single_vector|dense)(?![a-z])", re.I),
}


def modules() -> dict[str, Path]:
    """Every harness module by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(HARNESS.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The harness modules ``path`` imports, wherever the import stands (top, a function, TYPE_CHECKING)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module \
            and node.level == 0 else []
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name.startswith("harness"):
                out.add(name)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports(p, known) - {m} for m, p in known.items()}


def layer(module: str) -> int:
    return next(i for i, (_, prefixes) in enumerate(LAYERS)
                if any(module == p or module.startswith(p + ".") for p in prefixes))


def circle(edges: dict[str, set[str]]) -> list[str]:
    """A circle of ``edges`` (its nodes in order), or [] where there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return [*stack[stack.index(m):], m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = 2
        stack.pop()
        return []

    return next((c for n in sorted(edges) if n not in state and (c := visit(n))), [])


def code_names(path: Path) -> set[str]:
    """What a module's code names: its identifiers, attributes, imports and strings (not its docstrings and
    comments, which may mention any protocol)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef
            | ast.AsyncFunctionDef) and n.body and isinstance(n.body[0], ast.Expr)}
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef | ast.alias):
            out.add(n.name)
        elif isinstance(n, ast.ImportFrom) and n.module:
            out.add(n.module)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            out.add(n.value)
    return out


def room(module: str) -> str:
    """The room a module stands in, drawn from above: a root module, or a folder under harness/."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def test_the_root_holds_a_few_modules_and_every_package_says_what_it_is() -> None:
    root = sorted(p.name for p in HARNESS.glob("*.py"))
    assert len(root) <= 8, root
    for init in sorted(HARNESS.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()), clean=False) or ""
        first, _, rest = doc.partition("\n")
        where = init.relative_to(REPO)
        assert first.strip().endswith(".") and len(first) < 120, f"{where}: one line says what it is: {first!r}"
        assert not rest or rest.startswith("\n"), f"{where}: the first line is a sentence of its own"


def test_no_import_circle_and_no_arrow_up_the_layers() -> None:
    edges = graph()
    assert all(layer(m) is not None for m in edges)
    assert circle(edges) == []
    up = [f"{m} -> {n}" for m, ns in edges.items() for n in ns if layer(n) < layer(m)]
    assert up == []
    rooms: dict[str, set[str]] = {}
    for m, ns in edges.items():
        rooms.setdefault(room(m), set()).update(room(n) for n in ns if room(n) != room(m))
    assert circle(rooms) == []                  # drawn folder by folder, no circle either
    protocols = {m: {n for n in ns if n.startswith("harness.tasks.") and n.split(".")[2] != m.split(".")[2]
                     and not n.startswith("harness.tasks.runplan")}
                 for m, ns in edges.items() if m.startswith("harness.tasks.") and m != "harness.tasks.runplan"}
    assert {m: ns for m, ns in protocols.items() if ns} == {}   # a protocol folder imports no other's


def test_the_check_sees_a_circle_and_an_arrow_up() -> None:
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) == []
    assert layer("harness.core.results") > layer("harness.run.runner") > layer("harness.cli")


def users(edges: dict[str, set[str]], module: str) -> set[str]:
    """The protocol folders whose modules import ``module``, directly or through other modules."""
    out, seen, todo = set(), {module}, [module]
    while todo:
        target = todo.pop()
        for m, ns in edges.items():
            if target in ns and m not in seen:
                seen.add(m)
                todo.append(m)
                if m.startswith("harness.tasks.") and m.count(".") >= 2 and m != "harness.tasks.runplan":
                    out.add(".".join(m.split(".")[:3]))
    return out


@pytest.mark.parametrize("folder", list(PROTOCOLS))
def test_a_protocol_is_one_folder(folder: str) -> None:
    """Every module that names the protocol is in its folder, or is machinery every protocol shares, or is shared
    code (models, training, encoding, data) that at least two protocols use; the modules naming it are listed."""
    edges, known = graph(), modules()
    naming = sorted(m for m, p in known.items() if any(PROTOCOLS[folder].search(t) for t in code_names(p)))
    inside = [m for m in naming if m.startswith(folder)]
    shared = {m: sorted(users(edges, m)) for m in naming if not m.startswith((folder, *MACHINERY))}
    assert len(inside) >= 5, naming                       # the reading finds the protocol's own modules
    stray = {m: u for m, u in shared.items() if len(u) < 2}
    assert stray == {}, f"name {folder}, used by fewer than two protocols: move them into it ({stray})"


def test_the_run_plan_is_typed() -> None:
    """No field of the plan is ``Any``: the settings, the stages and the code are typed by what they are."""
    from harness.tasks.runplan import RunPlan

    hints = typing.get_type_hints(RunPlan)
    assert [name for name, tp in hints.items() if tp is typing.Any] == []
    assert {"compute", "check", "stages", "settings", "lineage", "model"} <= set(hints)
    assert "runner" not in hints and "spec" not in hints          # never read: gone


def walk_module():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import walk
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return walk


#: the main job of docs/layout.md's walk, offline: the tiny model on SciFact
MAIN_JOB = ["task=beir", "model=all-minilm-l6-v2", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert",
            "model.normalize=false", "model.max_length=64", "precision=fp32", "device=cpu", "task.train=false",
            "task.datasets=[scifact]", f"task.data_dir={SHARED_DATA}"]


def test_planning_the_main_job_visits_at_most_four_planning_modules(tmp_path: Path) -> None:
    from harness.run import planning

    walk = walk_module()
    cfg = compose([*MAIN_JOB, f"paths.results={tmp_path}/results"])
    seq = walk.walk(walk.traced(lambda: planning.plan(cfg), False, "planning"))
    assert walk.figures(seq)["modules"] <= 4, seq
    assert seq[0] == "harness.run.planning" and "harness.tasks.retrieval.planner" in seq


@pytest.mark.slow
def test_the_main_job_returns_to_a_module_already_left_at_most_half_as_often(tmp_path: Path) -> None:
    """``python -m harness task=beir ...`` to its record, walked by scripts/walk.py (its own path: the shared
    machinery passed through): at most half of the 67 returns of the tree before issue 55 (docs/layout.md). On 50
    queries and 250 documents: a loop is walked once, so the walk is all of SciFact's (measured: 19 modules, 52
    entries, 33 returns either way), traced in half the time."""
    out = subprocess.run(
        [sys.executable, "scripts/walk.py", "job", "--rooms", "path", "--json", *MAIN_JOB, "task.max_queries=50",
         "task.max_docs=250",
         f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs", f"paths.cache={tmp_path}/cache"],
        cwd=REPO, capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["returns"] <= 67 // 2, figures
    assert list(Path(tmp_path, "results").rglob("scifact.json"))       # the job wrote its record


@pytest.mark.parametrize(("section", "registry"), [("## Adding a task", "KINDS"),
                                                   ("## Adding a retriever", "STAGES")])
def test_a_recipe_touches_one_protocol_folder_and_conf(section: str, registry: str) -> None:
    """The "add a task" and "add a retriever" recipes of docs/layout.md (run by tests/test_families.py and
    tests/test_retrievers.py): their one registration line goes in the retrieval protocol's folder, where the
    registry they name is defined, and their spec in conf/task/."""
    text = (REPO / "docs" / "layout.md").read_text().split(section, 1)[1].split("\n## ", 1)[0]
    places = set(re.findall(rf"`{registry}` (?:of|in) `(harness/[\w/]+\.py)`", text))
    assert len(places) == 1, places
    (place,) = places
    assert place.startswith("harness/tasks/retrieval/") and f"\n{registry}: Registry" in (REPO / place).read_text()
    assert "conf/task/" in text
