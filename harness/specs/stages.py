"""The stages a task composes, each with its protocol version. A version enters the identity of every run that
uses the stage: bump it when a change to the stage's code changes its numbers, and every record computed before
the change stops counting as finished (it is recomputed on the next run; the old record stays for comparison).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.registry import Registry, load_target


@dataclass(frozen=True)
class Stage:
    """One stage: its protocol version and where its code lives. The retrieval runner calls the code of the
    ``load.*``, ``train.*`` and ``retrieve.*`` stages a run's spec lists (:mod:`harness.families.loaders`,
    :mod:`~harness.families.trainers`, :mod:`~harness.families.retrievers`); a ``retrieve.<name>`` stage's code is
    ``module:function(task, model, cache_identity) -> Retriever`` for ``task.retriever: <name>``: a new retriever
    is its module plus this one registration."""

    version: int
    code: str
    what: str


STAGES: Registry[Stage] = Registry("stage", {
    "load.encoder": Stage(1, "harness.families.loaders:encoder",
                          "a SentenceTransformer from a hub id, folder or package (harness.models); pruning"),
    "load.colbert": Stage(1, "harness.families.loaders:colbert", "a PyLate ColBERT model"),
    "load.classifier": Stage(1, "harness.training.classification", "a sequence classifier (fresh head)"),
    "train.dense": Stage(2, "harness.families.trainers:DENSE",
                         "sentence-transformers (Cached)MNRL on triplets (harness.training.dense)"),
    "train.kd": Stage(1, "harness.families.trainers:KD",
                      "PyLate KL distillation from teacher scores (harness.training.late_interaction)"),
    "train.glue": Stage(2, "harness.training.classification", "Trainer; authors (last eval, seeds) or best_epoch"),
    "retrieve.single_vector": Stage(1, "harness.families.retrievers:single_vector",
                                    "encode + exact search (cosine, top-k): harness.evaluation.dense"),
    "retrieve.multi_vector": Stage(1, "harness.families.retrievers:multi_vector",
                                   "token embeddings + exact MaxSim or PLAID: harness.evaluation.multivector"),
    "score.ir": Stage(1, "harness.evaluation.ir_metrics", "trec_eval metrics (pytrec_eval), self-matches dropped"),
    "score.glue": Stage(1, "harness.glue_metrics", "GLUE dev metrics (sklearn/scipy)"),
    "measure.throughput": Stage(1, "harness.evaluation.throughput", "timed passes, max-batch probes (Table 2)"),
    "evaluate.mteb": Stage(1, "harness.families.mteb", "mteb's own evaluation of a task by name"),
}, hint="Declare it in harness/specs/stages.py.")


def code_of(name: str) -> Any:
    """The object a stage's ``code`` names (``module:attr``), imported now."""
    return load_target(STAGES.lookup(name).code)


def versions(names: Iterable[str]) -> dict[str, int]:
    """``{stage: version}`` for ``names`` (what a run identity holds); an unknown stage is an error."""
    return {name: STAGES.lookup(name).version for name in names}
