"""Issue 30, fidelity second pass: DPR's training rows are the authors' rows; efficiency's attention resolves as the
paper ran it (flash-attention 2, unpadded, on CUDA with flash-attn); PyLate's Voyager path as evaluate_pylate.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from datasets import Dataset

from harness.tasks.retrieval.data import triplets


def _write_triplets(path: Path, n: int) -> Path:
    lines = ["query\tpositive\tnegative"] + [f"q{i}\tp{i}\tn{i}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_dpr_subset_is_the_authors_split(tmp_path: Path) -> None:
    """train_st.py: ``train_test_split(test_size=1_000, seed=12)["train"].select(range(1_250_000))``, here on a
    3,000-row file with select(range(1,250)): the harness's rows are the same rows in the same order."""
    ds = triplets.load_triplets_file(_write_triplets(tmp_path / "t.tsv", 3000))
    authors = Dataset.from_dict({"anchor": ds["anchor"]}).train_test_split(test_size=1_000, seed=12)["train"]
    authors = authors.select(range(1_250))
    ours = triplets.sample(ds, 1_250, 12)
    assert len(ours) == 1_250
    assert (ours[0]["anchor"], ours[-1]["anchor"]) == (authors[0]["anchor"], authors[-1]["anchor"])
    assert ours["anchor"] == authors["anchor"]
    assert triplets.sample(ds, 5_000, 12)["anchor"] == ds["anchor"]       # fewer rows than asked: all of them
    small = triplets.sample(ds, 2_500, 12)                               # < max_samples + 1,000: 500 held out
    assert len(small) == 2_500 and len(set(small["anchor"])) == 2_500


# ------------------------------------------------------------------ the authors' Voyager index (issue 30 item 5)
def test_voyager_index_returns_exact_maxsim_top_k_on_toy_tokens(tmp_path) -> None:
    """PyLate's Voyager path (evaluate_pylate.py: M 200, ef 500, exact rerank) finds the exact MaxSim top-k on a
    small corpus, offline, with scores equal to MaxSim."""
    import numpy as np

    from harness.tasks.retrieval.retrievers.plaid_index import VoyagerSettings, build_voyager, voyager_search

    rng = np.random.default_rng(0)

    def unit(x):
        return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)

    docs = [unit(rng.normal(size=(int(rng.integers(3, 9)), 16))) for _ in range(40)]
    queries = [unit(rng.normal(size=(4, 16))) for _ in range(3)]
    index = build_voyager(docs, 16, VoyagerSettings(), tmp_path)
    scores, idx = voyager_search(index, queries, top_k=5)
    for q, row_s, row_i in zip(queries, scores, idx, strict=True):
        exact = np.array([(q @ d.T).max(axis=1).sum() for d in docs])
        np.testing.assert_array_equal(row_i, np.argsort(-exact, kind="stable")[:5])
        np.testing.assert_allclose(row_s, exact[row_i], rtol=1e-5)


def test_voyager_missing_package_is_one_clear_error(monkeypatch) -> None:
    import importlib.util

    import pytest

    from harness.core.errors import HarnessError
    from harness.tasks.retrieval.retrievers import plaid_index

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "voyager" else real(name, *a))
    with pytest.raises(HarnessError, match="pip install voyager"):
        plaid_index.check_voyager()


def test_colbert_task_index_voyager_scores_as_exact_maxsim_on_toy_data(tmp_path) -> None:
    """task=colbert task.index=voyager (the authors' evaluate_pylate.py path) runs end to end offline; on a toy
    corpus its HNSW candidates, reranked by exact MaxSim, give the exact index's numbers."""
    from harness.run.runner import run
    from tests.conftest import compose, write_beir_folder
    from tests.test_colbert import overrides

    write_beir_folder(tmp_path / "data", docs_per_topic=6)
    (exact,) = run(compose(overrides(tmp_path / "e", tmp_path / "data", "task.train=false")))
    (voy,) = run(compose(overrides(tmp_path / "v", tmp_path / "data", "task.train=false", "task.index=voyager")))
    assert voy.status == "ok" and voy.details["index"] == "voyager" and voy.details["index_params"]["M"] == 200
    assert voy.metrics["ndcg_at_10"] == pytest.approx(exact.metrics["ndcg_at_10"], abs=1e-6)
