"""The constraints declared on typed settings (harness/core/typed.py: count, positive, at_least, nonempty): one line
naming the key and the fix, null left alone where it means something, and every constrained key of every task's
settings listed in docs/reliability.md's "Counts and sizes" table."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.core.typed import at_least, build, constraints, count, nonempty, positive

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Inner:
    n: int = count()


@dataclass(kw_only=True)
class Settings:
    names: list[str] = nonempty("known")
    known: dict[str, int]
    limit: int | None = count(null="no limit")
    rate: float = positive()
    ratio: float = at_least(0, below=1)
    sizes: dict[str, int] = count()
    grid: dict[str, list[int]] = count(nonempty=True)
    shards: int | str = count()
    inner: Inner


GOOD = {"names": ["a"], "known": {"a": 1, "b": 2}, "limit": None, "rate": 1e-5, "ratio": 0.0, "sizes": {"x": 1},
        "grid": {"g": [1, 2]}, "shards": "auto", "inner": {"n": 1}}


def test_good_values_and_null_pass() -> None:
    s = build(Settings, GOOD, "task 't'", key="task")
    assert s.limit is None and s.shards == "auto" and s.inner.n == 1


@pytest.mark.parametrize(("change", "message"), [
    ({"names": []}, r"^task\.names=\[\] selects nothing, so nothing would run: list at least one, e\.g\. "
                    r"task\.names=\[a\] \(valid names: a, b\)$"),
    ({"limit": 0}, r"^task\.limit=0 is below 1: set task\.limit to an integer >= 1, or to null \(no limit\)$"),
    ({"rate": 0}, r"^task\.rate=0\.0 must be above 0: set task\.rate to a number > 0$"),
    ({"ratio": 1.0}, r"^task\.ratio=1\.0 must be below 1: set task\.ratio to a number in \[0, 1\)$"),
    ({"ratio": -0.1}, r"^task\.ratio=-0\.1 is below 0"),
    ({"sizes": {"x": 1, "y": 0}}, r"^task\.sizes\.y=0 is below 1"),
    ({"grid": {"g": [1, 0]}}, r"^task\.grid\.g\[1\]=0 is below 1"),
    ({"grid": {"g": []}}, r"^task\.grid\.g=\[\] selects nothing"),
    ({"shards": 0}, r"^task\.shards=0 is below 1"),
    ({"inner": {"n": 0}}, r"^task\.inner\.n=0 is below 1"),
])
def test_a_value_outside_its_constraint_is_one_line_naming_the_key(change: dict, message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        build(Settings, GOOD | change, "task 't'", key="task")


def test_without_a_key_the_message_names_where() -> None:
    with pytest.raises(HarnessError, match=r"^conf/x\.yaml, limit=0 is below 1"):
        build(Settings, GOOD | {"limit": 0}, "conf/x.yaml")


def settings_classes() -> dict[str, type]:
    from harness.tasks.efficiency.planner import EfficiencySettings
    from harness.tasks.glue.grid import GlueSettings
    from harness.tasks.mteb.planner import MtebSettings
    from harness.tasks.retrieval.beir import BeirSettings
    from harness.tasks.retrieval.code import CodeSettings
    from harness.tasks.retrieval.colbert import ColbertSettings
    from harness.tasks.retrieval.mldr import MldrSettings

    return {"beir": BeirSettings, "code": CodeSettings, "colbert": ColbertSettings, "mldr": MldrSettings,
            "glue": GlueSettings, "efficiency": EfficiencySettings, "mteb": MtebSettings}


def test_every_constrained_key_is_in_the_reliability_table() -> None:
    """docs/reliability.md's "Counts and sizes" names each constrained key (the table is the documentation)."""
    text = (REPO / "docs" / "reliability.md").read_text().split("**Counts and sizes**", 1)[1]
    listed = set(re.findall(r"`(task\.[a-z_.\[\]<>]+)`", text))
    keys = {key.replace("task.multi_vector.", "task.") for cls in settings_classes().values()
            for key, _ in constraints(cls, "task")}
    assert sorted(keys - listed) == []
