"""The bad-input catalogue of the commands that read records (``harness.paper``, ``harness.leaderboard``,
``harness.select``, ``harness export``, ``harness.compare``) and of ``harness.series``, in the style of tests/test_bad_inputs.py: each case goes
through the command's real ``main()`` in process and must end with exit code 2, no traceback, exactly one ``error:``
line naming the file or flag and the fix, and nothing written anywhere under the case's folder.

Records are written by hand (as a harness writes them); the paper graph is one BEIR step on the toy set, planned
from records only (no model is loaded).
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.core import results
from harness.trial.toy_data import write_beir_folder
from tests.conftest import TINY_MODEL, paths
from tests.test_bad_inputs import assert_one_error_line, snapshot, unwritable

MODEL = {"name": "enc", "path": "/models/enc", "revision": None, "family": "enc", "size": "base", "fingerprint": "f00d"}
COMMANDS = {"paper": "harness.paper.__main__", "leaderboard": "harness.leaderboard.__main__",
            "select": "harness.select", "export": "harness.export", "compare": "harness.compare.__main__",
            "series": "harness.series.__main__"}
GRAPH = """data: ???
stages:
  dpr:
    task: beir
    overrides: ["task.data_dir=${data}", "task.datasets=[toy]", "+task.catalog.toy={split: test}", task.train=false]
