"""Corpora of any size in bounded memory (issue 61): texts read chunk by chunk from where they lie
(harness/tasks/retrieval/data/corpus.py), dense embeddings written to a memory-mapped matrix as they are made and
searched from it (a cache miss is a hit), kept at the encoder's width; the numbers do not change."""

from __future__ import annotations

import gzip
import hashlib
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.core.errors import DataError
from harness.encoding.prefetch import HostSink
from harness.run import planning
from harness.tasks.retrieval import compute
from harness.tasks.retrieval.data import corpus as corpus_mod
from harness.tasks.retrieval.data.beir import load_local, read_corpus
from harness.tasks.retrieval.retrievers.retriever import evaluate_per_query
from harness.tasks.retrieval.retrievers.search import as_float32
from tests.conftest import compose
from tests.test_retrieval_runs import overrides

WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to") for b in ("b", "d", "g", "m", "n", "s")]


def write_corpus(folder: Path, n_docs: int, words: int = 60, queries: int = 20) -> Path:
    """A BEIR folder of ``n_docs`` documents of ``words`` words (deterministic), each query judging one document."""
    rng = np.random.default_rng(7)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w") as fh:
        for i in range(n_docs):
            text = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), words))
            fh.write(json.dumps({"_id": f"d{i}", "title": f"t{i % 7}" if i % 3 else "", "text": text}) + "\n")
    picked = rng.choice(n_docs, queries, replace=False)
    with open(folder / "queries.jsonl", "w") as fh:
        for q, d in enumerate(picked):
            fh.write(json.dumps({"_id": f"q{q}", "text": f"doc {d} " + " ".join(WORDS[: 3 + q % 5])}) + "\n")
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{q}\td{d}\t1\n" for q, d in enumerate(picked)))
    return folder


def all_texts(path: Path) -> list[str]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [corpus_mod.document(str(r.get("title") or ""), str(r["text"] or "")) for r in rows]


# ------------------------------------------------------------------------------------------------ the corpus
def test_jsonl_corpus_reads_what_the_file_holds_in_any_order_and_chunk(tmp_path: Path, monkeypatch) -> None:
    folder = write_corpus(tmp_path / "toy", 300)
    want = all_texts(folder / "corpus.jsonl")
    corpus = read_corpus(folder / "corpus.jsonl")
    assert corpus.texts(0, len(corpus)) == want
    pos = np.random.default_rng(0).permutation(300)[:50]
    assert corpus.texts_at(pos) == [want[p] for p in pos]
    monkeypatch.setattr(corpus_mod, "CHUNK_CHARS", 2000)
    chunks = list(corpus.chunks())
    assert len(chunks) > 10 and [t for _, c in chunks for t in c] == want
    assert [a for a, _ in chunks] == list(np.cumsum([0] + [len(c) for _, c in chunks[:-1]]))
    assert corpus.key == corpus_mod.texts_key(want)      # the key the embedding cache had before streaming


def test_gzipped_corpus_streams_and_a_file_changed_after_loading_is_refused(tmp_path: Path) -> None:
    folder = write_corpus(tmp_path / "toy", 50)
    want = all_texts(folder / "corpus.jsonl")
    gz = tmp_path / "corpus.jsonl.gz"
    gz.write_bytes(gzip.compress((folder / "corpus.jsonl").read_bytes()))
    assert read_corpus(gz).texts_at([40, 3, 17]) == [want[40], want[3], want[17]]
    corpus = read_corpus(folder / "corpus.jsonl")
    (folder / "corpus.jsonl").write_text((folder / "corpus.jsonl").read_text().replace("ka", "ko"))
    with pytest.raises(DataError, match="changed while it was being read"):
        corpus.texts(0, 5)


def test_the_content_fingerprint_is_the_one_the_whole_set_gave(shared_data: Path) -> None:
    """SciFact's fingerprint, hashed while the file is scanned, is the hash of the whole set held in memory (as
    records before streaming computed it: their data fingerprints stay comparable)."""
    folder = shared_data / "scifact"
    ds = load_local(folder, "scifact", "test")
    h = hashlib.sha256()
    for line in (folder / "corpus.jsonl").read_text().splitlines():
        r = json.loads(line)
        h.update(f"{r['_id']}\x1f{r.get('title') or ''}\x1f{r['text'] or ''}\x1e".encode())
    for qid in sorted(ds.queries):
        h.update(f"{qid}\x1f{ds.queries[qid]}\x1e".encode())
    for qid in sorted(ds.qrels):
        for did in sorted(ds.qrels[qid]):
            h.update(f"{qid}\x1f{did}\x1f{ds.qrels[qid][did]}\x1e".encode())
    assert ds.fingerprint == "sha256:" + h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ dense
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stream")
    data = tmp / "data"
    write_corpus(data / "toy", 600)
    plan = planning.plan(compose(overrides(tmp, data, "task.train=false", "task.batch_tokens=2048")))
    model = compute.load_model(plan)[0]
    return plan, model, data


