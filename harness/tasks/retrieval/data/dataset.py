"""The retrieval set every loader returns, and the rules every loader applies so no input is resolved silently:
conflicting query texts or grades, or a judged query without text, are errors naming the places or ids."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.core.errors import DataError
from harness.tasks.retrieval.data.corpus import Corpus, InMemoryCorpus, SubsetCorpus


@dataclass
class RetrievalDataset:
    """A corpus (ids in memory, texts read chunk by chunk), queries and graded qrels (grade 0 kept)."""

    name: str
    split: str
    corpus: Corpus
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    source: str = ""                 # folder path or hub id@revision
    fingerprint: str = ""            # content hash (local) or hub revision
    meta: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_query_texts(self.queries, self.qrels, f"{self.name} ({self.source or 'queries'})")
        if not self.fingerprint:
            self.fingerprint = content_fingerprint(self)

    def __len__(self) -> int:
        return len(self.corpus)

    @property
    def corpus_ids(self) -> list[str]:
        return self.corpus.ids

    def evaluated_queries(self) -> dict[str, str]:
        """Queries that have qrels (the ones metrics are computed over), in qrels order."""
        return {qid: self.queries[qid] for qid in self.qrels if qid in self.queries}


def in_memory(name: str, split: str, ids: list[str], titles: list[str], texts: list[str],
              **fields: Any) -> RetrievalDataset:
    """A dataset of lists (the small sets the harness builds itself)."""
    return RetrievalDataset(name=name, split=split, corpus=InMemoryCorpus(ids, titles, texts), **fields)


def subset(ds: RetrievalDataset, max_queries: int | None, max_docs: int | None) -> RetrievalDataset:
    """The first ``max_queries`` judged queries, the documents they judge, then others up to ``max_docs``."""
    qids = list(ds.qrels)[: max_queries or None]
    judged = {d for q in qids for d in ds.qrels[q]}
    budget = max(0, (max_docs or len(ds)) - len(judged))
    keep = []
    for i, did in enumerate(ds.corpus_ids):
        if did in judged:
            keep.append(i)
        elif budget > 0:
            keep.append(i)
            budget -= 1
    return RetrievalDataset(
        name=ds.name, split=ds.split, corpus=SubsetCorpus(ds.corpus, np.asarray(keep, dtype=np.int64)),
        queries={q: ds.queries[q] for q in qids}, qrels={q: ds.qrels[q] for q in qids}, source=ds.source,
        meta={**ds.meta, "subset": {"max_queries": max_queries, "max_docs": max_docs, "of": ds.fingerprint}},
    )


def content_fingerprint(ds: RetrievalDataset) -> str:
    """sha256 over corpus, queries and qrels, order-independent for qrels (the corpus part kept by the corpus)."""
    h = ds.corpus.content.copy()
    for qid in sorted(ds.queries):
        h.update(f"{qid}\x1f{ds.queries[qid]}\x1e".encode())
    for qid in sorted(ds.qrels):
        for did in sorted(ds.qrels[qid]):
            h.update(f"{qid}\x1f{did}\x1f{ds.qrels[qid][did]}\x1e".encode())
    return "sha256:" + h.hexdigest()[:16]


def query_text(value: Any) -> str | None:
    """A query's text as loaded: None stays None (never the word "None"), anything else is its string."""
    return None if value is None else str(value)


def unique_queries(rows: Iterable[tuple[str, str, str | None]]) -> dict[str, str | None]:
    """``(where, query id, text)`` rows -> id -> text; an id with two different texts is a :class:`DataError`."""
    out: dict[str, str | None] = {}
    first: dict[str, str] = {}
    for where, qid, text in rows:
        if qid in out and out[qid] != text:
            raise DataError(f"{where}: query id {qid!r} appears twice with different texts (first at {first[qid]}); "
                            "query ids must be unique: rename or remove one of them")
        out.setdefault(qid, text)
        first.setdefault(qid, where)
    return out


def unique_judgements(rows: Iterable[tuple[str, str, str, int]]) -> dict[str, dict[str, int]]:
    """``(where, query id, doc id, grade)`` rows -> qrels; a pair with two grades is a :class:`DataError`."""
    qrels: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], str] = {}
    for where, qid, did, grade in rows:
        judged = qrels.setdefault(qid, {})
        if did in judged and judged[did] != grade:
            raise DataError(f"{where}: query {qid!r} judges document {did!r} {grade}, but {first[(qid, did)]} judges "
                            f"it {judged[did]}; one grade per (query, document) pair: keep one of the lines")
        judged.setdefault(did, grade)
        first.setdefault((qid, did), where)
    return qrels


def check_query_texts(queries: Mapping[str, str | None], qrels: Mapping[str, Any], where: str) -> None:
    """Every judged query has a non-empty text, else a :class:`DataError` naming the first ids."""
    bad = [q for q in qrels if q in queries and (queries[q] is None or not str(queries[q]).strip())]
    if bad:
        null = [q for q in bad if queries[q] is None]
        raise DataError(f"{where}: {len(bad)} judged quer{'y has' if len(bad) == 1 else 'ies have'} "
                        f"{'a null' if null else 'an empty'} text ({', '.join(map(repr, bad[:5]))}"
                        f"{', ...' if len(bad) > 5 else ''}); give each a text, or drop their qrels lines")
