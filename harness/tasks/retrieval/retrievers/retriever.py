"""The retriever protocol (as mteb's: anything that indexes a corpus and searches it) and the one retrieval evaluation
every protocol shares; ``task.title_convention``: mteb's title + text, or CoIR's text alone (CoIR issue #17)."""

from __future__ import annotations

import bisect
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from harness.core.per_query import PerQuery, fingerprint, from_metrics
from harness.core.registry import Registry
from harness.tasks.retrieval.retrievers.ir_metrics import evaluate_run, means, per_query_scores

if TYPE_CHECKING:
    from harness.tasks.retrieval.data.dataset import RetrievalDataset

Details = dict[str, Any]
Timings = dict[str, float]


class Retriever(Protocol):
    """Index a corpus, then search it. ``kind`` names the retriever in records (``single_vector`` | ...)."""

    kind: str

    def index(self, ds: RetrievalDataset) -> tuple[Details, Timings]:
        """Encode or index ``ds``'s corpus; details: cache hit, index type."""
        ...

    def search(self, queries: list[str], top_k: int) -> tuple[np.ndarray, np.ndarray, Timings]:
        """(scores, corpus positions, timings) over the last indexed corpus, [n_queries, <= top_k], -1: no hit."""
        ...

    def describe(self) -> Details:
        """The settings that produced the numbers (similarity, lengths, index parameters), for the record."""
        ...


# ------------------------------------------------------------------------------------------------ documents
#: convention -> how a document is written for the encoder
TITLE_CONVENTIONS = {"coir": "text", "mteb": "title + ' ' + text"}


class TitleConvention:
    """Documents written by a convention: ``coir`` text alone (CoIR's evaluator), ``mteb`` title + " " + text."""

    def __init__(self, inner: Retriever, convention: str):
        self.inner = inner
        self.kind = inner.kind
        self.convention = convention

    def index(self, ds: RetrievalDataset) -> tuple[dict[str, Any], dict[str, float]]:
        if self.convention == "coir" and ds.corpus.has_titles():
            # same content hash: the run identity (task.title_convention) keys the embedding cache apart
            ds = replace(ds, corpus=ds.corpus.without_titles())
        return self.inner.index(ds)

    def search(self, queries: list[str], top_k: int) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        return self.inner.search(queries, top_k)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "title_convention": self.convention,
                "document_text": TITLE_CONVENTIONS[self.convention]}


# ------------------------------------------------------------------------------------------------ evaluation
def cutoff(metric: str) -> int:
    """The rank cutoff of a metric named ``<name>_at_<k>`` (0 for none)."""
    head, _, k = metric.rpartition("_at_")
    return int(k) if head and k.isdigit() else 0


def search_width(top_k: int, ignore_identical_ids: bool) -> int:
    """How many hits a search keeps: ``top_k``, plus room for the self-match that is dropped."""
    return top_k + (1 if ignore_identical_ids else 0)


def evaluate(retriever: Retriever, ds: RetrievalDataset, *, top_k: int, ignore_identical_ids: bool = False,
             subgroups: Sequence[QueryGroups] = ()) -> tuple[dict[str, float], Details, Timings]:
    """(metrics, details, timings) of ``retriever`` on ``ds``; ``subgroups`` score groups of the queries too."""
    metrics, details, timings, _ = evaluate_per_query(retriever, ds, top_k=top_k,
                                                      ignore_identical_ids=ignore_identical_ids, subgroups=subgroups)
    return metrics, details, timings


