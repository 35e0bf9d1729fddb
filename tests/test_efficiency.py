"""task=efficiency: Table 10's sets, tokens/s over real tokens, skipped long sets, isolated max-batch probes,
FLOPs and roofline, the run identity's hardware, and the Table 2 view on the leaderboard."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.core import results
from harness.core.errors import HarnessError
from harness.models import ModelSpec, load_sentence_transformer
from harness.run.planning import planner_of
from harness.tasks.efficiency import max_batch as mb
from harness.tasks.efficiency import throughput as tp
from harness.tasks.efficiency.settings import SetSpec
from tests.conftest import compose

# Table 10 of the paper: total tokens, longest, shortest, number of sequences
TABLE10 = {
    "short_fixed": (4194304, 512, 512, 8192), "short_variable": (2096510, 476, 32, 8192),
    "long_fixed": (67108864, 8192, 8192, 8192), "long_variable": (33604913, 7624, 171, 8192),
}


def _family(overrides: list[str]):
    cfg = compose(["task=efficiency", *overrides])
    return planner_of(cfg), cfg


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
    (["task.n_docs=0"], r"task\.n_docs=0 is below 1: set task\.n_docs to an integer >= 1"),
    (["task.datasets=[short_fixd]"], "short_fixed"),
    (["+task.sets.odd={batch_size:4}", "task.datasets=[odd]"], "either length=<tokens> or mean, std, min and max"),
])
def test_bad_settings_fail_before_any_work(overrides: list[str], message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        _family(overrides)[0].cells()


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


def _fits_up_to(size: int, calls: list[int] | None = None):
    def run(probe, n: int) -> mb.ProbeOutcome:
        if calls is not None:
            calls.append(n)
        return mb.ProbeOutcome("ok", seconds=0.1) if n <= size else mb.ProbeOutcome("oom", "out of memory")
    return run


def test_max_batch_search_brackets_and_never_exceeds_the_limit() -> None:
    calls: list[int] = []
    found = mb.max_batch_size(None, start=64, limit=4096, resolution=4, run=_fits_up_to(300, calls))  # type: ignore[arg-type]
    assert 296 <= found.size <= 300 and max(calls) <= 4096 and len(found.probes) == len(calls) < 15
    assert not found.lower_bound and [p["batch_size"] for p in found.probes] == calls
    assert mb.max_batch_size(None, start=512, limit=4096, resolution=4, run=_fits_up_to(300)).size >= 296  # type: ignore[arg-type]
    assert mb.max_batch_size(None, start=8, limit=16, resolution=1, run=_fits_up_to(300)).size == 16  # type: ignore[arg-type]
    assert mb.max_batch_size(None, start=8, limit=16, resolution=1,  # type: ignore[arg-type]
                             run=lambda p, n: mb.ProbeOutcome("oom")).size == 0
    with pytest.raises(HarnessError, match="not out-of-memory: boom"):
        mb.max_batch_size(None, start=8, limit=16, resolution=1,  # type: ignore[arg-type]
                          run=lambda p, n: mb.ProbeOutcome("error", "boom"))


@pytest.mark.parametrize(("slow_from", "start", "size", "probed", "last"), [
    (128, 32, 64, [32, 64, 128], "slow"),            # growing: stops at the first slow probe, keeps the last that ran
    (64, 512, 32, [512, 256, 128, 64, 32], "ok"),    # the first probe is slow: halves until one runs in time
])
def test_a_probe_over_its_time_budget_ends_the_search_with_a_lower_bound(slow_from: int, start: int, size: int,
                                                                         probed: list[int], last: str) -> None:
    """Outcomes are scripted by batch size (nothing here is timed): ok below ``slow_from``, slow from there."""
    def run(probe, n: int) -> mb.ProbeOutcome:
        return mb.ProbeOutcome("ok", seconds=1.0) if n < slow_from else mb.ProbeOutcome("slow", seconds=30.0)

    probe = mb.Probe(spec={}, device="cpu", precision="fp32", length=512, mode=None, memory_bytes=None,
                     id_range=(5, 1000), pad_id=0, seconds=30.0)
    found = mb.max_batch_size(probe, start=start, limit=4096, resolution=4, run=run)
    assert (found.size, [p["batch_size"] for p in found.probes]) == (size, probed)
    first_slow = next(n for n in probed if n >= slow_from)
    assert found.lower_bound and f"batch {first_slow} reached" in found.stopped and "(30.0 s)" in found.stopped
    assert found.probes[-1]["status"] == last


def test_a_budgeted_search_starts_where_the_measured_throughput_fits_half_the_budget() -> None:
    assert mb.start_within(512, 512, tokens_per_s=2048.0, seconds=30.0) == 32     # 64 x 512 tokens: 16 s > 15 s
    assert mb.start_within(512, 512, tokens_per_s=2048.0, seconds=None) == 512    # GPU: the paper's start
    assert mb.start_within(4, 8, tokens_per_s=1.0, seconds=1.0) == 1


def test_a_failed_probe_does_not_poison_the_next(tiny_model_dir: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Each probe runs in its own process under the memory budget: one that runs out of memory reports it,
    and the next (in a fresh process) runs as if nothing happened. A probe prints no loading chatter."""
    spec = ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir))
    probe = mb.probe_for(spec, device="cpu", precision="fp32", length=512, mode=None, memory_gb=0.25,
                         id_range=(5, 1000), pad_id=0)
    oom = mb.probe_once(probe, 4096)          # 4096 x 512 tokens do not fit in 256 MiB
    assert oom.status == "oom", oom.message
    ok = mb.probe_once(probe, 2)
    assert ok.status == "ok" and ok.message == ""
    assert ok.seconds is not None and np.isfinite(ok.seconds) and ok.seconds > 0 and ok.peak_bytes > 0
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "LOAD REPORT" not in err, err[-500:]


