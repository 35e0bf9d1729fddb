"""Run identity fails closed: the resolved config minus an explicit exclude list. A changed model is never
skipped as done, the embedding cache follows the same identity, and a finished run loads nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.identity import GLOBAL_EXCLUDE, derived_key, drop, run_identity
from harness.run import planning
from harness.run.planning import planner_of
from harness.run.runner import run
from tests.conftest import compose
from tests.test_retrieval_runs import overrides


def cell_of(*extra: str, train: bool = False):
    cfg = compose(["task=beir", "model=all-minilm-l6-v2", "task.datasets=[scifact]", "precision=fp32",
                   f"task.train={str(train).lower()}", *extra])
    return planner_of(cfg).cells()[0]


@pytest.mark.parametrize("change", ["model.dtype=bfloat16", "model.attn_implementation=eager", "model.pooling=cls",
                                    "model.normalize=false", "model.max_length=128", "precision=bf16",
                                    "task.top_k=100", "task.similarity=dot", "+new_root_key=1"])
def test_every_setting_that_can_change_a_number_changes_the_run_id(change: str) -> None:
    assert cell_of(change).run_id != cell_of().run_id


@pytest.mark.parametrize("change", ["paths.results=/elsewhere", "overwrite=true", "run_name=x", "device=cpu",
                                    "model.name=renamed", "task.batch_tokens=999", "task.datasets=[nq]",
                                    "task.corpus_chunk_size=7", "task.lr=1e-3"])
def test_excluded_keys_do_not(change: str) -> None:
    """Only keys on an explicit exclude list (task.lr: an evaluation-only run does not train)."""
    assert cell_of(change).run_id == cell_of().run_id


def test_training_keys_count_only_when_training() -> None:
    assert cell_of("task.lr=1e-3", train=True).run_id != cell_of("task.lr=1e-4", train=True).run_id


def test_identity_is_config_minus_excludes() -> None:
    config = {"paths": {"results": "r"}, "model": {"name": "m", "dtype": "float32"}, "task": {"x": 1}, "new": 2}
    ident = run_identity(config, exclude=["task.x"], replace={"precision": "fp32"})
    assert ident == {"model": {"dtype": "float32"}, "task": {}, "new": 2, "precision": "fp32"}
    assert "paths" in GLOBAL_EXCLUDE and all(GLOBAL_EXCLUDE.values())   # every exclusion says why
    assert drop({"a": {"b": 1, "c": 2}}, ["a.b", "x.y"]) == {"a": {"c": 2}}
    assert derived_key(ident, without=["new"]) == derived_key(drop(ident, ["new"]))


def test_changed_pooling_does_not_reuse_cached_corpus_embeddings(tmp_path: Path, toy_beir: Path) -> None:
    (mean,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false", "model.pooling=mean")))
    (cls,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false", "model.pooling=cls")))
    assert cls.run_id != mean.run_id
    assert cls.details["embedding_cache_hit"] is False          # cls-pooled embeddings were computed, not reused
    assert cls.metrics != mean.metrics
    (again,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false", "model.pooling=mean", "overwrite=true")))
    assert again.details["embedding_cache_hit"] is True and again.metrics == mean.metrics


def test_changed_dtype_is_not_skipped(tmp_path: Path, toy_beir: Path) -> None:
    (fp32,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false")))
    (bf16,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false", "model.dtype=bfloat16")))
    assert bf16.run_id != fp32.run_id and bf16.config["model"]["dtype"] == "bfloat16"
    assert len(list((tmp_path / "results").rglob("toy.json"))) == 2     # evaluated again, not skipped


def test_a_finished_run_loads_no_model(tmp_path: Path, toy_beir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (first,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false")))
    import sentence_transformers

    import harness.models

    def refuse(*args, **kwargs):
        raise AssertionError("a finished run must not load a model")

    monkeypatch.setattr(harness.models, "load_sentence_transformer", refuse)
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", refuse)
    (again,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false")))
    assert again.created_at == first.created_at


def test_bumping_a_stage_protocol_version_makes_old_records_unfinished(tmp_path: Path, toy_beir: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixed scoring bug (a stage's version bumped) must not leave old numbers counted as finished."""
    from harness.tasks.retrieval import stages

    cfg = overrides(tmp_path, toy_beir, "task.train=false")
    (old,) = run(compose(cfg))
    assert old.config["task"]["spec"]["stages"] and cell_of().identity["protocol"]["score.ir"] == 1
    (same,) = run(compose(cfg))
    assert same.created_at == old.created_at                    # finished: skipped, nothing recomputed
    bumped = stages.STAGES.replaced(**{"score.ir": stages.Stage(2, "harness.tasks.retrieval.retrievers.ir_metrics", "fixed")})
    monkeypatch.setattr(stages, "STAGES", bumped)
    (new,) = run(compose(cfg))
    assert new.run_id != old.run_id          # a new cell, computed again (created_at has whole seconds: not a test)
    assert (tmp_path / "results").exists() and len(list((tmp_path / "results").rglob("toy.json"))) == 2  # both kept
    assert cell_of().identity["protocol"]["score.ir"] == 2


