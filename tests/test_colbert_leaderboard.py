"""ColBERT records land in the leaderboard's BEIR (ColBERT) column and the Table 8 detail table, beside the
published rows, with the LR the family's selection rule picks."""

from __future__ import annotations

from harness import specs
from harness.core.results import ResultRecord, write_record
from harness.leaderboard import build_leaderboard
from harness.leaderboard.layout import PENDING_TABLES, column_of, table_specs

MODERNBERT = {"name": "modernbert-base", "path": "answerdotai/ModernBERT-base", "revision": "8949b90",
              "family": "ModernBERT", "size": "base", "fingerprint": "beef"}
ROW = "run:modernbert-base|ModernBERT|base"


def record(dataset: str, score: float, run: str, lr: float) -> ResultRecord:
    return ResultRecord(task="colbert", dataset=dataset, split="test", model=MODERNBERT,
                        metrics={"ndcg_at_10": score}, main_score="ndcg_at_10", run_id=run, config_id=run,
                        hyperparameters={"lr": lr, "index": "plaid"}, details={"retriever": "multi_vector"},
                        created_at="2025-03-01T10:00:00+00:00")


def test_colbert_table_is_the_familys_not_a_pending_one():
    assert "colbert" not in PENDING_TABLES
    spec = table_specs()["colbert"]
    assert spec.columns == specs.get("beir").tables[0].columns and spec.scale == 100 and spec.label == "BEIR (ColBERT)"
    assert column_of(record("scifact", 0.7, "r", 1e-4)) == ("colbert", "scifact")


def test_records_fill_table8_and_the_overview_beside_the_published_rows(tmp_path):
    res = tmp_path / "results"
    for run, lr, bump in (("lr1", 1e-5, 0.0), ("lr8", 8e-5, 0.02)):
        for d in specs.get("beir").tables[0].columns:
            # lr8 wins the four selection sets, lr1 every other dataset: the table must show lr8 everywhere
            s = 0.40 + (bump if d in ("nfcorpus", "scifact", "trec-covid", "fiqa") else 0.05 - bump)
            write_record(res, record(d, s, run, lr))
    lb = build_leaderboard([res])
    table8 = lb.table("colbert")
    row = table8.cells[ROW]
    assert row["scifact"].text == "42.0" and row["nq"].text == "43.0"     # both from the selected lr8
    assert row["avg"].text == "42.7" and not row["avg"].partial          # (4 x 42 + 11 x 43) / 15
    assert [s["run_id"] for s in row["nq"].sources if s["used"]] == ["lr8"]
    published = table8.cells["pub:ModernBERT-base|ModernBERT|base"]
    assert published["scifact"].text == "73.0" and published["avg"].text == "51.3"   # Table 8 as printed
    overview = lb.table("overview")
    assert overview.cells[ROW]["beir_colbert"].text == "42.7"
    assert overview.cells["pub:ModernBERT-base|ModernBERT|base"]["beir_colbert"].text == "51.3"