def evaluate_per_query(retriever: Retriever, ds: RetrievalDataset, *, top_k: int, ignore_identical_ids: bool = False,
                       subgroups: Sequence[QueryGroups] = ()) -> tuple[dict[str, float], Details, Timings, PerQuery]:
    """:func:`evaluate`, plus each metric per judged query, with fingerprints of the query texts and qrels scored."""
    details, timings = retriever.index(ds)
    queries = ds.evaluated_queries()
    qids = list(queries)
    scores, idx, search_timings = retriever.search(list(queries.values()), search_width(top_k, ignore_identical_ids))
    timings |= search_timings
    from harness.tasks.retrieval.retrievers.search import (
        to_run,  # torch: planning a retrieval run imports none
    )

    t0 = time.perf_counter()
    run = to_run(qids, ds.corpus_ids, scores, idx, top_k=top_k, ignore_identical_ids=ignore_identical_ids)
    qrels = {q: ds.qrels[q] for q in qids}
    per_query = per_query_scores(qrels, run)
    depth = min(top_k, getattr(retriever, "max_depth", None) or top_k)   # hits a query can have
    beyond = sorted(m for m in per_query if min(cutoff(m), len(ds)) > depth)   # would count too few hits
    per_query = {m: v for m, v in per_query.items() if m not in beyond}
    metrics = means(per_query)
    details = {"retriever": retriever.kind, "n_docs": len(ds), "n_queries": len(qids), "top_k": top_k,
               "ignore_identical_ids": ignore_identical_ids, "source": ds.source, **retriever.describe(), **details}
    if beyond:
        why = f"their cutoff exceeds top_k={top_k}" if depth == top_k else \
            f"their cutoff exceeds the {depth} documents the index returns per query"
        details["metrics_left_out"] = {"metrics": beyond, "why": why}
    for scorer in (s for s in subgroups if s.applies(ds)):
        groups, facts = scorer.split(ds)
        for name, group in groups.items():
            score = evaluate_run({q: ds.qrels[q] for q in group}, run)["ndcg_at_10"] if group else None
            facts |= {f"n_{name}": len(group), f"ndcg_at_10_{name}": score}
            if score is not None:
                metrics[f"ndcg_at_10_{name}_{scorer.name}"] = score
        details[scorer.name] = facts
    timings["metrics_s"] = time.perf_counter() - t0
    data = {"queries": fingerprint(queries), "qrels": fingerprint(qrels), "corpus": str(ds.fingerprint),
            "top_k": str(top_k), "ignore_identical_ids": str(ignore_identical_ids)}
    out = from_metrics(per_query, data)
    out.run = run
    return metrics, details, timings, out


# ------------------------------------------------------------------------------------------------ query groups
Groups = dict[str, list[str]]


class QueryGroups(Protocol):
    """Splits a dataset's evaluated queries into named groups; ``facts`` go into the record beside the scores."""

    name: str

    def applies(self, ds: RetrievalDataset) -> bool:
        """Whether ``ds`` carries what the split needs (else the scorer is skipped for it)."""
        ...

    def split(self, ds: RetrievalDataset) -> tuple[Groups, dict[str, Any]]:
        """(groups of query ids, facts)."""
        ...


def token_starts(tokenizer: Any, text: str, chars: Sequence[int]) -> list[int]:
    """The encoder's position of the first token at or after each character offset in ``text`` (past it: the length)."""
    enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True, truncation=False, verbose=False)
    starts = [a if b > a else -1 for a, b in enc["offset_mapping"]]   # special tokens have empty spans
    content = [(s, i) for i, s in enumerate(starts) if s >= 0]
    keys = [s for s, _ in content]
    out = []
    for c in chars:
        j = bisect.bisect_left(keys, c)
        out.append(content[j][1] if j < len(content) else len(starts))
    return out


class TruncationSplit:
    """``before`` / ``after``: the answer starts within the first ``max_length - 1`` positions kept, or past them."""

    name = "truncation"

    def __init__(self, tokenizer: Any, max_length: int):
        self.tokenizer, self.max_length = tokenizer, max_length

    def applies(self, ds: RetrievalDataset) -> bool:
        return "query_starts" in ds.meta

    def split(self, ds: RetrievalDataset) -> tuple[Groups, dict[str, Any]]:
        starts = ds.meta["query_starts"]
        qids = list(ds.evaluated_queries())
        by_doc: dict[str, list[str]] = defaultdict(list)
        for q in qids:
            by_doc[next(iter(ds.qrels[q]))].append(q)
        position = {did: i for i, did in enumerate(ds.corpus_ids)}
        text_of = dict(zip(by_doc, ds.corpus.texts_at([position[d] for d in by_doc]), strict=True))
        token_of: dict[str, int] = {}
        for did, qs in by_doc.items():
            chars = [starts[q]["char"] for q in qs]
            token_of.update(zip(qs, token_starts(self.tokenizer, text_of[did], chars), strict=True))
        visible = self.max_length - 1
        groups = {"before": [q for q in qids if token_of[q] < visible],
                  "after": [q for q in qids if token_of[q] >= visible]}
        facts = {"max_length": self.max_length, "visible_tokens": visible,
                 "rule": "a query is 'before' when its function's first token is among the first max_length - 1 "
                         "positions the encoder keeps (the last is the end token)",
                 "median_start_token": statistics.median(token_of.values()) if token_of else None,
                 "query_starts": {q: [starts[q]["char"], token_of[q]] for q in qids}}
        return groups, facts


#: the subgroup scorers a task config can name (``task.subgroups``)
SUBGROUPS: Registry[type] = Registry("subgroup scorer", {"truncation": TruncationSplit},
                                     hint="Set task.subgroups to a list of them.")
