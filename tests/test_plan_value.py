"""The plan is a value (issue 47): compute receives the plan's nodes and a small context, never the planner, and
imports no planning code; the runner, the paper graph, the series and the cost preview share one ``plan()``."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO, compose

HARNESS = REPO / "harness"
#: the packages that compute for every protocol; and under harness/tasks, every module but the planning ones
COMPUTE = ("harness/training", "harness/encoding", "harness/models", "harness/data", "harness/peers", "harness/tasks")
#: planning code: plan(cfg) and the runner, each protocol's planner and what only its planner reads (the retrieval
#: tasks' declarations, GLUE's MNLI chaining from records); a compute module imports none of it
PLANNING = ("harness.run", "harness.tasks.glue.planner", "harness.tasks.glue.chain", "harness.tasks.efficiency.planner",
            "harness.tasks.mteb.planner", "harness.tasks.retrieval.planner", "harness.tasks.retrieval.beir",
            "harness.tasks.retrieval.colbert", "harness.tasks.retrieval.mldr", "harness.tasks.retrieval.code")


def modules() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*.py") if "site_template" not in p.parts)


def dotted(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def planner_types() -> set[str]:
    """Names of the planner classes (each protocol's ``*Planner``) and of anything standing for one (a registry's
    factory type, which makes planners, is not one)."""
    out = {"Family", "RetrievalTask", "RetrievalFamily"}
    for path in (HARNESS / "tasks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Planner"):
                out.add(node.name)
    return out


def test_no_function_outside_the_runner_takes_a_planner() -> None:
    """A parameter annotated with a planner type (or a Protocol standing for one) outside the running package is the
    planner travelling into code that should get values; ``self`` of a planner's own methods is not counted."""
    names = planner_types()
    assert "RetrievalPlanner" in names and "GluePlanner" in names       # the reading finds the planners
    found = []
    for path in modules():
        if path.parent == HARNESS / "run":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            for arg in args:
                text = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if any(n in text.replace(".", " ").replace("[", " ").replace("]", " ").split() for n in names):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}({arg.arg}: {text})")
    assert found == []


def test_no_protocol_stands_for_the_runner() -> None:
    assert "RetrievalTask" not in "".join(p.read_text() for p in modules())


def compute_modules() -> list[Path]:
    return [p for p in modules() if str(p.relative_to(REPO)).startswith(COMPUTE)
            and not dotted(p).startswith(PLANNING) and dotted(p) != "harness.tasks.runplan"]


def test_no_compute_module_imports_planning() -> None:
    """No import of planning code (the runner, plan(cfg), a planner, what only a planner reads) in a module that
    computes, wherever it stands in the module (top, a function, TYPE_CHECKING)."""
    found = []
    for path in compute_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module \
                else []
            bad = [n for n in names if n.startswith(PLANNING)]
            found += [f"{path.relative_to(REPO)}:{node.lineno} imports {n}" for n in bad]
    assert found == []


def test_the_test_above_sees_the_compute_modules_and_an_import_it_forbids() -> None:
    """The walk reads function-local imports too (what a lazy import back into planning would be), and finds each
    protocol's computation among the modules it checks."""
    tree = ast.parse("def f():\n    from harness.tasks.retrieval.planner import entries\n")
    assert [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] == ["harness.tasks.retrieval.planner"]
    checked = {dotted(p) for p in compute_modules()}
    assert {"harness.tasks.retrieval.compute", "harness.tasks.glue.compute", "harness.tasks.efficiency.compute",
            "harness.tasks.mteb.compute", "harness.tasks.retrieval.train"} <= checked
    assert not checked & {"harness.tasks.retrieval.planner", "harness.tasks.glue.chain", "harness.tasks.runplan"}


def test_one_plan_serves_the_runner_the_paper_graph_the_series_and_the_cost(tmp_path: Path) -> None:
    """The paper graph's job state, the series' unit and the cost preview read what ``planning.plan`` returns: the
    same cells and run ids, the same work."""
    from dataclasses import asdict

    from harness.paper import cost
    from harness.paper.graph import Job
    from harness.paper.progress import job_state
    from harness.run import planning
    from tests.conftest import TINY_MODEL

    overrides = ["task=beir", "task.train=false", "model=modernbert-base", f"model.path={TINY_MODEL}",
                 "device=cpu", f"paths.results={tmp_path}/results"]
    plan = planning.plan(compose(overrides))
    state = job_state(Job("j", "s", "run", "beir"), overrides)
    assert plan.cells[0].run_id in state.run_ids and state.cells == len(plan.cells)
    assert asdict(state.work) == asdict(cost.job_work(plan))
    assert plan.compute.__module__ == "harness.tasks.retrieval.compute"
    # the stages take the plan itself: what they resolved holds no settings of its own beside the plan's
    assert not any(isinstance(v, type(plan.settings)) for v in vars(plan.stages).values())
