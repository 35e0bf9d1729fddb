"""Multi-vector retrieval pieces: exact MaxSim against PyLate's rank.rerank and brute force, the fp16 token store,
encoding against ColBERT.encode, length caps, PLAID's small-corpus rule and its build prerequisites."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from harness.core.errors import HarnessError
from harness.core.typed import from_conf
from harness.encoding.settings import Batching
from harness.models import ModelSpec, usable_positions
from harness.tasks.retrieval.data.dataset import RetrievalDataset, in_memory
from harness.tasks.retrieval.retrievers import colbert_model, maxsim, plaid_index, token_store
from harness.tasks.retrieval.retrievers import multivector as mv
from harness.tasks.retrieval.retrievers.retriever import evaluate
from harness.tasks.retrieval.settings import PlaidSettings, plaid_backend
from tests.conftest import TINY_MODEL, compose

TINY_SPEC = ModelSpec.based_on("bert-base", name="tiny", path=str(TINY_MODEL))
#: conf/plaid/default.yaml (the tasks' PLAID parameters) on the Stanford backend
#: a small token budget: several batches on a few texts
BATCH_80 = Batching(batch_tokens=80, max_batch_size=512)
STANFORD_PLAID = from_conf(PlaidSettings, "plaid/default", backend="stanford")


@pytest.fixture(scope="module")
def tiny_colbert():
    model, block = colbert_model.load_colbert(TINY_SPEC, device="cpu", embedding_size=128, seed=7)
    return model, block


def make_store(tmp: Path, docs: list[np.ndarray]) -> token_store.TokenStore:
    order = np.argsort([-len(d) for d in docs], kind="stable")   # written longest first, like encoding does
    batches = ((order[i : i + 3], [docs[j] for j in order[i : i + 3]]) for i in range(0, len(docs), 3))
    return token_store.TokenStore.write(tmp / "store", batches, len(docs), {"test": True})


def random_docs(rng: np.random.Generator, n: int, dim: int = 8, positive: bool = False) -> list[np.ndarray]:
    docs = []
    for _ in range(n):
        x = rng.standard_normal((int(rng.integers(1, 12)), dim)).astype(np.float32)
        x = np.abs(x) if positive else x
        docs.append((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16).astype(np.float32))
    return docs


def brute_force(q: np.ndarray, docs: list[np.ndarray]) -> np.ndarray:
    """Masked MaxSim, the ColBERT definition: sum over query tokens of the max over the document's own tokens."""
    return np.array([[(qi @ d.T).max(axis=1).sum() for d in docs] for qi in q])


# ---- exact MaxSim --------------------------------------------------------------------------------------------

