"""``task=mteb task.benchmark=<mteb's name>``: a benchmark's tasks (of ``task.task_types``) on the DPR model
``task=beir`` selected (``task.source.task=beir``), one record per task and the aggregate as mteb computes it. The
hub path (``MTEB(eng, v2)``) plans fully and stops offline in one line; a local benchmark of two retrieval tasks on
real data (tests/fixtures/mteb_local_benchmark.py: SciFact and CodeSearchNet Ruby) runs end to end, its aggregate
checked against mteb's own ``Benchmark.get_score`` on the same results."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from unittest import mock

import pytest

from harness.core import results
from harness.core.errors import HarnessError
from harness.run.overrides import quote_names
from harness.run.planning import plan
from harness.run.runner import run
from harness.tasks.mteb.benchmark import Aggregate, aggregate
from tests.conftest import REPO, TINY_MODEL, compose, write_beir_folder, write_triplets
from tests.test_retrieval_runs import cli

pytest.importorskip("mteb")
BENCH = REPO / "tests" / "fixtures" / "mteb_local_benchmark.py"
V2 = ["task=mteb", "task.benchmark='MTEB(eng, v2)'", "task.task_types=[Retrieval]"]
TINY = ["model=all-minilm-l6-v2", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert",
        "model.family=tiny-ModernBERT", "model.size=tiny", "model.normalize=false", "model.max_length=64",
        "precision=fp32", "device=cpu"]


def paths(tmp: Path) -> list[str]:
    return [f"paths.results={tmp}/results", f"paths.outputs={tmp}/outputs", f"paths.cache={tmp}/cache"]


# ------------------------------------------------------------------------------------------------ the command line
def test_benchmark_names_reach_hydra_as_strings() -> None:
    assert quote_names(["task.benchmark=MTEB(eng, v2)", "task.benchmark='MTEB(eng, v2)'", "task.tasks=[A,B]",
                        "+task.benchmark=x(y)", "task.benchmark=MTEB"]) == [
        "task.benchmark='MTEB(eng, v2)'", "task.benchmark='MTEB(eng, v2)'", "task.tasks=[A,B]",
        "+task.benchmark='x(y)'", "task.benchmark=MTEB"]


def test_the_ettin_command_resolves_and_fails_fast_offline(tmp_path: Path) -> None:
    """The issue's command as a shell passes it (the quotes gone): the config resolves; run offline with no task=beir
    run it names the fix; with the packaged model as is, the first hub dataset stops it before any model loads."""
    args = ["task=mteb", "task.benchmark=MTEB(eng, v2)", "task.task_types=[Retrieval]", "task.source.task=beir",
            "model=ettin-encoder-150m"]
    p = cli(*args, "--cfg", "job")
    assert p.returncode == 0, p.stderr
    assert "benchmark: MTEB(eng, v2)" in p.stdout and "task: beir" in p.stdout and "- Retrieval" in p.stdout
    p = cli(*args, *paths(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "no task=beir record of model 'ettin-encoder-150m'" in p.stderr and "sweep=beir-lr" in p.stderr
    p = cli(*args[:3], "model=all-minilm-l6-v2", *paths(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert "mteb task ArguAna needs its dataset mteb/arguana@" in line and "task.benchmark=<the name" in line
    assert "tests/fixtures/mteb_local_benchmark.py" in line
    assert not list((tmp_path / "results").rglob("*.json"))


def test_the_hub_benchmark_plans_every_task_its_aggregate_and_its_cost(tmp_path: Path) -> None:
    p = plan(compose([*V2, "model=modernbert-base", *paths(tmp_path)]))
    names = [c.dataset for c in p.cells]
    assert names[:-1] == ["ArguAna", "CQADupstackGamingRetrieval", "CQADupstackUnixRetrieval",
                          "ClimateFEVERHardNegatives", "FEVERHardNegatives", "FiQA2018", "HotpotQAHardNegatives",
                          "SCIDOCS", "TRECCOVID", "Touche2020Retrieval.v3"]
    agg = p.cells[-1]
    assert agg.dataset == "MTEB(eng, v2) Retrieval" and isinstance(agg.payload, Aggregate)
    assert set(agg.payload.tasks) == set(names[:-1]) and {c.run_id for c in p.cells} == {agg.run_id}
    assert p.work.published == 10 and p.work.short + p.work.long > 1e8   # mteb's statistics: ~10^8 tokens
    whole = plan(compose(["task=mteb", "task.benchmark='MTEB(eng, v2)'", "model=modernbert-base", *paths(tmp_path)]))
    aggs = [c.dataset for c in whole.cells if isinstance(c.payload, Aggregate)]
    assert len(whole.cells) - len(aggs) == 41 and aggs[-1] == "MTEB(eng, v2) Mean(TaskType)"
    assert "MTEB(eng, v2) STS" in aggs and len(aggs) == 8
    # the benchmark's cells share the plain run's id: which tasks run is not part of it
    plain = plan(compose(["task=mteb", "model=modernbert-base", *paths(tmp_path)]))
    assert plain.cells[0].run_id == agg.run_id


def test_bad_benchmark_input_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"task.benchmark='MTEB\(eng, v3\)' is not an mteb benchmark; closest: "
                                           r"MTEB\(eng, v1\), MTEB\(eng, v2\).*task.task_files=\[my_tasks.py\]"):
        plan(compose(["task=mteb", "task.benchmark='MTEB(eng, v3)'", "model=modernbert-base", *paths(tmp_path)]))
    with pytest.raises(HarnessError, match=r"task.task_types=\['Retreival'\]: MTEB\(eng, v2\) has no task of type "
                                           r"Retreival; its types: Classification, Clustering"):
        plan(compose(["task=mteb", "task.benchmark='MTEB(eng, v2)'", "task.task_types=[Retreival]",
                      "model=modernbert-base", *paths(tmp_path)]))
    with pytest.raises(HarnessError, match=r"^task.task_types=\['Retrieval'\] picks among a benchmark's tasks, and no "
                                           r"task.benchmark is set: set task.benchmark="):
        plan(compose(["task=mteb", "task.task_types=[Retrieval]", "model=modernbert-base", *paths(tmp_path)]))


def test_a_benchmark_with_a_task_list_of_its_own_is_refused_in_one_line(tmp_path: Path) -> None:
    """The benchmark's tasks replaced ``task.tasks`` without a word (issue 60): refused, before any model loads."""
    with pytest.raises(HarnessError) as err:
        plan(compose(["task=mteb", "task.benchmark='MTEB(eng, v2)'", "task.tasks=[SciFact]", "model=modernbert-base",
                      *paths(tmp_path)]))
    line = str(err.value)
    assert "\n" not in line and "task.benchmark='MTEB(eng, v2)' runs that benchmark's own tasks" in line
    assert "its aggregate needs all of them" in line and "task.tasks=['SciFact'] names tasks to run" in line
    assert "drop task.tasks" in line and "task.benchmark=null" in line
    assert plan(compose([*V2, "model=modernbert-base", *paths(tmp_path)])).cells   # the default list: the benchmark


