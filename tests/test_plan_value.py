"""The plan is a value (issue 47): compute receives the plan's nodes and a small context, never the planner, and
imports no planning code; the runner, the paper graph, the series and the cost preview share one ``plan()``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO, compose

HARNESS = REPO / "harness"
#: the packages that compute: what they import of planning would let compute call back into it
COMPUTE = ("stages", "training", "evaluation", "models", "data", "peers")


def modules() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*.py") if "site_template" not in p.parts)


def planner_types() -> set[str]:
    """Names of the planner classes (every Family subclass and the base) and of anything standing for one (a
    registry's factory type, which makes planners, is not one)."""
    out = {"Family", "RetrievalTask"}
    for path in (HARNESS / "tasks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Family") for b in node.bases):
                out.add(node.name)
    return out


def test_no_function_outside_the_runner_takes_a_planner() -> None:
    """A parameter annotated with a planner type (or a Protocol standing for one) outside ``runner.py`` is the
    runner travelling into code that should get values; ``self`` of a planner's own methods is not counted."""
    names = planner_types()
    assert "RetrievalFamily" in names and "GlueFamily" in names       # the reading finds the planners
    found = []
    for path in modules():
        if path.name == "runner.py" and path.parent == HARNESS:
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


@pytest.mark.parametrize("package", COMPUTE)
def test_no_compute_module_imports_planning(package: str) -> None:
    """No import of ``harness.tasks.planners`` (nor of the runner or the planner) in a compute package, wherever it
    stands in the module (top, a function, TYPE_CHECKING)."""
    found = []
    for path in sorted((HARNESS / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad = [n for n in names if n.startswith(("harness.tasks.planners", "harness.run.runner", "harness.run.planning"))]
            found += [f"{path.relative_to(REPO)}:{node.lineno} imports {n}" for n in bad]
    assert found == []


def test_the_test_above_sees_an_import_it_forbids(tmp_path: Path) -> None:
    """The walk reads function-local imports too (what a lazy import back into planning would be)."""
    tree = ast.parse("def f():\n    from harness.tasks.retrieval.planner import entries\n")
    assert [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] == ["harness.tasks.retrieval.planner"]


def test_one_plan_serves_the_runner_the_paper_graph_the_series_and_the_cost(tmp_path: Path) -> None:
    """The paper graph's job state, the series' unit and the cost preview read what ``planning.plan`` returns: the
    same cells and run ids, the same work."""
    from dataclasses import asdict

    from harness.paper import cost
    from harness.paper.graph import Job
    from harness.paper.plan import plan_run
    from harness.run import planning
    from tests.conftest import TINY_MODEL

    overrides = ["task=beir", "task.train=false", "model=modernbert-base", f"model.path={TINY_MODEL}",
                 "device=cpu", f"paths.results={tmp_path}/results"]
    plan = planning.plan(compose(overrides))
    state = plan_run(Job("j", "s", "run", "beir"), overrides)
    assert plan.cells[0].run_id in state.run_ids and state.cells == len(plan.cells)
    assert asdict(state.work) == asdict(cost.job_work(plan))
    assert plan.compute.__module__ == "harness.tasks.retrieval.compute"
    # the stages take the plan itself: what they resolved holds no settings of its own beside the plan's
    assert not any(isinstance(v, type(plan.settings)) for v in vars(plan.stages).values())
