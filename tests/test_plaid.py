"""PLAID in bounded memory: the build reads the token store's memory map chunk by chunk and gives the one-shot index,
fast-plaid gets zero-copy views, the memory model and its refusal, and ColBERT shards with an index per shard."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import HarnessError
from harness.core.typed import from_conf
from harness.tasks.retrieval import score
from harness.tasks.retrieval.planner import entries
from harness.tasks.retrieval.retrievers import plaid_index
from harness.tasks.retrieval.retrievers import plaid_memory as pm
from harness.tasks.retrieval.retrievers.token_store import TokenStore
from harness.tasks.retrieval.settings import PlaidSettings
from tests.conftest import compose
from tests.test_colbert import overrides as colbert_overrides
from tests.test_shards import _retrievers, _search

STANFORD = from_conf(PlaidSettings, "plaid/default", backend="stanford")
can_build = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None,
                               reason="no C++ compiler for PLAID's Stanford backend")


def unit_store(tmp: Path, n_docs: int, dim: int = 32, seed: int = 3) -> TokenStore:
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n_docs):
        x = rng.standard_normal((int(rng.integers(4, 24)), dim)).astype(np.float32)
        docs.append((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16))
    return TokenStore.write(tmp / "store", iter([(np.arange(n_docs), docs)]), n_docs, {"test": seed})


def _hits(index, store: TokenStore, n: int = 12) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(9)
    q = [x / np.linalg.norm(x, axis=1, keepdims=True) for x in rng.standard_normal((n, 8, store.dim)).astype(np.float32)]
    return plaid_index.plaid_search(index, q, 10)


@can_build
def test_the_chunked_stanford_build_is_the_one_shot_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store read lazily, 64 documents a chunk, gives the index PyLate builds from every document at once
    (float32 lists, one chunk): the same hits and scores, bit for bit."""
    from pylate.indexes.stanford_nlp.data.collection import Collection

    store = unit_store(tmp_path, 400)
    with monkeypatch.context() as m:   # what build_plaid handed PyLate before: every document, float32, at once
        m.setattr(plaid_index, "StoreDocs", lambda s: [np.asarray(s.doc(i), np.float32) for i in range(len(s))])
        one_shot = plaid_index.build_plaid(store, STANFORD, "stanford", tmp_path / "one", "cpu", show_progress=False)
    monkeypatch.setattr(Collection, "get_chunksize", lambda self: 64)
    chunked = plaid_index.build_plaid(store, STANFORD, "stanford", tmp_path / "chunked", "cpu", show_progress=False)
    assert isinstance(chunked._index.indexer.config.collection.data, plaid_index.StoreDocs)   # nothing materialised
    assert len(list((tmp_path / "chunked" / "index").glob("*.codes.pt"))) == 7                # 400 / 64 chunks
    want, got = _hits(one_shot, store), _hits(chunked, store)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])


def test_fast_plaid_gets_zero_copy_views_of_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fast-plaid's create reads the documents batch by batch: it gets views of the memory map, not copies."""
    import pylate.indexes

    store = unit_store(tmp_path, 30)
    seen = {}

    class FakePlaid:
        def __init__(self, **kwargs):
            seen["kwargs"] = kwargs

        def add_documents(self, documents_ids, documents_embeddings):
            seen["docs"] = documents_embeddings

    monkeypatch.setattr(pylate.indexes, "PLAID", FakePlaid)
    plaid_index.build_plaid(store, STANFORD, "fast", tmp_path / "fast", "cpu", show_progress=False)
    docs = seen["docs"]
    assert seen["kwargs"]["use_fast"] and len(docs) == 30
    for i in (0, 17, 29):
        assert np.shares_memory(docs[i].numpy(), store.emb)
        np.testing.assert_array_equal(docs[i].numpy(), store.doc(i))


