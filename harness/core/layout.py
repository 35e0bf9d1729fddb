"""Where what a run writes lives (the one module that builds these paths): records under ``<paths.results>``, selections
beside them, trained models under ``<paths.outputs>/models/``, caches under ``<paths.cache>`` (:class:`RunLayout`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PathLike = str | os.PathLike


def safe_name(name: str) -> str:
    """``name`` with every character but letters, digits and ``._-`` replaced by ``_``."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def task_folder(results_dir: PathLike, task: str) -> Path:
    """Every run of every model on ``task``."""
    return Path(results_dir) / safe_name(task)


def model_folder(results_dir: PathLike, task: str, model: str) -> Path:
    """Every run of ``model`` on ``task``."""
    return task_folder(results_dir, task) / safe_name(model)


def record_path(results_dir: PathLike, task: str, model: str, run_id: str, dataset: str) -> Path:
    """The record of one (run, dataset)."""
    return model_folder(results_dir, task, model) / safe_name(run_id) / f"{safe_name(dataset)}.json"


def selection_dir(results_dir: PathLike, experiment: str | None = None) -> Path:
    """``selected/`` beside the results directory; ``selected/<experiment>/`` for one experiment's selection."""
    out = Path(results_dir).resolve().parent / "selected"
    return out / safe_name(experiment) if experiment else out


def selection_path(out_dir: PathLike, task: str, model: str) -> Path:
    """The selection file of ``task`` for ``model`` in ``out_dir``."""
    return Path(out_dir) / f"{task}-{safe_name(model)}.json"


def trained_model_dir(outputs_dir: PathLike, task: str, model: str, key: str) -> Path:
    """Where a run of ``task`` keeps the model it trained (``key``: the run id, or a training key shared by runs)."""
    return Path(outputs_dir) / "models" / safe_name(task) / safe_name(model) / safe_name(key)


@dataclass(frozen=True)
class RunLayout:
    """Where one run's files go, from the config's ``paths`` (``~`` expanded); no stage builds a path."""

    results: str
    outputs: str
    cache: Path

    @classmethod
    def of(cls, paths: Mapping[str, Any]) -> RunLayout:
        return cls(str(paths["results"]), str(paths["outputs"]), Path(str(paths["cache"])).expanduser())

    def trained_model(self, task: str, model: str, key: str) -> Path:
        return trained_model_dir(self.outputs, task, model, key)

    def file_hashes(self) -> Path:
        """The hashes of local data files, by path and stat (:mod:`harness.core.file_hash`)."""
        return self.cache / "file-hashes"

    def embeddings(self) -> Path:
        """Corpus and query embeddings of single-vector retrievers (:mod:`harness.tasks.retrieval.retrievers.embedding_cache`)."""
        return self.cache / "embeddings"

    def colbert_tokens(self) -> Path:
        """Corpus token embeddings of multi-vector retrievers (:mod:`harness.tasks.retrieval.retrievers.token_store`)."""
        return self.cache / "colbert-tokens"

    def token_counts(self) -> Path:
        """Document tokens of corpora, counted before a PLAID run loads anything (:mod:`harness.tasks.retrieval.plaid_check`)."""
        return self.cache / "token-counts"

    def glue_tokenized(self, key: str) -> Path:
        """One GLUE task's tokenised train and dev sets (``key``: model, data, length, subsample)."""
        return self.cache / "glue-tokenized" / key
