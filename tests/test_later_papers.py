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
from tests.conftest import REPO, compose

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
                short, why = source.protocol_of(r["family"], header)
                odd = bool(short)
                assert cell.text == r[header] + (OTHER_PROTOCOL_MARK if odd else ""), (source.file, r["printed"], header)
                assert cell.sources[0].items() >= {"printed": r[header], "where": source.where, "row": i + 1,
                                                   "file": source.file, "citation": source.citation}.items()
                assert source.cited_as in cell.note
                assert ranked(cell) is not odd and cell.other_protocol == short
                if odd:
                    assert why in cell.note
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

MODELS = [f"ettin-encoder-{s}" for s in ("17m", "32m", "68m", "150m", "400m", "1b")] + ["mmbert-base", "mmbert-small"]
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
    for name in [m for m in MODELS if m.startswith("ettin")]:
        model = compose(["task=beir", f"model={name}"]).model
        assert model.family == "Ettin" and model.size in printed and model.path == f"jhu-clsp/{name}"



# ---- the sources each recipe value cites (issue 60): what they say, and no more ----

def model_line(name: str, key: str, block: str | None = None) -> str:
    """The line of ``key`` in conf/model/<name>.yaml (inside ``block``: dpr, colbert, when given)."""
    lines = (REPO / "conf" / "model" / f"{name}.yaml").read_text().splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith(f"{block}:")) if block else 0
    return next(x for x in lines[start:] if x.strip().startswith(f"{key}:"))


def test_the_lr_citations_say_what_their_sources_are():
    """The 150m's 8e-5 is the blog's DPR example, which is ModernBERT's train_st.py with the model name changed (its
    default LR); the 17m's 3e-4 is a README command missing the required --accum_steps; mmBERT's ColBERT LR is the
    authors' PyLate example (8e-5, batch 16), for mmBERT-small only, so mmBERT-base's is our reading."""
    line = model_line("ettin-encoder-150m", "lr", "dpr")
    assert "huggingface/blog@0110730:ettin.md" in line and "MB@8c57a0f:examples/train_st.py:19-20" in line
    assert "only the model name changed" in line and "default LR" in line
    line = model_line("ettin-encoder-17m", "lr", "dpr")
    assert "README.md:55-61" in line and "--accum_steps" in line and "train_st.py:27 requires" in line
    for size in ("32m", "68m", "400m", "1b"):
        assert "our reading" in model_line(f"ettin-encoder-{size}", "lr", "dpr")
    small, base = model_line("mmbert-small", "lr", "colbert"), model_line("mmbert-base", "lr", "colbert")
    assert small.split("#")[0].split() == ["lr:", "8e-5"] == base.split("#")[0].split()
    for line in (small, base):
        assert "huggingface/blog@3091031:mmbert.md" in line and "batch_size = 16" in line
        assert "MB@8c57a0f:examples/train_pylate.py:35-38" in line
    assert "our reading" in base and "our reading" not in small
    assert "huggingface/blog@3091031:mmbert.md" in model_line("mmbert-small", "lr", "dpr")


def test_the_ettin_recipe_cites_both_mini_batch_sizes_and_the_length_rule():
    """train_st.py's --gc_bsize: 256 in the code, 64 in its README; its length: sentence-transformers' own rule; the
    grid: what the sources hold (Appendix E not read) and whose grid it is."""
    beir = (REPO / "conf" / "task" / "beir.yaml").read_text()
    ettin = beir.split("  ettin:", 1)[1].split("\nbatch_size:", 1)[0]
    assert "train_st.py:29,79" in ettin and "default 256" in ettin and "README.md:36" in ettin and "64" in ettin
    assert "min(config.max_position_embeddings, tokenizer.model_max_length)" in ettin
    sweep = (REPO / "conf" / "sweep" / "beir-lr-ettin.yaml").read_text()
    assert "Appendix E" in sweep and "ettin@9ed80a7:assets/encoder_results.pdf" in sweep
    assert "secondary summary" in sweep and "mmbert@108ffb3:README.md:264" in sweep
    for key in ("batch_size", "gradient_accumulation_steps", "mini_batch_size", "max_seq_length"):
        assert f"{key}: ${{task.recipes.ettin.{key}}}" in sweep