def test_the_memory_model_follows_the_build() -> None:
    """The phases as the backends run them: ColBERTv2's sample and centroid counts, the compression's fixed blocks,
    what grows with tokens; and the one-line refusal naming the limit and the three fixes."""
    assert pm.sample_docs(50_000) == 39_192 and pm.sample_docs(5_000) == 5_000
    assert pm.partitions(4_250_000) == 32_768
    small, large = (pm.plaid_memory(n, n * 85, 128, STANFORD, "stanford") for n in (10_000, 8_841_823))
    assert small.phases["compress"] > 2 * 2**30 and 3 < small.gb < 5    # fixed blocks dominate a small corpus
    assert large.phase in ("kmeans", "index") and large.gb > 40   # MS MARCO: the k-means sample and the index
    assert large.phases["index"] > 70 * 8_841_823 * 85            # codes and 4-bit residuals of every token
    fast = pm.plaid_memory(8_841_823, 8_841_823 * 85, 128, STANFORD, "fast")
    assert fast.phases["index"] < large.phases["index"] / 10      # fast-plaid memory-maps its index on CPU
    pm.check_plaid_memory("msmarco", large, None, "stanford")
    pm.check_plaid_memory("msmarco", large, 1000, "stanford")
    with pytest.raises(HarnessError) as err:
        pm.check_plaid_memory("msmarco", large, 8, "stanford")
    msg = str(err.value)
    assert "\n" not in msg and "task.plaid_max_memory_gb=8" in msg
    assert all(fix in msg for fix in ("more memory", "task.shards=K", "task.index=exact"))


@can_build
def test_colbert_plaid_shards_build_an_index_per_shard_and_merge_by_score(tmp_path: Path, toy_ds: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """task.shards=2 with PLAID: each shard builds its own index (its own k-means sample and centroids) over its
    own documents, each shard's candidates are re-scored with exact MaxSim, and the merge keeps the best by
    score; so every merged hit carries its exact score, and the top-10 overlaps the single index's."""
    built = []
    real = plaid_index.build_plaid
    from harness.tasks.retrieval.retrievers import multivector

    monkeypatch.setattr(multivector, "build_plaid", lambda store, *a, **k: built.append(len(store)) or real(store, *a,
                                                                                                           **k))
    common = colbert_overrides(tmp_path, toy_ds, "task.train=false", "task.batch_tokens=512", "task.document_length=64",
                               "task.index=plaid", "task.plaid.backend=stanford")
    plan, inner, _ = _retrievers(compose(common))
    (entry,) = entries(plan.settings)
    ds = score.loaded(plan, entry)
    score.prepare(plan, inner, entry)
    _, want_i = _search(inner, ds, 10)
    exact = _retrievers(compose([*common[:-2], "task.index=exact"]), inner.model)[1]
    ex_s, ex_i = _search(exact, ds, len(ds))
    other, _, sharded = _retrievers(compose([*common, "task.shards=2"]), inner.model)
    score.prepare(other, sharded, entry)
    got_s, got_i = _search(sharded, ds, 10)
    assert built[0] == len(ds) and sorted(built[1:]) != [len(ds)] and sum(built[1:]) == len(ds) and len(built) == 3
    exact_of = [dict(zip(i.tolist(), s.tolist(), strict=True)) for s, i in zip(ex_s, ex_i, strict=True)]
    for row, (s, i) in enumerate(zip(got_s, got_i, strict=True)):
        assert np.all(np.diff(s) <= 0)
        np.testing.assert_allclose(s, [exact_of[row][d] for d in i], rtol=1e-5, atol=1e-5)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got_i.tolist(), want_i.tolist(), strict=True)])
    print(f"top-10 overlap with the single index: {overlap:.3f}")
    assert overlap >= 0.7


@pytest.fixture()
def toy_ds(tmp_path: Path) -> Path:
    from tests.conftest import write_beir_folder

    write_beir_folder(tmp_path / "data", docs_per_topic=20)
    return tmp_path / "data"