# ------------------------------------------------------------------------------------------------ the aggregate
def _rec(dataset: str, entries: list[float], type_: str = "Retrieval", status: str = "ok") -> results.ResultRecord:
    return results.ResultRecord(
        task="mteb", dataset=dataset, split="test", model={"name": "m"}, metrics={"ndcg_at_10": entries[0]},
        main_score="ndcg_at_10", run_id="r", status=status,
        details={"mteb": {"type": type_, "scores": [{"main_score": e} for e in entries]}})


def test_the_aggregate_is_mtebs_arithmetic_and_refuses_a_missing_task() -> None:
    agg = Aggregate("B", "Retrieval", {"A": ("A",), "C": ("C", "C-dev")})
    found = {"A": _rec("A", [0.2]), "C": _rec("C", [0.4, 0.6]), "C-dev": _rec("C-dev", [0.8])}
    value, per_task, main = aggregate(agg, found)
    assert per_task == {"A": 0.2, "C": pytest.approx(0.6)} and value == pytest.approx(0.4) and main == "ndcg_at_10"
    over = Aggregate("B", None, {"A": ("A",), "S": ("S",)})
    value, _, _ = aggregate(over, {"A": _rec("A", [0.2]), "S": _rec("S", [0.9], "STS")})
    assert value == pytest.approx(0.55)
    assert aggregate(agg, {**found, "C-dev": None}) == (
        "B's aggregate needs every task's record; not ok: C-dev (run them again: the aggregate follows)")
    assert "not ok: A" in aggregate(agg, {**found, "A": _rec("A", [0.2], status="failed")})


