"""The mined code retrieval set (harness.tasks.retrieval.data.code): exact mining rules, determinism, errors, stdlib, BEIR export."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import time
from pathlib import Path
from textwrap import dedent

import pytest

from harness.core.errors import DataError
from harness.tasks.retrieval.data.beir import export_beir
from harness.tasks.retrieval.data.code import build_code_retrieval_set
from harness.tasks.retrieval.data.dataset import RetrievalDataset, in_memory

TREE = {
    "pkg/__init__.py": "",
    "pkg/broken.py": "def broken(:\n    pass\n",
    "pkg/legacy.py": '''\
        def old_api(x):
            """Deprecated alias kept for backwards compatibility."""
            y = new_api(x)
            return y


        def parse(text):
            """parse(text, strict=False, depth=0) -> Node"""
            node = Node(text)
            return node
        ''',
    "pkg/maths.py": '''\
        """Math helpers."""


        def add_numbers(a, b):
            """Add two numbers together and return the sum.

            Longer description that is not part of the query.
            """

            total = a + b
            return total


        def no_doc(x):
            y = x * 2
            z = y + 1
            return z


        def tiny(x):
            """Return the value doubled right now."""
            return x * 2


        def short_summary(x):
            """Scale it."""
            y = x * 3
            return y


        async def fetch_all(urls):
            """Fetch every URL concurrently
            and gather the results."""
            tasks = [fetch(u) for u in urls]
            return await gather(*tasks)
        ''',
    "pkg/shapes.py": '''\
        class Stack:
            """A simple stack."""

            @property
            def size(self):
                """Number of items currently on the stack."""
                return len(self._items)

            def push(self, item):
                """Push an item onto the top of the stack."""
                self._items.append(item)
                return self

            def abstract(self):
                """Subclasses must implement this hook method."""
                raise NotImplementedError


        def outer(values):
            """Sort values and remove duplicates from the list."""

            def inner(v):
                """Inner helper with its own docstring text."""
                return v

            return sorted(set(map(inner, values)))


        if True:
            def configured(key):
                """Return the configured value for this key."""
                value = CONFIG[key]
                return value
        ''',
    "pkg/vendored.py": '''\
        def add_numbers(a, b):
            """Sum two values; the same code as maths.add_numbers."""
            total = a + b
            return total


        def lookup(key):
            """Return the configured value for this key"""
            value = SETTINGS[key]
            return value
        ''',
    "tests/test_maths.py": '''\
        def test_add():
            """Adding two and two gives four, as expected."""
            assert add_numbers(2, 2) == 4
            assert add_numbers(1, 2) == 3
        ''',
}

CORPUS_IDS = [
    "pkg/legacy.py:old_api:1",
    "pkg/legacy.py:parse:7",
    "pkg/maths.py:add_numbers:4",
    "pkg/maths.py:short_summary:25",
    "pkg/maths.py:fetch_all:31",
    "pkg/shapes.py:Stack.size:5",
    "pkg/shapes.py:Stack.push:9",
    "pkg/shapes.py:outer:19",
    "pkg/shapes.py:configured:30",
    "pkg/vendored.py:lookup:7",
]
QUERIES = {
    "q:pkg/maths.py:add_numbers:4": "Add two numbers together and return the sum.",
    "q:pkg/maths.py:fetch_all:31": "Fetch every URL concurrently and gather the results.",
    "q:pkg/shapes.py:Stack.size:5": "Number of items currently on the stack.",
    "q:pkg/shapes.py:Stack.push:9": "Push an item onto the top of the stack.",
    "q:pkg/shapes.py:outer:19": "Sort values and remove duplicates from the list.",
}


def write_tree(root: Path, files: dict[str, str] = TREE) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text), encoding="utf-8")
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "proj")


def doc(ds: RetrievalDataset, doc_id: str) -> str:
    return [x for _, _, x in ds.corpus.rows()][ds.corpus_ids.index(doc_id)]


def test_mines_exact_ids_queries_and_documents(tree: Path) -> None:
    ds = build_code_retrieval_set(tree)
    assert ds.name == "proj" and ds.split == "test" and ds.source == str(tree.resolve())
    assert ds.corpus_ids == CORPUS_IDS
    assert [t for _, t, _ in ds.corpus.rows()] == [""] * len(CORPUS_IDS)
    assert ds.queries == QUERIES
    assert list(ds.qrels) == list(QUERIES)
    assert ds.qrels == {qid: {qid[2:]: 1} for qid in QUERIES}
    # Docstring (with the blank line after it) removed; indentation of methods removed; decorators kept.
    assert doc(ds, "pkg/maths.py:add_numbers:4") == "def add_numbers(a, b):\n    total = a + b\n    return total"
    assert doc(ds, "pkg/shapes.py:Stack.size:5") == "@property\ndef size(self):\n    return len(self._items)"
    assert doc(ds, "pkg/shapes.py:configured:30") == "def configured(key):\n    value = CONFIG[key]\n    return value"
    # Nested functions are part of the outer document (their own docstrings too), never documents themselves.
    assert doc(ds, "pkg/shapes.py:outer:19") == dedent('''\
        def outer(values):
            def inner(v):
                """Inner helper with its own docstring text."""
                return v

            return sorted(set(map(inner, values)))''')
    assert ds.meta["failed_files"] == ["pkg/broken.py"]
    counts = {k: ds.meta[k] for k in ("files", "parsed", "failed", "functions", "with_docstring", "stub",
                                      "short_code", "short_summary", "trivial_summary", "dropped_duplicates",
                                      "dropped_ambiguous", "corpus", "queries", "truncated")}
    assert counts == {"files": 6, "parsed": 5, "failed": 1, "functions": 14, "with_docstring": 13, "stub": 1,
                      "short_code": 1, "short_summary": 1, "trivial_summary": 2, "dropped_duplicates": 1,
                      "dropped_ambiguous": 2, "corpus": 10, "queries": 5, "truncated": 0}
    assert ds.meta["settings"]["min_summary_words"] == 4


def test_no_document_contains_its_query(tree: Path) -> None:
    ds = build_code_retrieval_set(tree)
    for qid, text in ds.queries.items():
        document = doc(ds, qid[2:])
        assert text not in document
        assert text.split()[0] not in document.split("\n", 1)[1]  # not even the docstring's first word


def test_one_line_function_and_non_ascii_columns(tmp_path: Path) -> None:
    # ast columns are UTF-8 byte offsets: the cut must land right after a non-ASCII prefix.
    write_tree(tmp_path, {"m.py": 'def grüße(n="ä"): "Grüße the person by name, politely."; return "Hallo " + n\n'})
    ds = build_code_retrieval_set(tmp_path, min_code_lines=1)
    assert ds.corpus_ids == ["m.py:grüße:1"]
    assert [x for _, _, x in ds.corpus.rows()] == ['def grüße(n="ä"): return "Hallo " + n']
    assert ds.queries == {"q:m.py:grüße:1": "Grüße the person by name, politely."}


def test_signature_line_skipped_before_summary(tmp_path: Path) -> None:
    write_tree(tmp_path, {"m.py": '''\
        def openpty():
            """openpty() -> (master_fd, slave_fd)
            Open a pty master/slave pair, using os.openpty() if possible.

            Details.
            """
            master, slave = os.openpty()
            return master, slave
        '''})
    ds = build_code_retrieval_set(tmp_path)
    assert list(ds.queries.values()) == ["Open a pty master/slave pair, using os.openpty() if possible."]


def test_deterministic_and_independent_of_location_and_line_endings(tree: Path, tmp_path: Path) -> None:
    first = build_code_retrieval_set(tree)
    assert build_code_retrieval_set(tree) == first
    copy = shutil.copytree(tree, tmp_path / "elsewhere" / "copy")
    maths = copy / "pkg" / "maths.py"
    maths.write_bytes(maths.read_bytes().replace(b"\n", b"\r\n"))
    moved = build_code_retrieval_set(copy, name="proj")
    assert moved.source != first.source
    assert moved.fingerprint == first.fingerprint
    assert (moved.corpus_ids, [x for _, _, x in moved.corpus.rows()], moved.queries) == (first.corpus_ids, [x for _, _, x in first.corpus.rows()],
                                                                       first.queries)


def test_max_queries_is_a_hash_sample(tree: Path) -> None:
    full = build_code_retrieval_set(tree, max_queries=None)
    two = build_code_retrieval_set(tree, max_queries=2)
    expected = sorted(full.queries, key=lambda q: hashlib.sha256(q.encode()).digest())[:2]
    assert set(two.queries) == set(expected)
    assert list(two.queries) == [q for q in full.queries if q in expected]  # corpus order kept
    assert two.corpus_ids == full.corpus_ids  # no corpus cap: everything stays as distractors


def test_max_corpus_keeps_positives_first(tree: Path) -> None:
    full = build_code_retrieval_set(tree)
    capped = build_code_retrieval_set(tree, max_queries=3, max_corpus=4)
    assert len(capped.corpus_ids) == 4 and len(capped.queries) == 3
    assert {d for rels in capped.qrels.values() for d in rels} <= set(capped.corpus_ids)
    assert capped.corpus_ids == [d for d in full.corpus_ids if d in capped.corpus_ids]
    with pytest.raises(DataError, match=r"max_corpus=2 cannot hold the 3 selected"):
        build_code_retrieval_set(tree, max_queries=3, max_corpus=2)


def test_long_code_truncated_at_a_line_break(tree: Path) -> None:
    ds = build_code_retrieval_set(tree, max_code_chars=30)
    assert all(len(t) <= 30 for t in [x for _, _, x in ds.corpus.rows()])
    assert doc(ds, "pkg/maths.py:add_numbers:4") == "def add_numbers(a, b):"
    assert ds.meta["truncated"] == 10


def test_errors_name_the_problem_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(DataError, match=r"code root '.*nope' does not exist"):
        build_code_retrieval_set(missing)
    (tmp_path / "f.py").write_text("x = 1\n")
    with pytest.raises(DataError, match="is not a folder"):
        build_code_retrieval_set(tmp_path / "f.py")
    empty = tmp_path / "empty"
    (empty / "tests").mkdir(parents=True)
    (empty / "tests" / "a.py").write_text("def f():\n    pass\n")
    with pytest.raises(DataError, match=r"no Python files .* relax exclude"):
        build_code_retrieval_set(empty)
    undocumented = write_tree(tmp_path / "undoc", {"a.py": '''\
        def f(x):
            """Short."""
            return x
        '''})
    with pytest.raises(DataError) as err:
        build_code_retrieval_set(undocumented)
    msg = str(err.value)
    assert "1 .py files" in msg and "1 with fewer than min_code_lines=3" in msg and "Relax min_code_lines" in msg
    with pytest.raises(DataError, match=r"max_queries=0 is invalid"):
        build_code_retrieval_set(undocumented, max_queries=0)


def test_exclude_patterns_apply_to_every_path_component(tree: Path) -> None:
    ds = build_code_retrieval_set(tree, exclude=("legacy.py", "broken.py", "vendored.py"))
    assert ds.meta["files"] == 4  # tests/ is no longer excluded
    assert "q:tests/test_maths.py:test_add:1" in ds.queries
    assert not any(d.startswith("pkg/legacy.py") for d in ds.corpus_ids)


def test_export_beir_round_trip(tree: Path, tmp_path: Path) -> None:
    ds = build_code_retrieval_set(tree)
    out = export_beir(ds, tmp_path / "beir" / "proj")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "corpus.jsonl", "qrels", "qrels/test.tsv", "queries.jsonl"]
    assert not [p for p in out.parent.iterdir() if p != out]  # no temp folders left behind
    raw = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert b"\r" not in raw
    corpus = [json.loads(line) for line in (out / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = (out / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "query-id\tcorpus-id\tscore"
    assert len(corpus) == len(ds) and len(queries) == len(ds.queries) and len(rows) - 1 == len(ds.qrels)
    qrels: dict[str, dict[str, int]] = {}
    for row in rows[1:]:
        qid, did, score = row.split("\t")
        qrels.setdefault(qid, {})[did] = int(score)
    back = in_memory(ds.name, "test", [d["_id"] for d in corpus], [d["title"] for d in corpus],
                     [d["text"] for d in corpus], queries={q["_id"]: q["text"] for q in queries}, qrels=qrels)
    assert back.fingerprint == ds.fingerprint
    with pytest.raises(DataError, match="overwrite=True"):
        export_beir(ds, out)
    small = build_code_retrieval_set(tree, max_queries=1)
    export_beir(small, out, overwrite=True)
    assert len((out / "queries.jsonl").read_text().splitlines()) == 1
    assert sorted(p.name for p in out.parent.iterdir()) == ["proj"]


@pytest.fixture(scope="module")
def stdlib_build() -> tuple[RetrievalDataset, float]:
    start = time.perf_counter()
    ds = build_code_retrieval_set()
    return ds, time.perf_counter() - start


def test_stdlib_default_set_is_real(stdlib_build: tuple[RetrievalDataset, float]) -> None:
    """Bounds any CPython 3.10+ stdlib meets; no wall-clock bound (speed lives in benchmarks)."""
    ds, _ = stdlib_build
    assert ds.name == "stdlib" and ds.meta["stdlib"] is True
    assert len(ds.queries) == 500 and len(ds.qrels) == 500
    assert ds.meta["files"] > 300 and ds.meta["failed"] == 0
    assert len(ds) > 2000 and ds.meta["candidate_queries"] > 1000
    assert not any("/test/" in f"/{d}" or d.startswith("idlelib/") for d in ds.corpus_ids)
    assert len(set([x for _, _, x in ds.corpus.rows()])) == len(ds)
    assert len({q.casefold().rstrip(".") for q in ds.queries.values()}) == 500


def test_stdlib_documents_are_valid_python_without_their_docstring(
    stdlib_build: tuple[RetrievalDataset, float],
) -> None:
    ds, _ = stdlib_build
    max_chars = ds.meta["settings"]["max_code_chars"]  # type: ignore[index]
    for qid, query in ds.queries.items():
        text = doc(ds, qid[2:])
        try:
            module = ast.parse(text)
        except SyntaxError:
            assert len(text) > max_chars - 400, f"{qid} is not valid Python:\n{text}"  # only truncated ones
            continue
        fn = module.body[0]
        assert isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef), qid
        left = ast.get_docstring(fn)
        assert left is None or " ".join(left.split()) != query, qid
