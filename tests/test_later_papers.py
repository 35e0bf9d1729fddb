"""The Ettin and mmBERT papers' published rows (issue 56): each transcribed number against its citation (the table the
row cites, the arithmetic of that table, the authors' own statements of the same numbers), the cells the page shows
(exact text, provenance, the ¶ footnote where the protocol is not the column's), the MTEB(eng, v2) Retrieval column a
task=mteb run must share, and the model files' citations."""

from __future__ import annotations

import csv
import re
from decimal import Decimal

import pytest

from harness import specs
from harness.core.results import ResultRecord
from harness.leaderboard import build_leaderboard
from harness.leaderboard.baselines import PAPER_SOURCES, SOURCES, baselines_dir
from harness.leaderboard.build import _published_mean
from harness.leaderboard.cells import OTHER_PROTOCOL_MARK, Cell, RowKey, ranked
from harness.leaderboard.transcribed import read_paper_source
from harness.mteb_results.catalog import MTEB_ENG_V2
from harness.tasks.mteb.benchmark import benchmark_column
from tests.conftest import REPO

BY_ID = {s.id: s for s in PAPER_SOURCES}
#: the citation each file's rows must carry: the paper (arXiv id and version) and its table
CITED = {"ettin_table3_encoders.csv": "arXiv 2507.11412v2 Table 3", "mmbert_table2_glue.csv": "arXiv 2509.06888v1 Table 2",
         "mmbert_table4_mteb_english.csv": "arXiv 2509.06888v1 Table 4", "mmbert_table6_coir.csv": "arXiv 2509.06888v1 Table 6"}


def rows(file: str) -> list[dict[str, str]]:
    with open(baselines_dir() / file, newline="") as fh:
        return list(csv.DictReader(fh))


def by_printed(file: str) -> dict[str, dict[str, str]]:
    return {r["printed"]: r for r in rows(file)}


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    return build_leaderboard([tmp_path_factory.mktemp("results")])


# ---- the transcription: every row cites its table; the numbers agree with that table and the authors' statements ----

def test_every_row_cites_the_table_its_file_transcribes():
    assert sorted(CITED) == sorted(s.file for s in PAPER_SOURCES)
    for source in PAPER_SOURCES:
        lines = rows(source.file)
        assert lines and {r["source"] for r in lines} == {CITED[source.file]} == {source.cited_as}
        assert source.cited_as.endswith(source.where) and source.badge.endswith(source.where)
        for r in lines:
            numbers = [v for k, v in r.items() if k not in ("source", "printed", "row", "family", "size", "note")]
            assert all(re.fullmatch(r"\d+\.\d", v) for v in numbers), (source.file, r["printed"])   # one decimal, as printed


def test_a_row_citing_another_table_is_refused(tmp_path, monkeypatch):
    import harness.leaderboard.transcribed as transcribed

    source = BY_ID["mmbert-table4"]
    text = (baselines_dir() / source.file).read_text().replace("Table 4,mmBERT base", "Table 5,mmBERT base")
    (tmp_path / source.file).write_text(text)
    monkeypatch.setattr(transcribed, "baselines_dir", lambda: tmp_path)
    with pytest.raises(ValueError, match=r"row 2: cites 'arXiv 2509.06888v1 Table 5'"):
        read_paper_source(source)


def _mean(values: list[str]) -> Decimal:
    return sum(Decimal(v) for v in values) / len(values)


@pytest.mark.parametrize(("file", "parts"), [
    ("mmbert_table4_mteb_english.csv", ("pair_class", "class", "sts", "retrieve", "cluster", "rerank", "summ")),
    ("mmbert_table6_coir.csv", ("apps", "cosqa", "text2sql", "codesearchnet", "sn_ccr", "codetrans_contest",
                                "codetrans_dl", "stackoverflow_qa", "codefeedback_st", "codefeedback_mt")),
])
def test_printed_averages_are_the_mean_of_the_printed_parts(file, parts):
    """Tables 4 and 6 print an Avg of their columns (Table 4: mteb's mean over task types): the transcribed parts
    reproduce it within the rounding of one-decimal parts (a typo of 0.1 or more in any part shows)."""
    for r in rows(file):
        assert abs(_mean([r[p] for p in parts]) - Decimal(r["avg"])) <= Decimal("0.07"), (file, r["printed"])


def test_mmbert_glue_avg_is_not_the_mean_of_its_tasks_and_says_so(board):
    """mmBERT's Table 2 Avg is below the mean of its eight printed tasks for every row (an undefined average): kept as
    printed, footnoted as another protocol, and the cell note says so."""
    glue = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte")
    for r in rows("mmbert_table2_glue.csv"):
        assert _mean([r[t] for t in glue]) - Decimal(r["avg"]) >= Decimal("0.4"), r["printed"]
    avg = board.table("glue").cells["pub:mmBERT-small|mmBERT|small"]["avg"]
    assert avg.text == "84.7" + OTHER_PROTOCOL_MARK and "not the mean of the row's 8 printed task scores" in avg.note


