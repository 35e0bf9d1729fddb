"""One retrieval run's computation, from its plan alone: load, fine-tune (or reuse the finished training), build the
retriever over a corpus cache keyed by the run and the weights, evaluate each cell; records, which the runner writes."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError, TrainingDivergedError
from harness.core.results import ResultRecord
from harness.models import usable_positions
from harness.models.positions import check_length
from harness.specs.stages import code_of
from harness.tasks.retrieval import stages
from harness.tasks.runplan import Cell, RunPlan, weights_of

if TYPE_CHECKING:
    from harness.models import ModelSpec
    from harness.tasks.retrieval.retrievers.retriever import Retriever

log = logging.getLogger(__name__)

#: the marker of a finished training in its output folder (its content: the training facts of the record)
TRAIN_DONE = "train_done.json"


def trained(plan: RunPlan) -> bool:
    """This run's training already finished, on the training files as they are now."""
    return finished_training(plan) is not None


def finished_training(plan: RunPlan) -> dict[str, Any] | None:
    """What this run's finished training recorded, unless its local training files held other data then."""
    folder = plan.stages.train_dir
    marker = None if folder is None else folder / TRAIN_DONE
    if marker is None or not marker.exists():
        return None
    info = json.loads(marker.read_text())
    return info if info.get("train_files") == plan.stages.train_files else None


def load_model(plan: RunPlan) -> tuple[Any, dict[str, Any]]:
    """(model, record block) from the load stage; a source's trained weights checked against its fingerprint."""
    p, lin = plan.stages, plan.lineage
    model, block = code_of(stages.STAGES, p.load)(plan, weights_of(plan))
    if lin is not None:
        block |= {**lin.loaded(block, plan.model.path), "max_positions": usable_positions(model)}
    return model, block


def train(plan: RunPlan, model: Any, todo: Sequence[Cell]) -> dict[str, Any] | None:
    """Fine-tune ``model`` in place, or load this run's finished training; the training facts, or None."""
    p = plan.stages
    if not plan.trains:   # a run that trains has a train.* stage: checked before any work (families.retrieval.check)
        return None
    trainer = code_of(stages.STAGES, p.train)
    marker = p.train_dir / TRAIN_DONE
    done = None if plan.overwrite else finished_training(plan)
    if done is not None:
        info = done
        log.info("reusing trained model %s", info["model_dir"])
        model.load_state_dict(trainer.load_trained(plan, info["model_dir"]).state_dict())
    else:
        from harness.core.results import atomic_write_json
        from harness.models import fingerprint
        from harness.training import tracking
        from harness.training.ranks import check_devices

        # here, not in the run's up-front checks: the paper graph runs those where it submits, not on the node
        check_devices(plan.settings.training.devices, plan.device)
        t0 = time.perf_counter()
        data, facts = p.source.load(plan.settings, model)
        tracker = tracking.tracker(plan.config, run_id=todo[0].run_id, record_path=plan.record_path(todo[0]).parent,
                                   task=plan.task, model=plan.model_name)
        info = trainer.fit(plan, model, data, p.train_dir, tracker, weights_of(plan))
        info |= {**({"data": facts} if facts else {}), "train_s": time.perf_counter() - t0,
                 "fingerprint": fingerprint(info["model_dir"]), "train_files": p.train_files}
        atomic_write_json(marker, info)
    if plan.lineage is not None:
        info["fine_tuned_from"] = plan.lineage.record()
    return info


def for_inference(plan: RunPlan, model: Any, block: dict[str, Any]) -> None:
    """Ready ``model`` to encode: weights cast on CUDA, compiled where ``compile=true``; said in its block."""
    from harness.models import cast_for_inference
    from harness.models.compiled import compile_encoder, wanted
    mode = cast_for_inference(model, plan.precision, plan.device)
    compile_it = wanted(plan.config, plan.device)
    if compile_it:
        compile_encoder(model[0].auto_model)
    if mode != "fp32" or compile_it:
        block["inference"] = {"precision": plan.precision, "runs": mode, "compiled": compile_it}


def retriever(plan: RunPlan, model: Any, cache_identity: Mapping[str, Any]) -> Any:
    """The retrieve stage's retriever for ``model``; ``cache_identity`` keys its on-disk corpus cache."""
    return code_of(stages.STAGES, plan.stages.retrieve)(plan, model, cache_identity)


