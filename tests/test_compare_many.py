"""Which models are really different (issue 41): every pair per cell and table average, corrected together, tie
groups, rank intervals, GLUE's seeds in the test; checked against statsmodels, ranx and simulations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.compare import many, stats, twolevel
from harness.compare.outcomes import Outcomes
from harness.core import per_query
from harness.core.results import ResultRecord, path_of, write_record

GLUE_CONFIG = {"task": {"scoring_protocol": "authors", "seeds": [1618, 42, 6033]}}


def write(res: Path, task: str, model: str, dataset: str, run: str, values: np.ndarray, *, seed: int | None = None,
          config_id: str | None = None, labels: np.ndarray | None = None, kind: str = "accuracy") -> Path:
    """A record with its kept scores: per-query nDCG@10 (BEIR) or per-example predictions (GLUE accuracy)."""
    ids = [f"q{i}" for i in range(len(values))] if labels is None else [f"validation:{i}" for i in range(len(values))]
    glue = labels is not None
    rec = ResultRecord(task=task, dataset=dataset, split="validation" if glue else "test",
                       model={"name": model, "family": model, "size": "small"},
                       metrics={kind if glue else "ndcg_at_10": float(
                           glue_score(kind, values, labels) if glue else np.mean(values))},
                       main_score=kind if glue else "ndcg_at_10", run_id=run, config_id=config_id,
                       hyperparameters={"lr": 1e-4, **({"seed": seed} if seed is not None else {})},
                       config=GLUE_CONFIG if glue else {}, created_at="2026-01-01T00:00:00+00:00")
    path = path_of(res, rec)
    scores = {"prediction": values.astype(float), "label": labels.astype(float)} if glue else {"ndcg_at_10": values}
    data = {"examples": "x", "glue_metric": kind} if glue else {"queries": "q", "qrels": "r"}
    rec.details["per_query"] = per_query.write(path, per_query.PerQuery(ids, scores, data,
                                                                          "example" if glue else "query"))
    write_record(res, rec)
    return path


def glue_score(kind: str, preds: np.ndarray, labels: np.ndarray) -> float:
    from harness.tasks.glue.metrics import compute

    return float(compute(kind, preds, labels)["score"])


def compare(*args: str, capfd) -> tuple[int, str, str]:
    from harness.compare.__main__ import main

    capfd.readouterr()
    code = main(list(args))
    out, err = capfd.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------------------ pieces
def test_benjamini_hochberg_and_holm_equal_statsmodels_multipletests() -> None:
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    rng = np.random.default_rng(4)
    for p in (rng.random(30) ** 3, np.array([0.01, 0.04, 0.03, 0.005, 0.04, 1.0]), rng.random(7)):
        assert stats.benjamini_hochberg(p) == pytest.approx(multipletests(p, method="fdr_bh")[1], abs=1e-12)
        assert stats.holm(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-12)
        assert stats.bonferroni(p) == pytest.approx(multipletests(p, method="bonferroni")[1], abs=1e-12)


def test_compact_letters_share_a_letter_exactly_where_no_test_separates() -> None:
    ranked = ["A", "B", "C", "D"]
    assert many.letters(ranked, set()) == {x: "a" for x in ranked}
    assert many.letters(ranked, {frozenset("AD")}) == {"A": "a", "B": "ab", "C": "ab", "D": "b"}
    different = {frozenset(p) for p in ("AC", "AD", "BD")}
    groups = many.letters(ranked, different)
    assert groups == {"A": "a", "B": "ab", "C": "bc", "D": "c"}
    for i, x in enumerate(ranked):
        for y in ranked[i + 1:]:
            share = bool(set(groups[x]) & set(groups[y]))
            assert share == (frozenset((x, y)) not in different)


def test_rank_intervals_from_replicates() -> None:
    rng = np.random.default_rng(0)
    drawn = {"far": 10 + rng.normal(0, 0.1, 500), "near1": 5 + rng.normal(0, 1, 500), "near2": 5 + rng.normal(0, 1, 500)}
    ranks = twolevel.rank_intervals(drawn, True, 0.95)
    assert ranks["far"] == (1, 1) and ranks["near1"] == (2, 3) and ranks["near2"] == (2, 3)
    assert twolevel.rank_intervals(drawn, False, 0.95)["far"] == (3, 3)


# ------------------------------------------------------------------------------------------------ the command
@pytest.fixture(scope="module")
def beir_three(tmp_path_factory) -> Path:
    """Three models on two BEIR sets (200 queries each): 'strong' clearly above two models that are the same."""
    res = tmp_path_factory.mktemp("many") / "results"
    rng = np.random.default_rng(1)
    for dataset in ("scifact", "nfcorpus"):
        base = rng.random(200)
        for model, shift in (("strong", 0.15), ("same-1", 0.0), ("same-2", 0.0)):
            values = np.clip(base + shift + rng.normal(0, 0.05, 200), 0, 1)
            write(res, "beir", model, dataset, f"run-{model}", values)
    return res


def test_three_models_every_pair_per_cell_and_average_corrected_together(beir_three: Path, capfd) -> None:
    code, out, err = compare("strong", "same-1", "same-2", "--results", str(beir_three), "--permutations", "400",
                             capfd=capfd)
    assert code == 0, err
    assert "family: 9 tests (3 row(s) x their model pairs) corrected together by holm" in out
    blocks = out.split("\n\n")
    cell = next(b for b in blocks if b.startswith("beir / scifact"))
    rows = {ln.split()[1]: ln.split() for ln in cell.splitlines()[2:5]}
    assert rows["strong"][0] == "1" and rows["strong"][4] == "a"                    # rank 1, group a alone
    assert rows["same-1"][4] == rows["same-2"][4] == "b"                             # tied: one group
    assert rows["strong"][5:] == ["[1,", "1]"]
    avg = next(b for b in blocks if "average over 2 cells" in b)
    assert "(randomization)" in avg
    pairs = [ln for ln in out.splitlines() if " p holm " in ln]
    assert len(pairs) == 9
    p = [float(ln.split("  p ")[1].split()[0]) for ln in pairs]
    q = [float(ln.split(" p holm ")[1].split()[0]) for ln in pairs]
    assert q == pytest.approx(stats.holm(p), abs=2e-4)       # one family: all nine tests (as printed)


def test_the_cell_test_of_single_runs_is_the_two_run_compare(beir_three: Path, capfd) -> None:
    _, many_out, _ = compare("strong", "same-1", "same-2", "--results", str(beir_three), "--permutations", "400",
                             capfd=capfd)
    _, two_out, _ = compare("same-1", "same-2", "--results", str(beir_three), "--permutations", "400", capfd=capfd)
    (two,) = [ln for ln in two_out.splitlines() if ln.startswith("scifact ")]
    cell = next(b for b in many_out.split("\n\n") if b.startswith("beir / scifact"))
    (pair,) = [ln for ln in cell.splitlines() if "same-" in ln and " - same-" in ln]
    assert float(pair.split("  p ")[1].split()[0]) == pytest.approx(float(two.split()[-2]), abs=1e-4)


def test_bh_is_chosen_by_flag_and_its_family_is_stated(beir_three: Path, capfd) -> None:
    code, out, _ = compare("strong", "same-1", "same-2", "--results", str(beir_three), "--permutations", "300",
                           "--correction", "bh", capfd=capfd)
    assert code == 0 and "false discovery rate (Benjamini-Hochberg) at 0.05" in out and " p bh " in out


def test_all_models_of_a_task_and_bad_input(beir_three: Path, capfd) -> None:
    code, out, _ = compare("--all", "--task", "beir", "--results", str(beir_three), "--permutations", "200",
                           capfd=capfd)
    assert code == 0 and all(f"  {m}: what harness.select picks" in out
                             for m in ("strong", "same-1", "same-2"))
    for args, says in ((["--all"], "--all needs --task"), (["strong"], "1 run(s) given"),
                       (["strong", "strong", "same-1"], "given more than once"),
                       (["strong", "same-1", "nobody"], "no ok record for model nobody")):
        code, out, err = compare(*args, "--results", str(beir_three), capfd=capfd)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and says in err, (args, err)


# ------------------------------------------------------------------------------------------------ GLUE seeds
@pytest.fixture(scope="module")
def glue_seeds(tmp_path_factory) -> Path:
    """RTE (277 dev examples), three models x three seeds under the authors protocol; 'partial' finished 2 of 3."""
    res = tmp_path_factory.mktemp("glue") / "results"
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 277)
    for model, acc, seeds in (("good", 0.80, 3), ("fair", 0.62, 3), ("fair-too", 0.61, 3), ("partial", 0.9, 2)):
        for seed in [1618, 42, 6033][:seeds]:
            right = rng.random(277) < acc + rng.normal(0, 0.01)
            write(res, "glue", model, "rte", f"lr=1e-4-{seed}", np.where(right, labels, 1 - labels), seed=seed,
                  config_id=f"cfg-{model}", labels=labels)
    return res


def test_glue_cells_average_their_seeds_and_an_incomplete_one_is_not_tested(glue_seeds: Path, capfd) -> None:
    code, out, err = compare("good", "fair", "fair-too", "partial", "--results", str(glue_seeds),
                             "--permutations", "500", capfd=capfd)
    assert code == 0, err
    cell = next(b for b in out.split("\n\n") if b.startswith("glue / rte"))
    rows = {ln.split()[1]: ln.split() for ln in cell.splitlines()[2:5]}
    assert set(rows) == {"good", "fair", "fair-too"} and all(r[3] == "3" for r in rows.values())   # 3 runs each
    recs = [json.loads(p.read_text()) for p in (glue_seeds / "glue" / "good").rglob("rte.json")]
    assert float(rows["good"][2]) == pytest.approx(np.mean([r["metrics"]["accuracy"] for r in recs]), abs=0.01)
    assert rows["good"][4] == "a" and rows["fair"][4] == rows["fair-too"][4] == "b"
    assert "(two-level df " in cell
    assert "glue/rte: partial: incomplete, not tested: not selected: no configuration finished every seed" in out
    code, out, _ = compare("good", "fair", "--results", str(glue_seeds), "--permutations", "300", capfd=capfd)
    assert code == 0 and "two-level" in out          # two model names with seeds: the seed-aware test


def test_models_whose_every_cell_is_incomplete_are_one_error_line(tmp_path: Path, capfd) -> None:
    """Three models with one of three seeds each: nothing can be tested; one line naming why, no traceback."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 2, 40)
    for model in ("half-a", "half-b", "half-c"):
        write(tmp_path, "glue", model, "rte", "lr=1e-4-1618", labels.copy(), seed=1618, config_id=f"cfg-{model}",
              labels=labels)
    code, out, err = compare("half-a", "half-b", "half-c", "--results", str(tmp_path), capfd=capfd)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: nothing to test: no model has a cell its selection kept (half-a, glue/rte: "
                          "not selected: no configuration finished every seed"), err


