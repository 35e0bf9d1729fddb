"""Adding a retriever (docs/layout.md): one module + one registration line + one spec file run a retrieval task
with a new retriever; the retriever is a stage choice in YAML, and its stage version is part of the run id."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from harness.run.runner import run
from tests.conftest import REPO, compose
from tests.test_retrieval_runs import TINY


def doc_blocks() -> tuple[str, str, str]:
    """(retriever module, registration line, spec YAML) from docs/layout.md's "Adding a retriever" section."""
    section = (REPO / "docs" / "layout.md").read_text().split("## Adding a retriever", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    python = [b for lang, b in blocks if lang == "python"]
    return python[0], python[1].strip(), next(b for lang, b in blocks if lang == "yaml")


@pytest.fixture()
def mybm25(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from harness.tasks.retrieval import stages

    module, line, yaml = doc_blocks()
    (tmp_path / "bm25_retriever.py").write_text(module)
    (tmp_path / "conf" / "task").mkdir(parents=True)
    (tmp_path / "conf" / "task" / "mybm25.yaml").write_text(yaml)
    monkeypatch.syspath_prepend(str(tmp_path))
    name, _, value = line.rstrip(",").partition(": ")
    monkeypatch.setitem(stages.STAGES, name.strip('"'), eval(value, {"Stage": stages.Stage}))   # the doc's line
    yield tmp_path
    sys.modules.pop("bm25_retriever", None)


def test_a_task_with_a_new_retriever_runs_from_the_docs_blocks(mybm25: Path, toy_beir: Path) -> None:
    base = [*TINY, f"task.data_dir={toy_beir}", "task.datasets=[toy]", "+task.catalog.toy={split: test}",
            f"paths.results={mybm25}/results", f"paths.outputs={mybm25}/outputs", f"paths.cache={mybm25}/cache"]
    (rec,) = run(compose([f"hydra.searchpath=[file://{mybm25}/conf]", "task=mybm25", *base]))
    assert rec.status == "ok" and rec.task == "mybm25" and 0.0 < rec.score <= 1.0
    assert rec.details["retriever"] == "bm25" and rec.details["k1"] == 0.9
    (dense,) = run(compose(["task=beir", "task.train=false", *base]))
    assert dense.status == "ok" and dense.details.get("retriever") != "bm25" and dense.run_id != rec.run_id

    from harness.run.planning import planner_of

    def protocol(*extra: str) -> dict[str, int]:
        cfg = compose([f"hydra.searchpath=[file://{mybm25}/conf]", "task=mybm25", *base, *extra])
        return planner_of(cfg).cells()[0].identity["protocol"]

    assert protocol() == {"load.encoder": 1, "train.dense": 2, "retrieve.bm25": 1, "score.ir": 1}
    assert protocol("task.retriever=single_vector")["retrieve.single_vector"] == 1   # the choice is the stage


def test_an_unknown_retriever_is_refused_before_any_work(toy_beir: Path, tmp_path: Path) -> None:
    from harness.core.errors import HarnessError

    cfg = compose(["task=beir", *TINY, f"task.data_dir={toy_beir}", "task.datasets=[toy]",
                   "+task.catalog.toy={split: test}", "task.retriever=bm52", f"paths.results={tmp_path}/results"])
    with pytest.raises(HarnessError, match=r"unknown stage 'retrieve\.bm52'.*Declare it in STAGES of harness/tasks/retrieval/stages\.py"):
        run(cfg)
    assert not (tmp_path / "results").exists()
