"""Every bad local data file is one DataError line naming the file, the line, the problem and the fix."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from harness.core.errors import DataError
from harness.tasks.glue import data as glue
from harness.tasks.retrieval.data import beir, coir, hub_layout, kd, mldr, triplets

REPO = Path(__file__).resolve().parents[1]
BAD = "café".encode("latin-1")            # b"caf\xe9": a Latin-1 é is not UTF-8
UTF8_FIX = "re-save the file as UTF-8"
GRADE_FIX = "relevance grades must be integers (0, 1, 2, ...): round or map the scores"
HEADER_FIX = "the third column must be an integer relevance grade; a header is allowed on line 1 only"

Loader = Callable[[], Any]


@dataclass
class Case:
    """A bad input: ``build(tmp_path)`` writes it and returns (load it, the bad file); the error must name
    ``loc`` (line/row/pair; None where no line applies) and contain ``fix``."""

    build: Callable[[Path], tuple[Loader, Path]]
    loc: str | None
    fix: str


# ---------------------------------------------------------------------------------------------- builders
def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def jsonl(*rows: dict[str, Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def beir_folder(tmp: Path, corpus: bytes | None = None, queries: bytes | None = None,
                qrels: bytes | None = None) -> Path:
    folder = tmp / "toy"
    write(folder / "corpus.jsonl", corpus or jsonl(*({"_id": f"d{i}", "text": f"doc {i}"} for i in range(1, 4))))
    write(folder / "queries.jsonl", queries or jsonl({"_id": "q1", "text": "a"}, {"_id": "q2", "text": "b"}))
    write(folder / "qrels" / "test.tsv", qrels or b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return folder


def beir_case(part: str, data: bytes) -> Callable[[Path], tuple[Loader, Path]]:
    def build(tmp: Path) -> tuple[Loader, Path]:
        folder = beir_folder(tmp, **{part: data})
        bad = {"corpus": folder / "corpus.jsonl", "queries": folder / "queries.jsonl"}.get(part)
        return (lambda: beir.load_local(folder, "toy")), bad or folder / "qrels" / "test.tsv"
    return build


def glue_tasks() -> dict[str, glue.GlueTask]:
    return glue.task_definitions(OmegaConf.to_container(OmegaConf.load(REPO / "conf/task/glue.yaml").definitions))


RTE_HEAD = b"index\tsentence1\tsentence2\tlabel\n"


def glue_case(task: str, folder: str, train: bytes) -> Callable[[Path], tuple[Loader, Path]]:
    def build(tmp: Path) -> tuple[Loader, Path]:
        spec = glue_tasks()[task]
        bad = write(tmp / folder / spec.local.train, train)
        for f in spec.local.dev.values():
            write(tmp / folder / f, train)
        return (lambda: glue.load_local(spec, tmp)), bad
    return build


def file_case(name: str, data: bytes, load: Callable[[Path], Any]) -> Callable[[Path], tuple[Loader, Path]]:
    def build(tmp: Path) -> tuple[Loader, Path]:
        path = write(tmp / name, data)
        return (lambda: load(path)), path
    return build


def kd_load(path: Path) -> Any:
    return kd.load_kd_file(path, n_ways=2)


def kd_ids_case(train: bytes) -> Callable[[Path], tuple[Loader, Path]]:
    def build(tmp: Path) -> tuple[Loader, Path]:
        queries = write(tmp / "queries.jsonl", jsonl({"query_id": 1, "text": "q"}, {"query_id": 2, "text": "r"}))
        docs = write(tmp / "docs.jsonl", jsonl(*({"document_id": i, "text": f"d{i}"} for i in range(10, 13))))
        path = write(tmp / "train.jsonl", train)
        return (lambda: kd.load_kd_file(path, n_ways=2, queries_path=str(queries), documents_path=str(docs))), path
    return build


def mldr_case(name: str, data: bytes) -> Callable[[Path], tuple[Loader, Path]]:
    def build(tmp: Path) -> tuple[Loader, Path]:
        folder = tmp / "mldr"
        if not name.startswith("corpus"):
            write(folder / "corpus.jsonl", jsonl({"docid": "d1", "text": "x"}))
        if not name.startswith("test"):
            write(folder / "test.jsonl", jsonl({"query_id": "q1", "query": "a", "positive_passages": [{"docid": "d1"}]}))
        path = write(folder / name, data)
        return (lambda: mldr.load_local(folder, "mldr")), path
    return build


def hub_case(config: str, name: str, data: bytes) -> Callable[[Path], tuple[Loader, Path]]:
    def build(tmp: Path) -> tuple[Loader, Path]:
        folder = tmp / "nano"
        write(folder / "corpus" / "train.jsonl", jsonl({"_id": "d1", "text": "x"}))
        write(folder / "queries" / "train.jsonl", jsonl({"_id": "q1", "text": "a"}))
        write(folder / "qrels" / "train.jsonl", jsonl({"query-id": "q1", "corpus-id": "d1", "score": 1}))
        path = write(folder / config / name, data)
        return (lambda: hub_layout.read_hub_layout(folder, "nano", "train")), path
    return build


def gz(data: bytes) -> bytes:
    return gzip.compress(data)


# ---------------------------------------------------------------------------------------------- the cases
L1 = b'{"_id": "d1", "text": "one"}\n'
L2 = b'{"_id": "d2", "text": "two"}\r\n'
L3 = b'{"_id": "d3", "text": "' + BAD + b'"}\n'
TRIPLET_HEAD = b"query\tpositive\tnegative\n"
FLAG = {"query": "q", "pos": ["p"], "neg": ["n"], "pos_scores": [1.0], "neg_scores": [0.0]}
CODEX = {"code": "def f(): pass", "docstring": "does f", "language": "ruby"}

UTF8_CASES = {
    "corpus.jsonl": Case(beir_case("corpus", L1 + L2 + L3), "line 3", UTF8_FIX),
    "corpus.jsonl-bom": Case(beir_case("corpus", b"\xef\xbb\xbf" + L1 + b"\xff\n"), "line 2", UTF8_FIX),
    "queries.jsonl": Case(beir_case("queries", b'{"_id": "q1", "text": "' + BAD + b'"}\n'), "line 1", UTF8_FIX),
    "qrels.tsv": Case(beir_case("qrels", b"query-id\tcorpus-id\tscore\r\nq1\td1\t1\r\nq\xe92\td2\t1\r\n"), "line 3",
                      UTF8_FIX),
    "glue.tsv": Case(glue_case("rte", "RTE", RTE_HEAD + b"0\ta\tb\tentailment\n1\t" + BAD + b"\tb\tentailment\n"),
                     "line 3", UTF8_FIX),
    "triplets.tsv": Case(file_case("t.tsv", TRIPLET_HEAD + b"q\tp\t" + BAD + b"\n", triplets.load_triplets_file),
                         "line 2", UTF8_FIX),
    "triplets.csv": Case(file_case("t.csv", b"query,positive,negative\n" + BAD + b",p,n\n",
                                   triplets.load_triplets_file), "line 2", UTF8_FIX),
    "triplets.jsonl": Case(file_case("t.jsonl", b'{"query": "' + BAD + b'", "positive": "p", "negative": "n"}\n',
                                     triplets.load_triplets_file), "line 1", UTF8_FIX),
    "kd.jsonl": Case(file_case("kd.jsonl", jsonl(FLAG) + b'{"query": "' + BAD + b'"}\n', kd_load), "line 2",
                     UTF8_FIX),
    "mldr corpus.jsonl.gz": Case(mldr_case("corpus.jsonl.gz", gz(b'{"docid": "d1", "text": "' + BAD + b'"}\n')),
                                 "line 1", "uncompressed byte offset 28"),
    "codexglue test.jsonl": Case(file_case("ruby/test.jsonl", jsonl(CODEX) + b'{"code": "' + BAD + b'"}\n',
                                           lambda p: coir.read_codexglue(p.parent, "ruby")),
                                 "line 2", UTF8_FIX),
    "cosqa.json": Case(file_case("cosqa.json", b'[\n{"idx": 1, "doc": "' + BAD + b'"}]',
                                 lambda p: coir.load_cosqa_pairs(p, "cosqa")), "line 2", UTF8_FIX),
    "hub-layout queries jsonl": Case(hub_case("queries", "train.jsonl", b'{"_id": "q1", "text": "' + BAD + b'"}\n'),
                                     "line 1", UTF8_FIX),
}


def qrels_case(lines: bytes) -> Callable[[Path], tuple[Loader, Path]]:
    return beir_case("qrels", b"query-id\tcorpus-id\tscore\n" + lines)


QRELS_CASES = {
    "qrels 1.5": Case(qrels_case(b"q1\td1\t1.5\n"), "line 2", GRADE_FIX),
    "qrels 0.5": Case(qrels_case(b"q1\td1\t1\nq2\td2\t0.5\n"), "line 3", GRADE_FIX),
    "qrels abc on line 3": Case(qrels_case(b"q1\td1\t1\nq2\td2\tabc\n"), "line 3", HEADER_FIX),
    "qrels nan": Case(qrels_case(b"q1\td1\tnan\n"), "line 2", HEADER_FIX),
    "qrels inf": Case(qrels_case(b"q1\td1\tinf\n"), "line 2", HEADER_FIX),
    "qrels 2 columns": Case(qrels_case(b"q1 d1 1\n"), "line 2", "Separate the columns with single tabs"),
    "hub-layout qrels 0.5": Case(hub_case("qrels", "train.jsonl", jsonl({"query-id": "q1", "corpus-id": "d1",
                                                                         "score": 0.5})), "line 1", GRADE_FIX),
    "hub-layout corpus without _id": Case(hub_case("corpus", "train.jsonl", jsonl({"text": "x"})), "line 1",
                                          "Add it to that row"),
    "hub-layout corrupt parquet": Case(hub_case("corpus", "train.parquet", b"not parquet"), None, "re-export it"),
}

GLUE_CASES = {
    "rte label maybe": Case(glue_case("rte", "RTE", RTE_HEAD + b"0\ta\tb\tentailment\n1\ta\tb\tmaybe\n"), "line 3",
                            "valid values: entailment, not_entailment, 0, 1. Fix the label on that line"),
    "sst2 label 7": Case(glue_case("sst2", "SST-2", b"sentence\tlabel\ngood\t1\nbad\t7\n"), "line 3",
                         "Fix the label on that line"),
    "stsb label not a number": Case(glue_case("stsb", "STS-B", b"a\tb\tc\td\te\tf\tg\th\tsentence1\tsentence2\tscore\n"
                                              b"1\t2\t3\t4\t5\t6\t7\t8\tx\ty\thigh\n"), "line 2", "write a number"),
    "rte missing column": Case(glue_case("rte", "RTE", b"index\ts1\tsentence2\tlabel\n0\ta\tb\tentailment\n"),
                               "line 1", "rename the column in the file"),
    "rte empty file": Case(glue_case("rte", "RTE", b""), None, "re-download the file"),
    "rte header only": Case(glue_case("rte", "RTE", RTE_HEAD), "line 1", "re-download the file"),
    "rte wrong column count": Case(glue_case("rte", "RTE", RTE_HEAD + b"0\ta\tb\tentailment\n1\ta\tb\n"), "line 3",
                                   "re-download the file"),
}

TRIPLET_CASES = {
    "tsv wrong columns": Case(file_case("t.tsv", TRIPLET_HEAD + b"q\tp\tn\nq\tp\tn\textra\n",
                                        triplets.load_triplets_file), "line 3", "replace tabs inside the texts"),
    "csv wrong columns": Case(file_case("t.csv", b"query,positive,negative\nq,p,n,x\n", triplets.load_triplets_file),
                              "line 2", "quote fields that contain commas"),
    "csv unbalanced quote": Case(file_case("t.csv", b'query,positive,negative\nq,"p,n\n' + b"x" * 140_000 + b"\n",
                                           triplets.load_triplets_file), "line 2", "balance the quotes on that line"),
    "tsv empty cell": Case(file_case("t.tsv", TRIPLET_HEAD + b"q\tp\tn\nq\t\tn\n", triplets.load_triplets_file),
                           "line 3", "fill in or remove that line"),
    "tsv empty file": Case(file_case("t.tsv", b"", triplets.load_triplets_file), None,
                           "expected a header row naming the query, positive and negative columns"),
    "tsv no negative column": Case(file_case("t.tsv", b"query\tpositive\tother\nq\tp\tn\n",
                                             triplets.load_triplets_file), "line 1", "Rename the column"),
    "jsonl no query": Case(file_case("t.jsonl", jsonl({"q": "x", "pos": ["p"], "neg": ["n"]}),
                                     triplets.load_triplets_file), "line 1", "Rename the column"),
    "jsonl empty neg list": Case(file_case("t.jsonl", jsonl({"query": "x", "pos": ["p"], "neg": []}),
                                           triplets.load_triplets_file), "line 1", "fill in or remove that line"),
    "jsonl array": Case(file_case("t.jsonl", b'[{"query": "x"}]\n', triplets.load_triplets_file), "line 1",
                        "convert a JSON array to one object per line"),
    "unknown extension": Case(file_case("t.xlsx", b"x", triplets.load_triplets_file), None,
                              "convert it to .tsv, .csv"),
}

KD_CASES = {
    "mixed layouts": Case(file_case("kd.jsonl", jsonl(FLAG, {"query": "q", "documents": ["a", "b", "c"],
                                                               "scores": [1, 0]}), kd_load), "line 2",
                            "row layout differs"),
    "joined length mismatch": Case(file_case("kd.jsonl", jsonl({"query": "q", "documents": ["a", "b"], "scores": [1, 0]},
                                                               {"query": "q", "documents": ["a", "b", "c"],
                                                                "scores": [1, 0]}), kd_load),
                                   "line 2", "make scores as long as the document list"),
    "non-numeric score": Case(file_case("kd.jsonl", jsonl({**FLAG, "neg_scores": ["high"]}), kd_load), "line 1",
                              "teacher scores must be numbers"),
    "scores a non-list text": Case(file_case("kd.jsonl", jsonl({"query": "q", "documents": ["a", "b"],
                                                                "scores": "high"}), kd_load),
                                   "line 1", "write it as a JSON list"),
    "pos a number": Case(file_case("kd.jsonl", jsonl({**FLAG, "pos": 3}), kd_load), "line 1",
                         "write it as a JSON list"),
    "pos_scores a number": Case(file_case("kd.jsonl", jsonl({**FLAG, "pos_scores": 1.0}), kd_load), "line 1",
                                "write it as a JSON list"),
    "empty query": Case(file_case("kd.jsonl", jsonl({**FLAG, "query": " "}), kd_load), "line 1",
                        "every row needs a non-empty 'query' text"),
    "ids: mixed query id types": Case(kd_ids_case(jsonl({"query_id": 1, "document_ids": [10, 11], "scores": [1, 0]},
                                                        {"query_id": "2", "document_ids": [10, 11],
                                                         "scores": [1, 0]})),
                                      "line 2", "write every id with the same type"),
    "ids: length mismatch": Case(kd_ids_case(jsonl({"query_id": 1, "document_ids": [10, 11, 12], "scores": [1, 0]})),
                                 "line 1", "make scores as long as the document list"),
    "ids: missing scores": Case(kd_ids_case(jsonl({"query_id": 1, "document_ids": [10, 11]})), "line 1",
                                "an ids-layout row needs query_id, document_ids and scores"),
    "corrupt parquet": Case(file_case("kd.parquet", b"PAR1 nope", kd_load), None, "re-export it"),
    "unknown extension": Case(file_case("kd.csv", b"x", kd_load), None, "convert it to .jsonl or .parquet"),
    "empty file": Case(file_case("kd.jsonl", b"\n", kd_load), None, "add one KD row"),
}

OTHER_CASES = {
    "mldr positives not a list": Case(mldr_case("test.jsonl", jsonl({"query_id": "q1", "query": "a",
                                                                    "positive_passages": "d1"})),
                                      "line 1", "must be a list of {docid, text} objects"),
    "mldr corpus without docid": Case(mldr_case("corpus.jsonl", jsonl({"text": "x"})), "line 1",
                                      "add the field(s) to that line"),
    "mldr duplicate docid": Case(mldr_case("corpus.jsonl", jsonl({"docid": "d1", "text": "x"},
                                                                 {"docid": "d1", "text": "y"})),
                                 "line 2", "rename or remove one of them"),
    "corrupt gzip": Case(mldr_case("corpus.jsonl.gz", b"\x1f\x8b not gzip"), None, "re-compress it with gzip"),
    "cosqa label yes": Case(file_case("cosqa.json", json.dumps([{"idx": 1, "doc": "q", "code": "c", "label": "1"},
                                                                {"idx": 2, "doc": "r", "code": "d", "label": "yes"}])
                                      .encode(), lambda p: coir.load_cosqa_pairs(p, "cosqa")),
                            "pair 1", "CoSQA labels are 1"),
    "cosqa bad JSON": Case(file_case("cosqa.json", b'[\n{"idx": 1,\n"doc": }]',
                                     lambda p: coir.load_cosqa_pairs(p, "cosqa")), "line 3", "fix that line"),
    "cosqa entry not an object": Case(file_case("cosqa.json", b'["x"]', lambda p: coir.load_cosqa_pairs(p, "cosqa")),
                                      "pair 0", "fix that entry of the array"),
    "beir duplicate document id": Case(beir_case("corpus", L1 + L1), "line 2", "rename or remove one of them"),
}

ALL_CASES = {**UTF8_CASES, **QRELS_CASES, **GLUE_CASES, **TRIPLET_CASES,
             **{f"kd {k}": v for k, v in KD_CASES.items()}, **OTHER_CASES}


# ---------------------------------------------------------------------------------------------- the tests
def error_of(case: Case, tmp_path: Path) -> tuple[str, Path]:
    load, bad = case.build(tmp_path)
    with pytest.raises(DataError) as err:
        load()
    return str(err.value), bad


@pytest.mark.parametrize("case", list(ALL_CASES.values()), ids=list(ALL_CASES))
def test_one_line_naming_file_line_and_fix(case: Case, tmp_path: Path) -> None:
    msg, bad = error_of(case, tmp_path)
    assert "\n" not in msg and "\r" not in msg, msg
    assert str(bad) in msg, msg
    if case.loc is not None:
        assert f"{bad} {case.loc}" in msg or f"{bad} {case.loc}:" in msg, msg
    assert case.fix in msg, msg


@pytest.mark.parametrize("case", list(UTF8_CASES.values()), ids=list(UTF8_CASES))
def test_invalid_utf8_names_the_byte_offset(case: Case, tmp_path: Path) -> None:
    msg, bad = error_of(case, tmp_path)
    raw = gzip.decompress(bad.read_bytes()) if bad.suffix == ".gz" else bad.read_bytes()
    with pytest.raises(UnicodeDecodeError) as decode:
        raw.decode("utf-8")
    assert f"invalid UTF-8 byte 0x{raw[decode.value.start]:02x} at " in msg, msg
    assert f"byte offset {decode.value.start} " in msg, msg
    assert "iconv -f latin1 -t utf-8" in msg


def test_integer_valued_grades_are_accepted(tmp_path: Path) -> None:
    folder = beir_folder(tmp_path, qrels=b"query-id\tcorpus-id\tscore\nq1\td1\t1.0\nq2\td2\t2\nq2\td3\t0.0\n")
    ds = beir.load_local(folder, "toy")
    assert ds.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 0}}
    assert all(type(g) is int for docs in ds.qrels.values() for g in docs.values())


def test_qrels_header_allowed_on_line_1_only(tmp_path: Path) -> None:
    folder = beir_folder(tmp_path, qrels=b"qid\tdid\trel\nq1\td1\t1\n")
    assert beir.load_local(folder, "toy").qrels == {"q1": {"d1": 1}}


def test_hub_qrels_refuse_non_integer_grades(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``beir.load_hub`` (datasets stubbed): a 1.5 score is refused naming the row; 1.0 is grade 1."""
    import datasets

    import harness.models

    tables = {
        "corpus": {"corpus": datasets.Dataset.from_dict({"_id": ["d1", "d2"], "text": ["x", "y"]})},
        "queries": {"queries": datasets.Dataset.from_dict({"_id": ["q1"], "text": ["a"]})},
        "default": {"test": datasets.Dataset.from_dict({"query-id": ["q1", "q1"], "corpus-id": ["d1", "d2"],
                                                        "score": [1.0, 1.5]})},
    }
    monkeypatch.setattr(datasets, "load_dataset", lambda path, config, revision=None: tables[config])
    monkeypatch.setattr(harness.models, "require_hub", lambda *a, **k: None)
    with pytest.raises(DataError) as err:
        beir.load_hub("org/toy", "abc123", "toy")
    msg = str(err.value)
    assert "\n" not in msg and "org/toy@abc123 qrels (test) row 2: score 1.5 is not an integer" in msg
    assert "round or map the scores in the dataset" in msg
    tables["default"]["test"] = datasets.Dataset.from_dict({"query-id": ["q1"], "corpus-id": ["d1"], "score": [1.0]})
    assert beir.load_hub("org/toy", "abc123", "toy").qrels == {"q1": {"d1": 1}}


