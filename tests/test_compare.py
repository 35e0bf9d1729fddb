"""Is a difference real (issue 33): the paired tests, per-query scores beside each record, ``harness.compare``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from harness.compare import stats
from tests.conftest import paths, write_beir_folder

# ------------------------------------------------------------------------------------------------ statistics


def test_randomization_p_is_exact_for_few_items_and_converges_to_it() -> None:
    a, b = [0.1, 0.5, 0.3, 0.9, 0.4, 0.2], [0.3, 0.6, 0.2, 1.0, 0.7, 0.5]
    d = np.subtract(b, a)
    flips = [np.array([(m >> i) & 1 for i in range(6)]) * -2 + 1 for m in range(64)]
    exact = np.mean([abs((s * d).mean()) >= abs(d.mean()) - 1e-12 for s in flips])
    assert stats.randomization_p(a, b) == pytest.approx(exact)        # 6 items: all 64 sign flips
    rng = np.random.default_rng(3)
    x = rng.random(40)
    y = x + rng.normal(0.03, 0.1, 40)
    p = stats.randomization_p(x, y, permutations=20_000, seed=1)
    assert stats.randomization_p(x, y, permutations=20_000, seed=1) == p          # the seed fixes it
    t = stats.t_test_p(x, y)
    assert abs(p - t) < 0.05                                           # the two tests roughly agree on 40 items


def test_holm_matches_the_step_down_by_hand() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.02, 0.03, 0.06, 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_the_bootstrap_interval_covers_the_true_difference_at_its_stated_rate() -> None:
    """A simulated case whose true difference is known (0.02): a 90% interval covers it in about 90% of 300 draws."""
    rng = np.random.default_rng(0)
    covered = 0
    for trial in range(300):
        a = rng.random(150)
        b = a + 0.02 + rng.normal(0, 0.1, 150)
        low, high = stats.bootstrap_ci(a, b, resamples=1000, seed=trial, level=0.90)
        covered += low <= 0.02 <= high
    assert 0.84 <= covered / 300 <= 0.95          # binomial sd at 0.9 over 300 draws: 0.017


def test_the_macro_average_weights_datasets_equally() -> None:
    a = [0.0] * 10 + [0.0]
    b = [0.1] * 10 + [0.9]            # dataset 0: +0.1 over 10 queries; dataset 1: +0.9 over 1 query
    r = stats.paired(a, b, permutations=200, strata=[0] * 10 + [1])
    assert r.diff == pytest.approx(0.5)                     # (0.1 + 0.9) / 2, not the query mean 0.173
    assert np.isnan(r.p_t)


def test_unequal_or_non_finite_vectors_are_refused() -> None:
    with pytest.raises(ValueError, match="equal-length"):
        stats.paired([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="finite"):
        stats.paired([0.1, float("nan")], [0.1, 0.2])


# ------------------------------------------------------------------------------------------------ the command
def minilm(tmp: Path, *extra: str) -> list[str]:
    return ["task=beir", "model=all-minilm-l6-v2", "precision=fp32", "device=cpu", f"task.data_dir={tmp}/data",
            "task.datasets=[toy]", "+task.catalog.toy={split: test}", "task.train=false", *paths(tmp), *extra]


def run_harness(args: list[str]) -> None:
    """``python -m harness <args>`` in this process (its logging set-up undone after)."""
    import logging
    import sys
    from unittest import mock

    from harness import cli

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    with mock.patch.object(sys, "argv", ["harness", *args]):
        try:
            cli.main()
        finally:
            root.handlers[:] = handlers
            root.setLevel(level)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    """The packaged all-MiniLM-L6-v2 and its first two layers on the toy set, the ranking saved as TREC too."""
    tmp = tmp_path_factory.mktemp("compare")
    write_beir_folder(tmp / "data", docs_per_topic=8)
    for extra in ([], ["model.keep_layers=[0,1]"]):
        run_harness(minilm(tmp, "save_run=true", *extra))
    return tmp


def compare(*args: str, capfd) -> tuple[int, str, str]:
    from harness.compare.__main__ import main

    capfd.readouterr()
    code = main(list(args))
    out, err = capfd.readouterr()
    return code, out, err


def record(tmp: Path, model: str) -> Path:
    (path,) = (tmp / "results" / "beir" / model).rglob("toy.json")
    return path


def test_a_retrieval_record_keeps_its_per_query_scores_and_ranking_beside_it(two_runs: Path) -> None:
    path = record(two_runs, "all-minilm-l6-v2")
    data = json.loads(path.read_text())
    claim = data["details"]["per_query"]
    assert claim["n"] == 5 and "ndcg_at_10" in claim["metrics"] and set(claim["data"]) >= {"queries", "qrels"}
    from harness.core import per_query

    pq = per_query.read(path, claim)
    assert pq.scores["ndcg_at_10"].mean() == pytest.approx(data["metrics"]["ndcg_at_10"], abs=1e-12)
    lines = gzip.decompress((path.parent / "toy.run.trec.gz").read_bytes()).decode().splitlines()
    assert lines[0].split()[1] == "Q0" and lines[0].split()[3] == "1" and len({ln.split()[0] for ln in lines}) == 5


def test_compare_prints_scores_difference_p_value_and_interval(two_runs: Path, capfd) -> None:
    code, out, err = compare("all-minilm-l6-v2", "all-minilm-l6-v2[0,1]", "--results", str(two_runs / "results"),
                             "--permutations", "500", "--seed", "7", capfd=capfd)
    assert code == 0, err
    assert "500 permutations, seed 7" in out and "holm" in out
    (row,) = [ln for ln in out.splitlines() if ln.startswith("toy ")]
    n, a, b, diff = row.split()[1:5]
    assert n == "5" and float(diff) == pytest.approx(float(b) - float(a), abs=2e-4)
    a_rec = json.loads(record(two_runs, "all-minilm-l6-v2").read_text())
    assert float(a) == pytest.approx(a_rec["metrics"]["ndcg_at_10"], abs=1e-4)


def test_compare_refuses_a_sidecar_that_is_not_the_one_its_record_claims(two_runs: Path, tmp_path: Path, capfd) -> None:
    import shutil

    copy = tmp_path / "results"
    shutil.copytree(two_runs / "results", copy)
    side = record(tmp_path, "all-minilm-l6-v2").parent / "toy.perquery.npz"
    other = record(tmp_path, "all-minilm-l6-v2_0_1_").parent / "toy.perquery.npz"
    shutil.copy(other, side)                                    # another model's scores under this record
    code, out, err = compare("all-minilm-l6-v2", "all-minilm-l6-v2[0,1]", "--results", str(copy), capfd=capfd)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("error: beir/toy: ") and "not the file its record claims" in line


def test_compare_refuses_records_scored_on_other_queries(two_runs: Path, tmp_path: Path, capfd) -> None:
    write_beir_folder(tmp_path / "data", docs_per_topic=8)
    q = tmp_path / "data" / "toy" / "queries.jsonl"
    q.write_text(q.read_text().replace("astronomy", "astronomy please"))
    run_harness(minilm(tmp_path))
    code, _, err = compare(str(record(two_runs, "all-minilm-l6-v2")), str(record(tmp_path, "all-minilm-l6-v2")),
                             capfd=capfd)
    assert code == 2
    assert "scored on different data (" in err and "queries" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------------ against ranx
@pytest.mark.slow
def test_ranx_gives_the_same_p_values_from_the_exported_trec_runs(tmp_path: Path, minilm_scifact) -> None:
    """SciFact (the first 100 judged test queries; their judged docs topped up to 250) with all-MiniLM-L6-v2 against the same model
    with its inputs cut to 64 tokens: ranx (an independent implementation) reads the two TREC run files the harness
    wrote and the qrels, scores nDCG@10 per query itself and tests. Its t-test p equals ours; its randomization p
    (its own permutations) is within Monte-Carlo error of ours."""
    pytest.importorskip("ranx")
    import csv

    from ranx import Qrels, Run, evaluate
    from ranx.statistical_tests import fisher_randomization_test, paired_student_t_test

    from harness.core import per_query
    from tests.conftest import SHARED_DATA

    res = minilm_scifact.results("all-minilm-l6-v2", "minilm-64")      # run once per session (tests/conftest.py)
    recs = [record_of(res.parent, m) for m in ("all-minilm-l6-v2", "minilm-64")]
    ours = [per_query.read(r, json.loads(r.read_text())["details"]["per_query"]) for r in recs]
    x, y, ids = per_query.aligned(ours[0], ours[1], "ndcg_at_10")
    qrels: dict[str, dict[str, int]] = {}
    with open(SHARED_DATA / "scifact" / "qrels" / "test.tsv") as fh:
        for row in list(csv.reader(fh, delimiter="\t"))[1:]:
            if row[0] in ids:   # the queries the runs evaluated
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    theirs = []
    for rec in recs:
        trec = tmp_path / f"{rec.parent.parent.name}.trec"
        trec.write_bytes(gzip.decompress((rec.parent / "scifact.run.trec.gz").read_bytes()))
        theirs.append(evaluate(Qrels(qrels), Run.from_file(str(trec), kind="trec"), "ndcg@10", return_mean=False))
    assert len(x) == len(theirs[0]) == 100
    assert sorted(x) == pytest.approx(sorted(theirs[0]), abs=1e-12) and sorted(y) == pytest.approx(sorted(theirs[1]),
                                                                                                   abs=1e-12)
    assert stats.t_test_p(x, y) == pytest.approx(paired_student_t_test(theirs[0], theirs[1])[0], rel=1e-9)
    n = 10_000
    p_ours = stats.randomization_p(x, y, permutations=n, seed=0)
    p_ranx = fisher_randomization_test(theirs[0], theirs[1], n, 0.05, 42)[0]
    assert abs(p_ours - p_ranx) <= 4 * max(np.sqrt(p_ranx * (1 - p_ranx) / n), 1 / n) + 2 / n, (p_ours, p_ranx)


def record_of(tmp: Path, model: str) -> Path:
    (path,) = (tmp / "results" / "beir" / model).rglob("scifact.json")
    return path


# ------------------------------------------------------------------------------------------------ GLUE
def test_glue_records_keep_each_dev_prediction_and_compare_rescores_the_task(tmp_path: Path, capfd) -> None:
    """Two MNLI runs (tiny model, toy data): each record keeps its 15 dev predictions; compare re-scores the task
    score (the mean of matched and mismatched accuracy) from them, equal to the records' own."""
    from tests.test_glue_runs import tiny_overrides, write_tiny_glue

    glue = write_tiny_glue(tmp_path / "glue")
    run_harness([*tiny_overrides(glue, tmp_path), "task.tasks=[mnli]", "task.grid.learning_rates=[1e-4,3e-3]",
                 "task.grid.weight_decays=[0.01]", "task.epochs=1", "task.seed=1", "task.eval_interval.mnli=2"])
    recs = sorted((tmp_path / "results" / "glue").rglob("mnli.json"))
    assert len(recs) == 2
    data = [json.loads(r.read_text()) for r in recs]
    assert data[0]["details"]["per_query"]["unit"] == "example" and data[0]["details"]["per_query"]["n"] == 15
    code, out, err = compare(str(recs[0]), str(recs[1]), "--permutations", "300", capfd=capfd)
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("mnli ")]
    n, a, b = line.split()[1:4]
    assert n == "15"
    assert float(a) == pytest.approx(data[0]["metrics"]["accuracy_mean"], abs=1e-4)
    assert float(b) == pytest.approx(data[1]["metrics"]["accuracy_mean"], abs=1e-4)


