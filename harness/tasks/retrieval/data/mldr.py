"""MLDR: the English test set from mteb's pinned hub copy, the training set from ``Shitao/MLDR`` (the ``json``
loader: datasets 5 refuses its loading script), or any local folder in MLDR's layout."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import DataError
from harness.core.results import file_sha
from harness.data.files import jsonl_rows, write_jsonl
from harness.tasks.retrieval.data.beir import hub_qrels, read_corpus
from harness.tasks.retrieval.data.corpus import ArrowCorpus
from harness.tasks.retrieval.data.dataset import (
    RetrievalDataset,
    query_text,
    unique_judgements,
    unique_queries,
)

if TYPE_CHECKING:
    from datasets import Dataset

log = logging.getLogger(__name__)


def split_file(folder: Path, stem: str) -> Path | None:
    """``<stem>.jsonl`` or ``<stem>.jsonl.gz`` in ``folder``, whichever exists."""
    for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def _require(folder: Path, stem: str) -> Path:
    if not folder.is_dir():
        raise DataError(
            f"MLDR folder not found: {folder}. Set task.data_dir to the directory holding it, in MLDR's layout "
            "(corpus.jsonl and train/dev/test.jsonl, gzipped or not, as Shitao/MLDR's mldr-v1.0-<lang>/)."
        )
    path = split_file(folder, stem)
    if path is None:
        have = sorted(p.name for p in folder.glob("*.jsonl*"))
        raise DataError(f"{folder}: no {stem}.jsonl(.gz); MLDR's layout has corpus.jsonl and train/dev/test.jsonl "
                        f"(found: {', '.join(have) or 'nothing'}).")
    return path


def check_row(row: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """The positives of one query row; a row without a query or a positive passage is an error naming the fix."""
    missing = [k for k in ("query_id", "query", "positive_passages") if k not in row]
    if missing:
        raise DataError(f"{where}: missing field(s) {missing}; an MLDR row has query_id, query, positive_passages "
                        "and negative_passages.")
    positives = row["positive_passages"] or []
    for key in ("positive_passages", "negative_passages"):
        if not isinstance(row.get(key) or [], list):
            raise DataError(f"{where} (query_id {row['query_id']!r}): {key} must be a list of {{docid, text}} "
                            f"objects, got {type(row[key]).__name__}; fix that row.")
    if not positives:
        raise DataError(f"{where} (query_id {row['query_id']!r}): no positive passage; every MLDR row needs at least "
                        "one entry in positive_passages. Fix that row or remove it from the file.")
    for p in [*positives, *(row.get("negative_passages") or [])]:
        if not isinstance(p, dict) or "docid" not in p:
            raise DataError(f"{where} (query_id {row['query_id']!r}): a passage without docid; passages are "
                            "{docid, text} objects: add the docid or remove that passage.")
    return positives


def read_queries(folder: Path, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    path = _require(folder, split)
    rows, judged = [], []
    for lineno, row in jsonl_rows(path):
        positives = check_row(row, f"{path} line {lineno}")
        qid = str(row["query_id"])
        rows.append((f"{path} line {lineno}", qid, query_text(row["query"])))
        judged += [(f"{path} line {lineno}", qid, str(p["docid"]), 1) for p in positives]
    queries, qrels = unique_queries(rows), unique_judgements(judged)
    if not queries:
        raise DataError(f"{path} is empty: no queries; it needs one {{query_id, query, positive_passages}} object "
                        "per line.")
    return queries, qrels


def check_positives(qrels: dict[str, dict[str, int]], doc_ids: set[str], where: str,
                    strict: bool = True) -> dict[str, dict[str, int]]:
    """Every positive must be a corpus document: error (or, not strict, drop those queries with a warning)."""
    bad = {q: sorted(d for d in docs if d not in doc_ids) for q, docs in qrels.items()}
    bad = {q: ds for q, ds in bad.items() if ds}
    if not bad:
        return qrels
    q, ds = next(iter(bad.items()))
    msg = (f"{where}: {len(bad)} quer{'y' if len(bad) == 1 else 'ies'} have a positive that is not in the corpus "
           f"(first: query {q!r} -> {ds[0]!r}). The queries and corpus.jsonl must come from the same MLDR release: "
           "fix the files, or set task.strict_qrels=false to drop those queries with a warning.")
    if strict:
        raise DataError(msg)
    log.warning("%s", msg)
    return {q: docs for q, docs in qrels.items() if q not in bad}


def load_local(folder: Path, name: str, split: str = "test", strict_qrels: bool = True) -> RetrievalDataset:
    """A folder in MLDR's layout -> the ``split`` queries over the whole corpus, positives as relevance 1."""
    queries, qrels = read_queries(folder, split)
    corpus = read_corpus(_require(folder, "corpus"), "docid", "docid", "; it needs one {docid, text} object per line.")
    qrels = check_positives(qrels, set(corpus.ids), str(folder), strict_qrels)
    return RetrievalDataset(name=name, split=split, corpus=corpus, queries=queries, qrels=qrels,
                            source=str(folder.resolve()))


