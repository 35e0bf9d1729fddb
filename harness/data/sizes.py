"""The sizes of a job's data where cheap to read (local files' lines and sizes; a large file's lines estimated from
its first MiB), for the cost preview; None for hub copies (the cost file's published sizes are used)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.work import Work, cost_data

#: bytes of UTF-8 text per model token (English prose and code, WordPiece/BPE vocabularies)
BYTES_PER_TOKEN = 4.0
#: files up to this size are counted line by line; larger ones from their first SAMPLE bytes
COUNT_BYTES, SAMPLE = 64 << 20, 1 << 20


def lines(path: Path) -> float:
    """Lines of ``path`` (estimated from its first MiB when it is larger than COUNT_BYTES)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if size <= COUNT_BYTES:
            return float(sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b"")))
        head = fh.read(SAMPLE)
    return size / max(len(head) / max(head.count(b"\n"), 1), 1.0)


def retrieval_set(data_dir: Any, dataset: str) -> list[float] | None:
    """[documents, queries, tokens per document] of a local retrieval set (BEIR layout or named jsonl), else None."""
    if not data_dir:
        return None
    root = Path(str(data_dir)).expanduser()
    folder = next((p for p in (root / dataset, *sorted(root.glob(f"{dataset}*"))) if p.is_dir()), None)
    if folder is None:
        return None
    corpus = folder / "corpus.jsonl"
    files = [corpus] if corpus.is_file() else [p for p in folder.rglob("*.jsonl") if "train" not in p.name]
    if not files:
        return None
    docs = sum(lines(p) for p in files)
    queries = folder / "queries.jsonl"
    n_queries = lines(queries) if queries.is_file() else docs
    tokens = sum(p.stat().st_size for p in files) / BYTES_PER_TOKEN / max(docs, 1.0)
    return [docs, n_queries, tokens]


def glue_task(data_dir: Any, local: Any) -> list[float] | None:
    """[train examples, dev examples, tokens per example] of a local GLUE task (``definitions.<task>.local``)."""
    if not data_dir or local is None:
        return None
    folder = Path(str(data_dir)).expanduser() / str(local.dir)
    train = folder / str(local.train)
    devs = [folder / str(f) for f in dict(local.dev).values()]
    if not train.is_file() or not all(d.is_file() for d in devs):
        return None
    n_train, n_dev = lines(train), sum(lines(d) for d in devs)
    tokens = (train.stat().st_size + sum(d.stat().st_size for d in devs)) / BYTES_PER_TOKEN / max(n_train + n_dev, 1)
    return [n_train, n_dev, tokens]


def train_file(path: Any) -> tuple[float, float] | None:
    """(rows, tokens per row) of a local training file (triplets TSV, KD jsonl), else None."""
    p = Path(str(path)).expanduser() if path else None
    if p is None or not p.is_file():
        return None
    rows = max(lines(p) - (1 if p.suffix == ".tsv" else 0), 1.0)
    return rows, p.stat().st_size / BYTES_PER_TOKEN / rows


def documents_work(size: list[float], length_cap: int, per_word: bool) -> Work:
    """Evaluation tokens of one retrieval set of ``size`` ([documents, queries, length]), capped at ``length_cap``."""
    docs, queries, tokens = tokens_of(size, length_cap, per_word)
    w = Work(short=queries * cost_data()["query_tokens"])
    w.add_tokens(docs * tokens, tokens)
    return w


def tokens_of(size: list[float], length_cap: int, per_word: bool) -> tuple[float, float, float]:
    """(documents, queries, tokens per document at most ``length_cap``) of a size in words or tokens."""
    docs, queries, length = size
    return docs, queries, min(length * (cost_data()["tokens_per_word"] if per_word else 1.0), length_cap)


def retrieval_work(datasets: list[str], cap: int, data_dir: Any = None, catalog: Any = None,
                   memory: Callable[[float, float, float], float] | None = None) -> Work:
    """Evaluation tokens of ``datasets`` (local files, else the cost file's); with ``memory``, host GB of each."""
    c, w = cost_data(), Work()
    for d in datasets:
        entry = (catalog or {}).get(d) or {}
        size, per_word = retrieval_set(data_dir, str(entry.get("local") or d)), False
        if size is not None:
            w.local += 1
        else:
            w.published += 1
            table = next((t for t in (c["beir"], c["code"], c) if d in t), None)   # beir sizes are in words
            size, per_word = (table[d], table is c["beir"]) if table is not None else (None, False)
        if size is not None:
            w += documents_work(size, cap, per_word=per_word)
            if memory is not None:
                w.host[d] = memory(*tokens_of(size, cap, per_word))
    return w
