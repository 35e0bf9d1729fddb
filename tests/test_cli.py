"""Hydra conventions at the command line: a user's own config folder adds models, tasks and sweeps; sweep functions
(choice, glob) pass the name check and compose; real typos still get the closest names."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.core.results import iter_records
from harness.run.overrides import check_group_overrides, group_options
from tests.conftest import REPO, TINY_MODEL, compose, write_beir_folder, write_triplets
from tests.forked import run_module


@pytest.fixture()
def user_conf(tmp_path: Path) -> Path:
    """A researcher's own config folder: a model, a task (a BEIR variant on their data) and a sweep."""
    conf = tmp_path / "myconf"
    data = tmp_path / "data"
    write_beir_folder(data)
    for group, name, text in [
        # a model file says what differs from a packaged one (conf/model/bert-base.yaml writes every key)
        ("model", "tiny", "defaults:\n  - bert-base\n  - _self_\n\n"
                          f"name: tiny\npath: {TINY_MODEL}\nfamily: tiny-ModernBERT\nsize: tiny\nmax_length: 64\n"
                          "pooling: mean\ndpr: {{lr: 1e-4, batch_size: 8}}\n"),
        ("task", "toy-dpr", "defaults:\n  - beir\n  - _self_\n\nname: beir\ndatasets: [toy]\n"
                            f"data_dir: {data}\ncatalog:\n  toy: {{split: test}}\ntrain_data:\n  source: file\n"
                            f"  path: {write_triplets(tmp_path / 'triplets.tsv')}\n"),
        ("sweep", "toy-lr", "# @package _global_\ndefaults:\n  - override /task: toy-dpr\n\nhydra:\n  sweeper:\n"
                            "    params:\n      task.lr: choice(1e-5,2e-5)\n"),
    ]:
        (conf / group).mkdir(parents=True, exist_ok=True)
        (conf / group / f"{name}.yaml").write_text(text.replace("{{", "{").replace("}}", "}"))
    return conf


def cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return run_module("harness", *args, cwd=REPO, env=env, timeout=timeout)


def test_user_config_dir_model_task_and_choice_sweep_run(tmp_path: Path, user_conf: Path) -> None:
    """--config-dir adds model=tiny and task=toy-dpr; task.lr='choice(1e-5,2e-5)' sweeps two DPR runs."""
    p = cli("--config-dir", str(user_conf), "-m", "task=toy-dpr", "model=tiny", "task.lr=choice(1e-5,2e-5)",
            "task.gradient_accumulation_steps=1", "task.loss=mnrl", "precision=fp32", f"paths.results={tmp_path}/results",
            f"paths.outputs={tmp_path}/outputs", f"paths.cache={tmp_path}/cache",
            f"hydra.sweep.dir={tmp_path}/multirun")
    assert p.returncode == 0, p.stderr[-3000:]
    recs = [r for _, r in iter_records(tmp_path / "results")]
    assert sorted(r.hyperparameters["lr"] for r in recs) == [1e-5, 2e-5]
    assert {(r.task, r.dataset, r.model["name"], r.model["path"]) for r in recs} == {
        ("beir", "toy", "tiny", str(TINY_MODEL))}
    assert all(r.model["trained"]["steps"] > 0 for r in recs)


def test_user_sweep_and_searchpath_compose(user_conf: Path) -> None:
    check_group_overrides(["--config-dir", str(user_conf), "-m", "sweep=toy-lr", "model=tiny"])
    check_group_overrides([f"hydra.searchpath=[file://{user_conf}]", "model=tiny", "task=toy-dpr"])
    cfg = compose([f"hydra.searchpath=[file://{user_conf}]", "sweep=toy-lr", "model=tiny"])
    assert cfg.task.datasets == ["toy"] and cfg.model.name == "tiny" and cfg.task.lr == 1e-4   # model's dpr.lr
    assert "tiny" in group_options("model", ["pkg://conf", str(user_conf)])


def test_sweep_functions_pass_the_name_check() -> None:
    for args in (["-m", "task.lr=choice(1e-5,2e-5)"], ["-m", "model=glob(modernbert-*)"],
                 ["-m", "task=choice(beir,code)"], ["-m", "model=bert-base,roberta-base"],
                 ["-m", "task.lr=range(1,3)"], ["-m", "task.lr=interval(1e-5,1e-4)"], ["logger=tensorboard"]):
        check_group_overrides(args)


def test_real_typos_still_get_the_closest_names(user_conf: Path) -> None:
    with pytest.raises(HarnessError, match=r"unknown model 'tny'\. Valid models \(closest first\): tiny, "):
        check_group_overrides(["--config-dir", str(user_conf), "model=tny"])
    with pytest.raises(HarnessError, match=r"unknown task 'cod'\. Valid tasks \(closest first\): code, "):
        check_group_overrides(["-m", "task=choice(beir,cod)"])
    with pytest.raises(HarnessError, match=r"model=glob\(zz\*\) matches no model; valid: all-minilm-l6-v2"):
        check_group_overrides(["-m", "model=glob(zz*)"])
    with pytest.raises(HarnessError, match=r"unknown logger 'tensorbord'\. Valid loggers \(closest first\): tensorboard"):
        check_group_overrides(["logger=tensorbord"])
    with pytest.raises(HarnessError, match=r"unknown sweep 'toy-l'\. Valid sweeps \(closest first\): toy-lr"):
        check_group_overrides([f"hydra.searchpath=[file://{user_conf}]", "sweep=toy-l"])
