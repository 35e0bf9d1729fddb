"""A PLAID run's memory, checked before anything is loaded: each dataset's documents and their tokens counted from
its corpus alone (streamed through the model's tokenizer, chunk by chunk; the count kept beside the cache, keyed by
the corpus' content, the tokenizer and the length), the build estimated by
:func:`~harness.tasks.retrieval.retrievers.plaid_memory.plaid_memory` and refused in one line over
``task.plaid_max_memory_gb``; the backend's imports checked too. The encoder is never loaded here."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core.results import atomic_write_json, stable_hash
from harness.tasks.runplan import Cell, RunPlan, weights_of

#: texts per tokenizer call while counting
STEP = 4096


def check_plaid(plan: RunPlan[Any, Any], todo: Sequence[Cell]) -> None:
    """Refuse, before any model loads, a PLAID build that needs more host memory than the task allows."""
    mv = getattr(plan.settings, "multi_vector", None)
    if mv is None or mv.search.index != "plaid" or getattr(plan.settings, "retriever", "multi_vector") != "multi_vector":
        return
    from harness.tasks.retrieval import score
    from harness.tasks.retrieval.retrievers.plaid_index import check_plaid_backend
    from harness.tasks.retrieval.retrievers.plaid_memory import check_plaid_memory, plaid_memory
    from harness.tasks.retrieval.settings import plaid_backend

    backend = plaid_backend(mv.search.plaid.backend)
    check_plaid_backend(backend)
    tokenizer, length = _tokenizer(plan)
    for entry in (e for cell in todo for e in (list(cell.payload.members.values()) or [cell.payload])):
        ds = score.loaded(plan, entry)
        n_tokens = corpus_tokens(ds, tokenizer, length, plan.layout.token_counts())
        k = _shards(plan.settings.sharding, n_tokens)
        est = plaid_memory(math.ceil(len(ds) / k), n_tokens / k, int(mv.embedding_size), mv.search.plaid, backend)
        check_plaid_memory(entry.name, est, mv.search.plaid_max_memory_gb, backend)


def _tokenizer(plan: RunPlan[Any, Any]) -> tuple[Any, int]:
    """The model's tokenizer (not the model) and the document length its positions allow, [D] prefix included."""
    from transformers import AutoConfig, AutoTokenizer

    from harness.models import resolve_path

    spec = weights_of(plan)
    local, revision = resolve_path(spec, check_fit=False)
    tokenizer = AutoTokenizer.from_pretrained(local, revision=revision, trust_remote_code=spec.trust_remote_code)
    positions = getattr(AutoConfig.from_pretrained(local, revision=revision,
                                                   trust_remote_code=spec.trust_remote_code),
                        "max_position_embeddings", None)
    length = plan.settings.document_length
    return tokenizer, min(length, positions) if positions else length


def corpus_tokens(ds: Any, tokenizer: Any, length: int, cache: Path) -> int:
    """Document tokens of ``ds`` at ``length`` (a prefix token each, as the ColBERT encoder adds), streamed."""
    key = stable_hash({"corpus": ds.corpus.key, "tokenizer": getattr(tokenizer, "name_or_path", ""),
                       "vocab": len(tokenizer), "length": length}, length=24)
    path = cache / f"{key}.json"
    if path.exists():
        return int(json.loads(path.read_text())["tokens"])
    total = 0
    for _, texts in ds.corpus.chunks():
        for a in range(0, len(texts), STEP):
            ids = tokenizer([t.strip() for t in texts[a : a + STEP]], truncation=True, max_length=length - 1)
            total += sum(len(x) + 1 for x in ids["input_ids"])
    atomic_write_json(path, {"tokens": total, "documents": len(ds), "corpus": ds.corpus.key, "length": length})
    return total


def _shards(sharding: Any, n_tokens: int) -> int:
    """K of ``task.shards`` (``auto``: by ``task.shard_tokens``), 1 when not sharded."""
    if not sharding.sharded:
        return 1
    if sharding.shards == "auto":
        return max(1, math.ceil(n_tokens / max(1, sharding.shard_tokens)))
    return max(1, int(sharding.shards))
