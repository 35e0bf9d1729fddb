"""The walk a maintainer follows through the house: which harness modules a job enters, in order, and how often it
comes back to one it had left. Traced, not read: ``sys.setprofile`` sees every Python call and return; each call
into a harness module other than the one running is an entry, each return to the caller's module one too.

    python scripts/walk.py plan task=beir ...     # planning only: plan(cfg), until the RunPlan exists
    python scripts/walk.py job task=beir ...      # the whole job: `python -m harness task=beir ...`, CLI to record

How it counts (the same on any tree, so two trees' figures compare):
- a module is entered when the innermost running harness function changes module (a call into it, or a return to
  it); ``entries`` counts them, ``modules`` the distinct ones, ``returns`` the entries into a module already left;
- a loop is walked once: consecutive calls from one module whose whole call tree repeats (per batch, per query,
  per cell) count as one;
- the ground is not a room of the walk: a call into a module that imports no other harness module (errors, the
  record schema, ...) or into one of :data:`GROUND` runs inside its caller's entry (``--all`` counts them too);
- code run while a module is imported (module bodies, class bodies) is not part of the walk.

``--sequence`` prints the walk itself; ``--json`` the figures as JSON.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]

#: modules every package stands on, by the name they have on either side of the reorganisation (issue 55): helpers
#: a call passes through, not rooms of the walk
GROUND = (
    "harness.errors", "harness.typed", "harness.registry", "harness.results", "harness.identity", "harness.layout",
    "harness.console", "harness.cache_entry", "harness.data_origin", "harness.per_query", "harness.work",
    "harness.compose", "harness.scheduler", "harness.core",
)


@dataclass
class Node:
    """One stay in a module: what it called into other modules, in order."""

    module: str
    children: list[Node] = field(default_factory=list)
    _sig: str | None = None

    def signature(self) -> str:
        if self._sig is None:
            self._sig = self.module + "(" + ",".join(c.signature() for c in self.children) + ")"
        return self._sig


def leaf_modules(root: Path) -> set[str]:
    """Harness modules that import no other harness module (function-local imports counted)."""
    out = set()
    for path in (root / "harness").rglob("*.py"):
        rel = path.relative_to(root).with_suffix("")
        name = ".".join(p for p in rel.parts if p != "__init__")
        imports = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imports += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imports.append(node.module)
        if not any(i.startswith("harness") and i != name for i in imports):
            out.add(name)
    return out


class Tracer:
    """Builds the module-level call tree of whatever runs while it is on."""

    def __init__(self, transparent: Callable[[str], bool]):
        self.transparent = transparent
        self.root = Node("<start>")
        self.stack: list[Node] = []            # per frame: the node it runs in (a library's: its caller's)
        self.importing = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code.co_name == "<module>" or self.importing:
                self.importing += 1
                return
            module = frame.f_globals.get("__name__", "")
            parent = self.stack[-1] if self.stack else self.root
            if not module.startswith("harness") or module == parent.module or self.transparent(module):
                self.stack.append(parent)
                return
            node = Node(module)
            parent.children.append(node)
            self.stack.append(node)
        elif event == "return":
            if self.importing:
                self.importing -= 1
                return
            if self.stack:
                self.stack.pop()


def folded(node: Node) -> Node:
    """The tree with each run of identical consecutive calls (a loop) kept once."""
    out = Node(node.module)
    for child in (folded(c) for c in node.children):
        if out.children and out.children[-1].signature() == child.signature():
            continue
        out.children.append(child)
    return out


def walk(root: Node) -> list[str]:
    """The modules in the order the job is in them: down into each call, back up to its caller."""
    seq: list[str] = []

    def visit(node: Node) -> None:
        seq.append(node.module)
        for child in node.children:
            visit(child)
            seq.append(node.module)

    for top in root.children:
        visit(top)
    return seq


def figures(seq: list[str]) -> dict[str, Any]:
    entered, entries, returns, left = set(), 0, 0, None
    for module in seq:
        if module == left:
            continue
        entries += 1
        returns += module in entered
        entered.add(module)
        left = module
    return {"modules": len(entered), "entries": entries, "returns": returns}


def traced(fn: Callable[[], Any], everything: bool) -> Node:
    leaves = leaf_modules(Path.cwd())
    tracer = Tracer((lambda m: False) if everything else
                    (lambda m: m in leaves or m.startswith(GROUND)))
    sys.setprofile(tracer)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return folded(tracer.root)


def plan_only(overrides: list[str]) -> Callable[[], Any]:
    """``plan(cfg)`` of the composed config (composed before the trace starts)."""
    import importlib

    new = Path("harness/run/planning.py").is_file()     # the tree after issue 55, or before
    compose = importlib.import_module("harness.run.compose" if new else "harness.compose")
    planning = importlib.import_module("harness.run.planning" if new else "harness.planning")
    cfg = compose.compose_config(overrides)
    return lambda: planning.plan(cfg)


def whole_job(overrides: list[str]) -> Callable[[], Any]:
    """``python -m harness <overrides>``, from the console entry to the last record written."""
    from harness import cli

    def run() -> None:
        sys.argv = ["harness", *overrides]
        try:
            cli.main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("plan", "job"))
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--all", action="store_true", help="count the ground's modules as rooms too")
    ap.add_argument("--sequence", action="store_true", help="print the walk, one module a line")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, os.getcwd())
    import logging

    fn = (plan_only if args.what == "plan" else whole_job)(args.overrides)
    logging.disable(logging.WARNING)
    seq = walk(traced(fn, args.all))
    out = figures(seq)
    if args.sequence:
        print("\n".join(seq))
    print(json.dumps(out) if args.json else
          f"{args.what}: {out['modules']} modules, {out['entries']} entries, {out['returns']} returns to a module "
          "already left")


if __name__ == "__main__":
    main()
