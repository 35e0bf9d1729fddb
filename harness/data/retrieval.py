"""The in-memory retrieval set every loader returns (BEIR folder, hub copy, mined code set)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass
class RetrievalDataset:
    """Corpus as parallel lists (cheap for millions of docs), queries and graded qrels.

    ``qrels[qid][doc_id]`` is the relevance grade; grade 0 is kept (it is a judged non-relevant doc).
    """

    name: str
    split: str
    corpus_ids: list[str]
    corpus_titles: list[str]
    corpus_texts: list[str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    source: str = ""                 # folder path or hub id@revision
    fingerprint: str = ""            # content hash (local) or hub revision
    meta: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from harness.data.checks import check_query_texts

        check_query_texts(self.queries, self.qrels, f"{self.name} ({self.source or 'queries'})")
        if not self.fingerprint:
            self.fingerprint = content_fingerprint(self)

    def __len__(self) -> int:
        return len(self.corpus_ids)

    def documents(self) -> list[str]:
        """Texts to encode: title + " " + text, stripped; the text alone when there is no title (as mteb/BEIR)."""
        return [
            f"{title} {text}".strip() if title else text.strip()
            for title, text in zip(self.corpus_titles, self.corpus_texts, strict=True)
        ]

    def evaluated_queries(self) -> dict[str, str]:
        """Queries that have qrels (the ones metrics are computed over), in qrels order."""
        return {qid: self.queries[qid] for qid in self.qrels if qid in self.queries}


def subset(ds: RetrievalDataset, max_queries: int | None, max_docs: int | None) -> RetrievalDataset:
    """Deterministic smaller set: the first ``max_queries`` judged queries (qrels order), every document they
    judge, then corpus-order documents up to ``max_docs`` in total. For quick runs and peer comparisons."""
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
        name=ds.name, split=ds.split, corpus_ids=[ds.corpus_ids[i] for i in keep],
        corpus_titles=[ds.corpus_titles[i] for i in keep], corpus_texts=[ds.corpus_texts[i] for i in keep],
        queries={q: ds.queries[q] for q in qids}, qrels={q: ds.qrels[q] for q in qids}, source=ds.source,
        meta={**ds.meta, "subset": {"max_queries": max_queries, "max_docs": max_docs, "of": ds.fingerprint}},
    )


def content_fingerprint(ds: RetrievalDataset) -> str:
    """sha256 over corpus, queries and qrels, order-independent for qrels."""
    h = hashlib.sha256()
    for did, title, text in zip(ds.corpus_ids, ds.corpus_titles, ds.corpus_texts, strict=True):
        h.update(f"{did}\x1f{title}\x1f{text}\x1e".encode())
    for qid in sorted(ds.queries):
        h.update(f"{qid}\x1f{ds.queries[qid]}\x1e".encode())
    for qid in sorted(ds.qrels):
        for did in sorted(ds.qrels[qid]):
            h.update(f"{qid}\x1f{did}\x1f{ds.qrels[qid][did]}\x1e".encode())
    return "sha256:" + h.hexdigest()[:16]
