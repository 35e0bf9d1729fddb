"""``task=mldr``: long-document retrieval as the paper ran it (section 3.1.3): MLDR English, nDCG@10.

- ``task.setting=ood`` (out-of-domain): the DPR model ``task=beir`` trained on MS MARCO (``task.source``: the
  selected run, a run id, or ``model.path`` as is), evaluated with no further training.
- ``task.setting=id`` (in-domain): that model fine-tuned further on MLDR's English train set (``Shitao/MLDR``
  ``mldr-v1.0-en/train.jsonl.gz``, or a local folder in MLDR's layout), then evaluated. The paper gives no
  recipe: loss, learning rate (default: the source run's, i.e. the selected DPR LR), epochs, sequence length,
  batch and accumulation are config and recorded.

Documents are encoded up to ``task.max_length`` (the model's own maximum by default: 8,192 for ModernBERT and
GTE-en-MLM, 512 for BERT/RoBERTa/DeBERTa); a length above the model's positions is refused before any work.
Every record names its setting, retriever and training lineage; sets that record where each query's answer starts
in its document (the long-document set of source files) also get nDCG@10 before and after the truncation point.

Dense and ColBERT (the paper's MLDR OOD ColBERT column) differ only in YAML: ``task.retriever`` picks the
``retrieve.*`` stage, and the spec's ``stage_when`` the ``load.*`` stage that goes with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.errors import HarnessError
from harness.evaluation.settings import MultiVectorEval, SingleVectorEval
from harness.families import beir
from harness.families.lineage import SOURCE, SourceSettings
from harness.families.mldr_sources import MLDR_SOURCES
from harness.families.retrieval import Resolved, RetrievalKind, RetrievalSettings
from harness.registry import Registry
from harness.training.settings import DenseTraining, HubRows, TrainRows
from harness.typed import choices, count, excluded, flat


@dataclass(kw_only=True)
class MldrTrainData(TrainRows):
    """MLDR training rows (query, positive_passages, negative_passages): the hub's English train file, or a local
    folder in MLDR's layout."""

    sources: ClassVar[Registry[Any]] = MLDR_SOURCES
    source: str = choices("hub", "local")
    hub_dir: str
    hub: HubRows = flat()
    path: str | None                # local: a folder in MLDR's layout (null: the evaluated dataset's folder)
    split: str
    num_negatives: int = count()    # triplets per query: its first positive with each of its first N negatives
    max_samples: int | None = count(null="every row")   # seeded sample of training rows


@dataclass(kw_only=True)
class MldrSettings(RetrievalSettings):
    """task=beir's stages, the ColBERT evaluation of task.retriever=multi_vector (``task.multi_vector``), and MLDR's
    own keys."""

    retriever: str
    evaluation: SingleVectorEval = flat()
    training: DenseTraining = flat()    # lr null: the source run's LR, else model.dpr.lr
    train_data: MldrTrainData
    setting: str = choices("ood", "id")
    multi_vector: MultiVectorEval
    subgroups: list[str]            # query groups also scored (harness.evaluation.retriever: truncation)
    #: datasets=[files]: the source tree read as long documents
    path: str | None = excluded("the tree's root is part of the `files` catalog entry (each cell's data spec)")
    source: SourceSettings = excluded(SOURCE)
    #: not a config key here: MLDR trains when task.setting=id
    train: bool = field(default=False, init=False, metadata={"excluded": "derived from task.setting (id trains, ood "
                                                                         "does not)"})
    kept: ClassVar[tuple[str, ...]] = ("task.multi_vector.maxsim_chunk_tokens",)

    def __post_init__(self) -> None:
        self.train = self.setting == "id"

    @property
    def document_length(self) -> int:
        """Documents are encoded up to ``task.max_length`` (ColBERT: capped at the model's positions)."""
        return self.evaluation.max_length


def check(task_config: Any) -> None:
    """ColBERT on MLDR is the paper's out-of-domain column; the subgroup names are known."""
    from harness.evaluation.retriever import SUBGROUPS

    s = task_config
    if s.get("retriever") == "multi_vector" and (s.get("setting") != "ood" or s.source.get("task") != "colbert"):
        raise HarnessError(
            "task.retriever=multi_vector evaluates the ColBERT model of task=colbert on MLDR out-of-domain, as the "
            "paper did: set task.setting=ood and task.source.task=colbert (the selected ColBERT run; or "
            "task.source.run=null with model.path=<ColBERT checkpoint>)."
        )
    for name in s.get("subgroups") or ():
        SUBGROUPS.lookup(str(name))


def readable(r: Resolved) -> dict[str, Any]:
    """``setting=<ood|id>`` (with the placement suffix of the retriever: ``ood-colbert``), and the LR when training."""
    s = r.settings
    suffix = r.spec.placement.suffixes.get("retriever", {}).get(s.retriever, "")
    return {"setting": s.setting + suffix, **({"lr": r.lr} if r.trains else {})}


def hyperparameters(r: Resolved) -> dict[str, Any]:
    s = r.settings
    hp = beir.evaluation(r) | {"setting": s.setting, "source_run": r.lineage.run_id if r.lineage else None}
    if not r.trains:
        return hp
    d = s.train_data
    data = {"source": d.source, "split": d.split, "num_negatives": d.num_negatives, "max_samples": d.max_samples,
            **r.data}
    return hp | beir.dense_training(r, data)


def resolved(s: MldrSettings) -> dict[str, Any]:
    """A ColBERT run through the authors' Voyager index holds its constants (see :mod:`harness.families.colbert`)."""
    from harness.evaluation.settings import voyager_identity

    found = voyager_identity(s.multi_vector.search.index) if s.retriever == "multi_vector" else {}
    return {"task.multi_vector.voyager": found} if found else {}


MLDR = RetrievalKind(MldrSettings, hyperparameters, readable=readable, validate=check, resolved=resolved,
                     details=lambda r: {"setting": r.settings.setting})