def evaluated(plan, model, ds, identity: dict, cache: bool = True) -> tuple[dict, np.ndarray]:
    retriever = uncached(compute.retriever(plan, model, identity), cache)
    metrics, details, _, per_query = evaluate_per_query(retriever, ds, top_k=10)
    emb = np.array(retriever.doc_emb)
    retriever.close()
    return {"metrics": metrics, "hit": details["embedding_cache_hit"], "run": per_query.run}, emb


def uncached(retriever, cache: bool):
    """``retriever`` without its embedding cache unless ``cache`` (a temporary matrix instead)."""
    if not cache:
        retriever.settings.cache_dir = retriever.cache_dir = None
    return retriever


def test_a_cache_miss_and_a_hit_and_no_cache_give_identical_numbers(tiny_run, monkeypatch) -> None:
    plan, model, data = tiny_run
    monkeypatch.setattr(corpus_mod, "CHUNK_CHARS", 20_000)       # several chunks
    ds = load_local(data / "toy", "toy", "test")
    miss, emb_miss = evaluated(plan, model, ds, {"run": "miss-hit"})
    hit, emb_hit = evaluated(plan, model, ds, {"run": "miss-hit"})
    none, emb_none = evaluated(plan, model, ds, {"run": "miss-hit"}, cache=False)
    assert (miss["hit"], hit["hit"], none["hit"]) == (False, True, False)
    assert miss["run"] == hit["run"] == none["run"] and miss["metrics"] == hit["metrics"] == none["metrics"]
    assert np.array_equal(emb_miss, emb_hit) and np.array_equal(emb_miss, emb_none)


def traced_index(retriever, ds) -> int:
    """The peak of Python's traced allocations while ``retriever`` indexes ``ds`` (bytes)."""
    tracemalloc.start()
    try:
        retriever.index(ds)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_texts_and_token_ids_are_never_held_whole(tiny_run, tmp_path: Path, monkeypatch) -> None:
    """Two corpora, one 8x the other (4,800 documents of 120 words: about 2.3 MB of text, several times that in
    token ids), indexed with Python's allocations traced: the peak grows by under a quarter of the added text (ids
    and tie ranks grow, texts and token ids do not), and the numbers are the run's without the trace."""
    plan, model, _ = tiny_run
    monkeypatch.setattr(corpus_mod, "CHUNK_CHARS", 50_000)
    peaks, sizes = [], []
    for n in (600, 4800):
        ds = load_local(write_corpus(tmp_path / f"c{n}", n, words=120), f"c{n}", "test")
        sizes.append(sum(len(t) for _, c in ds.corpus.chunks() for t in c))
        retriever = uncached(compute.retriever(plan, model, {"run": "bounded"}), False)
        peaks.append(traced_index(retriever, ds))
        scores, idx, _ = retriever.search(list(ds.evaluated_queries().values()), 10)
        retriever.close()
    free, _ = evaluated(plan, model, ds, {"run": "bounded"}, cache=False)
    assert sizes[1] > 2_000_000 and peaks[1] - peaks[0] < (sizes[1] - sizes[0]) / 4, (peaks, sizes)
    from harness.tasks.retrieval.retrievers.search import to_run

    assert to_run(list(ds.evaluated_queries()), ds.corpus_ids, scores, idx, top_k=10) == free["run"]


def test_embeddings_are_kept_at_the_encoders_width() -> None:
    emb = torch.randn(5, 8).to(torch.bfloat16)
    sink = HostSink(5, "cpu", keep_width=True)
    sink.put(np.arange(5), emb)
    kept = sink.result()
    assert kept.dtype == np.uint16 and kept.nbytes == 5 * 8 * 2
    assert np.array_equal(as_float32(kept), emb.float().numpy())           # widened exactly
    wide = HostSink(5, "cpu")
    wide.put(np.arange(5), emb)
    assert wide.result().dtype == np.float32 and np.array_equal(wide.result(), as_float32(kept))
