"""Scoring a run on groups of its queries, as an option of the shared retrieval evaluation (not a wrapper around
the retriever): each scorer splits a dataset's evaluated queries into named groups, and the evaluation scores the
same run on each group. ``truncation``: queries whose answer starts before / after the point where the encoder
truncates the document (sets that record each answer's start, e.g. the long-document set of source files).
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from harness.registry import Registry

if TYPE_CHECKING:
    from harness.data.retrieval import RetrievalDataset

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
    """The position (special tokens counted, as the encoder sees it) of the first token at or after each
    character offset in ``text``; the sequence length when an offset is past the last token."""
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
    """``before`` / ``after``: the query's answer starts among the first ``max_length - 1`` positions the encoder
    keeps (its last one is the end token), or past them."""

    name = "truncation"

    def __init__(self, tokenizer: Any, max_length: int):
        self.tokenizer, self.max_length = tokenizer, max_length

    def applies(self, ds: RetrievalDataset) -> bool:
        return "query_starts" in ds.meta

    def split(self, ds: RetrievalDataset) -> tuple[Groups, dict[str, Any]]:
        starts = ds.meta["query_starts"]
        text_of = dict(zip(ds.corpus_ids, ds.documents(), strict=True))
        qids = list(ds.evaluated_queries())
        by_doc: dict[str, list[str]] = defaultdict(list)
        for q in qids:
            by_doc[next(iter(ds.qrels[q]))].append(q)
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
