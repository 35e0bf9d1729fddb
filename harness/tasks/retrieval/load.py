"""The ``load.<name>`` stages of a retrieval run: the spec's load stage that computes a run (MLDR: chosen by
``task.retriever`` through ``stage_when``) loads the weights. A loader gets the run's
:class:`~harness.tasks.runplan.RunPlan` and the model spec to load (``model.path``, or the trained weights of the task's
source run) and returns (model, the record's model block); lengths no model position can encode are refused here,
before any expensive work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError
from harness.models import usable_positions

if TYPE_CHECKING:
    from harness.models import ModelSpec
    from harness.tasks.runplan import RunPlan


def encoder(plan: RunPlan, spec: ModelSpec) -> tuple[Any, dict[str, Any]]:
    """A SentenceTransformer (hub id, folder or package; pruned per ``model.keep_layers``); the lengths it checks:
    ``task.max_length``, and ``task.max_seq_length`` when the run trains."""
    from harness.models import load_sentence_transformer

    model, block = load_sentence_transformer(spec, device=plan.device)
    s = plan.settings
    check_positions(model, s.evaluation.max_length, spec.name, "task.max_length")
    if plan.trains:
        check_positions(model, s.training.max_seq_length, spec.name, "task.max_seq_length")
    return model, block


def colbert(plan: RunPlan, spec: ModelSpec) -> tuple[Any, dict[str, Any]]:
    """A PyLate ColBERT (a ColBERT checkpoint as is; a plain encoder gets the ``embedding_size`` projection, seeded
    by the run's seed: ``task.train_seed`` when training, else ``seed``). Document lengths are capped at the
    positions and recorded by the retriever, as the paper's evaluation does."""
    from harness.tasks.retrieval.retrievers.colbert_model import load_colbert

    return load_colbert(spec, device=plan.device, embedding_size=plan.settings.multi_vector.embedding_size,
                        seed=plan.seed)


def check_positions(model: Any, length: int, name: str, key: str) -> None:
    """A length above the model's positions cannot be encoded: say so, and the largest that works."""
    check_length(usable_positions(model), length, name, key)


def check_length(positions: int | None, length: int, name: str, key: str) -> None:
    """``key=length`` within ``positions`` (None: the config does not say, nothing to check), else one line."""
    if positions is not None and length > positions:
        raise HarnessError(
            f"{key}={length} is above model {name!r}'s {positions} token positions; set {key}<={positions} (the "
            "model's maximum), or use a model with longer positions."
        )
