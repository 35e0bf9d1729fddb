"""Issue 46's options of the GPU path, checked on the CPU: bf16 inference on CUDA runs on bf16 weights (not
autocast over fp32 ones) and says which ran, in the record and the corpus-cache identity; ``compile=true`` wraps
the encoder's forward (counted, off on the CPU, in task=efficiency's identity only where it is on); task=efficiency
runs fp32 matmuls as the authors' notebooks did (TF32 off) and records it."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.models import ModelSpec, autocast_for, cast_for_inference, load_sentence_transformer
from tests.conftest import TINY_MODEL, compose


def _tiny(attn: str = "sdpa"):
    return load_sentence_transformer(ModelSpec.based_on("modernbert-base", name="t", path=str(TINY_MODEL),
                                                        max_length=64, attn_implementation=attn))


def test_bf16_inference_on_cuda_casts_the_weights_and_cpu_keeps_autocast() -> None:
    model, _ = _tiny()
    assert cast_for_inference(model, "fp32", "cuda") == "fp32"
    assert cast_for_inference(model, "bf16", "cpu") == "autocast bf16 over fp32 weights"
    assert next(model.parameters()).dtype == torch.float32
    assert isinstance(autocast_for(model, "bf16", "cpu"), torch.autocast)
    assert cast_for_inference(model, "bf16", "cuda:0") == "bf16 weights"      # cast in place (no device moved)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert isinstance(autocast_for(model, "bf16", "cuda"), contextlib.nullcontext)   # LayerNorm stays bf16


def test_bf16_weights_keep_the_rotary_frequencies_in_fp32() -> None:
    """``model.to(bf16)`` would cast ModernBERT's non-persistent ``inv_freq`` buffers too (8 bits: at position 2,047
    an angle is off by up to ~4 radians); cast_for_inference keeps them fp32, as transformers' ``dtype=`` loading
    does, and a 2,048-token bf16 forward is closer to the fp32 one than with the buffers cast. The random model's
    attention is made sharp enough for positions to matter (init 0.1, q/k/v projections x4: at the default 0.02 the
    attention output is a thousandth of the residual stream and no rotary error shows)."""
    import copy

    from transformers import ModernBertConfig, ModernBertModel

    torch.manual_seed(0)
    config = ModernBertConfig(vocab_size=2000, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                              num_attention_heads=4, local_attention=16, pad_token_id=0, cls_token_id=2,
                              sep_token_id=3, bos_token_id=2, eos_token_id=3, initializer_range=0.1,
                              attn_implementation="sdpa")
    fp32 = ModernBertModel(config).eval()
    with torch.no_grad():
        for layer in fp32.layers:
            layer.attn.Wqkv.weight.mul_(4)
    rotary = [name for name, _ in fp32.named_buffers() if name.endswith("inv_freq")]
    assert len(rotary) == 4                                   # global and local, each with its original copy
    ours, cast = copy.deepcopy(fp32), copy.deepcopy(fp32).to(torch.bfloat16)
    assert cast_for_inference(ours, "bf16", "cuda") == "bf16 weights"
    buffers = dict(ours.named_buffers())
    assert {buffers[name].dtype for name in rotary} == {torch.float32} and {p.dtype for p in ours.parameters()} == {
        torch.bfloat16}
    assert all(torch.equal(buffers[name], dict(fp32.named_buffers())[name]) for name in rotary)
    ids = torch.randint(100, 2000, (1, 2048), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref = fp32(input_ids=ids).last_hidden_state
        err = {name: float((m(input_ids=ids).last_hidden_state.float() - ref).norm() / ref.norm())
               for name, m in (("fp32 buffers", ours), ("cast buffers", cast))}
    assert err["fp32 buffers"] < 0.6 * err["cast buffers"], err      # measured: 0.038 vs 0.095


def test_the_retrieval_run_records_what_ran_and_keys_the_cache_by_it(tmp_path: Path) -> None:
    from harness.run import planning
    from harness.tasks.retrieval import compute

    cfg = compose(["task=beir", "model=modernbert-base", f"model.path={TINY_MODEL}", "model.max_length=512",
                   "task.train=false", "device=cpu", f"paths.results={tmp_path}", "precision=bf16"])
    plan = planning.plan(cfg)
    model, block = compute.load_model(plan)
    before = compute.cache_identity(plan, block, None)
    compute.for_inference(plan, model, block)              # the CPU: autocast over fp32 weights, as before
    assert block["inference"] == {"precision": "bf16", "runs": "autocast bf16 over fp32 weights", "compiled": False}
    assert compute.cache_identity(plan, block, None) == before
    model, block = compute.load_model(plan)
    compute.for_inference(replace(plan, device="cuda"), model, block)   # a GPU: the weights themselves in bf16
    assert block["inference"]["runs"] == "bf16 weights" and next(model.parameters()).dtype == torch.bfloat16
    assert compute.cache_identity(plan, block, None) == {**before, "cast": "bf16 weights"}
    fp32 = planning.plan(compose(["task=beir", "model=modernbert-base", f"model.path={TINY_MODEL}",
                                  "model.max_length=512", "task.train=false", "device=cpu", f"paths.results={tmp_path}",
                                  "precision=fp32"]))
    model, block = compute.load_model(fp32)
    compute.for_inference(fp32, model, block)
    assert "inference" not in block                        # fp32 records as before


def test_compile_wraps_the_forward_and_counts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward goes through torch.compile (faked here: compiling needs a GPU to be worth it), the unpadding
    hook stays outside it, and the record's kernel says the calls were compiled, not seen one by one."""
    from harness.models.compiled import compile_encoder, compiled
    from harness.models.kernel_calls import COMPILED, watch

    seen: list[dict] = []

    def fake_compile(fn, **kw):
        seen.append(kw)
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)
    model, _ = _tiny("harness_varlen")
    texts = ["one two three", "four five six seven"]
    ref = model.encode(texts)
    assert compile_encoder(model[0].auto_model) and not compile_encoder(model[0].auto_model) and seen == [
        {"dynamic": True, "backend": "inductor"}]
    assert compiled(model[0].auto_model)
    np.testing.assert_allclose(model.encode(texts), ref, atol=1e-6, rtol=0)
    assert watch(model[0].auto_model).snapshot()[COMPILED] == 1


