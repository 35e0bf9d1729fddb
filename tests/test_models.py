"""precision=auto on either kind of CPU (the flags are faked, so the suite passes on both), and a suite that does
not see the machine's Hugging Face cache."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from harness import models
from tests.conftest import ISOLATED


@pytest.mark.parametrize(("flags", "expected"), [
    ("fpu sse avx2 avx512f", "fp32"),                     # e.g. AMD EPYC without AVX512-BF16
    ("fpu sse avx2 avx512f avx512_bf16", "fp32"),         # bf16 instructions without AMX: slower than fp32
    ("fpu sse avx2 amx_bf16 amx_tile", "bf16"),           # e.g. Sapphire Rapids
    ("", "fp32"),
])
def test_auto_precision_follows_the_cpu_flags(monkeypatch: pytest.MonkeyPatch, flags: str, expected: str) -> None:
    monkeypatch.setenv("HARNESS_CPU_FLAGS", flags)
    assert models.resolve_precision("auto", "cpu") == expected
    assert models.resolve_precision("fp32", "cpu") == "fp32"      # a pinned precision never depends on the CPU
    assert models.resolve_precision("bf16", "cpu") == "bf16"


def test_cpu_flags_come_from_cpuinfo_without_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_CPU_FLAGS", raising=False)
    if os.path.exists("/proc/cpuinfo"):
        assert "fpu" in models.cpu_flags() or models.cpu_flags()   # read, whatever this machine has


def test_the_suite_does_not_see_the_machines_hf_cache() -> None:
    """A machine whose HF cache holds ModernBERT-base or GLUE must still see the offline fail-fast paths."""
    from huggingface_hub import constants

    assert constants.HF_HUB_OFFLINE
    assert str(ISOLATED) in constants.HF_HUB_CACHE
    assert os.environ["HARNESS_CACHE"].startswith(str(ISOLATED))


# ------------------------------------------------------------------ attention: unpadded on any CUDA GPU by default
@pytest.mark.parametrize(("requested", "cuda", "packs", "expected"), [
    ("auto", True, True, "harness_varlen"),             # the paper's setting: unpadded, torch's or flash-attn's kernel
    ("auto", False, True, "sdpa"),                      # CPU: padded sdpa
    ("auto", True, False, "sdpa"),                      # an architecture the harness does not pack
    ("flash_attention_2", True, True, "harness_varlen"),  # flash-attn's kernel through the harness (bf16 around it)
    ("flash_attention_2", True, False, "flash_attention_2"),
    ("eager", True, True, "eager"),                     # a named implementation is as written
    ("harness_varlen", False, True, "harness_varlen"),  # on CPU: the plain-torch reference
])
def test_attention_is_a_function_of_the_facts(requested: str, cuda: bool, packs: bool, expected: str) -> None:
    from harness.models.attention import resolve_attention

    assert resolve_attention(requested, cuda=cuda, packs=packs) == expected


def _facts(monkeypatch: pytest.MonkeyPatch, *, cuda: bool, flash: bool, capability: tuple[int, int] = (9, 0)) -> None:
    from harness.models import attention

    monkeypatch.setattr(attention, "cuda_available", lambda: cuda)
    monkeypatch.setattr(attention, "flash_attn_importable", lambda: flash)
    monkeypatch.setattr(attention, "cuda_capability", lambda device: capability)


def test_kernel_named_for_each_machine() -> None:
    from harness.models.attention import kernel_name

    assert kernel_name("harness_varlen", cuda=True, flash_attn=False) == "torch.ops.aten._flash_attention_forward"
    assert kernel_name("harness_varlen", cuda=True, flash_attn=True) == "flash_attn.flash_attn_varlen_func"
    assert kernel_name("harness_varlen", cuda=False, flash_attn=True).startswith("reference")
    assert kernel_name("sdpa", cuda=True, flash_attn=True) == "transformers sdpa"


def test_modernbert_and_bert_resolve_to_the_varlen_path_on_cuda(monkeypatch: pytest.MonkeyPatch,
                                                                 tiny_model_dir) -> None:
    """``auto`` stays in the spec (run ids do not depend on the machine); the loader resolves it from the folder's
    architecture and the device: harness_varlen for a model on a CUDA device (faked), sdpa on the CPU (also on a
    machine with a GPU); a model loaded with harness_varlen (here on CPU: its reference) packs in the encoder,
    unpads padded batches at its entry, and its records say so."""
    from harness.encoding.encode import pack_mode
    from harness.models.attention import model_type_of, resolve_for
    from harness.models.load import attention_for
    from harness.models.spec import ModelSpec
    from harness.models.varlen_attention import installed

    _facts(monkeypatch, cuda=True, flash=False)
    assert ModelSpec.based_on("modernbert-base").attn_implementation == "auto"
    assert model_type_of(tiny_model_dir) == "modernbert" and model_type_of("/nonexistent") is None
    assert resolve_for("auto", "bert", "cuda:0") == "harness_varlen" and resolve_for("auto", "deberta-v2") == "sdpa"
    assert resolve_for("auto", "modernbert", "cpu") == "sdpa"                 # device=cpu on a GPU machine
    assert attention_for("auto", str(tiny_model_dir), "cuda") == "harness_varlen"
    spec = ModelSpec.based_on("modernbert-base", name="tiny", path=str(tiny_model_dir), max_length=128)
    model, block = models.load_sentence_transformer(spec)                     # on the CPU: padded sdpa
    assert model[0].auto_model.config._attn_implementation == "sdpa" and not installed(model[0].auto_model)
    assert block["attention"] == {"requested": "auto", "implementation": "sdpa", "kernel": None, "calls": {},
                                  "dtype": None, "unpadded": False}         # nothing ran yet: no kernel named
    model.encode(["one text"])
    assert block["attention"]["kernel"] == "transformers sdpa" and block["attention"]["calls"] == {
        "transformers sdpa": 4}                                                # one call per layer, counted
    model, block = models.load_sentence_transformer(replace(spec, attn_implementation="harness_varlen"))
    hf = model[0].auto_model
    assert hf.config._attn_implementation == "harness_varlen" and installed(hf)
    assert pack_mode(model, "auto", "cuda") == "varlen" and pack_mode(model, "off", "cuda") is None
    model.encode(["one text", "and another one"])
    assert block["attention"]["unpadded"] is True and block["attention"]["kernel"].startswith("reference")
    assert "attention" not in models.load_sentence_transformer(ModelSpec.based_on(
        "bert-base", name="t", path=str(tiny_model_dir)))[1]                 # a named sdpa: the record as before


def test_cfg_job_says_what_auto_attention_resolves_to(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``--cfg job`` prints the config as written (``auto``); the CLI adds the machine's resolution on stderr."""
    from harness.run import overrides

    _facts(monkeypatch, cuda=True, flash=False)
    overrides.check_key_overrides(["task=efficiency", "model=modernbert-base", "--cfg", "job"])
    err = capsys.readouterr().err
    assert "auto -> harness_varlen on this machine for modernbert/bert architectures" in err
    assert "torch.ops.aten._flash_attention_forward" in err
    _facts(monkeypatch, cuda=True, flash=True)
    overrides.check_key_overrides(["task=efficiency", "model=modernbert-base", "--cfg", "job"])
    assert "flash_attn.flash_attn_varlen_func" in capsys.readouterr().err
    _facts(monkeypatch, cuda=False, flash=True)
    overrides.check_key_overrides(["task=efficiency", "model=modernbert-base", "model.attn_implementation=eager",
                             "--cfg", "job"])
    assert capsys.readouterr().err == ""                                        # a named implementation is as written
    overrides.check_key_overrides(["task=efficiency", "model=modernbert-base", "--cfg", "job"])
    assert "auto -> sdpa on this machine (no CUDA: padded batches" in capsys.readouterr().err