def test_a_score_that_is_not_a_mean_is_rescored_per_run_on_every_resample(tmp_path: Path, capfd) -> None:
    """CoLA's Matthews correlation, two models x three seeds: each cell's score is the mean of its runs' own
    scores, and the test re-scores every run on every resample."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 300)
    scores: dict[str, list[float]] = {}
    for model, acc in (("better", 0.85), ("worse", 0.7)):
        for seed in (1618, 42, 6033):
            preds = np.where(rng.random(300) < acc, labels, 1 - labels)
            write(tmp_path, "glue", model, "cola", f"lr=1e-4-{seed}", preds, seed=seed, config_id=f"c-{model}",
                  labels=labels, kind="matthews")
            scores.setdefault(model, []).append(glue_score("matthews", preds, labels))
    code, out, err = compare("better", "worse", "--results", str(tmp_path), "--permutations", "200", capfd=capfd)
    assert code == 0, err
    (row,) = [ln.split() for ln in out.splitlines() if ln.startswith("cola ")]   # two models: the A/B table
    n, a, b = row[1:4]
    assert n == "300" and float(a) == pytest.approx(np.mean(scores["better"]), abs=0.01)
    assert float(b) == pytest.approx(np.mean(scores["worse"]), abs=0.01)
    assert "metric matthews" in out and "(two-level df" in out and row[-4] == "*"   # B is worse, significantly


# ------------------------------------------------------------------------------------------------ simulations
def outcomes_of(values: np.ndarray) -> Outcomes:
    """Per-query scores of k runs (k x n) as one model's cell."""
    n = values.shape[1]
    ids = [f"q{i}" for i in range(n)]
    runs = tuple(per_query.PerQuery(ids, {"m": v}, {}) for v in values)
    return Outcomes(tuple(ids), values, np.zeros(n, dtype=int), np.full(n, 1.0 / n), None, runs, "m")


