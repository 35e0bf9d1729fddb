"""Where ColBERT's distillation data comes from (``task.train_data.source``, :mod:`harness.data.kd`): one class per
source, found in one registry. Each says what enters the run identity, what a record shows, what is checked before
any work, and how the samples load."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.errors import DataError, HarnessError
from harness.registry import Registry
from harness.results import file_sha
from harness.work import Work, cost_data

#: the KD file and the files it may join
FILE_KEYS = ("path", "queries_path", "documents_path")


class HubKd:
    """A hub dataset of queries, documents and teacher scores (PyLate's MS MARCO KD set by default)."""

    def identity(self, s: Any) -> dict[str, Any]:
        return {}

    def describe(self, s: Any) -> dict[str, Any]:
        return asdict(s.train_data.hub)

    def check(self, s: Any) -> None:
        from harness.data.kd import HUB_FIX
        from harness.models import require_hub

        require_hub(f"KD training set {s.train_data.hub.hub_path!r}", HUB_FIX)

    def name(self, d: Any) -> str:
        return str(d.hub.hub_path)

    def work(self, s: Any) -> Work:
        return kd_work(s, None)

    def load(self, s: Any, model: Any) -> tuple[Any, dict[str, Any]]:
        return load(self, s)

    def read(self, d: Any, seed: int) -> tuple[Any, dict[str, Any]]:
        from harness.data import kd

        return kd.load_kd_hub(d.hub.hub_path, d.hub.hub_revision, n_ways=d.n_ways, max_samples=d.max_samples, seed=seed)


class FileKd:
    """A local JSONL or Parquet KD file (and the queries and documents files it joins); their hashes enter the
    run identity."""

    def identity(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {f"task.train_data.{k}": {"sha256": file_sha(getattr(d, k))} for k in FILE_KEYS if getattr(d, k)}

    def describe(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {**{k: getattr(d, k) for k in FILE_KEYS if getattr(d, k)}, "file_sha": file_sha(d.path)}

    def check(self, s: Any) -> None:
        d = s.train_data
        _path(d)
        for key in FILE_KEYS:
            path = getattr(d, key)
            if path and not Path(path).expanduser().is_file():
                raise DataError(f"KD training file not found: {path} (task.train_data.{key}). Point it at an "
                                "existing file (see docs/retrieval.md, Multi-vector retrieval, for the layouts).")

    def name(self, d: Any) -> str:
        return _path(d)

    def work(self, s: Any) -> Work:
        from harness.data.sizes import train_file

        rows = train_file(s.train_data.path)
        w = kd_work(s, rows)
        w.local += rows is not None
        return w

    def load(self, s: Any, model: Any) -> tuple[Any, dict[str, Any]]:
        return load(self, s)

    def read(self, d: Any, seed: int) -> tuple[Any, dict[str, Any]]:
        from harness.data import kd

        return kd.load_kd_file(_path(d), n_ways=d.n_ways, queries_path=d.queries_path,
                               documents_path=d.documents_path, max_samples=d.max_samples, seed=seed)


def load(source: Any, s: Any) -> tuple[Any, dict[str, Any]]:
    """``source``'s samples for the settings ``s`` (every query and document id checked) and their facts."""
    from harness.console import step

    d = s.train_data
    if d.n_ways < 1:
        raise HarnessError(f"task.train_data.n_ways must be >= 1, got {d.n_ways}.")
    with step(f"KD data: reading, validating and joining {source.name(d)}",
              starting="every query and document id is checked") as done:
        data, facts = source.read(d, s.training.train_seed)
        done.outcome = f"{len(data):,} samples, {d.n_ways}-way"
    return data, facts


def kd_work(s: Any, rows: tuple[float, float] | None) -> Work:
    """Training tokens of the samples (a file's rows, else ``max_samples``; at most ``max_samples``): a query and
    its ``n_ways`` documents each, at most ``train_document_length`` tokens (the cost file's document length)."""
    c, d, t = cost_data(), s.train_data, s.training
    per = c["query_tokens"] + int(d.n_ways) * min(c["kd_doc_tokens"], int(t.train_document_length))
    n = rows[0] if rows else float(d.max_samples or 0)
    cap = float(d.max_samples) if d.max_samples else None
    return Work(train=min(n, cap or n) * per * int(t.epochs))


def _path(d: Any) -> str:
    if not d.path:
        raise HarnessError("task.train_data.source=file needs task.train_data.path=<KD JSONL or Parquet>.")
    return str(d.path)


#: ``task.train_data.source`` -> the source
KD_SOURCES: Registry[Any] = Registry("KD data source", {"hub": HubKd(), "file": FileKd()},
                                     hint="Set task.train_data.source to one of them.")
