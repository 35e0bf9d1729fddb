"""A long-document retrieval set from any Python source tree, with no download: documents are whole files; a query
is a function's docstring summary, removed from its file; each query records where its function starts."""

from __future__ import annotations

import ast
import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import DataError
from harness.tasks.retrieval.data.code import (
    DEFAULT_EXCLUDE,
    _around_docstring,
    _capped_corpus,
    _functions,
    _hash_sample,
    _is_stub,
    _is_trivial,
    _source_files,
    _source_tree,
    _summary,
    _summary_key,
)
from harness.tasks.retrieval.data.dataset import RetrievalDataset, in_memory

SPLITS = ("train", "test")


@dataclass
class _Query:
    qid: str
    text: str
    doc_id: str
    start_line: int        # in the document as written (docstrings of query functions removed), 1-based
    start_char: int = 0


@dataclass
class LongDocSet:
    """Every file (docstrings of query functions removed) and every candidate query, with its split."""

    root: str
    doc_ids: list[str]
    texts: list[str]
    queries: list[_Query]
    split_of: dict[str, str]                       # doc id -> train | test
    stats: dict[str, Any] = field(default_factory=dict)

    def split_queries(self, split: str) -> list[_Query]:
        return [q for q in self.queries if self.split_of[q.doc_id] == split]


def file_split(rel: str) -> str:
    """``test`` for about half the files, ``train`` for the rest, by a hash of the relative path."""
    return "test" if hashlib.sha256(rel.encode()).digest()[0] < 128 else "train"


def mine(root: str | Path | None = None, *, min_summary_words: int = 4,
         exclude: tuple[str, ...] = DEFAULT_EXCLUDE) -> LongDocSet:
    """Every ``*.py`` file under ``root`` (None: the stdlib) as a document, and the functions making queries."""
    base, files = _source_files(root, exclude)
    stats: Counter[str] = Counter(files=len(files))
    doc_ids, texts, queries = [], [], []
    for rel in files:
        parsed = _source_tree(base / rel)
        if parsed is None:
            stats["unparsed"] += 1
            continue
        text, found = _strip_query_docstrings(rel, *parsed, min_summary_words, stats)
        doc_ids.append(rel)
        texts.append(text)
        queries.extend(found)
    counts = Counter(_summary_key(q.text) for q in queries)
    kept = [q for q in queries if counts[_summary_key(q.text)] == 1]
    stats["dropped_ambiguous"] = len(queries) - len(kept)
    stats["documents"], stats["candidate_queries"] = len(doc_ids), len(kept)
    if not kept:
        raise DataError(f"no usable documented functions under {str(base)!r} ({stats['files']} files); point root "
                        "at a tree whose functions have docstrings.")
    return LongDocSet(str(base), doc_ids, texts, kept, {d: file_split(d) for d in doc_ids}, dict(stats))


def _query_functions(tree: ast.Module, min_summary_words: int, stats: Counter[str]) -> Iterator[tuple[str, Any, str]]:
    """(qualname, def, summary) of the functions whose docstring makes a query."""
    for qualname, fn in _functions(tree):
        docstring = ast.get_docstring(fn, clean=False)
        if docstring is None:
            continue
        if _is_stub(fn):
            stats["stub"] += 1
            continue
        summary = _summary(docstring)
        if len(summary.split()) < min_summary_words or _is_trivial(summary):
            stats["short_or_trivial"] += 1
            continue
        yield qualname, fn, summary


def _strip_query_docstrings(rel: str, source: str, tree: ast.Module, min_summary_words: int,
                            stats: Counter[str]) -> tuple[str, list[_Query]]:
    """The file with the query functions' docstrings removed, and those queries with their start lines in it."""
    lines = source.split("\n")  # not splitlines(): ast counts "\n" only
    found = list(_query_functions(tree, min_summary_words, stats))
    removed_before: list[tuple[int, int]] = []   # (original line of the removal, lines removed)
    for _qualname, fn, _summary_text in sorted(found, key=lambda f: -f[1].body[0].lineno):
        doc = fn.body[0]
        i0, i1 = doc.lineno - 1, doc.end_lineno - 1
        joined = _around_docstring(lines[i0], lines[i1], doc)
        if joined.strip():
            lines[i0:i1 + 1] = [joined]
            removed_before.append((doc.lineno, i1 - i0))
        else:
            lines[i0:i1 + 1] = []
            removed_before.append((doc.lineno, i1 - i0 + 1))
    text = "\n".join(lines)
    line_starts = [0]
    for line in lines:
        line_starts.append(line_starts[-1] + len(line) + 1)
    out = []
    for qualname, fn, summary in found:
        start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
        new_line = start - sum(n for at, n in removed_before if at < start)
        out.append(_Query(f"q:{rel}:{qualname}:{fn.lineno}", summary, rel, new_line, line_starts[new_line - 1]))
    return text, out


