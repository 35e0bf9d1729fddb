"""task=efficiency: Table 10's sets, tokens/s over real tokens, skipped long sets, isolated max-batch probes,
FLOPs and roofline, the run identity's hardware, and the Table 2 view on the leaderboard."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from harness import families, results
from harness.errors import HarnessError
from harness.evaluation import throughput as tp
from harness.families.efficiency import SetSpec
from harness.models import ModelSpec, load_sentence_transformer
from tests.conftest import compose

# Table 10 of the paper: total tokens, longest, shortest, number of sequences
TABLE10 = {
    "short_fixed": (4194304, 512, 512, 8192), "short_variable": (2096510, 476, 32, 8192),
    "long_fixed": (67108864, 8192, 8192, 8192), "long_variable": (33604913, 7624, 171, 8192),
}


def _family(overrides: list[str]):
    cfg = compose(["task=efficiency", *overrides])
    return families.get("efficiency")(cfg), cfg


def test_default_config_is_the_papers_setting() -> None:
    fam, _ = _family([])
    s = fam.settings
    assert (s.n_docs, s.repeats, s.warmup, s.token_low, s.token_high) == (8192, 10, 1, 100, 16000)
    assert s.datasets == ["short_fixed", "short_variable", "long_fixed", "long_variable"]
    assert [fam.set_spec(n).batch_size for n in s.datasets] == [512, 512, 32, 32]


@pytest.mark.parametrize("name", list(TABLE10))
def test_sets_reproduce_table10_exactly(name: str) -> None:
    fam, _ = _family([])
    stats = tp.set_stats(tp.set_lengths(fam.set_spec(name), 8192, 42))
    assert (stats["total_tokens"], stats["longest"], stats["shortest"], stats["n_docs"]) == TABLE10[name]


def test_token_ids_are_seeded_ordinary_ids() -> None:
    a = tp.batch_token_ids([5, 3], seed=42, batch_index=0, low=100, high=16000)
    b = tp.batch_token_ids([5, 3], seed=42, batch_index=0, low=100, high=16000)
    c = tp.batch_token_ids([5, 3], seed=42, batch_index=1, low=100, high=16000)
    assert [len(x) for x in a] == [5, 3] and all((x >= 100).all() and (x < 16000).all() for x in a)
    assert all((x == y).all() for x, y in zip(a, b, strict=True)) and not (a[0] == c[0]).all()


@pytest.mark.parametrize(("overrides", "message"), [
    (["task.n_docs=0"], "n_docs >= 1"),
    (["task.datasets=[short_fixd]"], "short_fixed"),
    (["+task.sets.odd={batch_size:4}", "task.datasets=[odd]"], "either length=<tokens> or mean, std, min and max"),
])
def test_bad_settings_fail_before_any_work(overrides: list[str], message: str) -> None:
    fam, _ = _family(overrides)
    with pytest.raises(HarnessError, match=message):
        fam.cells()


def test_run_identity_includes_the_hardware(monkeypatch: pytest.MonkeyPatch) -> None:
    fam, _ = _family([])
    rid = fam.cells()[0].run_id
    monkeypatch.setattr(tp, "device_name", lambda device: "NVIDIA GeForce RTX 4090")
    other, _ = _family([])
    assert other.cells()[0].run_id != rid


@pytest.fixture(scope="module")
def tiny_hf(tiny_model_dir: Path):
    model, _ = load_sentence_transformer(ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir)))
    return model[0].auto_model.eval()


def test_forward_flops_count_linears_and_windowed_attention(tiny_hf) -> None:
    cfg = tiny_hf.config
    linear_per_layer = sum(m.weight.numel() for m in tiny_hf.layers[0].modules() if isinstance(m, torch.nn.Linear))
    n, d, window = 100, cfg.hidden_size, 2 * (cfg.sliding_window + 1) - 1   # local layers see 17 tokens
    expected = 4 * 2 * linear_per_layer * n + 2 * 4 * d * n * n + 2 * 4 * d * n * window
    assert tp.forward_flops(tiny_hf, [n]) == pytest.approx(expected)
    assert tp.forward_flops(tiny_hf, [n, n]) == pytest.approx(2 * expected)


def test_packed_inputs_give_the_padded_outputs(tiny_hf) -> None:
    seqs = tp.batch_token_ids([40, 7, 25], seed=1, batch_index=0, low=5, high=1000)
    with torch.inference_mode():
        padded = tiny_hf(**tp.model_inputs(tiny_hf, seqs, mode=None, pad_to=64, pad_id=0, device="cpu"))
        packed = tiny_hf(**tp.model_inputs(tiny_hf, seqs, mode="mask", pad_to=64, pad_id=0, device="cpu"))
    p = tp.pack_rows([list(s) for s in seqs], 64, 0)
    for i, (row, start) in enumerate(p.where):
        n = len(seqs[i])
        torch.testing.assert_close(packed.last_hidden_state[row, start : start + n],
                                   padded.last_hidden_state[i, :n], rtol=0, atol=1e-5)


def test_max_batch_search_brackets_and_never_exceeds_the_limit() -> None:
    calls: list[int] = []

    def fits_300(probe, n):
        calls.append(n)
        return ("ok", "") if n <= 300 else ("oom", "out of memory")

    bs, history = tp.max_batch_size(None, start=64, limit=4096, resolution=4, run=fits_300)  # type: ignore[arg-type]
    assert 296 <= bs <= 300 and max(calls) <= 4096 and len(history) == len(calls) < 15
    assert tp.max_batch_size(None, start=512, limit=4096, resolution=4, run=fits_300)[0] >= 296  # type: ignore[arg-type]
    assert tp.max_batch_size(None, start=8, limit=16, resolution=1, run=fits_300)[0] == 16  # type: ignore[arg-type]
    assert tp.max_batch_size(None, start=8, limit=16, resolution=1,  # type: ignore[arg-type]
                             run=lambda p, n: ("oom", ""))[0] == 0
    with pytest.raises(HarnessError, match="not out-of-memory: boom"):
        tp.max_batch_size(None, start=8, limit=16, resolution=1, run=lambda p, n: ("error", "boom"))  # type: ignore[arg-type]


def test_a_failed_probe_does_not_poison_the_next(tiny_model_dir: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Each probe runs in its own process under the memory budget: one that runs out of memory reports it,
    and the next (in a fresh process) runs as if nothing happened. A probe prints no loading chatter."""
    spec = ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir))
    probe = tp.probe_for(spec, device="cpu", precision="fp32", length=512, mode=None, memory_gb=0.25,
                         id_range=(5, 1000), pad_id=0)
    status, message = tp.probe_once(probe, 4096)          # 4096 x 512 tokens do not fit in 256 MiB
    assert status == "oom", message
    assert tp.probe_once(probe, 2) == ("ok", "")
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "LOAD REPORT" not in err, err[-500:]