def test_provenance_names_the_third_party_card_and_the_authors_table_page():
    from harness.leaderboard.baselines import MMBERT_CARD

    assert "hotchpotch" in MMBERT_CARD and "not the mmBERT authors" in MMBERT_CARD and "MS MARCO" in MMBERT_CARD
    citation = (baselines_dir() / "CITATION.md").read_text()
    assert "hotchpotch" in citation and "ettin@9ed80a7:assets/encoder_results.pdf" in citation


# ---- two recipes, one column: a run's MTEB(eng, v2) Retrieval cell beside the published rows ----

@pytest.mark.parametrize(("overrides", "recipe"), [
    (["task=beir", "model=ettin-encoder-150m"], "modernbert"),
    (["task=beir", "sweep=beir-lr-ettin", "model=ettin-encoder-150m"], "ettin"),
    (["task=beir", "sweep=beir-lr-ettin", "model=mmbert-base"], "ettin"),
    (["task=beir", "model=ettin-encoder-150m", "task.batch_size=512"], "custom"),
    (["task=beir", "model=modernbert-base", "task.batch_size=1024", "task.gradient_accumulation_steps=1",
      "task.mini_batch_size=256", "task.max_seq_length=8192"], "ettin"),        # Ettin's values, however set
    (["task=nanobeir", "model=ettin-encoder-150m"], "modernbert"),
])
def test_a_run_names_the_recipe_its_values_are(overrides, recipe):
    from harness.tasks.retrieval.beir import recipe_of

    assert recipe_of(beir_settings(overrides)) == recipe


def beir_settings(overrides: list[str]):
    """task=beir's typed settings of a composed config, as planning builds them (the task node less its spec)."""
    from omegaconf import OmegaConf

    from harness.core.typed import build
    from harness.tasks.retrieval.beir import BeirSettings

    node = OmegaConf.to_container(compose(overrides).task, resolve=True)
    return build(BeirSettings, {k: v for k, v in node.items() if k != "spec"}, "task 'beir'", key="task")


def test_a_recipe_naming_another_key_is_refused_in_one_line():
    from harness.core.errors import HarnessError

    with pytest.raises(HarnessError, match=r"task.recipes.ettin names \['lr'\]: a recipe lists values of batch_size"):
        beir_settings(["task=beir", "+task.recipes.ettin.lr=1e-4"])


def test_a_trained_record_names_its_recipe_and_the_run_id_does_not_move(tmp_path, toy_beir):
    from harness.run import planning
    from tests.conftest import TINY_MODEL, paths

    triplets = tmp_path / "t.tsv"
    triplets.write_text("query\tpositive\tnegative\n" + "".join(f"q{i}\tp{i}\tn{i}\n" for i in range(8)))
    base = ["task=beir", f"model.path={TINY_MODEL}", "task.datasets=[toy]", "+task.catalog.toy={split: test}",
            f"task.data_dir={toy_beir}",
            "task.train_data.source=file", f"task.train_data.path={triplets}", "device=cpu", *paths(tmp_path)]
    plan = planning.plan(compose(base))
    assert plan.header.details["recipe"] == "modernbert"
    assert planning.plan(compose([*base, "task.batch_size=7"])).header.details["recipe"] == "custom"
    renamed = planning.plan(compose([*base, "task.recipes.ettin.batch_size=7"]))   # names, never the identity
    assert renamed.cells[0].run_id == plan.cells[0].run_id and renamed.header.details["recipe"] == "modernbert"
    assert "recipe" not in planning.plan(compose([*base, "task.train=false"])).header.details


ETTIN_150M = {"name": "ettin-encoder-150m", "path": "jhu-clsp/ettin-encoder-150m", "revision": None, "family": "Ettin",
              "size": "150m"}
DPR_RUN = "lr=0.0003-dpr"


def write_retrieval_run(results, recipe: str | None, *, lineage: bool = True) -> None:
    """A trained task=beir record (naming ``recipe``, or nothing) and a task=mteb aggregate on its weights."""
    from harness.core.results import write_record

    write_record(results, ResultRecord(
        task="beir", dataset="scifact", split="test", model=ETTIN_150M, metrics={"ndcg_at_10": 0.7},
        main_score="ndcg_at_10", run_id=DPR_RUN, hyperparameters={"lr": 3e-4},
        details={"recipe": recipe} if recipe else {}, created_at="2026-01-01T10:00:00+00:00"))
    source = {"mode": "selected", "task": "beir", "run_id": DPR_RUN, "model_dir": "/m/dpr", "fingerprint": "f00d"}
    write_record(results, ResultRecord(
        task="mteb", dataset=benchmark_column(MTEB_ENG_V2, "Retrieval"), split="test",
        model={**ETTIN_150M, **({"lineage": source} if lineage else {})}, metrics={"main_score": 0.4612},
        main_score="main_score", run_id="mteb-on-dpr", created_at="2026-01-02T10:00:00+00:00"))


