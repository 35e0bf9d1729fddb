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
