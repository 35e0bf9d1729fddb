"""``task=mldr``: long-document retrieval as the paper ran it (section 3.1.3): MLDR English, nDCG@10. ``ood``:
task=beir's DPR model, untrained; ``id``: fine-tuned further on MLDR's train set (the paper gives no recipe: config).
Dense and ColBERT (the MLDR OOD ColBERT column) differ only in YAML: ``task.retriever`` picks the stage."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from harness.core.errors import DataError, HarnessError
from harness.core.registry import Registry
from harness.core.results import file_sha
from harness.core.typed import choices, count, excluded, flat
from harness.core.work import Work, cost_data
from harness.tasks.retrieval import beir
from harness.tasks.retrieval.planner import Resolved, RetrievalKind, RetrievalSettings, RowSource, entries
from harness.tasks.retrieval.settings import MultiVectorEval, SingleVectorEval
from harness.tasks.runplan import SOURCE, SourceSettings
from harness.training.settings import DenseTraining, HubRows, TrainRows


def mldr_load(source: Any, s: Any, model: Any) -> tuple[Any, dict[str, Any]]:
    """The MLDR sources' shared load of their ``rows``: the training triplets (a seeded sample) and their counts."""
    import logging

    from harness.tasks.retrieval.data import mldr
    d = s.train_data
    ds, stats = mldr.triplets(source.rows(s), d.num_negatives, d.max_samples, s.training.train_seed)
    logging.getLogger(__name__).info("MLDR training data: %s", stats)
    return ds, stats


def mldr_work(source: Any, s: Any) -> Work:
    """Training tokens of MLDR's queries (local mldr-en, else the cost file), each with positive and negatives."""
    from harness.data.sizes import retrieval_set
    c, d, t = cost_data(), s.train_data, s.training
    docs = min(c["mldr-en"][2], int(t.max_seq_length)) * (int(d.num_negatives) + 1)
    local = retrieval_set(s.data_dir, str((s.catalog.get("mldr-en") or {}).get("local")))
    queries = local[1] if local else c["mldr_train_queries"]
    return Work(train=queries * (docs + c["query_tokens"]) * int(t.epochs))


class HubMldr(RowSource):
    """``Shitao/MLDR``'s English train file at a pinned revision."""

    hub = "MLDR training data {d.hub.hub_path}@{d.hub.hub_revision} ({d.hub_dir}/{d.split}.jsonl.gz)"
    offline = ("Offline, train on a local folder in MLDR's layout: task.train_data.source=local "
               "task.train_data.path=<folder with train.jsonl> (null: the mldr dataset's folder under task.data_dir).")
    load, work = mldr_load, mldr_work

    def describe(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {**asdict(d.hub), "hub_dir": d.hub_dir}

    def rows(self, s: Any) -> Any:
        from harness.tasks.retrieval.data import mldr
        d = s.train_data
        return mldr.train_rows_hub(d.hub.hub_path, d.hub.hub_revision, d.hub_dir, d.split)


class LocalMldr(RowSource):
    """A folder in MLDR's layout (``task.train_data.path``, else the mldr dataset's); its train file's hash counts."""

    load, work = mldr_load, mldr_work

    def folder(self, s: Any) -> Path:
        d = s.train_data
        if d.path:
            return Path(d.path).expanduser()
        mldr_sets = [e for e in entries(s) if e.kind == "mldr"]
        if not s.data_dir or not mldr_sets:
            raise HarnessError("task.train_data.source=local needs a folder: task.train_data.path=<folder in MLDR's "
                               "layout>, or task.data_dir with an mldr dataset whose folder holds train.jsonl.")
        from harness.tasks.retrieval.data.catalog import local_folder
        return local_folder(s.data_dir, mldr_sets[0])

    hashes_files = True

    def identity(self, s: Any) -> dict[str, Any]:
        from harness.tasks.retrieval.data import mldr
        path = mldr.split_file(self.folder(s), s.train_data.split)
        return {"task.train_data.path": {"sha256": file_sha(path)}}

    def files(self, s: Any) -> list[Path]:
        from harness.tasks.retrieval.data import mldr
        return beir.existing([mldr.split_file(self.folder(s), s.train_data.split)])

    def describe(self, s: Any) -> dict[str, Any]:
        return {"path": str(self.folder(s)), "file_sha": self.identity(s)["task.train_data.path"]}

    def check(self, s: Any) -> None:
        from harness.tasks.retrieval.data import mldr
        folder, split = self.folder(s), s.train_data.split
        if mldr.split_file(folder, split) is None:
            raise DataError(f"MLDR training file not found: {folder}/{split}.jsonl(.gz). Point "
                            "task.train_data.path at a folder in MLDR's layout holding it.")

    def rows(self, s: Any) -> Any:
        from harness.tasks.retrieval.data import mldr
        rows, _ = mldr.train_rows_local(self.folder(s), s.train_data.split)
        return rows


#: ``task.train_data.source`` -> the source
MLDR_SOURCES: Registry[Any] = Registry("MLDR training source", {"hub": HubMldr(), "local": LocalMldr()},
                                       hint="Set task.train_data.source to one of them.")


@dataclass(kw_only=True)
class MldrTrainData(TrainRows):
    """MLDR training rows: the hub's English train file, or a local folder in MLDR's layout."""

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
    """task=beir's stages, the ColBERT evaluation of task.retriever=multi_vector, and MLDR's own keys."""

    retriever: str
    evaluation: SingleVectorEval = flat()
    training: DenseTraining = flat()    # lr null: the source run's LR, else model.dpr.lr
    train_data: MldrTrainData
    setting: str = choices("ood", "id")
    multi_vector: MultiVectorEval
    subgroups: list[str]            # query groups also scored (harness.tasks.retrieval.retrievers.retriever: truncation)
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
    from harness.tasks.retrieval.retrievers.retriever import SUBGROUPS
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
    """A ColBERT run through the authors' Voyager index holds its constants (see :mod:`harness.tasks.retrieval.colbert`)."""
    from harness.tasks.retrieval.settings import voyager_identity
    found = voyager_identity(s.multi_vector.search.index) if s.retriever == "multi_vector" else {}
    return {"task.multi_vector.voyager": found} if found else {}


MLDR = RetrievalKind(MldrSettings, hyperparameters, readable=readable, validate=check, resolved=resolved,
                     details=lambda r: {"setting": r.settings.setting})
