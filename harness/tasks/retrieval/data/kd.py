"""Knowledge-distillation training data for ColBERT in three layouts, validated before any training: ``ids``
(``lightonai/ms-marco-en-bge``, joined by PyLate's ``KDProcessing``, but an unknown id refused where KDProcessing
trains on ``""``), ``flag`` (FlagEmbedding's) and ``joined`` (the columns PyLate's ``losses.Distillation`` reads)."""

from __future__ import annotations

import ast
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from datasets import Dataset

from harness.core.errors import DataError, one_line
from harness.data.files import table_rows

log = logging.getLogger(__name__)

KD_COLUMNS = ("query", "documents", "scores")
LAYOUTS = {"ids": ("query_id", "document_ids", "scores"), "flag": ("query", "pos", "neg", "pos_scores", "neg_scores"),
           "joined": ("query", "documents", "scores")}


#: the local alternatives of the hub KD set
HUB_FIX = ("Train from a local file instead: task.train_data.source=file task.train_data.path=<kd.jsonl> (FlagEmbedding "
           "layout query/pos/neg/pos_scores/neg_scores, or the ids layout with task.train_data.queries_path and "
           "documents_path), or evaluate a trained ColBERT checkpoint: task.train=false model.path=<dir>.")


def detect_layout(columns: Iterable[str], where: str) -> str:
    """The layout whose key columns a row has (``pos``/``neg`` -> flag, ``document_ids`` -> ids, ...)."""
    cols = set(columns)
    for layout, keys in (("flag", {"pos", "neg"}), ("ids", {"document_ids"}), ("joined", {"documents"})):
        if keys <= cols:
            return layout
    raise DataError(
        f"{where}: not a KD training row (columns {sorted(cols)}). Rename the columns to one of these layouts: "
        + "; ".join(f"{name}: {', '.join(c)}" for name, c in LAYOUTS.items()) + "."
    )


def _listify(value: Any, where: str = "", key: str = "value") -> Any:
    """Lists stored as strings (``"[1, 2]"``, some hub exports) -> lists, as KDProcessing; else an error (``where``)."""
    if not isinstance(value, str):
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise DataError(f"{where}: {key} is the text {value[:40]!r}, not a list; write it as a JSON list "
                        "(e.g. [1, 2]).") from None


def _as_list(value: Any, where: str, key: str) -> list[Any]:
    """``value`` (possibly a list stored as a string) as a list; None is ``[]``, any other non-list an error."""
    value = _listify(value, where, key)
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise DataError(f"{where}: {key} must be a list, got {type(value).__name__} {str(value)[:40]!r}; write it as "
                        "a JSON list (e.g. [...]).")
    return list(value)


def check_scores(where: str, n_docs: int, scores: Any, n_ways: int, what: str = "scores") -> list[float]:
    """Teacher scores of one row: present, numeric, finite, one per document, at least ``n_ways`` of them."""
    if scores is None:
        raise DataError(f"{where}: no teacher scores ({what} missing). Every document needs a teacher score: add "
                        f"{what} to that row.")
    if not isinstance(scores, list | tuple):
        raise DataError(f"{where}: {what} must be a list of numbers, got {type(scores).__name__}; write it as a JSON "
                        "list with one number per document.")
    if len(scores) != n_docs:
        raise DataError(
            f"{where}: {n_docs} documents but {len(scores)} teacher scores; each document needs exactly one score: "
            f"make {what} as long as the document list (or drop the row)."
        )
    out = []
    for i, s in enumerate(scores):
        try:
            v = float(s)
        except (TypeError, ValueError):
            raise DataError(f"{where}: teacher score #{i} is {s!r}, not a number; teacher scores must be numbers: "
                            "fix that value or drop the row.") from None
        if not math.isfinite(v):
            raise DataError(f"{where}: teacher score #{i} is {v} (NaN/inf); fix or drop the row.")
        out.append(v)
    if n_docs < n_ways:
        raise DataError(
            f"{where}: {n_docs} documents, fewer than task.train_data.n_ways={n_ways} (PyLate's Distillation loss needs "
            f"the same number per query). Set task.train_data.n_ways<={n_docs} or provide more documents."
        )
    return out


