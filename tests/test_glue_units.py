"""GLUE pieces without training: metrics, TSV reading, task definitions, planning, staging, selection, configs."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from harness import selection
from harness.core import layout, results
from harness.core.errors import DataError, HarnessError
from harness.run import hydra_callbacks
from harness.tasks.glue import chain, grid
from harness.tasks.glue import data as glue_data
from harness.tasks.glue import metrics as glue_metrics
from harness.tasks.glue import spec as glue_spec
from harness.training.arguments import NaNLossGuard as NaNGuard

REPO = Path(__file__).resolve().parents[1]
SHARED_GLUE = REPO.parent / "shared" / "data" / "glue"


def compose_cfg(*overrides: str):
    with initialize_config_module("conf", version_base="1.3"):
        return compose("config", overrides=["task=glue", *overrides])


def glue_settings(*overrides: str):
    """task=glue's typed settings (what the grid, the chain and the trainer read)."""
    from harness.run.planning import planner_of

    return planner_of(compose_cfg(*overrides)).settings


#: the chain conf/task/glue.yaml's spec declares (RTE, MRPC and STS-B start from MNLI)
CHAIN = {"rte": ("mnli",), "mrpc": ("mnli",), "stsb": ("mnli",)}


def glue_train_config(**fields):
    """The trainer settings conf/task/glue.yaml gives an RTE point (fp32, CPU), with ``fields`` replaced: the
    trainer has no defaults of its own, so tests start from the YAML too."""
    from dataclasses import replace

    from harness.tasks.glue.compute import train_config
    from harness.tasks.glue.grid import GridPoint

    base = train_config(GridPoint("rte", 1e-5, 1e-6, 1, 0), glue_settings(), "fp32", "cpu")
    run = {k: fields.pop(k) for k in ("lr", "epochs", "seed", "precision", "device") if k in fields}
    stop = {k: fields.pop(k) for k in ("patience", "min_delta", "patience_batches") if k in fields}
    own = {k: fields.pop(k) for k in ("weight_decay", "eval_steps", "monitor") if k in fields}
    if "protocol" in fields:
        fields["scoring_protocol"] = fields.pop("protocol")
    node = replace(base.node, early_stopping=replace(base.node.early_stopping, **stop), **fields)
    return replace(base, node=node, run=replace(base.run, **run), **own)


@pytest.fixture(scope="module")
def defs():
    return glue_data.task_definitions(compose_cfg().task.definitions)


# ---------------------------------------------------------------------------------------------- metrics
def test_metrics_by_hand():
    acc = glue_metrics.compute("accuracy", [1, 0, 1, 1], [1, 0, 0, 1])
    assert acc == {"accuracy": 75.0, "score": 75.0}
    f1 = glue_metrics.compute("f1_accuracy", [1, 1, 0, 0], [1, 0, 0, 0])
    # precision 1/2, recall 1 -> F1 2/3; accuracy 3/4; task score their mean
    assert f1["f1"] == pytest.approx(200 / 3) and f1["accuracy"] == 75.0
    assert f1["score"] == pytest.approx((200 / 3 + 75) / 2) == f1["f1_accuracy_mean"]
    mcc = glue_metrics.compute("matthews", [1, 0, 1, 0], [1, 0, 1, 0])
    assert mcc["score"] == pytest.approx(100.0)
    sts = glue_metrics.compute("spearman_pearson", [0.1, 0.4, 0.3, 0.9], [1.0, 2.0, 3.0, 4.0])
    assert sts["spearman"] == pytest.approx(80.0) and sts["score"] == sts["spearman"]
    assert -100 <= sts["pearson"] <= 100
    assert glue_metrics.compute("spearman_pearson", [0.5] * 4, [1, 2, 3, 4])["spearman"] == 0.0


