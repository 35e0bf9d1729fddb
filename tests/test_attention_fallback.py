"""Issue 46: where the flash kernels cannot run (compute capability < 8.0, a head size above 256 or not a multiple
of 8), ``auto`` falls back to padded sdpa, on one line and in the record, and an explicit ``harness_varlen`` is
refused before any work; the record's kernel comes from counted calls, not from the settings; a
sentence-transformers folder whose transformer config is not at its root resolves like the plain folder. GPUs are
faked (compute capability, CUDA present), as the other attention tests fake them."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import HarnessError
from harness.models import ModelSpec, load_sentence_transformer
from harness.models import attention as att
from harness.models import varlen_attention as va
from harness.models.load import attention_for, attention_record


def _gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], flash: bool = False) -> None:
    monkeypatch.setattr(att, "cuda_available", lambda: True)
    monkeypatch.setattr(att, "cuda_capability", lambda device: capability)
    monkeypatch.setattr(att, "flash_attn_importable", lambda: flash)


def _with_heads(tmp_path: Path, tiny_model_dir: Path, head_dim: int, heads: int = 2) -> Path:
    """A copy of the tiny ModernBERT's folder whose config says ``heads`` heads of ``head_dim``."""
    folder = tmp_path / f"head-{head_dim}"
    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_size=head_dim * heads, num_attention_heads=heads)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(("capability", "head_dim", "expected"), [
    ((7, 0), 16, "sdpa"),                 # V100: no flash kernel
    ((7, 5), 16, "sdpa"),                 # T4
    ((9, 0), 68, "sdpa"),                 # a head size that is not a multiple of 8
    ((9, 0), 264, "sdpa"),                # above 256
    ((8, 0), 16, "harness_varlen"),       # A100
    ((9, 0), 72, "harness_varlen"),       # 72 = 9 x 8 <= 256: the kernels take it
    ((8, 9), 256, "harness_varlen"),
])
def test_auto_falls_back_to_sdpa_where_the_flash_kernel_cannot_run(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path, tiny_model_dir: Path,
        capability: tuple[int, int], head_dim: int, expected: str) -> None:
    _gpu(monkeypatch, capability)
    folder = _with_heads(tmp_path, tiny_model_dir, head_dim)
    assert att.resolve_for("auto", "modernbert", "cuda:0", head_dim=head_dim, dtype="float32") == expected
    with caplog.at_level(logging.WARNING):
        assert attention_for("auto", str(folder), "cuda", dtype="float32") == expected
    lines = [r.getMessage() for r in caplog.records if "attn_implementation=auto -> sdpa" in r.getMessage()]
    if expected == "sdpa":                # said once, on one line, with the reason
        (line,) = lines
        assert "\n" not in line and ("compute capability" in line or f"head size {head_dim}" in line)
    else:
        assert lines == []
    assert attention_for("auto", str(folder), "cpu") == "sdpa"          # a CPU run says nothing: nothing fell back
    assert len([r for r in caplog.records if "-> sdpa" in r.getMessage()]) == len(lines)


def test_the_fallback_is_in_the_record(monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path) -> None:
    model, _ = load_sentence_transformer(ModelSpec.based_on("modernbert-base", name="t", path=str(tiny_model_dir),
                                                            max_length=64))
    _gpu(monkeypatch, (7, 0))
    block = attention_record("auto", model[0].auto_model, "cuda")["attention"]
    assert block["implementation"] == "sdpa" and block["unpadded"] is False
    assert block["fallback"].startswith("compute capability 7.0")
    _gpu(monkeypatch, (9, 0))                       # a GPU the kernels run on, sdpa by choice: no fallback noted
    assert "fallback" not in attention_record("sdpa", model[0].auto_model, "cuda").get("attention", {})


@pytest.mark.parametrize("requested", ["harness_varlen", "flash_attention_2"])
def test_explicit_varlen_is_refused_before_any_work(monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path,
                                                    tmp_path: Path, requested: str) -> None:
    """On a GPU the kernels cannot run, asking for them is one line naming why and the fix, raised before the
    weights load."""
    from sentence_transformers import models

    _gpu(monkeypatch, (7, 5), flash=True)
    monkeypatch.setattr(models.Transformer, "__init__", lambda *a, **k: pytest.fail("the weights started loading"))
    spec = ModelSpec.based_on("modernbert-base", name="t", path=str(tiny_model_dir), attn_implementation=requested)
    with pytest.raises(HarnessError) as err:
        load_sentence_transformer(spec, device="cuda")
    message = str(err.value)
    assert "\n" not in message and "compute capability 7.5" in message and "attn_implementation=auto" in message
    _gpu(monkeypatch, (9, 0), flash=True)
    odd = _with_heads(tmp_path, tiny_model_dir, 68)
    with pytest.raises(HarnessError, match="head size 68"):
        attention_for(requested, str(odd), "cuda")
    assert attention_for("harness_varlen", str(odd), "cpu") == "harness_varlen"   # the CPU reference takes any


