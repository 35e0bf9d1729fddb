"""KD training data (harness.tasks.retrieval.data.kd): the three layouts, KDProcessing's join, and every bad input's message."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.core.errors import DataError, HubUnavailableError
from harness.tasks.retrieval.data import kd

BGE = "msmarco-hardneg-sample/bge_example_msmarco.jsonl"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def flag_row(n_neg: int = 5, **over) -> dict:
    row = {"query": "what is a star", "pos": ["a star is a sun"], "neg": [f"negative {i}" for i in range(n_neg)],
           "pos_scores": [9.5], "neg_scores": [float(i) for i in range(n_neg)]}
    return row | over


def ids_files(tmp: Path, rows: list[dict] | None = None) -> tuple[Path, Path, Path]:
    queries = write_jsonl(tmp / "queries.jsonl", [{"query_id": 1, "text": "what is a star"},
                                                  {"query_id": 2, "text": "how to bake bread"}])
    documents = write_jsonl(tmp / "documents.jsonl", [{"document_id": i, "text": f"doc {i}"} for i in range(10, 20)])
    rows = rows or [{"query_id": 1, "document_ids": [10, 11, 12, 13], "scores": [4.0, 3.0, 2.0, 1.0]},
                    {"query_id": 2, "document_ids": [14, 15, 16, 17], "scores": [1.0, 2.0, 3.0, 4.0]}]
    return write_jsonl(tmp / "train.jsonl", rows), queries, documents


# ---- layouts ---------------------------------------------------------------------------------------------

def test_flagembedding_sample_joins_positives_first(shared_data: Path) -> None:
    ds, facts = kd.load_kd_file(shared_data / BGE, n_ways=16)
    assert facts["layout"] == "flag" and facts["n_samples"] == 10 and len(ds) == 10
    assert ds.column_names == ["query", "documents", "scores"]
    first = json.loads((shared_data / BGE).read_text().splitlines()[0])
    row = ds[0]
    assert row["query"] == first["query"]
    assert row["documents"] == (first["pos"] + first["neg"])[:16]
    assert row["scores"] == pytest.approx((first["pos_scores"] + first["neg_scores"])[:16])


def test_ids_layout_is_joined_by_pylates_kdprocessing(tmp_path: Path) -> None:
    train, queries, documents = ids_files(tmp_path)
    ds, facts = kd.load_kd_file(train, n_ways=3, queries_path=str(queries), documents_path=str(documents))
    assert facts["layout"] == "ids"
    row = ds[1]
    assert row["query"] == "how to bake bread"
    assert row["documents"] == ["doc 14", "doc 15", "doc 16"] and row["scores"] == [1.0, 2.0, 3.0]


def test_joined_layout_and_seeded_sample(tmp_path: Path) -> None:
    rows = [{"query": f"q{i}", "documents": ["a", "b"], "scores": [1, 0]} for i in range(20)]
    path = write_jsonl(tmp_path / "joined.jsonl", rows)
    a, facts = kd.load_kd_file(path, n_ways=2, max_samples=5, seed=3)
    b, _ = kd.load_kd_file(path, n_ways=2, max_samples=5, seed=3)
    assert facts["layout"] == "joined" and facts["n_rows_in_file"] == 20 and len(a) == 5
    assert a["query"] == b["query"]


# ---- bad inputs: one message each --------------------------------------------------------------------------

@pytest.mark.parametrize(("row", "message"), [
    (flag_row(pos_scores=None), r"line 1: no teacher scores \(pos_scores missing\)"),
    ({k: v for k, v in flag_row().items() if k != "neg_scores"}, r"line 1: no teacher scores \(neg_scores missing\)"),
    (flag_row(neg_scores=[0.0, float("nan"), 1, 2, 3]), r"line 1: teacher score #2 is nan \(NaN/inf\)"),
    (flag_row(neg_scores=[0.0, 1.0]), r"line 1: 6 documents but 3 teacher scores; each document needs exactly one"),
    (flag_row(neg_scores=[0, "high", 1, 2, 3]), r"line 1: teacher score #2 is 'high', not a number"),
    (flag_row(n_neg=2), r"line 1: 3 documents, fewer than task\.train_data\.n_ways=4 .*n_ways<=3"),
    (flag_row(query=""), r"line 1: the query is missing or empty"),
    ({"question": "x", "passages": []}, r"line 1: not a KD training row .*flag: query, pos, neg, pos_scores"),
])
def test_bad_flag_rows(tmp_path: Path, row: dict, message: str) -> None:
    # json.dumps writes NaN as the bare token NaN, which json.loads reads back: a real file can hold it
    path = write_jsonl(tmp_path / "kd.jsonl", [row])
    with pytest.raises(DataError, match=message):
        kd.load_kd_file(path, n_ways=4)


def test_document_id_missing_from_documents_file_is_refused(tmp_path: Path) -> None:
    """PyLate's KDProcessing would substitute "" for the unknown id and train on it; we refuse before training."""
    train, queries, documents = ids_files(tmp_path, [
        {"query_id": 1, "document_ids": [10, 11, 99, 13], "scores": [4.0, 3.0, 2.0, 1.0]}])
    with pytest.raises(DataError, match=r"train\.jsonl line 1: document id 99 is not in the documents file\. "
                                        r"PyLate's KDProcessing would silently train on an empty text"):
        kd.load_kd_file(train, n_ways=4, queries_path=str(queries), documents_path=str(documents))