def _run(tmp_path: Path, tiny_model_dir: Path, extra: list[str] = ()) -> list[results.ResultRecord]:
    from harness import runner

    cfg = compose([
        "task=efficiency", "model=all-minilm-l6-v2", f"model.path={tiny_model_dir}", "model.name=tiny-modernbert",
        "model.family=ModernBERT", "model.size=tiny", "precision=fp32", "device=cpu", f"paths.results={tmp_path}",
        "task.n_docs=6", "task.repeats=2", "task.sets.short_fixed.length=64", "task.sets.short_fixed.batch_size=4",
        "task.sets.short_variable={mean:32,std:16,min:8,max:64,batch_size:4}", "task.max_batch.limit=8",
        "task.max_batch.memory_gb=1", "task.roofline_size=256", *extra,
    ])
    return runner.run(cfg)


def test_scaled_down_run_writes_one_record_per_set_and_skips_too_long_sets(tmp_path: Path, tiny_model_dir: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[int] = []
    real = tp.probe_once

    def counted(probe, n):
        probes.append(n)
        return real(probe, n)

    monkeypatch.setattr(tp, "probe_once", counted)
    recs = {r.dataset: r for r in _run(tmp_path, tiny_model_dir)}
    assert set(recs) == {"short_fixed", "short_variable", "long_fixed", "long_variable"}
    fixed, var = recs["short_fixed"], recs["short_variable"]
    for r in (fixed, var):
        assert r.status == "ok" and r.main_score == "tokens_per_s" and r.higher_is_better
        assert r.metrics["tokens_per_s"] > 0 and len(r.details["pass_seconds"]) == 2
        assert r.details["real_tokens_per_pass"] == r.details["set_stats"]["total_tokens"]
        assert r.details["dtype"] == "fp32" and r.details["attn_implementation"] == "sdpa"
        assert r.details["unpadded"] is False and "threads" in r.details["device_name"]
        assert 0 < r.metrics["roofline_fraction"] < 1 and r.metrics["max_batch_size"] == 8
    # tokens/s over real tokens: a padded variable-length pass counts only the real tokens
    assert var.details["real_tokens_per_pass"] < 6 * 64
    assert probes == [4, 8]          # one search per length, shared by both short sets (same max length 64)
    for name in ("long_fixed", "long_variable"):
        assert recs[name].status == results.STATUS_SKIPPED
        assert "positions stop at 512" in recs[name].error and "8192" in recs[name].error
    # a second run finds every cell done (skipped ones too) and loads nothing
    monkeypatch.setattr("harness.models.load_sentence_transformer", lambda *a, **k: pytest.fail("model loaded"))
    again = _run(tmp_path, tiny_model_dir)
    assert {r.created_at for r in again} == {r.created_at for r in recs.values()}


def test_table2_view_beside_the_published_rows(tmp_path: Path) -> None:
    from harness.leaderboard.build import build_leaderboard

    model = {"name": "modernbert-base", "family": "ModernBERT", "size": "base"}

    def rec(dataset: str, tps: float, **metrics: float) -> results.ResultRecord:
        return results.ResultRecord(task="efficiency", dataset=dataset, split="synthetic", model=model,
                                    metrics={"tokens_per_s": tps, **metrics}, main_score="tokens_per_s",
                                    run_id="r1", config_id="c1")

    results.write_record(tmp_path, rec("short_fixed", 148_123.0, max_batch_size=1604.0))
    results.write_record(tmp_path, rec("short_variable", 147_300.0))
    skipped = results.ResultRecord(task="efficiency", dataset="long_fixed", split="synthetic", model=model,
                                   metrics={}, main_score="tokens_per_s", run_id="r1", config_id="c1",
                                   status=results.STATUS_SKIPPED, error="the model's positions stop at 512")
    results.write_record(tmp_path, skipped)
    lb = build_leaderboard([tmp_path])
    table = lb.table("efficiency")
    assert [c for c, _ in table.columns] == ["short_bs", "short_fixed", "short_variable", "long_bs", "long_fixed",
                                             "long_variable"]
    run = table.cells["run:modernbert-base|ModernBERT|base"]
    assert (run["short_bs"].text, run["short_fixed"].text, run["short_variable"].text) == ("1604", "148.1", "147.3")
    assert run["long_fixed"].text == "–" and "positions stop at 512" in run["long_fixed"].note
    assert not run["long_fixed"].failed and lb.meta["n_failed"] == 0
    pub = table.cells["pub:ModernBERT-base|ModernBERT|base"]
    assert (pub["short_bs"].text, pub["short_fixed"].text, pub["long_variable"].text) == ("1604", "148.1", "133.8")
    assert "long_fixed" not in table.cells["pub:BERT-base|BERT|base"]     # unsupported: empty, as printed


def test_throughput_is_mean_over_passes() -> None:
    t = tp.Timing([1.0, 2.0], 1000)
    assert np.allclose(t.tokens_per_s, [1000.0, 500.0])


def test_set_spec_max_length() -> None:
    assert SetSpec(length=512, batch_size=8).max_length == 512
    assert SetSpec(mean=1, std=1, min=1, max=9, batch_size=8).max_length == 9