def cache_identity(plan: RunPlan, block: Mapping[str, Any], trained_facts: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the cached corpus encodings depend on: the run less search-only keys, the weights, the attention."""
    out = {"run": dict(plan.stages.cache_run),
           "weights": trained_facts["fingerprint"] if trained_facts else block["fingerprint"]}
    attention = (block.get("attention") or {}).get("implementation")
    if attention not in (None, "sdpa"):
        out["attention"] = attention
    runs = (block.get("inference") or {}).get("runs", "fp32")
    if runs != "fp32" and not runs.startswith("autocast"):  # bf16 weights encode unlike autocast over fp32
        out["cast"] = runs
    return out


def sharded(plan: RunPlan, retriever: Any) -> Any:
    """``retriever``, evaluated shard by shard where ``task.shards`` asks, or over a training's GPUs."""
    from harness.tasks.retrieval import devices
    from harness.tasks.retrieval.retrievers.shards import ShardedRetriever
    shards = plan.settings.sharding
    if not shards.sharded:
        if not plan.trains or plan.settings.training.devices == 1:
            return retriever
        spread = devices.over_training_devices(plan, retriever, run_part)   # trained on N GPUs: evaluated over them
        return retriever if spread is None else ShardedRetriever(retriever, *spread)
    if not hasattr(retriever, "search_shard"):
        raise HarnessError(f"task.shards: {type(retriever).__name__} cannot be sharded (single-vector retrieval "
                           "and exact MaxSim can)")
    launch = devices.launcher(plan, run_part) if shards.shard_launcher == "devices" else None
    return ShardedRetriever(retriever, shards, launch)


def run(plan: RunPlan, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
    """Load -> (train) -> retrieve -> score each cell of ``todo``: one record per dataset (and composite member)."""
    from harness.tasks.retrieval import score
    model, block = load_model(plan)
    try:
        facts = train(plan, model, todo)
    except TrainingDivergedError as exc:
        for cell in todo:
            yield plan.header.failed(cell, exc, model=block, split=plan.settings.split or cell.payload.split)
        raise
    if facts:
        block["trained"] = facts
    for_inference(plan, model, block)
    built = sharded(plan, retriever(plan, model, cache_identity(plan, block, facts)))
    tokenizer = model[0].tokenizer
    for cell in todo:
        try:
            yield from score.evaluate_cell(plan, cell, built, block, tokenizer)
        except HarnessError as exc:
            log.error("%s/%s failed: %s", plan.task, cell.dataset, exc)
            yield plan.header.failed(cell, exc, model=block, split=plan.settings.split or cell.payload.split)


def run_part(plan: RunPlan, todo: Sequence[Cell]) -> None:
    """A shard job: shard ``task.shard`` of every dataset of ``todo`` into the cache (no record, no lock)."""
    from harness.tasks.retrieval import score
    from harness.tasks.retrieval.retrievers.retriever import search_width
    from harness.tasks.retrieval.retrievers.shards import ShardedRetriever
    shard = plan.settings.sharding.shard
    model, block = load_model(plan)
    facts = train(plan, model, todo) if plan.trains and trained(plan) else None
    if plan.trains and facts is None:
        raise HarnessError(f"shard job {shard}: this run's training has not finished; shards evaluate a trained "
                           "model")
    for_inference(plan, model, block)
    built = sharded(plan, retriever(plan, model, cache_identity(plan, block, facts)))
    assert isinstance(built, ShardedRetriever)
    for cell in todo:
        for entry in list(cell.payload.members.values()) or [cell.payload]:
            ds = score.loaded(plan, entry)
            score.prepare(plan, built, entry)
            built.index(ds)
            queries = list(ds.evaluated_queries().values())
            built.run_shard(int(str(shard)), queries, search_width(plan.settings.ranking.top_k,
                                                                   entry.ignore_identical_ids))


# -------------------------------------------------------------------------------- the load.* and retrieve.* stages
# load.<name>(plan, spec) -> (model, the record's model block), refusing lengths no position can encode;
# retrieve.<name>(plan, model, cache identity) -> a Retriever (task.retriever: <name>).
def encoder(plan: RunPlan, spec: ModelSpec) -> tuple[Any, dict[str, Any]]:
    """A SentenceTransformer, and the lengths it checks (``task.max_length``; training: ``max_seq_length``)."""
    from harness.models import load_sentence_transformer
    model, block = load_sentence_transformer(spec, device=plan.device)
    s = plan.settings
    check_positions(model, s.evaluation.max_length, spec.name, "task.max_length")
    if plan.trains:
        check_positions(model, s.training.max_seq_length, spec.name, "task.max_seq_length")
    return model, block


def colbert(plan: RunPlan, spec: ModelSpec) -> tuple[Any, dict[str, Any]]:
    """A PyLate ColBERT (a plain encoder gets an ``embedding_size`` projection seeded by the run's seed)."""
    from harness.tasks.retrieval.retrievers.colbert_model import load_colbert
    return load_colbert(spec, device=plan.device, embedding_size=plan.settings.multi_vector.embedding_size,
                        seed=plan.seed)


def check_positions(model: Any, length: int, name: str, key: str) -> None:
    """A length above the model's positions cannot be encoded: say so, and the largest that works."""
    check_length(usable_positions(model), length, name, key)


def single_vector(plan: RunPlan, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """DPR: the SentenceTransformer's embeddings, cached, exact search (``task.similarity``)."""
    from harness.tasks.retrieval.retrievers.dense import DenseRetriever, DenseSettings
    from harness.tasks.retrieval.retrievers.retriever import TitleConvention
    s = plan.settings
    dense = DenseRetriever(model, DenseSettings(
        device=plan.device, precision=plan.precision, batching=s.batching, evaluation=s.evaluation,
        cache_dir=str(plan.layout.embeddings()) if s.embedding_cache else None,
    ), cache_identity)
    convention = getattr(s, "title_convention", None)
    return TitleConvention(dense, convention) if convention else dense


def multi_vector(plan: RunPlan, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """ColBERT: token embeddings, PLAID or exact MaxSim, documents up to the task's document length."""
    from harness.tasks.retrieval.retrievers.multivector import MultiVectorRetriever, MultiVectorSettings
    s = plan.settings
    return MultiVectorRetriever(model, MultiVectorSettings(
        device=plan.device, precision=plan.precision, batching=s.batching, search=s.multi_vector.search,
        maxsim_chunk_tokens=s.multi_vector.maxsim_chunk_tokens, document_length=s.document_length,
        cache_dir=str(plan.layout.colbert_tokens()) if s.embedding_cache else None,
    ), cache_identity)
