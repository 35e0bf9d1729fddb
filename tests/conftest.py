"""Shared fixtures: offline hub, the committed tiny ModernBERT, composed configs, real data paths.

The suite must not depend on the machine: the hub is offline, and the Hugging Face and harness caches point
into a fresh temporary directory (a machine whose HF cache already holds ModernBERT-base or GLUE would
otherwise load them instead of failing fast, and a warm embedding cache would change what runs). Set before
anything imports huggingface_hub; subprocesses inherit it.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pytest imports this file as ``conftest`` and test modules import it again as ``tests.conftest``: the second copy
# keeps the first one's folder (a new one would repoint the caches after huggingface_hub has read them)
_TWIN = sys.modules.get("tests.conftest" if __name__ == "conftest" else "conftest")
ISOLATED = getattr(_TWIN, "ISOLATED", None) or Path(tempfile.mkdtemp(prefix="harness-tests-"))
atexit.register(shutil.rmtree, ISOLATED, ignore_errors=True)
os.environ["HF_HOME"] = str(ISOLATED / "hf")
os.environ["HF_HUB_CACHE"] = str(ISOLATED / "hf" / "hub")
os.environ["HF_DATASETS_CACHE"] = str(ISOLATED / "hf" / "datasets")
os.environ["HARNESS_CACHE"] = str(ISOLATED / "harness-cache")

from harness.trial.toy_data import TOPICS, write_beir_folder, write_triplets  # noqa: E402,F401  (re-exported)

REPO = Path(__file__).resolve().parents[1]
TINY_MODEL = REPO / "tests" / "fixtures" / "tiny-modernbert"
#: how many documents per query mteb's retrieval keeps: the depth the parity tests evaluate the harness at
MTEB_TOP_K = 1000
SHARED_DATA = REPO.parent / "shared" / "data"


#: the modules that wait on the local SLURM cluster (each asks it for both CPUs at some point): one unit of work for
#: scripts/test.sh's xdist workers, run one after the other on one worker, so the other worker computes while their
#: jobs run instead of waiting on the cluster too (the cluster and the two workers share two cores)
ON_THE_CLUSTER = ("test_paper_runs.py", "test_shards.py", "test_train_devices.py", "test_slurm.py", "test_series.py")
#: units of work of several modules (the rest: one module each): unit -> its modules, which run on one worker
UNITS = {"the SLURM cluster": ON_THE_CLUSTER,
         "MiniLM on SciFact": ("test_compare.py", "test_compare_many.py")}      # share MiniLMSciFact's runs
#: the longest units of work on 2 cores, longest first (measured: docs/environment.md), the rest in file order after
#: them: the workers (``--dist loadfile``: one module at a time, module fixtures run once) start the long ones early
#: and the short ones even out the end. test_cache_race.py first of all: it forks the test process, which other
#: modules' libraries fill with threads (polars' pool, once mteb has run): a fork beside them can hang
LONGEST_FIRST = ("test_cache_race.py", *ON_THE_CLUSTER, "test_gpu_check.py", "test_colbert_parity.py",
                 "test_mteb_benchmark.py", "test_bad_inputs.py", "test_mteb_parity.py", "test_longdocs.py",
                 "test_locks.py", "test_nanobeir.py", "test_compare.py", "test_compare_many.py", "test_efficiency.py",
                 "test_retrieval_runs.py", "test_glue_runs.py", "test_coir.py", "test_glue_parity.py", "test_house.py",
                 "test_scheduler.py", "test_fidelity_fourth_pass.py", "test_fidelity_fifth_pass.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: each module keeps its order


def pytest_configure(config: pytest.Config) -> None:
    # xdist hands out units of work in collection order (above), not by how many tests each holds
    config.option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile`` with each of :data:`UNITS` as one unit of work."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    unit_of = {module: unit for unit, modules in UNITS.items() for module in modules}

    class Units(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return unit_of.get(path.rsplit("/", 1)[-1], path)

    return Units(config, log)


@functools.cache
def slurm_unavailable() -> str | None:
    """Why the ``slurm`` tests cannot run here (one line), or None when a SLURM node is up."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no SLURM here (sinfo/sbatch not found); scripts/test.sh installs and starts one when run as root"
    try:
        states = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"sinfo failed ({exc}); start the cluster: bash slurm/local-cluster.sh start"
    if not any(s.strip() in ("idle", "mixed", "allocated") for s in states.splitlines()):
        return f"no SLURM node is up (states: {' '.join(states.split()) or 'none'}); bash slurm/local-cluster.sh start"
    return None


@pytest.fixture(autouse=True)
def _slurm_gate(request):
    """Skip ``@pytest.mark.slurm`` tests, with the reason, when no SLURM node is up."""
    if request.node.get_closest_marker("slurm") is not None and (reason := slurm_unavailable()):
        pytest.skip(reason)


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    return TINY_MODEL


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


def compose(overrides: list[str]):
    """The real Hydra config, as the CLI composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def paths(tmp: Path) -> list[str]:
    """A run's results, outputs and cache folders under ``tmp``."""
    return [f"paths.results={tmp}/results", f"paths.outputs={tmp}/outputs", f"paths.cache={tmp}/cache"]








@pytest.fixture()
def toy_beir(tmp_path: Path) -> Path:
    """tmp data dir holding toy/ (BEIR layout)."""
    write_beir_folder(tmp_path / "data")
    return tmp_path / "data"


#: model name -> the overrides of its run (:class:`MiniLMSciFact`)
MINILM_SCIFACT_RUNS = {"all-minilm-l6-v2": (), "minilm-128": ("model.max_length=128", "model.name=minilm-128"),
                       "minilm-64": ("model.max_length=64", "model.name=minilm-64")}


class MiniLMSciFact:
    """all-MiniLM-L6-v2 on SciFact's first 100 judged test queries (their judged documents topped up to 250), each
    run once per session and kept (``save_run``): the ranx checks of tests/test_compare.py and
    tests/test_compare_many.py read the same runs (one unit of work, :data:`UNITS`: one worker computes them once)."""

    def __init__(self, root: Path) -> None:
        self.root, self.done = root, set[str]()

    def results(self, *names: str) -> Path:
        """The results folder holding the runs of ``names`` (run here the first time one is asked for)."""
        from tests.test_compare import run_harness

        common = ["task=beir", "model=all-minilm-l6-v2", "precision=fp32", "device=cpu", f"task.data_dir={SHARED_DATA}",
                  "task.datasets=[scifact]", "task.train=false", "task.max_queries=100", "task.max_docs=250",
                  "save_run=true", *paths(self.root)]
        for name in names:
            if name not in self.done:
                run_harness([*common, *MINILM_SCIFACT_RUNS[name]])
                self.done.add(name)
        return self.root / "results"


@pytest.fixture(scope="session")
def minilm_scifact(tmp_path_factory, shared_data: Path) -> MiniLMSciFact:
    return MiniLMSciFact(tmp_path_factory.mktemp("minilm-scifact"))


def batching(**keys: int):
    """task=beir's encoder batching (conf/task/beir.yaml), ``keys`` on top: for tests that call an encoder
    directly (the encoder has no defaults of its own)."""
    from harness.core.typed import from_conf
    from harness.encoding.settings import Batching

    return from_conf(Batching, "task/beir", part=True, **keys)
