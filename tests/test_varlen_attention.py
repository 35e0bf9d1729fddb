"""``harness_varlen``: the packed path (packing, restarting positions, cu_seq_lens, the local window) run through the
attention function's CPU reference equals the padded sdpa model within 1e-5 in fp32, for the single-vector encoder,
a classifier's gradients, ColBERT's queries and documents, BERT and the tiny ModernBERT (window 8 either side,
sequences of up to ~60 tokens, so the window matters); the CUDA branch's dtype handling and kernel calls are
checked with the kernels faked (and torch's kernel signature on meta tensors)."""

from __future__ import annotations

import shutil
import sys
import types
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.encoding.encode import encode
from harness.models import ModelSpec, load_sentence_transformer
from harness.models import varlen_attention as va
from tests.conftest import batching
from tests.test_encode import LONG_TEXTS

ATOL = 1e-5


def _load(path: Path, attn: str, **kw):
    return load_sentence_transformer(ModelSpec.based_on("bert-base", name="t", path=str(path), max_length=128,
                                                        attn_implementation=attn, **kw))[0]


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """A random two-layer BERT (token type ids, learned positions, a pooler) with the tiny ModernBERT's tokenizer."""
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=2000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=256)).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model_dir / name, folder / name)
    return folder


def test_the_window_matters_for_these_texts(tiny_model_dir: Path) -> None:
    """Without the local layers' window the outputs differ: the comparisons below exercise it."""
    model = _load(tiny_model_dir, "sdpa")
    assert model[0].auto_model.config.sliding_window == 8
    q = torch.randn(60, 4, 16)
    cu = torch.tensor([0, 60], dtype=torch.int32)
    windowed = va.reference(q, q, q, cu, scale=None, window=8)
    assert not torch.allclose(windowed, va.reference(q, q, q, cu, scale=None, window=-1), atol=1e-3)


@pytest.mark.parametrize("which", ["modernbert", "bert"])
def test_packed_and_unpadded_equal_padded_sdpa(which: str, tiny_model_dir: Path, tiny_bert_dir: Path) -> None:
    """The encoder's packed rows (cu_seq_lens), sentence-transformers' padded batches unpadded at the model's entry,
    and the threads and prefetch paths all give the padded sdpa embeddings."""
    folder = tiny_model_dir if which == "modernbert" else tiny_bert_dir
    padded = _load(folder, "sdpa")
    varlen = _load(folder, "harness_varlen")
    assert varlen[0].auto_model.config._attn_implementation == "harness_varlen"
    ref = encode(padded, LONG_TEXTS, batching=batching(), device="cpu", pack="off", show_progress=False)
    np.testing.assert_allclose(ref, padded.encode(LONG_TEXTS, batch_size=2), atol=ATOL)
    for budget in (64, 256, 100_000):
        for prefetch in (False, True):
            got = encode(varlen, LONG_TEXTS, device="cpu", batching=batching(batch_tokens=budget),
                         prefetch=prefetch, show_progress=False)
            np.testing.assert_allclose(got, ref, rtol=0, atol=ATOL)
    np.testing.assert_allclose(varlen.encode(LONG_TEXTS, batch_size=3), ref, rtol=0, atol=ATOL)


def test_the_hook_packs_real_tokens_only(tiny_model_dir: Path) -> None:
    """A padded batch reaches the layers as one row of its real tokens with restarting positions and cu_seq_lens."""
    model = _load(tiny_model_dir, "harness_varlen")
    hf = model[0].auto_model
    seen: dict = {}
    real = va.attention_forward

    def spy(module, query, *a, **kw):
        seen.setdefault("shape", tuple(query.shape))
        seen.setdefault("cu", kw.get("cu_seq_lens_q"))
        return real(module, query, *a, **kw)

    from transformers import AttentionInterface

    AttentionInterface.register("harness_varlen", spy)
    try:
        features = model.tokenize(["one two three", "a much longer text with many more words in it"])
        out = hf(**features).last_hidden_state
    finally:
        va.register()
    lengths = features["attention_mask"].sum(1).tolist()
    assert seen["cu"].tolist() == [0, lengths[0], sum(lengths)] and seen["shape"][2] == sum(lengths)
    assert out.shape[:2] == features["input_ids"].shape and (out[0, lengths[0]:] == 0).all()


