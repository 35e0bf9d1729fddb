"""One answer to "how many tokens can this encoder position" (harness.models.positions), for configs built here
(no downloads) and for every shape of model the tasks hand it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from transformers import (
    BertConfig,
    DebertaV2Config,
    ModernBertConfig,
    PretrainedConfig,
    RobertaConfig,
    XLMRobertaConfig,
)

from harness.core.errors import HarnessError
from harness.models import model_config, usable_positions
from harness.tasks.retrieval.compute import check_positions


def nomic_bert_2048() -> PretrainedConfig:
    """NomicBERT's remote-code config keys (GPT-2 style): ``n_positions``, ``max_trained_positions``."""
    cfg = PretrainedConfig(n_positions=2048, max_trained_positions=2048)
    cfg.model_type = "nomic_bert"
    return cfg


@pytest.mark.parametrize(("config", "expected"), [
    (BertConfig(max_position_embeddings=512), 512),
    (RobertaConfig(max_position_embeddings=514, pad_token_id=1), 512),          # positions start after padding
    (XLMRobertaConfig(max_position_embeddings=8194, pad_token_id=1), 8192),     # BGE-M3's long XLM-R
    # DeBERTa-v3: relative positions (256 buckets) set no hard limit; held to the 512 it was trained at
    (DebertaV2Config(max_position_embeddings=512, position_buckets=256, relative_attention=True,
                     position_biased_input=False), 512),
    (ModernBertConfig(max_position_embeddings=8192), 8192),
    (nomic_bert_2048(), 2048),
    (PretrainedConfig(), None),                                                  # the config does not say
], ids=["bert", "roberta", "xlm-roberta-8194", "deberta-v3", "modernbert", "nomicbert-2048", "unknown"])
def test_usable_positions_of_a_config(config: PretrainedConfig, expected: int | None) -> None:
    assert usable_positions(config) == expected


def test_the_offset_follows_the_padding_index() -> None:
    assert usable_positions(SimpleNamespace(model_type="roberta", max_position_embeddings=514, pad_token_id=None)) \
        == 512                                                                # RoBERTa's default padding index
    assert usable_positions(SimpleNamespace(model_type="mpnet", max_position_embeddings=514, pad_token_id=1)) == 512
    assert usable_positions(SimpleNamespace(model_type="bert", max_position_embeddings=512, pad_token_id=0)) == 512


def test_every_model_shape_gives_its_config() -> None:
    """A config, a transformers model, a sentence-transformers Transformer module, a SentenceTransformer/ColBERT."""
    cfg = RobertaConfig(max_position_embeddings=514, pad_token_id=1)
    hf = SimpleNamespace(config=cfg)
    module = SimpleNamespace(auto_model=hf)
    for shape in (cfg, hf, module, [module]):
        assert model_config(shape) is cfg and usable_positions(shape) == 512
    assert model_config([]) is None and usable_positions(object()) is None


def test_a_real_tiny_model_and_the_planning_check() -> None:
    from transformers import BertModel

    hf = BertModel(BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                              intermediate_size=16, max_position_embeddings=64))
    model = [SimpleNamespace(auto_model=hf)]
    assert usable_positions(hf) == usable_positions(model) == 64
    check_positions(model, 64, "tiny", "task.max_length")
    with pytest.raises(HarnessError, match=r"task.max_length=65 is above model 'tiny'.s 64 token positions"):
        check_positions(model, 65, "tiny", "task.max_length")
