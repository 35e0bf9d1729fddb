"""Sharded corpus evaluation (harness/tasks/retrieval/retrievers/shards.py): the merge is exactly the unsharded search for any K
(dense and exact MaxSim), a missing or corrupt shard stops the merge with one line and scores nothing, a corpus
shared by two datasets is encoded once, and a SLURM array of shards plus a merge job gives the unsharded record."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.core import results
from harness.core.errors import HarnessError
from harness.run import planning
from harness.run.runner import run
from harness.tasks.retrieval import compute, score
from harness.tasks.retrieval.planner import entries
from harness.tasks.retrieval.retrievers import shards
from harness.tasks.retrieval.retrievers.embedding_cache import cached_embeddings
from harness.tasks.retrieval.retrievers.retriever import evaluate
from harness.tasks.retrieval.retrievers.search import exact_search, id_rank, ranked_topk
from tests.conftest import SHARED_DATA, compose, paths, write_beir_folder
from tests.test_colbert import overrides as colbert_overrides
from tests.test_retrieval_runs import TINY, overrides

SMALL_BATCHES = ["task.train=false", "task.batch_tokens=1024"]   # ~13 encoder batches over the toy corpus


# ------------------------------------------------------------------------------------------------ units
def test_plan_cuts_at_batch_boundaries_and_balances_tokens() -> None:
    lengths = np.array([5, 9, 3, 7, 7, 1, 2, 8, 6, 4])
    batches = [np.array([1, 7]), np.array([3, 4]), np.array([8, 0]), np.array([9, 2, 6, 5])]
    plan = shards.plan_shards(lengths, batches, 2, 0)
    assert [p.tolist() for p in (plan.positions(0), plan.positions(1))] == [[1, 7, 3, 4], [8, 0, 9, 2, 6, 5]]
    assert plan.tokens.tolist() == [31, 21]
    assert len(shards.plan_shards(lengths, batches, 9, 0)) == 4            # never more shards than batches
    assert len(shards.plan_shards(lengths, batches, "auto", 20)) == 3      # ceil(52 tokens / 20)
    with pytest.raises(HarnessError, match=r"task\.shards"):
        shards.plan_shards(lengths, batches, 0, 0)


def test_ranked_topk_is_a_total_order_so_merging_parts_is_exact() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(6, 50)).astype(np.float32)          # ties everywhere
    rank = rng.permutation(50)
    want = [sorted(range(50), key=lambda d, r=r: (-scores[r, d], rank[d]))[:7] for r in range(6)]
    _, i = ranked_topk(torch.from_numpy(scores), torch.arange(50), 7, torch.from_numpy(rank))
    assert i.tolist() == want
    for cuts in ([0, 50], [0, 13, 50], [0, 3, 20, 21, 49, 50]):
        parts = []
        for a, b in itertools.pairwise(cuts):
            ps, pi = ranked_topk(torch.from_numpy(scores[:, a:b]), torch.arange(a, b), 7, torch.from_numpy(rank))
            parts.append((ps.numpy(), pi.numpy()))
        assert shards.merge(parts, 7, rank)[1].tolist() == want
    _, di = exact_search(np.eye(3, dtype=np.float32), np.ones((5, 3), dtype=np.float32), 3, similarity="cosine",
                         corpus_chunk_size=2, rank=id_rank(["e", "d", "c", "b", "a"]))
    assert di.tolist() == [[4, 3, 2]] * 3                                  # equal scores: by document id


# ------------------------------------------------------------------------------------------------ dense, tiny model
def _sharded(plan, inner) -> shards.ShardedRetriever:
    """The run's retriever, sharded as its settings say (K=1 included: the sharded path with one shard)."""
    return shards.ShardedRetriever(inner, plan.settings.sharding)


def _retrievers(cfg, model=None):
    plan = planning.plan(cfg)
    model = model if model is not None else compute.load_model(plan)[0]
    inner = compute.retriever(plan, model, {"run": "test"})
    return plan, inner, _sharded(plan, inner)


def _search(retriever, ds, k: int = 100):
    retriever.index(ds)
    scores, idx, _ = retriever.search(list(ds.evaluated_queries().values()), k)
    return scores, idx


@pytest.fixture()
def toy_ds(tmp_path: Path):
    write_beir_folder(tmp_path / "data", docs_per_topic=40)
    return tmp_path / "data"