def test_coir_triple_refuses_non_integer_grades() -> None:
    triple = coir.CoirTriple(corpus=[{"_id": "d1", "text": "x"}], queries=[{"_id": "q1", "text": "a"}],
                             qrels=[{"query-id": "q1", "corpus-id": "d1", "score": 0.5}])
    with pytest.raises(DataError, match=r"toy qrels row 1: score 0\.5 is not an integer; relevance grades must be "):
        coir.dataset_from_triple(triple, "toy", "test", "toy")


@pytest.mark.parametrize(("corpus", "message"), [
    ([{"_id": "d1", "text": "x"}, {"_id": "d1", "text": "y"}],
     r"^toy corpus row 2: duplicate document id 'd1' \(first at toy corpus row 1\); document ids must be unique"),
    ([{"text": "x"}], r"^toy corpus row 1: no `_id` \(or `id`\) field; got \['text'\]\. Add it to that row\.$"),
    ([], r"^toy/corpus: no documents; the corpus files must hold one \{_id, title, text\} row per document\.$"),
])
def test_coir_triple_refuses_a_bad_corpus_in_one_line(corpus: list, message: str) -> None:
    """CoIR sets are read by the hub-layout reader: a repeated id names both rows, a row without an id and an empty
    corpus are refused."""
    triple = coir.CoirTriple(corpus=corpus, queries=[{"_id": "q1", "text": "a"}],
                             qrels=[{"query-id": "q1", "corpus-id": "d1", "score": 1}])
    with pytest.raises(DataError, match=message):
        coir.dataset_from_triple(triple, "toy", "test", "toy")


@pytest.mark.parametrize("kind", ["beir", "mldr", "coir_csn"])
def test_no_hub_copy_names_the_local_folder(kind: str) -> None:
    """Every loader of a catalog entry without a hub copy raises the one message, naming the folder to pass."""
    from harness.tasks.retrieval.data.catalog import DatasetEntry, load_entry

    entry = DatasetEntry(name="toy-ruby", kind=kind, local="toys/ruby", hub_config="ruby")
    with pytest.raises(DataError, match=r"^dataset 'toy-ruby' has no hub copy in the catalog; pass "
                                        r"task.data_dir=<dir containing toys/ruby/>\.$"):
        load_entry(entry, data_dir=None)