def test_classifier_logits_and_gradients_equal_padded(tiny_model_dir: Path) -> None:
    """GLUE's classifier: unpadded forward and backward through the reference equal padded sdpa's."""
    from harness.tasks.glue.classification import load_classifier

    def run(attn: str):
        torch.manual_seed(3)                    # the same fresh head
        model = load_classifier(str(tiny_model_dir), 2, attn_implementation=attn)
        ids = torch.randint(5, 1500, (3, 50))
        mask = torch.ones_like(ids)
        mask[1, 12:] = 0
        mask[2, 31:] = 0
        out = model(input_ids=ids, attention_mask=mask, labels=torch.tensor([0, 1, 1]))
        out.loss.backward()
        return out.logits.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}

    logits, grads = run("sdpa")
    logits_v, grads_v = run("harness_varlen")
    torch.testing.assert_close(logits_v, logits, rtol=0, atol=ATOL)
    assert grads.keys() == grads_v.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grads_v[name], grad, rtol=0, atol=ATOL, msg=name)


def test_colbert_queries_and_documents_equal_padded(tiny_model_dir: Path) -> None:
    """Documents unpad; expanded queries (their [MASK] tokens carry embeddings) run padded through the function's
    mask path; both equal padded sdpa's token embeddings."""
    from harness.tasks.retrieval.retrievers.colbert_model import encode_tokens, load_colbert

    def tokens(attn: str, is_query: bool) -> list[np.ndarray]:
        spec = ModelSpec.based_on("modernbert-base", name="t", path=str(tiny_model_dir), attn_implementation=attn)
        model, _ = load_colbert(spec, device="cpu", embedding_size=128, seed=42)
        model.document_length = 64
        out = [None] * len(LONG_TEXTS)
        for idx, embs in encode_tokens(model, LONG_TEXTS, is_query=is_query, device="cpu",
                                       batching=batching(batch_tokens=100),
                                       show_progress=False):
            for i, e in zip(idx, embs, strict=True):
                out[i] = e
        return out

    for is_query in (True, False):
        ref, got = tokens("sdpa", is_query), tokens("harness_varlen", is_query)
        for a, b in zip(ref, got, strict=True):
            np.testing.assert_allclose(b, a, rtol=0, atol=ATOL)


# ------------------------------------------------------------------------------- the CUDA branch, kernels faked
def flash_varlen_refusals(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor) -> list[str]:
    """What the CUDA kernel behind ``aten._flash_attention_forward`` (flash-attention's ``mha_varlen_fwd``, which
    torch vendors) refuses, in its own words; its meta function checks none of it."""
    out = []
    if q.dtype not in (torch.float16, torch.bfloat16):
        out.append("FlashAttention only support fp16 and bf16 data type")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        out.append("query and key/value must have the same dtype")
    if cu.dtype != torch.int32 or not cu.is_contiguous():
        out.append("cu_seqlens must have dtype int32 and be contiguous")
    if any(t.stride(-1) != 1 for t in (q, k, v)):
        out.append("Input tensor must have contiguous last dimension")
    if q.dim() != 3 or k.shape != q.shape or v.shape != q.shape or q.shape[-1] > 256:
        out.append("q, k, v must be [total, heads, head dim <= 256]")
    return out