def test_dense_shards_equal_unsharded_for_any_k(tmp_path: Path, toy_ds: Path) -> None:
    cfg = compose(overrides(tmp_path, toy_ds, *SMALL_BATCHES))
    plan, inner, _ = _retrievers(cfg)
    (entry,) = entries(plan.settings)
    ds = score.loaded(plan, entry)
    want_s, want_i = _search(inner, ds)
    want_m, _, _ = evaluate(inner, ds, top_k=100)
    for k in (1, 2, 3, 7):
        cfg = compose(overrides(tmp_path, toy_ds, *SMALL_BATCHES, f"task.shards={k}"))
        sharded = _retrievers(cfg)[2]
        got_s, got_i = _search(sharded, ds)
        assert len(sharded.plan) == k
        np.testing.assert_array_equal(got_i, want_i)
        np.testing.assert_array_equal(got_s, want_s)
        got_m, details, timings = evaluate(sharded, ds, top_k=100)
        assert got_m == want_m and details["shards"] == k and details["embedding_cache_hit"] is True
        assert {"merge_s", "shards_s", "encode_queries_s"} <= set(timings)


def test_the_devices_launcher_refuses_without_gpus(tmp_path: Path, toy_ds: Path) -> None:
    """``task.shard_launcher=devices`` needs visible GPUs: without any, one line naming the alternatives, before
    any encoding (the launcher is built with the retriever)."""
    import torch

    if torch.cuda.device_count():
        pytest.skip("GPUs are visible here")
    cfg = compose(overrides(tmp_path, toy_ds, *SMALL_BATCHES, "task.shards=2", "task.shard_launcher=devices"))
    plan, inner, _ = _retrievers(cfg)
    with pytest.raises(HarnessError, match=r"needs visible GPUs \(none found\); use sequential, or external"):
        compute.sharded(plan, inner)