def load_hub(path: str, revision: str | None, lang: str, name: str, split: str = "test",
             strict_qrels: bool = True) -> RetrievalDataset:
    """mteb's MLDR copy: ``<lang>-corpus``, ``-queries``, ``-qrels`` (the split, or a config's only one, as mteb)."""
    from datasets import get_dataset_split_names, load_dataset

    from harness.models import require_hub
    require_hub(f"dataset {path!r} ({lang}-corpus/-queries/-qrels, {split})",
                "Offline, pass a local folder in MLDR's layout: task.data_dir=<dir containing mldr-v1.0-en/> "
                "(corpus.jsonl, test.jsonl), e.g. a copy of Shitao/MLDR.")

    def part(config: str):
        splits = get_dataset_split_names(path, config, revision=revision)
        chosen = split if split in splits else splits[0] if len(splits) == 1 else None
        if chosen is None:
            raise DataError(f"{path} {config}: no split {split!r} (has {splits}); set task.split.")
        return load_dataset(path, config, split=chosen, revision=revision)

    corpus, queries_ds, qrels_ds = part(f"{lang}-corpus"), part(f"{lang}-queries"), part(f"{lang}-qrels")
    docs = ArrowCorpus(corpus, f"{path}@{revision}:{lang}", "_id" if "_id" in corpus.column_names else "id")
    qcol = "_id" if "_id" in queries_ds.column_names else "id"
    queries = unique_queries((f"{path}@{revision} queries row {i}", str(q), query_text(t))
                             for i, (q, t) in enumerate(zip(queries_ds[qcol], queries_ds["text"], strict=True), 1))
    qrels = hub_qrels(qrels_ds, f"{path}@{revision} {lang}-qrels")
    qrels = check_positives(qrels, set(docs.ids), f"{path}@{revision}", strict_qrels)
    queries = {q: queries[q] for q in qrels if q in queries}
    return RetrievalDataset(name=name, split=split, corpus=docs, queries=queries, qrels=qrels,
                            source=f"{path}@{revision}:{lang}", fingerprint=f"hub:{path}@{revision}:{lang}")


# ---------------------------------------------------------------------------------------------- training data
def train_rows_local(folder: Path, split: str) -> tuple[list[dict[str, Any]], str]:
    """The rows of a local MLDR split (validated) and the file's sha256."""
    path = _require(folder, split)
    rows = []
    for lineno, row in jsonl_rows(path):
        check_row(row, f"{path} line {lineno}")
        rows.append(row)
    if not rows:
        raise DataError(f"{path} is empty: no training rows; it needs one {{query_id, query, positive_passages, "
                        "negative_passages}} object per line.")
    return rows, file_sha(path)


def train_rows_hub(repo: str, revision: str | None, subdir: str, split: str) -> list[dict[str, Any]]:
    """``<repo>@<revision>/<subdir>/<split>.jsonl.gz`` by the ``json`` loader (datasets 5 refuses the repo's script)."""
    from datasets import load_dataset

    from harness.models import require_hub
    require_hub(
        f"MLDR training data {repo}@{revision} ({subdir}/{split}.jsonl.gz)",
        "Offline, pass a local folder in MLDR's layout: task.train_data.source=local task.train_data.path=<folder "
        "with train.jsonl> (or task.data_dir=<dir containing mldr-v1.0-en/>, whose train split is then used).",
    )
    url = f"hf://datasets/{repo}@{revision}/{subdir}/{split}.jsonl.gz"
    ds = load_dataset("json", data_files={split: url}, split=split)
    rows = []
    for i, row in enumerate(ds, start=1):
        check_row(row, f"{url} row {i}")
        rows.append(row)
    return rows


def triplets(rows: Sequence[dict[str, Any]], num_negatives: int, max_samples: int | None,
             seed: int) -> tuple[Dataset, dict[str, int]]:
    """(anchor, positive, negative) triplets: each row's first positive with its first negatives, sampled."""
    import random

    from datasets import Dataset
    if num_negatives < 1:
        raise DataError(f"task.train_data.num_negatives={num_negatives}: use 1 or more (triplets need a negative).")
    picked = list(rows)
    if max_samples is not None and max_samples < len(picked):
        picked = random.Random(seed).sample(picked, max_samples)
    out: dict[str, list[str]] = {"anchor": [], "positive": [], "negative": []}
    skipped = 0
    for row in picked:
        negatives = [n for n in (row.get("negative_passages") or []) if str(n.get("text") or "").strip()]
        if not negatives:
            skipped += 1
            continue
        positive = str(row["positive_passages"][0].get("text") or "")
        for neg in negatives[:num_negatives]:
            out["anchor"].append(str(row["query"]))
            out["positive"].append(positive)
            out["negative"].append(str(neg["text"]))
    if not out["anchor"]:
        raise DataError(f"none of the {len(picked)} training rows has a negative passage; MNRL triplets need one "
                        "per row (MLDR's train rows have them: check the file).")
    stats = {"rows": len(picked), "rows_without_negative": skipped, "triplets": len(out["anchor"])}
    return Dataset.from_dict(out), stats


# ---------------------------------------------------------------------------------------------- writing
def write_folder(out_dir: str | Path, corpus: Sequence[tuple[str, str]],
                 splits: dict[str, Sequence[dict[str, Any]]]) -> Path:
    """Write an MLDR-layout folder: ``corpus.jsonl`` from (docid, text) and a ``<split>.jsonl`` per ``splits`` entry."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "corpus.jsonl", ({"docid": d, "text": t} for d, t in corpus))
    for split, rows in splits.items():
        write_jsonl(out / f"{split}.jsonl", rows)
    return out
