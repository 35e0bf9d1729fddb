"""The series view in a real browser: a four-checkpoint series run through python -m harness.series, the site built
from its records, series.html opened from file:// in headless Chromium (the plot, its reference lines, the best
step, the band), and the main page's link to it with only the latest step in the tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.leaderboard import build
from tests.test_leaderboard_browser import ARTIFACTS, driver  # noqa: F401  (the Chromium fixture)
from tests.test_series import STEPS, make_run, series_args

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    from harness.series.__main__ import main

    tmp = tmp_path_factory.mktemp("series")
    make_run(tmp)
    assert main(series_args(tmp)) == 0
    out = tmp / "site"
    build([tmp / "results"], out)
    return out


def test_series_page_plots_every_step_with_reference_lines(driver, site: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    from harness.leaderboard import build_leaderboard

    d = driver
    d.get((site / "series.html").resolve().as_uri())
    (plot,) = d.find_elements(By.CSS_SELECTOR, "svg.series-plot")
    assert plot.is_displayed() and plot.size["width"] > 300 and plot.size["height"] > 200
    assert plot.get_attribute("data-series") == "run" and plot.get_attribute("data-column") == "scifact"
    points = plot.find_elements(By.CSS_SELECTOR, "circle.point")
    assert [int(p.get_attribute("data-step")) for p in points] == list(STEPS)
    xs = [float(p.get_attribute("cx")) for p in points]
    assert xs == sorted(xs)                                            # steps left to right
    refs = {r.get_attribute("data-ref"): r for r in plot.find_elements(By.CSS_SELECTOR, "g.ref")}
    assert set(refs) == {"ModernBERT-base", "ModernBERT-large"}       # the model's family, Table 7's SciFact
    lb = build_leaderboard([site.parent / "results"])
    (series,) = lb.series
    published = {name: (value, text) for name, value, text in series.refs}
    for name, ref in refs.items():
        line = ref.find_element(By.CSS_SELECTOR, "line")
        box = d.execute_script("var r = arguments[0].getBoundingClientRect(); return [r.width, r.top];", line)
        assert box[0] > 300 and box[1] > 0 and line.get_attribute("stroke-dasharray")   # drawn across the plot
        assert float(ref.get_attribute("data-value")) == published[name][0]
        label = ref.find_element(By.CSS_SELECTOR, "text").text
        assert label == f"{name} {published[name][1]}"                    # as printed in Table 7
    higher, lower = sorted(refs, key=lambda n: -published[n][0])          # a higher score is drawn higher
    y = {n: float(refs[n].find_element(By.CSS_SELECTOR, "line").get_attribute("y1")) for n in refs}
    assert y[higher] < y[lower]
    best = plot.find_element(By.CSS_SELECTOR, "g.best")
    assert int(best.get_attribute("data-step")) == series.best.step and f"best: step {series.best.step}" in best.text
    assert plot.find_elements(By.CSS_SELECTOR, ".band")                # bootstrap over the queries
    rows = d.find_elements(By.CSS_SELECTOR, "table.series-table tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == [str(s) for s in STEPS]
    ARTIFACTS.mkdir(exist_ok=True)
    d.save_screenshot(str(ARTIFACTS / "series.png"))

    d.get((site / "index.html").resolve().as_uri())
    link = d.find_element(By.CSS_SELECTOR, "#series-link a")
    assert link.is_displayed() and link.get_attribute("href").endswith("series.html")
    names = [r.get_attribute("data-row") for r in d.find_elements(By.CSS_SELECTOR, "#t-beir tbody tr")
             if r.get_attribute("data-row").startswith("run:")]
    assert names == ["run:run-step400|ModernBERT|base"]                 # the tables: the latest step only
