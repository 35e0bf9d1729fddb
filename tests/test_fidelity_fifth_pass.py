"""Issue 53, fidelity fifth pass: MNLI chaining carries every weight but the final classifier, as the authors'
``load_ignore_keys=["state/model/model.classifier*"]`` did (MB@2fed0f2:src/evals/finetuning_jobs.py:288-299), on
every architecture the harness chains; the chained points' run ids change and no other's does."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.conftest import TINY_MODEL, compose

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------ MNLI chaining
def tiny_config(kind: str):
    """A random-init config of ``kind`` small enough to build in a blink (the tiny ModernBERT's vocabulary)."""
    from transformers import BertConfig, DebertaV2Config, ModernBertConfig, RobertaConfig

    shape = {"vocab_size": 2000, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "max_position_embeddings": 128}
    if kind == "modernbert":
        return ModernBertConfig(**shape, local_attention=16, global_attn_every_n_layers=2, pad_token_id=0,
                                cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)
    if kind == "bert":
        return BertConfig(**shape)
    if kind == "roberta":
        return RobertaConfig(**{**shape, "max_position_embeddings": 130}, pad_token_id=1)
    return DebertaV2Config(**shape, pooler_hidden_size=32, pooler_dropout=0.0, relative_attention=True,
                           position_buckets=16, pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm")


def pretrained_and_mnli(kind: str, tmp: Path) -> tuple[str, str]:
    """A pretrained encoder folder (the base model alone, as a hub checkpoint without a classification head) and an
    'MNLI checkpoint' of it: a 3-way classifier built on it with every weight moved, so each one differs from both
    the pretrained weights and a freshly built head."""
    from transformers import AutoModel, AutoModelForSequenceClassification

    torch.manual_seed(0)
    pre, mnli = tmp / f"{kind}-pre", tmp / f"{kind}-mnli"
    AutoModel.from_config(tiny_config(kind)).save_pretrained(pre)
    model = AutoModelForSequenceClassification.from_pretrained(pre, num_labels=3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5 + 0.25)
    model.save_pretrained(mnli)
    return str(pre), str(mnli)


#: what stays fresh after chaining, per architecture: the final classifier alone. BERT's pooler sits in the encoder
#: (``bert.pooler``), ModernBERT's head (dense, norm) and DeBERTa's ContextPooler (``pooler``) beside it, all
#: carried; RoBERTa's ClassificationHead puts its dense layer inside ``classifier``: the authors' glob
#: ``model.classifier*`` leaves it fresh too, and so does the harness
FRESH = {
    "modernbert": ["classifier.weight", "classifier.bias"],
    "bert": ["classifier.weight", "classifier.bias"],
    "roberta": ["classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight",
                "classifier.out_proj.bias"],
    "deberta-v2": ["classifier.weight", "classifier.bias"],
}


@pytest.mark.parametrize("kind", list(FRESH))
def test_mnli_chaining_carries_every_weight_but_the_final_classifier(kind: str, tmp_path: Path) -> None:
    """After chaining, every weight outside ``classifier.*`` equals the MNLI checkpoint's (the encoder and any
    pooling head beside the classifier: on today's tree ModernBERT's ``head`` and DeBERTa's ``pooler`` kept their
    pretrained or fresh weights), and the classifier is the freshly built one, not MNLI's; the weights the record
    names as fresh (``details.init_fresh``) are exactly the classifier's."""
    from transformers import AutoModelForSequenceClassification

    from harness.training.classification import load_classifier

    pre, mnli = pretrained_and_mnli(kind, tmp_path)
    torch.manual_seed(7)
    chained = load_classifier(pre, 2, attn_implementation="eager", init_from=mnli).state_dict()
    torch.manual_seed(7)
    built = load_classifier(pre, 2, attn_implementation="eager")
    source = AutoModelForSequenceClassification.from_pretrained(mnli, attn_implementation="eager").state_dict()
    carried = [k for k in chained if not k.startswith("classifier.")]
    assert carried and all(k in source for k in carried)
    for name in carried:
        assert torch.equal(chained[name], source[name]), f"{kind}: {name} is not MNLI's"
    fresh = [k for k in chained if k.startswith("classifier.")]
    for name in fresh:
        assert torch.equal(chained[name], built.state_dict()[name]), f"{kind}: {name} is not the fresh one"
        assert chained[name].shape != source[name].shape or not torch.equal(chained[name], source[name])
    # what the record names as fresh (BERT and RoBERTa carried all this before, their encoder holding every weight
    # but the classifier's; the record did not say which weights started fresh)
    from harness.training.classification import fresh_parameters

    assert sorted(fresh) == sorted(FRESH[kind]) == sorted(fresh_parameters(built))


def test_a_chained_checkpoint_of_another_model_is_refused_in_one_line(tmp_path: Path) -> None:
    from harness.errors import HarnessError
    from harness.training.classification import load_classifier

    pre, _ = pretrained_and_mnli("bert", tmp_path)
    _, other = pretrained_and_mnli("roberta", tmp_path)
    with pytest.raises(HarnessError, match=r"does not match model .*chain only checkpoints fine-tuned from the same") \
            as refused:
        load_classifier(pre, 2, attn_implementation="eager", init_from=other)
    assert "\n" not in str(refused.value) and "(missing bert.embeddings" in str(refused.value)   # one line: why


def test_the_modernbert_head_is_carried_with_the_authors_head_settings(tmp_path: Path) -> None:
    """ModernBERT under ``model.glue`` (the authors' head: no head norm): the MNLI checkpoint saved without the
    norm is carried into a model built the same way, its ``head.dense`` included."""
    from harness.models.spec import ModelSpec
    from harness.training.classification import load_classifier

    head = ModelSpec.from_config(compose(["model=modernbert-base"]).model).glue
    torch.manual_seed(0)
    mnli_model = load_classifier(str(TINY_MODEL), 3, head=head)
    with torch.no_grad():
        mnli_model.head.dense.weight.add_(1.0)
    mnli_model.save_pretrained(tmp_path / "mnli")
    chained = load_classifier(str(TINY_MODEL), 1, head=head, init_from=str(tmp_path / "mnli"))
    assert isinstance(chained.head.norm, torch.nn.Identity)
    assert torch.equal(chained.head.dense.weight, mnli_model.head.dense.weight)
    assert chained.classifier.out_features == 1


def test_only_chained_points_change_their_run_id(tmp_path: Path, monkeypatch) -> None:
    """A point that starts from MNLI's checkpoint (or ``task.init_from``) hashes ``load.chain`` (version 2), so its
    run id changes; the same point from the pretrained encoder keeps its id, and so does MNLI's."""
    from harness import planning
    from harness.specs import stages
    from harness.trial.toy_data import write_tiny_glue

    glue = write_tiny_glue(tmp_path / "glue")
    base = ["task=glue", "model=modernbert-base", f"model.path={TINY_MODEL}", "model.name=tiny", f"task.data_dir={glue}",
            "task.lr=3e-5", "task.weight_decay=1e-6", "task.epochs=1", "task.seed=1618", "device=cpu",
            f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs", f"paths.cache={tmp_path}/cache"]

    def ids(*extra: str) -> dict[str, str]:
        cfg = compose([*base, *extra])
        return {c.dataset: c.run_id for c in planning.every_cell(cfg, planning.plan(cfg))}

    plain = ids("task.tasks=[mnli,rte]")
    chained = ids("task.tasks=[mnli,rte]", f"task.init_from={TINY_MODEL}")
    assert chained["rte"] != plain["rte"] and chained["mnli"] != plain["mnli"]   # both start from the folder
    again = stages.STAGES.replaced(**{"load.chain": stages.Stage(3, what="a later fix")})
    monkeypatch.setattr(stages, "STAGES", again)
    assert ids("task.tasks=[mnli,rte]", f"task.init_from={TINY_MODEL}")["rte"] != chained["rte"]
    assert ids("task.tasks=[mnli,rte]") == plain                                   # unchained: untouched
