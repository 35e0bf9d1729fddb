"""Exact search, run building and IR metrics against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from harness.tasks.retrieval.retrievers.ir_metrics import evaluate_run, reciprocal_ranks
from harness.tasks.retrieval.retrievers.search import exact_search, to_run


def test_chunked_search_equals_full_matrix() -> None:
    rng = np.random.default_rng(0)
    q, d = rng.normal(size=(7, 16)).astype(np.float32), rng.normal(size=(103, 16)).astype(np.float32)
    s_full, i_full = exact_search(q, d, 10, similarity="cosine", corpus_chunk_size=10_000)
    s_chunk, i_chunk = exact_search(q, d, 10, similarity="cosine", corpus_chunk_size=9, query_chunk_size=3)
    np.testing.assert_array_equal(i_full, i_chunk)
    np.testing.assert_allclose(s_full, s_chunk, rtol=1e-6)
    qn, dn = q / np.linalg.norm(q, axis=1, keepdims=True), d / np.linalg.norm(d, axis=1, keepdims=True)
    expected = np.argsort(-(qn @ dn.T), axis=1)[:, :10]
    np.testing.assert_array_equal(i_full, expected)


def test_top_k_larger_than_corpus() -> None:
    s, i = exact_search(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32), 1000, similarity="cosine",
                        corpus_chunk_size=1000)
    assert s.shape == (2, 2) and list(i[:, 0]) == [0, 1]


def test_dot_vs_cosine() -> None:
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    d = np.array([[0.9, 0.1], [5.0, 5.0]], dtype=np.float32)
    assert exact_search(q, d, 1, similarity="cosine", corpus_chunk_size=8)[1][0, 0] == 0
    assert exact_search(q, d, 1, similarity="dot", corpus_chunk_size=8)[1][0, 0] == 1
    with pytest.raises(ValueError, match="unknown similarity"):
        exact_search(q, d, 1, similarity="l2", corpus_chunk_size=8)


def test_identical_ids_dropped_before_cut() -> None:
    scores = np.array([[0.9, 0.8, 0.7]], dtype=np.float32)
    idx = np.array([[0, 1, 2]])
    run = to_run(["a"], ["a", "b", "c"], scores, idx, top_k=2, ignore_identical_ids=True)
    assert run == {"a": {"b": pytest.approx(0.8), "c": pytest.approx(0.7)}}
    kept = to_run(["a"], ["a", "b", "c"], scores, idx, top_k=2)
    assert list(kept["a"]) == ["a", "b"]


def test_metrics_by_hand() -> None:
    qrels = {"q1": {"d1": 2, "d3": 1}, "q2": {"d9": 1}}
    run = {"q1": {"d2": 3.0, "d1": 2.0, "d3": 1.0}, "q2": {"d5": 1.0}}
    m = evaluate_run(qrels, run)
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert m["ndcg_at_10"] == pytest.approx((dcg / idcg + 0.0) / 2, abs=1e-6)
    assert m["mrr_at_10"] == pytest.approx((1 / 2 + 0) / 2)
    assert m["recall_at_100"] == pytest.approx((1.0 + 0.0) / 2)
    assert m["map_at_10"] == pytest.approx(((1 / 2 + 2 / 3) / 2 + 0) / 2)


def test_query_with_empty_run_counts_as_zero() -> None:
    m = evaluate_run({"q1": {"d1": 1}, "q2": {"d2": 1}}, {"q1": {"d1": 1.0}})
    assert m["ndcg_at_10"] == pytest.approx(0.5)


def test_mrr_cut_at_k() -> None:
    run = {"q": {f"d{i}": 100.0 - i for i in range(20)}}
    assert reciprocal_ranks({"q": {"d12": 1}}, run, 10)["q"] == 0.0
    assert reciprocal_ranks({"q": {"d3": 1}}, run, 10)["q"] == pytest.approx(1 / 4)


def test_search_streams_the_corpus_one_chunk_at_a_time() -> None:
    """A memory-mapped corpus is never copied whole: only one float32 chunk is alive at a time."""
    import tracemalloc

    rng = np.random.default_rng(1)
    docs = rng.standard_normal((20_000, 32)).astype(np.float16)     # e.g. a memory-mapped fp16 cache
    queries = rng.standard_normal((8, 32)).astype(np.float32)
    chunk_bytes = 1_000 * 32 * 4
    tracemalloc.start()
    _, idx = exact_search(queries, docs, 5, similarity="dot", corpus_chunk_size=1_000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 3 * chunk_bytes, f"peak {peak} bytes: more than one chunk at a time"
    full = torch.from_numpy(queries) @ torch.from_numpy(docs.astype(np.float32)).T
    np.testing.assert_array_equal(idx, torch.topk(full, 5, dim=1).indices.numpy())


def test_dense_retrieval_searches_on_the_configured_device(monkeypatch, tmp_path) -> None:
    """The run's device reaches the search (a GPU user's search runs on the GPU)."""
    from harness.run.runner import run
    from harness.tasks.retrieval.retrievers import search
    from tests.conftest import compose, write_beir_folder
    from tests.test_retrieval_runs import overrides

    seen = []
    real = search.exact_search

    def spy(*args, **kwargs):
        seen.append(kwargs.get("device"))
        return real(*args, **kwargs)

    monkeypatch.setattr(search, "exact_search", spy)
    write_beir_folder(tmp_path / "data")
    run(compose(overrides(tmp_path, tmp_path / "data", "task.train=false", "device=cpu")))
    assert seen == ["cpu"]
