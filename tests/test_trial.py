"""Issue 31: ``python -m harness.trial`` (``scripts/paper-trial.sh``) makes the toy data and runs the shrunk paper
graph in one command; the toy data is every layout the graph reads (the run itself is tests/test_paper_runs.py's)."""

from __future__ import annotations

from pathlib import Path

from harness.trial.toy_data import BEIR, CQA, LANGS, write_paper_data
from tests.conftest import REPO
from tests.forked import run_module


def test_the_toy_data_holds_every_folder_the_shrunk_graph_reads(tmp_path: Path) -> None:
    from harness.tasks.retrieval.data.beir import load_local

    root = write_paper_data(tmp_path / "data")
    for name in BEIR:
        ds = load_local(root / name, name, "dev" if name == "msmarco" else "test")
        assert len(ds) > 0 and ds.qrels
    assert sorted(p.name for p in (root / "cqadupstack").iterdir()) == sorted(CQA)
    assert sorted(p.name for p in (root / "codesearchnet").iterdir()) == sorted(LANGS)
    for folder in ("MNLI", "RTE", "QNLI", "QQP", "STS-B", "MRPC", "SST-2", "CoLA"):
        assert (root / folder / "train.tsv").is_file() or (root / folder).is_dir()
    assert {p.name for p in (root / "mldr-v1.0-en").iterdir()} >= {"corpus.jsonl", "test.jsonl", "train.jsonl"}
    assert (root / "triplets.tsv").is_file() and (root / "kd.jsonl").is_file()


def test_the_trial_writes_its_data_and_previews_the_graph(tmp_path: Path) -> None:
    got = run_module("harness.trial", "local", "--dir", str(tmp_path / "t"), "--dry-run", cwd=REPO, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    assert f"toy data written to {tmp_path / 't' / 'data'}" in got.stdout
    total = next(line for line in got.stdout.splitlines() if line.startswith("total"))
    assert total.split()[1] == "19" and "GPU-hours estimated" in total
    assert "from this run's local data" in got.stdout