def test_mnli_metrics_are_grouped_and_averaged():
    preds, labels = [0, 1, 2, 0, 0, 1], [0, 1, 1, 0, 2, 2]
    m = glue_metrics.compute("accuracy", preds, labels, [("matched", 3), ("mismatched", 3)])
    assert m["accuracy_matched"] == pytest.approx(200 / 3) and m["accuracy_mismatched"] == pytest.approx(100 / 3)
    assert m["score"] == m["accuracy_mean"] == pytest.approx(50.0)
    assert glue_metrics.score_key("accuracy", grouped=True) == "accuracy_mean"
    with pytest.raises(HarnessError, match="unknown GLUE metric 'bleu'"):
        glue_metrics.compute("bleu", [1], [1])


# ---------------------------------------------------------------------------------------------- reading TSVs
def test_tsv_quoting_off_bom_and_headerless(tmp_path, defs):
    mrpc = tmp_path / "MRPC"
    mrpc.mkdir()
    head = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    (mrpc / "train.tsv").write_text(head + '1\t1\t2\tHe said " hi .\tShe said "\n0\t3\t4\ta\tb\n', encoding="utf-8")
    (mrpc / "dev.tsv").write_text(head + "1\t5\t6\tc\td\n", encoding="utf-8")
    data = glue_data.load_local(defs["mrpc"], tmp_path)
    assert data.train.text_a == ['He said " hi .', "a"] and data.train.text_b == ['She said "', "b"]
    assert data.train.labels == [1, 0] and data.fingerprint.startswith("sha256:")
    cola = tmp_path / "CoLA"
    cola.mkdir()
    (cola / "train.tsv").write_text("gj04\t1\t\tThe sailors rode.\ngj04\t0\t*\tRode the.\n")
    (cola / "dev.tsv").write_text("gj04\t1\t\tA b c.")  # no trailing newline, as GLUE ships it
    data = glue_data.load_local(defs["cola"], tmp_path)
    assert data.train.text_a == ["The sailors rode.", "Rode the."] and data.train.text_b is None
    assert data.train.labels == [1, 0] and data.dev["validation"].labels == [1]


