"""Real-data ColBERT checks (slow): exact MaxSim equals PyLate's own evaluation on a SciFact slice, PLAID stays
within 0.01 of exact (the one test that builds a PLAID index: PyLate's Stanford backend compiles C++ extensions
on first use, ~2 min on a clean machine), and KD training through the CLI on the real teacher-scored MS MARCO
sample, evaluated and recorded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.core import results
from harness.run.runner import run
from tests.conftest import REPO, TINY_MODEL, compose
from tests.forked import run_module

pytestmark = pytest.mark.slow

SLICE = ["task.datasets=[scifact]", "task.max_queries=50", "task.max_docs=250", "task.document_length=180"]


def scifact_overrides(tmp: Path, data: Path, *extra: str) -> list[str]:
    return ["task=colbert", "model=all-minilm-l6-v2", "precision=fp32", "device=cpu", "task.train=false",
            "task.query_length_recipe=pylate_beir",   # SciFact at 48 query tokens, the length PyLate is run with
            f"task.data_dir={data}", *SLICE, f"paths.results={tmp}/results", f"paths.outputs={tmp}/outputs",
            f"paths.cache={tmp}/cache", *extra]


def pylate_ndcg10(cfg, data: Path) -> float:
    """PyLate's PyLateInformationRetrievalEvaluator on the same model (same seeded head) and the same slice."""
    from pylate.evaluation import PyLateInformationRetrievalEvaluator

    from harness.models import ModelSpec
    from harness.tasks.retrieval.data.beir import load_local
    from harness.tasks.retrieval.data.dataset import subset
    from harness.tasks.retrieval.retrievers.colbert_model import load_colbert

    ds = subset(load_local(data / "scifact", "scifact", "test"), 50, 250)
    model, _ = load_colbert(ModelSpec.from_config(cfg.model), device="cpu", embedding_size=int(cfg.task.embedding_size),
                            seed=int(cfg.seed))
    model.query_length, model.document_length = 48, 180
    evaluator = PyLateInformationRetrievalEvaluator(
        queries=ds.evaluated_queries(), corpus=dict(zip(ds.corpus_ids, ds.corpus.texts(0, len(ds)), strict=True)),
        relevant_docs={q: {d for d, g in rel.items() if g > 0} for q, rel in ds.qrels.items()},
        show_progress_bar=False, batch_size=32,
    )
    return float(evaluator(model)["MaxSim_ndcg@10"])


def _can_build_plaid() -> bool:
    import importlib.util
    import shutil

    return importlib.util.find_spec("fast_plaid") is not None or shutil.which(os.environ.get("CXX", "c++")) is not None


@pytest.mark.skipif(not _can_build_plaid(), reason="no fast-plaid and no C++ compiler for PLAID's Stanford backend")
def test_exact_maxsim_equals_pylate_and_plaid_is_close(tmp_path: Path, shared_data: Path, capsys) -> None:
    (exact,) = run(compose(scifact_overrides(tmp_path, shared_data, "task.index=exact")))
    assert exact.details["query_length"] == 48 and exact.details["n_queries"] == 50 and exact.details["n_docs"] == 250
    theirs = pylate_ndcg10(compose(scifact_overrides(tmp_path, shared_data)), shared_data)
    ours = exact.metrics["ndcg_at_10"]
    (plaid,) = run(compose(scifact_overrides(tmp_path, shared_data, "task.index=plaid")))
    (raw,) = run(compose(scifact_overrides(tmp_path, shared_data, "task.index=plaid", "task.plaid.rerank=false")))
    assert plaid.details["embedding_cache_hit"] is True and "index_fallback" not in plaid.details
    assert plaid.details["index_params"]["rerank"] is True and raw.details["index_params"]["rerank"] is False
    gap, raw_gap = plaid.metrics["ndcg_at_10"] - ours, raw.metrics["ndcg_at_10"] - ours
    with capsys.disabled():
        print(f"\nSciFact slice (50 queries, 250 docs, MiniLM ColBERT with a new head, fp32): exact MaxSim nDCG@10 "
              f"{ours:.6f}, PyLate evaluator {theirs:.6f} (diff {abs(ours - theirs):.2e}); PLAID "
              f"({plaid.details['index_params']['backend']}) candidates + exact rerank {plaid.metrics['ndcg_at_10']:.6f} "
              f"(gap {gap:+.4f}), PLAID's own scores {raw.metrics['ndcg_at_10']:.6f} (gap {raw_gap:+.4f})")
    assert abs(ours - theirs) < 1e-4
    assert abs(gap) < 0.01


@pytest.mark.parametrize("model", ["tiny-modernbert", "all-minilm-l6-v2"])
def test_kd_training_through_the_cli_on_the_real_sample(tmp_path: Path, shared_data: Path, model: str) -> None:
    """``python -m harness task=colbert`` trains on FlagEmbedding's teacher-scored MS MARCO sample (10 queries,
    26 documents each) and evaluates the trained model on a SciFact slice; the record names the data."""
    kd = shared_data / "msmarco-hardneg-sample" / "bge_example_msmarco.jsonl"
    chosen = ["model=modernbert-base", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert"] \
        if model == "tiny-modernbert" else ["model=all-minilm-l6-v2"]
    args = [*chosen, "task=colbert", "precision=fp32", "device=cpu", "task.index=exact", f"task.data_dir={shared_data}",
            "task.datasets=[scifact]", "task.max_queries=20", "task.max_docs=100", "task.document_length=180",
            "task.train_data.source=file", f"task.train_data.path={kd}", "task.train_data.n_ways=8",
            "task.batch_size=4", f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs",
            f"paths.cache={tmp_path}/cache"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = run_module("harness", *args, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    (rec,) = [r for _, r in results.iter_records(tmp_path / "results")]
    assert rec.status == "ok" and rec.task == "colbert" and rec.dataset == "scifact" and rec.model["name"] == model
    trained = rec.model["trained"]
    assert trained["steps"] == 3 and trained["n_samples"] == 10 and trained["data"]["layout"] == "flag"
    assert trained["data"]["path"] == str(kd) and rec.hyperparameters["train"]["data"]["n_ways"] == 8
    assert 0 < rec.metrics["ndcg_at_10"] <= 1 and "ndcg_at_10" in out.stdout
