"""BEIR-layout retrieval sets, from a local folder or a pinned hub copy, validated on load.

A local folder holds ``corpus.jsonl`` ({"_id","title","text"}), ``queries.jsonl`` ({"_id","text"}) and
``qrels/<split>.tsv`` (query-id, corpus-id, score; header optional; CRLF or LF).
"""

from __future__ import annotations

import logging
from pathlib import Path

from harness.data.jsonl import jsonl_rows
from harness.data.retrieval import RetrievalDataset
from harness.errors import DataError

log = logging.getLogger(__name__)


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise DataError(
            f"{what} not found: {path}. A BEIR folder needs corpus.jsonl, queries.jsonl and qrels/<split>.tsv; "
            "point task.data_dir at the folder that contains <dataset>/ (or download the dataset in BEIR layout)."
        )


def read_corpus(path: Path) -> tuple[list[str], list[str], list[str]]:
    _require_file(path, "corpus file")
    ids: list[str] = []
    titles: list[str] = []
    texts: list[str] = []
    seen: set[str] = set()
    for lineno, row in jsonl_rows(path, ("_id", "text")):
        did = str(row["_id"])
        if did in seen:
            raise DataError(f"{path} line {lineno}: duplicate document id {did!r}; document ids must be unique.")
        seen.add(did)
        ids.append(did)
        titles.append(str(row.get("title") or ""))
        texts.append(str(row["text"] or ""))
    if not ids:
        raise DataError(f"{path} is empty: the corpus has no documents. Check the file or the dataset folder.")
    return ids, titles, texts


def read_queries(path: Path) -> dict[str, str]:
    _require_file(path, "queries file")
    queries = {str(row["_id"]): str(row["text"]) for _, row in jsonl_rows(path, ("_id", "text"))}
    if not queries:
        raise DataError(f"{path} is empty: no queries. Check the file or the dataset folder.")
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query-id -> {corpus-id: grade}. Header optional; CRLF or LF; tab separated, 3 columns."""
    if not path.is_file():
        avail = sorted(p.stem for p in path.parent.glob("*.tsv")) if path.parent.is_dir() else []
        raise DataError(
            f"qrels file not found: {path}. Splits available here: {avail or 'none'}; "
            "choose one with task.split=<split>."
        )
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8-sig", newline="") as fh:
        for lineno, line in enumerate(fh, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) == 4:  # TREC style: qid 0 docid rel, tab separated
                parts = [parts[0], parts[2], parts[3]]
            if len(parts) != 3:
                raise DataError(
                    f"{path} line {lineno}: expected 3 tab-separated columns (query-id, corpus-id, score), "
                    f"got {len(parts)}: {line[:80]!r}."
                )
            qid, did, score = (p.strip() for p in parts)
            try:
                grade = int(float(score))
            except ValueError:
                if lineno == 1:  # header
                    continue
                raise DataError(f"{path} line {lineno}: score {score!r} is not a number.") from None
            qrels.setdefault(qid, {})[did] = grade
    if not qrels:
        raise DataError(f"{path} has no judgements. Check the file.")
    return qrels


def check_qrels_ids(
    qrels: dict[str, dict[str, int]], queries: dict[str, str], doc_ids: set[str], where: str, strict: bool = True
) -> dict[str, dict[str, int]]:
    """Error (or, with strict=False, drop with a warning) when qrels name unknown query or document ids."""
    bad_q = [q for q in qrels if q not in queries]
    bad_d = sorted({d for docs in qrels.values() for d in docs if d not in doc_ids})
    if not bad_q and not bad_d:
        return qrels
    msg = (
        f"{where}: qrels name {len(bad_q)} unknown query id(s) {bad_q[:5]} and {len(bad_d)} unknown document "
        f"id(s) {bad_d[:5]}. The qrels must belong to this corpus and these queries: check the files, or set "
        "task.strict_qrels=false to drop those judgements with a warning."
    )
    if strict:
        raise DataError(msg)
    log.warning("%s", msg)
    cleaned = {q: {d: g for d, g in docs.items() if d in doc_ids} for q, docs in qrels.items() if q in queries}
    return {q: docs for q, docs in cleaned.items() if docs}


def load_local(folder: str | Path, name: str, split: str = "test", strict_qrels: bool = True) -> RetrievalDataset:
    """A BEIR folder -> RetrievalDataset, validated."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(
            f"dataset folder not found: {folder}. Set task.data_dir to the directory that contains {name}/ "
            "in BEIR layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)."
        )
    qrels = read_qrels(folder / "qrels" / f"{split}.tsv")
    queries = read_queries(folder / "queries.jsonl")
    ids, titles, texts = read_corpus(folder / "corpus.jsonl")
    qrels = check_qrels_ids(qrels, queries, set(ids), str(folder), strict=strict_qrels)
    return RetrievalDataset(
        name=name, split=split, corpus_ids=ids, corpus_titles=titles, corpus_texts=texts,
        queries=queries, qrels=qrels, source=str(folder.resolve()),
    )


def load_hub(path: str, revision: str | None, name: str, split: str = "test", strict_qrels: bool = True) -> RetrievalDataset:
    """A BEIR set from its hub copy (mteb's layout: configs ``corpus``, ``queries`` and ``default`` qrels)."""
    from datasets import load_dataset

    from harness.models import require_hub

    require_hub(
        f"dataset {path!r}",
        f"Download it elsewhere in BEIR layout and pass task.data_dir=<dir containing {name}/>.",
    )

    def first_split(config: str):
        dd = load_dataset(path, config, revision=revision)
        return dd[next(iter(dd))]

    corpus = first_split("corpus")
    queries_ds = first_split("queries")
    qrels_ds = load_dataset(path, "default", revision=revision)[split]
    ids = [str(x) for x in corpus["_id"]]
    titles = [str(x or "") for x in corpus["title"]] if "title" in corpus.column_names else [""] * len(ids)
    texts = [str(x or "") for x in corpus["text"]]
    queries = {str(q): str(t) for q, t in zip(queries_ds["_id"], queries_ds["text"], strict=True)}
    qrels: dict[str, dict[str, int]] = {}
    for q, d, s in zip(qrels_ds["query-id"], qrels_ds["corpus-id"], qrels_ds["score"], strict=True):
        qrels.setdefault(str(q), {})[str(d)] = int(s)
    if not ids:
        raise DataError(f"hub dataset {path}@{revision}: empty corpus.")
    qrels = check_qrels_ids(qrels, queries, set(ids), f"{path}@{revision}", strict=strict_qrels)
    return RetrievalDataset(
        name=name, split=split, corpus_ids=ids, corpus_titles=titles, corpus_texts=texts, queries=queries,
        qrels=qrels, source=f"{path}@{revision}", fingerprint=f"hub:{path}@{revision}",
    )
