"""The stages a task composes, each with its protocol version. A version enters the identity of every run that
uses the stage: bump it when a change to the stage's code changes its numbers, and every record computed before
the change stops counting as finished (it is recomputed on the next run; the old record stays for comparison).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.registry import Registry


@dataclass(frozen=True)
class Stage:
    """One stage: its protocol version, what it does, and (a user's stage only) where its code lives, as
    ``module:attribute``; the harness's own stages' code is :data:`harness.stages.CODE`. A ``retrieve.<name>``
    stage's code is ``function(ctx, model, cache_identity) -> Retriever`` for ``task.retriever: <name>``: a new
    retriever is its module plus this one registration."""

    version: int
    code: str = ""
    what: str = ""


STAGES: Registry[Stage] = Registry("stage", {
    "load.encoder": Stage(1, what="a SentenceTransformer from a hub id, folder or package (harness.models); pruning"),
    "load.colbert": Stage(1, what="a PyLate ColBERT model"),
    "load.classifier": Stage(1, what="a sequence classifier (fresh head): harness.training.classification"),
    # a GLUE point that starts from another run's weights (MNLI's chosen checkpoint, task.init_from) computes this
    # stage too (its version enters only those points' identities); 1: the encoder alone was carried (before the
    # fifth fidelity pass, never hashed), 2: every weight but the final classifier, as the authors carried it
    "load.chain": Stage(2, what="the weights a chained GLUE point starts from: all but classifier.*, "
                              "harness.training.classification.carry_weights"),
    "train.dense": Stage(2, what="sentence-transformers (Cached)MNRL on triplets (harness.training.seeding)"),
    "train.kd": Stage(1, what="PyLate KL distillation from teacher scores (harness.training.seeding)"),
    "train.glue": Stage(2, what="Trainer; authors (last eval, seeds) or best_epoch: harness.training.classification"),
    "retrieve.single_vector": Stage(1, what="encode + exact search (cosine, top-k): harness.evaluation.dense"),
    "retrieve.multi_vector": Stage(1, what="token embeddings + exact MaxSim or PLAID: harness.evaluation.multivector"),
    "score.ir": Stage(1, what="trec_eval metrics (pytrec_eval), self-matches dropped: harness.evaluation.ir_metrics"),
    "score.glue": Stage(1, what="GLUE dev metrics (sklearn/scipy): harness.glue_metrics"),
    "measure.throughput": Stage(1, what="timed passes, max-batch probes (Table 2): harness.evaluation.throughput"),
    "evaluate.mteb": Stage(1, what="mteb's own evaluation of a task by name"),
}, hint="Declare it in harness/specs/stages.py.")


def versions(names: Iterable[str]) -> dict[str, int]:
    """``{stage: version}`` for ``names`` (what a run identity holds); an unknown stage is an error."""
    return {name: STAGES.lookup(name).version for name in names}
