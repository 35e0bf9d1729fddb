"""DPR training triplets: a local file, the paper's hub set, or a BEIR train split with mined hard negatives."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset

from harness.core.console import step
from harness.core.errors import DataError
from harness.data.files import csv_rows, jsonl_rows

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from harness.tasks.retrieval.data.dataset import RetrievalDataset

COLUMNS = ("anchor", "positive", "negative")
#: accepted column names for each triplet field, first match wins
ALIASES = {"anchor": ("anchor", "query", "question"), "positive": ("positive", "pos", "positive_passage", "document"),
           "negative": ("negative", "neg", "negative_passage", "hard_negative")}


TRIPLET_FIX = "every triplet needs a non-empty query, positive and negative: fill in or remove that line"


def _pick(columns: list[str], where: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for field, names in ALIASES.items():
        found = next((c for c in names if c in columns), None)
        if found is None:
            raise DataError(
                f"{where}: no {field!r} column (accepted names: {', '.join(names)}); columns found: {columns}. "
                "Rename the column or convert the file to query/positive/negative."
            )
        mapping[field] = found
    return mapping


def _append(out: dict[str, list[str]], where: str, anchor: Any, positive: Any, negative: Any) -> None:
    """Add one triplet; an empty (or missing) text is an error at ``where``."""
    for field, value in zip(COLUMNS, (anchor, positive, negative), strict=True):
        if value is None or not str(value).strip():
            raise DataError(f"{where}: the {field} is empty; {TRIPLET_FIX}.")
        out[field].append(str(value))


def _read_delimited(path: Path, delimiter: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {c: [] for c in COLUMNS}
    tsv = delimiter == "\t"
    rows = csv_rows(path, delimiter, csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL)
    _, header = next(rows, (1, []))
    if not header:
        raise DataError(f"{path} is empty: expected a header row naming the query, positive "
                        "and negative columns, then one triplet per line.")
    header = [h.strip() for h in header]
    pos = {f: header.index(c) for f, c in _pick(header, f"{path} line 1 (header)").items()}
    fix = ("replace tabs inside the texts with spaces (TSV is read with quoting off)" if tsv
           else 'quote fields that contain commas ("...")')
    for lineno, row in rows:
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != len(header):
            raise DataError(f"{path} line {lineno}: {len(row)} fields, header has {len(header)}; {fix}.")
        _append(out, f"{path} line {lineno}", *(row[pos[f]] for f in COLUMNS))
    return out


def _as_texts(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _read_jsonl(path: Path) -> dict[str, list[str]]:
    """Rows {query, positive, negative} or FlagEmbedding style {query, pos: [...], neg: [...]} (flattened)."""
    out: dict[str, list[str]] = {c: [] for c in COLUMNS}
    for lineno, row in jsonl_rows(path):
        where = f"{path} line {lineno}"
        mapping = _pick(list(row), where)
        anchor, pos, neg = (row[mapping[f]] for f in COLUMNS)
        positives, negatives = _as_texts(pos), _as_texts(neg)
        if not positives or not negatives:
            raise DataError(f"{where}: needs at least one positive and one negative; {TRIPLET_FIX}.")
        for n in negatives:
            _append(out, where, anchor, positives[0], n)
    return out


def load_triplets_file(path: str | Path) -> Dataset:
    """A TSV/CSV (header with query, positive, negative columns) or JSONL file -> triplet Dataset."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"training file not found: {path}. Set task.train_data.path to a TSV, CSV or JSONL file.")
    suffix = path.suffix.lower()
    if suffix in (".tsv", ".txt"):
        data = _read_delimited(path, "\t")
    elif suffix == ".csv":
        data = _read_delimited(path, ",")
    elif suffix in (".jsonl", ".json"):
        data = _read_jsonl(path)
    else:
        raise DataError(f"{path}: unknown training file type {suffix!r}; convert it to .tsv, .csv (a header with "
                        "query, positive, negative columns) or .jsonl and set task.train_data.path to it.")
    if not data["anchor"]:
        raise DataError(f"{path} has no triplets: add one (query, positive, negative) per line after the header "
                        "(JSONL: one object per line).")
    return Dataset.from_dict(data)


def load_hub_triplets(path: str, config: str, revision: str | None, max_samples: int | None, seed: int) -> Dataset:
    """The paper's MS MARCO hard-negative triplets; a seeded sample of ``max_samples`` rows."""
    from datasets import load_dataset

    from harness.models import require_hub
    require_hub(f"training set {path!r} ({config})",
                "Train from a local file instead: task.train_data.source=file task.train_data.path=triplets.tsv "
                "(columns query, positive, negative), or evaluate without training: task.train=false.")
    ds = load_dataset(path, config, split="train", revision=revision)
    ds = ds.rename_columns({c: a for c, a in zip(ds.column_names[:3], COLUMNS, strict=True)})
    return sample(ds, max_samples, seed)


#: rows the authors held out before taking the training rows (MB@8c57a0f:examples/train_st.py test_size=1_000)
HELD_OUT = 1_000


def sample(ds: Dataset, max_samples: int | None, seed: int) -> Dataset:
    """The authors' subset (MB@8c57a0f:examples/train_st.py): ``train_test_split(test_size=1_000, seed=seed)["train"]
    .select(range(max_samples))``; all rows when at most ``max_samples``; fewer than that + 1,000: the rest held out."""
    if max_samples and len(ds) > max_samples:
        held_out = min(HELD_OUT, len(ds) - max_samples)
        return ds.train_test_split(test_size=held_out, seed=seed)["train"].select(range(max_samples))
    return ds


def mine_from_beir(ds: RetrievalDataset, model: SentenceTransformer, *, num_negatives: int, range_min: int,
                   range_max: int, batch_size: int = 64) -> Dataset:
    """(query, positive) pairs of ``ds``'s qrels, hard negatives mined with ``model`` (``mine_hard_negatives``)."""
    from sentence_transformers.util import mine_hard_negatives

    # sentence-transformers' miner takes the corpus as one list: mining is for train splits of small sets
    docs = [text for _, chunk in ds.corpus.chunks() for text in chunk]
    position = {did: i for i, did in enumerate(ds.corpus_ids)}
    anchors, positives = [], []
    for qid, judged in ds.qrels.items():
        for did, grade in judged.items():
            if grade > 0 and qid in ds.queries:
                anchors.append(ds.queries[qid])
                positives.append(docs[position[did]])
    if not anchors:
        raise DataError(f"{ds.source}: split {ds.split!r} has no positive judgements to train on.")
    pairs = Dataset.from_dict({"anchor": anchors, "positive": positives})
    # sentence-transformers takes the top range_max + (most positives of one query) candidates: stay in the corpus
    most_positives = max(Counter(anchors).values())
    range_max = min(range_max, len(docs) - most_positives)
    if range_max <= range_min:
        raise DataError(
            f"{ds.source}: {len(docs)} documents leave no room to mine negatives between rank {range_min} and "
            f"{range_max} (a query has {most_positives} positives). Lower task.train_data.range_min."
        )
    with step(f"mining hard negatives for {len(pairs):,} pairs of {ds.name}/{ds.split} ({len(docs):,} documents)",
              starting="encoding the corpus and the queries") as done:
        mined = mine_hard_negatives(
            pairs, model, corpus=docs, num_negatives=num_negatives, range_min=range_min,
            range_max=range_max, sampling_strategy="top", output_format="triplet", batch_size=batch_size,
            verbose=False,
        )
        done.outcome = f"{len(mined):,} triplets"
    return mined.rename_columns({c: a for c, a in zip(mined.column_names[:3], COLUMNS, strict=True)})
