"""The whole paper for one model as one graph (``python -m harness.paper``), end to end: the shrunk graph of
tests/fixtures/paper-tiny.yaml (every step of conf/paper/paper.yaml, a few jobs each) on the tiny ModernBERT and
tiny local data for every Table 1 column, run locally and on the real single-node SLURM cluster
(slurm/local-cluster.sh; the ``slurm`` tests skip without one): records, resume, preview, status, failure policy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness.core import results
from harness.trial.toy_data import BEIR, CQA, LANGS, write_paper_data
from tests.conftest import REPO, TINY_MODEL
from tests.forked import run_module

PAPER = REPO / "tests" / "fixtures" / "paper-tiny.yaml"
TABLE1 = ("beir_dpr", "mldr_ood_dpr", "mldr_id_dpr", "beir_colbert", "mldr_ood_colbert", "glue", "csn", "sqa")
ROW = "run:tiny-modernbert|ModernBERT|base"


# ------------------------------------------------------------------------------------------------ data
# ------------------------------------------------------------------------------------------------ helpers
def common(work: Path, outputs: Path | None = None) -> list[str]:
    """What every job gets: the tiny ModernBERT (one leaderboard row) and this run's folders."""
    return ["model=modernbert-base", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert", "model.max_length=128",
            "precision=fp32", "device=cpu", f"paths.results={work}/results", f"paths.outputs={outputs or work}/outputs",
            f"paths.cache={outputs or work}/cache"]


def paper(work: Path, data: Path, *extra: str, graph: Path = PAPER, outputs: Path | None = None,
          timeout: int = 1500) -> subprocess.CompletedProcess:
    """``python -m harness.paper``: a fresh interpreter where it submits to SLURM, else forked from the tests' warm
    server (tests/forked.py: the seconds of importing torch and transformers saved on every preview, status and
    local run)."""
    args = [f"paper={graph}", f"paper.data={data}", *common(work, outputs), *extra]
    if submits(graph, extra):
        return subprocess.run([sys.executable, "-m", "harness.paper", *args], capture_output=True, text=True, cwd=REPO,
                              timeout=timeout)
    return run_module("harness.paper", *args, cwd=REPO, timeout=timeout)


def submits(graph: Path, extra: tuple[str, ...]) -> bool:
    """Whether the command submits the graph to SLURM (not a preview or a status, not the local launcher)."""
    if "--dry-run" in extra or "--status" in extra:
        return False
    launcher = next((a.split("=", 1)[1] for a in extra if a.startswith("paper.launcher=")), None)
    return (launcher or OmegaConf.load(graph).get("launcher", "local")) == "slurm"


def records(work: Path) -> dict[tuple[str, str, str], tuple[str, float | None]]:
    """(task, dataset, run id) -> (status, main score) of every record under ``work``."""
    return {(r.task, r.dataset, r.run_id): (r.status, r.score) for _, r in results.iter_records(work / "results")}


def folder_of(work: Path) -> Path:
    return work / "paper" / "tiny-modernbert"


def outcomes(work: Path) -> dict[str, dict]:
    from harness.paper.job import outcomes as read

    return read(folder_of(work))


def step_rows(out: str) -> dict[str, list[str]]:
    """The table lines of --dry-run / --status, by step name."""
    return {line.split()[0]: line.split() for line in out.splitlines() if line.split()}


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def failing_graph(src: Path, tmp: Path, min_finished: float) -> Path:
    """The DPR part of the shrunk graph, one LR that diverges (NaN: failed cells) beside the two that finish, over
    a copy of ``src``'s records less two of the report's (so the report has work left)."""
    shutil.copytree(src / "results", tmp / "results")
    for _, rec in results.iter_records(tmp / "results"):
        if rec.task == "beir" and rec.dataset in ("arguana", "scidocs"):
            results.record_path(tmp / "results", "beir", "tiny-modernbert", rec.run_id, rec.dataset).unlink()
    g = OmegaConf.load(PAPER)
    g.stages = {"dpr": g.stages.dpr}
    g.stages.dpr.params = {"task.lr": "1e-4,3e-4,1e30"}
    g.leaderboard, g.min_finished = False, min_finished
    OmegaConf.save(g, tmp / "failing.yaml")
    return tmp / "failing.yaml"


