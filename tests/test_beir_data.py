"""BEIR loader: the layout, CRLF/LF, optional header, and a clear message for every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.errors import DataError
from harness.tasks.retrieval.data.beir import load_local, read_qrels
from tests.conftest import write_beir_folder


def test_loads_toy_folder_lf_and_crlf(tmp_path: Path) -> None:
    lf = load_local(write_beir_folder(tmp_path / "a"), "toy")
    crlf = load_local(write_beir_folder(tmp_path / "b", crlf=True), "toy")
    assert len(lf) == 40 and len(lf.queries) == 5
    assert lf.qrels["q0"]["d0-0"] == 2
    assert lf.fingerprint == crlf.fingerprint           # same content, whatever the line endings
    assert lf.corpus.texts(0, len(lf))[0].startswith("astronomy note 0 stars")


def test_qrels_header_optional_and_trec_style(tmp_path: Path) -> None:
    p = tmp_path / "q.tsv"
    p.write_text("q1\td1\t1\nq1\td2\t0\n")
    assert read_qrels(p) == {"q1": {"d1": 1, "d2": 0}}
    p.write_text("q1\t0\td1\t2\n")
    assert read_qrels(p) == {"q1": {"d1": 2}}


def test_missing_folder_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"dataset folder not found: .*nope.*task\.data_dir"):
        load_local(tmp_path / "nope", "nope")


def test_missing_corpus_file(tmp_path: Path) -> None:
    folder = write_beir_folder(tmp_path)
    (folder / "corpus.jsonl").unlink()
    with pytest.raises(DataError, match=r"corpus file not found: .*corpus\.jsonl"):
        load_local(folder, "toy")


def test_missing_split_lists_available(tmp_path: Path) -> None:
    folder = write_beir_folder(tmp_path)
    with pytest.raises(DataError, match=r"qrels file not found: .*dev\.tsv.*\['test', 'train'\].*task\.split"):
        load_local(folder, "toy", split="dev")


def test_malformed_json_line_is_named(tmp_path: Path) -> None:
    folder = write_beir_folder(tmp_path)
    lines = (folder / "corpus.jsonl").read_text().splitlines()
    lines[6] = '{"_id": "broken", "text": '
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"corpus\.jsonl line 7: not valid JSON"):
        load_local(folder, "toy")


def test_missing_field_is_named(tmp_path: Path) -> None:
    folder = write_beir_folder(tmp_path)
    with open(folder / "queries.jsonl", "a") as fh:
        fh.write(json.dumps({"_id": "q9"}) + "\n")
    with pytest.raises(DataError, match=r"queries\.jsonl line 6: missing field\(s\) \['text'\]"):
        load_local(folder, "toy")


def test_empty_corpus(tmp_path: Path) -> None:
    folder = write_beir_folder(tmp_path)
    (folder / "corpus.jsonl").write_text("")
    with pytest.raises(DataError, match=r"corpus\.jsonl is empty: the corpus has no documents"):
        load_local(folder, "toy")


def test_qrels_bad_columns_and_score(tmp_path: Path) -> None:
    p = tmp_path / "q.tsv"
    p.write_text("query-id\tcorpus-id\tscore\nq1 d1 1\n")
    with pytest.raises(DataError, match=r"q\.tsv line 2: expected 3 tab-separated columns"):
        read_qrels(p)
    p.write_text("q1\td1\t1\nq1\td2\thigh\n")
    with pytest.raises(DataError, match=r"line 2: score 'high' is not a number"):
        read_qrels(p)


def test_qrels_unknown_ids(tmp_path: Path) -> None:
    folder = write_beir_folder(tmp_path)
    with open(folder / "qrels" / "test.tsv", "a") as fh:
        fh.write("q0\tghost-doc\t1\nq-ghost\td0-0\t1\n")
    with pytest.raises(DataError, match=r"1 unknown query id\(s\) \['q-ghost'\] and 1 unknown document id\(s\) \['ghost-doc'\].*strict_qrels=false"):
        load_local(folder, "toy")
    ds = load_local(folder, "toy", strict_qrels=False)   # dropped with a warning
    assert "q-ghost" not in ds.qrels and "ghost-doc" not in ds.qrels["q0"]


def test_duplicate_doc_id(tmp_path: Path) -> None:
    folder = write_beir_folder(tmp_path)
    with open(folder / "corpus.jsonl", "a") as fh:
        fh.write(json.dumps({"_id": "d0-0", "title": "", "text": "again"}) + "\n")
    with pytest.raises(DataError, match=r"line 41: duplicate document id 'd0-0'"):
        load_local(folder, "toy")


@pytest.mark.slow
def test_real_scifact_counts(shared_data: Path) -> None:
    test = load_local(shared_data / "scifact", "scifact", "test")
    train = load_local(shared_data / "scifact", "scifact", "train")
    assert (len(test), len(test.queries)) == (5183, 1109)
    assert len(test.qrels) == 300 and sum(map(len, test.qrels.values())) == 339
    assert len(train.qrels) == 809 and sum(map(len, train.qrels.values())) == 919


@pytest.mark.slow
def test_real_beir_qrels_resolve_against_queries(shared_data: Path) -> None:
    from harness.tasks.retrieval.data.beir import read_queries

    for name in ("nfcorpus", "arguana", "trec-covid"):
        folder = shared_data / "beir-queries-qrels-only" / name
        qrels, queries = read_qrels(folder / "qrels" / "test.tsv"), read_queries(folder / "queries.jsonl")
        assert set(qrels) <= set(queries)
    assert sum(map(len, read_qrels(shared_data / "beir-queries-qrels-only/nfcorpus/qrels/test.tsv").values())) == 12334
