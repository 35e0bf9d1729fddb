"""Computation is composed, not inherited: no harness class inherits from another harness class more than one level
deep, and none has more than one harness base (read from the source, so a new module is covered as it lands)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO


def harness_bases() -> dict[str, list[str]]:
    """``{module:Class: [the harness classes it names as bases]}`` for every class under harness/ (a base named by
    a simple name that only one harness module defines, or by ``module.Class``)."""
    classes: dict[str, list[ast.expr]] = {}
    for path in sorted((REPO / "harness").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                classes[f"{module}:{node.name}"] = node.bases
    by_name: dict[str, list[str]] = {}
    for key in classes:
        by_name.setdefault(key.split(":")[1], []).append(key)
    out = {}
    for key, bases in classes.items():
        names = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in bases]
        out[key] = [k for n in names for k in by_name.get(n, []) if k != key]
    return out


def depth(key: str, bases: dict[str, list[str]]) -> int:
    return max((1 + depth(b, bases) for b in bases[key]), default=0)


def test_no_harness_class_is_more_than_one_level_deep() -> None:
    bases = harness_bases()
    assert "harness.tasks.retrieval.planner:RetrievalPlanner" in bases    # the reading finds the planners
    assert bases["harness.tasks.retrieval.mldr:HubMldr"] == ["harness.tasks.retrieval.planner:RowSource"]
    deep = {k: depth(k, bases) for k in bases if depth(k, bases) > 1}
    assert deep == {}, f"inherits more than one level deep: {deep}"
    assert {k: v for k, v in bases.items() if len(v) > 1} == {}


def test_the_reading_sees_a_deeper_class(tmp_path: Path) -> None:
    """The check can fail: two levels of harness bases are counted as 2."""
    bases = {"a:A": [], "b:B": ["a:A"], "c:C": ["b:B"]}
    assert depth("c:C", bases) == 2 and depth("b:B", bases) == 1
