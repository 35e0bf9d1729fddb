"""Result records: schema, run ids, atomic writes, skip logic, tolerant reading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core import results
from harness.core.results import ResultRecord


def make(rid: str = "r1", dataset: str = "scifact", status: str = "ok", score: float = 0.5) -> ResultRecord:
    return ResultRecord(
        task="beir", dataset=dataset, split="test", model={"name": "m", "path": "p"},
        metrics={"ndcg_at_10": score} if status == "ok" else {}, main_score="ndcg_at_10", run_id=rid, status=status,
    )


def test_write_read_roundtrip_fills_provenance(tmp_path: Path) -> None:
    path = results.write_record(tmp_path, make())
    assert path == tmp_path / "beir" / "m" / "r1" / "scifact.json"
    rec = results.read_record(path)
    assert rec.score == 0.5 and rec.created_at and "torch" in rec.versions
    assert rec.schema_version == results.SCHEMA_VERSION


def test_run_id_stable_and_sensitive() -> None:
    a = results.run_id({"lr": 1e-5, "model": {"x": 1, "y": 2}}, {"lr": 1e-5})
    b = results.run_id({"model": {"y": 2, "x": 1}, "lr": 1e-5}, {"lr": 1e-5})
    c = results.run_id({"lr": 2e-5, "model": {"x": 1, "y": 2}}, {"lr": 2e-5})
    assert a == b != c and a.startswith("lr=1e-05-")


def test_is_done_only_for_ok_records(tmp_path: Path) -> None:
    assert not results.finished_at(results.record_path(tmp_path, "beir", "m", "r1", "scifact"))
    results.write_record(tmp_path, make(status="failed"))
    assert not results.finished_at(results.record_path(tmp_path, "beir", "m", "r1", "scifact"))
    results.write_record(tmp_path, make())
    assert results.finished_at(results.record_path(tmp_path, "beir", "m", "r1", "scifact"))


def test_main_score_must_exist(tmp_path: Path) -> None:
    rec = make()
    rec.main_score = "ndcg_at_100"
    with pytest.raises(ValueError, match="main_score 'ndcg_at_100' not in metrics"):
        results.write_record(tmp_path, rec)


def test_failed_write_keeps_the_earlier_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = results.write_record(tmp_path, make(score=0.5))

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(results.os, "fsync", boom)
    with pytest.raises(OSError):
        results.write_record(tmp_path, make(score=0.9))
    assert results.read_record(path).score == 0.5
    assert not list(path.parent.glob(".*tmp"))


def test_iter_records_skips_foreign_and_malformed(tmp_path: Path) -> None:
    results.write_record(tmp_path, make())
    (tmp_path / "notes.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"foo": 1}))
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.warns(UserWarning) as caught:
        found = list(results.iter_records(tmp_path))
    assert len(found) == 1
    messages = " ".join(str(w.message) for w in caught)
    assert "notes.json" in messages and "other.json" in messages and "list.json" in messages


def test_a_failed_record_never_replaces_a_finished_one(tmp_path: Path) -> None:
    """Promise "a failure never replaces an ok record": it goes beside it, outside the ``*.json`` records."""
    ok = results.write_record(tmp_path, make(score=0.5))
    before = ok.read_bytes()
    failed = make()
    failed.status, failed.metrics, failed.error = results.STATUS_FAILED, {}, "corpus line 3: not valid JSON"
    side = results.write_record(tmp_path, failed)
    assert ok.read_bytes() == before and side != ok and side.parent == ok.parent
    assert side.name.startswith("scifact.failed-") and results.read_record(side).error == failed.error
    assert [r.status for _, r in results.iter_records(tmp_path)] == ["ok"]
    again = make()                                 # a failure over a failure (nothing finished) is replaced
    ok.unlink()
    again.status, again.metrics = results.STATUS_FAILED, {}
    assert results.write_record(tmp_path, again) == ok
    assert results.write_record(tmp_path, make(score=0.7)) == ok and results.read_record(ok).score == 0.7


def test_file_sha_is_the_files_content_hash(tmp_path: Path) -> None:
    import hashlib

    f = tmp_path / "train.jsonl"
    f.write_bytes(b'{"a": 1}\n')
    assert results.file_sha(f) == results.file_sha(str(f)) == hashlib.sha256(b'{"a": 1}\n').hexdigest()[:16]
    assert results.file_sha(None) is None and results.file_sha("") is None
    assert results.file_sha(tmp_path / "missing") is None and results.file_sha(tmp_path) is None
