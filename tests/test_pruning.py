"""Pruned variants (``model.keep_layers``): built at load time from the full model, each kept layer keeping its
original attention type, norm and RoPE table; the variant is part of the run identity and the row name."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness import models
from harness.core.errors import HarnessError
from harness.models import ModelSpec, load_sentence_transformer
from tests.conftest import compose

# the tiny ModernBERT's layers are [full, sliding, full, sliding]; keeping [1, 2] puts a local layer first and a
# global one second: the opposite of what their new indices would give, and layer 1's attention norm at index 0
KEEP = [1, 2]


@pytest.fixture(scope="module")
def full_and_pruned(tiny_model_dir: Path):
    full, _ = load_sentence_transformer(ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir), max_length=64))
    pruned, block = load_sentence_transformer(
        ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir), max_length=64, keep_layers=KEEP))
    return full[0].auto_model.eval(), pruned[0].auto_model.eval(), block


def test_kept_layers_are_the_originals(full_and_pruned) -> None:
    full, pruned, block = full_and_pruned
    assert len(pruned.layers) == 2 and pruned.config.num_hidden_layers == 2
    assert pruned.config.layer_types == ["sliding_attention", "full_attention"]
    for new, old in enumerate(KEEP):
        a, b = pruned.layers[new], full.layers[old]
        assert a.attention_type == b.attention_type == full.config.layer_types[old]
        assert a.attn.sliding_window == b.attn.sliding_window
        assert type(a.attn_norm) is type(b.attn_norm) is torch.nn.LayerNorm   # original layer 1 has a norm
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys()
        for k in sa:
            torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=0)
    assert pruned.layers[0].attn.sliding_window is not None and pruned.layers[1].attn.sliding_window is None
    assert block["keep_layers"] == KEEP and block["name"] == "tiny[1,2]"


def _by_hand(full, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Embeddings -> the kept original layers, each with its own mask and RoPE table -> final norm."""
    t = input_ids.shape[1]
    pos = torch.arange(t).unsqueeze(0)
    h = full.embeddings(input_ids=input_ids)
    keys = mask.bool()[:, None, None, :].expand(-1, 1, t, t)
    dist = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).abs()
    masks = {"full_attention": keys, "sliding_attention": keys & (dist <= full.config.sliding_window)}
    for i in KEEP:
        kind = full.config.layer_types[i]
        h = full.layers[i](h, attention_mask=masks[kind], position_embeddings=full.rotary_emb(h, pos, kind))
    return full.final_norm(h)


def test_output_equals_running_the_kept_layers_by_hand(full_and_pruned) -> None:
    full, pruned, _ = full_and_pruned
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (3, 40), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 25:] = 0
    mask[2, 10:] = 0
    with torch.inference_mode():
        ours = pruned(input_ids=ids, attention_mask=mask).last_hidden_state
        ref = _by_hand(full, ids, mask)
        whole = full(input_ids=ids, attention_mask=mask).last_hidden_state
    valid = mask.bool()
    torch.testing.assert_close(ours[valid], ref[valid], rtol=0, atol=1e-5)
    assert (ours[valid] - whole[valid]).abs().max() > 1e-2     # really a different model than the full one


def test_variant_is_in_the_name_identity_and_ref(tiny_model_dir: Path) -> None:
    spec = ModelSpec.based_on("bert-base", name="mmbert-small", path=str(tiny_model_dir), keep_layers=[0, 1, 2, 18])
    assert spec.name == "mmbert-small[0,1,2,18]"
    assert ModelSpec.based_on("bert-base", name="mmbert-small[0,1]", path="x", keep_layers=[0, 1]).name == "mmbert-small[0,1]"
    full_ref = models.model_ref(ModelSpec.based_on("bert-base", name="t", path=str(tiny_model_dir)))
    ref = models.model_ref(ModelSpec.based_on("bert-base", name="t", path=str(tiny_model_dir), keep_layers=[0, 2]))
    assert ref == {**full_ref, "keep_layers": [0, 2]}
    hub = models.model_ref(ModelSpec.based_on("bert-base", name="t", path="jhu-clsp/mmBERT-small", keep_layers=[0, 1, 2, 18]))
    assert hub["keep_layers"] == [0, 1, 2, 18]


def test_cli_override_names_the_row_and_changes_only_pruned_run_ids(tiny_model_dir: Path, tmp_path: Path) -> None:
    from harness.run.planning import planner_of

    base = ["task=beir", "model=mmbert-small", f"model.path={tiny_model_dir}", "task.train=false",
            f"paths.results={tmp_path}"]
    plain = planner_of(compose(base))
    pruned = planner_of(compose([*base, "model.keep_layers=[0,1,3]"]))
    other = planner_of(compose([*base, "model.keep_layers=[0,1,2]"]))
    assert pruned.setup.model.name == "mmbert-small[0,1,3]" and plain.setup.model.name == "mmbert-small"
    ids = {f.cells()[0].run_id for f in (plain, pruned, other)}
    assert len(ids) == 3
    # keep_layers: null leaves the identity of every unpruned run as it was
    assert "keep_layers" not in plain.identity()["model"] and "keep_layers" not in plain.identity()["model"]["ref"]


@pytest.mark.parametrize("keep", [[], [2, 1], [0, 0], [-1, 2]])
def test_bad_keep_layers_fail_with_the_fix(keep: list[int]) -> None:
    with pytest.raises(HarnessError, match=r"strictly increasing.*keep_layers=\[0,1,2,18\]"):
        ModelSpec.based_on("bert-base", name="m", path="x", keep_layers=keep)


def test_out_of_range_layer_fails_before_loading(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sentence_transformers

    def boom(*a, **k):
        raise AssertionError("weights loaded before the check")

    monkeypatch.setattr(sentence_transformers.models, "Transformer", boom)
    with pytest.raises(HarnessError, match=r"names layer 9, but the model has 4 layers \(0\.\.3\)"):
        load_sentence_transformer(ModelSpec.based_on("bert-base", name="t", path=str(tiny_model_dir), keep_layers=[0, 9]))


def test_a_loader_that_would_ignore_pruning_fails(tiny_model_dir: Path) -> None:
    with pytest.raises(HarnessError, match="would ignore it"):
        models.resolve_path(ModelSpec.based_on("bert-base", name="t", path=str(tiny_model_dir), keep_layers=[0, 1]))
