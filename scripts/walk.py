"""The walk a maintainer follows through the house: which harness modules a job enters, in order, and how often it
comes back to one it had left. Traced, not read: ``sys.setprofile`` sees every Python call and return; each call
into a harness module other than the one running is an entry, each return to the caller's module one too.

    python scripts/walk.py plan task=beir ...     # planning only: plan(cfg), until the RunPlan exists
    python scripts/walk.py job task=beir ...      # the whole job: `python -m harness task=beir ...`, CLI to record
                                                  # (the walk ends where the last record is written)
    python scripts/walk.py plan --rooms planning task=beir ...   # planning, counting the planning layer's modules

How it counts (the same on any tree, so two trees' figures compare):
- a module is entered when the innermost running harness function changes module (a call into it, or a return to
  it); ``entries`` counts them, ``modules`` the distinct ones, ``returns`` the entries into a module already left;
- a loop is walked once: consecutive calls from one module whose whole call tree repeats (per batch, per query,
  per cell) count as one;
- the ground is not a room of the walk: a call into a module that imports no other harness module (errors, the
  record schema, ...) or into one of :data:`GROUND` runs inside its caller's entry (``--all`` counts them too);
- code run while a module is imported (module bodies, class bodies) is not part of the walk; code no file holds (what
  ``dataclasses`` generates: a value's ``__init__``) and an expression's own frame (a generator expression resumed
  by the function it was handed to) run inside their caller's entry.

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
#: ``--rooms path``: the machinery every protocol shares (loading models, the specs, the encoder pipeline, shared data
#: and training code, the selection), by both names, passed through like the ground: the walk is then the job's own
#: path (the command line, running, planning and its protocol's modules, wherever they live)
SHARED = (
    *GROUND, "harness.models", "harness.specs", "harness.encoding", "harness.selection", "harness.data.files",
    "harness.data.sizes", "harness.training.arguments", "harness.training.ranks", "harness.training.settings",
    "harness.training.tracking", "harness.evaluation.encode", "harness.evaluation.packing",
    "harness.evaluation.prefetch", "harness.evaluation.settings",
)
#: modules of the shared packages that belong to one protocol (before: GLUE's spec among the specs)
PROTOCOL = ("harness.specs.glue",)


#: ``--rooms planning``: the planning layer (plan(cfg), the planners and what they declare, the plan as a value), on
#: the tree before the reorganisation and after it; every other module is passed through like the ground
PLANNING = {
    "before": ("harness.planning", "harness.runplan", "harness.families"),
    "after": ("harness.run.planning", "harness.tasks.runplan", "harness.tasks.glue.planner",
              "harness.tasks.glue.grid", "harness.tasks.glue.chain", "harness.tasks.efficiency.planner",
              "harness.tasks.mteb.planner", "harness.tasks.retrieval.planner", "harness.tasks.retrieval.beir",
              "harness.tasks.retrieval.colbert", "harness.tasks.retrieval.mldr", "harness.tasks.retrieval.code"),
}


#: frames of expressions, not of functions a reader goes to
INLINE = frozenset({"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"})


@dataclass
class Node:
    """One stay in a module: what it called into other modules, in order."""

    module: str
    children: list[Node] = field(default_factory=list)
    order: int = 0                 # when the job entered it (the tracer counts stays)
    writer: bool = False           # the stay that wrote the job's last record: the walk ends there
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
        self.count = 0
        self.last_write: tuple[int, Node] | None = None

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code.co_name == "<module>" or self.importing:
                self.importing += 1
                return
            module = frame.f_globals.get("__name__", "")
            parent = self.stack[-1] if self.stack else self.root
            code = frame.f_code
            if code.co_name == "write_record" and module.endswith(".results"):
                self.last_write = (self.count, parent)   # a record written: by the stay that asked
            # a dataclass's generated __init__, __eq__ (no file), or an expression's own frame (a generator
            # expression, a comprehension): code read where it stands, run inside its caller's entry
            inline = code.co_filename.startswith("<") or code.co_name in INLINE
            if (inline or not module.startswith("harness") or module == parent.module
                    or self.transparent(module)):
                self.stack.append(parent)
                return
            self.count += 1
            node = Node(module, order=self.count)
            parent.children.append(node)
            self.stack.append(node)
        elif event == "return":
            if self.importing:
                self.importing -= 1
                return
            if self.stack:
                self.stack.pop()


def until_written(root: Node, last_write: tuple[int, Node] | None) -> None:
    """The tree as it stood when the job wrote its last record (``last_write``: the stays entered by then, and
    the one that wrote it); without a record, the whole tree."""
    if last_write is None:
        return
    count, writer = last_write
    writer.writer = True

    def prune(node: Node) -> None:
        node.children = [c for c in node.children if c.order <= count]
        for c in node.children:
            prune(c)

    prune(root)


def folded(node: Node, seen: set[str] | None = None) -> Node:
    """The tree with each call walked once: a call whose whole onward walk (its module and everything it calls, in
    order) the job has already made is not walked again (a loop's calls, a second read of the same file, a check
    run for every cell): a reader follows it once."""
    seen = set() if seen is None else seen
    out = Node(node.module, writer=node.writer)
    for child in node.children:
        sig = child.signature()
        if sig in seen:
            continue
        seen.add(sig)
        out.children.append(folded(child, seen))
    return out


class Written(Exception):
    """The walk reached the job's last record."""