@pytest.mark.parametrize("weights", ["fp32", "bf16"])
def test_the_real_kernel_op_takes_the_harness_arguments_on_meta_tensors(weights: str, tiny_model_dir: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA branch's binding, executed: a forward of the tiny ModernBERT (fp32 weights, or bf16 weights whose
    ``v`` reaches the kernel as a strided view of the fused qkv projection) gives each layer's q, k, v, cumulative
    lengths and window; the same shapes, strides and dtypes on meta tensors go through :func:`va.varlen` as on
    CUDA, into torch's real ``aten._flash_attention_forward`` (its meta function), with the arguments
    :func:`va.torch_kernel_arguments` binds, which the kernel's own input checks accept."""
    from harness.models.precision import cast_weights

    model = _load(tiny_model_dir, "harness_varlen")
    hf = model[0].auto_model
    if weights == "bf16":
        cast_weights(hf, torch.bfloat16)
    calls: list[tuple] = []
    real_varlen, real_bind = va.varlen, va.torch_kernel_arguments

    def seen(q, k, v, cu, max_len, **kw):
        calls.append((q, k, v, cu, max_len, kw))
        return real_varlen(q, k, v, cu, max_len, **kw)

    monkeypatch.setattr(va, "varlen", seen)
    with torch.inference_mode():
        encode(model, LONG_TEXTS, device="cpu", batching=batching(batch_tokens=100_000), show_progress=False)
    assert {c[5]["window"] for c in calls} == {8, -1}                         # local layers (8 either side), global
    if weights == "bf16":
        assert any(not c[2].is_contiguous() for c in calls)                   # the strided v of the fused projection
    bound: list[tuple] = []

    def bind(*args, **kw):
        bound.append(real_bind(*args, **kw))
        return bound[-1]

    monkeypatch.setattr(va, "varlen", real_varlen)
    monkeypatch.setattr(va, "on_cuda", lambda t: True)
    monkeypatch.setattr(va, "flash_attn_importable", lambda: False)
    monkeypatch.setattr(va, "torch_kernel_arguments", bind)
    schema = [a.name for a in torch.ops.aten._flash_attention_forward.default._schema.arguments]
    for q, k, v, cu, max_len, kw in calls:
        meta = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta") for t in (q, k, v, cu)]
        out = va.varlen(*meta, max_len, **kw)
        assert out.shape == q.shape and out.dtype == q.dtype and out.device.type == "meta"
        args, named = bound[-1]
        assert flash_varlen_refusals(*args[:4]) == [] and args[0].dtype == torch.bfloat16   # fp32: cast around it
        by_name = dict(zip(schema, args, strict=False)) | named               # the op's own argument names
        assert by_name["cum_seq_q"] is by_name["cum_seq_k"] and by_name["max_q"] == by_name["max_k"] == max_len
        assert by_name["dropout_p"] == kw["dropout"] and by_name["is_causal"] is kw["causal"] is False
        assert by_name["return_debug_mask"] is False and by_name["scale"] == kw["scale"]
        assert by_name["window_size_left"] == by_name["window_size_right"] == kw["window"]
    assert len(bound) == len(calls)


@pytest.mark.parametrize(("flash", "dtype", "kernel_dtype"), [
    (False, torch.float32, torch.bfloat16),        # fp32 weights: bf16 around the kernel, fp32 out
    (True, torch.float32, torch.bfloat16),         # explicit flash_attention_2 with fp32 weights works too
    (False, torch.bfloat16, torch.bfloat16),       # precision=bf16: bf16 throughout
])
def test_cuda_branch_casts_and_calls_the_kernel(monkeypatch: pytest.MonkeyPatch, flash: bool, dtype: torch.dtype,
                                                kernel_dtype: torch.dtype) -> None:
    calls: list[dict] = []

    def fake(q, k, v, cu, max_len, *, scale, window, causal, dropout):
        calls.append({"dtype": q.dtype, "cu": cu.dtype, "max": max_len, "window": window})
        return va.reference(q.float(), k.float(), v.float(), cu, scale=scale, window=window).to(q.dtype)

    def fake_flash(q, k, v, cu_q, cu_k, max_q, max_k, *, dropout_p, softmax_scale, causal, window_size):
        assert window_size == (8, 8) and cu_q is cu_k and max_q == max_k
        return fake(q, k, v, cu_q, max_q, scale=softmax_scale, window=window_size[0], causal=causal, dropout=dropout_p)

    monkeypatch.setattr(va, "on_cuda", lambda t: True)
    monkeypatch.setattr(va, "flash_attn_importable", lambda: flash)
    monkeypatch.setattr(va, "torch_kernel", fake)
    monkeypatch.setitem(sys.modules, "flash_attn", types.SimpleNamespace(flash_attn_varlen_func=fake_flash))
    q = torch.randn(30, 2, 8).to(dtype)
    cu = torch.tensor([0, 12, 30])
    out = va.varlen(q, q, q, cu, 18, scale=None, window=8)
    assert calls == [{"dtype": kernel_dtype, "cu": torch.int32, "max": 18, "window": 8}]
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), va.reference(q.float(), q.float(), q.float(), cu, scale=None, window=8),
                               atol=3e-2, rtol=0)


