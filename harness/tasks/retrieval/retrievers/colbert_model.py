"""The ColBERT model (PyLate): loading, the lengths it takes, token embeddings in token-budget batches."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from harness.core.console import Progress
from harness.core.errors import HarnessError
from harness.encoding.encode import token_ids
from harness.encoding.packing import token_budget_batches
from harness.encoding.settings import Batching
from harness.models import autocast_for, usable_positions

if TYPE_CHECKING:
    from pylate.models import ColBERT

    from harness.models import ModelSpec


def is_colbert_checkpoint(local: str | os.PathLike) -> bool:
    """A directory PyLate saved (it has its projection): loaded as is, no new head."""
    modules, config = Path(local) / "modules.json", Path(local) / "config.json"
    if modules.exists() and "pylate" in modules.read_text():
        return True
    return config.exists() and "HF_ColBERT" in config.read_text()   # a Stanford ColBERT checkpoint


def load_colbert(spec: ModelSpec, *, device: str, embedding_size: int, seed: int) -> tuple[ColBERT, dict[str, Any]]:
    """A PyLate ColBERT for ``spec`` and its record block (a plain encoder: a projection seeded by ``seed``)."""
    from pylate import models

    from harness.models import _check_attn, model_identity, resolve_path
    from harness.models.load import attention_record, model_kwargs, unpad_if_varlen
    _check_attn(spec)
    local, revision = resolve_path(spec)
    kwargs = model_kwargs(spec, local, device)
    checkpoint = is_colbert_checkpoint(local)
    torch.manual_seed(seed)   # the new projection and [Q]/[D] rows of a base encoder are random
    try:
        model = models.ColBERT(
            model_name_or_path=local, device=device, embedding_size=None if checkpoint else embedding_size,
            trust_remote_code=spec.trust_remote_code, model_kwargs=kwargs,
            tokenizer_kwargs={"trust_remote_code": spec.trust_remote_code},
            config_kwargs={"trust_remote_code": spec.trust_remote_code},
        )
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        raise HarnessError(f"could not load model {spec.name!r} from {local} as a ColBERT model: {exc}") from exc
    unpad_if_varlen(model[0].auto_model, keep_padded=lambda inputs: expanded_queries(model, inputs))
    block = model_identity(spec, local, revision) | attention_record(spec.attn_implementation, model[0].auto_model,
                                                                      device)
    block["colbert"] = {
        "head": "loaded from the checkpoint" if checkpoint else f"new projection, seed {seed}",
        "embedding_size": int(model[-1].out_features), "position_limit": usable_positions(model),
        "query_prefix": model.query_prefix, "document_prefix": model.document_prefix,
        "do_query_expansion": model.do_query_expansion, "attend_to_expansion_tokens": model.attend_to_expansion_tokens,
    }
    return model, block


def expanded_queries(model: ColBERT, inputs: dict[str, Any]) -> bool:
    """Whether a batch must run padded: PyLate's expanded queries embed their [MASK] tokens (attention mask 0 unless
    ``attend_to_expansion_tokens``), told by the [Q] prefix after [CLS] (no query prefix: every batch padded)."""
    if not model.do_query_expansion or model.attend_to_expansion_tokens:
        return False
    ids, prefix = inputs["input_ids"], model.query_prefix_id
    return prefix is None or ids.shape[1] < 2 or bool((ids[:, 1] == prefix).any())


def capped_length(requested: int, limit: int | None) -> int:
    return requested if limit is None else min(requested, limit)


# ------------------------------------------------------------------------------------------------ encoding
def token_lengths(model: ColBERT, texts: list[str], max_length: int) -> np.ndarray:
    """Tokens per text after truncation (prefix included): only used to group texts into batches."""
    prefix = 1 if model.document_prefix_id is not None else 0
    ids = token_ids(model, texts, max_length=max_length - prefix)
    return np.fromiter((len(x) + prefix for x in ids), dtype=np.int64, count=len(texts))


def encode_tokens(model: ColBERT, texts: list[str], *, is_query: bool, batching: Batching, device: str,
                  precision: str = "fp32", desc: str = "encoding",
                  show_progress: bool = True) -> Iterator[tuple[np.ndarray, list[np.ndarray]]]:
    """(text positions, L2-normalised float32 token embeddings), batch by batch under token budgets."""
    if not texts:
        return
    length = model.query_length if is_query else model.document_length
    lengths = np.full(len(texts), length) if is_query and model.do_query_expansion else \
        token_lengths(model, texts, length)
    model.eval()
    with Progress(len(texts), desc, "texts", show=show_progress) as bar:
        for idx in token_budget_batches(lengths, batching.fixed_tokens, batching.max_batch_size):
            features = model.tokenize([texts[i] for i in idx], is_query=is_query)
            features = {k: v.to(device) for k, v in features.items()}
            with torch.inference_mode(), autocast_for(model, precision, device):
                out = model(features)
            emb = out["token_embeddings"].float()
            if is_query:
                masks = torch.ones_like(features["input_ids"], dtype=torch.bool) if model.do_query_expansion \
                    else out["attention_mask"].bool()
            else:
                masks = model.skiplist_mask(features["input_ids"], model.skiplist) & out["attention_mask"].bool()
            yield idx, [torch.nn.functional.normalize(emb[i][m], p=2, dim=-1).cpu().numpy()
                        for i, m in enumerate(masks)]
            bar.update(len(idx))