def walk(root: Node) -> list[str]:
    """The modules in the order the job is in them: down into each call, back up to its caller; up to the stay that
    wrote the job's last record."""
    seq: list[str] = []

    def visit(node: Node) -> None:
        seq.append(node.module)
        for child in node.children:
            visit(child)
            seq.append(node.module)
        if node.writer:
            raise Written

    try:
        for top in root.children:
            visit(top)
    except Written:
        pass
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


def traced(fn: Callable[[], Any], everything: bool, rooms: str | None = None) -> Node:
    leaves = leaf_modules(Path.cwd())
    if rooms == "path":
        tracer = Tracer(lambda m: m in leaves or (m.startswith(SHARED) and not m.startswith(PROTOCOL)))
    elif rooms == "planning":
        layer = PLANNING["after" if Path("harness/run/planning.py").is_file() else "before"]
        tracer = Tracer(lambda m: not (m in layer or m.startswith(tuple(x + "." for x in layer))))
    else:
        tracer = Tracer((lambda m: False) if everything else (lambda m: m in leaves or m.startswith(GROUND)))
    sys.setprofile(tracer)
    try:
        fn()
    finally:
        sys.setprofile(None)
    until_written(tracer.root, tracer.last_write)
    return folded(tracer.root)


def plan_only(overrides: list[str]) -> Callable[[], Any]:
    """``plan(cfg)`` of the composed config (composed before the trace starts)."""
    import importlib

    new = Path("harness/run/planning.py").is_file()     # the tree after issue 55, or before
    compose = importlib.import_module("harness.run.overrides" if new else "harness.compose")
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
    ap.add_argument("--rooms", choices=("planning", "path"), help="count only these modules as rooms (planning: "
                    "the planning layer, PLANNING; path: all but the shared machinery, SHARED)")
    ap.add_argument("--sequence", action="store_true", help="print the walk, one module a line")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_intermixed_args()
    sys.path.insert(0, os.getcwd())
    import logging

    fn = (plan_only if args.what == "plan" else whole_job)(args.overrides)
    logging.disable(logging.WARNING)
    seq = walk(traced(fn, args.all, args.rooms))
    out = figures(seq)
    if args.sequence:
        print("\n".join(seq))
    print(json.dumps(out) if args.json else
          f"{args.what}: {out['modules']} modules, {out['entries']} entries, {out['returns']} returns to a module "
          "already left")


if __name__ == "__main__":
    main()
