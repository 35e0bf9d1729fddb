"""The training seed reaches every source of randomness: DPR's NO_DUPLICATES batch order, dropout, ColBERT KD's batch
order and the fresh heads (ColBERT's projection, GLUE's classifier). Two seeds differ; one seed twice is bit-identical."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from harness.models import ModelSpec
from tests.conftest import TINY_MODEL, TOPICS, write_triplets

SPEC = ModelSpec.based_on("bert-base", name="tiny", path=str(TINY_MODEL), max_length=64)   # fp32 weights; trained with precision=fp32

Weights = dict[str, torch.Tensor]


def snapshot(module: torch.nn.Module) -> Weights:
    """A detached copy of every parameter and buffer."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def identical(a: Weights, b: Weights) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---- DPR: sentence-transformers' NO_DUPLICATES sampler ------------------------------------------------------

def train_dpr(tmp: Path, seed: int, name: str, dropout: float = 0.0) -> tuple[Weights, float]:
    """The tiny ModernBERT trained on 24 triplets, 3 batches of 8 (in-batch negatives: the batch order matters).
    Its config has no dropout, so only the batch order can tell two seeds apart; ``dropout`` turns it on."""
    from harness.models import load_sentence_transformer
    from harness.tasks.retrieval.data.triplets import load_triplets_file
    from harness.tasks.retrieval.seeding import train_dense
    from tests.test_training import dense, run

    model, _ = load_sentence_transformer(SPEC)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = dropout
    data = load_triplets_file(write_triplets(tmp / "triplets.tsv", n=24))
    node = dense(batch_size=8, loss="mnrl", max_seq_length=16, train_seed=seed)
    info = train_dense(model, data, node, run(lr=1e-3, seed=seed), tmp / name)
    return snapshot(model), info["train_loss"]


def assert_the_seed_decides(train, tmp: Path, what: str) -> None:
    """Seed 12 twice: bit-identical weights and loss; seed 13: other weights and loss."""
    a, loss_a = train(tmp, 12, "a")
    again, loss_again = train(tmp, 12, "again")
    b, loss_b = train(tmp, 13, "b")
    assert identical(a, again) and loss_a == loss_again
    assert not identical(a, b), f"task.train_seed=12 and =13 trained bit-identical {what} weights"
    assert loss_a != loss_b


def test_dpr_seed_changes_the_run_and_repeats_bit_identically(tmp_path: Path) -> None:
    assert_the_seed_decides(train_dpr, tmp_path, "DPR")


def test_dpr_dropout_follows_the_seed(tmp_path: Path) -> None:
    """transformers' Trainer seeds torch (``set_seed(args.seed)``) when it is built: dropout masks repeat."""
    a, loss_a = train_dpr(tmp_path, 12, "a", dropout=0.5)
    again, loss_again = train_dpr(tmp_path, 12, "again", dropout=0.5)
    plain, _ = train_dpr(tmp_path, 12, "plain")
    assert identical(a, again) and loss_a == loss_again
    assert not identical(a, plain)   # the dropout was live


# ---- ColBERT KD: PyLate's distillation on the sentence-transformers trainer ---------------------------------

def write_kd(path: Path, n: int = 12) -> Path:
    """``n`` joined-layout KD rows: one query, four documents (one per topic), teacher scores."""
    topics = list(TOPICS.items())
    rows = [{"query": f"{topics[i % 5][0]} question {i}",
             "documents": [f"{t}: {w} {i}" for t, w in topics[i % 5:] + topics[: i % 5]][:4],
             "scores": [4.0, 1.0, 0.5, 0.0]} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def train_colbert(tmp: Path, seed: int, name: str) -> tuple[Weights, float]:
    """The tiny ModernBERT (one fixed head, seed 0) distilled on 12 rows in 3 batches of 4."""
    from harness.tasks.retrieval.data.kd import load_kd_file
    from harness.tasks.retrieval.retrievers.colbert_model import load_colbert
    from harness.tasks.retrieval.seeding import train_kd
    from tests.test_training import kd, run

    model, _ = load_colbert(SPEC, device="cpu", embedding_size=128, seed=0)
    data, _ = load_kd_file(write_kd(tmp / "kd.jsonl"), n_ways=4)
    node = kd(batch_size=4, train_query_length=8, train_document_length=16, train_seed=seed)
    info = train_kd(model, data, node, run(lr=1e-3, seed=seed), tmp / name)
    return snapshot(model), info["train_loss"]


def test_colbert_kd_seed_changes_the_run_and_repeats_bit_identically(tmp_path: Path) -> None:
    assert_the_seed_decides(train_colbert, tmp_path, "ColBERT")


def test_colbert_projection_head_follows_the_seed() -> None:
    """``load_colbert`` (given ``task.train_seed`` by task=colbert when training) seeds what it adds to a plain
    encoder: the 128-d projection and the [Q]/[D] token embeddings."""
    from harness.tasks.retrieval.retrievers.colbert_model import load_colbert

    def built(seed: int) -> Weights:
        model, _ = load_colbert(SPEC, device="cpu", embedding_size=128, seed=seed)
        return snapshot(model)

    a, again, b = built(12), built(12), built(13)
    assert identical(a, again) and not identical(a, b)


# ---- GLUE: the fresh classifier head ------------------------------------------------------------------------

def classifier_head(seed: int) -> Weights:
    """The head task=glue builds for a grid point: ``set_seed(point.seed)`` then ``load_classifier``."""
    from transformers import set_seed

    from harness.tasks.glue.classification import load_classifier

    set_seed(seed)
    model = load_classifier(str(TINY_MODEL), num_labels=3)
    encoder = model.base_model_prefix + "."
    return {k: v for k, v in snapshot(model).items() if not k.startswith(encoder)}


def test_glue_classifier_head_follows_the_seed() -> None:
    a, again, b = classifier_head(12), classifier_head(12), classifier_head(13)
    assert any(k.startswith("classifier.") for k in a)
    assert identical(a, again) and not identical(a, b)