def test_compile_enters_the_efficiency_identity_only_where_it_is_on(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    from harness.run.planning import planner_of
    from harness.tasks.efficiency.planner import EfficiencyPlanner

    base = ["task=efficiency", "model=modernbert-base", f"model.path={TINY_MODEL}", "device=cpu",
            f"paths.results={tmp_path}", "task.n_docs=4"]
    off = planner_of(compose(base)).cells()[0].run_id
    assert planner_of(compose([*base, "compile=true"])).cells()[0].run_id == off   # CPU: ignored
    monkeypatch.setattr(EfficiencyPlanner, "compiled", property(lambda self: bool(self.setup.cfg.get("compile"))))
    assert planner_of(compose(base)).cells()[0].run_id == off
    assert planner_of(compose([*base, "compile=true"])).cells()[0].run_id != off
    beir = ["task=beir", "model=modernbert-base", f"model.path={TINY_MODEL}", "device=cpu", "task.train=false",
            f"paths.results={tmp_path}"]
    assert planner_of(compose(beir)).cells()[0].run_id == planner_of(
        compose([*beir, "compile=true"])).cells()[0].run_id                          # changes no retrieval number


def test_fp32_matmuls_as_the_paper_and_the_setting_restored() -> None:
    from harness.tasks.efficiency.throughput import paper_matmul

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")               # an environment that turned TF32 on
    try:
        with paper_matmul("cuda") as facts:
            assert torch.get_float32_matmul_precision() == "highest"
            assert facts == {"float32_matmul_precision": "highest", "tf32": False}
        assert torch.get_float32_matmul_precision() == "high"
        with paper_matmul("cpu") as facts:
            assert facts == {"float32_matmul_precision": "highest"}
    finally:
        torch.set_float32_matmul_precision(before)
