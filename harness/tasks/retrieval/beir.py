"""``task=beir`` (and nanobeir): single-vector (DPR) retrieval as the paper ran it (section 3.1.2, appendix E.2):
fine-tune on MS MARCO hard negatives (``train.dense``), then nDCG@10 on the 15 BEIR sets; a new source of training
triplets is one class and one entry in :data:`TRIPLET_SOURCES`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from harness.core.errors import DataError, HarnessError
from harness.core.registry import Registry
from harness.core.results import file_sha
from harness.core.typed import at_least, choices, count, excluded, flat
from harness.core.work import Work, cost_data
from harness.tasks.retrieval.planner import Resolved, RetrievalKind, RetrievalSettings, RowSource, data_spec
from harness.tasks.retrieval.settings import SingleVectorEval
from harness.training.settings import DenseTraining, TrainRows


class HubTriplets(RowSource):
    """The paper's MS MARCO hard-negative triplets from the hub (a pinned revision, a seeded sample)."""

    hub = "DPR training data {d.hub_path}@{d.hub_revision}"
    offline = ("Offline, train on a local file: task.train_data.source=file task.train_data.path=<triplets "
               ".tsv/.jsonl>, or mine from a local BEIR train split: task.train_data.source=beir "
               "task.train_data.dataset=<name> task.data_dir=<dir>.")

    def describe(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {"hub_path": d.hub_path, "hub_config": d.hub_config, "hub_revision": d.hub_revision,
                "max_samples": d.max_samples, "split_seed": d.split_seed}

    def work(self, s: Any) -> Work:
        return sampled_work(s)

    def load(self, s: Any, model: Any) -> tuple[Any, None]:
        from harness.tasks.retrieval.data import triplets
        d = s.train_data
        return triplets.load_hub_triplets(str(d.hub_path), str(d.hub_config), d.hub_revision, d.max_samples,
                                          d.split_seed), None


class FileTriplets(RowSource):
    """A local TSV/CSV/JSONL of (query, positive, negative) rows; its content hash enters the run identity."""

    hashes_files = True

    def identity(self, s: Any) -> dict[str, Any]:
        return {"task.train_data.path": {"sha256": file_sha(s.train_data.path)}}

    def files(self, s: Any) -> list[Path]:
        return existing([s.train_data.path])

    def describe(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {"path": d.path, "file_sha": file_sha(d.path), "max_samples": d.max_samples, "split_seed": d.split_seed}

    def check(self, s: Any) -> None:
        path = _path(s.train_data)
        if not Path(path).expanduser().is_file():
            raise DataError(f"training triplets not found: task.train_data.path={path}. Point it at a "
                            ".tsv/.csv/.jsonl file of (query, positive, negative) rows.")

    def work(self, s: Any) -> Work:
        """The file's rows (at most ``max_samples``) at its own tokens per row."""
        from harness.data.sizes import train_file
        d = s.train_data
        rows = train_file(d.path)
        if rows is None:
            return sampled_work(s)
        cap = float(d.max_samples) if d.max_samples else None
        return Work(train=min(rows[0], cap or rows[0]) * rows[1] * int(s.training.epochs), local=1)

    def load(self, s: Any, model: Any) -> tuple[Any, None]:
        from harness.tasks.retrieval.data import triplets
        d = s.train_data
        return triplets.sample(triplets.load_triplets_file(_path(d)), d.max_samples, d.split_seed), None


class BeirMined(RowSource):
    """(query, positive) pairs from a local BEIR train split, hard negatives mined with the model being trained."""

    def identity(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {"task.train_data.data_spec": data_spec(s, self.entry(s))} if d.dataset else {}

    def describe(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {"dataset": d.dataset, "split": d.split, "num_negatives": d.num_negatives, "range_min": d.range_min,
                "range_max": d.range_max}

    def files(self, s: Any) -> list[Path]:
        """The train split's files in the dataset's local folder (its corpus, queries and qrels)."""
        from harness.tasks.retrieval.data.catalog import KINDS
        from harness.tasks.retrieval.data.reads import entry_files
        found = entry_files(self.entry(s), s.data_dir, s.train_data.split, KINDS.lookup) if s.train_data.dataset \
            else None
        return found[1] if found else []

    def entry(self, s: Any) -> Any:
        from harness.tasks.retrieval.data.catalog import resolve_entries
        d = s.train_data
        if not d.dataset:
            raise HarnessError("task.train_data.source=beir needs task.train_data.dataset=<BEIR name with a train "
                               "split>")
        (entry,) = resolve_entries([d.dataset], s.catalog)
        return entry

    def check(self, s: Any) -> None:
        from harness.tasks.retrieval.data.catalog import check_local
        d = s.train_data
        entry = self.entry(s)
        if not s.data_dir:
            raise DataError(f"task.train_data.source=beir reads {d.dataset}'s {d.split} split from a local folder: "
                            f"pass task.data_dir=<dir containing {entry.local or entry.name}/>.")
        check_local(entry, s.data_dir, d.split)

    def work(self, s: Any) -> Work:
        return sampled_work(s)

    def load(self, s: Any, model: Any) -> tuple[Any, None]:
        from harness.tasks.retrieval.data import triplets
        from harness.tasks.retrieval.data.catalog import load_entry
        d = s.train_data
        ds = load_entry(self.entry(s), data_dir=s.data_dir, split=d.split, strict_qrels=s.strict_qrels)
        return triplets.mine_from_beir(ds, model, num_negatives=d.num_negatives, range_min=d.range_min,
                                       range_max=d.range_max), None


def sampled_work(s: Any) -> Work:
    """Training tokens of ``max_samples`` triplets at the cost file's tokens per triplet."""
    d, t = s.train_data, s.training
    return Work(train=float(d.max_samples or 0) * cost_data()["dpr_sample_tokens"] * int(t.epochs))


def existing(paths: list[Any]) -> list[Path]:
    """The files of ``paths`` that exist (a missing one is reported by the source's check, before any work)."""
    return [Path(p).expanduser() for p in paths if p and Path(p).expanduser().is_file()]


def _path(d: Any) -> str:
    if not d.path:
        raise HarnessError("task.train_data.source=file needs task.train_data.path=<triplets .tsv/.csv/.jsonl>")
    return str(d.path)


#: ``task.train_data.source`` -> the source
TRIPLET_SOURCES: Registry[Any] = Registry("training data source", {
    "hub": HubTriplets(), "file": FileTriplets(), "beir": BeirMined(),
}, hint="Set task.train_data.source to one of them.")


@dataclass(kw_only=True)
class TrainData(TrainRows):
    """Where DPR training triplets come from: the hub's MS MARCO set, a local file, or mined from a BEIR train split."""

    sources: ClassVar[Registry[Any]] = TRIPLET_SOURCES
    source: str = choices("hub", "file", "beir")
    hub_path: str | None
    hub_config: str | None
    hub_revision: str | None
    max_samples: int | None = count(null="every row")
    split_seed: int                     # picks the rows (the authors' split); task.train_seed seeds training
    path: str | None
    dataset: str | None
    split: str
    num_negatives: int = count()
    range_min: int = at_least(0)
    range_max: int = count()


#: the training keys a recipe (``task.recipes.<name>``) may name: those the DPR recipes differ in
RECIPE_KEYS = ("batch_size", "gradient_accumulation_steps", "mini_batch_size", "max_seq_length")
#: why ``task.recipes`` is left out of the run identity
RECIPES = "names for training values the run id hashes as task.batch_size, ... themselves (records: details.recipe)"


def check_recipes(recipes: dict[str, Any]) -> None:
    """Each ``task.recipes`` entry names only :data:`RECIPE_KEYS`, else one line naming the key."""
    for name, values in recipes.items():
        odd = sorted(set(values or {}) - set(RECIPE_KEYS))
        if odd or not values:
            raise HarnessError(f"task.recipes.{name} names {odd or 'no value'}: a recipe lists values of "
                               f"{', '.join(RECIPE_KEYS)} (conf/task/beir.yaml)")


def recipe_of(s: Any) -> str:
    """The first ``task.recipes`` entry whose every value this run's training has, else ``custom``."""
    have = {k: getattr(s.training, k) for k in RECIPE_KEYS}
    return next((name for name, values in s.recipes.items() if all(have[k] == v for k, v in values.items())), "custom")


@dataclass(kw_only=True)
class BeirSettings(RetrievalSettings):
    """task=beir's stages: ``retrieve.<retriever>`` (single-vector: its evaluation node) and ``train.dense``."""

    retriever: str                      # the retrieve.<name> stage (harness/specs/stages.py) that evaluates
    evaluation: SingleVectorEval = flat()
    training: DenseTraining = flat()
    train_data: TrainData
    recipes: dict[str, dict[str, Any]] = excluded(RECIPES)

    def __post_init__(self) -> None:
        check_recipes(self.recipes)


def evaluation(r: Resolved) -> dict[str, Any]:
    """The evaluation settings a single-vector record shows (selection and the leaderboard read them)."""
    s = r.settings
    return {"train": None, "precision": r.precision, "max_length": s.evaluation.max_length,
            "top_k": s.ranking.top_k, "max_queries": s.max_queries, "max_docs": s.max_docs}


def training(r: Resolved, data: dict[str, Any], **own: Any) -> dict[str, Any]:
    """What a trained retrieval record shows: ``train``, its settings, and the schedule at its top level (selection)."""
    t = r.settings.training
    train = {"data": data, "lr": r.lr, "epochs": t.epochs, "warmup_ratio": t.warmup_ratio, "batch_size": t.batch_size,
             "gradient_accumulation_steps": t.gradient_accumulation_steps, **own, "seed": t.train_seed}
    return {"train": train, "lr": r.lr, "epochs": t.epochs, "batch_size": t.batch_size,
            "gradient_accumulation_steps": t.gradient_accumulation_steps, "seed": t.train_seed}


def dense_training(r: Resolved, data: dict[str, Any]) -> dict[str, Any]:
    """The DPR training settings a record shows (``data``: what the source says of its rows)."""
    t = r.settings.training
    out = training(r, data, loss=t.loss, mini_batch_size=t.mini_batch_size, max_seq_length=t.max_seq_length)
    if t.gather_across_devices:     # another objective (in the run id): shown where it is on only
        out["train"] |= {"gather_across_devices": True, "devices": t.devices}
    return out


def hyperparameters(r: Resolved) -> dict[str, Any]:
    if not r.trains:
        return evaluation(r)
    return evaluation(r) | dense_training(r, {"source": r.settings.train_data.source, **r.data})


def details(r: Resolved) -> dict[str, Any]:
    """A trained run's record names its DPR recipe (:func:`recipe_of`); one that does not train, none."""
    return {"recipe": recipe_of(r.settings)} if r.trains else {}


BEIR = RetrievalKind(BeirSettings, hyperparameters, details=details)
