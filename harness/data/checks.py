"""Rules every retrieval loader applies to queries and qrels, so no input is resolved silently (issue 28):

- a query id given twice with different texts is an error naming both places (the same text twice is one query);
- a (query, document) pair judged twice with different grades is an error naming both places (the same grade twice
  is one judgement);
- a judged query whose text is null, empty or only whitespace is an error naming the ids (it would be searched as
  the word "None" or as nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.errors import DataError


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
    """``(where, query id, doc id, grade)`` rows -> qrels; a pair with two different grades is a
    :class:`DataError` (the same grade twice is one judgement)."""
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