def test_tsv_errors_name_the_problem(tmp_path, defs):
    with pytest.raises(DataError, match=r"RTE/train.tsv does not exist.*task.data_dir"):
        glue_data.load_local(defs["rte"], tmp_path)
    rte = tmp_path / "RTE"
    rte.mkdir()
    (rte / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n")
    with pytest.raises(DataError, match=r"line 3: 3 tab-separated columns, expected 4"):
        glue_data.load_local(defs["rte"], tmp_path)
    (rte / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    (rte / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\t1\n")
    with pytest.raises(DataError, match=r"line 2: label 'maybe' is neither one of \['entailment', 'not_entailment'\]"):
        glue_data.load_local(defs["rte"], tmp_path)
    (rte / "train.tsv").write_text("idx\ts1\ts2\tlabel\n0\ta\tb\t0\n")
    with pytest.raises(DataError, match=r"no column 'sentence1'.*Fix task.definitions"):
        glue_data.load_local(defs["rte"], tmp_path)
    with pytest.raises(DataError, match="not a directory"):
        glue_data.load_local(defs["rte"], tmp_path / "nope")


@pytest.mark.skipif(not SHARED_GLUE.is_dir(), reason="needs ../shared/data/glue")
def test_real_glue_files_have_official_counts(defs):
    expected = {"rte": (2490, 277), "mrpc": (3668, 408), "cola": (8551, 1043), "stsb": (5749, 1500)}
    for name, (n_train, n_dev) in expected.items():
        data = glue_data.load_local(defs[name], SHARED_GLUE)
        assert (len(data.train), len(data.dev["validation"])) == (n_train, n_dev), name
    stsb = glue_data.load_local(defs["stsb"], SHARED_GLUE)
    assert all(0.0 <= v <= 5.0 for v in stsb.train.labels)


def test_subsample_is_seeded_and_ordered():
    s = glue_data.Split([str(i) for i in range(100)], None, list(range(100)))
    a, b = s.subsample(10, 0), s.subsample(10, 0)
    assert a.labels == b.labels == sorted(a.labels) and len(a) == 10
    assert s.subsample(None, 0) is s and s.subsample(1000, 0) is s


def test_definitions_and_task_names_are_validated(defs):
    assert set(defs) >= set(glue_spec.paper_tasks())
    assert defs["stsb"].is_regression and defs["mnli"].num_labels == 3 and list(defs["mnli"].local.dev) == ["matched", "mismatched"]
    with pytest.raises(HarnessError, match=r"unknown GLUE task 'rtee'.*closest first\): rte"):
        glue_data.select_tasks(["rtee"], defs)
    assert [t.name for t in glue_data.select_tasks("STS-B", defs)] == ["stsb"]
    with pytest.raises(HarnessError, match=r"definition 'x' in task.definitions is invalid"):
        glue_data.task_definitions({"x": {"metric": "accuracy"}})


def test_hub_offline_fails_fast(defs, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr("harness.models.hub_reachable", lambda timeout=5.0: False)
    with pytest.raises(HarnessError, match=r"needs the Hugging Face hub.*task.data_dir"):
        glue_data.load_hub(defs["rte"], "nyu-mll/glue", "main")


# ---------------------------------------------------------------------------------------------- planning
def test_plan_uses_paper_grid_and_epoch_groups(defs):
    tcfg = glue_settings()
    tasks = grid.order_tasks(glue_data.select_tasks(list(tcfg.tasks), defs), CHAIN)
    assert next(t.name for t in tasks) == "mnli" and [t.name for t in tasks][-3:] == ["rte", "mrpc", "stsb"]
    points = grid.grid_points(tasks, tcfg, 42)
    assert len(points) == 8 * 4 * 4 * 3 * 3                            # authors: three seeds per grid point
    assert [p.seed for p in points[:4]] == [1618, 42, 6033, 1618]
    best_epoch = grid.grid_points(tasks, glue_settings("task.scoring_protocol=best_epoch"), 42)
    assert len(best_epoch) == 8 * 4 * 4 * 3 and {p.seed for p in best_epoch} == {42}
    assert {p.epochs for p in points if p.task == "rte"} == {1, 2, 3}
    assert {p.epochs for p in points if p.task == "cola"} == {2, 5, 10}
    one = glue_settings("task.lr=3e-5", "task.weight_decay=1e-6", "task.epoch_slot=2", "task.seed=7")
    assert grid.grid_points(glue_data.select_tasks(["rte", "qnli"], defs), one, 42) == [
        grid.GridPoint("rte", 3e-5, 1e-6, 3, 7), grid.GridPoint("qnli", 3e-5, 1e-6, 10, 7)]
    with pytest.raises(HarnessError, match=r"task.epoch_slot=3 is out of range for rte's epoch set \[1, 2, 3\]"):
        grid.grid_points([defs["rte"]], glue_settings("task.epoch_slot=3"), 42)


def test_sweep_configs_match_the_task_grid():
    tcfg = compose_cfg().task
    paper = OmegaConf.load(REPO / "conf/sweep/glue-paper.yaml").hydra.sweeper.params
    assert [float(v) for v in paper["task.lr"].split(",")] == list(tcfg.grid.learning_rates)
    assert [float(v) for v in paper["task.weight_decay"].split(",")] == list(tcfg.grid.weight_decays)
    assert set(paper["task.tasks"].split(",")) == set(tcfg.tasks)
    assert len(paper["task.epoch_slot"].split(",")) == len(tcfg.grid.epochs.short) == len(tcfg.grid.epochs.long)
    cpu_cfg = compose_cfg("sweep=glue-cpu").task
    cpu = OmegaConf.load(REPO / "conf/sweep/glue-cpu.yaml").hydra.sweeper.params
    assert [float(v) for v in cpu["task.lr"].split(",")] == list(cpu_cfg.grid.learning_rates)
    assert cpu_cfg.mnli_init == "off" and list(cpu_cfg.tasks) == ["rte", "mrpc", "stsb"]
    paper_grid = OmegaConf.load(REPO.parent / "shared/paper/modernbert_glue_sweep_grid.yaml") \
        if (REPO.parent / "shared/paper").is_dir() else None
    if paper_grid is not None:
        assert list(paper_grid.learning_rates) == list(tcfg.grid.learning_rates)
        assert list(paper_grid.weight_decays) == list(tcfg.grid.weight_decays)


def test_paper_sweep_batches_run_mnli_before_the_chained_tasks():
    """The SLURM ordering without a cluster: each batch is one array, launched after the previous one ends."""
    params = OmegaConf.load(REPO / "conf/sweep/glue-paper.yaml").hydra.sweeper
    batches = hydra_callbacks.sweep_batches(dict(params.params), [], params.max_batch_size)
    tasks = [{hydra_callbacks.job_tasks(job)[0] for job in batch} for batch in batches]
    assert len(batches) == 8 and all(len(b) == 48 and len(t) == 1 for b, t in zip(batches, tasks, strict=True))
    assert tasks[0] == {"mnli"} and {t.pop() for t in tasks[-3:]} == {"rte", "mrpc", "stsb"}
    hydra_callbacks.check_staging(batches, CHAIN)
    # a smaller grid still puts all of MNLI in batches before the first chained job
    hydra_callbacks.check_staging(hydra_callbacks.sweep_batches(dict(params.params), ["task.lr=1e-5,3e-5,5e-5"], 48),
                                  {"rte": ("mnli",)})
    # one array for everything, or the chained task listed first: refused before anything is launched
    for cli, size in ((["task.lr=1e-5"], None), (["task.tasks=rte,mnli"], 48)):
        bad = hydra_callbacks.sweep_batches(dict(params.params), cli, size)
        with pytest.raises(HarnessError, match=r"would start MNLI-chained jobs.*max_batch_size"):
            hydra_callbacks.check_staging(bad, CHAIN)
        hydra_callbacks.check_staging(bad, {})   # nothing chained: any batching is fine


def test_required_mnli_init_without_records_is_an_error(tmp_path):
    tcfg = glue_settings("task.mnli_init=required")
    ref = {"fingerprint": "f"}
    with pytest.raises(HarnessError, match=r"rte starts from the selected MNLI checkpoint.*Run the MNLI grid first"):
        chain.resolve_init("rte", tcfg, tmp_path, ref, "m", chain=CHAIN)
    assert chain.resolve_init("rte", glue_settings(), tmp_path, ref, "m", chain=CHAIN) == chain.PRETRAINED
    assert chain.resolve_init("cola", tcfg, tmp_path, ref, "m", chain=CHAIN) == chain.PRETRAINED
    with pytest.raises(HarnessError, match="is not a saved model directory"):
        chain.resolve_init("rte", glue_settings(f"task.init_from={tmp_path}"), tmp_path, ref, "m", chain=CHAIN)
    with pytest.raises(HarnessError, match="use required, if_available or off"):
        chain.resolve_init("rte", glue_settings("task.mnli_init=sometimes"), tmp_path, ref, "m", chain=CHAIN)


def test_train_config_values_are_checked_where_typed_and_the_nan_guard_stops():
    """A trainer setting out of range is refused where the config is typed (the trainer checks nothing again)."""
    with pytest.raises(HarnessError, match=r"task\.lr"):
        glue_settings("task.lr=0")
    with pytest.raises(HarnessError, match=r"task\.warmup_ratio"):
        glue_settings("task.warmup_ratio=1.5")

    class State:
        global_step, epoch = 7, 0.5

    with pytest.raises(HarnessError, match="training loss became nan at step 7"):
        NaNGuard().on_log(None, State(), None, logs={"loss": math.nan})
    NaNGuard().on_log(None, State(), None, logs={"loss": 0.3})


def test_training_off_a_terminal_is_a_line_per_evaluation_and_a_few_loss_lines(monkeypatch, caplog) -> None:
    """No tqdm bar when the output is not a terminal: the console's lines instead (scripted Trainer states)."""
    import logging
    from types import SimpleNamespace

    from harness.core import console
    from harness.training.arguments import ProgressLines

    monkeypatch.setattr(console, "interactive", lambda: False)
    caplog.set_level(logging.INFO, logger="harness.progress")
    state = SimpleNamespace(max_steps=100, global_step=0, epoch=0.0)
    cb = ProgressLines("training")
    cb.on_train_begin(None, state, None)
    for step in range(1, 101):
        state.global_step, state.epoch = step, step / 50
        cb.on_log(None, state, None, logs={"loss": 1.0 / step})       # every step logs: ~1 line in 5 is shown
        if step % 50 == 0:
            cb.on_evaluate(None, state, None, metrics={"eval_score": 70.0, "eval_runtime": 1.0})
    cb.on_train_end(None, state, None)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 20 + 2 and lines[0].startswith("training: 5/100 steps, epoch 0.10, loss 0.2000")
    assert lines[-1].startswith("training: 100/100 steps, epoch 2.00, score 70.0000")


# ---------------------------------------------------------------------------------------------- selection
def _record(task: str, score: float, lr: float, seed: int, model: str = "m", status: str = "ok") -> results.ResultRecord:
    hp = {"lr": lr, "weight_decay": 1e-6, "epochs": 2, "seed": seed}
    return results.ResultRecord(
        task="glue", dataset=task, split="validation", model={"name": model, "fingerprint": "f"},
        metrics={"accuracy": score} if status == "ok" else {}, main_score="accuracy",
        run_id=results.run_id({"t": task, **hp}), status=status, hyperparameters=hp, data_fingerprint="d",
        details={"best_epoch": 1.0},
    )


def test_selection_picks_best_mean_over_seeds_and_writes_outside_the_records(tmp_path):
    res = tmp_path / "results"
    recs = [
        _record("rte", 70.0, 3e-5, 1), _record("rte", 60.0, 3e-5, 2),     # mean 65 over two seeds
        _record("rte", 68.0, 8e-5, 1),                                      # best single run, lower mean? no: 68 > 65
        _record("mrpc", 80.0, 3e-5, 1), _record("mrpc", 84.0, 8e-5, 1), _record("mrpc", 86.0, 8e-5, 2),
        _record("mrpc", 0.0, 1e-5, 1, status="failed"),
    ]
    for r in recs:
        results.write_record(res, r)
    out = selection.write_selection("glue", res, layout.selection_dir(res))
    assert out == tmp_path / "selected" / "glue-m.json"
    sel = json.loads(out.read_text())
    assert sel["schema"] == selection.SCHEMA and sel["failed_runs"] == 1
    assert sel["tasks"]["rte"]["hyperparameters"]["lr"] == 8e-5 and sel["tasks"]["rte"]["n_configurations"] == 2
    mrpc = sel["tasks"]["mrpc"]
    assert mrpc["score"]["mean"] == pytest.approx(85.0) and mrpc["score"]["std"] == pytest.approx(2 ** 0.5)
    assert mrpc["seeds"] == [1, 2] and mrpc["n_seeds"] == 2
    assert sel["glue_average"] == pytest.approx((85.0 + 68.0) / 2) and not sel["glue_average_complete"]
    assert "cola" in sel["missing_tasks"]
    assert any(b["model"] == "ModernBERT" and b["rte"] == 87.4 for b in sel["paper_baselines"])
    assert len(list(results.iter_records(res))) == len(recs)   # the selection is not in the record tree


def test_select_cli(tmp_path):
    res = tmp_path / "results"
    results.write_record(res, _record("rte", 70.0, 3e-5, 1))
    cmd = [sys.executable, "-m", "harness.select", "--task", "glue", "--results", str(res), "--out", str(tmp_path / "sel")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "rte" in done.stdout and "70.00" in done.stdout and (tmp_path / "sel" / "glue-m.json").exists()
    bad = subprocess.run([*cmd[:3], "--task", "glu", "--results", str(res)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown task 'glu'" in bad.stderr
    empty = subprocess.run([*cmd[:3], "--results", str(tmp_path / "none")], capture_output=True, text=True, timeout=120)
    assert empty.returncode == 2 and "does not exist" in empty.stderr


# ---------------------------------------------------------------------------------------------- launcher configs
def _cfg_hydra(*overrides: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "task=glue", *overrides, "--cfg", "hydra"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    import yaml

    return yaml.safe_load(done.stdout)["hydra"]


def test_slurm_launcher_composes_to_an_array_with_resources():
    h = _cfg_hydra(
        "hydra/launcher=slurm", "sweep=glue-paper", "hydra.launcher.partition=a100",
        "hydra.launcher.array_parallelism=16", "+hydra.launcher.additional_parameters.dependency=afterok:123",
    )
    launcher = h["launcher"]
    assert launcher["_target_"] == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher["partition"] == "a100" and launcher["gpus_per_node"] == 1
    assert launcher["array_parallelism"] == 16 and launcher["timeout_min"] == 1080   # 3 seeds per point
    assert launcher["additional_parameters"] == {"dependency": "afterok:123"}
    assert h["sweeper"]["max_batch_size"] == 48
    assert h["callbacks"]["glue_staging"]["_target_"] == "harness.run.hydra_callbacks.StagingCheck"
    assert h["sweeper"]["params"]["task.epoch_slot"] == "0,1,2"


def test_prune_keeps_only_the_selected_checkpoints(tmp_path):
    recs = [_record("mnli", 80.0, 3e-5, 1), _record("mnli", 70.0, 8e-5, 1)]
    for r in recs:
        ckpt = tmp_path / "ckpt" / r.run_id
        ckpt.mkdir(parents=True)
        r.details["checkpoint"] = str(ckpt)
    sel = selection.choose("glue", recs)["m"]
    assert selection.prune_checkpoints(sel, recs) == [recs[1].details["checkpoint"]]
    assert Path(recs[0].details["checkpoint"]).is_dir() and not Path(recs[1].details["checkpoint"]).exists()


def test_select_prune_checkpoints_prunes_each_models_unselected_runs(tmp_path, capsys):
    """``python -m harness.select --prune-checkpoints`` prunes for every model it selects, whether or not any record
    was set aside (it once ran only inside the set-aside loop, for the last model's choice)."""
    from harness.select import main

    res = tmp_path / "results"
    recs = [_record("rte", 80.0, 3e-5, 1, model=m) for m in ("a", "b")]
    recs += [_record("rte", 70.0, 8e-5, 1, model=m) for m in ("a", "b")]
    for r in recs:
        ckpt = tmp_path / "ckpt" / r.model["name"] / r.run_id
        ckpt.mkdir(parents=True)
        r.details["checkpoint"] = str(ckpt)
        results.write_record(res, r)
    assert main(["--task", "glue", "--results", str(res), "--prune-checkpoints"]) == 0
    kept = [Path(r.details["checkpoint"]).is_dir() for r in recs]
    assert kept == [True, True, False, False]
    assert capsys.readouterr().out.count("  pruned ") == 2


def test_trainer_settings_come_from_the_yaml_only():
    """The trainer's dataclass has no defaults that could disagree with conf/task/glue.yaml (it once said batch 32
    and max_grad_norm 1.0 where the YAML says 64 and 0.0)."""
    from dataclasses import MISSING, fields

    from harness.tasks.glue.classification import TrainConfig

    assert [f.name for f in fields(TrainConfig) if f.default is not MISSING or f.default_factory is not MISSING] == []
    tcfg = glue_settings()
    got = glue_train_config()
    assert got.node == tcfg.training                                     # the node itself, not a copy
    assert (got.node.batch_size, got.node.max_grad_norm, got.node.early_stopping.min_delta) == (64, 0.0, 1.0)
    assert got.eval_steps == tcfg.eval_interval["rte"] == 100 and got.protocol == "authors"


def test_the_mnli_chain_is_read_from_the_spec_once():
    """The family, the sweep staging check and the paper graph read the chain from ``spec.depends_on`` through one
    resolver; ``task.mnli_init=off`` (the dependency's ``via``) turns it off."""
    from harness import specs
    from harness.specs import dependencies

    spec = specs.get("glue")
    assert dependencies.chained(spec, compose_cfg().task) == CHAIN
    assert dependencies.chained(spec, compose_cfg("task.mnli_init=off").task) == {}
    assert [d.for_datasets for d in dependencies.inner(spec)] == [("rte", "mrpc", "stsb")]
    assert "chain_from_mnli" not in compose_cfg().task                  # declared once: in the spec