# ------------------------------------------------------------------------------------------------ end to end
@pytest.fixture()
def selected_dpr(tmp_path: Path) -> Path:
    """A task=beir DPR run of the tiny ModernBERT (trained on toy triplets): the selected run of its sweep."""
    data = tmp_path / "data"
    write_beir_folder(data)
    run(compose(["task=beir", *TINY, f"task.data_dir={data}", "task.datasets=[toy]", "+task.catalog.toy={split: test}",
                 "task.train_data.source=file", f"task.train_data.path={write_triplets(tmp_path / 't.tsv')}",
                 "task.batch_size=8", "task.gradient_accumulation_steps=1", "task.lr=1e-4", "task.loss=mnrl",
                 *paths(tmp_path)]))
    return tmp_path


def mteb_get_score(bench_file: Path, records: list[results.ResultRecord]) -> dict[str, float]:
    """mteb's own Benchmark.get_score on TaskResults rebuilt from the records' mteb scores (mteb looks a task up by
    name: the local ones are taught to it)."""
    import mteb
    from mteb.results import BenchmarkResults, ModelResult, TaskResult

    from harness.tasks.mteb.planner import load_task_files

    files = load_task_files([str(bench_file)])
    trs = [TaskResult(task_name=r.dataset, dataset_revision=r.details["mteb"]["dataset_revision"],
                      mteb_version=r.details["mteb"]["mteb_version"], scores={r.split: r.details["mteb"]["scores"]},
                      evaluation_time=r.details["mteb"]["evaluation_time"]) for r in records]
    module, original = sys.modules["mteb.get_tasks"], mteb.get_task

    def get_task(name: str, *a, **k):
        return files.tasks[name].cls() if name in files.tasks else original(name, *a, **k)

    with mock.patch.object(module, "get_task", get_task), mock.patch.object(mteb, "get_task", get_task):
        got = files.benchmarks["LocalRetrieval(eng)"].get_score(
            BenchmarkResults(model_results=[ModelResult(model_name="m", model_revision="r", task_results=trs)]),
            raise_error=True)
    return {k: float(v) for k, v in got["m"].items()}