def expected(work: Path) -> set[tuple[str, str]]:
    """(task, dataset) of every record the shrunk graph writes: both LRs on the selection sets, the selected one
    on all 15 BEIR sets (CQADupstack: its 12 subforums and their mean), for DPR and ColBERT; GLUE's 8 tasks; MLDR
    OOD, ID and OOD ColBERT; CodeSearchNet's six languages and their mean, StackOverflow-QA; efficiency."""
    beir = {*BEIR, "cqadupstack", *(f"cqadupstack-{m}" for m in CQA)}
    return ({("glue", t) for t in ("mnli", "sst2", "qnli", "qqp", "cola", "rte", "mrpc", "stsb")}
            | {(t, d) for t in ("beir", "colbert") for d in beir} | {("mldr", "mldr-en")}
            | {("code", d) for d in ("codesearchnet", "stackoverflow-qa", *(f"codesearchnet-{x}" for x in LANGS))}
            | {("efficiency", "short_variable")})


# ------------------------------------------------------------------------------------------------ locally
class Ran:
    def __init__(self, work: Path, proc: subprocess.CompletedProcess, seconds: float) -> None:
        self.work, self.proc, self.seconds = work, proc, seconds


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_paper_data(tmp_path_factory.mktemp("paper-data"))


@pytest.fixture(scope="module")
def local_run(data: Path, tmp_path_factory) -> Ran:
    work = tmp_path_factory.mktemp("paper-local")
    start = time.time()
    proc = paper(work, data, "paper.launcher=local")
    return Ran(work, proc, time.time() - start)


def test_local_graph_runs_end_to_end_and_fills_every_table1_column(local_run: Ran) -> None:
    assert local_run.proc.returncode == 0, local_run.proc.stderr[-3000:]
    recs = records(local_run.work)
    assert all(status == "ok" for status, _ in recs.values())
    assert {(t, d) for t, d, _ in recs} == expected(local_run.work)
    runs = {t: {r for tt, d, r in recs if tt == t and d == "nfcorpus"} for t in ("beir", "colbert")}
    assert len(runs["beir"]) == 2 and len(runs["colbert"]) == 2                 # two LRs swept each
    for task in ("beir", "colbert"):                                            # one LR reported everywhere
        assert len({r for t, d, r in recs if t == task and d == "arguana"}) == 1
    mldr = {r.details["setting"] + "/" + r.details["retriever"] for _, r in results.iter_records(
        local_run.work / "results") if r.task == "mldr"}
    assert mldr == {"ood/single_vector", "id/single_vector", "ood/multi_vector"}
    glue = {r.dataset: r for _, r in results.iter_records(local_run.work / "results") if r.task == "glue"}
    for chained in ("rte", "mrpc", "stsb"):                                     # from the selected MNLI run
        assert glue[chained].details["init_from_run_id"] == glue["mnli"].run_id
    from harness.leaderboard import build_leaderboard

    assert (local_run.work / "site" / "index.html").is_file()                  # the graph's last job built it
    row = build_leaderboard([local_run.work / "results"], published=False).table("overview").cells[ROW]
    assert set(row) == set(TABLE1), set(TABLE1) - set(row)
    assert not any(row[c].partial for c in TABLE1)                              # complete means, not partial ones
    print(f"local end to end: {local_run.seconds:.0f} s")


def test_dry_run_on_the_finished_folder_shows_every_job_done(local_run: Ran, data: Path) -> None:
    p = paper(local_run.work, data, "--dry-run")
    assert p.returncode == 0, p.stderr
    rows = step_rows(p.stdout)
    for step in ("glue.mnli", "glue.mnli.select", "glue", "glue.chained", "glue.select", "dpr", "dpr.select",
                  "dpr.report", "mldr_ood", "mldr_id", "code", "colbert", "colbert.select", "colbert.report",
                  "mldr_colbert", "efficiency", "leaderboard"):
        assert rows[step][2] == rows[step][3], rows[step]                     # jobs == done
    assert rows["total"][1] == rows["total"][2] == "19" and "(0.0 left to run)" in p.stdout
    assert "measured here" in p.stdout                                          # the efficiency job's throughput


