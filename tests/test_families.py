"""The task-family interface: the README's toy family (one module, one config file, one registry entry) is run,
selected and shown on the leaderboard with no other change; the registry refuses unknown and clashing names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from harness import families, selection, specs
from harness.errors import HarnessError
from harness.leaderboard import build_leaderboard
from harness.leaderboard.site import site_data
from harness.runner import run
from harness.selection.rules import rule_for
from harness.specs import stages
from tests.conftest import REPO, compose


def readme_blocks() -> tuple[str, str, str]:
    """(module, yaml, registry line) from the README's "Adding a task family" section."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Adding a task family", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    python = [b for lang, b in blocks if lang == "python"]
    yaml = next(b for lang, b in blocks if lang == "yaml")
    return python[0], yaml, python[1].strip()


@pytest.fixture()
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    module, yaml, entry = readme_blocks()
    (tmp_path / "toy_family.py").write_text(module)
    (tmp_path / "conf" / "task").mkdir(parents=True)
    (tmp_path / "conf" / "task" / "toy.yaml").write_text(yaml)
    monkeypatch.syspath_prepend(str(tmp_path))
    name, _, target = entry.rstrip(",").partition(":")
    monkeypatch.setitem(families.REGISTRY, name.strip().strip('"'), target.strip().strip('"'))
    yield tmp_path
    families._loaded.pop("toy", None)
    sys.modules.pop("toy_family", None)


def test_readme_toy_family_runs_selects_and_shows(toy: Path, capsys) -> None:
    overrides = [f"hydra.searchpath=[file://{toy}/conf]", "task=toy", "model=all-minilm-l6-v2",
                 f"paths.results={toy}/results", f"paths.outputs={toy}/outputs"]
    recs = run(compose(overrides))
    assert [(r.task, r.dataset, r.score, r.higher_is_better) for r in recs] == [
        ("toy", "scifact", 14.0, True), ("toy", "nq", 4.0, True)]
    assert run(compose(overrides))[0].created_at == recs[0].created_at          # finished: skipped
    assert run(compose([*overrides, "task.factor=3"]))[0].score == 21.0        # a new setting: a new run

    chosen = selection.choose("toy", [r for r in _records(toy)])
    assert chosen["all-minilm-l6-v2"].cells["toy", "scifact"][0].score == 21.0   # best configuration per dataset

    lb = build_leaderboard([toy / "results"], published=False)
    table = lb.table("toy")
    assert table.title == "Toy scores: name length x factor"
    assert table.cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["scifact"].text == "21.0"
    assert site_data(lb)["labels"]["toy"] == "Toy"                             # the page's filter and charts


def _records(root: Path):
    from harness.results import iter_records

    return [r for _, r in iter_records(root / "results")]


def test_unknown_family_and_clashing_registration() -> None:
    with pytest.raises(HarnessError, match=r"unknown runner 'bier'\. Valid runners \(closest first\): beir"):
        families.get("bier")
    with pytest.raises(HarnessError, match=r"unknown task 'bier'\. Valid tasks \(closest first\): beir"):
        specs.get("bier")
    with pytest.raises(HarnessError, match=r"already registered as harness\.families\.beir:BeirFamily"):
        families.register("beir", "elsewhere:Other")


def test_every_task_spec_declares_what_the_task_is() -> None:
    for name, spec in specs.all_specs().items():
        assert spec.name == name and spec.main_metric and spec.tables and rule_for(spec.selection).description
        assert spec.runner in families.REGISTRY and isinstance(spec.higher_is_better, bool)
        assert stages.versions(spec.stages)   # every stage is declared with its protocol version
    for fam in families.all_families():
        assert all(k.startswith("task.") or k == "seed" for k in fam.identity_exclude), fam