# -------------------------------------------------------------------------------------------- reading files
def read_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) for each row of a JSONL or Parquet file; ``where`` names the file and line/row (from 1)."""
    if not path.is_file():
        raise DataError(f"KD training file not found: {path}. Set task.train_data.path (and queries_path/documents_path).")
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".jsonl", ".json"):
        raise DataError(f"{path}: unknown KD file type {suffix!r}; convert it to .jsonl or .parquet.")
    yield from table_rows(path)


def _same_type(where: str, key: str, value: Any, first: dict[str, type]) -> None:
    """An id must be present and have the type of the first one seen for ``key`` (pyarrow cannot mix them)."""
    if value is None:
        raise DataError(f"{where}: {key} is missing (null); every row needs one: fill it in or drop the row.")
    kind = first.setdefault(key, type(value))
    if type(value) is not kind:
        raise DataError(f"{where}: {key} {value!r} is a {type(value).__name__} but earlier ids are {kind.__name__}s; "
                        "write every id with the same type (all numbers or all strings).")


def _to_dataset(rows: list[dict[str, Any]], path: str | Path) -> Dataset:
    """``Dataset.from_list``; a pyarrow failure to build one table is a DataError naming the file."""
    import pyarrow as pa
    try:
        return Dataset.from_list(rows)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise DataError(f"{path}: the rows cannot form one table ({one_line(exc)[:200]}); give every row the same "
                        "column types.") from None


def read_texts(path: str | Path | None, id_column: str, key: str) -> Dataset:
    """A queries (``query_id``, ``text``) or documents (``document_id``, ``text``) file as a Dataset."""
    if not path:
        raise DataError(f"the ids layout needs task.train_data.{key}=<JSONL/Parquet with {id_column}, text>.")
    rows: list[dict[str, Any]] = []
    first: dict[str, type] = {}
    for where, row in read_rows(Path(path)):
        if id_column not in row or "text" not in row:
            raise DataError(f"{where}: needs {id_column!r} and 'text' columns, found {sorted(row)}; rename or add "
                            "them.")
        _same_type(where, id_column, row[id_column], first)
        rows.append({id_column: row[id_column], "text": str(row["text"] or "")})
    if not rows:
        raise DataError(f"{path} is empty: add one {{{id_column}, text}} row per line.")
    return _to_dataset(rows, path)


def _joined_row(where: str, row: Mapping[str, Any], layout: str, n_ways: int) -> tuple[str, list[str], list[float]]:
    if layout == "flag":
        docs = [str(d) for d in [*_as_list(row.get("pos"), where, "pos"), *_as_list(row.get("neg"), where, "neg")]]
        missing = [k for k in ("pos_scores", "neg_scores") if row.get(k) is None]
        if missing:
            raise DataError(f"{where}: no teacher scores ({', '.join(missing)} missing). Every document needs one: "
                            "add them to that row.")
        scores: Any = [*_as_list(row["pos_scores"], where, "pos_scores"),
                       *_as_list(row["neg_scores"], where, "neg_scores")]
        what = "pos_scores + neg_scores"
    else:
        docs = [str(d) for d in _as_list(row.get("documents"), where, "documents")]
        scores, what = _listify(row.get("scores"), where, "scores"), "scores"
    query = row.get("query")
    if not isinstance(query, str) or not query.strip():
        raise DataError(f"{where}: the query is missing or empty; every row needs a non-empty 'query' text.")
    checked = check_scores(where, len(docs), scores, n_ways, what)
    return query, docs[:n_ways], checked[:n_ways]


def _ids_rows(rows: list[tuple[str, dict[str, Any]]], n_ways: int) -> list[dict[str, Any]]:
    """The ids-layout rows checked (ids present, of one type, a score per document) and normalised (lists, floats)."""
    out: list[dict[str, Any]] = []
    first: dict[str, type] = {}
    for where, row in rows:
        missing = [c for c in LAYOUTS["ids"] if c not in row]
        if missing:
            raise DataError(f"{where}: missing {missing}; an ids-layout row needs query_id, document_ids and scores "
                            "(one per document): add them to that row.")
        dids = _as_list(row["document_ids"], where, "document_ids")
        scores = check_scores(where, len(dids), _listify(row["scores"], where, "scores"), n_ways)
        _same_type(where, "query_id", row["query_id"], first)
        for did in dids:
            _same_type(where, "document id", did, first)
        out.append({"query_id": row["query_id"], "document_ids": dids, "scores": scores})
    return out


def _joined_dataset(rows: list[tuple[str, dict[str, Any]]], layout: str, n_ways: int) -> Dataset:
    """The flag or joined layout's rows as query/documents/scores columns, each row checked."""
    data: dict[str, list] = {c: [] for c in KD_COLUMNS}
    for where, row in rows:
        if detect_layout(row, where) != layout:
            raise DataError(f"{where}: row layout differs from the first row's ({layout}); use one layout per file.")
        for col, value in zip(KD_COLUMNS, _joined_row(where, row, layout, n_ways), strict=True):
            data[col].append(value)
    return Dataset.from_dict(data)


