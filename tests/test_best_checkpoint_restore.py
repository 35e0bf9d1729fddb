"""The best GLUE checkpoint is restored completely, BERT-family LayerNorms included (transformers 5.3 saves
them as gamma/beta, which the Trainer's own strict=False restore skips)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import BertConfig, BertForSequenceClassification

from harness.tasks.glue.classification import restore_best_checkpoint


def tiny_bert() -> BertForSequenceClassification:
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, num_labels=2)
    return BertForSequenceClassification(cfg)


def test_restore_brings_back_layernorms(tmp_path: Path) -> None:
    tiny_bert().save_pretrained(tmp_path / "pretrained")
    model = BertForSequenceClassification.from_pretrained(tmp_path / "pretrained")   # loaded, as every run is
    model.save_pretrained(tmp_path / "best")                     # the "best checkpoint", as the Trainer saves it
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():                                        # training goes on past the best epoch
        for p in model.parameters():
            p.add_(1.0)
    naive = model.load_state_dict(load_file(str(tmp_path / "best" / "model.safetensors")), strict=False)
    # the failure this guards against: the Trainer-style restore leaves the LayerNorms of the last epoch
    assert "bert.embeddings.LayerNorm.weight" in naive.missing_keys
    restore_best_checkpoint(model, str(tmp_path / "best"))
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, saved[k], msg=lambda m, k=k: f"{k}: {m}")


def test_no_checkpoint_is_a_no_op() -> None:
    model = tiny_bert()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    restore_best_checkpoint(model, None)
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k])