def simulated_cell(rng: np.random.Generator, means: list[float], k: int, n: int, seed_sd: float) -> dict:
    """Models whose true scores are ``means``: a query difficulty all share, each model's own query effect, each
    run's seed effect and run x query noise."""
    difficulty = rng.normal(0, 1.0, n)
    return {f"m{i}": outcomes_of(difficulty + mu + rng.normal(0, 0.4, n) + rng.normal(0, seed_sd, (k, 1))
                                 + rng.normal(0, 0.3, (k, n))) for i, mu in enumerate(means)}


def simulated_rows(means: list[float], k: int, trials: int, seed_sd: float = 0.0) -> list[many.Row]:
    """One tested cell per trial, models ``m0``, ``m1``, ... of true scores ``means``."""
    rng = np.random.default_rng(11)
    return [many.cell_row("t", "c", simulated_cell(rng, means, k, 80, seed_sd),
                          many.Settings(permutations=300, seed=trial), True, 0)[0] for trial in range(trials)]


def rejections(rows: list[many.Row], means: list[float], correction: str) -> tuple[list[int], list[int]]:
    """Per trial: false rejections (pairs whose true means are equal) and all rejections, at 0.05."""
    false, every = [], []
    for row in rows:
        many.correct([row], correction)
        hits = [p for p in row.pairs if p.p_adjusted < 0.05]
        false.append(sum(means[int(p.a[1:])] == means[int(p.b[1:])] for p in hits))
        every.append(len(hits))
    return false, every