def test_a_run_is_versioned_by_the_stages_that_compute_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLDR dense and MLDR ColBERT share a spec: a ColBERT stage's version enters only the ColBERT runs' ids, so a
    ColBERT fix leaves dense MLDR records finished (and training enters only setting=id)."""
    from harness.tasks.retrieval import stages

    def protocol(*extra: str) -> dict[str, int]:
        cfg = compose(["task=mldr", "model=all-minilm-l6-v2", "task.source.run=null", *extra])
        return planner_of(cfg).identity()["protocol"]

    colbert_ood = ("task.retriever=multi_vector", "task.source.task=colbert")
    dense, colbert = protocol(), protocol(*colbert_ood)
    assert list(dense) == ["load.encoder", "retrieve.single_vector", "score.ir"]
    assert list(colbert) == ["load.colbert", "retrieve.multi_vector", "score.ir"]
    assert "train.dense" in protocol("task.setting=id")
    bumped = stages.STAGES.replaced(**{"retrieve.multi_vector": stages.Stage(2, "harness.tasks.retrieval.retrievers.multivector",
                                                                             "fixed")})
    monkeypatch.setattr(stages, "STAGES", bumped)
    assert protocol() == dense and protocol(*colbert_ood)["retrieve.multi_vector"] == 2


def test_a_stage_condition_on_an_unlisted_stage_is_refused() -> None:
    from harness.core.errors import HarnessError
    from harness.specs.schema import spec_from

    node = {"runner": "beir", "main_metric": "ndcg_at_10", "tables": [{"id": "t", "label": "T", "title": "T"}],
            "selection": {"rule": "latest_config_per_column"}, "stages": ["score.ir"],
            "stage_when": {"train.kd": {"task.retriever": "multi_vector"}}}
    with pytest.raises(HarnessError, match=r"stage_when names train\.kd, which stages does not list"):
        spec_from(node, "x", "task 'x', spec")


def test_stage_keys_on_an_unknown_stage_are_refused_with_the_closest_names() -> None:
    """The stages a spec's stage_keys name are the protocol's (its planner's STAGES): a typo fails when planned."""
    from harness.core.errors import HarnessError

    cfg = compose(["task=beir", "model=all-minilm-l6-v2", "task.train=false",
                   "+task.spec.stage_keys={retrieve.multivector: [task.top_k]}"])
    with pytest.raises(HarnessError, match=r"unknown stage 'retrieve\.multivector'.*retrieve\.multi_vector"):
        planner_of(cfg).cells()


def test_a_training_run_of_a_spec_without_a_train_stage_is_refused_before_any_work(tmp_path: Path,
                                                                                   toy_beir: Path) -> None:
    """task.train=true where the spec lists no train.* stage: one line naming both fixes, at the up-front check."""
    from harness.core.errors import HarnessError

    cfg = compose(overrides(tmp_path, toy_beir, "task.train=true",
                            "task.spec.stages=[load.encoder,'retrieve.{task.retriever}',score.ir]"))
    plan = planning.plan(cfg)
    with pytest.raises(HarnessError, match=r"task=beir trains \(task\.train=true\) but its spec lists no train\.\* "
                                           r"stage: add one \(e\.g\. train\.dense\) to spec\.stages, or set "
                                           r"task\.train=false\."):
        plan.check(plan, plan.cells)
