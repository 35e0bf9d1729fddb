"""Never a wrong number with exit 0 (issue 28), through the commands: a NaN or infinite metric makes a failed record
(written as one, read as one by the leaderboard and the mteb export), and a record of a schema this harness does not
read is refused by selection and skipped, with a warning naming it, by the leaderboard."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.core import results
from tests.conftest import write_beir_folder
from tests.forked import run_module
from tests.test_bad_inputs import beir, invoke

MODEL = {"name": "enc", "path": "/models/enc", "revision": None, "family": "enc", "size": "base", "fingerprint": "f00d"}


def put(root: Path, dataset: str, score: float, *, run: str = "r1", model: dict | None = None, **extra: object) -> Path:
    """A record file as a harness writes it (Python's json: a NaN is written as the bare token NaN)."""
    m = model or MODEL
    data = {"task": "beir", "dataset": dataset, "split": "test", "model": m, "main_score": "ndcg_at_10",
            "metrics": {"ndcg_at_10": score, "recall_at_100": 0.9}, "run_id": run, "status": "ok",
            "created_at": "2026-11-01T00:00:00+00:00", "schema_version": 2} | extra
    path = results.record_path(root, "beir", m["name"], run, dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def strict_json(path: Path) -> dict:
    def refuse(token: str) -> None:
        raise AssertionError(f"{path} holds {token}, which is not JSON")
    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_metric_is_a_failed_cell_and_never_exported(bad: float, tmp_path: Path) -> None:
    res = tmp_path / "results"
    put(res, "scifact", 0.5)
    nan_path = put(res, "nfcorpus", bad)
    lb = run_module("harness.leaderboard", str(res), "--out", str(tmp_path / "site"), "--no-published", cwd=tmp_path)
    assert lb.returncode == 0, lb.stderr[-2000:]
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    overview, beir_row = [line for line in md.splitlines() if line.startswith("| enc |")]
    for row in (overview, beir_row):
        assert "nan" not in row.lower() and "inf" not in row.lower(), row
    assert beir_row.startswith("| enc | base | this run | failed | **50.0** |"), beir_row   # NFCorpus, SciFact
    assert beir_row.endswith(r"| 50.0\* |") and r"| 50.0\* |" in overview   # averages: partial, SciFact only
    assert f"NFCorpus: 1 failed record(s), no score: metric ndcg_at_10={bad} is not a finite number" in md
    ex = run_module("harness", "export", "--format", "mteb", str(res), "--out", str(tmp_path / "mteb"), cwd=tmp_path)
    assert ex.returncode == 0, ex.stderr[-2000:]
    assert "skipped 1 record(s): a metric is NaN or infinite" in ex.stdout and str(nan_path) in ex.stdout
    written = [p for p in (tmp_path / "mteb").rglob("*.json") if p.name != "model_meta.json"]
    assert [p.name for p in written] == ["SciFact.json"]
    for p in written:
        strict_json(p)


def test_the_writer_turns_a_nan_metric_into_a_failed_record(tmp_path: Path, capfd, monkeypatch) -> None:
    """A run whose evaluation gives NaN: a failed record (strict JSON, the error naming the metric), exit 2."""
    from harness.tasks.retrieval.retrievers import retriever

    real = retriever.means
    monkeypatch.setattr(retriever, "means", lambda per_query: real(per_query) | {"ndcg_at_10": math.nan})
    write_beir_folder(tmp_path / "data")
    code, printed = invoke([a for a in beir(tmp_path) if a != "overwrite=true"], capfd)
    assert code == 2, printed[-3000:]
    assert "toy: metric ndcg_at_10=nan is not a finite number" in printed, printed[-3000:]
    (path,) = (tmp_path / "results").rglob("toy.json")
    data = strict_json(path)
    assert data["status"] == "failed" and data["metrics"]["ndcg_at_10"] is None
    assert "ndcg_at_10=nan" in data["error"]


def test_an_unknown_schema_is_refused_by_select_and_skipped_by_the_leaderboard(tmp_path: Path) -> None:
    res = tmp_path / "results"
    put(res, "scifact", 0.5)
    future = {**MODEL, "name": "future"}
    v99 = put(res, "scifact", 0.9, model=future, schema_version=99)
    sel = run_module("harness.select", "--task", "beir", "--results", str(res), cwd=tmp_path)
    errors = [line for line in sel.stderr.splitlines() if line.startswith("error:")]
    assert sel.returncode == 2 and len(errors) == 1, sel.stdout + sel.stderr
    assert f"record {v99}: schema_version 99 is not one this harness reads (1, 2)" in errors[0]
    put(res, "scifact", 0.9, model=future, schema_version="2")   # a string is no schema version either
    lb = run_module("harness.leaderboard", str(res), "--out", str(tmp_path / "site"), "--no-published", cwd=tmp_path)
    assert lb.returncode == 0, lb.stderr[-2000:]
    assert f"skipping {v99}: schema_version '2' is not one this harness reads" in lb.stderr
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    assert "| future |" not in md and "## Skipped files" in md and str(v99) in md


def test_a_published_mteb_score_that_is_not_finite_is_no_score(tmp_path: Path) -> None:
    from harness.mteb_results.reading import read_file

    path = tmp_path / "SciFact.json"
    path.write_text('{"task_name": "SciFact", "scores": {"test": [{"hf_subset": "default", "main_score": NaN}]}}')
    assert read_file(path).main_score("test") is None
