"""Adding a task (docs/layout.md): retrieval task over a new data kind (one kind module, one registry line, one spec
file) is run, selected and shown on the leaderboard with no other change; the registries refuse unknown and
clashing names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness import selection, specs
from harness.core.errors import HarnessError
from harness.leaderboard import build_leaderboard
from harness.leaderboard.tables import site_data
from harness.run.planning import PLANNERS, planner_of
from harness.run.runner import run
from harness.selection.rules import rule_for
from harness.specs.stages import versions
from harness.tasks.efficiency import planner as efficiency
from harness.tasks.glue import planner as glue
from harness.tasks.mteb import planner as mteb
from harness.tasks.retrieval import stages as retrieval
from tests.conftest import REPO, compose

#: the stages each protocol declares, by its runner (the retrieval tasks': retrieval's)
DECLARED = {"glue": glue.STAGES, "efficiency": efficiency.STAGES, "mteb": mteb.STAGES}


def readme_blocks() -> tuple[str, str, str]:
    """(data-kind module, registry line, spec YAML) from the "Adding a task" section of docs/layout.md."""
    text = (REPO / "docs" / "layout.md").read_text()
    section = text.split("## Adding a task", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    python = [b for lang, b in blocks if lang == "python"]
    yaml = next(b for lang, b in blocks if lang == "yaml")
    return python[0], python[1].strip(), yaml


@pytest.fixture()
def mytsv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The three blocks of docs/layout.md, placed as a user would: the kind module on the path, its registry line in
    KINDS, the spec in a config folder; and a data folder in the kind's format."""
    from harness.tasks.retrieval.data.catalog import KINDS
    from tests.test_data_kinds import write_tsv_folder

    module, entry, yaml = readme_blocks()
    (tmp_path / "tsv_kind.py").write_text(module)
    (tmp_path / "conf" / "task").mkdir(parents=True)
    (tmp_path / "conf" / "task" / "mytsv.yaml").write_text(yaml)
    monkeypatch.syspath_prepend(str(tmp_path))
    name, _, target = entry.rstrip(",").partition(":")
    monkeypatch.setitem(KINDS, name.strip().strip('"'), target.strip().strip('"'))
    write_tsv_folder(tmp_path / "data")
    yield tmp_path
    sys.modules.pop("tsv_kind", None)


def test_readme_new_kind_task_runs_selects_and_shows(mytsv: Path) -> None:
    from tests.test_retrieval_runs import TINY

    overrides = [f"hydra.searchpath=[file://{mytsv}/conf]", "task=mytsv", *TINY, f"task.data_dir={mytsv}/data",
                 f"paths.results={mytsv}/results", f"paths.outputs={mytsv}/outputs", f"paths.cache={mytsv}/cache"]
    recs = run(compose(overrides))
    assert [(r.task, r.dataset, r.status) for r in recs] == [("mytsv", "toytsv", "ok")]
    assert 0.0 < recs[0].score <= 1.0 and recs[0].config["task"]["spec"]["tables"][0]["id"] == "mytsv"
    assert run(compose(overrides))[0].created_at == recs[0].created_at          # finished: skipped

    chosen = selection.choose("mytsv", _records(mytsv))                       # the spec the records carry
    assert chosen["tiny-modernbert"].cells["mytsv", "toytsv"][0].run_id == recs[0].run_id
    from harness.select import main as select

    assert select(["--task", "mytsv", "--results", str(mytsv / "results")]) == 0      # ... and from the command line
    assert (mytsv / "selected" / "mytsv-tiny-modernbert.json").is_file()

    lb = build_leaderboard([mytsv / "results"], published=False)
    table = lb.table("mytsv")
    assert table.title == "My TSV sets: nDCG@10"
    cell = table.cells["run:tiny-modernbert|all-MiniLM-L6-v2|small"]["toytsv"]
    assert cell.text == f"{recs[0].score * 100:.1f}"
    assert site_data(lb)["labels"]["mytsv"] == "My TSV sets"                   # the page's filter and charts


def _records(root: Path):
    from harness.core.results import iter_records

    return [r for _, r in iter_records(root / "results")]


def test_unknown_family_and_clashing_registration() -> None:
    with pytest.raises(HarnessError, match=r"unknown runner 'bier'\. Valid runners \(closest first\): beir"):
        PLANNERS.lookup("bier")
    with pytest.raises(HarnessError, match=r"unknown task 'bier'\. Valid tasks \(closest first\): beir"):
        specs.get("bier")
    with pytest.raises(HarnessError, match=r"already registered as RetrievalKind\(harness\.tasks\.retrieval\.beir:BeirSettings\)"):
        PLANNERS.register("beir", "elsewhere:Other")


def test_every_task_spec_declares_what_the_task_is() -> None:
    for name, spec in specs.all_specs().items():
        assert spec.name == name and spec.main_metric and spec.tables and rule_for(spec.selection).description
        assert spec.runner in PLANNERS and isinstance(spec.higher_is_better, bool)
        config = OmegaConf.to_container(compose([f"task={name}"]), resolve=True)
        planner = planner_of(compose([f"task={name}"]), source=False)
        # every stage is declared, with its protocol version, by its protocol
        assert versions(DECLARED.get(spec.runner, retrieval.STAGES), spec.stages_for(config))
        assert all(k.startswith("task.") or k == "seed" for k in planner.identity_exclude), name


def stage_nodes(cls: type) -> set[type]:
    """The stage nodes ``cls`` composes (the typed nodes the evaluation and training modules define), recursively."""
    import dataclasses
    import typing

    out: set[type] = set()
    for tp in typing.get_type_hints(cls).values():
        for node in (tp, *typing.get_args(tp)):
            if dataclasses.is_dataclass(node) and isinstance(node, type):
                if node.__module__.startswith(("harness.tasks.retrieval.settings", "harness.tasks.retrieval.retrievers",
                                                "harness.encoding", "harness.training")):
                    out.add(node)
                out |= stage_nodes(node)
    return out


def copied_fields(cls: type, nodes: set[type]) -> set[str]:
    """Fields ``cls`` itself declares that a stage node already declares (a copy, not a composition)."""
    import inspect

    from harness.core.typed import config_keys, init_fields

    own = {name for name, f in init_fields(cls).items() if name in inspect.get_annotations(cls)
           and not f.metadata.get("flat")}
    return own & {key for node in nodes for key in config_keys(node)}


def test_a_retrieval_task_composes_its_stages_nodes_and_copies_no_field() -> None:
    """Each retrieval task's settings are the nodes of its stages plus its own keys ("Adding a task" in
    docs/layout.md): none declares a key one of the stage nodes declares; the check sees a copy."""
    from dataclasses import dataclass

    from harness.tasks.retrieval.planner import RetrievalKind, RetrievalSettings

    kinds = [r for r in PLANNERS.values() if isinstance(r, RetrievalKind)]
    assert {k.settings_class.__name__ for k in kinds} == {"BeirSettings", "CodeSettings", "MldrSettings",
                                                           "ColbertSettings"}
    nodes = {n for k in kinds for n in stage_nodes(k.settings_class)}
    assert {n.__name__ for n in nodes} >= {"Batching", "Ranking", "SingleVectorEval", "ExactSearch", "DenseTraining",
                                           "KdTraining", "MultiVectorEval", "MultiVectorSearch", "ShardSettings"}
    assert {k.settings_class.__name__: copied_fields(k.settings_class, nodes) for k in kinds} == {
        k.settings_class.__name__: set() for k in kinds}

    @dataclass(kw_only=True)
    class Copying(RetrievalSettings):
        similarity: str

    assert copied_fields(Copying, nodes) == {"similarity"}
