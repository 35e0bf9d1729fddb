"""Experiment trackers: ``logger=tensorboard`` writes event files with the training loss (DPR and GLUE), labelled
with the run id and record path; a tracker whose package is missing fails first with the install hint."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

from harness.core import console, results
from harness.core.errors import HarnessError
from harness.run.runner import run
from harness.tasks.glue.classification import training_arguments
from harness.training import tracking
from tests.conftest import TINY_MODEL, compose, write_triplets
from tests.test_glue_units import glue_train_config
from tests.test_retrieval_runs import overrides


def _events(folder: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = list(folder.glob("events.out.tfevents.*"))
    assert files, f"no TensorBoard event file in {folder}"
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def _text(acc, tag: str) -> str:
    from tensorboard.util import tensor_util

    return tensor_util.make_ndarray(acc.Tensors(tag)[0].tensor_proto).item().decode()


def test_dpr_training_writes_tensorboard_loss(tmp_path: Path, toy_beir: Path) -> None:
    triplets = write_triplets(tmp_path / "t.tsv")
    (rec,) = run(compose(overrides(
        tmp_path, toy_beir, "logger=tensorboard", "task.train_data.source=file", f"task.train_data.path={triplets}",
        "task.batch_size=8", "task.gradient_accumulation_steps=1", "task.loss=mnrl")))
    folder = tmp_path / "outputs" / "tensorboard" / "beir" / "tiny-modernbert" / rec.run_id
    acc = _events(folder)
    losses = [e.value for e in acc.Scalars("train/loss")]
    assert len(losses) == rec.model["trained"]["steps"] and all(v > 0 for v in losses)   # logged every step here
    assert _text(acc, "harness/run_id/text_summary") == rec.run_id
    record_dir = results.record_path(tmp_path / "results", "beir", "tiny-modernbert", rec.run_id, "toy").parent
    assert _text(acc, "harness/record_path/text_summary") == str(record_dir)
    assert rec.model["trained"]["tracking"] == {"logger": "tensorboard", "run_name": f"beir/tiny-modernbert/{rec.run_id}",
                                                "dir": str(folder)}


@pytest.mark.slow
def test_colbert_kd_training_writes_tensorboard_loss(tmp_path: Path, toy_beir: Path) -> None:
    from tests.test_colbert import BGE, kd_file
    from tests.test_colbert import overrides as colbert_overrides

    if not BGE.is_file():
        pytest.skip(f"{BGE} not present")
    (rec,) = run(compose(colbert_overrides(tmp_path, toy_beir, "logger=tensorboard", *kd_file())))
    folder = tmp_path / "outputs" / "tensorboard" / "colbert" / "tiny-modernbert" / rec.run_id
    losses = [e.value for e in _events(folder).Scalars("train/loss")]
    assert losses and all(v == v for v in losses)       # KD losses logged (finite)
    assert rec.model["trained"]["report_to"] == "tensorboard"
    assert rec.model["trained"]["tracking"]["run_name"] == f"colbert/tiny-modernbert/{rec.run_id}"


def _rte(root: Path) -> Path:
    rng = random.Random(0)
    words = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "park", "big", "small", "red", "blue"]
    for name, n in (("train", 24), ("dev", 8)):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            s = [" ".join(rng.choice(words) for _ in range(6)) for _ in range(2)]
            lines.append(f"{i}\t{s[0]}\t{s[1]}\t{['entailment', 'not_entailment'][i % 2]}")
        (root / "RTE").mkdir(parents=True, exist_ok=True)
        (root / "RTE" / f"{name}.tsv").write_text("\n".join(lines) + "\n")
    return root


def test_glue_training_writes_tensorboard_loss_and_eval(tmp_path: Path) -> None:
    (rec,) = run(compose([
        "task=glue", "logger=tensorboard", "model=all-minilm-l6-v2", f"model.path={TINY_MODEL}",
        "model.name=tiny-modernbert", f"task.data_dir={_rte(tmp_path / 'glue')}", "task.tasks=[rte]", "task.lr=3e-5",
        "task.weight_decay=1e-6", "task.epochs=2", "task.seed=1", "task.max_length=32", "task.batch_size=8",
        "task.scoring_protocol=best_epoch",    # one evaluation per epoch
        "task.logging_steps=1", "precision=fp32", "device=cpu", f"paths.results={tmp_path}/results",
        f"paths.outputs={tmp_path}/outputs", f"paths.cache={tmp_path}/cache"]))
    assert rec.status == "ok", rec.error
    folder = Path(rec.details["tracking"]["dir"])
    assert folder == tmp_path / "outputs" / "tensorboard" / "glue" / "tiny-modernbert" / rec.run_id
    acc = _events(folder)                        # kept: the trainer's own folder is deleted after training
    assert len(acc.Scalars("train/loss")) == 6   # 3 steps per epoch x 2 epochs, logged every step
    assert len(acc.Scalars("eval/score")) == 2   # one evaluation per epoch (early stopping's signal)
    assert _text(acc, "harness/record_path/text_summary") == str(results.path_of(tmp_path / "results", rec))


def test_default_is_no_tracker_and_glue_shows_a_progress_bar(tmp_path: Path) -> None:
    cfg = compose([])
    assert tracking.settings(cfg).name == "none"
    t = tracking.tracker(cfg, run_id="r", record_path="p", task="beir", model="m")
    assert t.training_args()["report_to"] == "none" and t.callbacks() == [] and t.describe() is None
    args = training_arguments(glue_train_config(lr=1e-5, weight_decay=0.0, epochs=1, seed=1), tmp_path, 10)
    assert args.disable_tqdm is not console.interactive() and args.report_to == []   # a bar on a terminal only


@pytest.mark.parametrize("name", ["wandb", "mlflow"])
def test_missing_tracker_package_fails_with_the_install_hint(name: str) -> None:
    if importlib.util.find_spec(name) is not None:
        pytest.skip(f"{name} is installed here")
    with pytest.raises(HarnessError, match=rf"^logger={name} needs the {name} package, which is not installed: "
                                           rf"pip install 'harness\[{name}\]'$"):
        tracking.check(compose([f"logger={name}"]))


def test_tracker_settings_are_typed() -> None:
    with pytest.raises(HarnessError, match=r"unknown key 'projct' in logger; did you mean 'project'"):
        tracking.settings(compose(["logger=wandb", "+logger.projct=x"]))