def build(lds: LongDocSet, *, name: str, split: str = "test", max_queries: int | None = 300,
          max_corpus: int | None = None) -> RetrievalDataset:
    """The ``split`` queries (a hash sample) over the corpus (``max_corpus``: the queries' files first)."""
    if split not in SPLITS:
        raise DataError(f"long-document set split {split!r}: use one of {', '.join(SPLITS)}.")
    candidates = lds.split_queries(split)
    chosen = set(_hash_sample([q.qid for q in candidates], max_queries))
    queries = [q for q in candidates if q.qid in chosen]
    kept_ids = _capped_corpus(lds.doc_ids, {q.doc_id for q in queries}, max_corpus, "files the selected queries need")
    keep = [i for i, d in enumerate(lds.doc_ids) if d in kept_ids]
    return in_memory(
        name, split, [lds.doc_ids[i] for i in keep], [""] * len(keep), [lds.texts[i] for i in keep],
        queries={q.qid: q.text for q in queries},
        qrels={q.qid: {q.doc_id: 1} for q in queries}, source=lds.root,
        meta={"query_starts": {q.qid: {"char": q.start_char, "line": q.start_line} for q in queries},
              "stats": {**lds.stats, "queries": len(queries), "corpus": len(keep)},
              "settings": {"max_queries": max_queries, "max_corpus": max_corpus}},
    )


def build_long_document_set(root: str | Path | None = None, *, name: str = "stdlib-files", split: str = "test",
                            max_queries: int | None = 300, max_corpus: int | None = None) -> RetrievalDataset:
    """:func:`mine` + :func:`build`."""
    return build(mine(root), name=name, split=split, max_queries=max_queries, max_corpus=max_corpus)


def export_mldr(lds: LongDocSet, out_dir: str | Path, *, max_train: int | None = None, max_test: int | None = None,
                negatives: int = 3, max_corpus: int | None = None) -> Path:
    """A folder in MLDR's layout from ``lds`` (train rows with ``negatives`` other files each, test rows)."""
    from harness.tasks.retrieval.data import mldr
    text_of = dict(zip(lds.doc_ids, lds.texts, strict=True))
    rows: dict[str, list[dict[str, Any]]] = {}
    used: set[str] = set()
    for split, cap in (("train", max_train), ("test", max_test)):
        candidates = lds.split_queries(split)
        chosen = set(_hash_sample([q.qid for q in candidates], cap))
        rows[split] = []
        for q in (q for q in candidates if q.qid in chosen):
            negs = _negatives(lds.doc_ids, q, negatives) if split == "train" else []
            rows[split].append({"query_id": q.qid, "query": q.text,
                                "positive_passages": [{"docid": q.doc_id, "text": text_of[q.doc_id]}],
                                "negative_passages": [{"docid": d, "text": text_of[d]} for d in negs]})
            used.update([q.doc_id, *negs])
    extra = [d for d in lds.doc_ids if d not in used]
    room = None if max_corpus is None else max(0, max_corpus - len(used))
    keep = used | set(_hash_sample(extra, room))
    corpus_ids = [d for d in lds.doc_ids if d in keep]
    return mldr.write_folder(out_dir, [(d, text_of[d]) for d in corpus_ids], rows)


def _negatives(doc_ids: list[str], q: _Query, k: int) -> list[str]:
    """``k`` files other than the query's own, ordered by a hash of (query, file): deterministic, spread out."""
    others = (d for d in doc_ids if d != q.doc_id)
    return sorted(others, key=lambda d: hashlib.sha256(f"{q.qid}\x1f{d}".encode()).digest())[:k]
