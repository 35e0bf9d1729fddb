"""Retrieval sets stored as a Hugging Face dataset repository (one folder per config, as mteb's ``Nano*Retrieval``),
from a hub snapshot or a local folder alike; not ``datasets.load_dataset``, which needs the README metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.errors import DataError
from harness.data.files import table_rows
from harness.tasks.retrieval.data.beir import check_qrels_ids, relevance_grade
from harness.tasks.retrieval.data.dataset import (
    RetrievalDataset,
    in_memory,
    query_text,
    unique_judgements,
    unique_queries,
)

_SUFFIXES = (".parquet", ".jsonl", ".json")


def is_hub_layout(folder: Path) -> bool:
    return (folder / "corpus").is_dir() and (folder / "queries").is_dir()


def _files(folder: Path, config: str, split: str) -> list[Path]:
    """The data files of ``config``'s ``split``; when the config has a single split, that one (as mteb)."""
    root = folder / config
    files = sorted(p for p in root.rglob("*") if p.suffix in _SUFFIXES and p.is_file())
    named = [p for p in files if p.name.split("-")[0].split(".")[0] == split]
    if named:
        return named
    splits = {p.name.split("-")[0].split(".")[0] for p in files}
    if len(splits) == 1:
        return files
    raise DataError(f"{root}: no files for split {split!r} (found splits {sorted(splits) or 'none'}); "
                    "choose one with task.split=<split>")


Row = tuple[str, dict[str, Any]]   # (where: the file and its Parquet row or JSONL line, from 1; row)


def _rows(paths: list[Path]) -> list[Row]:
    """(where, row) of every row of the files: Parquet rows or JSONL lines."""
    return [row for path in paths for row in table_rows(path)]


def _field(where: str, row: dict[str, Any], *names: str) -> Any:
    """The first of ``names`` the row at ``where`` has; none of them is an error naming the row and the fix."""
    for name in names:
        if name in row:
            return row[name]
    wanted = " (or ".join(f"`{name}`" for name in names) + ")" * (len(names) - 1)
    raise DataError(f"{where}: no {wanted} field; got {sorted(row)}. Add it to that row.")


def _corpus(where: str, rows: list[Row]) -> tuple[list[str], list[str], list[str]]:
    if not rows:
        raise DataError(f"{where}/corpus: no documents; the corpus files must hold one {{_id, title, text}} row "
                        "per document.")
    ids = [str(_field(w, r, "_id", "id")) for w, r in rows]
    if len(set(ids)) != len(ids):
        seen: dict[str, int] = {}
        for i, did in enumerate(ids):   # error path only: find the first repeat
            if did in seen:
                raise DataError(f"{rows[i][0]}: duplicate document id {did!r} (first at {rows[seen[did]][0]}); "
                                "document ids must be unique: rename or remove one of them.")
            seen[did] = i
    titles = [str(r.get("title") or "") for _, r in rows]
    texts = [str(r.get("text") or "") for _, r in rows]
    return ids, titles, texts


def _qrels(rows: list[Row]) -> dict[str, dict[str, int]]:
    number_fix = "the score field must be an integer relevance grade"
    judged = []
    for w, r in rows:
        qid, cid = str(_field(w, r, "query-id")), _field(w, r, "corpus-id")
        grade = relevance_grade(r.get("score", 1), w, number_fix)
        judged += [(w, qid, str(d), grade) for d in (cid if isinstance(cid, list) else [cid])]
    return unique_judgements(judged)


def dataset_from_rows(corpus: list[Row], queries: list[Row], qrels: list[Row], *, name: str, split: str,
                      where: str, source: str, strict_qrels: bool = True, fingerprint: str = "") -> RetrievalDataset:
    """A validated set from the (where, row) rows of its corpus, queries and qrels tables (``where``: the set)."""
    ids, titles, texts = _corpus(where, corpus)
    judged_queries = unique_queries((w, str(_field(w, r, "_id", "id")), query_text(_field(w, r, "text")))
                                    for w, r in queries)
    qrels_checked = check_qrels_ids(_qrels(qrels), judged_queries, set(ids), where, strict=strict_qrels)
    return in_memory(name, split, ids, titles, texts, queries=judged_queries, qrels=qrels_checked, source=source,
                     fingerprint=fingerprint)


def read_hub_layout(folder: str | Path, name: str, split: str, *, strict_qrels: bool = True, source: str = "",
                    fingerprint: str = "") -> RetrievalDataset:
    """A retrieval set from a folder in hub layout (see the module docstring), validated."""
    folder = Path(folder)
    if not is_hub_layout(folder):
        raise DataError(f"{folder} is not a retrieval set in hub layout: it needs corpus/ and queries/ folders "
                        "(and qrels/ or default/) with <split>-*.parquet or .jsonl files")
    qconfig = "qrels" if (folder / "qrels").is_dir() else "default"
    return dataset_from_rows(_rows(_files(folder, "corpus", split)), _rows(_files(folder, "queries", split)),
                             _rows(_files(folder, qconfig, split)), name=name, split=split, where=str(folder),
                             source=source or str(folder.resolve()), strict_qrels=strict_qrels, fingerprint=fingerprint)


def snapshot(repo: str, revision: str | None, name: str) -> Path:
    """The local snapshot of a hub dataset repository (from the cache when present, else downloaded)."""
    from huggingface_hub import snapshot_download

    from harness.models import require_hub
    try:
        return Path(snapshot_download(repo, repo_type="dataset", revision=revision, local_files_only=True))
    except Exception:
        require_hub(f"dataset {repo!r}",
                    f"Pass task.data_dir=<dir> with a copy in <dir>/{name}/ (hub layout: corpus/, queries/, qrels/ "
                    "folders of <split>-*.parquet or .jsonl; or BEIR layout).")
        return Path(snapshot_download(repo, repo_type="dataset", revision=revision))