@pytest.mark.parametrize(("recipe", "lineage", "short", "says"), [
    ("ettin", True, "", ""),
    ("modernbert", True, "modernbert recipe", "the ModernBERT paper's DPR recipe"),
    ("custom", True, "custom recipe", "matching neither recipe"),
    (None, True, "recipe unknown", "names no recipe among the records read"),
    ("ettin", False, "no DPR fine-tune", "model.path evaluated as is"),
])
def test_a_run_cell_under_another_recipe_than_the_published_rows_carries_the_mark(tmp_path, recipe, lineage, short,
                                                                                   says):
    from harness.leaderboard.tables import site_data

    write_retrieval_run(tmp_path, recipe, lineage=lineage)
    board = build_leaderboard([tmp_path])
    column = benchmark_column(MTEB_ENG_V2, "Retrieval")
    cell = board.table("mteb").cells["run:ettin-encoder-150m|Ettin|150m"][column]
    assert cell.text == "46.1" + (OTHER_PROTOCOL_MARK if short else "")
    assert cell.other_protocol == short and ranked(cell) is not bool(short)
    assert says in cell.note and (DPR_RUN in cell.note) is (short in ("modernbert recipe", "custom recipe",
                                                                       "recipe unknown"))
    page = next(t for t in site_data(board)["tables"] if t["id"] == "mteb")
    assert page["cells"]["run:ettin-encoder-150m|Ettin|150m"][column]["t"] == cell.text
    dpr = board.table("beir").cells["run:ettin-encoder-150m|Ettin|150m"]["scifact"]
    assert OTHER_PROTOCOL_MARK not in dpr.text                     # a column with no published recipe: unchecked


def test_ettin_glue_cells_carry_the_mark_on_the_page_and_its_copied_modernbert_rows_do_not(board):
    """The Ettin rows' SST-2, MNLI and GLUE average come from their own sweep (bert24@ae0db97 create_glue_sweep.py,
    weight decays listed), not task=glue's protocol: ¶ in the text the page and leaderboard.md print, never best;
    Ettin Table 3's ModernBERT rows copy the ModernBERT paper's numbers and stay unmarked."""
    from harness.leaderboard.tables import markdown, site_data

    glue = board.table("glue")
    for col in ("sst2", "mnli", "avg"):
        cell = glue.cells["pub:Ettin-150m|Ettin|150m"][col]
        assert cell.text.endswith(OTHER_PROTOCOL_MARK) and not ranked(cell) and cell.other_protocol
        assert "{1e-6, 5e-6, 8e-6, 1e-5}" in cell.note and "bert24@ae0db97" in cell.note
        copied = glue.cells["pub:ModernBERT-base (Ettin paper)|ModernBERT|base"][col]
        assert OTHER_PROTOCOL_MARK not in copied.text and ranked(copied)
    assert "{1e-6, 5e-6, 8e-6, 1e-5}" in BY_ID["ettin-table3"].protocol
    page = next(t for t in site_data(board)["tables"] if t["id"] == "glue")
    assert page["cells"]["pub:Ettin-1b|Ettin|1b"]["sst2"]["t"] == "97.1" + OTHER_PROTOCOL_MARK
    row = next(x for x in markdown(board).split("## GLUE", 1)[1].splitlines() if x.startswith("| Ettin-150m "))
    assert f"95.8{OTHER_PROTOCOL_MARK}" in row and f"88.9{OTHER_PROTOCOL_MARK}" in row


def test_the_retrieval_column_keeps_both_modernbert_rows_and_says_neither_source_pins_the_protocol(board):
    column = benchmark_column(MTEB_ENG_V2, "Retrieval")
    mteb = board.table("mteb")
    assert "not pinned by either source" in mteb.note and "43.9" in mteb.note and "44.8" in mteb.note
    for row, badge in (("pub:ModernBERT-base (Ettin paper)|ModernBERT|base", "Ettin Table 3"),
                       ("pub:ModernBERT-base (mmBERT paper)|ModernBERT|base", "mmBERT Table 4")):
        assert badge in [b["badge"] for b in board.badges[row]]
        assert "neither paper pins the protocol" in mteb.cells[row][column].note
