"""The whole-paper graph: built from the task specs, planned from records, costed by a readable model; the
dry-run needs no hub. (Execution, local and on SLURM, is tested in test_paper_runs.py.)"""

from __future__ import annotations

import json

import pytest

from harness.core.results import ResultRecord, write_record
from harness.paper import cost, graph
from tests.conftest import REPO


@pytest.fixture(scope="module")
def steps() -> dict[str, graph.Step]:
    return {s.name: s for s in graph.build(graph.load_paper(), ["model=modernbert-base"])}


def test_the_paper_graph_follows_the_specs(steps) -> None:
    jobs = {name: len(s.jobs) for name, s in steps.items()}
    assert jobs["glue.mnli"] == 48 and jobs["glue"] == 4 * 48 and jobs["glue.chained"] == 3 * 48   # the 384 points
    assert jobs["dpr"] == 6 and jobs["colbert"] == 6                                               # six LRs each
    after = {name: set(s.after) for name, s in steps.items()}
    assert after["glue.mnli.select"] == {("glue.mnli", "afterany")}        # a sweep ends even if points failed
    assert after["glue.chained"] == {("glue.mnli.select", "afterok")}      # RTE/MRPC/STS-B: the selected MNLI run
    assert after["dpr.report"] == {("dpr.select", "afterok")}              # the selected LR on all 15 sets
    for name in ("mldr_ood", "mldr_id", "code"):                          # spec.depends_on: the selected DPR run
        assert after[name] == {("dpr.select", "afterok")}, name
    assert after["mldr_colbert"] == {("colbert.select", "afterok")}        # task.source.task=colbert
    assert after["efficiency"] == set() and steps["leaderboard"].kind == "cpu"
    assert {s.kind for n, s in steps.items() if n.endswith(".select")} == {"cpu"}
    order = list(steps)
    assert all(order.index(up) < order.index(n) for n, s in steps.items() for up, _ in s.after)
    rte = next(j for j in steps["glue.chained"].jobs if "task.tasks=rte" in j.overrides)
    assert {"sweep=glue-paper", "model=modernbert-base", "task=glue"} <= set(rte.overrides)
    report = steps["dpr.report"].jobs[0]
    assert report.mode == "report" and report.params == ("task.lr",) and "sweep=beir-lr" not in report.overrides


def test_a_sharded_stage_is_a_shard_array_then_the_merge() -> None:
    """paper.stages.<step>.shards=K: the evaluation (a sweep's report) as K shard jobs at once, then the merge after
    the whole array (afterok); a training step cannot be sharded."""
    paper = graph.load_paper("paper", ["paper.stages.dpr.shards=4", "paper.stages.mldr_ood.shards=2"])
    steps = {s.name: s for s in graph.build(paper, ["model=modernbert-base"])}
    array, merge = steps["dpr.report.shards"], steps["dpr.report"]
    assert array.after == [("dpr.select", "afterok")] and merge.after == [("dpr.report.shards", "afterok")]
    assert [j.key for j in array.jobs] == [f"dpr.report.shard[{i}]" for i in range(4)]
    assert all(j.mode == "report" and j.source == "dpr" and f"task.shard={i}" in j.overrides
               for i, j in enumerate(array.jobs))
    assert {"task.shards=4", "task.shard_launcher=external"} <= set(merge.jobs[0].overrides)
    assert not any(o.startswith("task.shard=") for o in merge.jobs[0].overrides)
    assert steps["mldr_ood.shards"].after == [("dpr.select", "afterok")]   # the step's own dependency moves first
    with pytest.raises(graph.HarnessError, match="only an evaluation step"):
        graph.build(graph.load_paper("paper", ["paper.stages.mldr_id.shards=2"]), ["model=modernbert-base"])


def test_the_cost_model_is_tokens_over_throughput() -> None:
    tp = cost.Throughput(short=100_000.0, long=50_000.0, source="test")
    work = cost.Work(train=1e6, short=2e6, long=1e6)
    c = cost.cost_data()
    expected = (1e6 * c["train_factor"] + 2e6) / 1e5 / 3600 + 1e6 / 5e4 / 3600
    assert cost.gpu_hours(work, tp, "rtx4090") == pytest.approx(expected)
    assert cost.gpu_hours(work, tp, "h100") == pytest.approx(expected / c["gpu_speed"]["h100"])
    seed = cost.throughput({"name": "modernbert-base", "family": "ModernBERT", "size": "base"}, None)
    assert (seed.short, seed.long) == (147_300.0, 133_800.0) and "Table 2" in seed.source   # the paper's figures


def test_measured_throughput_replaces_the_seed(tmp_path) -> None:
    for ds, rate in (("short_variable", 5000.0), ("long_variable", 3000.0)):
        write_record(tmp_path, ResultRecord(task="efficiency", dataset=ds, split="synthetic",
                                            model={"name": "m"}, metrics={"tokens_per_s": rate},
                                            main_score="tokens_per_s", run_id="r", details={"device": "cpu"}))
    tp = cost.throughput({"name": "m", "family": "ModernBERT", "size": "base"}, str(tmp_path))
    assert (tp.short, tp.long, tp.measured) == (5000.0, 3000.0, True) and "measured here" in tp.source
    assert cost.gpu_hours(cost.Work(short=5000.0 * 3600), tp, "h100") == pytest.approx(1.0)   # not rescaled


def test_dry_run_for_modernbert_base_needs_no_hub(tmp_path) -> None:
    from tests.forked import run_module

    out = run_module("harness.paper", "model=modernbert-base", f"paths.results={tmp_path}/results", "--dry-run",
                     cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for step in ("glue.mnli", "glue.chained", "dpr", "dpr.select", "dpr.report", "mldr_ood", "mldr_id", "code",
                  "colbert", "colbert.report", "mldr_colbert", "efficiency", "leaderboard"):
        assert any(line.split()[:1] == [step] for line in lines), step
    total = next(line for line in lines if line.startswith("total"))
    assert " 408 " in total and "GPU-hours estimated" in total and float(total.split()[3]) > 0
    assert not (tmp_path / "results").exists()                       # a preview writes nothing


def test_a_job_that_ends_while_the_records_are_read_is_not_submitted_again(tmp_path) -> None:
    """The re-submit race seen on the cluster: the queue is read before the records, so a job that ends in between
    is still found queued (its id is waited on), never submitted a second time."""
    from harness.paper import slurm
    from harness.paper.graph import Job, Step
    from harness.paper.progress import JobState

    job = Job(key="glue[lr=1]", step="glue", mode="run", task="glue")
    (tmp_path / "ledger.json").write_text(json.dumps({job.key: "126"}))
    unfinished = {job.key: JobState(job=job, cells=4, done=0)}   # read while it ran
    ids = slurm.submit([Step("glue", "train", [job])], unfinished, tmp_path / "context.json", {}, tmp_path,
                       queued={"126": ("R", "None")})             # the queue, read before: running
    assert ids == {"glue": ["126"]}
    assert json.loads((tmp_path / "ledger.json").read_text()) == {job.key: "126"}
