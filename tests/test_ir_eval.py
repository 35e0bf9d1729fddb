"""Exact search, run building and IR metrics against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.evaluation.ir_metrics import evaluate_run, mrr_at_k
from harness.evaluation.search import exact_search, to_run


def test_chunked_search_equals_full_matrix() -> None:
    rng = np.random.default_rng(0)
    q, d = rng.normal(size=(7, 16)).astype(np.float32), rng.normal(size=(103, 16)).astype(np.float32)
    s_full, i_full = exact_search(q, d, 10, corpus_chunk_size=10_000)
    s_chunk, i_chunk = exact_search(q, d, 10, corpus_chunk_size=9, query_chunk_size=3)
    np.testing.assert_array_equal(i_full, i_chunk)
    np.testing.assert_allclose(s_full, s_chunk, rtol=1e-6)
    qn, dn = q / np.linalg.norm(q, axis=1, keepdims=True), d / np.linalg.norm(d, axis=1, keepdims=True)
    expected = np.argsort(-(qn @ dn.T), axis=1)[:, :10]
    np.testing.assert_array_equal(i_full, expected)


def test_top_k_larger_than_corpus() -> None:
    s, i = exact_search(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32), 1000)
    assert s.shape == (2, 2) and list(i[:, 0]) == [0, 1]


def test_dot_vs_cosine() -> None:
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    d = np.array([[0.9, 0.1], [5.0, 5.0]], dtype=np.float32)
    assert exact_search(q, d, 1, similarity="cosine")[1][0, 0] == 0
    assert exact_search(q, d, 1, similarity="dot")[1][0, 0] == 1
    with pytest.raises(ValueError, match="unknown similarity"):
        exact_search(q, d, 1, similarity="l2")


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
    assert mrr_at_k({"q": {"d12": 1}}, run, 10) == 0.0
    assert mrr_at_k({"q": {"d3": 1}}, run, 10) == pytest.approx(1 / 4)
