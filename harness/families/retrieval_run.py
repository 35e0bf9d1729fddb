"""One retrieval run's computing half: load the weights (``load.*``), fine-tune them or reuse the finished training
(``train.*``, marked done by ``train_done.json``), build the retriever (``retrieve.*``) over a corpus cache keyed by
the run's identity and the weights, and evaluate each cell (``score.ir``: :mod:`~harness.families.retrieval_eval`).
The runner (:class:`~harness.families.retrieval.RetrievalFamily`) plans; each stage gets a typed
:class:`~harness.families.context.StageContext`, never the runner."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, TrainingDivergedError
from harness.families.base import Cell
from harness.families.context import RetrievalTask, StageContext
from harness.identity import drop
from harness.results import ResultRecord
from harness.specs import stages

log = logging.getLogger(__name__)

#: the marker of a finished training in its output folder (its content: the training facts of the record)
TRAIN_DONE = "train_done.json"


class RetrievalRun:
    """The stages of one run of ``family``, composed: load -> (train) -> retrieve -> score each cell."""

    def __init__(self, family: RetrievalTask) -> None:
        self.family = family
        self.loaded_spec: Any = None    # the model spec the load stage loaded (set by load_model)

    @cached_property
    def ctx(self) -> StageContext[Any]:
        return self.family.context()

    def code(self, kind: str) -> Any:
        """The code of the run's ``<kind>.*`` stage."""
        return stages.code_of(str(self.family.stage(kind)))

    # ---------------------------------------------------------------------------------------- training markers
    def trainer(self) -> Any:
        f = self.family
        if f.trainer is None:
            raise HarnessError(f"task={f.name} trains (task.train=true) but its spec lists no train.* stage: add "
                               "one (e.g. train.dense) to spec.stages, or set task.train=false.")
        return f.trainer

    def train_dir(self, todo: Sequence[Cell]) -> Path:
        """Where this run's trained model goes (``train_done.json`` marks it finished): the trainer says its key."""
        key = self.trainer().key(todo[0], self.family.train_keys())
        return self.ctx.layout.trained_model(self.ctx.task, self.ctx.model, key)

    def trained(self, todo: Sequence[Cell]) -> bool:
        """This run's training already finished (its model is reused, its data not read)."""
        return (self.train_dir(todo) / TRAIN_DONE).exists()

    # ---------------------------------------------------------------------------------------- the stages
    def load_model(self) -> tuple[Any, dict[str, Any]]:
        """(model, the record's model block) from the load stage; with a source, its trained weights, checked
        against the fingerprint that run recorded. Fails fast, naming the local alternative, when the hub is
        needed and unreachable."""
        f, lin = self.family, self.family.lineage
        spec = replace(f.spec, path=lin.model_dir) if lin is not None and lin.model_dir else f.spec
        model, block = self.code("load")(self.ctx, spec)
        self.loaded_spec = spec     # what the ranks of task.devices load the run's weights as
        if lin is not None:
            if lin.model_dir and lin.fingerprint and block["fingerprint"] != lin.fingerprint:
                raise HarnessError(
                    f"the weights in {lin.model_dir} changed since task={lin.task} run {lin.run_id} recorded them "
                    f"(fingerprint {block['fingerprint']} != {lin.fingerprint}); re-run that configuration or pass "
                    "the directory as model.path=<dir> with task.source.run=null."
                )
            from harness.models import usable_positions

            block |= {"path": f.spec.path, "lineage": lin.record(), "max_positions": usable_positions(model)}
        return model, block

    def train(self, model: Any, todo: Sequence[Cell]) -> dict[str, Any] | None:
        """Fine-tune ``model`` in place when the run trains, or load this run's finished training (unless
        ``overwrite``; e.g. after a pre-emption during evaluation); returns the training facts for the record
        (``train_s`` and the trained weights' ``fingerprint`` included), or None."""
        f = self.family
        if not f.trains:
            return None
        trainer = self.trainer()
        out_dir = self.train_dir(todo)
        marker = out_dir / TRAIN_DONE
        if marker.exists() and not f.cfg.overwrite:
            info = json.loads(marker.read_text())
            log.info("reusing trained model %s", info["model_dir"])
            model.load_state_dict(trainer.load_trained(self.ctx, info["model_dir"]).state_dict())
        else:
            from harness.models import fingerprint
            from harness.results import atomic_write_json
            from harness.training.launch import check_devices

            # here, not in the run's up-front checks: the paper graph runs those where it submits, not on the node
            check_devices(self.ctx.settings.training.devices, self.ctx.device)
            t0 = time.perf_counter()
            data, facts = f.training_source.load(f, model)
            info = trainer.fit(self.ctx, model, data, facts, out_dir, f.tracker(todo[0]), self.loaded_spec)
            info |= {"train_s": time.perf_counter() - t0, "fingerprint": fingerprint(info["model_dir"])}
            atomic_write_json(marker, info)
        if f.lineage is not None:
            info["fine_tuned_from"] = f.lineage.record()
        return info

    def retriever(self, model: Any, cache_identity: Mapping[str, Any]) -> Any:
        """The retrieve stage's retriever for ``model``; ``cache_identity`` keys its on-disk corpus cache."""
        return self.code("retrieve")(self.ctx, model, cache_identity)

    def cache_identity(self, todo: Sequence[Cell], block: Mapping[str, Any],
                       trained: Mapping[str, Any] | None) -> dict[str, Any]:
        """What the cached corpus encodings depend on: the run (less its search-only keys), the weights, and the
        attention ``auto`` resolved to where it is not padded sdpa (the unpadded GPU path runs attention in bf16:
        its embeddings are never handed to a padded run, or back)."""
        out = {"run": drop(todo[0].identity, self.family.cache_exclude()),
               "weights": trained["fingerprint"] if trained else block["fingerprint"]}
        attention = (block.get("attention") or {}).get("implementation")
        if attention not in (None, "sdpa"):
            out["attention"] = attention
        return out

    # ---------------------------------------------------------------------------------------- running
    def run(self, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
        from harness.families import retrieval_eval

        f = self.family
        model, block = self.load_model()
        try:
            trained = self.train(model, todo)
        except TrainingDivergedError as exc:
            for cell in todo:
                yield f.failed(cell, exc, model=block, split=f.settings.split or cell.payload.split)
            raise
        if trained:
            block["trained"] = trained
        retriever = retrieval_eval.sharded(f, self.retriever(model, self.cache_identity(todo, block, trained)))
        tokenizer = model[0].tokenizer
        for cell in todo:
            try:
                yield from retrieval_eval.evaluate_cell(f, cell, retriever, block, tokenizer)
            except HarnessError as exc:
                log.error("%s/%s failed: %s", f.name, cell.dataset, exc)
                yield f.failed(cell, exc, model=block, split=f.settings.split or cell.payload.split)

    def run_part(self, todo: Sequence[Cell]) -> None:
        """A shard job: shard ``task.shard`` of every dataset of ``todo`` into the cache (no record, no run lock: the
        shards of one run compute side by side)."""
        from harness.evaluation.retriever import search_width
        from harness.evaluation.shards import ShardedRetriever
        from harness.families import retrieval_eval

        f = self.family
        shard = f.settings.sharding.shard
        model, block = self.load_model()
        trained = self.train(model, todo) if f.trains and self.trained(todo) else None
        if f.trains and trained is None:
            raise HarnessError(f"shard job {shard}: this run's training has not finished; shards evaluate a trained "
                               "model")
        retriever = retrieval_eval.sharded(f, self.retriever(model, self.cache_identity(todo, block, trained)))
        assert isinstance(retriever, ShardedRetriever)
        for cell in todo:
            for entry in list(cell.payload.members.values()) or [cell.payload]:
                ds = retrieval_eval.loaded(f, entry)
                retrieval_eval.prepare(f, retriever, entry)
                retriever.index(ds)
                queries = list(ds.evaluated_queries().values())
                retriever.run_shard(int(str(shard)), queries,
                                    search_width(f.settings.ranking.top_k, entry.ignore_identical_ids))
