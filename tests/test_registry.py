"""One registry type for every name -> implementation table: lookups, errors and conflicts behave the same."""

from __future__ import annotations

import sys

import pytest

from harness.core.errors import HarnessError
from harness.core.registry import Registry


def test_lazy_entries_import_on_first_lookup_and_unknown_names_list_the_closest() -> None:
    reg: Registry[object] = Registry("widget", {"dumps": "json:dumps", "mod": "colorsys"}, hint="Register it.",
                                     lazy=True)
    assert reg.target("dumps") == "json:dumps" and list(reg) == ["dumps", "mod"] and len(reg) == 2
    import json

    assert reg["dumps"] is json.dumps and reg.lookup("mod") is sys.modules["colorsys"]
    with pytest.raises(HarnessError, match=r"unknown widget 'dump'.*dumps.*Register it\."):
        reg.lookup("dump")
    assert reg.get("dump") is None                               # a mapping: .get does not raise


def test_a_name_registered_twice_with_another_target_is_refused() -> None:
    reg: Registry[object] = Registry("widget", {"a": "json:dumps"}, lazy=True)
    reg.register("a", "json:dumps")                              # the same target again: fine
    with pytest.raises(HarnessError, match=r"widget 'a' is already registered as json:dumps"):
        reg.register("a", "json:loads")
    bumped = reg.replaced(a=len)
    assert bumped["a"] is len and reg.target("a") == "json:dumps"


def test_every_table_of_the_harness_is_a_registry() -> None:
    from harness import cli
    from harness.leaderboard import records
    from harness.run.planning import PLANNERS
    from harness.selection import rules
    from harness.specs.stages import SHARED
    from harness.tasks.efficiency import planner as efficiency
    from harness.tasks.glue import planner as glue
    from harness.tasks.mteb import planner as mteb
    from harness.tasks.retrieval import stages
    from harness.tasks.retrieval.data import catalog as kinds
    from harness.tasks.retrieval.retrievers.retriever import SUBGROUPS

    tables = [PLANNERS, kinds.KINDS, rules.RULES, SHARED, stages.STAGES, glue.STAGES, efficiency.STAGES, mteb.STAGES,
              SUBGROUPS, records.COMBINE_RULES, cli.SUBCOMMANDS]
    assert all(isinstance(t, Registry) for t in tables)
    with pytest.raises(HarnessError, match=r"unknown runner 'beri'.*beir"):
        PLANNERS.lookup("beri")
