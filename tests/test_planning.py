"""Planning a run (its cells and run ids: what the runner's skip check, the locks and the paper graph read) needs no
compute: for the retrieval tasks and GLUE it imports no model or metric library and none of the engines the stages
drive (the stages' own modules import theirs where they run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

#: what planning must not import: model and metric libraries, and the engines the stages drive
FORBIDDEN = ("torch", "transformers", "sentence_transformers", "pylate", "pytrec_eval", "datasets", "sklearn",
             "harness.training", "harness.tasks.retrieval.retrievers.dense", "harness.tasks.retrieval.retrievers.multivector",
             "harness.encoding.encode", "harness.tasks.efficiency.throughput")
#: the training stages' settings nodes (pure data: the schema planning types the config with) and their package
LIGHT = ("harness.training", "harness.training.settings", "harness.tasks.glue.decay")

PROBE = """
import json, sys
from hydra import compose, initialize_config_module
from harness.run import planning
with initialize_config_module("conf", version_base="1.3"):
    cfg = compose("config", overrides=json.loads(sys.argv[1]))
cells = planning.every_cell(cfg, planning.plan(cfg))
assert cells and all(c.run_id for c in cells)
print(json.dumps(sorted(sys.modules)))
"""

CONFIGS = {
    "beir": ["task=beir"],
    "nanobeir": ["task=nanobeir"],
    "code": ["task=code", "task.source.run=null"],
    "mldr-id": ["task=mldr", "task.source.run=null", "task.setting=id", "task.lr=3e-5"],
    "mldr-colbert": ["task=mldr", "task.source.run=null", "task.retriever=multi_vector", "task.source.task=colbert"],
    "colbert": ["task=colbert"],
    "glue": ["task=glue"],
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_planning_imports_no_compute(name: str, tmp_path: Path) -> None:
    overrides = [*CONFIGS[name], "model=all-minilm-l6-v2", "device=cpu", f"paths.results={tmp_path}"]
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(overrides)], cwd=REPO, capture_output=True,
                         text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m not in LIGHT and any(m == f or m.startswith(f + ".") for f in FORBIDDEN)] == []