def test_holm_holds_the_family_wise_error_where_uncorrected_tests_do_not() -> None:
    """Five models with the same true score (10 true nulls), single runs: the chance of any false rejection."""
    trials, means = 200, [0.0] * 5
    rows = simulated_rows(means, 1, trials)
    holm = np.mean([f > 0 for f in rejections(rows, means, "holm")[0]])
    none = np.mean([f > 0 for f in rejections(rows, means, "none")[0]])
    assert holm <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / trials)        # 0.081: two binomial sd above the level
    assert none > 0.15                                               # ten uncorrected looks: about 0.2-0.3


def test_holm_holds_the_family_wise_error_with_seeds_tested_two_level() -> None:
    """Four models of equal true score, three seeds each with a seed effect: the two-level test under Holm."""
    trials, means = 600, [0.0] * 4
    fwer = np.mean([f > 0 for f in rejections(simulated_rows(means, 3, trials, seed_sd=0.15), means, "holm")[0]])
    assert fwer <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / trials)


def test_benjamini_hochberg_holds_the_false_discovery_rate() -> None:
    """Three models equal, three others 0.25 above them: the mean share of false discoveries among discoveries."""
    means = [0.0, 0.0, 0.0, 0.25, 0.25, 0.25]
    false, every = rejections(simulated_rows(means, 1, 120), means, "bh")
    fdr = np.mean([f / max(e, 1) for f, e in zip(false, every, strict=True)])
    assert fdr <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 120) and np.mean(every) > 4     # held, and it finds differences


def test_the_two_level_interval_covers_the_true_difference_at_its_nominal_rate() -> None:
    """Three seeds a side with a seed effect as large as the items' chance: a 90% interval of B - A covers the
    true difference (0.1) in about 90% of 300 simulated draws."""
    rng = np.random.default_rng(5)
    covered = 0
    for trial in range(300):
        cells = simulated_cell(rng, [0.0, 0.1], 3, 100, seed_sd=0.06)
        reps = twolevel.replicates(cells, 400, (trial,))
        t = twolevel.two_level([reps["m0"]], [reps["m1"]], 100, 0.90)
        covered += t.low <= 0.1 <= t.high
    assert 0.86 <= covered / 300 <= 0.96            # binomial sd at 0.9 over 300 draws: 0.017; 92% measured