def test_ettin_numbers_match_the_authors_model_card_and_blog():
    """The hub model cards' "Performance Highlights" (GLUE Average: 88.9 vs 88.4 (Base), 90.8 vs 90.4 (Large); MTEB v2
    English Retrieval: 45.7 vs 43.9 (Base), 48.4 vs 47.0 (Large)) and the blog's "a 150M encoder (89.2)" on MNLI."""
    t = by_printed("ettin_table3_encoders.csv")
    card = {("Ettin-Enc-150m", "glue_avg"): "88.9", ("ModernBERT base", "glue_avg"): "88.4",
            ("Ettin-Enc-400m", "glue_avg"): "90.8", ("ModernBERT large", "glue_avg"): "90.4",
            ("Ettin-Enc-150m", "retrieval"): "45.7", ("ModernBERT base", "retrieval"): "43.9",
            ("Ettin-Enc-400m", "retrieval"): "48.4", ("ModernBERT large", "retrieval"): "47.0",
            ("Ettin-Enc-150m", "mnli"): "89.2"}
    for (model, col), printed in card.items():
        assert t[model][col] == printed, (model, col)


def test_the_modernbert_rows_of_ettin_copy_the_modernbert_paper_and_mmbert_reruns_it():
    """Ettin Table 3's ModernBERT SST-2 / MNLI / GLUE are the ModernBERT paper's (Tables 5 and 1); mmBERT's Table 2
    re-ran ModernBERT-base under its own protocol (87.4, not 88.4): why its GLUE cells carry ¶."""
    table5 = {(r["model"], r["size"]): r for r in csv.DictReader((baselines_dir() / SOURCES[2].file).open())}
    table1 = {(r["model"], r["size"]): r for r in csv.DictReader((baselines_dir() / SOURCES[0].file).open())}
    ettin = by_printed("ettin_table3_encoders.csv")
    for printed, size in (("ModernBERT base", "base"), ("ModernBERT large", "large")):
        assert ettin[printed]["sst2"] == table5[("ModernBERT", size)]["sst2"]
        assert ettin[printed]["mnli"] == table5[("ModernBERT", size)]["mnli"]
        assert ettin[printed]["glue_avg"] == table1[("ModernBERT", size)]["glue"]
    mmbert = by_printed("mmbert_table2_glue.csv")["ModernBERT Base"]
    assert (mmbert["avg"], table1[("ModernBERT", "base")]["glue"]) == ("87.4", "88.4")


# ---- the page: exact cells with their citation; ¶ where the protocol is not the column's; badges ----

def test_every_mapped_number_is_on_the_page_exactly_with_its_citation(board):
    for source in PAPER_SOURCES:
        for i, r in enumerate(rows(source.file)):
            key = RowKey(r["row"], r["family"], r["size"], "published")
            for header, (table, column) in source.cells.items():
                cell = board.table(table).cells[key.id][column]
                odd = header in source.other_protocol
                assert cell.text == r[header] + (OTHER_PROTOCOL_MARK if odd else ""), (source.file, r["printed"], header)
                assert cell.sources[0].items() >= {"printed": r[header], "where": source.where, "row": i + 1,
                                                   "file": source.file, "citation": source.citation}.items()
                assert source.cited_as in cell.note
                assert ranked(cell) is not odd and bool(cell.other_protocol) is odd
                if odd:
                    assert source.other_protocol[header][1] in cell.note
            assert {"badge": source.badge, "note": source.protocol} in board.badges[key.id]


def test_later_papers_fill_only_columns_that_share_their_protocol_or_are_footnoted(board):
    """Ettin's Clustering and MTEB v2 averages, mmBERT's other task types and CoIR tasks have no column here."""
    mapped = {h for s in PAPER_SOURCES for h in s.cells}
    assert {"clustering", "mteb_v2", "pair_class", "apps", "cosqa"}.isdisjoint(mapped)
    assert board.table("mldr").cells["pub:Ettin-150m|Ettin|150m"]["mldr-en/ood"].other_protocol == "Ettin paper"
    assert "mldr-en/id" not in board.table("mldr").cells["pub:Ettin-150m|Ettin|150m"]


def test_an_average_over_another_protocols_cells_carries_the_mark():
    cells = {t: Cell(80.0, f"80.0{OTHER_PROTOCOL_MARK}", other_protocol="mGTE NLU code") for t in ("a", "b")}
    avg = _published_mean(cells, ["a", "b"])
    assert avg.text.endswith(OTHER_PROTOCOL_MARK) and avg.other_protocol and not ranked(avg)


# ---- the MTEB(eng, v2) Retrieval column: the published rows and a task=mteb run share it ----