def test_a_probe_stopped_at_its_budget_is_slow(tiny_model_dir: Path) -> None:
    """A budget no forward can meet (1 ms for 256 x 512 tokens) stops the probe's process."""
    probe = mb.probe_for(ModelSpec.based_on("bert-base", name="tiny", path=str(tiny_model_dir)), device="cpu", precision="fp32",
                         length=512, mode=None, memory_gb=None, id_range=(5, 1000), pad_id=0, seconds=0.001)
    got = mb.probe_once(probe, 256)
    assert got.status == "slow" and "0.001 s budget" in got.message and got.seconds > 0


def _run(tmp_path: Path, tiny_model_dir: Path, extra: list[str] = ()) -> list[results.ResultRecord]:
    from harness.run import runner

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
    real = mb.probe_once

    def counted(probe, n):
        probes.append(n)
        return real(probe, n)

    monkeypatch.setattr(mb, "probe_once", counted)
    recs = {r.dataset: r for r in _run(tmp_path, tiny_model_dir)}
    assert set(recs) == {"short_fixed", "short_variable", "long_fixed", "long_variable"}
    fixed, var = recs["short_fixed"], recs["short_variable"]
    for r in (fixed, var):
        assert r.status == "ok" and r.main_score == "tokens_per_s" and r.higher_is_better
        assert r.metrics["tokens_per_s"] > 0 and len(r.details["pass_seconds"]) == 2
        assert r.details["real_tokens_per_pass"] == r.details["set_stats"]["total_tokens"]
        assert r.details["dtype"] == "fp32" and r.details["attn_implementation"] == "sdpa"
        assert r.details["attn_requested"] == "sdpa" and r.details["attention_kernel"] == "transformers sdpa"
        assert r.details["unpadded"] is False and "threads" in r.details["device_name"]
        # measured rates are recorded, finite and positive, never bounded: a busy machine may time the
        # roofline's matmul in a slower moment than the model (a fraction above 1 is a measurement, not a bug)
        assert np.isfinite(r.metrics["roofline_fraction"]) and r.metrics["roofline_fraction"] > 0
        assert r.details["matmul_flops_per_s"] > 0 and r.details["roofline"] == "256x256 fp32 matmul"
        assert r.metrics["max_batch_size"] == 8 and r.details["max_batch"]["lower_bound"] is False
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


def test_the_varlen_path_times_packed_batches_and_says_which_kernel(tmp_path: Path, tiny_model_dir: Path) -> None:
    """``harness_varlen`` (auto's choice on CUDA; here its CPU reference): packed rows, real tokens only, and the
    record says which attention and kernel ran; the max-batch probes load it in their own process too."""
    (rec,) = _run(tmp_path, tiny_model_dir, ["task.datasets=[short_variable]", "model.attn_implementation=harness_varlen",
                                             "task.max_batch.limit=4"])
    d = rec.details
    assert rec.status == "ok" and d["attn_implementation"] == d["attn_requested"] == "harness_varlen"
    assert d["attention_kernel"].startswith("reference") and d["unpadded"] is True and d["pack_mode"] == "varlen"
    assert d["dtype"] == "fp32" and d["attention_dtype"] == "float32"       # the reference runs in the inputs' dtype
    # the kernel is counted (4 layers x the passes' batches), fp32 matmuls as the notebooks ran them (TF32 off)
    assert set(d["attention_calls"]) == {d["attention_kernel"]} and d["attention_calls"][d["attention_kernel"]] % 4 == 0
    assert d["float32_matmul_precision"] == "highest" and d["runs"] == "fp32" and d["compiled"] is False
    assert rec.metrics["max_batch_size"] == 4 and rec.metrics["tokens_per_s"] > 0


def test_every_probe_and_pass_is_one_console_line(tmp_path: Path, tiny_model_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A forced small probe budget (1 ms: most probes stop there, some may finish) through the real task, with
    the console handler Hydra installs: output that is not a terminal gets one line per finished probe (its batch,
    outcome and bracket) and per pass, and the record says whether the figure is a lower bound."""
    probes: list[int] = []
    real = mb.probe_once

    def counted(probe, n):
        probes.append(n)
        return real(probe, n)

    monkeypatch.setattr(mb, "probe_once", counted)
    monkeypatch.setattr(mb, "start_within", lambda batch_size, *_: batch_size)   # start at 4, not where 1 ms fits
    root = logging.getLogger()
    screen = logging.StreamHandler()            # bound to the captured stderr: not a terminal
    saved = root.level
    root.addHandler(screen)
    root.setLevel(logging.INFO)
    try:
        (rec,) = _run(tmp_path, tiny_model_dir, ["task.datasets=[short_fixed]", "task.max_batch.probe_seconds=0.001"])
    finally:
        root.removeHandler(screen)
        root.setLevel(saved)
    lines = capsys.readouterr().err.splitlines()
    probe_lines = [line for line in lines if line.startswith("max batch at 64 tokens: probe batch ")]
    assert [int(line.split()[7].rstrip(":")) for line in probe_lines] == probes and probes
    assert all("bracket [" in line for line in probe_lines), probe_lines
    passes = [line for line in lines if line.startswith("efficiency/short_fixed: ") and " passes, " in line]
    assert [line.split()[1] for line in passes] == ["1/3", "2/3", "3/3"], lines      # 1 warm-up + 2 timed
    statuses = [p["status"] for p in rec.details["max_batch"]["probes"]]
    assert rec.details["max_batch"]["lower_bound"] == ("slow" in statuses)


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
