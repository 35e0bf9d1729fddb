"""What conf/model/<name>.yaml says about an encoder: :class:`ModelSpec` and its per-model training defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.errors import HarnessError
from harness.core.typed import at_least, build, choices, from_conf


@dataclass
class DprDefaults:
    """Per-model DPR defaults (Table 9 LR; batch x accumulation as the authors stated), read by task=beir."""

    lr: float
    batch_size: int
    gradient_accumulation_steps: int


@dataclass
class ColbertDefaults:
    """Per-model ColBERT defaults (Table 9 LR), read by task=colbert."""

    lr: float


@dataclass
class GlueHead:
    """The classification head task=glue fine-tunes on a ModernBERT, as the authors' FlexBERT built it."""

    classifier_pooling: str = choices("cls", "mean")
    classifier_activation: str
    classifier_dropout: float = at_least(0, below=1)
    #: false: no LayerNorm after the head's activation (transformers' ModernBertPredictionHead always has one)
    classifier_norm: bool
    #: on the attention probabilities (transformers also applies it to the attention output: see the next key)
    attention_dropout: float = at_least(0, below=1)
    #: on the attention output projection; null: transformers' own (= attention_dropout)
    attention_output_dropout: float | None = at_least(0, below=1, null="attention_dropout's value (transformers')")


@dataclass
class ModelSpec:
    """What conf/model/<name>.yaml says about an encoder. Unknown keys are an error (see :mod:`harness.core.typed`)."""

    name: str
    path: str
    revision: str | None
    family: str | None
    size: str | None
    max_length: int
    pooling: str = choices("mean", "cls", "max", "lasttoken", "mean_sqrt_len_tokens", "weightedmean")
    normalize: bool
    dtype: str = choices("float32", "bfloat16", "float16")
    #: as written (``auto`` keeps run ids machine-independent); the loaders resolve it on the machine that loads
    #: (:func:`harness.models.attention.resolve_for`: ``harness_varlen`` on CUDA for ModernBERT/BERT, else sdpa)
    attn_implementation: str = choices("sdpa", "eager", "flash_attention_2", "flex_attention", "auto", "harness_varlen")
    trust_remote_code: bool
    dpr: DprDefaults | None
    colbert: ColbertDefaults | None
    #: task=glue's head on this encoder (ModernBERT: the authors' FlexBERT head); null: the checkpoint's config as is
    glue: GlueHead | None
    #: a layer-pruned variant built at load time: the original indices of the encoder layers to keep, in order
    keep_layers: list[int] | None

    def __post_init__(self) -> None:
        if self.keep_layers is not None:
            keep = list(self.keep_layers)
            if not keep or any(not isinstance(i, int) or i < 0 for i in keep) or keep != sorted(set(keep)):
                raise HarnessError(
                    f"model {self.name!r}: keep_layers={keep} must be a non-empty, strictly increasing list of "
                    "layer indices >= 0, e.g. model.keep_layers=[0,1,2,18]"
                )
            suffix = "[" + ",".join(str(i) for i in keep) + "]"   # as in mmbert-small[0,1,2,18]
            if not self.name.endswith(suffix):   # the variant is part of the leaderboard row name
                self.name = f"{self.name}{suffix}"

    @classmethod
    def from_config(cls, cfg: Any) -> ModelSpec:
        name = cfg.get("name", "?") if hasattr(cfg, "get") else "?"
        return build(cls, cfg, f"model {name!r}")

    @classmethod
    def based_on(cls, model: str, **fields: Any) -> ModelSpec:
        """conf/model/<model>.yaml with ``fields`` replaced (benchmarks, tests): the YAML writes every default."""
        return from_conf(cls, f"model/{model}", **fields)