def test_a_score_that_is_not_a_mean_is_rescored_for_every_permutation() -> None:
    from harness.tasks.glue.metrics import compute

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 200)
    a = np.where(rng.random(200) < 0.7, labels, 1 - labels)
    b = np.where(rng.random(200) < 0.8, labels, 1 - labels)
    r = stats.paired_statistic(a, b, lambda idx, p: compute("matthews", p, labels[idx])["score"], 400, 0)
    assert r.mean_a == pytest.approx(compute("matthews", a, labels)["matthews"])
    assert r.diff == pytest.approx(r.mean_b - r.mean_a) and r.ci_low < r.diff < r.ci_high
    same = stats.paired_statistic(a, a.copy(), lambda idx, p: compute("matthews", p, labels[idx])["score"], 100, 0)
    assert same.diff == 0 and same.p_randomization == 1.0


# ------------------------------------------------------------------------------------------------ the page
def built_site(two_runs: Path, out: Path, *extra: str) -> dict:
    from harness.leaderboard.__main__ import main

    assert main([str(two_runs / "results"), "--out", str(out), "--no-published", *extra]) == 0
    text = (out / "data.js").read_text()
    return json.loads(text[text.index("=") + 1:].strip().rstrip(";"))


def test_the_leaderboard_tests_every_pair_of_run_rows_per_cell(two_runs: Path, tmp_path: Path, capfd) -> None:
    data = built_site(two_runs, tmp_path / "site", "--baseline", "all-minilm-l6-v2", "--permutations", "500")
    assert data["sig"]["settings"] == {"permutations": 500, "seed": 0, "level": 0.95, "alpha": 0.05,
                                       "correction": "holm", "baseline": "all-minilm-l6-v2"}
    ((key, t),) = data["sig"]["pairs"]["beir"]["toy"].items()
    a, b = key.split("\t")
    cells = next(x for x in data["tables"] if x["id"] == "beir")["cells"]
    assert t["d"] == pytest.approx(cells[b]["toy"]["v"] - cells[a]["toy"]["v"], abs=1e-3)   # x100, as shown
    assert t["lo"] <= t["d"] <= t["hi"] and 0 < t["p"] <= 1
    _, out, _ = compare(str(record(two_runs, "all-minilm-l6-v2")), str(record(two_runs, "all-minilm-l6-v2_0_1_")),
                        "--permutations", "500", capfd=capfd)
    (row,) = [ln for ln in out.splitlines() if ln.startswith("toy ")]
    assert float(row.split()[-2 if row.endswith("*") else -1]) == pytest.approx(t["p"], abs=1e-4)   # same test
    assert "significance" not in json.dumps(built_site(two_runs, tmp_path / "plain")["sig"] or {})


