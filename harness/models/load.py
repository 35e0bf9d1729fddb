"""Loading a :class:`ModelSpec` as a SentenceTransformer, with the configured head, and its record block; a
layer-pruned variant (``model.keep_layers``) checked against the config and built in place at load time."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError
from harness.models import attention as att
from harness.models.kernel_calls import watch
from harness.models.paths import resolve_path
from harness.models.spec import ModelSpec
from harness.models.weights import fingerprint

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)


def _check_attn(spec: ModelSpec) -> None:
    if spec.attn_implementation == "flash_attention_2" and not att.flash_attn_importable():
        raise HarnessError(
            "model.attn_implementation=flash_attention_2 needs flash-attn, which is not installed. "
            "On a CUDA machine: pip install 'harness[gpu]', or use auto (unpadded with torch's own flash kernel "
            "on CUDA); elsewhere use sdpa (the default)."
        )


def attention_for(requested: str, local: str, device: str | None = None, *, dtype: str | None = None) -> str:
    """The implementation a model in ``local`` loads with on ``device`` (``auto`` resolved, fallbacks said)."""
    config = att.model_config_json(local)
    model_type, head_dim = config.get("model_type"), att.head_dim_of(config)
    implementation = att.resolve_for(requested, model_type, device, head_dim=head_dim, dtype=dtype)
    reason = att.fallback_reason(requested, implementation, model_type, device, head_dim=head_dim, dtype=dtype)
    if reason:      # the one line a run prints where auto falls back to padded sdpa on a GPU
        log.warning("%s: model.attn_implementation=auto -> sdpa on padded batches on this GPU, not %s (unpadded): %s",
                    Path(local).name, att.VARLEN, reason)
    if implementation == att.VARLEN:
        from harness.models.varlen_attention import register
        register()
    return implementation


def model_kwargs(spec: ModelSpec, local: str, device: str) -> dict[str, Any]:
    """Loading kwargs of the model in ``local`` for ``device``: its attention and, unless float32, its dtype."""
    import torch
    kwargs: dict[str, Any] = {"attn_implementation": attention_for(spec.attn_implementation, local, device,
                                                                   dtype=spec.dtype)}
    if spec.dtype != "float32":
        kwargs["dtype"] = getattr(torch, spec.dtype)
    return kwargs


def attention_record(requested: str, encoder: Any, device: str) -> dict[str, Any]:
    """The record's ``attention`` entry where ``auto`` was resolved: what loaded, why, the kernel counted."""
    if requested not in ("auto", "flash_attention_2", att.VARLEN):
        return {}
    config = encoder.config
    implementation = str(getattr(config, "_attn_implementation", ""))
    dtype = str(next(encoder.parameters()).dtype).removeprefix("torch.")
    block: dict[str, Any] = {"requested": requested, "implementation": implementation, "kernel": None, "calls": {},
                             "dtype": None, "unpadded": implementation == att.VARLEN}
    reason = att.fallback_reason(requested, implementation, getattr(config, "model_type", None), device,
                                 head_dim=att.head_dim_of(config), dtype=dtype)
    if reason:
        block["fallback"] = reason
    return {"attention": watch(encoder).keep(block)}


def unpad_if_varlen(encoder: Any, keep_padded: Any = None) -> None:
    """``encoder`` unpadded where it loaded ``harness_varlen``; its attention calls counted from now on."""
    watch(encoder)
    if getattr(encoder.config, "_attn_implementation", None) == att.VARLEN:
        from harness.models.varlen_attention import install
        install(encoder, keep_padded)


