"""The whole-paper graph: built from the task specs, planned from records, costed by a readable model; the
dry-run needs no hub. (Execution, local and on SLURM, is tested in test_paper_runs.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

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
    # host memory per BEIR set, from the run's memory model: ColBERT's report step asks SLURM for the largest
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["colbert.report"])
    host = lines[at + 1].split("host memory: ")[1].removesuffix(" GB")
    per_set = {p.rsplit(" ", 1)[0]: float(p.rsplit(" ", 1)[1]) for p in host.split(", ")}
    assert {"msmarco", "fever", "hotpotqa", "nq"} <= set(per_set) and per_set["msmarco"] > per_set["arguana"]
    headroom = cost.cost_data()["host_memory"]["headroom"]
    mem = float(lines[at].split(" GB, ")[0].rsplit(", ", 1)[1])
    assert max(per_set.values()) * headroom - 0.1 <= mem < max(per_set.values()) * headroom + 1.1


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


def test_a_step_asks_for_the_memory_its_jobs_need() -> None:
    """``Work.host`` (GB per dataset, from the memory model) -> the step's ``mem_gb`` (x headroom, whole GB), never
    under the cluster profile's; steps that model none keep the profile's."""
    from harness.tasks.retrieval.retrievers.plaid_memory import job_host_gb

    a, b = graph.Job("a", "s", "run", "colbert"), graph.Job("b", "s", "run", "colbert")
    state = type("S", (), {})
    states = {"a": state(), "b": state()}
    states["a"].work = cost.Work(host={"msmarco": 50.2, "nq": 20.0})
    states["b"].work = cost.Work(host={"nq": 30.0})
    step, glue = graph.Step("s", "eval", [a, b]), graph.Step("g", "train", [])
    cost.host_memory([step, glue], states)
    headroom = cost.cost_data()["host_memory"]["headroom"]
    assert step.mem_gb == -(-50.2 * headroom // 1) and glue.mem_gb is None
    profile = {"eval": {"gpus": 1, "cpus": 8, "mem_gb": 32}, "train": {"gpus": 1, "cpus": 8, "mem_gb": 32}}
    assert step.resources(profile)["mem_gb"] == step.mem_gb and glue.resources(profile)["mem_gb"] == 32
    assert cost.host_by_dataset(step, states) == {"msmarco": 50.2, "nq": 30.0}
    # DPR grows with documents and queries only; PLAID adds its build, split by shards
    dense = job_host_gb(8.8e6, 7000, 73, None, 128, 1)
    from harness.core.typed import from_conf
    from harness.tasks.retrieval.settings import MultiVectorSearch, PlaidSettings

    search = MultiVectorSearch(query_length=32, index="plaid", plaid=from_conf(PlaidSettings, "plaid/default",
                                                                               backend="stanford"),
                               plaid_max_memory_gb=None)
    one, four = job_host_gb(8.8e6, 7000, 73, search, 128, 1), job_host_gb(8.8e6, 7000, 73, search, 128, 4)
    assert dense < 10 < four < one


@pytest.mark.slurm
def test_slurm_is_asked_for_the_memory_model_s_host_memory(tmp_path) -> None:
    """On the local cluster: a ColBERT PLAID evaluation of SciFact is submitted with ``--mem`` from the memory model
    (above the local profile's 4 GB), the figure the dry run shows; SLURM holds the job with that minimum."""
    from tests.conftest import SHARED_DATA, TINY_MODEL
    from tests.test_paper_runs import scontrol

    job = ["task.train=false", f"task.data_dir={SHARED_DATA}", "task.datasets=[scifact]", "task.index=plaid",
           "task.plaid.backend=stanford", "device=cpu"]
    paper = tmp_path / "paper-mem.yaml"
    paper.write_text(json.dumps({"stages": {"scifact": {"task": "colbert", "overrides": job, "kind": "eval"}},
                                 "leaderboard": False, "min_finished": 0.5, "overrides": [], "launcher": "slurm",
                                 "cluster": "local", "site": None}))
    common = [f"paper={paper}", "model=modernbert-base", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert",
              f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs", f"paths.cache={tmp_path}/cache"]
    preview = subprocess.run([sys.executable, "-m", "harness.paper", *common, "--dry-run"], capture_output=True,
                             text=True, cwd=REPO, timeout=300)
    assert preview.returncode == 0, preview.stderr[-2000:]
    line = next(x for x in preview.stdout.splitlines() if x.startswith("scifact "))
    mem = float(line.split(" GB, ")[0].rsplit(", ", 1)[1])
    assert mem > 4
    ledger = tmp_path / "paper" / "tiny-modernbert" / "ledger.json"
    try:
        done = subprocess.run([sys.executable, "-m", "harness.paper", *common], capture_output=True, text=True,
                              cwd=REPO, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        (job_id,) = json.loads(ledger.read_text()).values()
        held = scontrol(job_id)
    finally:
        ids = sorted(set(json.loads(ledger.read_text()).values())) if ledger.is_file() else []
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=30)
    assert held.get("MinMemoryNode") in (f"{mem:g}G", f"{mem * 1024:g}M"), held