def test_a_baseline_that_is_not_a_run_row_is_refused(two_runs: Path, tmp_path: Path, capfd) -> None:
    from harness.leaderboard.__main__ import main

    capfd.readouterr()
    assert main([str(two_runs / "results"), "--out", str(tmp_path / "s"), "--baseline", "ModernBERT-base"]) == 2
    (line,) = capfd.readouterr().err.strip().splitlines()
    assert line.startswith("error: --baseline ModernBERT-base: it is a published row") and "all-minilm-l6-v2" in line


@pytest.mark.browser
def test_the_page_marks_cells_against_the_chosen_baseline(two_runs: Path, tmp_path: Path,
                                                         driver) -> None:  # noqa: F811 (the imported fixture)
    import shutil

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    shutil.copytree(two_runs / "results", tmp_path / "results")
    for path in (tmp_path / "results").rglob("toy.json"):        # shown in a column of the page's BEIR table
        data = json.loads(path.read_text())
        path.with_name("scifact.json").write_text(json.dumps({**data, "dataset": "scifact"}))
        path.unlink()
    built_site(tmp_path, tmp_path / "site", "--significance", "--permutations", "500")
    driver.get((tmp_path / "site" / "index.html").resolve().as_uri())
    assert not driver.find_elements(By.CSS_SELECTOR, "span.sig")             # no baseline chosen yet
    Select(driver.find_element(By.ID, "baseline")).select_by_visible_text("all-minilm-l6-v2")
    (mark,) = driver.find_elements(By.CSS_SELECTOR, '#t-beir td[data-col="scifact"] span.sig')
    cell = mark.find_element(By.XPATH, "..")
    assert mark.text in ("▲", "▼", "=") and cell.get_attribute("title").startswith("vs all-minilm-l6-v2: ")
    assert "Published rows carry no mark" in driver.find_element(By.ID, "baseline-note").text


from tests.test_leaderboard_browser import driver  # noqa: E402,F401  (the headless Chromium fixture)