def load_kd_file(path: str | Path, *, n_ways: int, queries_path: str | None = None, documents_path: str | None = None,
                 max_samples: int | None = None, seed: int = 12) -> tuple[Dataset, dict[str, Any]]:
    """A local KD file (any layout) -> (training Dataset with query/documents/scores, facts for the record)."""
    path = Path(path)
    rows = list(read_rows(path))
    if not rows:
        raise DataError(f"{path} has no rows: add one KD row (query, documents, teacher scores) per line.")
    layout = detect_layout(rows[0][1], rows[0][0])
    if layout == "ids":
        queries = read_texts(queries_path, "query_id", "queries_path")
        documents = read_texts(documents_path, "document_id", "documents_path")
        train = _to_dataset(_ids_rows(rows, n_ways), path)
        validate_ids(train, queries, documents, n_ways, where=lambda i: rows[i][0])
        train = sample(train, max_samples, seed)
        ds = kd_processing(train, queries, documents, n_ways)
    else:
        ds = sample(_joined_dataset(rows, layout, n_ways), max_samples, seed)
    facts = {"source": "file", "path": str(path), "layout": layout, "n_rows_in_file": len(rows), "n_samples": len(ds),
             "n_ways": n_ways, "max_samples": max_samples}
    return ds, facts


# -------------------------------------------------------------------------------------------- ids layout
def _missing_id_error(where: str, kind: str, value: Any, known: set[Any], file: str) -> DataError:
    hint = ""
    if str(value) in {str(k) for k in known}:   # error path only: one pass over the ids
        hint = f" (an id {str(value)!r} exists with another type: ids are compared as stored, {type(value).__name__})"
    return DataError(
        f"{where}: {kind} id {value!r} is not in the {file}{hint}. PyLate's KDProcessing would silently train on an "
        f"empty text; fix the ids or drop the row."
    )


def validate_ids(train: Dataset, queries: Dataset, documents: Dataset, n_ways: int,
                 where: Callable[[int], str] = lambda i: f"train row {i}", batch_size: int = 10_000) -> None:
    """Every row of the ids layout checked (ids resolve, scores finite, one per document), before any training."""
    for col in LAYOUTS["ids"]:
        if col not in train.column_names:
            raise DataError(f"{where(0)}: the ids layout needs a {col!r} column; found {train.column_names}.")
    known_q, known_d = set(queries["query_id"]), set(documents["document_id"])
    offset = 0
    for batch in train.select_columns(list(LAYOUTS["ids"])).iter(batch_size=batch_size):
        for i, (qid, dids, scores) in enumerate(zip(batch["query_id"], batch["document_ids"], batch["scores"],
                                                    strict=True)):
            w = where(offset + i)
            if qid not in known_q:
                raise _missing_id_error(w, "query", qid, known_q, "queries file")
            dids = _as_list(dids, w, "document_ids")
            check_scores(w, len(dids), _listify(scores, w, "scores"), n_ways)
            for did in dids[:n_ways]:
                if did not in known_d:
                    raise _missing_id_error(w, "document", did, known_d, "documents file")
        offset += len(batch["query_id"])