def test_dpr_training_through_the_varlen_path_equals_padded(tmp_path: Path, toy_beir: Path) -> None:
    """task=beir trains (MNRL, padded batches unpadded at the model's entry) and evaluates through harness_varlen as
    through sdpa: the same loss curve and the same nDCG."""
    from harness.run.runner import run
    from tests.conftest import compose, write_triplets
    from tests.test_retrieval_runs import overrides

    triplets = write_triplets(tmp_path / "triplets.tsv")
    recs = {}
    for attn in ("sdpa", "harness_varlen"):
        (recs[attn],) = run(compose(overrides(
            tmp_path / attn, toy_beir, "task.train_data.source=file", f"task.train_data.path={triplets}",
            "task.batch_size=8", "task.gradient_accumulation_steps=1", "task.lr=1e-4", "task.loss=mnrl",
            f"model.attn_implementation={attn}", "device=cpu")))
    ref, got = recs["sdpa"], recs["harness_varlen"]
    assert got.status == "ok" and got.model["trained"]["steps"] == ref.model["trained"]["steps"] == 6
    assert got.model["trained"]["train_loss"] == pytest.approx(ref.model["trained"]["train_loss"], abs=1e-5)
    for name, value in ref.metrics.items():
        assert got.metrics[name] == pytest.approx(value, abs=1e-6), name


def test_the_corpus_cache_keeps_unpadded_and_padded_encodings_apart(tmp_path) -> None:
    """The unpadded GPU path computes attention in bf16: its cached embeddings must never be read by a padded
    run (or the reverse), so the resolved attention enters the cache identity, and padded sdpa keeps the old key."""
    from harness.run import planning
    from harness.tasks.retrieval.compute import cache_identity
    from tests.conftest import TINY_MODEL, compose

    cfg = compose(["task=beir", "model=modernbert-base", f"model.path={TINY_MODEL}", "task.train=false",
                   "device=cpu", f"paths.results={tmp_path}"])
    plan = planning.plan(cfg)
    block = {"fingerprint": "w"}
    padded = cache_identity(plan, block | {"attention": {"implementation": "sdpa"}}, None)
    assert padded == cache_identity(plan, block, None) and "attention" not in padded
    unpadded = cache_identity(plan, block | {"attention": {"implementation": "harness_varlen"}}, None)
    assert unpadded["attention"] == "harness_varlen" and unpadded != padded


# ------------------------------------------------------------------------------- issue 46: positions, one sync
def test_modernbert_positions_restart_at_every_sequence(tiny_model_dir: Path) -> None:
    """Rotary attention depends on position offsets only, so positions that run on across a packed row leave every
    output the same (BERT's learned positions would show it; ModernBERT's would not): check the position ids the
    rotary embedding receives, through the encoder's packed rows and the unpadding hook's."""
    model = _load(tiny_model_dir, "harness_varlen")
    hf = model[0].auto_model
    seen: list[torch.Tensor] = []
    real = hf.rotary_emb.forward

    def spy(x, position_ids, layer_type=None):
        seen.append(position_ids.detach().clone())
        return real(x, position_ids, layer_type)

    hf.rotary_emb.forward = spy
    texts = ["one two three", "a much longer text with many more words in it", "six"]
    lengths = sorted(model.tokenize(texts)["attention_mask"].sum(1).tolist())

    def runs(positions: torch.Tensor) -> list[int]:
        """The lengths of the runs 0, 1, 2, ... in a packed row's positions (one per sequence if they restart)."""
        flat = positions.reshape(-1).tolist()
        assert all(p == 0 or p == q + 1 for q, p in pairwise(flat)) and flat[0] == 0
        starts = [i for i, p in enumerate(flat) if p == 0] + [len(flat)]
        return sorted(b - a for a, b in pairwise(starts))

    encode(model, texts, device="cpu", batching=batching(batch_tokens=100_000), show_progress=False)
    assert seen and all(runs(p) == lengths for p in seen)          # the encoder's packed rows
    seen.clear()
    model.encode(texts, batch_size=3)                               # a padded batch -> the hook's packed row
    assert seen and all(runs(p) == lengths for p in seen)