def test_ids_compared_as_stored_with_a_hint(tmp_path: Path) -> None:
    train, queries, documents = ids_files(tmp_path, [
        {"query_id": 1, "document_ids": ["10", "11"], "scores": [4.0, 3.0]}])
    with pytest.raises(DataError, match=r"document id '10' is not in the documents file \(an id '10' exists with "
                                        r"another type"):
        kd.load_kd_file(train, n_ways=2, queries_path=str(queries), documents_path=str(documents))


def test_ids_layout_bad_scores_and_query_ids(tmp_path: Path) -> None:
    train, queries, documents = ids_files(tmp_path, [
        {"query_id": 1, "document_ids": [10, 11, 12], "scores": [4.0, math.inf, 2.0]}])
    with pytest.raises(DataError, match=r"line 1: teacher score #1 is inf"):
        kd.load_kd_file(train, n_ways=2, queries_path=str(queries), documents_path=str(documents))
    write_jsonl(train, [{"query_id": 7, "document_ids": [10, 11], "scores": [1.0, 0.0]}])
    with pytest.raises(DataError, match=r"line 1: query id 7 is not in the queries file"):
        kd.load_kd_file(train, n_ways=2, queries_path=str(queries), documents_path=str(documents))
    write_jsonl(train, [{"query_id": 1, "document_ids": [10, 11], "scores": [1.0, 0.0]}])
    with pytest.raises(DataError, match=r"ids layout needs task\.train_data\.documents_path=<JSONL/Parquet with "
                                        r"document_id, text>"):
        kd.load_kd_file(train, n_ways=2, queries_path=str(queries))


def test_file_problems(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"KD training file not found: .*nope\.jsonl"):
        kd.load_kd_file(tmp_path / "nope.jsonl", n_ways=2)
    (tmp_path / "bad.jsonl").write_text('{"query": "x"\n')
    with pytest.raises(DataError, match=r"bad\.jsonl line 1: not valid JSON"):
        kd.load_kd_file(tmp_path / "bad.jsonl", n_ways=2)
    write_jsonl(tmp_path / "mixed.jsonl", [flag_row(), {"query": "x", "documents": ["a", "b"], "scores": [1, 2]}])
    with pytest.raises(DataError, match=r"mixed\.jsonl line 2: row layout differs from the first row's \(flag\)"):
        kd.load_kd_file(tmp_path / "mixed.jsonl", n_ways=2)


def test_hub_set_offline_fails_fast_naming_the_local_alternative() -> None:
    with pytest.raises(HubUnavailableError, match=r"KD training set 'lightonai/ms-marco-en-bge' needs the Hugging Face "
                                                  r"hub.*task\.train_data\.source=file task\.train_data\.path="):
        kd.load_kd_hub("lightonai/ms-marco-en-bge", "main", n_ways=32, max_samples=810_000, seed=12)
