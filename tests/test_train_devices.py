"""``task.devices=N``: a training on N processes (torch.distributed's launcher, DDP over gloo on this CPU) takes the
micro-batches and optimizer steps of one process: the batch arithmetic (accelerate's ``BatchSamplerShard`` over
``ranks.StepBatches``), the settings and the run identity, the launcher's failures, the paper graph's resources and
cost, and end to end: tiny DPR and ColBERT KD on 2 processes with accumulation k equal 1 process with 2k (the loss
and gradient norm at every step, the final weights, nDCG@10), a killed rank, a diverging one."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from accelerate.data_loader import BatchSamplerShard

from harness.core import results
from harness.core.errors import HarnessError, TrainingDivergedError
from harness.run.planning import planner_of
from harness.run.runner import run
from harness.training.ranks import StepBatches
from harness.trial.toy_data import _kd
from tests.conftest import REPO, compose, write_beir_folder, write_triplets
from tests.forked import run_module
from tests.test_retrieval_runs import overrides as dense_overrides


# ------------------------------------------------------------------------------------------------ batch arithmetic
class Batches:
    """A batch sampler of ``planned`` batches (``[i]``: batch i) that yields only the first ``yields`` (a
    NO_DUPLICATES sampler that cannot fill its last batches)."""

    batch_size, drop_last = 1, True

    def __init__(self, planned: int, yields: int | None = None) -> None:
        self.planned, self.yields = planned, planned if yields is None else yields
        self.epochs: list[int] = []

    def __len__(self) -> int:
        return self.planned

    def __iter__(self):
        return iter([[i] for i in range(self.yields)])

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


def one_process(planned: int, yields: int, group: int) -> list[list[int]]:
    """The steps one process applies (transformers' loop at accumulation ``group``): whole groups, and the planned
    last, shorter one when the sampler filled it; a group cut short by the sampler is computed but never applied."""
    steps = [list(range(s, min(s + group, yields))) for s in range(0, yields, group)]
    return [s for s in steps if len(s) == group or s[-1] == planned - 1]


def ranks_steps(inner: Batches, n: int, k: int) -> tuple[list[list[int]], dict[int, float]]:
    """What N ranks at accumulation k apply: step j = every rank's micro-batches jk..(j+1)k-1, and each real
    micro-batch's weight in the gradient after DDP's mean (the trainer's 1/k, or 1/c in a shorter step, times
    StepBatches' factor, over N); copies weigh 0 and are left out of the steps."""
    stream = StepBatches(inner, n, n * k)
    shares = [list(BatchSamplerShard(stream, n, r, even_batches=False)) for r in range(n)]
    assert len({len(s) for s in shares}) == 1                             # every rank as many micro-batches
    assert all(len(s) == len(stream) // n for s in shares) or inner.yields < inner.planned
    steps: list[list[int]] = []
    weight: dict[int, float] = {}
    for j in range(math.ceil(len(shares[0]) / k)):
        step = []
        for r, share in enumerate(shares):
            mine = share[j * k:(j + 1) * k]
            for i, (b,) in enumerate(mine, start=j * k):
                w = stream.factor(i, r, len(mine)) / len(mine) / n
                if w:
                    step.append(b)
                    weight[b] = weight.get(b, 0.0) + w
        steps.append(sorted(step))
    return steps, weight


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_ranks_take_one_process_micro_batches_in_its_steps(n: int, k: int) -> None:
    for planned in range(1, 4 * n * k + 2):
        steps, weight = ranks_steps(Batches(planned), n, k)
        expected = one_process(planned, planned, n * k)
        assert steps == expected, (planned, steps, expected)
        for step in expected:                                  # each micro-batch counts 1/(micro-batches of its step)
            assert all(weight[b] == pytest.approx(1 / len(step)) for b in step)


def test_a_group_the_sampler_cannot_fill_is_not_applied_on_ranks_either() -> None:
    for planned, yields in [(10, 7), (10, 9), (12, 11), (8, 3)]:
        steps, _ = ranks_steps(Batches(planned, yields), 2, 2)
        assert [s for s in steps if s] == one_process(planned, yields, 4)


def test_the_epoch_and_the_index_sampler_reach_the_inner_sampler() -> None:
    inner = Batches(6)
    inner.sampler = "random"
    stream = StepBatches(inner, 2, 2)
    stream.set_epoch(3)
    assert inner.epochs == [3] and stream.sampler == "random"
    stream.sampler = "seeded"                                  # accelerate's SeedableRandomSampler, as on one process
    assert inner.sampler == "seeded"


def test_gathered_negatives_drop_the_micro_batches_that_do_not_fill_a_round() -> None:
    stream = StepBatches(Batches(7), 2, 4, pad=False)          # a copy would be every rank's negative
    assert [b for (b,) in stream] == [0, 1, 2, 3, 4, 5] and len(stream) == 6 and stream.tail is None


# ------------------------------------------------------------------------------------------------ settings, identity
def dense_node(**keys):
    from harness.core.typed import from_conf
    from harness.training.settings import DenseTraining

    return from_conf(DenseTraining, "task/beir", part=True, **{"lr": 3e-5, "batch_size": 64,
                                                               "gradient_accumulation_steps": 64, **keys})


def test_devices_must_divide_the_accumulation() -> None:
    assert dense_node(devices=8).accumulation_per_device == 8             # the authors' 64 x 8 on 8 GPUs
    with pytest.raises(HarnessError, match=r"^task.devices=3 does not divide task.gradient_accumulation_steps=64: .*"
                                           r"valid task.devices: 1, 2, 4, 8, 16, 32, 64 "):
        dense_node(devices=3)
    with pytest.raises(HarnessError, match=r"gather_across_devices=true .* task.devices, which is 1"):
        dense_node(gather_across_devices=True)


def test_devices_stay_out_of_the_run_id_gathered_negatives_enter_it(tmp_path: Path) -> None:
    triplets = write_triplets(tmp_path / "t.tsv")
    base = dense_overrides(tmp_path, tmp_path / "data", "task.train_data.source=file",
                           f"task.train_data.path={triplets}", "task.gradient_accumulation_steps=4")

    def family(*extra: str):
        return planner_of(compose([*base, *extra]))

    def cell(*extra: str):
        return family(*extra).cells()[0]

    one, two = cell(), cell("task.devices=2")
    assert one.run_id == two.run_id and "devices" not in one.identity["task"]
    gathered = cell("task.devices=2", "task.gather_across_devices=true")
    assert gathered.run_id != one.run_id
    assert gathered.identity["task"]["gather_across_devices"] is True and gathered.identity["task"]["devices"] == 2
    assert cell("task.devices=4", "task.gather_across_devices=true").run_id != gathered.run_id
    shown = family("task.devices=2", "task.gather_across_devices=true").runplan().header.hyperparameters["train"]
    assert (shown["gather_across_devices"], shown["devices"]) == (True, 2)
    assert "gather_across_devices" not in family("task.devices=2").runplan().header.hyperparameters["train"]


def test_devices_are_checked_before_any_work() -> None:
    from harness.training.ranks import check_devices

    check_devices(4, "cpu")                                                # N processes share the cores (gloo)
    check_devices(1, "cuda:3")
    import torch

    visible = torch.cuda.device_count()
    with pytest.raises(HarnessError, match=rf"task.devices={visible + 2} needs {visible + 2} GPUs but {visible} are "
                                           "visible"):
        check_devices(visible + 2, "cuda")
    with pytest.raises(HarnessError, match=r"trains on GPUs 0..1, not from cuda:1: set device=cuda"):
        check_devices(2, "cuda:1")
    with pytest.raises(HarnessError, match=r"not on device=mps"):
        check_devices(2, "mps")


def failed(message: str, exitcode: int = 1, timestamp: int = 100) -> SimpleNamespace:
    return SimpleNamespace(message={"message": message}, exitcode=exitcode, timestamp=timestamp)


def test_a_failed_launch_names_the_rank_that_caused_it() -> None:
    from harness.training.ranks import failure

    gone = SimpleNamespace(failures={
        0: failed("DistBackendError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer", timestamp=99),
        1: SimpleNamespace(message="Signal 9 (SIGKILL) received by PID 4242", exitcode=-9, timestamp=100)})
    err = failure(gone, 2)
    assert type(err) is HarnessError
    assert str(err).startswith("training process rank 1 of 2 failed: Signal 9 (SIGKILL) received by PID 4242; then "
                               "rank 0: DistBackendError: [gloo")
    diverged = failure(SimpleNamespace(failures={1: failed("TrainingDivergedError: training loss became nan")}), 2)
    assert isinstance(diverged, TrainingDivergedError)
    assert str(diverged).startswith("training process rank 1 of 2 failed: training loss became nan (the other")


# ------------------------------------------------------------------------------------------------ the paper graph
def test_a_training_stage_on_devices_asks_for_them_and_counts_them() -> None:
    from harness.paper import cost, graph, show

    paper = {"stages": {"dpr": {"task": "beir", "kind": "train", "devices": 2, "overrides": ["task.lr=1e-4"]},
                        "ood": {"task": "mldr"}}, "leaderboard": False}
    steps = {s.name: s for s in graph.build(paper, ["model=modernbert-base"])}
    (job,) = steps["dpr"].jobs
    assert "task.devices=2" in job.overrides and steps["dpr"].devices == 2 and steps["ood"].devices == 1
    local = {"train": {"gpus": 0, "cpus": 1, "mem_gb": 4, "timeout_min": 60}}
    gpu = {"train": {"gpus": 1, "cpus": 8, "mem_gb": 64, "timeout_min": 1440}}
    assert show.resources(steps["dpr"], local) == "CPU: 2 CPU, 8 GB, 60 min (2 training processes)"
    assert show.resources(steps["dpr"], gpu) == "2 GPU, 16 CPU, 128 GB, 1440 min (2 training processes)"
    work, tp = cost.Work(train=1e6, fixed_s=5.0), cost.Throughput(1e4, 1e4, "test")
    assert cost.device_hours(work, tp, "rtx4090", 2) == pytest.approx(cost.gpu_hours(work, tp, "rtx4090") + 5 / 3600)
    from harness.paper.show import devices

    assert devices("train", local) * steps["dpr"].devices == 2
    paper["stages"]["ood"]["devices"] = 2
    with pytest.raises(HarnessError, match=r"paper.stages.ood.devices=2: only a training step trains on several"):
        graph.build(paper, ["model=modernbert-base"])


def test_evaluation_after_a_training_on_gpus_is_sharded_over_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.tasks.retrieval import devices
    from harness.tasks.retrieval.settings import ShardSettings

    shards = ShardSettings(shards=1, shard_tokens=10, shard=None, shard_launcher="sequential")

    def task(device: str, n: int = 2, trains: bool = True):
        settings = SimpleNamespace(training=SimpleNamespace(devices=n), sharding=shards)
        return SimpleNamespace(settings=settings, trains=trains, device=device)

    shardable = SimpleNamespace(search_shard=None, cache_dir="cache")
    assert devices.over_training_devices(task("cpu"), shardable, print) is None           # CPU: this process evaluates
    assert devices.over_training_devices(task("cuda", n=1), shardable, print) is None
    assert devices.over_training_devices(task("cuda"), SimpleNamespace(cache_dir="c"), print) is None   # PLAID
    monkeypatch.setattr(devices, "launcher", lambda plan, part, shards: ("launch", shards))
    settings, launch = devices.over_training_devices(task("cuda"), shardable, print)
    assert (settings.shards, settings.shard_launcher, launch) == (2, "devices", ("launch", 2))


# ------------------------------------------------------------------------------------------------ end to end
GRAPH = """# one DPR training on 2 processes, from the paper graph (tests/test_train_devices.py)
data: ???
stages:
  dpr:
    task: beir
    kind: train
    devices: 2
    overrides: ["task.data_dir=${data}", "task.datasets=[nfcorpus]", task.train_data.source=file,
                "task.train_data.path=${data}/triplets.tsv", task.batch_size=8, task.gradient_accumulation_steps=2,
                task.loss=mnrl, task.max_seq_length=64, task.lr=1e-4]
leaderboard: false
min_finished: 0.5
overrides: []
launcher: slurm
cluster: local
site: null
"""


def losses(folder: Path) -> dict[str, list[float]]:
    """TensorBoard's scalars of a training (rank 0 writes them on N processes)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in ("train/loss", "train/grad_norm")}


def weights(model_dir: str) -> dict[str, object]:
    from safetensors.torch import load_file

    return {f"{p.relative_to(model_dir)}:{k}": v for p in sorted(Path(model_dir).rglob("*.safetensors"))
            for k, v in load_file(str(p)).items()}


def assert_same_training(one: results.ResultRecord, two: results.ResultRecord, tmp: Path, task: str) -> None:
    """2 processes with accumulation k == 1 process with 2k: same run, loss and gradient norm at every step within
    1e-5, final weights within 1e-5 (fp32), same nDCG@10; the record says how it ran."""
    assert one.run_id == two.run_id and one.status == two.status == "ok"
    a, b = one.model["trained"], two.model["trained"]
    assert a["steps"] == b["steps"] >= 2 and a["effective_batch_size"] == b["effective_batch_size"]
    assert (b["devices"], "devices" in a) == (2, False) and two.config["task"]["devices"] == 2
    assert b["train_loss"] == pytest.approx(a["train_loss"], abs=1e-5)
    curves = [losses(tmp / out / "tensorboard" / task / "tiny-modernbert" / one.run_id) for out in ("o1", "o2")]
    for tag in ("train/loss", "train/grad_norm"):
        assert len(curves[0][tag]) == a["steps"]                           # logged at every step
        assert curves[1][tag] == pytest.approx(curves[0][tag], abs=1e-5), tag
    w1, w2 = weights(a["model_dir"]), weights(b["model_dir"])
    assert w1.keys() == w2.keys()
    assert max(float((w1[k] - w2[k]).abs().max()) for k in w1) < 1e-5       # type: ignore[operator]
    assert two.metrics["ndcg_at_10"] == one.metrics["ndcg_at_10"]


def twice(base: list[str], tmp: Path, accumulation: int) -> tuple[results.ResultRecord, results.ResultRecord]:
    """The run on 1 process at ``accumulation`` and on 2 processes (each accumulating half), each in its own
    folders, logging to TensorBoard."""
    out = []
    for n in (1, 2):
        (rec,) = run(compose([*base, "device=cpu", "logger=tensorboard",
                              f"task.gradient_accumulation_steps={accumulation}",
                              f"task.devices={n}", f"paths.results={tmp}/r{n}", f"paths.outputs={tmp}/o{n}",
                              f"paths.cache={tmp}/c{n}"]))
        out.append(rec)
    return out[0], out[1]


def test_dpr_on_two_processes_is_one_process_training(tmp_path: Path, toy_beir: Path) -> None:
    """CachedMNRL (the paper's loss) on 56 triplets in batches of 8: 7 micro-batches, steps of 4 then 3, so the last
    step is shared unevenly (2 + 1, and a copy that counts nothing); two epochs, the second NO_DUPLICATES order
    reseeded with seed + 1 on every rank as on one process."""
    triplets = write_triplets(tmp_path / "t.tsv", n=56)
    base = dense_overrides(tmp_path, toy_beir, "task.train_data.source=file", f"task.train_data.path={triplets}",
                           "task.batch_size=8", "task.mini_batch_size=4", "task.lr=1e-4", "task.epochs=2")
    one, two = twice(base, tmp_path, accumulation=4)
    assert one.model["trained"]["steps"] == 4 and two.model["trained"]["accumulation_per_device"] == 2
    assert_same_training(one, two, tmp_path, "beir")


def test_colbert_kd_on_two_processes_is_one_process_training(tmp_path: Path, toy_beir: Path) -> None:
    """PyLate KD on 22 samples in batches of 4: 6 micro-batches, the last one of 2 samples (one process keeps it;
    sentence-transformers would drop it under DDP)."""
    from tests.test_colbert import TINY

    _kd(tmp_path / "kd.jsonl", n=22)
    base = ["task=colbert", *TINY, f"task.data_dir={toy_beir}", "task.datasets=[toy]",
            "+task.catalog.toy={split: test}", "task.index=exact", "task.train_data.source=file",
            f"task.train_data.path={tmp_path}/kd.jsonl", "task.train_data.n_ways=4", "task.batch_size=4",
            "task.lr=1e-4"]
    one, two = twice(base, tmp_path, accumulation=2)
    assert one.model["trained"]["steps"] == 3
    assert_same_training(one, two, tmp_path, "colbert")


def harness_command(tmp: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "harness", *dense_overrides(tmp, tmp / "data", "task.train_data.source=file",
                                                             f"task.train_data.path={tmp}/t.tsv", "task.batch_size=8",
                                                             "task.gradient_accumulation_steps=2", "task.loss=mnrl",
                                                             "task.lr=1e-4", "device=cpu", *extra)]


def test_a_killed_rank_fails_the_run_with_its_error_then_it_resumes(tmp_path: Path) -> None:
    import psutil

    write_beir_folder(tmp_path / "data")
    write_triplets(tmp_path / "t.tsv", n=1200)                   # 75 steps: the kill lands mid-training
    proc = subprocess.Popen(harness_command(tmp_path, "task.devices=2"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "DPR training:" in line:                              # rank 0's first progress line: both ranks train
            workers = [c for c in psutil.Process(proc.pid).children(recursive=True)
                       if "spawn_main" in " ".join(c.cmdline())]
            workers.sort(key=lambda c: (c.create_time(), c.pid))   # the launcher starts rank 0, then rank 1
            assert len(workers) == 2
            workers[1].send_signal(signal.SIGKILL)
            break
    _, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    error = [x for x in err.splitlines() if x.startswith("error: ")]
    assert error and error[-1].startswith(f"error: training process rank 1 of 2 failed: Signal 9 (SIGKILL) received "
                                          f"by PID {workers[1].pid}"), err[-2000:]
    assert not list((tmp_path / "results").rglob("*.json"))         # no record
    models = tmp_path / "outputs" / "models"
    left = [p for p in models.rglob("*") if p.is_file() or p.name in ("checkpoints", "staging", "model")]
    assert not left, left                                          # no marker, model, staging or checkpoint left
    again = run_module("harness", *harness_command(tmp_path, "task.devices=2")[3:], cwd=REPO, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    (rec,) = [r for _, r in results.iter_records(tmp_path / "results")]
    assert rec.status == "ok" and rec.model["trained"]["devices"] == 2


def test_a_diverging_rank_fails_its_cells_and_status_shows_its_error(tmp_path: Path) -> None:
    """The paper graph's local executor (a job forked from its warm server, which launches the ranks): a training
    that diverges on 2 processes fails its cells as one process's does, and ``--status`` shows the rank's error."""
    from tests.test_paper_runs import paper

    data = tmp_path / "data"
    write_beir_folder(data, "nfcorpus")
    write_triplets(data / "triplets.tsv", n=48)
    (tmp_path / "graph.yaml").write_text(GRAPH.replace("task.lr=1e-4", "task.lr=1e30"))
    work = tmp_path / "work"
    ran = paper(work, data, "paper.launcher=local", graph=tmp_path / "graph.yaml", timeout=600)
    assert ran.returncode != 0
    (rec,) = [r for _, r in results.iter_records(work / "results")]
    assert rec.status == "failed" and rec.error.startswith("training process rank")
    assert "training loss became nan" in rec.error
    status = paper(work, data, "--status", graph=tmp_path / "graph.yaml", timeout=300)
    lines = status.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("dpr "))
    assert lines[at].split()[1] == "failed"
    assert "training process rank" in lines[at + 1] and "of 2 failed: training loss became nan" in lines[at + 1]


# ------------------------------------------------------------------------------------------------ on SLURM


@pytest.mark.slurm
def test_the_local_slurm_cluster_runs_a_two_process_training_from_the_paper_graph(tmp_path: Path) -> None:
    """Its one job asks for 2 CPUs (2 training processes, gloo), the preview counts 2 devices, and its record is the
    one-process run's: same run id, steps, loss and nDCG@10."""
    import time

    from tests.test_paper_runs import common, paper, wait_for

    data = tmp_path / "data"
    write_beir_folder(data, "nfcorpus")
    write_triplets(data / "triplets.tsv", n=64)
    (tmp_path / "graph.yaml").write_text(GRAPH)
    work = tmp_path / "work"
    preview = paper(work, data, "--dry-run", graph=tmp_path / "graph.yaml", timeout=300)
    assert preview.returncode == 0, preview.stderr
    row = next(line for line in preview.stdout.splitlines() if line.startswith("dpr "))
    assert "CPU: 2 CPU, 8 GB, 60 min (2 training processes)" in row, row
    submitted = paper(work, data, graph=tmp_path / "graph.yaml", timeout=300)
    assert submitted.returncode == 0, submitted.stderr
    start = time.time()
    wait_for(work / "paper" / "tiny-modernbert" / "ledger.json", timeout=1500)
    (rec,) = [r for _, r in results.iter_records(work / "results")]
    assert rec.status == "ok", rec.error
    assert rec.model["trained"]["devices"] == 2 and rec.scheduler["slurm"]["job_id"]
    status = paper(work, data, "--status", graph=tmp_path / "graph.yaml", timeout=300)
    assert next(x for x in status.stdout.splitlines() if x.startswith("dpr ")).split()[1] == "done", status.stdout

    import yaml

    step = yaml.safe_load(GRAPH)["stages"]["dpr"]
    overrides = [o.replace("${data}", str(data)) for o in step["overrides"]]
    (one,) = run(compose([*common(tmp_path / "one"), "task=beir", *overrides]))
    assert one.run_id == rec.run_id and one.model["trained"]["steps"] == rec.model["trained"]["steps"]
    assert rec.model["trained"]["train_loss"] == pytest.approx(one.model["trained"]["train_loss"], abs=1e-5)
    assert rec.metrics == pytest.approx(one.metrics, abs=1e-9)
    print(f"2-process training job on SLURM: {time.time() - start:.0f} s queued and run")
