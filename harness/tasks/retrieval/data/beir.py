"""BEIR-layout retrieval sets (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``), from a local folder or a
pinned hub copy, validated on load; any set written as one."""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

from harness.core.errors import DataError
from harness.data.files import jsonl_rows, text_lines, write_jsonl
from harness.tasks.retrieval.data.corpus import ArrowCorpus, JsonlCorpus
from harness.tasks.retrieval.data.dataset import (
    RetrievalDataset,
    query_text,
    unique_judgements,
    unique_queries,
)

log = logging.getLogger(__name__)


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise DataError(
            f"{what} not found: {path}. A BEIR folder needs corpus.jsonl, queries.jsonl and qrels/<split>.tsv; "
            "point task.data_dir at the folder that contains <dataset>/ (or download the dataset in BEIR layout)."
        )


def read_corpus(path: Path, id_key: str = "_id", id_name: str = "document id",
                empty_fix: str = '. Check the file or the dataset folder (one {"_id", "title", "text"} object per line).',
                ) -> JsonlCorpus:
    """A JSONL corpus (BEIR's; MLDR's keyed by ``docid``), scanned and checked; its texts read when used."""
    _require_file(path, "corpus file")
    return JsonlCorpus(path, id_key, id_name, empty_fix)


def read_queries(path: Path) -> dict[str, str]:
    _require_file(path, "queries file")
    queries = unique_queries((f"{path} line {n}", str(row["_id"]), query_text(row["text"]))
                             for n, row in jsonl_rows(path, ("_id", "text")))
    if not queries:
        raise DataError(f"{path} is empty: no queries. Check the file or the dataset folder "
                        '(one {"_id", "text"} object per line).')
    return queries


#: the fix for a qrels score that is a number but not an integer
GRADE_FIX = "relevance grades must be integers (0, 1, 2, ...): round or map the scores in the file"
#: the fix for a non-numeric score in a qrels TSV
TSV_SCORE_FIX = "the third column must be an integer relevance grade; a header is allowed on line 1 only"


def as_number(value: Any) -> float | None:
    """``value`` as a finite float (an int, a float or its text), or None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def relevance_grade(value: Any, where: str, number_fix: str = TSV_SCORE_FIX, grade_fix: str = GRADE_FIX) -> int:
    """``value`` as an integer grade (``1``, ``"1"``, ``"1.0"``); a non-integer is an error at ``where``."""
    if type(value) is int:
        return value
    number = as_number(value)
    if number is None:
        raise DataError(f"{where}: score {value!r} is not a number; {number_fix}.")
    if not number.is_integer():
        raise DataError(f"{where}: score {value!r} is not an integer; {grade_fix}.")
    return int(number)


def _qrels_fields(path: Path, lineno: int, line: str) -> tuple[str, str, str]:
    """(query id, corpus id, score) of one qrels line: 3 tab-separated columns, or TREC's 4 (qid 0 docid rel)."""
    parts = line.split("\t")
    if len(parts) == 4:  # TREC style: qid 0 docid rel, tab separated
        parts = [parts[0], parts[2], parts[3]]
    if len(parts) != 3:
        raise DataError(
            f"{path} line {lineno}: expected 3 tab-separated columns (query-id, corpus-id, score), got "
            f"{len(parts)}: {line[:80]!r}. Separate the columns with single tabs (ids must not contain tabs)."
        )
    qid, did, score = (p.strip() for p in parts)
    return qid, did, score


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query-id -> {corpus-id: grade}. Header optional; CRLF or LF; tab separated, 3 columns; integer grades."""
    if not path.is_file():
        avail = sorted(p.stem for p in path.parent.glob("*.tsv")) if path.parent.is_dir() else []
        raise DataError(f"qrels file not found: {path}. Splits available here: {avail or 'none'}; "
                        "choose one with task.split=<split>.")
    rows = []
    for lineno, line in enumerate(text_lines(path), start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        qid, did, score = _qrels_fields(path, lineno, line)
        if lineno == 1 and as_number(score) is None:
            continue  # header
        rows.append((f"{path} line {lineno}", qid, did, relevance_grade(score, f"{path} line {lineno}")))
    qrels = unique_judgements(rows)
    if not qrels:
        raise DataError(f"{path} has no judgements. Each line needs query-id, corpus-id and an integer score, "
                        "tab separated.")
    return qrels


def check_qrels_ids(
    qrels: dict[str, dict[str, int]], queries: dict[str, str], doc_ids: set[str], where: str, strict: bool = True
) -> dict[str, dict[str, int]]:
    """Error (or, with strict=False, drop with a warning) when qrels name unknown query or document ids."""
    bad_q = [q for q in qrels if q not in queries]
    bad_d = sorted({d for docs in qrels.values() for d in docs if d not in doc_ids})
    if not bad_q and not bad_d:
        return qrels
    msg = (f"{where}: qrels name {len(bad_q)} unknown query id(s) {bad_q[:5]} and {len(bad_d)} unknown document "
           f"id(s) {bad_d[:5]}. The qrels must belong to this corpus and these queries: check the files, or set "
           "task.strict_qrels=false to drop those judgements with a warning.")
    if strict:
        raise DataError(msg)
    log.warning("%s", msg)
    cleaned = {q: {d: g for d, g in docs.items() if d in doc_ids} for q, docs in qrels.items() if q in queries}
    return {q: docs for q, docs in cleaned.items() if docs}


def load_local(folder: str | Path, name: str, split: str = "test", strict_qrels: bool = True) -> RetrievalDataset:
    """A BEIR folder -> RetrievalDataset, validated."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"dataset folder not found: {folder}. Set task.data_dir to the directory that contains {name}/ "
                        "in BEIR layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).")
    qrels = read_qrels(folder / "qrels" / f"{split}.tsv")
    queries = read_queries(folder / "queries.jsonl")
    corpus = read_corpus(folder / "corpus.jsonl")
    qrels = check_qrels_ids(qrels, queries, set(corpus.ids), str(folder), strict=strict_qrels)
    return RetrievalDataset(name=name, split=split, corpus=corpus, queries=queries, qrels=qrels,
                            source=str(folder.resolve()))


