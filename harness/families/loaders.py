"""The ``load.<name>`` stages of the retrieval runner: the spec's load stage that computes a run (MLDR: chosen by
``task.retriever`` through ``stage_when``) loads the weights. A loader gets the running task and the model spec to
load (``model.path``, or the trained weights of the task's source run) and returns (model, the record's model
block); lengths no model position can encode are refused here, before any expensive work."""

from __future__ import annotations

from typing import Any

from harness.errors import HarnessError
from harness.models import usable_positions


def encoder(task: Any, spec: Any) -> tuple[Any, dict[str, Any]]:
    """A SentenceTransformer (hub id, folder or package; pruned per ``model.keep_layers``)."""
    from harness.models import load_sentence_transformer

    model, block = load_sentence_transformer(spec, device=task.device)
    s = task.settings
    check_positions(model, s.evaluation.max_length, spec.name, "task.max_length")
    if task.trains:
        check_positions(model, s.training.max_seq_length, spec.name, "task.max_seq_length")
    return model, block


def colbert(task: Any, spec: Any) -> tuple[Any, dict[str, Any]]:
    """A PyLate ColBERT (a ColBERT checkpoint as is; a plain encoder gets the ``embedding_size`` projection, seeded
    by ``task.train_seed`` when training, else ``seed``). Document lengths are capped at the positions and recorded
    by the retriever, as the paper's evaluation does."""
    from harness.evaluation.colbert_model import load_colbert

    s = task.settings
    seed = s.training.train_seed if task.trains else int(task.cfg.seed)
    return load_colbert(spec, device=task.device, embedding_size=s.multi_vector.embedding_size, seed=seed)


def check_positions(model: Any, length: int, name: str, key: str) -> None:
    """A length above the model's positions cannot be encoded: say so, and the largest that works."""
    n = usable_positions(model)
    if n is not None and length > n:
        raise HarnessError(
            f"{key}={length} is above model {name!r}'s {n} token positions; set {key}<={n} (the model's maximum), "
            "or use a model with longer positions."
        )
