"""Retrieval sets stored as a Hugging Face dataset repository: one folder per config (``corpus``, ``queries``,
``qrels`` or ``default``) holding ``<split>-*.parquet`` (or ``.jsonl``) files, as mteb's hub copies are laid
out (e.g. ``mteb/NanoArguAnaRetrieval``: split ``train``). The same reader serves a hub snapshot and a local
folder in that layout, so the offline tests run the hub path's code.

Why not ``datasets.load_dataset``: it needs the repository's README metadata to find configs, and mteb's loader
needs the hub; this reads the files directly and picks configs and splits as mteb's ``RetrievalDatasetLoader``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.data.beir import check_qrels_ids
from harness.data.retrieval import RetrievalDataset
from harness.errors import DataError

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


def _rows(paths: list[Path]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in paths:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            rows += pq.read_table(path).to_pylist()
            continue
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise DataError(f"{path} line {lineno}: not valid JSON ({exc.msg})") from None
    return rows


def _id(row: dict[str, Any], where: Path) -> str:
    if "_id" in row:
        return str(row["_id"])
    if "id" in row:
        return str(row["id"])
    raise DataError(f"{where}: rows need an `_id` (or `id`) field; got {sorted(row)}")


def read_hub_layout(folder: str | Path, name: str, split: str, *, strict_qrels: bool = True, source: str = "",
                    fingerprint: str = "") -> RetrievalDataset:
    """A retrieval set from a folder in hub layout (see the module docstring), validated."""
    folder = Path(folder)
    if not is_hub_layout(folder):
        raise DataError(f"{folder} is not a retrieval set in hub layout: it needs corpus/ and queries/ folders "
                        "(and qrels/ or default/) with <split>-*.parquet or .jsonl files")
    qconfig = "qrels" if (folder / "qrels").is_dir() else "default"
    corpus = _rows(_files(folder, "corpus", split))
    queries_rows = _rows(_files(folder, "queries", split))
    qrels_rows = _rows(_files(folder, qconfig, split))
    if not corpus:
        raise DataError(f"{folder}/corpus: no documents")
    ids = [_id(r, folder / "corpus") for r in corpus]
    if len(set(ids)) != len(ids):
        raise DataError(f"{folder}/corpus: duplicate document ids; document ids must be unique")
    titles = [str(r.get("title") or "") for r in corpus]
    texts = [str(r.get("text") or "") for r in corpus]
    queries = {_id(r, folder / "queries"): str(r["text"]) for r in queries_rows}
    qrels: dict[str, dict[str, int]] = {}
    for r in qrels_rows:
        docs = r["corpus-id"] if isinstance(r["corpus-id"], list) else [r["corpus-id"]]
        for d in docs:
            qrels.setdefault(str(r["query-id"]), {})[str(d)] = int(r.get("score", 1))
    qrels = check_qrels_ids(qrels, queries, set(ids), str(folder), strict=strict_qrels)
    return RetrievalDataset(name=name, split=split, corpus_ids=ids, corpus_titles=titles, corpus_texts=texts,
                            queries=queries, qrels=qrels, source=source or str(folder.resolve()),
                            fingerprint=fingerprint)


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