def test_mteb_v2_retrieval_column_is_where_a_task_mteb_aggregate_record_lands(board):
    column = benchmark_column(MTEB_ENG_V2, "Retrieval")
    assert column == "MTEB(eng, v2) Retrieval"
    spec = specs.get("mteb")
    probe = ResultRecord(task="mteb", dataset=column, split="test", model={}, metrics={}, main_score="main_score",
                         run_id="")
    assert spec.column_of(probe) == ("mteb", column)
    assert column in spec.tables[0].labels
    mteb = board.table("mteb")
    assert mteb.columns[0][0] == column                                   # the labelled aggregate comes first
    shown = {rid: cells[column].text for rid, cells in mteb.cells.items() if column in cells}
    assert shown["pub:Ettin-150m|Ettin|150m"] == "45.7" and shown["pub:mmBERT-base|mmBERT|base"] == "44.9"
    assert shown["pub:ModernBERT-base (Ettin paper)|ModernBERT|base"] == "43.9"
    assert shown["pub:ModernBERT-base (mmBERT paper)|ModernBERT|base"] == "44.8"


def test_site_markdown_and_sources_name_each_rows_table_and_protocol(board, tmp_path):
    from harness.leaderboard.tables import markdown, site_data

    data = site_data(board)
    row = next(r for r in data["rows"] if r["id"] == "pub:mmBERT-base|mmBERT|base")
    assert [b["badge"] for b in row["badges"]] == ["mmBERT Table 2", "mmBERT Table 4", "mmBERT Table 6"]
    assert "mGTE" in row["badges"][0]["note"]
    assert "badges" not in next(r for r in data["rows"] if r["id"] == "pub:ModernBERT-base|ModernBERT|base")
    text = markdown(board)
    assert "| Ettin-150m [Ettin Table 3] | 150m | published |" in text
    assert "`ettin_table3_encoders.csv` (Table 3): " + BY_ID["ettin-table3"].citation + " — protocol:" in text


# ---- the model files: every value cited, or "our reading" ----

MODELS = [f"ettin-encoder-{s}" for s in ("17m", "32m", "68m", "150m", "400m", "1b")] + ["mmbert-base"]
CITE = re.compile(r"[\w-]+@[0-9a-f]{7}:|issue #176|Table 9|our reading|as mmbert-small\.yaml|as modernbert-base\.yaml")


@pytest.mark.parametrize("name", MODELS)
def test_model_files_cite_each_value(name):
    text = (REPO / "conf" / "model" / f"{name}.yaml").read_text()
    lines = text.splitlines()
    for key in ("path", "max_length", "pooling", "lr", "batch_size", "gradient_accumulation_steps"):
        for i, line in enumerate(lines):
            if line.strip().startswith(f"{key}:"):
                nearby = "\n".join(lines[max(0, i - 2): i + 1])   # its own comment, or its block's just above
                assert CITE.search(nearby), f"{name}: {key} cites no source: {line!r}"
    if name.startswith("ettin"):
        for key in ("classifier_pooling", "classifier_activation", "classifier_dropout", "classifier_norm",
                    "attention_dropout", "attention_output_dropout"):
            line = next(x for x in lines if x.strip().startswith(f"{key}:"))
            assert re.search(r"@[0-9a-f]{7}:", line), f"{name}: glue.{key} cites no source"


def fidelity_rows() -> list[list[str]]:
    """docs/fidelity.md's "Ettin and mmBERT models" table, in the first table's five columns."""
    text = (REPO / "docs" / "fidelity.md").read_text(encoding="utf-8")
    section = text.split("\n## Ettin and mmBERT models\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| `")]
    return [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in lines]


@pytest.mark.parametrize("row", fidelity_rows(), ids=lambda r: r[0])
def test_fidelity_rows_state_the_composed_default_and_a_source(row):
    import yaml
    from omegaconf import OmegaConf

    from tests.conftest import compose

    assert len(row) == 5
    command, key = re.findall(r"`([^`]+)`", row[0])[:2]
    default = yaml.safe_load(re.findall(r"`([^`]+)`", row[3])[0])
    value = OmegaConf.select(compose(command.split()), key, throw_on_missing=True)
    assert (OmegaConf.to_container(value) if OmegaConf.is_config(value) else value) == default, row[0]
    assert re.search(r"@[0-9a-f]{7}:|\*\*our reading\*\*", row[4]), f"{row[0]} cites no source"


def test_ettin_sizes_name_the_published_rows():
    """model=ettin-encoder-<size> and the Ettin rows share family and size (a run sits beside its paper row)."""
    from tests.conftest import compose

    printed = {r["size"] for r in rows("ettin_table3_encoders.csv") if r["family"] == "Ettin"}
    for name in MODELS[:-1]:
        model = compose(["task=beir", f"model={name}"]).model
        assert model.family == "Ettin" and model.size in printed and model.path == f"jhu-clsp/{name}"