def kd_processing(train: Dataset, queries: Dataset, documents: Dataset, n_ways: int) -> Dataset:
    """PyLate's on-the-fly join (``KDProcessing(n_ways)``), as ModernBERT's ``train_pylate.py`` sets it."""
    from pylate import utils
    train.set_transform(utils.KDProcessing(queries=queries, documents=documents, n_ways=n_ways).transform)
    return train


def sample(ds: Dataset, max_samples: int | None, seed: int) -> Dataset:
    """A seeded random ``max_samples`` rows (all of them when there are fewer)."""
    if max_samples and len(ds) > max_samples:
        return ds.train_test_split(test_size=max_samples, seed=seed)["test"]
    return ds


# -------------------------------------------------------------------------------------------- the hub set
def load_kd_hub(path: str, revision: str | None, *, n_ways: int, max_samples: int | None,
                seed: int) -> tuple[Dataset, dict[str, Any]]:
    """The paper's KD set, validated, sampled, joined by KDProcessing; the facts name the commit loaded."""
    from datasets import load_dataset

    from harness.models import require_hub
    require_hub(f"KD training set {path!r}", HUB_FIX)
    commit = _hub_commit(path, revision)
    parts = {name: load_dataset(path, name, split="train", revision=commit or revision)
             for name in ("train", "queries", "documents")}
    train, queries, documents = parts["train"], parts["queries"], parts["documents"]
    train = sample(train, max_samples, seed)
    validate_ids(train, queries, documents, n_ways)
    facts = {"source": "hub", "hub_path": path, "hub_revision": revision, "hub_commit": commit, "layout": "ids",
             "n_rows_available": len(parts["train"]), "n_samples": len(train), "n_ways": n_ways,
             "max_samples": max_samples}
    return kd_processing(train, queries, documents, n_ways), facts


def _hub_commit(path: str, revision: str | None) -> str | None:
    """The commit ``revision`` resolves to (recorded; loaded at exactly it). A pin (a full or short commit id) fails
    closed if unresolved or resolved to another commit; an unresolved branch loads by name, with a warning."""
    from huggingface_hub import HfApi
    pinned = pinned_commit(revision)
    try:
        sha = HfApi().dataset_info(path, revision=revision).sha
    except Exception as exc:   # a private mirror without the API: load a branch by name, record what was asked for
        if pinned:
            raise DataError(f"KD training set {path}@{revision}: the hub did not resolve the pinned commit "
                            f"({one_line(exc)}); the set is read only at the commit task.train_data.hub_revision "
                            f"names. {HUB_FIX}") from None
        log.warning("could not resolve %s@%s to a commit: %s", path, revision, exc)
        return None
    if pinned and not str(sha).lower().startswith(pinned):
        raise DataError(f"KD training set {path}@{revision} resolved to commit {sha}, which is not the pinned "
                        f"{revision}: nothing is read from another commit. Set task.train_data.hub_revision to the "
                        "commit you mean (a full or abbreviated commit id), or to a branch to read whatever it holds.")
    return sha


def pinned_commit(revision: str | None) -> str | None:
    """``revision`` lowercased if a commit id (7-40 hex digits), else None (a branch or tag: its commit recorded)."""
    import re
    text = str(revision or "").lower()
    return text if re.fullmatch(r"[0-9a-f]{7,40}", text) else None
