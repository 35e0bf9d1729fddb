"""precision=auto on either kind of CPU (the flags are faked, so the suite passes on both), and a suite that does
not see the machine's Hugging Face cache."""

from __future__ import annotations

import os

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


# ------------------------------------------------------------------ attention: the paper's FA2 + unpadding by default
@pytest.mark.parametrize(("cuda", "flash", "unpads", "expected"), [
    (True, True, True, "flash_attention_2"),      # the paper's setting: FA2, unpadded
    (False, True, True, "sdpa"),                  # CPU: padded sdpa
    (True, False, True, "sdpa"),                  # no [gpu] extra
    (True, True, False, "sdpa"),                  # an encoder that cannot unpad
])
def test_auto_attention_is_a_function_of_three_facts(cuda: bool, flash: bool, unpads: bool, expected: str) -> None:
    from harness.models.attention import resolve_attention

    assert resolve_attention("auto", cuda=cuda, flash_attn=flash, unpads=unpads) == expected
    assert resolve_attention("eager", cuda=cuda, flash_attn=flash, unpads=unpads) == "eager"


def _facts(monkeypatch: pytest.MonkeyPatch, *, cuda: bool, flash: bool) -> None:
    from harness.models import attention

    monkeypatch.setattr(attention, "cuda_available", lambda: cuda)
    monkeypatch.setattr(attention, "flash_attn_importable", lambda: flash)


def test_modernbert_efficiency_resolves_to_unpadded_flash_attention_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """task=efficiency model=modernbert-base on CUDA with flash-attn: FA2, and unpad=auto packs (varlen)."""
    from types import SimpleNamespace

    from harness.evaluation.encode import pack_mode
    from harness.models.spec import ModelSpec

    _facts(monkeypatch, cuda=True, flash=True)
    spec = ModelSpec.based_on("modernbert-base")
    assert spec.attn_implementation == "flash_attention_2"
    assert ModelSpec.based_on("bert-base").attn_implementation == "sdpa"        # its conf names sdpa
    hf = SimpleNamespace(config=SimpleNamespace(_attn_implementation=spec.attn_implementation,
                                                model_type="modernbert"))
    assert pack_mode([SimpleNamespace(auto_model=hf)], "auto", "cuda") == "varlen"
    _facts(monkeypatch, cuda=False, flash=True)
    assert ModelSpec.based_on("modernbert-base").attn_implementation == "sdpa"  # CPU keeps padded sdpa
    _facts(monkeypatch, cuda=True, flash=False)
    assert ModelSpec.based_on("modernbert-large").attn_implementation == "sdpa"


def test_cfg_job_says_what_auto_attention_resolves_to(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``--cfg job`` prints the config as written (``auto``); the CLI adds the machine's resolution on stderr."""
    from harness import overrides

    _facts(monkeypatch, cuda=True, flash=True)
    overrides.check_key_overrides(["task=efficiency", "model=modernbert-base", "--cfg", "job"])
    assert "auto -> flash_attention_2 on this machine (CUDA, flash-attn installed" in capsys.readouterr().err
    _facts(monkeypatch, cuda=False, flash=True)
    overrides.check_key_overrides(["task=efficiency", "model=modernbert-base", "model.attn_implementation=eager",
                             "--cfg", "job"])
    assert capsys.readouterr().err == ""                                        # a named implementation is as written
    overrides.check_key_overrides(["task=efficiency", "model=modernbert-base", "--cfg", "job"])
    assert "auto -> sdpa on this machine (padded batches" in capsys.readouterr().err