def test_the_unpadding_hook_synchronises_once() -> None:
    """Reading a device tensor on the host (nonzero, int(), .cpu(), ...) waits for the device: the hook does it once
    per forward. A tensor subclass stands for device tensors and counts every such read."""
    from harness.models.varlen_attention import pack_padded

    reads: list[str] = []
    host_reads = {"cpu", "item", "tolist", "nonzero", "__int__", "__index__", "__bool__", "numpy", "__float__"}

    class OnDevice(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if name in host_reads:
                reads.append(name)
            out = super().__torch_function__(func, types, args, kwargs or {})
            return out.as_subclass(torch.Tensor) if name == "cpu" else out     # on the host now: plain

    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    ids = torch.arange(12).view(3, 4)
    packed, (_, batch, width) = pack_padded({"input_ids": ids.as_subclass(OnDevice),
                                                 "attention_mask": mask.as_subclass(OnDevice)})
    assert len(reads) == 1, reads
    assert packed["cu_seq_lens_q"].tolist() == [0, 3, 5, 9] and packed["max_length_q"] == 4
    assert packed["input_ids"].tolist() == [[0, 1, 2, 4, 5, 8, 9, 10, 11]]
    assert packed["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]] and (batch, width) == (3, 4)


# ------------------------------------------------------------------------------- issue 54: what the records say
def test_the_records_carry_the_dtype_the_attention_ran_in(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fp32 weights on the flash kernel run their attention in bf16 (q, k, v cast around it): the record's attention
    block and task=efficiency's details say so beside the weights' fp32; the CPU reference runs in fp32, and
    transformers' sdpa under bf16 autocast in bf16."""
    from harness.models import autocast
    from harness.models.kernel_calls import TORCH_FLASH
    from harness.tasks.efficiency.compute import attention_facts

    spec = ModelSpec.based_on("modernbert-base", name="t", path=str(tiny_model_dir), max_length=128,
                              attn_implementation="harness_varlen")
    model, block = load_sentence_transformer(spec)
    hf = model[0].auto_model
    assert block["attention"]["dtype"] is None                                 # nothing ran yet
    model.encode(["one text", "and another one"])
    assert block["attention"]["dtype"] == "float32" and block["attention"]["kernel"].startswith("reference")
    monkeypatch.setattr(va, "on_cuda", lambda t: True)
    monkeypatch.setattr(va, "flash_attn_importable", lambda: False)
    monkeypatch.setattr(va, "torch_kernel", lambda q, k, v, cu, n, *, scale, window, causal, dropout: va.reference(
        q, k, v, cu, scale=scale, window=window))
    mark = hf._harness_calls.mark()
    model.encode(["one text", "and another one"])
    facts = attention_facts("auto", hf, mark)
    assert facts["attention_kernel"] == TORCH_FLASH and facts["attention_dtype"] == "bfloat16"
    assert next(hf.parameters()).dtype == torch.float32                        # the weights' own dtype is fp32
    assert block["attention"]["dtype"] == "float32 (4 calls), bfloat16 (4 calls)"   # both runs, each counted
    sdpa, _ = load_sentence_transformer(replace(spec, attn_implementation="sdpa"))
    with autocast("bf16", "cpu"):
        sdpa.encode(["one text"])
    assert attention_facts("sdpa", sdpa[0].auto_model)["attention_dtype"] == "bfloat16"