def test_the_recorded_kernel_comes_from_counted_calls(monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path) -> None:
    """Before any forward the record names no kernel; after encoding, the kernel each call really took, with its
    count (4 layers per forward): here the CPU reference, then torch's flash kernel once the CUDA branch is taken
    (faked), although the settings (a CPU model) would still name the reference."""
    from harness.encoding.encode import encode
    from tests.conftest import batching

    spec = ModelSpec.based_on("modernbert-base", name="t", path=str(tiny_model_dir), max_length=64,
                              attn_implementation="harness_varlen")
    model, block = load_sentence_transformer(spec)
    attention = block["attention"]
    assert attention["kernel"] is None and attention["calls"] == {}
    texts = ["one two three", "four five", "six"]
    encode(model, texts, batching=batching(batch_tokens=100_000), device="cpu", show_progress=False)
    assert attention["calls"] == {va.kernel_calls.REFERENCE: 4} and attention["kernel"] == va.kernel_calls.REFERENCE

    def fake(q, k, v, cu, max_len, *, scale, window, causal, dropout):
        return va.reference(q, k, v, cu, scale=scale, window=window, causal=causal, dropout=dropout)

    monkeypatch.setattr(va, "on_cuda", lambda t: True)
    monkeypatch.setattr(va, "torch_kernel", fake)
    monkeypatch.setattr(va, "flash_attn_importable", lambda: False)
    encode(model, texts, batching=batching(batch_tokens=100_000), device="cpu", show_progress=False)
    assert attention["calls"] == {va.kernel_calls.REFERENCE: 4, va.kernel_calls.TORCH_FLASH: 4}
    assert attention["kernel"] == (f"{va.kernel_calls.REFERENCE} (4 calls), {va.kernel_calls.TORCH_FLASH} (4 calls)")
    assert att.kernel_name("harness_varlen", cuda=False, flash_attn=att.flash_attn_importable()) == va.kernel_calls.REFERENCE     # what the settings would claim
    model.encode(["a padded batch", "unpadded at the entry"])                   # the hook's packed row counts too
    assert attention["calls"][va.kernel_calls.TORCH_FLASH] == 8


def test_padded_fallback_calls_are_counted_per_layer(tiny_model_dir: Path) -> None:
    from harness.models.kernel_calls import watch

    model, block = load_sentence_transformer(replace(ModelSpec.based_on(
        "modernbert-base", name="t", path=str(tiny_model_dir), max_length=64), attn_implementation="auto"))
    model.encode(["x"] * 3, batch_size=1)
    assert block["attention"]["calls"] == {"transformers sdpa": 12}          # 3 forwards x 4 layers
    assert watch(model[0].auto_model) is watch(model[0].auto_model)          # one counter per encoder


def test_a_sentence_transformers_folder_with_its_config_in_a_module_folder(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path, tiny_model_dir: Path) -> None:
    """modules.json puts the Transformer module in 0_Transformer/: its config is found there (not silently
    sdpa), and the folder loads and encodes through harness_varlen like the plain one."""
    folder = tmp_path / "st"
    shutil.copytree(tiny_model_dir, folder / "0_Transformer")
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 64,
                                                                  "pooling_mode_mean_tokens": True}))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    assert not (folder / "config.json").exists()
    assert att.model_type_of(folder) == "modernbert" and att.transformer_config(folder).parent.name == "0_Transformer"
    _gpu(monkeypatch, (9, 0))
    assert attention_for("auto", str(folder), "cuda") == "harness_varlen"
    spec = ModelSpec.based_on("modernbert-base", name="t", path=str(folder), max_length=64)
    varlen, _ = load_sentence_transformer(replace(spec, attn_implementation="harness_varlen"))
    padded, _ = load_sentence_transformer(replace(spec, attn_implementation="sdpa"))
    assert varlen[0].auto_model.config._attn_implementation == "harness_varlen"
    texts = ["one two three", "a longer text of several words"]
    np.testing.assert_allclose(varlen.encode(texts), padded.encode(texts), atol=1e-5, rtol=0)


def test_flash_attn_is_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    calls: list[str] = []
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: calls.append(name) or real(name, *a))
    monkeypatch.setattr(att, "_FLASH_ATTN", [])
    for _ in range(50):
        att.flash_attn_importable()
    assert calls.count("flash_attn") == 1
