"""Typos fail with the closest valid key, before anything runs: catalog entries, model specs, task settings."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from harness.core.errors import HarnessError
from harness.core.typed import build, choices, constraints, count, excluded_keys, flat, role_keys
from harness.core.typed import excluded as excluded_field
from harness.models import ModelSpec
from harness.run.runner import run
from harness.tasks.retrieval.data.catalog import resolve_entries
from tests.conftest import compose


def test_catalog_typo_is_an_error_naming_the_key() -> None:
    catalog = {"arguana": {"split": "test", "ignore_identical_id": True}, "nq": {"split": "test"}}
    with pytest.raises(HarnessError, match=r"unknown key 'ignore_identical_id' in catalog entry 'arguana'; "
                                           r"did you mean 'ignore_identical_ids'\?"):
        resolve_entries(["nq"], catalog)          # any entry of the catalog, not only the requested ones
    members = {"cqa": {"split": "test", "members": {"android": {"hub": "x", "revison": "abc"}}}}
    with pytest.raises(HarnessError, match=r"catalog entry 'cqa-android'; did you mean 'revision'"):
        resolve_entries(["cqa"], members)


def test_typos_through_the_cli_fail_before_any_work(tmp_path) -> None:
    base = ["task=beir", "model=all-minilm-l6-v2", f"paths.results={tmp_path}", "task.datasets=[arguana]"]
    for extra, message in [
        ("+task.catalog.arguana.ignore_identical_id=true", "did you mean 'ignore_identical_ids'"),
        ("+model.poolng=cls", r"unknown key 'poolng' in model 'all-minilm-l6-v2'; did you mean 'pooling'"),
        ("+task.top_kk=10", r"unknown key 'top_kk' in task 'beir'; did you mean 'top_k'"),
        ("+task.train_data.max_sample=5", r"in task 'beir', train_data; did you mean 'max_samples'"),
        ("model.pooling=avg", r"pooling='avg' is not one of mean, cls"),
        ("task.top_k=many", r"top_k must be an integer, got 'many'"),
    ]:
        with pytest.raises(HarnessError, match=message):
            run(compose([*base, extra]))
    assert not list(tmp_path.iterdir())


def test_model_spec_is_typed() -> None:
    spec = ModelSpec.based_on("bert-base", name="m", path="p", max_length=128,
                              dpr={"lr": "8e-5", "batch_size": 16, "gradient_accumulation_steps": 1})
    assert spec.dpr.lr == 8e-5 and spec.max_length == 128       # YAML reads 8e-5 as a string
    with pytest.raises(HarnessError, match=r"model 'm' needs the key 'path'"):
        ModelSpec.from_config({"name": "m"})


@dataclass
class Inner:
    k: int = 1


@dataclass
class Outer:
    mode: str = choices("a", "b", default="a")
    items: list[float] = field(default_factory=list)
    inner: Inner = field(default_factory=Inner)
    maybe: int | None = None


def test_build_nested_lists_unions_and_choices() -> None:
    out = build(Outer, {"mode": "b", "items": [1, "2.5"], "inner": {"k": 3}, "maybe": None}, "x")
    assert out == Outer("b", [1.0, 2.5], Inner(3), None)
    with pytest.raises(HarnessError, match=r"unknown key 'kk' in x, inner"):
        build(Outer, {"inner": {"kk": 1}}, "x")
    with pytest.raises(HarnessError, match=r"x, mode='c' is not one of a, b"):
        build(Outer, {"mode": "c"}, "x")
    with pytest.raises(HarnessError, match=r"x, maybe"):
        build(Outer, {"maybe": "seven"}, "x")


@dataclass(kw_only=True)
class _Search:
    role = "search"
    derived = ("voyager",)
    top_k: int
    chunk: int = excluded_field("how the search is chunked")


@dataclass(kw_only=True)
class _Encode:
    max_length: int = count()
    search: _Search = flat()


@dataclass(kw_only=True)
class _Task:
    name: str
    encode: _Encode = flat()
    nested: _Search


def test_flat_nodes_take_their_keys_from_the_parent() -> None:
    """A flat node's keys are the parent's own: built into the node, named ``task.<key>`` by its constraints, typos
    answered with the closest key of any node; a nested node keeps its own mapping."""
    got = build(_Task, {"name": "x", "max_length": 8, "top_k": 10, "chunk": 2, "nested": {"top_k": 1, "chunk": 3}},
                "task 'x'", key="task")
    assert got.encode.max_length == 8 and got.encode.search.top_k == 10 and got.nested.chunk == 3
    with pytest.raises(HarnessError, match=r"unknown key 'top_kk' in task 'x'; did you mean 'top_k'"):
        build(_Task, {"name": "x", "max_length": 8, "top_kk": 10}, "task 'x'", key="task")
    with pytest.raises(HarnessError, match=r"task\.max_length=0 is below 1"):
        build(_Task, {"name": "x", "max_length": 0, "top_k": 1, "chunk": 1, "nested": {"top_k": 1, "chunk": 1}},
              "task 'x'", key="task")
    with pytest.raises(HarnessError, match=r"task 'x' needs the key 'chunk'"):
        build(_Task, {"name": "x", "max_length": 8, "top_k": 1}, "task 'x'", key="task")
    assert ("task.max_length", ">= 1") in constraints(_Task, "task")


def test_what_a_key_is_follows_from_where_it_is_declared() -> None:
    """Excluded keys from the field, search-only (or train-only) keys from the node's role, at their dotted key."""
    assert excluded_keys(_Task, "task") == {"task.chunk": "how the search is chunked",
                                            "task.nested.chunk": "how the search is chunked"}
    assert role_keys(_Task, "search", "task") == ("task.top_k", "task.chunk", "task.voyager", "task.nested")
    assert role_keys(_Task, "train", "task") == ()


def test_a_key_declared_by_two_nodes_is_refused() -> None:
    @dataclass(kw_only=True)
    class Twice:
        encode: _Encode = flat()
        max_length: int

    with pytest.raises(TypeError, match="key 'max_length' is declared by two of its nodes"):
        build(Twice, {}, "x")
