"""Promise "every cache entry is built once and published atomically": processes started together that all need the
same missing (or invalid) entry — tokenised GLUE splits, embeddings, ColBERT token stores, shard top-k lists — never
fail, all read identical content, and exactly one of them builds it (the others wait for its lock beside the entry
and read the finished one); an invalid entry is replaced while others read, and none sees it half-written; a lock
left by a dead process is taken over, and a live one is waited for, then named in one line."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import socket
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest

from harness.core import cache_entry
from harness.core.errors import HarnessError
from harness.tasks.glue.data import Split
from harness.tasks.retrieval.data.dataset import in_memory
from harness.tasks.retrieval.retrievers import shards
from harness.tasks.retrieval.retrievers.embedding_cache import cached_embeddings
from harness.tasks.retrieval.retrievers.token_store import TokenStore
from tests.conftest import TINY_MODEL

PROCESSES = 4
READS = 3          # each process reads its entry this many times (the first read races the build)
KEY = "0123456789abcdef01234567"

Build = Callable[[str], None]   # a builder calls it once per build, naming what it builds


# ------------------------------------------------------------------------------------------------ the race
def _count_build(count: Path, what: str, arrived: Any) -> None:
    """Record one build, then hold the lock until every process has asked for the entry (a safety net of 30 s:
    the assertions never depend on it, it only makes the processes overlap)."""
    with open(count, "a") as fh:
        fh.write(what + "\n")
    deadline = time.monotonic() + 30
    while arrived.value < PROCESSES and time.monotonic() < deadline:
        time.sleep(0.005)


def _worker(get: Callable[[Build], Any], out: Path, i: int, gate: Any, arrived: Any) -> None:
    try:
        gate.wait(60)
        with arrived.get_lock():
            arrived.value += 1
        got = [get(lambda what: _count_build(out / "builds.txt", what, arrived)) for _ in range(READS)]
        (out / f"result-{i}.pkl").write_bytes(pickle.dumps(got))
    except BaseException:
        (out / f"error-{i}.txt").write_text(traceback.format_exc())
        raise


def race(get: Callable[[Build], Any], out: Path) -> tuple[list[Any], list[str]]:
    """PROCESSES forked processes, released together, each calling ``get`` READS times: (every result, the builds)."""
    ctx = multiprocessing.get_context("fork")
    gate, arrived = ctx.Event(), ctx.Value("i", 0)
    out.mkdir(parents=True, exist_ok=True)
    procs = [ctx.Process(target=_worker, args=(get, out, i, gate, arrived)) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    gate.set()
    for p in procs:
        p.join(120)
    errors = [e.read_text() for e in sorted(out.glob("error-*.txt"))]
    assert not errors, errors[0]
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    results = [r for i in range(PROCESSES) for r in pickle.loads((out / f"result-{i}.pkl").read_bytes())]
    builds = (out / "builds.txt").read_text().splitlines() if (out / "builds.txt").exists() else []
    return results, builds


def no_build(what: str) -> None:
    raise AssertionError(f"built {what} again")


def same(a: Any, b: Any) -> bool:
    return pickle.dumps(a) == pickle.dumps(b)


# ------------------------------------------------------------------------------------------------ the cache kinds
def embeddings(cache: Path) -> Callable[[Build], Any]:
    def get(built: Build) -> Any:
        def compute() -> np.ndarray:
            built("embeddings")
            return np.arange(4000, dtype=np.float32).reshape(1000, 4) / 7

        return np.array(cached_embeddings(cache, KEY, compute)[0])
    return get


def corrupt_embeddings(cache: Path) -> None:
    path = cache / f"{KEY}.npy"
    blob = bytearray(path.read_bytes())
    blob[-64:] = bytes(64)                       # same size, other content: its claim's hash fails
    path.write_bytes(bytes(blob))


DOCS = [np.full((n, 8), n / 10, dtype=np.float32) for n in (3, 5, 2, 7)]


def token_store(cache: Path) -> Callable[[Build], Any]:
    def get(built: Build) -> Any:
        def batches():
            built("token store")
            return iter([(np.arange(len(DOCS)), DOCS)])

        store, _ = TokenStore.cached(cache / KEY, len(DOCS), batches, {"test": True})
        return [np.array(store.doc(i)) for i in range(len(store))]
    return get


def corrupt_token_store(cache: Path) -> None:
    tokens = cache / KEY / "tokens.f16"
    tokens.write_bytes(tokens.read_bytes()[:-32])   # truncated


SPLIT = Split([f"the cat sat on mat {i}" for i in range(40)], None, [i % 2 for i in range(40)])


def glue(cache: Path) -> Callable[[Build], Any]:
    import datasets  # noqa: F401  (imported before the processes fork: once, not in each of them)
    from transformers import AutoTokenizer

    from harness.tasks.glue import tokens as c

    def get(built: Build) -> Any:
        original = c.tokenize

        def counted(*args: Any, **kwargs: Any) -> Any:
            built("glue")
            return original(*args, **kwargs)

        tok = AutoTokenizer.from_pretrained(TINY_MODEL)
        with mock.patch.object(c, "tokenize", counted):
            return c.cached_tokenize(SPLIT, tok, 16, False, cache / "glue-tokenized" / "k" / "dev-validation").to_dict()
    return get


def corrupt_glue(cache: Path) -> None:
    (arrow,) = (cache / "glue-tokenized" / "k" / "dev-validation").glob("*.arrow")
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])


TOY = in_memory("toy", "test", [f"d{i}" for i in range(12)], [""] * 12,
                [f"document {'word ' * (i % 5)}number {i}" for i in range(12)], queries={}, qrels={})
QUERIES = ["word number", "document 3", "number"]


def _vectors(texts: list[str]) -> np.ndarray:
    return np.array([[len(t), t.count("o"), sum(map(ord, t)) % 11] for t in texts], dtype=np.float32)


class ToyEngine:
    """A shard engine over toy vectors (numpy only), counting its shard searches."""

    kind = "toy"

    def __init__(self, cache: Path, built: Build) -> None:
        self.cache_dir, self.cache_identity, self.built = str(cache), {"model": "toy"}, built

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        return np.array([len(t.split()) for t in texts], dtype=np.int64)

    def batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        order = np.argsort(-lengths, kind="stable")
        return [order[i : i + 3] for i in range(0, len(order), 3)]

    def query_embeddings(self, queries: list[str]) -> np.ndarray:
        return _vectors(queries)

    def search_shard(self, segments: list, n_docs: int, key: str, queries: np.ndarray, top_k: int,
                     rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        self.built(f"shard-{key}")
        scores = queries @ _vectors([t for read in segments for t in read()]).T
        idx = np.stack([np.lexsort((rank, -row))[:top_k] for row in scores])
        return np.take_along_axis(scores, idx, axis=1), idx, False

    def search_settings(self) -> dict[str, Any]:
        return {"similarity": "dot"}


def shard_topk(cache: Path) -> Callable[[Build], Any]:
    def get(built: Build) -> Any:
        settings = shards.ShardSettings(shards=2, shard_tokens=0, shard=None, shard_launcher="sequential")
        sharded = shards.ShardedRetriever(ToyEngine(cache, built), settings)
        sharded.index(TOY)
        out = []
        for i in range(len(sharded.plan)):
            sharded.run_shard(i, QUERIES, 3)
            scores, local, _ = sharded._require(i, shards.texts_key(QUERIES), 3, len(QUERIES))
            out.append((scores.tolist(), local.tolist()))
        return out
    return get


def corrupt_shards(cache: Path) -> None:
    for path in (cache / "shard-topk").glob("*.npz"):
        path.write_bytes(b"PK\x03\x04 not a whole zip")


KINDS = {"glue": (glue, corrupt_glue, 1), "embeddings": (embeddings, corrupt_embeddings, 1),
         "token store": (token_store, corrupt_token_store, 1), "shard top-k": (shard_topk, corrupt_shards, 2)}


# ------------------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("kind", KINDS)
def test_processes_needing_a_missing_entry_build_it_once_and_read_the_same(kind: str, tmp_path: Path) -> None:
    make, _, entries = KINDS[kind]
    cache = tmp_path / "cache"
    results, builds = race(make(cache), tmp_path / "race")
    assert all(same(r, results[0]) for r in results)
    assert all(n == 1 for n in Counter(builds).values()), builds      # each entry built once, by one process
    if kind == "shard top-k":
        builds = [b for b in builds if b.startswith("shard-")]          # (its token lengths are an embedding entry)
    assert len(builds) == entries
    assert same(make(cache)(no_build), results[0])                      # what a later run reads, with no build
    leftovers = [p for p in cache.rglob("*") if p.name.endswith((".lock", ".tmp")) or ".aside-" in p.name]
    assert leftovers == []                                              # locks released, nothing written aside left


@pytest.mark.parametrize("kind", KINDS)
def test_an_invalid_entry_is_replaced_once_while_others_read(kind: str, tmp_path: Path) -> None:
    """The entry is there but fails its claim check: one process moves it aside and builds it again; the others
    (reading READS times each, from the moment the replacement starts) never fail and never see it half-written."""
    make, corrupt, entries = KINDS[kind]
    cache = tmp_path / "cache"
    want = make(cache)(lambda what: None)
    corrupt(cache)
    results, builds = race(make(cache), tmp_path / "race")
    assert all(same(r, want) for r in results)
    assert len(builds) == entries and len(set(builds)) == entries, builds


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def write_lock(path: Path, host: str, pid: int, age: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": host, "pid": pid, "token": "theirs", "started": "2026-01-02T03:04:05"}))
    if age:
        os.utime(path, (time.time() - age, time.time() - age))
    return path


@pytest.mark.parametrize("owner", ["a dead process on this host", "silent for longer than stale_after"])
def test_a_dead_builders_lock_is_taken_over(owner: str, tmp_path: Path) -> None:
    path = tmp_path / f"{KEY}.npy"
    if owner.startswith("a dead"):
        lock = write_lock(cache_entry.lock_path(path), socket.gethostname(), dead_pid())
    else:
        lock = write_lock(cache_entry.lock_path(path), "node-17", 4242, age=cache_entry.STALE_AFTER + 60)
    emb, hit = cached_embeddings(tmp_path, KEY, lambda: np.ones((2, 3), dtype=np.float32))
    assert not hit and np.array_equal(emb, np.ones((2, 3))) and path.exists()
    assert not lock.exists() and not list(tmp_path.glob("*.lock*"))


def test_a_live_builder_is_waited_for_then_named_in_one_line(tmp_path: Path) -> None:
    lock = write_lock(tmp_path / "entry.lock", "node-17", 4242)
    with pytest.raises(HarnessError) as exc, cache_entry.entry_lock(lock, "embedding cache entry", wait=0.05):
        pass
    message = str(exc.value)
    assert "\n" not in message and "node-17:4242" in message and str(lock) in message and "delete" in message
    assert lock.exists()                                          # another process's lock is left alone


def test_a_reader_that_meets_a_vanishing_entry_reads_again_under_the_lock(tmp_path: Path) -> None:
    """A file that vanishes under an unlocked reader (a bad entry being moved aside) is no failure: the locked read
    finds the finished entry, and nothing is built or set aside."""
    entry = tmp_path / "entry"
    entry.write_text("finished")
    reads: list[str] = []

    def read() -> str:
        reads.append("read")
        if len(reads) == 1:
            raise FileNotFoundError(entry)
        return entry.read_text()

    got, built = cache_entry.get_or_build(read, lambda: pytest.fail("built"), entry, what="entry")
    assert (got, built, len(reads)) == ("finished", False, 2) and entry.exists()


def test_publish_never_replaces_an_entry(tmp_path: Path) -> None:
    for make in (lambda p: p.write_text("x"), lambda p: (p.mkdir(), (p / "f").write_text("x"))):
        theirs, ours = tmp_path / "entry", tmp_path / ".entry.tmp"
        for p in (theirs, ours):
            make(p)
        (ours / "f" if ours.is_dir() else ours).write_text("ours")
        assert cache_entry.publish(ours, theirs) is False and not ours.exists()
        assert (theirs / "f" if theirs.is_dir() else theirs).read_text() == "x"
        assert cache_entry.publish(theirs, tmp_path / "fresh") is True
        cache_entry.set_aside(tmp_path / "fresh")
        assert list(tmp_path.iterdir()) == []


def test_a_lock_left_empty_by_a_killed_creator_is_taken_over_after_a_short_grace(tmp_path: Path) -> None:
    """A process killed between the lock's exclusive create and writing its owner leaves an empty lock: it is a fresh
    lock being written for a few seconds, then stale (not a live one until ``stale_after``, which blocked a rerun)."""
    path = tmp_path / "entry.lock"
    path.write_text("")                                               # just created, owner not written yet
    assert cache_entry.FileLock(path).try_acquire(stale_after=3600) is not None
    old = time.time() - cache_entry.EMPTY_GRACE - 5
    os.utime(path, (old, old))                                        # its creator was killed before writing it
    lock = cache_entry.FileLock(path)
    assert lock.try_acquire(stale_after=3600) is None                 # taken over at once, not after an hour
    assert json.loads(path.read_text())["token"] == lock.token
    lock.release()
