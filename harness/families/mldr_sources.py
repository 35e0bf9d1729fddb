"""Where MLDR's in-domain training rows come from (``task.train_data.source``): one class per source, found in one
registry. Each says what enters the run identity, what a record shows, what is checked before any work, and how
the rows load (:mod:`harness.data.mldr`)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.errors import DataError, HarnessError
from harness.families.retrieval import entries
from harness.registry import Registry
from harness.results import file_sha
from harness.work import Work, cost_data


class HubMldr:
    """``Shitao/MLDR``'s English train file at a pinned revision."""

    def identity(self, s: Any) -> dict[str, Any]:
        return {}

    def describe(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {**asdict(d.hub), "hub_dir": d.hub_dir}

    def check(self, s: Any) -> None:
        from harness.models import require_hub

        d = s.train_data
        require_hub(f"MLDR training data {d.hub.hub_path}@{d.hub.hub_revision} ({d.hub_dir}/{d.split}.jsonl.gz)",
                    "Offline, train on a local folder in MLDR's layout: task.train_data.source=local "
                    "task.train_data.path=<folder with train.jsonl> (null: the mldr dataset's folder under "
                    "task.data_dir).")

    def load(self, s: Any, model: Any) -> tuple[Any, dict[str, Any]]:
        return load(s, model)

    def work(self, s: Any) -> Work:
        return work(s)

    def rows(self, s: Any) -> Any:
        from harness.data import mldr

        d = s.train_data
        return mldr.train_rows_hub(d.hub.hub_path, d.hub.hub_revision, d.hub_dir, d.split)


class LocalMldr:
    """A folder in MLDR's layout (``task.train_data.path``, else the evaluated mldr dataset's folder); the train
    file's hash enters the run identity."""

    def folder(self, s: Any) -> Path:
        d = s.train_data
        if d.path:
            return Path(d.path).expanduser()
        mldr_sets = [e for e in entries(s) if e.kind == "mldr"]
        if not s.data_dir or not mldr_sets:
            raise HarnessError("task.train_data.source=local needs a folder: task.train_data.path=<folder in MLDR's "
                               "layout>, or task.data_dir with an mldr dataset whose folder holds train.jsonl.")
        from harness.data.catalog import local_folder

        return local_folder(s.data_dir, mldr_sets[0])

    def identity(self, s: Any) -> dict[str, Any]:
        from harness.data import mldr

        path = mldr.split_file(self.folder(s), s.train_data.split)
        return {"task.train_data.path": {"sha256": file_sha(path)}}

    def describe(self, s: Any) -> dict[str, Any]:
        return {"path": str(self.folder(s)), "file_sha": self.identity(s)["task.train_data.path"]}

    def check(self, s: Any) -> None:
        from harness.data import mldr

        folder, split = self.folder(s), s.train_data.split
        if mldr.split_file(folder, split) is None:
            raise DataError(f"MLDR training file not found: {folder}/{split}.jsonl(.gz). Point "
                            "task.train_data.path at a folder in MLDR's layout holding it.")

    def load(self, s: Any, model: Any) -> tuple[Any, dict[str, Any]]:
        return load(s, model)

    def work(self, s: Any) -> Work:
        return work(s)

    def rows(self, s: Any) -> Any:
        from harness.data import mldr

        rows, _ = mldr.train_rows_local(self.folder(s), s.train_data.split)
        return rows


def load(s: Any, model: Any) -> tuple[Any, dict[str, Any]]:
    """The training triplets of the settings' source (each query's positive with its first N negatives, a seeded
    sample) and their counts, for the record."""
    import logging

    from harness.data import mldr

    d = s.train_data
    rows = MLDR_SOURCES.lookup(d.source).rows(s)
    ds, stats = mldr.triplets(rows, d.num_negatives, d.max_samples, s.training.train_seed)
    logging.getLogger(__name__).info("MLDR training data: %s", stats)
    return ds, stats


def work(s: Any) -> Work:
    """Training tokens of MLDR's training queries (the local mldr-en folder's, else the cost file's count), each
    with its positive and ``num_negatives`` documents of at most ``max_seq_length`` tokens."""
    from harness.data.sizes import retrieval_set

    c, s = cost_data(), s
    d, t = s.train_data, s.training
    docs = min(c["mldr-en"][2], int(t.max_seq_length)) * (int(d.num_negatives) + 1)
    local = retrieval_set(s.data_dir, str((s.catalog.get("mldr-en") or {}).get("local")))
    queries = local[1] if local else c["mldr_train_queries"]
    return Work(train=queries * (docs + c["query_tokens"]) * int(t.epochs))


#: ``task.train_data.source`` -> the source
MLDR_SOURCES: Registry[Any] = Registry("MLDR training source", {"hub": HubMldr(), "local": LocalMldr()},
                                       hint="Set task.train_data.source to one of them.")