leaderboard: false
min_finished: 0.5
overrides: []
launcher: local
cluster: local
site: null
"""


# ------------------------------------------------------------------------------------------------ records
def put(root: Path, dataset: str, score: float, *, task: str = "beir", run: str = "r1", name: str = "enc",
        **extra: object) -> Path:
    """A record file as a harness writes it (a NaN metric: the bare token NaN, read as a failed record)."""
    metric = "ndcg_at_10" if task != "glue" else "accuracy"
    data = {"task": task, "dataset": dataset, "split": "test", "model": MODEL | {"name": name}, "main_score": metric,
            "metrics": {metric: score}, "run_id": run, "status": "ok", "created_at": "2026-11-01T00:00:00+00:00",
            "schema_version": 2} | extra
    path = results.record_path(root, task, name, run, dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def ok_records(tmp: Path) -> Path:
    """Two BEIR runs of two models and a GLUE record: what compare, select and the leaderboard read."""
    res = tmp / "results"
    for name, run in (("enc", "r1"), ("encoder-two", "r2")):
        for ds in ("scifact", "nfcorpus"):
            put(res, ds, 0.5, name=name, run=run)
    put(res, "rte", 0.7, task="glue", run="g1", name="enc")
    return res


def only_failed(tmp: Path) -> Path:
    res = tmp / "results"
    put(res, "scifact", math.nan)
    return res


def record_of(res: Path, task: str, name: str, run: str, dataset: str) -> str:
    return str(results.record_path(res, task, name, run, dataset))


# ------------------------------------------------------------------------------------------------ the paper graph
def paper(tmp: Path, *extra: str) -> list[str]:
    """The one-step graph over the toy BEIR folder (both written under ``tmp/graph`` on first use)."""
    base = tmp / "graph"
    if not base.is_dir():
        write_beir_folder(base / "data")
        (base / "graph.yaml").write_text(GRAPH)
    return [f"paper={base / 'graph.yaml'}", f"paper.data={base / 'data'}", "model=all-minilm-l6-v2",
            f"model.path={TINY_MODEL}", "model.name=tiny", "precision=fp32", "device=cpu", *paths(tmp), *extra]


def cell_record(tmp: Path) -> Path:
    """Where the graph's one cell's record goes (planned as the command plans it)."""
    from harness.paper import graph as g
    from harness.paper import progress

    args = paper(tmp)
    steps = g.build(g.load_paper(args[0].partition("=")[2], [args[1]]), args[2:])
    state = progress.job_states(steps)["dpr"]
    return results.record_path(state.results, "beir", "tiny", state.run_ids[0], "toy")


def truncated_record(tmp: Path) -> list[str]:
    path = cell_record(tmp)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"task": "beir", "dataset": "toy", "status": "ok", "metrics": {"ndcg_at_10": 0.9}})[:50])
    return [*paper(tmp), "--status"]


def ledger(tmp: Path, ledger_json: str, attempts_json: str | None = None) -> list[str]:
    folder = tmp / "paper" / "tiny"
    folder.mkdir(parents=True)
    (folder / "ledger.json").write_text(ledger_json)
    if attempts_json is not None:
        (folder / "attempts.json").write_text(attempts_json)
    return [*paper(tmp), "paper.launcher=slurm", "--status"]


def unset_graph_value(tmp: Path) -> list[str]:
    return [a for a in paper(tmp) if not a.startswith("paper.data=")] + ["--status"]


# ------------------------------------------------------------------------------------------------ a series
def series(tmp: Path, *extra: str, run: str | None = "run") -> list[str]:
    """python -m harness.series over ``tmp/<run>`` (made, with a logs/ folder and no checkpoint, on first use)."""
    if run is not None and not (tmp / run).exists():
        (tmp / run / "logs").mkdir(parents=True)
    where = [f"model.path={tmp / run}"] if run is not None else []
    return ["task=beir", "model=all-minilm-l6-v2", *where, "task.train=false", f"task.data_dir={tmp}/data",
            "task.datasets=[toy]", "+task.catalog.toy={split: test}", "device=cpu", *paths(tmp), *extra]


def two_folders_one_step(tmp: Path) -> list[str]:
    for name in ("a", "b"):
        (tmp / name).mkdir()
    return series(tmp, "--checkpoints", f"5={tmp}/a,5={tmp}/b", run=None)


# ------------------------------------------------------------------------------------------------ the catalogue
@dataclass(frozen=True)
class Case:
    id: str
    command: str                        # a key of COMMANDS
    args: Callable[[Path], list[str]]   # breaks what it needs under tmp, returns the command line
    names: str                          # regex: the file or flag the error line must name ({tmp} = the case's folder)
    fix: str                            # regex: the fix the error line must give


LEDGER = r"{tmp}/paper/tiny/ledger\.json"
ATTEMPTS = r"{tmp}/paper/tiny/attempts\.json"
AFRESH = r"restore it, or remove ledger\.json and attempts\.json to start the graph's bookkeeping afresh"
FAILED = r"{tmp}/results/beir/enc/r1/scifact\.json with: metric ndcg_at_10=nan is not a finite number"
CASES = [
    # --- harness.paper --status ------------------------------------------------------------------------------
    Case("paper-status-truncated-record", "paper", truncated_record,
         r"job dpr: the record {tmp}/results/beir/tiny/[^/]+/toy\.json \(.*\) cannot be read",
         r"cannot be trusted: restore it from a copy, or remove it to compute that cell again"),
    Case("paper-ledger-not-json", "paper", lambda t: ledger(t, '{"dpr": "12_0",'), LEDGER + r" is not valid JSON",
         AFRESH),
    Case("paper-ledger-a-list", "paper", lambda t: ledger(t, '["12_0"]'), LEDGER + r" is a JSON list, not an object",
         AFRESH),
    Case("paper-ledger-id-an-object", "paper", lambda t: ledger(t, '{"dpr": {"id": 12}}'),
         LEDGER + r" maps job 'dpr' to \{{\"id\": 12\}}, not to a SLURM id", AFRESH),
    Case("paper-attempts-entry-a-string", "paper", lambda t: ledger(t, '{"dpr": "12_0"}', '{"12_0": "RUNNING"}'),
         ATTEMPTS + r" has \"RUNNING\" for SLURM id '12_0', not an object", AFRESH),
    Case("paper-attempts-after-not-a-list", "paper",
         lambda t: ledger(t, '{"dpr": "12_0"}', '{"12_0": {"key": "dpr", "after": "11_0", "state": null}}'),
         ATTEMPTS + r" has .* for SLURM id '12_0': key must be a job key, after a list", AFRESH),
    Case("paper-unknown-graph", "paper", lambda t: ["paper=paperr", "--status"], r"no paper graph 'paperr'",
         r"graphs in conf/paper/ \(closest first\): paper\b.*Pass paper=<graph>"),
    Case("paper-graph-value-unset", "paper", unset_graph_value,
         r"paper graph {tmp}/graph/graph\.yaml: .*Missing mandatory value: data", r"set it with paper\.data=<value>"),
    # --- harness.leaderboard ---------------------------------------------------------------------------------
    Case("leaderboard-results-missing", "leaderboard", lambda t: [f"{t}/nowhere", "--out", f"{t}/site"],
         r"results folder {tmp}/nowhere does not exist", r"paths\.results"),
    Case("leaderboard-results-a-file", "leaderboard",
         lambda t: ((t / "f").write_text("x"), [f"{t}/f", "--out", f"{t}/site"])[1], r"results folder {tmp}/f is a file",
         r"paths\.results"),
    Case("leaderboard-out-a-file", "leaderboard",
         lambda t: ((t / "f").write_text("x"), [str(ok_records(t)), "--out", f"{t}/f"])[1], r"--out={tmp}/f is a file",
         r"point --out at a directory"),
    Case("leaderboard-out-not-writable", "leaderboard", lambda t: [str(ok_records(t)), "--out", str(unwritable(t))],
         r"--out=", r"writable folder with --out=<dir>"),
    Case("leaderboard-permutations-0", "leaderboard",
         lambda t: [str(ok_records(t)), "--out", f"{t}/site", "--significance", "--permutations", "0"],
         r"--permutations 0", r">= 1"),
    Case("leaderboard-alpha-1", "leaderboard",
         lambda t: [str(ok_records(t)), "--out", f"{t}/site", "--significance", "--alpha", "1"], r"--alpha 1\b",
         r"between 0 and 1"),
    # --- harness.select --------------------------------------------------------------------------------------
    Case("select-out-not-writable", "select",
         lambda t: ["--task", "beir", "--results", str(ok_records(t)), "--out", str(unwritable(t))], r"--out=",
         r"writable folder with --out=<dir>"),
    Case("select-only-failed-records", "select", lambda t: ["--task", "beir", "--results", str(only_failed(t))],
         r"1 exist and failed, the first " + FAILED, r"run the task again .*then select"),
    Case("select-no-records-of-the-task", "select", lambda t: ["--task", "mldr", "--results", str(ok_records(t))],
         r"no mldr records under {tmp}/results", r"task=mldr"),
    Case("select-results-missing", "select", lambda t: ["--task", "beir", "--results", f"{t}/nowhere"],
         r"{tmp}/nowhere does not exist", r"--results"),
    # --- harness export --------------------------------------------------------------------------------------
    Case("export-only-failed-records", "export",
         lambda t: [str(only_failed(t)), "--format", "mteb", "--out", f"{t}/mteb"],
         r"its 1 record\(s\) failed, the first " + FAILED, r"run the task again .*then export"),
    Case("export-no-records", "export", lambda t: ((t / "empty").mkdir(), [f"{t}/empty", "--format", "mteb", "--out",
                                                                          f"{t}/mteb"])[1],
         r"nothing to export from {tmp}/empty: no harness result records", r"paths\.results"),
    Case("export-results-missing", "export", lambda t: [f"{t}/nowhere", "--format", "mteb", "--out", f"{t}/mteb"],
         r"results folder {tmp}/nowhere does not exist", r"paths\.results"),
    Case("export-out-a-file", "export",
         lambda t: ((t / "f").write_text("x"), [str(ok_records(t)), "--format", "mteb", "--out", f"{t}/f"])[1],
         r"--out={tmp}/f is a file", r"point --out at a directory"),
    # --- harness.compare -------------------------------------------------------------------------------------
    Case("compare-permutations-0", "compare", lambda t: ["enc", "encoder-two", "--permutations", "0"],
         r"--permutations 0:", r"integer >= 1"),
    Case("compare-level-1.5", "compare", lambda t: ["enc", "encoder-two", "--level", "1.5"], r"--level 1\.5:",
         r"between 0 and 1.*--level 0\.95"),
    Case("compare-alpha-0", "compare", lambda t: ["enc", "encoder-two", "--alpha", "0"], r"--alpha 0:",
         r"between 0 and 1.*--alpha 0\.05"),
    Case("compare-unknown-model", "compare",
         lambda t: ["encoder-2", "enc", "--task", "beir", "--results", str(ok_records(t))],
         r"no ok record for model encoder-2 in {tmp}/results",
         r"\(closest first\): encoder-two, enc\. Pass one of them"),
    Case("compare-glue-against-beir", "compare",
         lambda t: [record_of(ok_records(t), "glue", "enc", "g1", "rte"),
                    record_of(t / "results", "beir", "enc", "r1", "scifact")],
         r"holds glue records and B \(.*scifact\.json\) beir ones: different tasks",
         r"pass two runs of the same task"),
    Case("compare-a-run-with-itself", "compare",
         lambda t: [record_of(ok_records(t), "beir", "enc", "r1", "scifact"), f"{t}/results/beir/enc/r1"],
         r"are the same run \(r1\)", r"pass two different runs"),
]


SERIES = [
    Case("series-no-checkpoints", "series", lambda t: series(t), r"no checkpoints under {tmp}/run: no folder matches "
         r"'checkpoint-\(\\d\+\)' \(found: logs\)", r"pass --step-pattern .*--checkpoints.*--watch"),
    Case("series-pattern-not-a-regex", "series", lambda t: series(t, "--step-pattern", "step_(\\d+"),
         r"--step-pattern 'step_\(\\\\d\+' is not a regular expression", r"one group for the step"),
    Case("series-pattern-without-a-group", "series", lambda t: series(t, "--step-pattern", "step_\\d+"),
         r"--step-pattern .* has 0 groups, not one", r"put exactly the step in parentheses"),
    Case("series-no-run-named", "series", lambda t: series(t, run=None), r"no training run named",
         r"model\.path=<the run's folder.*--checkpoints"),
    Case("series-run-folder-missing", "series", lambda t: series(t, "model.path=" + f"{t}/nowhere", run=None),
         r"model\.path={tmp}/nowhere does not exist", r"pass the training run's folder"),
    Case("series-idle-without-watch", "series", lambda t: series(t, "--idle", "60"), r"--idle 60",
         r"add --watch, or drop --idle"),
    Case("series-poll-zero", "series", lambda t: series(t, "--watch", "--poll", "0"), r"--poll 0: not a number of "
         r"seconds > 0", r"pass e\.g\. --poll 30"),
    Case("series-sets-the-series-key", "series", lambda t: series(t, "+series.step=3"), r"'\+series\.step=3'",
         r"sets series\.step itself for each checkpoint: drop it"),
    Case("series-listed-checkpoint-missing", "series",
         lambda t: series(t, "--checkpoints", f"{t}/nope", run=None), r"--checkpoints: {tmp}/nope does not exist",
         r"PATH or STEP=PATH"),
    Case("series-two-folders-one-step", "series", two_folders_one_step, r"step 5 is both {tmp}/a and {tmp}/b",
         r"narrow --step-pattern or list the checkpoints"),
    Case("series-unknown-task", "series", lambda t: ["task=beirr", *series(t)[1:]], r"unknown task 'beirr'",
         r"closest first\): beir\b"),
    Case("series-unknown-key", "series", lambda t: series(t, "task.lrr=1"), r"unknown config key 'task\.lrr'",
         r"closest valid keys: task\.lr\b"),
    Case("series-unknown-launcher", "series", lambda t: series(t, "--launcher", "pbs"), r"--launcher pbs",
         r"--launcher local or --launcher slurm"),
    Case("series-overwrite", "series", lambda t: series(t, "overwrite=true"), r"'overwrite=true'",
         r"remove its records"),
    Case("series-best-not-selected", "series", lambda t: ["--best", "run", f"paths.results={t}/results"],
         r"series 'run' has no selected step \({tmp}/selected/series-run\.json does not exist\)",
         r"python -m harness\.select --series run --task"),
]
CASES += SERIES


# ------------------------------------------------------------------------------------------------ running
def invoke(command: str, args: list[str], capfd) -> tuple[int, str]:
    """The command's ``main(args)`` in this process: (exit code, everything printed)."""
    main = importlib.import_module(COMMANDS[command]).main
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    capfd.readouterr()
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:   # a command's logging set-up points at this test's captured streams: undo it
        root.handlers[:] = handlers
        root.setLevel(level)
    out, err = capfd.readouterr()
    return code, out + err


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder under ``folder``."""
    return snapshot(folder) | {str(p.relative_to(folder)): None for p in folder.rglob("*") if p.is_dir()}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_command(case: Case, tmp_path: Path, capfd, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)     # a relative default (results/, leaderboard/site) lands in the case's folder
    args = case.args(tmp_path)
    before = tree(tmp_path)
    code, printed = invoke(case.command, args, capfd)
    assert_one_error_line(code, printed, case.names.format(tmp=re.escape(str(tmp_path))), case.fix)
    assert tree(tmp_path) == before                 # nothing written, nothing created, nothing changed


def test_the_catalogue_covers_every_command() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.command for c in CASES} == set(COMMANDS)


def test_status_names_the_unreadable_record_under_its_stage(tmp_path: Path, capfd) -> None:
    """The table is still shown, the step's line says which record could not be read; exit 2."""
    args = truncated_record(tmp_path)
    code, printed = invoke("paper", args, capfd)
    assert code == 2
    (note,) = [line for line in printed.splitlines() if "unreadable record" in line]
    assert note.startswith(f"    dpr: unreadable record {cell_record(tmp_path)} (")


def test_a_good_ledger_still_reads(tmp_path: Path, capfd) -> None:
    """The shape check refuses nothing the executor writes: ids of array tasks and plain jobs, noted states."""
    from harness.paper.slurm import read_ledger

    folder = tmp_path / "paper"
    folder.mkdir()
    (folder / "ledger.json").write_text(json.dumps({"dpr": "12_0", "leaderboard": "13"}))
    (folder / "attempts.json").write_text(json.dumps({"12_0": {"key": "dpr", "after": [], "state": None},
                                                      "13": {"key": "leaderboard", "after": ["12_0"],
                                                             "state": "COMPLETED exit 0:0"}}))
    ledger_read, attempts = read_ledger(folder)
    assert ledger_read == {"dpr": "12_0", "leaderboard": "13"} and attempts["13"]["after"] == ["12_0"]
    assert read_ledger(tmp_path / "none") == ({}, {})
