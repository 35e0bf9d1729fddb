"""GLUE's scoring protocols: ``authors`` (the default: the ModernBERT authors' eval.py on the said/sweep branch,
MB@2fed0f2) and ``best_epoch`` (the harness's earlier protocol, kept as an option): evaluation schedule, batch
patience on one metric, the scored evaluation, decayed parameters, seeds averaged, the MNLI weights chained."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from harness.core import results
from harness.run.runner import run
from harness.tasks.glue import chain
from harness.tasks.glue import classification as clf
from tests.test_glue_runs import TINY, compose_cfg, tiny_overrides, write_tiny_glue
from tests.test_glue_units import CHAIN, glue_settings, glue_train_config
from tests.test_glue_units import compose_cfg as compose_task


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory) -> Path:
    return write_tiny_glue(tmp_path_factory.mktemp("glue"))


# ---------------------------------------------------------------------------------------------- one training run
def _tiny_run(protocol: str, scores: list[float], tmp_path: Path, **cfg: object) -> clf.TrainOutcome:
    """Train the tiny classifier on 32 toy pairs (4 steps per epoch) with a scripted dev accuracy per evaluation."""
    from transformers import AutoTokenizer

    from harness.tasks.glue.data import Split
    from harness.tasks.glue.tokens import tokenize

    tok = AutoTokenizer.from_pretrained(TINY)
    split = Split([f"the cat sat {i}" for i in range(32)], [f"a dog ran {i}" for i in range(32)], [i % 2 for i in range(32)])
    train = tokenize(split, tok, 16, False)
    dev = tokenize(Split(split.text_a[:4], split.text_b[:4], split.labels[:4]), tok, 16, False)
    seq = iter(scores)

    def metrics(_pred) -> dict[str, float]:
        value = next(seq)
        return {"accuracy": value, "score": 100.0 - value}   # the composite moves the other way

    config = glue_train_config(lr=1e-4, weight_decay=0.0, epochs=3, seed=0, batch_size=8, eval_batch_size=8,
                               min_delta=1.0, logging_steps=1, protocol=protocol, **cfg)
    model = clf.load_classifier(str(TINY), 2)
    return clf.train_and_evaluate(model, tok, train, dev, metrics, config, tmp_path / "trainer")


def test_authors_evaluates_every_n_steps_stops_on_batch_patience_and_scores_the_last_evaluation(tmp_path):
    # evaluations at steps 2, 4, 6, 8: the best accuracy is at step 4; at step 8 it is 4 > 2 batches old: stop
    out = _tiny_run("authors", [50.0, 60.0, 60.5, 58.0, 99.0, 99.0], tmp_path, eval_steps=2, patience_batches=2,
                    monitor="accuracy")
    assert [h["step"] for h in out.eval_history] == [2, 4, 6, 8]
    assert out.stopped_early and out.best_step == 8 and out.scored == "last"
    assert out.metrics["accuracy"] == 58.0            # the last evaluation, not the best (60.5 is within min_delta)


def test_best_epoch_restores_the_best_of_per_epoch_evaluations(tmp_path):
    out = _tiny_run("best_epoch", [50.0, 40.0, 45.0, 0.0], tmp_path, patience=5)   # score = 100 - accuracy
    assert [h["step"] for h in out.eval_history] == [4, 8, 12]
    assert out.scored == "best" and out.best_step == 8


def _decayed(protocol: str, tmp_path: Path) -> tuple[set[str], set[str]]:
    model = clf.load_classifier(str(TINY), 2)
    config = glue_train_config(lr=1e-4, weight_decay=0.1, epochs=1, seed=0, protocol=protocol)
    trainer = clf.trainer_class(protocol)(model=model, args=clf.training_arguments(config, tmp_path, 8), eval_dataset=[])
    trainer.create_optimizer()
    names = {id(p): n for n, p in model.named_parameters()}
    groups = trainer.optimizer.param_groups
    return ({names[id(p)] for g in groups if g["weight_decay"] > 0 for p in g["params"]},
            {names[id(p)] for g in groups if g["weight_decay"] == 0 for p in g["params"]})


def test_authors_decays_every_parameter_best_epoch_skips_bias_and_layernorm(tmp_path):
    decayed, skipped = _decayed("authors", tmp_path)
    assert not skipped and any("norm" in n for n in decayed) and any(n.endswith("bias") for n in decayed)
    decayed, skipped = _decayed("best_epoch", tmp_path)
    assert skipped and all("norm" in n or n.endswith("bias") for n in skipped)


def test_early_stopping_watches_one_metric_mnli_matched_accuracy():
    from harness.tasks.glue import data as glue_data
    from harness.tasks.glue.compute import monitor

    defs = glue_data.task_definitions(compose_task().task.definitions)
    assert monitor(defs["mnli"], [("matched", 9), ("mismatched", 6)]) == "accuracy_matched"
    assert monitor(defs["mrpc"], [("validation", 8)]) == "accuracy"
    assert monitor(defs["stsb"], [("validation", 8)]) == "spearman"
    assert monitor(defs["cola"], [("validation", 8)]) == "matthews"


# ---------------------------------------------------------------------------------------------- the sweep
def test_authors_runs_three_seeds_per_point_and_the_selection_averages_them(glue_dir, tmp_path):
    cfg = compose_cfg([*tiny_overrides(glue_dir, tmp_path), "task.tasks=[rte]", "task.grid.learning_rates=[1e-4,3e-4]",
                       "task.grid.weight_decays=[0]", "task.epochs=1", "task.eval_interval.rte=2",
                       "task.early_stopping.patience_batches=1"])
    run(cfg)
    recs = [r for _, r in results.iter_records(tmp_path / "results")]
    assert sorted(r.hyperparameters["seed"] for r in recs) == [42, 42, 1618, 1618, 6033, 6033]
    for r in recs:
        assert r.hyperparameters["scoring_protocol"] == "authors" and r.details["scored"] == "last"
        assert r.hyperparameters["eval_interval_batches"] == 2 and r.hyperparameters["weight_decay_params"] == "all"
        assert r.details["early_stopping_metric"] == r.hyperparameters["early_stopping_metric"] == "accuracy"
        assert [h["step"] for h in r.details["eval_history"]][:2] == [2, 4]      # 32 examples / 8 = 4 steps
    by_config: dict[str, list[results.ResultRecord]] = {}
    for r in recs:
        by_config.setdefault(r.config_id, []).append(r)
    assert sorted(len(v) for v in by_config.values()) == [3, 3]                  # the seeds share config_id
    sel = json.loads((tmp_path / "selected" / "glue-tiny-modernbert.json").read_text())
    rte = sel["tasks"]["rte"]
    best = max(by_config.values(), key=lambda rs: (statistics.fmean(r.score for r in rs), len(rs),
                                                     min(r.run_id for r in rs)))
    assert rte["n_seeds"] == 3 and sorted(rte["run_ids"]) == sorted(r.run_id for r in best)
    assert rte["score"]["mean"] == pytest.approx(statistics.fmean(r.score for r in best))
    assert sel["scoring_protocol"] == "authors" and sel["other_protocol_runs"] == 0
    _one_seed_removed_is_never_selected(tmp_path, by_config, best)


def _one_seed_removed_is_never_selected(tmp_path: Path, by_config: dict, best: list) -> None:
    """Issue 38: remove one seed's record of the configuration that won: it no longer competes on its two
    remaining seeds; the complete configuration is selected and the incomplete one is named on the terminal and in
    the selection file. With both incomplete, RTE is left unselected, saying why."""
    import subprocess
    import sys

    from harness import selection

    other = next(v for v in by_config.values() if v is not best)
    dropped = max(best, key=lambda r: r.score)        # the removed seed is the winner's best run
    results.path_of(tmp_path / "results", dropped).unlink()
    cmd = [sys.executable, "-m", "harness.select", "--task", "glue", "--results", str(tmp_path / "results")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    sel = json.loads((tmp_path / "selected" / "glue-tiny-modernbert.json").read_text())
    rte = sel["tasks"]["rte"]
    assert sorted(rte["run_ids"]) == sorted(r.run_id for r in other) and rte["n_seeds"] == 3
    (partial,) = rte["incomplete_configurations"]
    assert partial["expected_seeds"] == 3 and len(partial["seeds"]) == 2 and dropped.run_id not in partial["run_ids"]
    assert "not selected, incomplete: 2 of 3 seeds finished" in done.stdout, done.stdout
    assert "incomplete configuration(s) left out" in _rte_cell(tmp_path).note            # the page says it too
    results.path_of(tmp_path / "results", other[0]).unlink()
    choice = selection.load_selections("glue", tmp_path / "results")[0]["tiny-modernbert"]
    assert "rte" not in choice.summary["tasks"] and choice.cells == {}
    assert len(choice.summary["unselected"]["rte"]["incomplete_configurations"]) == 2
    assert choice.summary["glue_average"] is None and "rte" in choice.summary["missing_tasks"]
    cell = _rte_cell(tmp_path)
    assert cell.value is None and cell.text == "incomplete" and "no configuration finished every seed" in cell.note


def _rte_cell(tmp_path: Path):
    from harness.leaderboard import build_leaderboard

    lb = build_leaderboard([tmp_path / "results"], published=False)
    (table,) = [t for t in lb.tables if t.id == "glue"]
    return next(cells["rte"] for cells in table.cells.values() if "rte" in cells)


# ---------------------------------------------------------------------------------------------- MNLI chaining
def _mnli(root: Path, lr: float, seed: int, score: float, protocol: str = "authors") -> results.ResultRecord:
    ckpt = root / "ckpt" / f"{lr}-{seed}-{protocol}"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text("{}")
    hp = {"lr": lr, "seed": seed, "max_length": 32, "scoring_protocol": protocol}
    rec = results.ResultRecord(
        task="glue", dataset="mnli", split="validation", model={"name": "m", "ref": {"path": "p"}},
        metrics={"accuracy_mean": score}, main_score="accuracy_mean", hyperparameters=hp, data_fingerprint="d",
        run_id=results.run_id({"lr": lr, "seed": seed, "p": protocol}), config_id=f"{lr}-{protocol}",
        details={"checkpoint": str(ckpt)},
    )
    results.write_record(root / "results", rec)
    return rec


def test_mnli_chain_takes_the_first_seeds_final_weights_of_the_best_mean_configuration(tmp_path):
    a = [_mnli(tmp_path, 1e-5, s, v) for s, v in ((1618, 70.0), (42, 90.0), (6033, 50.0))]     # mean 70, best single run
    b = [_mnli(tmp_path, 3e-5, s, v) for s, v in ((6033, 81.0), (42, 80.0), (1618, 79.0))]     # mean 80
    old = _mnli(tmp_path, 8e-5, 42, 95.0, protocol="best_epoch")                              # another protocol
    task = glue_settings("task.max_length=32")
    init = chain.resolve_init("rte", task, tmp_path / "results", {"path": "p"}, "m", chain=CHAIN)
    assert init.kind == "mnli" and init.run_id == b[2].run_id and init.candidates == 6        # seed 1618 of b
    assert init.checkpoint == b[2].details["checkpoint"]
    task = glue_settings("task.max_length=32", "task.scoring_protocol=best_epoch")
    assert chain.resolve_init("rte", task, tmp_path / "results", {"path": "p"}, "m", chain=CHAIN).run_id == old.run_id
    assert max(a + b, key=lambda r: r.score) is a[1]                                          # not the best single run


def test_the_mnli_chain_starts_only_from_a_configuration_that_finished_every_seed(tmp_path, caplog):
    """Issue 38: a one-seed configuration with the better mean does not win the chain; with none complete, the
    chain refuses (required) or starts from the pretrained encoder, saying why (if_available)."""
    _mnli(tmp_path, 1e-5, 1618, 99.0)                                                         # 1 of 3 seeds
    full = [_mnli(tmp_path, 3e-5, s, v) for s, v in ((6033, 81.0), (42, 80.0), (1618, 79.0))]
    task = glue_settings("task.max_length=32")
    init = chain.resolve_init("rte", task, tmp_path / "results", {"path": "p"}, "m", chain=CHAIN)
    assert init.run_id == full[2].run_id
    for r in full:
        results.path_of(tmp_path / "results", r).unlink()
    from harness.core.errors import HarnessError

    with pytest.raises(HarnessError, match=r"no MNLI configuration of m has finished all 3 seeds"):
        chain.resolve_init("rte", glue_settings("task.max_length=32", "task.mnli_init=required"),
                           tmp_path / "results", {"path": "p"}, "m", chain=CHAIN)
    init = chain.resolve_init("rte", task, tmp_path / "results", {"path": "p"}, "m", chain=CHAIN)
    assert init.kind == "pretrained" and "starts only from a complete one" in caplog.text


def test_a_bad_eval_interval_or_seed_list_is_refused_before_any_work():
    from harness.core.errors import HarnessError
    from harness.tasks.glue import data as glue_data
    from harness.tasks.glue import grid

    def no_interval(*overrides: str):
        """Settings whose RTE interval is 0 (the typed config refuses it on its own: the grid checks it again)."""
        s = glue_settings(*overrides)
        s.eval_interval["rte"] = 0
        return s

    rte = glue_data.task_definitions(compose_task().task.definitions)["rte"]
    with pytest.raises(HarnessError, match=r"task.eval_interval.rte=0: set it to the batches between dev evaluations"):
        grid.grid_points([rte], no_interval(), 42)
    with pytest.raises(HarnessError, match=r"task.eval_interval.rte=0 is below 1: set task.eval_interval.rte to"):
        glue_settings("task.eval_interval.rte=0")
    with pytest.raises(HarnessError, match=r"task.seeds=\[1, 1\] must be a non-empty list of distinct seeds"):
        grid.grid_points([rte], glue_settings("task.seeds=[1,1]"), 42)
    assert grid.grid_points([rte], no_interval("task.scoring_protocol=best_epoch", "task.epochs=1"), 42)   # not used


def test_the_selection_keeps_one_protocol_per_model_the_newest_records():
    from harness import selection

    def rec(protocol: str, seed: int, score: float, created: str) -> results.ResultRecord:
        hp = {"lr": 1e-5, "seed": seed, "scoring_protocol": protocol}
        return results.ResultRecord(
            task="glue", dataset="rte", split="validation", model={"name": "m"}, metrics={"accuracy": score},
            main_score="accuracy", hyperparameters=hp, run_id=results.run_id({**hp}), config_id=protocol,
            created_at=created)

    old = [rec("best_epoch", 42, 90.0, "2026-01-01T00:00:00")]               # better, but another protocol
    new = [rec("authors", s, v, "2026-02-01T00:00:00") for s, v in ((1618, 60.0), (42, 70.0), (6033, 80.0))]
    sel = selection.choose("glue", old + new)["m"].summary
    assert sel["scoring_protocol"] == "authors" and sel["other_protocol_runs"] == 1
    assert sel["tasks"]["rte"]["score"]["mean"] == pytest.approx(70.0) and sel["tasks"]["rte"]["n_seeds"] == 3