def test_efficiency_measured_on_another_machine_counts_as_done(local_run: Ran, data: Path, tmp_path: Path) -> None:
    """The efficiency run id holds the executing machine's hardware, which a planner on a login node cannot know:
    the planner finds the record by the identity without it (``details.plan_key``), so the step is done."""
    shutil.copytree(local_run.work / "results", tmp_path / "results")
    runs = tmp_path / "results" / "efficiency" / "tiny-modernbert"
    (run,) = [d for d in runs.iterdir() if d.is_dir()]
    run.rename(runs / "prec=fp32_n=16-0000000000")                              # measured elsewhere
    rows = step_rows(paper(tmp_path, data, "--dry-run").stdout)
    assert rows["efficiency"][2] == rows["efficiency"][3] == "1", rows["efficiency"]


def test_a_rerun_does_nothing_new(local_run: Ran, data: Path) -> None:
    files = sorted((local_run.work / "results").rglob("*.json")) + sorted(folder_of(local_run.work).rglob("*.json"))
    before = {f: f.stat().st_mtime_ns for f in files if f.name != "context.json"}
    p = paper(local_run.work, data)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "[1/" not in p.stderr and "python -m harness " not in p.stdout     # no job started
    after = {f: f.stat().st_mtime_ns for f in files if f.name != "context.json"}
    assert after == before and not list((local_run.work / "results").rglob("*.lock"))


def test_status_on_the_finished_folder(local_run: Ran, data: Path) -> None:
    p = paper(local_run.work, data, "--status")
    assert p.returncode == 0, p.stderr
    rows = step_rows(p.stdout)
    assert {rows[s.split()[0]][1] for s in p.stdout.splitlines()[1:-1]} == {"done"}
    assert rows["total"][1:3] == ["19", "19"] and float(rows["total"][3]) > 0      # device-hours spent
    assert float(rows["dpr"][7]) > 0 and float(rows["dpr"][8]) > 0                # spent and estimated