def load_sentence_transformer(spec: ModelSpec, device: str = "cpu") -> tuple[SentenceTransformer, dict[str, Any]]:
    """A SentenceTransformer for ``spec`` and its identity: an ST folder as is, else ``spec.pooling`` on the encoder."""
    from sentence_transformers import SentenceTransformer, models
    _check_attn(spec)
    local, revision = resolve_path(spec, pruning_applied=True)
    check_keep_layers(spec, local)
    kwargs = model_kwargs(spec, local, device)
    try:
        if (Path(local) / "modules.json").exists():
            model = SentenceTransformer(
                local, device=device, trust_remote_code=spec.trust_remote_code, model_kwargs=kwargs
            )
        else:
            transformer = models.Transformer(local, max_seq_length=spec.max_length,
                                             model_args={**kwargs, "trust_remote_code": spec.trust_remote_code},
                                             config_args={"trust_remote_code": spec.trust_remote_code},
                                             tokenizer_args={"trust_remote_code": spec.trust_remote_code})
            pooling = models.Pooling(transformer.get_word_embedding_dimension(), spec.pooling)
            model = SentenceTransformer(modules=[transformer, pooling], device=device)   # apply_head: Normalize
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        raise HarnessError(f"could not load model {spec.name!r} from {local}: {exc}") from exc
    model.max_seq_length = min(spec.max_length, model.max_seq_length or spec.max_length)
    if spec.keep_layers is not None:
        prune_layers(model[0].auto_model, spec.keep_layers)
    unpad_if_varlen(model[0].auto_model)
    apply_head(model, spec)
    identity = model_identity(spec, local, revision)
    identity |= attention_record(spec.attn_implementation, model[0].auto_model, device)
    return model, identity


def apply_head(model: SentenceTransformer, spec: ModelSpec) -> None:
    """Use the pooling and normalisation the config names, not a directory's own (``model.pooling=cls`` must count)."""
    from sentence_transformers import models
    pos = next((i for i, m in enumerate(model) if isinstance(m, models.Pooling)), None)
    if pos is None:
        raise HarnessError(f"model {spec.name!r} has no pooling module; it cannot be used as a single-vector encoder")
    pooling = model[pos]
    if pooling.get_pooling_mode_str() != spec.pooling:
        log.info("model %s: pooling %s -> %s (model.pooling)", spec.name, pooling.get_pooling_mode_str(), spec.pooling)
        model[pos] = models.Pooling(pooling.get_sentence_embedding_dimension(), spec.pooling)
    norm = [i for i, m in enumerate(model) if isinstance(m, models.Normalize)]
    if spec.normalize and not norm:
        model.append(models.Normalize())
    for i in reversed(norm if not spec.normalize else []):
        del model[i]


def model_identity(spec: ModelSpec, local: str, revision: str | None) -> dict[str, Any]:
    """The ``model`` block of a result record."""
    return {"name": spec.name, "path": spec.path, "local_path": local, "revision": revision or spec.revision,
            "family": spec.family, "size": spec.size, "fingerprint": fingerprint(local),
            **({"keep_layers": list(spec.keep_layers)} if spec.keep_layers is not None else {})}


def layer_list(hf_model: torch.nn.Module) -> tuple[torch.nn.Module, str]:
    """(owner, attribute) of the encoder's layers: ModernBERT ``layers``, BERT ``encoder.layer``, DistilBERT's."""
    import torch
    for owner_path, attr in (("", "layers"), ("encoder", "layer"), ("transformer", "layer")):
        owner = hf_model.get_submodule(owner_path) if owner_path else hf_model
        if isinstance(getattr(owner, attr, None), torch.nn.ModuleList):
            return owner, attr
    raise HarnessError(f"cannot find the encoder layers of {type(hf_model).__name__}; model.keep_layers supports "
                       "ModernBERT and BERT-style encoders")


def check_keep_layers(spec: ModelSpec, local: str) -> None:
    """Fail before loading weights when ``keep_layers`` names a layer the model does not have."""
    cfg_file = Path(local) / "config.json"
    if spec.keep_layers is None or not cfg_file.is_file():
        return
    n = json.loads(cfg_file.read_text()).get("num_hidden_layers")
    if isinstance(n, int) and max(spec.keep_layers) >= n:
        raise HarnessError(f"model {spec.name!r}: keep_layers={spec.keep_layers} names layer {max(spec.keep_layers)}, "
                           f"but the model has {n} layers (0..{n - 1})")


def prune_layers(hf_model: torch.nn.Module, keep: list[int]) -> None:
    """Keep only the encoder layers ``keep``, in place, each as its index made it; ``config.keep_layers`` records it."""
    import torch
    owner, attr = layer_list(hf_model)
    layers = getattr(owner, attr)
    if max(keep) >= len(layers):
        raise HarnessError(f"keep_layers={keep} names layer {max(keep)}, but the model has {len(layers)} layers")
    setattr(owner, attr, torch.nn.ModuleList([layers[i] for i in keep]))
    cfg = hf_model.config
    types = getattr(cfg, "layer_types", None)
    if types is not None:
        cfg.layer_types = [types[i] for i in keep]
    cfg.num_hidden_layers = len(keep)
    cfg.keep_layers = list(keep)