def test_the_devices_launcher_spawns_one_process_per_device_and_merges_exactly(
        tmp_path: Path, toy_ds: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-GPU path run for real on CPU: with two devices named ``cpu``, ``torch.multiprocessing.spawn`` starts
    two processes that compute the 3 shards (2 + 1), the parent merges them, and the record equals the unsharded
    one."""
    from harness.tasks.retrieval import devices

    (want,) = run(compose(overrides(tmp_path / "one", toy_ds, *SMALL_BATCHES)))
    monkeypatch.setattr(devices, "visible_devices", lambda: ["cpu", "cpu"])
    (got,) = run(compose(overrides(tmp_path / "dev", toy_ds, *SMALL_BATCHES, "task.shards=3",
                                   "task.shard_launcher=devices")))
    assert got.status == "ok" and got.metrics == want.metrics
    assert got.details["shards"] == 3 and got.details["shard_launcher"] == "devices"
    assert got.details["shards_from_cache"] == 0            # the device processes encoded them, none was reused
    topk = list((tmp_path / "dev" / "cache" / "embeddings" / "shard-topk").glob("*.npz"))
    assert sorted(json.loads(str(np.load(p)["meta"]))["shard"] for p in topk) == [0, 1, 2]


def test_missing_and_corrupt_shards_stop_the_merge_and_score_nothing(tmp_path: Path, toy_ds: Path) -> None:
    (done,) = run(compose(overrides(tmp_path, toy_ds, *SMALL_BATCHES, "task.shards=3")))
    assert done.details["shards"] == 3 and done.details["shards_from_cache"] == 0
    topk = sorted((tmp_path / "cache" / "embeddings" / "shard-topk").glob("*.npz"))
    assert len(topk) == 3
    merge_only = [*SMALL_BATCHES, "task.shards=3", "task.shard_launcher=external", "overwrite=true"]
    (again,) = run(compose(overrides(tmp_path, toy_ds, *merge_only)))   # every shard there: merged, nothing redone
    assert again.metrics == done.metrics and again.details["shards"] == 3
    victim = next(p for p in topk if json.loads(str(np.load(p)["meta"]))["shard"] == 1)
    saved = victim.read_bytes()
    for damage in ("missing", "corrupt"):
        if damage == "missing":
            victim.unlink()
        else:
            victim.write_bytes(saved[: len(saved) // 2])
        with pytest.raises(HarnessError) as exc:
            run(compose(overrides(tmp_path, toy_ds, *merge_only)))
        (rec,) = exc.value.records
        assert rec.status == results.STATUS_FAILED and not rec.metrics
        line = rec.error
        assert "\n" not in line and "shard 1 of 3" in line and "task.shard=1" in line and "nothing was scored" in line
        assert ("missing" in line) if damage == "missing" else ("unreadable" in line)
    # the shard job redoes only shard 1 (its embeddings come from the cache), then the merge scores as before
    run(compose(overrides(tmp_path, toy_ds, *SMALL_BATCHES, "task.shards=3", "task.shard=1", "overwrite=true")))
    (redone,) = run(compose(overrides(tmp_path, toy_ds, *merge_only)))
    assert redone.metrics == done.metrics


def test_two_datasets_over_one_corpus_encode_it_once(tmp_path: Path, toy_ds: Path) -> None:
    other = toy_ds / "toy2"
    shutil.copytree(toy_ds / "toy", other)
    (other / "queries.jsonl").write_text((toy_ds / "toy" / "queries.jsonl").read_text().replace("q", "Q"))
    for line in ("qrels/test.tsv",):
        (other / line).write_text((toy_ds / "toy" / line).read_text().replace("\tq", "\tQ").replace("\nq", "\nQ"))
    for extra in ([], ["task.shards=3"]):
        first, second = run(compose(overrides(
            tmp_path / str(len(extra)), toy_ds, *SMALL_BATCHES, *extra, "task.datasets=[toy,toy2]",
            "+task.catalog.toy2={split: test}")))
        assert first.data_fingerprint != second.data_fingerprint
        assert first.details["embedding_cache_hit"] is False and second.details["embedding_cache_hit"] is True
        if extra:
            assert second.details["shards_from_cache"] == 3


# ------------------------------------------------------------------------------------------------ exact MaxSim
def _maxsim_shards_equal_unsharded(common: list[str]) -> None:
    """K = 1, 2, 3, 7 give the unsharded exact-MaxSim top-100 lists and scores, so the same nDCG@10 (scored at K=7)."""
    plan = planning.plan(compose(common))
    model, _ = compute.load_model(plan)
    (entry,) = entries(plan.settings)
    ds = score.loaded(plan, entry)
    inner = compute.retriever(plan, model, {"run": "test"})
    score.prepare(plan, inner, entry)
    want_s, want_i = _search(inner, ds)
    want_m, _, _ = evaluate(inner, ds, top_k=100)
    for k in (1, 2, 3, 7):
        other, _, sharded = _retrievers(compose([*common, f"task.shards={k}"]), model)
        score.prepare(other, sharded, entry)
        got_s, got_i = _search(sharded, ds)
        assert len(sharded.plan) == k
        np.testing.assert_array_equal(got_i, want_i)
        np.testing.assert_array_equal(got_s, want_s)
    assert evaluate(sharded, ds, top_k=100)[0] == want_m


def test_maxsim_shards_equal_unsharded(tmp_path: Path, toy_ds: Path) -> None:
    _maxsim_shards_equal_unsharded(colbert_overrides(tmp_path, toy_ds, "task.train=false", "task.batch_tokens=512",
                                                     "task.document_length=64"))


# ------------------------------------------------------------------------------------------------ SciFact (real data)
SCIFACT = SHARED_DATA / "scifact"


# MiniLM's encoding and exact MaxSim over all of SciFact take 5-15 minutes each here, so the suite runs them on the
# first 50 queries and 250 documents (every one they judge, then corpus order); HARNESS_TEST_SCIFACT_DOCS=all runs
# them on all 300 queries and 5,183 documents.
SCIFACT_DOCS = os.environ.get("HARNESS_TEST_SCIFACT_DOCS", "250")
SUBSET = [] if SCIFACT_DOCS == "all" else [f"task.max_docs={SCIFACT_DOCS}"]
QUERIES = [] if SCIFACT_DOCS == "all" else ["task.max_queries=50"]
MINILM = ["model=all-minilm-l6-v2", "precision=fp32", *SUBSET, *QUERIES]


def _queries_only(encode):
    """``encode`` for queries; a corpus shard encoded again fails the test (its cache entry was seeded)."""
    def guarded(texts, what):
        if what == "corpus shard":
            pytest.fail("a corpus shard was encoded again: its seeded cache entry was not used")
        return encode(texts, what)
    return guarded


@pytest.mark.slow
@pytest.mark.parametrize("model", [MINILM, TINY], ids=[f"minilm-{SCIFACT_DOCS}-docs", "tiny-modernbert"])
def test_scifact_shards_equal_unsharded(tmp_path_factory, model: list[str]) -> None:
    """K = 1, 2, 3, 7 on SciFact: identical top-100 lists and nDCG@10; all 5,183 documents with the tiny
    ModernBERT, 50 queries and 250 of them (every judged one, then corpus order) with MiniLM unless HARNESS_TEST_SCIFACT_DOCS says
    otherwise (benchmarks/shards.py checks K=4 on all of SciFact with MiniLM). The corpus is encoded
    once unsharded; K=7's first and last shards are encoded for real and must be those rows bit for bit, the
    other shards' cache entries are seeded from them."""
    if not SCIFACT.is_dir():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    tmp = tmp_path_factory.mktemp("scifact")
    common = [*model, "device=cpu", f"task.data_dir={SHARED_DATA}", "task.datasets=[scifact]", "task.train=false",
              *paths(tmp)]
    plan, inner, _ = _retrievers(compose(["task=beir", *common]))
    (entry,) = entries(plan.settings)
    ds = score.loaded(plan, entry)
    want_s, want_i = _search(inner, ds)
    want_m, _, _ = evaluate(inner, ds, top_k=100)
    emb = np.asarray(inner.doc_emb)
    for k in (1, 2, 3, 7):
        sharded = _retrievers(compose(["task=beir", *common, f"task.shards={k}"]), model=inner.model)[2]
        sharded.index(ds)
        real = {0, len(sharded.plan) - 1} if k == 7 else set()
        for i in range(len(sharded.plan)):
            key, pos = sharded._embedding_key(i), sharded.plan.positions(i)
            if i in real:   # encoded for real: must equal the unsharded rows
                sharded.engine.search_shard(sharded._segments(i), len(pos), key, emb[:1], 1, pos)
                np.testing.assert_array_equal(np.load(Path(sharded.engine.cache_dir) / f"{key}.npy"), emb[pos])
            else:   # a cache entry with its claim, as an earlier run of these shards leaves it
                cached_embeddings(sharded.engine.cache_dir, key, lambda pos=pos: emb[pos])
        sharded.engine._encode = _queries_only(sharded.engine._encode)
        got_s, got_i = _search(sharded, ds)
        np.testing.assert_array_equal(got_i, want_i)
        np.testing.assert_array_equal(got_s, want_s)
        assert evaluate(sharded, ds, top_k=100)[0] == want_m


@pytest.mark.slow
def test_scifact_maxsim_shards_equal_unsharded(tmp_path: Path) -> None:
    """Exact MaxSim on SciFact, the tiny ModernBERT as ColBERT (50 queries x 250 documents unless
    HARNESS_TEST_SCIFACT_DOCS=all)."""
    if not SCIFACT.is_dir():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    _maxsim_shards_equal_unsharded([
        "task=colbert", *TINY, "device=cpu", f"task.data_dir={SHARED_DATA}", "task.datasets=[scifact]", "task.index=exact",
        "task.train=false", *SUBSET, *QUERIES, *paths(tmp_path)])


# ------------------------------------------------------------------------------------------------ SLURM
@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_array_of_shards_then_merge_gives_the_unsharded_record(tmp_path: Path) -> None:
    """The paper graph on the local cluster, on all of SciFact with the tiny ModernBERT: ``scifact.shards`` (3 array
    tasks) then the merge (afterok); its record equals an unsharded run's (same run id: sharding is not part of the
    identity), computed here while the cluster runs the graph."""
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    if not SCIFACT.is_dir():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    job = ["device=cpu", f"task.data_dir={SHARED_DATA}", "task.datasets=[scifact]", "task.train=false"]
    work = tmp_path / "graph"
    paper = tmp_path / "paper-shards.yaml"
    paper.write_text(json.dumps({"stages": {"scifact": {"task": "beir", "overrides": job, "shards": 3}},
                                 "leaderboard": False, "min_finished": 0.5, "overrides": [], "launcher": "slurm",
                                 "cluster": "local", "site": None}))
    common = [*TINY, *paths(work)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ledger = work / "paper" / "tiny-modernbert" / "ledger.json"
    try:
        done = subprocess.run([sys.executable, "-m", "harness.paper", f"paper={paper}", *common], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "scifact.shards" in done.stdout and "scifact " in done.stdout
        (want,) = run(compose(["task=beir", *TINY, *job, *paths(tmp_path / "plain")]))
        deadline = time.monotonic() + 900   # the cluster may be busy with another module's jobs
        while not (got := [r for _, r in results.iter_records(work / "results", warn=False)]):
            assert time.monotonic() < deadline, f"no merged record after 15 minutes: {done.stdout}"
            time.sleep(2)
    finally:
        ids = sorted(set(json.loads(ledger.read_text()).values())) if ledger.is_file() else []
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=30)
    (rec,) = got
    assert rec.status == "ok" and rec.details["shards"] == 3 and rec.details["shard_launcher"] == "external"
    assert (rec.run_id, rec.data_fingerprint, rec.metrics) == (want.run_id, want.data_fingerprint, want.metrics)
    assert len(list((work / "cache" / "embeddings" / "shard-topk").glob("*.npz"))) == 3