def test_maxsim_equals_brute_force_across_chunks_even_with_negative_similarities(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    docs = random_docs(rng, 23)
    store = make_store(tmp_path, docs)
    q = rng.standard_normal((5, 4, 8)).astype(np.float32)
    want = brute_force(q, docs)
    for chunk_tokens, budget in ((12, 1), (40, 64), (1 << 18, 1 << 26)):   # 1 doc per chunk ... all at once
        scores, idx = maxsim.maxsim_search(torch.from_numpy(q), store, 7, chunk_tokens=chunk_tokens, score_budget=budget,
                                       show_progress=False)
        assert idx.shape == (5, 7)
        np.testing.assert_allclose(scores, np.take_along_axis(want, idx, 1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(scores, -np.sort(-want, axis=1)[:, :7], rtol=1e-5, atol=1e-5)


def test_maxsim_ranks_as_pylate_rank_rerank(tmp_path: Path) -> None:
    """rank.rerank over all documents (the issue's reference); rerank pads with zeros and no mask, which only
    agrees with ColBERT's definition when similarities are positive, as here."""
    from pylate import rank

    rng = np.random.default_rng(1)
    docs = random_docs(rng, 15, positive=True)
    store = make_store(tmp_path, docs)
    q = np.abs(rng.standard_normal((3, 4, 8))).astype(np.float32)
    scores, idx = maxsim.maxsim_search(torch.from_numpy(q), store, 15, chunk_tokens=30, show_progress=False)
    ranked = rank.rerank(documents_ids=[list(range(15))] * 3, queries_embeddings=list(q),
                         documents_embeddings=[docs] * 3)
    for row, hits in enumerate(ranked):
        assert list(idx[row]) == [h["id"] for h in hits]
        np.testing.assert_allclose(scores[row], [h["score"] for h in hits], rtol=1e-5)


def test_maxsim_fewer_documents_than_k(tmp_path: Path) -> None:
    store = make_store(tmp_path, random_docs(np.random.default_rng(2), 3))
    scores, idx = maxsim.maxsim_search(torch.ones((2, 4, 8)), store, 1000, show_progress=False)
    assert scores.shape == idx.shape == (2, 3) and sorted(idx[0]) == [0, 1, 2]


# ---- the token store -------------------------------------------------------------------------------------------

def test_token_store_round_trip_is_fp16_and_memory_mapped(tmp_path: Path) -> None:
    docs = random_docs(np.random.default_rng(3), 10)
    store = make_store(tmp_path, docs)
    again = token_store.TokenStore(tmp_path / "store")
    assert len(again) == 10 and again.emb.dtype == np.float16
    assert isinstance(again.emb, np.memmap)
    for i, d in enumerate(docs):
        np.testing.assert_array_equal(again.doc(i), d.astype(np.float16))
    assert list(np.argsort(again.starts)) == list(store.storage_order())


def test_interrupted_store_write_leaves_nothing(tmp_path: Path) -> None:
    def failing():
        yield np.array([0]), [np.ones((2, 4), dtype=np.float32)]
        raise RuntimeError("pre-empted")

    with pytest.raises(RuntimeError, match="pre-empted"):
        token_store.TokenStore.write(tmp_path / "store", failing(), 2, {})
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError):
        token_store.TokenStore(tmp_path / "store")


# ---- encoding ------------------------------------------------------------------------------------------------

def test_encode_tokens_equals_colbert_encode(tiny_colbert) -> None:
    model, _ = tiny_colbert
    texts = ["stars and planets orbit", "bread, butter; flour!", "a", "patients in a clinical trial " * 20]
    model.document_length, model.query_length = 64, 16
    for is_query in (False, True):
        want = model.encode(texts, is_query=is_query, batch_size=2, show_progress_bar=False)
        got: list = [None] * len(texts)
        for idx, embs in colbert_model.encode_tokens(model, texts, is_query=is_query, device="cpu", batching=BATCH_80,
                                          show_progress=False):
            for i, e in zip(idx, embs, strict=True):
                got[i] = e
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, atol=2e-6)


def test_position_limit_and_cap(tiny_colbert) -> None:
    model, block = tiny_colbert
    assert usable_positions(model) == 512 == block["colbert"]["position_limit"]
    roberta = [SimpleNamespace(auto_model=SimpleNamespace(config=SimpleNamespace(
        max_position_embeddings=514, model_type="roberta", pad_token_id=1)))]
    assert usable_positions(roberta) == 512
    r = mv.MultiVectorRetriever(model, mv.multi_vector_settings(document_length=8192, index="exact"), {})
    d = r.describe()
    assert (d["document_length"], d["document_length_requested"], d["position_limit"]) == (512, 8192, 512)


def test_new_head_is_seeded(tiny_colbert) -> None:
    model, block = tiny_colbert
    again, _ = colbert_model.load_colbert(TINY_SPEC, device="cpu", embedding_size=128, seed=7)
    other, _ = colbert_model.load_colbert(TINY_SPEC, device="cpu", embedding_size=128, seed=8)
    assert block["colbert"]["head"] == "new projection, seed 7" and block["colbert"]["embedding_size"] == 128
    assert torch.equal(model[1].linear.weight, again[1].linear.weight)
    assert not torch.equal(model[1].linear.weight, other[1].linear.weight)


# ---- the retriever ---------------------------------------------------------------------------------------------

def small_dataset(n_docs: int, words: int) -> RetrievalDataset:
    ids = [f"d{i}" for i in range(n_docs)]
    return in_memory("small", "test", ids, [""] * n_docs,
                     [" ".join(f"w{i}x{j}" for j in range(words)) for i in range(n_docs)],
                     queries={"q0": "w1x0", "q1": "w2x1"}, qrels={"q0": {"d1": 1}, "q1": {"d2": 1}})


def test_plaid_on_a_tiny_corpus_falls_back_to_exact_and_says_so(tiny_colbert, tmp_path: Path) -> None:
    model, _ = tiny_colbert
    settings = mv.multi_vector_settings(index="plaid", plaid=STANFORD_PLAID, document_length=64,
                                      cache_dir=str(tmp_path), show_progress=False)
    metrics, details, _ = evaluate(mv.MultiVectorRetriever(model, settings, {"run": 1}), small_dataset(3, 2), top_k=10)
    assert details["index"] == "exact" and details["index_requested"] == "plaid"
    assert details["index_fallback"].startswith("corpus too small for PLAID's k-means (")
    assert "evaluated with exact MaxSim instead" in details["index_fallback"]
    assert 0 <= metrics["ndcg_at_10"] <= 1
    # the same corpus again with the exact index: the token embeddings come from the cache
    exact = mv.MultiVectorRetriever(model, mv.multi_vector_settings(index="exact", document_length=64,
                                                                  cache_dir=str(tmp_path), show_progress=False),
                                    {"run": 1})
    metrics2, details2, _ = evaluate(exact, small_dataset(3, 2), top_k=10)
    assert details2["embedding_cache_hit"] is True and metrics2 == metrics


def test_plaid_fits_follows_the_kmeans_rule_measured_on_stanford_plaid() -> None:
    # measured: 60 tokens failed ("Number of training points (57) is less than k (64)"), 240 worked (128 centroids)
    ok, why = plaid_index.plaid_fits(60)
    assert not ok and why.startswith("corpus too small for PLAID's k-means (57 training token embeddings < 64 centroids)")
    assert plaid_index.plaid_fits(240) == (True, "")
    assert plaid_index.plaid_fits(0)[0] is False


def test_stanford_backend_without_a_compiler_fails_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(HarnessError, match=r"compiles C\+\+ extensions on first use and needs a C\+\+ compiler "
                                           r"\('no-such-compiler-xyz' not found\).*task\.index=exact"):
        plaid_index.prepare_stanford_extensions()


def test_stale_extension_build_lock_is_removed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    if os.environ.get("CXX") is None and __import__("shutil").which("c++") is None:
        pytest.skip("no C++ compiler on this machine")
    stale, fresh = tmp_path / "filter_pids_cpp" / "lock", tmp_path / "segmented_maxsim_cpp" / "lock"
    for lock in (stale, fresh):
        lock.parent.mkdir(parents=True)
        lock.write_text("")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    plaid_index.prepare_stanford_extensions()
    assert not stale.exists() and fresh.exists()   # a build in progress elsewhere keeps its lock


def test_fast_backend_requested_but_absent() -> None:
    if importlib.util.find_spec("fast_plaid") is not None:
        pytest.skip("fast-plaid is installed here")
    assert plaid_backend("auto") == "stanford"
    with pytest.raises(HarnessError, match=r"task\.plaid\.backend=fast needs fast-plaid, which is not installed"):
        plaid_backend("fast")


def test_a_plaid_build_failure_is_a_harness_error_naming_the_fix(tiny_colbert, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("Error building extension 'filter_pids_cpp'")

    monkeypatch.setattr(mv, "build_plaid", broken)
    model, _ = tiny_colbert
    settings = mv.multi_vector_settings(index="plaid", plaid=STANFORD_PLAID, document_length=64,
                                      cache_dir=str(tmp_path), show_progress=False)
    with pytest.raises(HarnessError, match=r"small: building the PLAID index \(stanford\) failed: Error building "
                                           r"extension 'filter_pids_cpp'\. Use task\.index=exact"):
        evaluate(mv.MultiVectorRetriever(model, settings, {"run": 1}), small_dataset(60, 12), top_k=10)


def test_a_plaid_plan_that_cannot_fit_is_refused_before_anything_loads(tmp_path: Path, monkeypatch) -> None:
    """The PLAID build's memory (retrievers/plaid_memory.py) over task.plaid_max_memory_gb: one line, from the
    corpus alone (its tokens counted through the tokenizer, kept), before the model loads and nothing encoded."""
    from harness.core.errors import HarnessError
    from harness.run.runner import run
    from harness.tasks.retrieval import compute
    from tests.conftest import write_beir_folder
    from tests.test_colbert import overrides

    def never(plan):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(compute, "load_model", never)
    write_beir_folder(tmp_path / "data")
    small = ["task.train=false", "task.index=plaid", "task.plaid_max_memory_gb=0.00001"]
    with pytest.raises(HarnessError) as exc:
        run(compose(overrides(tmp_path, tmp_path / "data", *small)))
    msg = str(exc.value)
    assert "needs about" in msg and "task.plaid_max_memory_gb=1e-05" in msg and "\n" not in msg
    assert not (tmp_path / "cache" / "colbert-tokens").exists()
    (count,) = (tmp_path / "cache" / "token-counts").glob("*.json")
    assert json.loads(count.read_text())["documents"] == 40
