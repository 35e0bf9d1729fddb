"""The retrieval stages: each one's protocol version and code (:data:`STAGES`, where a new retriever is registered:
docs/layout.md), and what planning resolved for one run's stages (:class:`RetrievalStages`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.registry import Registry
from harness.specs.stages import Stage

#: a retrieval stage's name -> its version and code (a loader, trainer or retriever builder); ``load.encoder``, which
#: other protocols compose too, is :data:`harness.specs.stages.SHARED`'s
STAGES: Registry[Stage] = Registry("stage", {
    "load.colbert": Stage(1, "harness.tasks.retrieval.compute:colbert", "a PyLate ColBERT model"),
    "train.dense": Stage(2, "harness.tasks.retrieval.train:DENSE",
                         "sentence-transformers (Cached)MNRL on triplets (harness.tasks.retrieval.seeding)"),
    "train.kd": Stage(1, "harness.tasks.retrieval.train:KD",
                      "PyLate KL distillation from teacher scores (harness.tasks.retrieval.seeding)"),
    "retrieve.single_vector": Stage(1, "harness.tasks.retrieval.compute:single_vector",
                                    "encode + exact search (cosine, top-k): retrievers.dense"),
    "retrieve.multi_vector": Stage(1, "harness.tasks.retrieval.compute:multi_vector",
                                   "token embeddings + exact MaxSim or PLAID: retrievers.multivector"),
    "score.ir": Stage(1, what="trec_eval metrics (pytrec_eval), self-matches dropped: retrievers.ir_metrics"),
}, hint="Declare it in STAGES of harness/tasks/retrieval/stages.py.")


@dataclass(frozen=True, kw_only=True)
class RetrievalStages:
    """What planning resolved for one retrieval run's stages (names, sources, folders, keys, lengths, specs)."""

    load: str
    retrieve: str
    train: str | None = None
    source: Any = None                     # the train_data node's source (its ``load``), when the run trains
    train_dir: Path | None = None          # where its trained model goes (``train_done.json`` marks it finished)
    cache_run: Mapping[str, Any] = field(default_factory=dict)
    query_lengths: Mapping[str, int] | None = None
    member_specs: Mapping[str, str] = field(default_factory=dict)
    train_files: str | None = None         # the local training files' fingerprint: a finished training on others
    #                                        is not reused (harness.tasks.retrieval.compute.trained)