@pytest.mark.slow
def test_local_benchmark_end_to_end_from_the_dpr_selection(selected_dpr: Path, shared_data: Path) -> None:
    tmp = selected_dpr
    (beir,) = [r for _, r in results.iter_records(tmp / "results") if r.task == "beir"]
    cfg = compose(["task=mteb", f"task.task_files=[{BENCH}]", "task.benchmark='LocalRetrieval(eng)'",
                   "task.source.task=beir", *TINY, *paths(tmp)])
    recs = run(cfg)
    assert [r.dataset for r in recs] == ["LocalSciFact", "LocalCodeSearchNetRuby", "LocalRetrieval(eng) Retrieval"]
    assert all(r.status == "ok" for r in recs) and len({r.run_id for r in recs}) == 1
    sci, ruby, agg = recs
    for r in (sci, ruby):   # the DPR model task=beir selected, as MLDR out-of-domain evaluates it
        assert r.model["lineage"]["run_id"] == beir.run_id and r.model["lineage"]["mode"] == "selected"
        assert r.model["fingerprint"] == beir.model["trained"]["fingerprint"]
        assert r.model["ref"]["source_run"] == beir.run_id and r.main_score == "ndcg_at_10"
    assert sci.details["mteb"]["scores"][0]["ndcg_at_10"] == sci.score and 0 < sci.score < 1
    assert agg.model["lineage"]["run_id"] == beir.run_id and agg.details["mteb"]["task_type"] == "Retrieval"
    mteb_scores = mteb_get_score(BENCH, [sci, ruby])
    assert agg.score == pytest.approx(mteb_scores["Retrieval"], abs=1e-12)
    assert agg.score == pytest.approx(mteb_scores["Mean(TaskType)"], abs=1e-12)

    again = run(cfg)                                   # finished: nothing recomputed
    assert [r.created_at for r in again] == [r.created_at for r in recs]
    path = next(p for p, r in results.iter_records(tmp / "results") if r.dataset == agg.dataset)
    path.unlink()                                      # the aggregate alone is computed again, from the records
    with mock.patch("harness.models.load_sentence_transformer", side_effect=AssertionError("model loaded")):
        redo = run(cfg)
    assert [r.created_at for r in redo[:2]] == [sci.created_at, ruby.created_at] and redo[2].score == agg.score

    from harness.leaderboard import build_leaderboard

    table = build_leaderboard([tmp / "results"]).table("mteb")
    row = table.cells["run:tiny-modernbert|tiny-ModernBERT|tiny"]
    assert row["LocalRetrieval(eng) Retrieval"].value == pytest.approx(agg.score * 100)
    assert json.loads(path.read_text())["metrics"] == {"ndcg_at_10": agg.score}


# ------------------------------------------------------------------------------------------------ the paper's graph
def test_ettins_dpr_recipe_is_a_named_sweep() -> None:
    from harness.paper.graph import sweep_params

    cfg = compose(["sweep=beir-lr-ettin", "model=ettin-encoder-150m"])
    t = cfg.task
    assert (t.name, t.batch_size, t.gradient_accumulation_steps, t.mini_batch_size, t.max_seq_length, t.epochs) == (
        "beir", 1024, 1, 256, 7999, 1)
    assert list(t.datasets) == ["nfcorpus", "scifact", "trec-covid", "fiqa"] and t.loss == "cached_mnrl"
    assert sweep_params("beir-lr-ettin") == {"task.lr": ["0.0001", "0.0003", "0.0005", "0.0007"]}


def test_the_paper_graph_adds_the_mteb_v2_step_after_the_dpr_selection(tmp_path: Path) -> None:
    from tests.forked import run_module

    base = ["--dry-run", "model=modernbert-base", f"paths.results={tmp_path}/results"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    off = run_module("harness.paper", *base, cwd=REPO, env=env, timeout=600)
    assert off.returncode == 0, off.stderr[-2000:]
    assert "mteb_v2" not in off.stdout                  # declared, off by default
    on = run_module("harness.paper", *base, "paper.stages.mteb_v2.enabled=true", "paper.stages.dpr.sweep=beir-lr-ettin",
                    cwd=REPO, env=env, timeout=600)
    assert on.returncode == 0, on.stderr[-2000:]
    (line,) = [x for x in on.stdout.splitlines() if x.startswith("mteb_v2 ")]
    kind, jobs, done, hours = line.split()[1:5]
    assert (kind, jobs, done) == ("eval", "1", "0") and line.endswith("dpr.select (afterok)")
    assert 0.1 < float(hours) < 10     # ~10^8 tokens of mteb's task statistics at Table 2's throughput
    (dpr,) = [x for x in on.stdout.splitlines() if x.startswith("dpr ")]
    assert dpr.split()[2] == "4"       # the Ettin recipe's four learning rates