def load_hub(path: str, revision: str | None, name: str, split: str = "test", strict_qrels: bool = True) -> RetrievalDataset:
    """A BEIR set from its hub copy (mteb's layout: configs ``corpus``, ``queries`` and ``default`` qrels)."""
    from datasets import load_dataset

    from harness.models import require_hub
    require_hub(f"dataset {path!r}",
                f"Download it elsewhere in BEIR layout and pass task.data_dir=<dir containing {name}/>.")

    def first_split(config: str):
        dd = load_dataset(path, config, revision=revision)
        return dd[next(iter(dd))]

    corpus = first_split("corpus")
    queries_ds = first_split("queries")
    qrels_splits = load_dataset(path, "default", revision=revision)
    if split not in qrels_splits:
        raise DataError(f"hub dataset {path}@{revision}: no qrels split {split!r} (has {list(qrels_splits)}); choose "
                        "one with task.split=<split>.")
    qrels_ds = qrels_splits[split]
    docs = ArrowCorpus(corpus, f"{path}@{revision}")
    queries = unique_queries((f"{path}@{revision} queries row {i}", str(q), query_text(t))
                             for i, (q, t) in enumerate(zip(queries_ds["_id"], queries_ds["text"], strict=True), 1))
    qrels = hub_qrels(qrels_ds, f"{path}@{revision} qrels ({split})")
    if not len(docs):
        raise DataError(f"hub dataset {path}@{revision}: empty corpus; check task.catalog's hub and revision.")
    qrels = check_qrels_ids(qrels, queries, set(docs.ids), f"{path}@{revision}", strict=strict_qrels)
    return RetrievalDataset(name=name, split=split, corpus=docs, queries=queries, qrels=qrels,
                            source=f"{path}@{revision}", fingerprint=f"hub:{path}@{revision}")


def hub_qrels(rows: Any, where: str) -> dict[str, dict[str, int]]:
    """query-id -> {corpus-id: grade} from a hub qrels table, integer grades; ``where`` names it (rows from 1)."""
    missing = [c for c in ("query-id", "corpus-id", "score") if c not in rows.column_names]
    if missing:
        raise DataError(f"{where}: no column(s) {missing} (has {rows.column_names}); a qrels table needs query-id, "
                        "corpus-id and score: check the dataset and its revision.")
    number_fix = "the score column must hold integer relevance grades"
    grade_fix = "relevance grades must be integers (0, 1, 2, ...): round or map the scores in the dataset"
    return unique_judgements(
        (f"{where} row {i}", str(q), str(d), relevance_grade(s, f"{where} row {i}", number_fix, grade_fix))
        for i, (q, d, s) in enumerate(zip(rows["query-id"], rows["corpus-id"], rows["score"], strict=True), start=1))


def export_beir(ds: RetrievalDataset, out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``ds`` as a BEIR folder via a temporary sibling renamed into place (replacing only if ``overwrite``)."""
    out = Path(out_dir).expanduser().absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise DataError(f"export folder {str(out)!r} already exists and is not empty; pass overwrite=True "
                        "or choose a new folder.")
    for kind, ids in (("document", ds.corpus_ids), ("query", ds.queries)):
        bad = next((i for i in ids if any(c in i for c in "\t\n\r")), None)
        if bad is not None:
            raise DataError(f"{kind} id {bad!r} contains a tab or newline, which BEIR's qrels TSV cannot hold; "
                            "rename the source file or function.")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write_jsonl(tmp / "corpus.jsonl", ({"_id": did, "title": title, "text": text}
                                           for did, title, text in ds.corpus.rows()))
        write_jsonl(tmp / "queries.jsonl", ({"_id": qid, "text": text} for qid, text in ds.queries.items()))
        (tmp / "qrels").mkdir()
        with open(tmp / "qrels" / f"{ds.split}.tsv", "w", encoding="utf-8", newline="\n") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for qid, rels in ds.qrels.items():
                for did, score in rels.items():
                    f.write(f"{qid}\t{did}\t{score}\n")
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            out.rename(old / "x")
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out