def test_failure_policy_locally(local_run: Ran, data: Path, tmp_path: Path) -> None:
    """A sweep point fails (NaN): the selection still runs after the sweep (afterany) and refuses with one line
    when fewer than paper.min_finished of the points finished; --status names the failed cells and the refusal;
    with a lower bound the selection goes through, reporting what failed."""
    graph = failing_graph(local_run.work, tmp_path, 0.9)                        # the two good LRs are done
    p = paper(tmp_path, data, graph=graph, outputs=local_run.work)
    assert p.returncode == 1
    refusal = [line for line in p.stderr.splitlines() if "paper.min_finished" in line]
    assert len(refusal) == 1 and refusal[0].startswith("error: dpr.select: 2 of 3 runs finished, fewer than 90%")
    assert "dpr[lr=1e+30]" in refusal[0] and "nan" in refusal[0]
    done = outcomes(tmp_path)
    assert done["dpr[lr=1e+30]"]["status"] == "failed" and done["dpr.select"]["status"] == "failed"
    assert epoch(done["dpr.select"]["started"]) > epoch(done["dpr[lr=1e+30]"]["ended"])   # after the sweep ended
    assert "dpr.report" not in done                                             # afterok: never started

    s = paper(tmp_path, data, "--status", graph=graph, outputs=local_run.work)
    rows, lines = step_rows(s.stdout), s.stdout.splitlines()
    assert rows["dpr"][1:7] == ["failed", "3", "2", "0", "0", "1"] and rows["dpr.select"][1] == "failed"
    assert rows["dpr.report"][1] == "pending"
    cell = lines[next(i for i, line in enumerate(lines) if line.startswith("dpr ")) + 1]
    assert cell.strip().startswith("dpr[lr=1e+30]: nfcorpus (") and "training loss became nan" in cell
    assert any(line.strip().startswith("dpr.select: dpr.select: 2 of 3 runs finished") for line in lines)

    context = folder_of(tmp_path) / "context.json"
    ctx = json.loads(context.read_text())
    ctx["paper"]["min_finished"] = 0.5
    context.write_text(json.dumps(ctx))
    ok = subprocess.run([sys.executable, "-m", "harness.paper.job", str(context), "dpr.select"], capture_output=True,
                        text=True, cwd=REPO, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "dpr.select: 1 of 3 runs failed: dpr[lr=1e+30]" in ok.stdout


def test_status_of_a_graph_never_submitted_says_so(data: Path, tmp_path: Path) -> None:
    s = paper(tmp_path, data, *SLURM, "--status")
    assert s.returncode == 0, s.stderr
    assert s.stdout.startswith("not submitted yet")
    assert {row[1] for name, row in step_rows(s.stdout).items() if name not in ("step", "total", "not")} == {"todo"}


def test_a_resubmit_replaces_the_context_whole(tmp_path: Path) -> None:
    """``context.json``, which every job reads as it starts, is replaced by a new file (renamed over it), never
    rewritten in place: a job that opened it before a re-submit reads it whole, as it was (rewritten in place, a job
    starting during a re-submit read it empty: "Expecting value: line 1 column 1")."""
    from harness.paper.__main__ import write_context

    old = {"paper": {"stages": {"dpr": {}}}, "common": ["model=x"], "log_dir": None}
    path = write_context(tmp_path, old)
    with path.open() as reading:                                                # a job, opening it
        write_context(tmp_path, {**old, "common": ["model=y"] * 1000})          # a re-submit
        assert json.loads(reading.read()) == old
    assert json.loads(path.read_text())["common"][0] == "model=y"
    assert [p.name for p in tmp_path.iterdir()] == ["context.json"]            # no temporary file left


def test_a_failed_harness_run_is_reported_with_its_own_error_line() -> None:
    from harness.paper.job import JobFailed, _harness

    with pytest.raises(JobFailed) as got:
        _harness("k", ["task=no-such-task"])
    assert str(got.value).startswith("k: python -m harness: ") and "no-such-task" in str(got.value)
    assert "error line is above" not in str(got.value)


def test_a_resubmit_replaces_what_waits_on_a_replaced_job(tmp_path: Path, monkeypatch) -> None:
    """Issue 28, without a cluster: what :func:`harness.paper.slurm.decide` keeps and submits again."""
    from harness.paper import slurm
    from harness.paper.graph import AFTER_ANY, AFTER_OK, Job, Step
    from harness.paper.progress import JobState

    jobs = {k: Job(k, k, "run", "beir") for k in ("a", "b", "c", "lb")}
    steps = [Step("a", "train", [jobs["a"]]), Step("b", "eval", [jobs["b"]], [("a", AFTER_OK)]),
              Step("c", "eval", [jobs["c"]]),
              Step("lb", "cpu", [jobs["lb"]], [("a", AFTER_ANY), ("b", AFTER_ANY), ("c", AFTER_ANY)])]
    states = {k: JobState(j, cells=1) for k, j in jobs.items()}
    ledger = {"a": "1_0", "b": "2_0", "c": "3_0", "lb": "4_0"}
    tries = {"1_0": {"after": []}, "2_0": {"after": ["1"]}, "3_0": {"after": []}, "4_0": {"after": ["1", "2", "3"]}}
    assert slurm.decide(steps, states, ledger, tries, set(tries)) == ({"a", "b", "c", "lb"}, {})   # all queued
    # a was cancelled while queued: a again, and b and lb, which waited on it, not c
    assert slurm.decide(steps, states, ledger, tries, {"2_0", "3_0", "4_0"}) == (
        {"c"}, {"a": ["a"], "b": ["b"], "lb": ["lb"]})
    # lb waits on an attempt of c that is not the current one (a re-submit cut short): lb is replaced
    tries["4_0"]["after"] = ["1", "2", "9"]
    assert slurm.decide(steps, states, ledger, tries, set(tries)) == ({"a", "b", "c"}, {"lb": ["lb"]})
    # everything finished but c: only c; then lb, downstream of it, although its records say done
    states["a"].done = states["b"].done = states["lb"].done = 1
    assert slurm.decide(steps, states, ledger, tries, set()) == (set(), {"c": ["c"], "lb": ["lb"]})


# ------------------------------------------------------------------------------------------------ on SLURM
SLURM = ("paper.launcher=slurm", "paper.cluster=local")


def squeue() -> dict[str, str]:
    from harness.paper.slurm import queue

    return {i: t for i, (t, _) in queue().items()}


def wait_for(ledger_path: Path, timeout: float = 1500) -> None:
    """Until none of the ledger's jobs is queued or running."""
    end = time.time() + timeout
    while time.time() < end:
        ids = set(json.loads(ledger_path.read_text()).values())
        if not ids & set(squeue()):
            return
        time.sleep(3)
    raise AssertionError(f"SLURM jobs still queued after {timeout:.0f} s: {sorted(ids & set(squeue()))}")


def scontrol(job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=False).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def broken_data(data: Path, out: Path) -> Path:
    """``data`` with every file's contents broken after its first line: every file the up-front checks look for is
    there (the graph is submitted), every job that reads one fails."""
    shutil.copytree(data, out)
    for p in out.rglob("*"):
        if p.suffix in (".jsonl", ".tsv"):
            first = p.read_text().splitlines()[0]
            p.write_text(first + "\n" + ("{broken\n" if p.suffix == ".jsonl" else "broken line without tabs\n"))
    return out


def stuck(ledger_path: Path, timeout: float = 900) -> None:
    """Until none of the ledger's jobs runs and every one still queued waits on jobs that can never start (seen on
    two polls in a row: a job's reason can lag its upstream's end by a scheduling pass)."""
    from harness.paper.slurm import NEVER, queue

    end, calm = time.time() + timeout, 0
    while calm < 2:
        assert time.time() < end, f"SLURM jobs still running after {timeout:.0f} s"
        q = queue()
        mine = [q[i] for i in json.loads(ledger_path.read_text()).values() if i in q]
        calm = calm + 1 if all(t == "PD" and r in (NEVER, "Dependency") for t, r in mine) else 0
        time.sleep(4)


def attempts(work: Path) -> dict[str, dict]:
    return json.loads((folder_of(work) / "attempts.json").read_text())


class Submitted(Ran):
    returned: float           # when the first submit command returned
    requeued: str             # the job key requeued while it ran
    cancelled: str            # the job key cancelled (scancel) while it was queued
    broken: dict[str, str]    # the ledger of the submission with a data folder whose files are broken
    broken_status: subprocess.CompletedProcess
    ledger: dict[str, str]    # after the submission with the right data folder
    resubmit: subprocess.CompletedProcess
    status: subprocess.CompletedProcess      # --status once everything has ended


@pytest.fixture(scope="module")
def slurm_run(data: Path, tmp_path_factory) -> Submitted:
    """The shrunk graph on SLURM as it goes wrong on a real cluster: submitted with a data folder whose files are
    broken after their first line (the up-front checks pass: the files are there), left to fail (its jobs fail;
    what waits on them with afterok can never start), re-submitted with the right folder; while that runs, one queued job is cancelled (``scancel``), one running job is requeued
    (``scontrol requeue``) and the graph re-submitted; then wait until SLURM has run everything."""
    from tests.conftest import slurm_unavailable

    if reason := slurm_unavailable():
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("paper-slurm")
    broken_data(data, work / "no-data")
    ledger_path = folder_of(work) / "ledger.json"
    start = time.time()
    first = paper(work, work / "no-data", *SLURM, timeout=300)
    run = Submitted(work, first, 0.0)
    run.returned = time.time()
    assert first.returncode == 0, first.stderr[-3000:]
    run.broken = json.loads(ledger_path.read_text())
    stuck(ledger_path)
    run.broken_status = paper(work, work / "no-data", *SLURM, "--status", timeout=300)
    run.proc = paper(work, data, *SLURM, timeout=300)
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    run.ledger = json.loads(ledger_path.read_text())
    run.cancelled = "colbert.report"                     # queued behind the ColBERT sweep and its selection
    assert squeue().get(run.ledger[run.cancelled]) == "PD"
    subprocess.run(["scancel", run.ledger[run.cancelled]], check=True)
    run.requeued = ""
    while not run.requeued and time.time() - start < 1200:
        q = squeue()
        running = [k for k, i in run.ledger.items() if q.get(i) == "R" and not k.endswith((".select", "leaderboard"))]
        if running:
            time.sleep(4)                                   # let its harness process start
            if squeue().get(run.ledger[running[0]]) == "R":
                subprocess.run(["scontrol", "requeue", run.ledger[running[0]]], check=True)
                run.requeued = running[0]
        time.sleep(1)
    run.resubmit = paper(work, data, *SLURM, timeout=300)
    wait_for(ledger_path)
    run.seconds = time.time() - start
    run.status = paper(work, data, *SLURM, "--status", timeout=300)      # notes every attempt's final state
    return run


@pytest.mark.slurm
def test_slurm_submit_returns_at_once_and_every_dependency_holds(slurm_run: Submitted) -> None:
    from harness.paper import graph

    done = outcomes(slurm_run.work)
    assert set(done) == set(slurm_run.ledger) and all(o["status"] == "ok" for o in done.values()), \
        {k: o["error"] for k, o in done.items() if o["status"] != "ok"}
    assert all(o["slurm"].get("job_id") for o in done.values())                # each ran as a SLURM job
    assert slurm_run.returned < min(epoch(o["ended"]) for o in done.values())   # nothing waited for a job
    ctx = json.loads((folder_of(slurm_run.work) / "context.json").read_text())
    steps = {s.name: s for s in graph.build(ctx["paper"], ctx["common"])}
    held = 0
    for step in steps.values():
        for up, _ in step.after:
            for job in step.jobs:
                for first in steps[up].jobs:
                    assert epoch(done[job.key]["started"]) > epoch(done[first.key]["ended"]), (job.key, first.key)
                    held += 1
    assert held == 33                       # every (job, upstream job) pair of the shrunk graph
    print(f"SLURM end to end: {slurm_run.seconds:.0f} s")


@pytest.mark.slurm
def test_slurm_gives_the_same_records_as_the_local_run(slurm_run: Submitted, local_run: Ran) -> None:
    here = {k: v for k, v in records(slurm_run.work).items() if v[0] == "ok"}   # not the broken data's failures
    there = records(local_run.work)
    assert set(here) == set(there)                                              # the same run ids, nothing more
    for key, (status, score) in there.items():
        assert here[key][0] == status == "ok"
        if key[0] != "efficiency":                                              # throughput: this machine's now
            assert here[key][1] == pytest.approx(score, abs=1e-6), key


@pytest.mark.slurm
def test_slurm_requeue_and_resubmit_lose_and_duplicate_nothing(slurm_run: Submitted, data: Path) -> None:
    assert slurm_run.requeued and slurm_run.resubmit.returncode == 0, slurm_run.resubmit.stderr[-2000:]
    after = json.loads((folder_of(slurm_run.work) / "ledger.json").read_text())
    changed = {k for k in after if after[k] != slurm_run.ledger[k]}
    assert changed == {slurm_run.cancelled, "leaderboard"}                     # nothing else submitted twice
    assert (len(list((slurm_run.work / "results").rglob("*.json")))
            == len(records(slurm_run.work)) == len(expected(slurm_run.work)) + 2 * 4 + 2)   # the other LRs' 4 sets,
    # MLDR's three settings (one column each, one dataset)
    assert not list((slurm_run.work / "results").rglob("*.lock"))
    assert not [p for p in (slurm_run.work / "outputs").rglob("trainer") if p.is_dir()]
    p = paper(slurm_run.work, data, *SLURM, "--dry-run")
    assert p.returncode == 0 and "(0.0 left to run)" in p.stdout
    rows = step_rows(p.stdout)
    assert rows["total"][1] == rows["total"][2] == "19"
    assert {row[1] for name, row in step_rows(slurm_run.status.stdout).items()
            if name not in ("step", "total")} == {"done"}


@pytest.mark.slurm
def test_slurm_failed_cell_ends_failed_and_a_resubmit_replaces_what_can_never_start(
        slurm_run: Submitted, data: Path, tmp_path: Path) -> None:
    """A diverging LR: its job ends FAILED; the selection runs after the sweep anyway (afterany) and refuses
    (FAILED); the report, waiting on it with afterok, can never start; re-submitted with a lower bound, the refused
    selection and the stuck report are replaced and run."""
    graph = failing_graph(slurm_run.work, tmp_path, 0.9)
    p = paper(tmp_path, data, *SLURM, graph=graph, outputs=slurm_run.work, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    ledger_path = folder_of(tmp_path) / "ledger.json"
    first = json.loads(ledger_path.read_text())
    assert set(first) == {"dpr[lr=1e+30]", "dpr.select", "dpr.report"}
    end = time.time() + 600
    while squeue().get(first["dpr.report"]) == "PD" and scontrol(first["dpr.report"]).get("Reason") != "DependencyNeverSatisfied":
        assert time.time() < end
        time.sleep(3)
    for key in ("dpr[lr=1e+30]", "dpr.select"):
        info = scontrol(first[key])
        assert info["JobState"] == "FAILED" and info["ExitCode"] != "0:0", (key, info.get("JobState"))
    done = outcomes(tmp_path)
    assert epoch(done["dpr.select"]["started"]) > epoch(done["dpr[lr=1e+30]"]["ended"])
    assert "fewer than 90%" in done["dpr.select"]["error"]

    again = paper(tmp_path, data, *SLURM, "paper.min_finished=0.5", graph=graph, outputs=slurm_run.work,
                  timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    second = json.loads(ledger_path.read_text())
    assert all(second[k] != first[k] for k in first)                            # replaced, not duplicated
    assert scontrol(first["dpr.report"]).get("JobState") == "CANCELLED"
    wait_for(ledger_path, 900)
    done = outcomes(tmp_path)
    assert done["dpr.select"]["status"] == "ok" and done["dpr.report"]["status"] == "ok"
    assert done["dpr[lr=1e+30]"]["status"] == "failed"
    assert epoch(done["dpr.report"]["started"]) > epoch(done["dpr.select"]["ended"])


@pytest.mark.slurm
def test_slurm_a_graph_that_failed_on_a_wrong_data_folder_is_replaced_whole_when_resubmitted(
        slurm_run: Submitted, local_run: Ran) -> None:
    """Issue 28: after the submission with broken data files, --status shows the harness's own error line, the
    jobs that can never start as blocked and no selection as done; the re-submit with the right folder replaces
    every job that did not complete and everything downstream of one (the afterany selections and leaderboard
    still queued from the first submission included); every job then ends COMPLETED, --status says done, and the
    leaderboard row is the clean local run's."""
    rows, out = step_rows(slurm_run.broken_status.stdout), slurm_run.broken_status.stdout
    assert "triplets.tsv line 2" in out and "(its error line is above)" not in out
    assert rows["dpr"][1] == "failed" and rows["dpr.select"][1] == "failed" and rows["dpr.report"][1] == "blocked"
    assert "blocked: an afterok upstream failed" in out and rows["leaderboard"][1] == "queued"
    assert {name for name, row in rows.items() if row[1:2] == ["done"]} == {"efficiency"}   # needs no data
    tries = attempts(slurm_run.work)
    for key, old in slurm_run.broken.items():
        kept = (tries[old]["state"] or "").startswith("COMPLETED")
        assert (slurm_run.ledger[key] == old) == kept, (key, tries[old])
    assert slurm_run.ledger["leaderboard"] != slurm_run.broken["leaderboard"]
    assert tries[slurm_run.broken["leaderboard"]]["state"].startswith("CANCELLED")        # never ran on nothing
    final = json.loads((folder_of(slurm_run.work) / "ledger.json").read_text())
    assert {k: tries[i]["state"].split()[0] for k, i in final.items()} == dict.fromkeys(final, "COMPLETED")
    assert {row[1] for name, row in step_rows(slurm_run.status.stdout).items()
            if name not in ("step", "total")} == {"done"}
    from harness.leaderboard import build_leaderboard

    def row(work: Path) -> dict:
        cells = build_leaderboard([work / "results"], published=False).table("overview").cells[ROW]
        return {c: (cells[c].value, cells[c].partial) for c in TABLE1}

    assert row(slurm_run.work) == row(local_run.work)


@pytest.mark.slurm
def test_slurm_scancel_of_a_queued_job_and_a_resubmit_replace_it_and_what_waits_on_it(slurm_run: Submitted) -> None:
    """Issue 28: a queued job cancelled mid-graph, then a re-submit: the job runs again under a new id, and the
    leaderboard (which waited on it with afterany) is replaced to wait on the new attempt, so it is built last."""
    tries, done = attempts(slurm_run.work), outcomes(slurm_run.work)
    final = json.loads((folder_of(slurm_run.work) / "ledger.json").read_text())
    old, new = slurm_run.ledger[slurm_run.cancelled], final[slurm_run.cancelled]
    assert old != new and tries[old]["state"].startswith("CANCELLED") and tries[new]["state"].startswith("COMPLETED")
    assert tries[slurm_run.ledger["leaderboard"]]["state"].startswith("CANCELLED")
    assert new.split("_")[0] in tries[final["leaderboard"]]["after"]             # waits on the new attempt
    assert epoch(done["leaderboard"]["started"]) > epoch(done[slurm_run.cancelled]["ended"])
    assert final[slurm_run.requeued] == slurm_run.ledger[slurm_run.requeued]       # requeued: still the same job