# ------------------------------------------------------------------------------------------------ against ranx
@pytest.mark.slow
def test_ranx_multi_run_compare_gives_the_same_p_values_on_three_scifact_runs(tmp_path: Path, minilm_scifact) -> None:
    """all-MiniLM-L6-v2 at its full length, at 128 and at 64 tokens on SciFact (the first 100 judged test queries;
    their judged docs topped up to 250): ranx's multi-run ``compare`` reads the three TREC run files the harness
    wrote and the qrels, and tests every pair itself. Its paired t-test p equals ours for every pair, its Fisher
    randomization p (its own permutations) is within Monte-Carlo error of ours, and the corrections of our p-values
    equal statsmodels' ``multipletests``."""
    pytest.importorskip("ranx")
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    import csv
    import gzip

    from ranx import Qrels, Run
    from ranx import compare as ranx_compare

    from harness.compare.entrants import Records, entrants
    from harness.compare.report import compare_entrants
    from tests.conftest import SHARED_DATA

    models = ["all-minilm-l6-v2", "minilm-128", "minilm-64"]
    res = minilm_scifact.results(*models)                               # run once per session (tests/conftest.py)
    n = 10_000
    found = entrants(models, Records(res), "beir", False)
    cmp = compare_entrants(found, many.Settings(permutations=n), None)
    (row,) = cmp.rows
    ours = {frozenset((p.a, p.b)): p for p in row.pairs}

    qrels: dict[str, dict[str, int]] = {}
    ids = set(per_query.read(*_claimed(found[0])).ids)
    with open(SHARED_DATA / "scifact" / "qrels" / "test.tsv") as fh:
        for r in list(csv.reader(fh, delimiter="\t"))[1:]:
            if r[0] in ids:
                qrels.setdefault(r[0], {})[r[1]] = int(r[2])
    runs = []
    for e in found:
        ((path, _),) = e.cells[("beir", "scifact")]
        trec = tmp_path / f"{e.label}.trec"
        trec.write_bytes(gzip.decompress((path.parent / "scifact.run.trec.gz").read_bytes()))
        run = Run.from_file(str(trec), kind="trec")
        run.name = e.label
        runs.append(run)
    student = ranx_compare(Qrels(qrels), runs, ["ndcg@10"], stat_test="student").comparisons
    fisher = ranx_compare(Qrels(qrels), runs, ["ndcg@10"], stat_test="fisher", n_permutations=n).comparisons
    assert row.n == 100 and len(ours) == 3
    for a, b in [(x.name, y.name) for i, x in enumerate(runs) for y in runs[i + 1:]]:
        p = ours[frozenset((a, b))]
        assert p.p_t == pytest.approx(student[(a, b)]["ndcg@10"]["p_value"], rel=1e-9)
        p_ranx = fisher[(a, b)]["ndcg@10"]["p_value"]
        assert abs(p.p - p_ranx) <= 4 * max(np.sqrt(p_ranx * (1 - p_ranx) / n), 1 / n) + 2 / n, (a, b, p.p, p_ranx)
    pvalues = [p.p for p in row.pairs]
    assert [p.p_adjusted for p in row.pairs] == pytest.approx(multipletests(pvalues, method="holm")[1], abs=1e-12)
    assert stats.benjamini_hochberg(pvalues) == pytest.approx(multipletests(pvalues, method="fdr_bh")[1], abs=1e-12)


def _claimed(e) -> tuple[Path, dict]:
    ((path, rec),) = e.cells[("beir", "scifact")]
    return path, rec.details["per_query"]


# ------------------------------------------------------------------------------------------------ what a side is
def test_a_folder_of_two_models_records_is_refused_as_one_side(tmp_path: Path, capfd) -> None:
    """A folder holding model A's SciFact and model B's NFCorpus is not one run: one line, exit 2."""
    rng = np.random.default_rng(8)
    mixed = tmp_path / "mixed"
    write(mixed, "beir", "model-a", "scifact", "r1", rng.random(30))
    write(mixed, "beir", "model-b", "nfcorpus", "r2", rng.random(30))
    other = write(tmp_path / "res", "beir", "model-c", "scifact", "r3", rng.random(30))
    code, out, err = compare(str(mixed), str(other.parent), capfd=capfd)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "holds records of 2 models (model-a, model-b)" in err and "pass each run's own folder" in err


def test_models_that_share_no_dataset_are_refused_in_every_form(tmp_path: Path, capfd) -> None:
    """--all where no two models share a dataset exits 2, as the two-run form does."""
    rng = np.random.default_rng(9)
    write(tmp_path, "beir", "model-a", "scifact", "r1", rng.random(30))
    write(tmp_path, "beir", "model-b", "nfcorpus", "r2", rng.random(30))
    for args in (["--all", "--task", "beir"], ["model-a", "model-b"]):
        code, out, err = compare(*args, "--results", str(tmp_path), capfd=capfd)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (args, err)
        assert "share no dataset (model-a: scifact; model-b: nfcorpus)" in err, err


def test_runs_of_one_model_are_labelled_by_their_run_ids_or_by_labels(tmp_path: Path, capfd) -> None:
    """Three run folders of one model: rows named by the run id (what tells them apart), not the whole path."""
    rng = np.random.default_rng(10)
    base = rng.random(40)
    folders = [str(write(tmp_path, "beir", "enc", "scifact", f"run-{i}", np.clip(base + i * 0.1, 0, 1)).parent)
               for i in range(3)]
    code, out, err = compare(*folders, "--permutations", "200", capfd=capfd)
    assert code == 0, err
    assert all(f"  run-{i}: this run" in out for i in range(3)) and str(tmp_path) not in out
    code, out, err = compare(*folders, "--permutations", "200", "--labels", "lr1,lr2,lr3", capfd=capfd)
    assert code == 0 and "  lr3: this run" in out, err
    code, out, err = compare(*folders, "--labels", "x,y", capfd=capfd)
    assert code == 2 and "--labels x,y: give 3 distinct labels" in err
