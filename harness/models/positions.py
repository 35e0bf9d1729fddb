"""How many tokens an encoder can position: one answer for every task (planning checks, ColBERT length caps,
efficiency sets), read from the transformers config, so no model is capped differently depending on the task."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.core.errors import HarnessError

#: model types whose position ids start after the padding index (RoBERTa: ``cumsum(mask) + padding_idx``, so
#: 514 positions with ``pad_token_id=1`` position 512 tokens); all are text encoders that share RoBERTa's embeddings
OFFSET_POSITIONS = frozenset({
    "roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "longformer", "roberta-prelayernorm", "data2vec-text",
    "mpnet", "ibert", "xmod", "luke",
})
#: RoBERTa's ``pad_token_id`` when a config of those types does not set one
_DEFAULT_PAD = 1


def model_config(model_or_config: Any) -> Any | None:
    """The transformers config of a config, model, ``Transformer`` module, SentenceTransformer or ColBERT, or None."""
    obj = model_or_config
    for _ in range(3):
        if hasattr(obj, "auto_model"):              # sentence-transformers' Transformer module
            obj = obj.auto_model
        config = getattr(obj, "config", None)       # a transformers model
        if config is not None:
            return config
        if hasattr(obj, "model_type"):              # a config (PretrainedConfig or look-alike)
            return obj
        try:
            obj = obj[0]                            # a SentenceTransformer / ColBERT: its first module
        except (TypeError, IndexError, KeyError):
            return None
    return None


def usable_positions(model_or_config: Any) -> int | None:
    """The longest input, in tokens, the encoder can position (None: its config does not say; RoBERTa-style: offset)."""
    config = model_config(model_or_config)
    if config is None:
        return None
    n = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    if getattr(config, "model_type", "") in OFFSET_POSITIONS:
        pad = getattr(config, "pad_token_id", None)
        n -= (pad if isinstance(pad, int) else _DEFAULT_PAD) + 1
    return n


def positions_in(folder: str | Path) -> int | None:
    """:func:`usable_positions` of the model in ``folder`` from its ``config.json`` alone."""
    try:
        data = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return usable_positions(SimpleNamespace(**data)) if isinstance(data, dict) and "model_type" in data else None


def check_length(positions: int | None, length: int, name: str, key: str) -> None:
    """``key=length`` within ``positions`` (None: the config does not say, nothing to check), else one line."""
    if positions is not None and length > positions:
        raise HarnessError(
            f"{key}={length} is above model {name!r}'s {positions} token positions; set {key}<={positions} (the "
            "model's maximum), or use a model with longer positions."
        )
