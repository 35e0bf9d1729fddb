"""Published baselines as data: a registry of the source tables (file, citation, column mapping, scale)
and a loader that turns them into published rows whose cells keep the printed text exactly."""

from __future__ import annotations

import csv
import fnmatch
import os
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from harness import specs
from harness.leaderboard.cells import (
    COMPUTED_MARK,
    OTHER_METRIC_MARK,
    PUBLISHED,
    Cell,
    RowKey,
    fmt,
)
from harness.leaderboard.layout import AVG, OVERVIEW, table_spec
from harness.leaderboard.transcribed import PaperSource, PublishedRow, baselines_dir, read_paper_source
from harness.mteb_results.catalog import (
    MTEB_ENG_V2,
    MTEB_FAMILY,
    MtebColumn,
    catalog_columns,
    configured_subsets,
)
from harness.mteb_results.reading import MtebModel, models_in, read_file
from harness.tasks.mteb.benchmark import benchmark_column

MODERNBERT_PAPER = ("Warner et al., \"Smarter, Better, Faster, Longer: A Modern Bidirectional Encoder for Fast, Memory "
                    "Efficient, and Long Context Finetuning and Inference\", arXiv 2412.13663v2")
MMBERT_CARD = ("Hugging Face user hotchpotch's model card of mmBERT-L4H384/L7H384/L13H384-pruned (layer-pruned jhu-clsp/mmBERT-small; a third party, not the mmBERT authors): NanoBEIR NDCG@10 of mmBERT-small and its pruned variants, each scored after that author's own MS MARCO fine-tune (\"We fine-tuned the pruned models for information retrieval on the MS MARCO dataset\"; its recipe is not stated in what could be read, and that the 22-layer row was fine-tuned the same way is our reading); the released weights are pruning-only")
JINA_BLOG = ("Jina AI blog post comparing ModernBERT-large with jina-XLM-RoBERTa and RoBERTa-large "
             "(STS12-STS17 and BEIR subset table, 0-100 scale)")
ETTIN_PAPER = "Weller et al., \"Seq vs Seq: An Open Suite of Paired Encoders and Decoders\" (Ettin), arXiv 2507.11412v2"
MMBERT_PAPER = ("Marone et al., \"mmBERT: A Modern Multilingual Encoder with Annealed Language Learning\", "
                "arXiv 2509.06888v1")

OVERVIEW_TABLE = "overview"
_BEIR_RENAMED = {"trec-covid": "trec_covid", "climate-fever": "climate_fever", "dbpedia-entity": "dbpedia",
                 "webis-touche2020": "touche2020"}


def _columns(table: str) -> tuple[str, ...]:
    """The columns a task spec's published table has (what the published numbers mean)."""
    return specs.get(table).tables[0].columns or ()


_BEIR_CSV = {_BEIR_RENAMED.get(d, d): d for d in _columns("beir")} | {"avg": AVG}   # Tables 7/8 header -> dataset


@dataclass(frozen=True)
class PublishedSource:
    """One published table: CSV header -> column of ``table``, ``scale`` applied in decimal (digits kept)."""

    id: str
    file: str
    citation: str
    table: str
    where: str                               # e.g. "Table 7"
    columns: Mapping[str, str]
    scale: int = 1
    model_column: str = "model"
    size_column: str | None = "size"
    family_aliases: Mapping[str, str] = field(default_factory=dict)   # printed name -> Table 1 family
    origin_column: str | None = None         # a column naming the paper a row was copied from (Table 5's source)
    #: (printed model, CSV header) -> (metric, why): a printed number in another metric than its column's, footnoted
    other_metric: Mapping[tuple[str, str], tuple[str, str]] = field(default_factory=dict)

    def row_key(self, printed: str, size: str) -> RowKey:
        if self.size_column is None:   # mmBERT card: "mmBERT-small (22 layers)" or "L13H384-<kept layers>"
            fam, size = ("mmBERT", "small") if printed.startswith("mmBERT") else ("mmBERT-small pruned", printed.split("-")[0])
            return RowKey(printed, fam, size, PUBLISHED)
        fam = self.family_aliases.get(printed, printed)
        return RowKey(f"{fam}-{size}", fam, size, PUBLISHED)


#: why Table 5's GTE-en-MLM QQP cells are footnoted (docs/fidelity.md, the MRPC/QQP row)
_GTE_QQP = ("Table 5 mixes metrics here: its QQP column is accuracy (RoBERTa's and DeBERTaV3's sources print "
            "accuracy; BERT's, NomicBERT's and ModernBERT's values sit in the accuracy range), while GTE-en-MLM's 88.8 "
            "(base) / 89.2 (large) look like the F1 its source reports; not comparable with the column's accuracy")

#: why its MRPC cells are too: no arithmetic bound as QQP's (docs/fidelity.md, the MRPC/QQP row: our reading)
_GTE_MRPC = ("Table 5's MRPC column is accuracy (RoBERTa's and DeBERTaV3's sources print accuracy), while "
             "GTE-en-MLM's 92.1 (base) / 93.5 (large) look like F1, our reading: its source's QQP column is F1, and "
             "GTE-en-MLM trails ModernBERT-base by 1.6-8.1 points and DeBERTaV3-large by 1.6-14.9 on the six other "
             "tasks but ties or leads them on MRPC, by about the 2-4 points MRPC's F1 holds over its accuracy; not "
             "comparable with the column's accuracy")

SOURCES: tuple[PublishedSource, ...] = (
    PublishedSource("modernbert-table1", "modernbert_table1_overview.csv", MODERNBERT_PAPER, OVERVIEW_TABLE,
                    "Table 1", {c.id: c.id for c in OVERVIEW}),
    PublishedSource("modernbert-table2", "modernbert_table2_efficiency.csv", MODERNBERT_PAPER, "efficiency", "Table 2",
                    {c: c for c in _columns("efficiency")}),
    PublishedSource("modernbert-table5", "modernbert_table5_glue.csv", MODERNBERT_PAPER, "glue", "Table 5",
                    {t: t for t in _columns("glue")}, family_aliases={"DeBERTav3": "DeBERTaV3", "NomicBERT-2048": "NomicBERT"},
                    origin_column="source", other_metric={("GTE-en-MLM", "qqp"): ("F1", _GTE_QQP),
                                                          ("GTE-en-MLM", "mrpc"): ("F1", _GTE_MRPC)}),
    PublishedSource("modernbert-table7", "modernbert_table7_beir_dpr.csv", MODERNBERT_PAPER, "beir", "Table 7", _BEIR_CSV),
    PublishedSource("modernbert-table8", "modernbert_table8_beir_colbert.csv", MODERNBERT_PAPER, "colbert", "Table 8", _BEIR_CSV),
    PublishedSource("mmbert-pruned-nanobeir", "mmbert_pruned_nanobeir.csv", MMBERT_CARD, "nanobeir", "model card table",
                    {"mean": AVG} | {v: k for k, v in specs.get("nanobeir").tables[0].labels.items()}, scale=100, size_column=None),
)


@dataclass(frozen=True)
class TaskRowSource:
    """A published table laid out one row per task and one column per model (the Jina AI comparison)."""

    id: str
    file: str
    citation: str
    table: str
    where: str
    tasks: Mapping[str, str]                 # printed task name -> leaderboard column
    models: Mapping[str, RowKey]             # CSV header -> row
    task_column: str = "task"
    section_column: str = "table"
    section_value: str = ""
    scale: int = 1


_JINA_ROW = {"modernbert_large": ("ModernBERT-large (Jina AI blog)", "ModernBERT", "large"),
             "jina_xlm_roberta": ("jina-XLM-RoBERTa (Jina AI blog)", "jina-XLM-RoBERTa", "large"),
             "roberta_large": ("RoBERTa-large (Jina AI blog)", "RoBERTa", "large")}
#: published tables with one row per task; their rows sit in the mteb table beside task=mteb records
TASK_ROW_SOURCES: tuple[TaskRowSource, ...] = (
    TaskRowSource("jina-modernbert-sts", "jina_modernbert_comparison.csv", JINA_BLOG, "mteb", "STS table",
                  {f"STS{i}": f"STS{i}" for i in range(12, 18)},
                  {k: RowKey(*v, PUBLISHED) for k, v in _JINA_ROW.items()}, section_value="sts_beir"),
)


def scaled_text(printed: str, scale: int) -> str:
    """``printed`` times ``scale`` without float rounding: "0.5151" x 100 -> "51.51"."""
    exponent = len(str(scale)) - 1
    if scale != 10**exponent:
        raise ValueError(f"published scale must be a power of ten, got {scale}")
    return printed if exponent == 0 else format(Decimal(printed).scaleb(exponent), "f")


def read_source(source: PublishedSource) -> list[PublishedRow]:
    """Rows of one published table; empty CSV cells (no value in the source) stay absent."""
    path = baselines_dir() / source.file
    rows = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        absent = [h for h in [*source.columns, source.model_column, source.size_column] if h and h not in reader.fieldnames]
        if absent:
            raise ValueError(f"{path}: registry entry {source.id!r} names columns the file lacks: {absent}")
        for i, line in enumerate(reader):
            printed = line[source.model_column]
            key = source.row_key(printed, line[source.size_column] if source.size_column else "")
            cells = {}
            for header, column in source.columns.items():
                raw = line[header].strip()
                if not raw:
                    continue
                text = scaled_text(raw, source.scale)
                src = {"source": source.id, "citation": source.citation, "where": source.where, "file": source.file,
                       "row": i + 1, "model": printed, "column": header, "printed": raw}
                note = f"published, {source.where}"
                if source.origin_column and line.get(source.origin_column, "").strip():
                    src["copied_from"] = line[source.origin_column].strip()
                    note += f" (copied there from {src['copied_from']})"
                metric, why = source.other_metric.get((printed, header), ("", ""))
                if metric:
                    note += f"; {OTHER_METRIC_MARK} {metric}, not the column's metric: {why}"
                cells[(source.table, column)] = Cell(float(text), text + (OTHER_METRIC_MARK if metric else ""),
                                                     note=note, sources=[src], other_metric=metric)
            rows.append(PublishedRow(key, printed, cells))
    return rows


def read_task_rows(source: TaskRowSource) -> list[PublishedRow]:
    """Rows of a task-per-row table: one published row per model column; cells keep the printed text."""
    path = baselines_dir() / source.file
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        absent = [h for h in [*source.models, source.task_column, source.section_column] if h not in reader.fieldnames]
        if absent:
            raise ValueError(f"{path}: registry entry {source.id!r} names columns the file lacks: {absent}")
        lines = [(i, line) for i, line in enumerate(reader)
                 if line[source.section_column] == source.section_value and line[source.task_column] in source.tasks]
    rows = []
    for header, key in source.models.items():
        cells = {}
        for i, line in lines:
            raw = line[header].strip()
            if not raw:
                continue
            text = scaled_text(raw, source.scale)
            src = {"source": source.id, "citation": source.citation, "where": source.where, "file": source.file,
                   "row": i + 1, "model": header, "column": line[source.task_column], "printed": raw}
            cells[(source.table, source.tasks[line[source.task_column]])] = Cell(
                float(text), text, note=f"published, {source.where}", sources=[src])
        rows.append(PublishedRow(key, header, cells))
    return rows


# ------------------------------------------------------------------------------------- later papers (Ettin, mmBERT)
MTEB_V2_RETRIEVAL = benchmark_column(MTEB_ENG_V2, "Retrieval")
_ETTIN_OWN = ("Ettin paper", "the Ettin paper's own measurement (its DPR fine-tune and evaluation), not the ModernBERT "
              "paper's: its ModernBERT-base row reads CSN 75.9 / MLDR 30.4 where ModernBERT Table 1 prints 56.4 / 27.4")
_MGTE_NLU = ("mGTE NLU code", "mmBERT ran GLUE with mGTE's NLU code (LR 2e-5..8e-5 x epochs {1,2,3,5,10}, batch 32), not "
             "ModernBERT's: its ModernBERT-base row averages 87.4 where ModernBERT Table 5 gives 88.4")
_MMBERT_DPR = ("mmBERT DPR model", "CoIR on mmBERT's own MS MARCO DPR model (Ettin's train_st.py; LR grid 1e-4..7e-4 per "
               "a secondary summary of mmBERT's appendix), not the ModernBERT paper's DPR recipe")
#: why the Ettin rows' GLUE cells (not its ModernBERT rows', copied from the ModernBERT paper) are footnoted
_ETTIN_GLUE = ("Ettin GLUE sweep", "the Ettin rows' own GLUE runs (bert24@ae0db97 create_glue_sweep.py: LR {1e-5, 3e-5, "
               "5e-5, 8e-5, 1e-4} x weight decay {1e-6, 5e-6, 8e-6, 1e-5} x batch {16, 32} x epochs {1, 2, 3, 4} for "
               "MNLI, SST-2, RTE / {2, 5, 10, 12} for the others, one seed (42), the best run per task): another grid, "
               "batch, epoch set and seed count than task=glue's, the ModernBERT paper's protocol (docs/fidelity.md)")
#: what the two papers' MTEB(eng, v2) Retrieval numbers leave open (both papers print ModernBERT-base)
_RETRIEVAL_OPEN = ("its DPR model from Ettin's train_st.py on MS MARCO (the recipe a run here names ettin); ModernBERT-base "
                   "reads 43.9 in Ettin Table 3 and 44.8 in mmBERT Table 4, whose retrieval code \"is the same as Ettin\" "
                   "(mmbert@108ffb3:README.md:264): neither paper pins the protocol in what could be read (neither "
                   "states batch x accumulation, GPU count or mteb version; Ettin no LR, its Appendix E not read; "
                   "mmBERT's LR grid 1e-4..7e-4, 1e-4 picked, only per a secondary summary)")
_GLUE = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte")
PAPER_SOURCES: tuple[PaperSource, ...] = (
    PaperSource(
        "ettin-table3", "ettin_table3_encoders.csv", ETTIN_PAPER, "Table 3", "arXiv 2507.11412v2 Table 3",
        "Ettin Table 3",
        "GLUE (the Ettin rows): FlexBERT's code in the orionw/bert24 fork, LR {1e-5, 3e-5, 5e-5, 8e-5, 1e-4} x weight "
        "decay {1e-6, 5e-6, 8e-6, 1e-5} x batch {16, 32} x epochs, one seed, best run per task (bert24@ae0db97 "
        "create_glue_sweep.py; its ModernBERT rows copy the ModernBERT paper's GLUE); retrieval: Ettin's train_st.py "
        "(ModernBERT's script, minor changes: per-device batch 1024 and CachedMNRL mini-batch 256 by default, --lr and "
        "--accum_steps required, their values and the GPU count unpublished) on MS MARCO, evaluated on MTEB(eng, v2), "
        "not on the BEIR subset",
        {"csn": ("code", "codesearchnet"), "mldr": ("mldr", "mldr-en/ood"), "retrieval": ("mteb", MTEB_V2_RETRIEVAL),
         "sst2": ("glue", "sst2"), "mnli": ("glue", "mnli"), "glue_avg": ("glue", AVG)},
        other_protocol={"csn": _ETTIN_OWN, "mldr": _ETTIN_OWN},
        notes={"glue_avg": "the GLUE average as printed (8 tasks; the per-task appendix table was not transcribed)",
               "retrieval": f"MTEB(eng, v2) Retrieval: mteb's mean nDCG@10 over its 10 retrieval tasks, x100, on "
                            f"{_RETRIEVAL_OPEN}"},
        family_protocol={("Ettin", h): _ETTIN_GLUE for h in ("sst2", "mnli", "glue_avg")},
        recipes={"retrieval": "ettin"}),
    PaperSource(
        "mmbert-table2", "mmbert_table2_glue.csv", MMBERT_PAPER, "Table 2", "arXiv 2509.06888v1 Table 2",
        "mmBERT Table 2", "GLUE with mGTE's NLU code (izhx/nlu-evals), not ModernBERT's FlexBERT code and sweep",
        {**{t: ("glue", t) for t in _GLUE}, "avg": ("glue", AVG)},
        other_protocol={h: _MGTE_NLU for h in (*_GLUE, "avg")},
        notes={"avg": "the Avg as printed, which is not the mean of the row's 8 printed task scores (mmBERT-small: "
                      "85.6 from the tasks, 84.7 printed); what it averages is not stated in what could be read"}),
    PaperSource(
        "mmbert-table4", "mmbert_table4_mteb_english.csv", MMBERT_PAPER, "Table 4", "arXiv 2509.06888v1 Table 4",
        "mmBERT Table 4", "retrieval: Ettin's train_st.py (MS MARCO, 1 epoch; LR grid 1e-4..7e-4 per a secondary "
                          "summary of its appendix) evaluated on MTEB(eng, v2)",
        {"retrieve": ("mteb", MTEB_V2_RETRIEVAL)},
        notes={"retrieve": f"MTEB(eng, v2) Retrieval: mteb's mean nDCG@10 over its 10 retrieval tasks, x100, on "
                           f"{_RETRIEVAL_OPEN}"},
        recipes={"retrieve": "ettin"}),
    PaperSource(
        "mmbert-table6", "mmbert_table6_coir.csv", MMBERT_PAPER, "Table 6", "arXiv 2509.06888v1 Table 6",
        "mmBERT Table 6", "code: CoIR on mmBERT's own MS MARCO DPR model (Ettin's train_st.py)",
        {"codesearchnet": ("code", "codesearchnet"), "stackoverflow_qa": ("code", "stackoverflow-qa")},
        other_protocol={"codesearchnet": _MMBERT_DPR, "stackoverflow_qa": _MMBERT_DPR}),
)
def load_published() -> list[PublishedRow]:
    """All published rows, merged by row key across sources, in the order they first appear."""
    merged: dict[RowKey, PublishedRow] = {}
    for rows in [*map(read_source, SOURCES), *map(read_paper_source, PAPER_SOURCES),
                 *map(read_task_rows, TASK_ROW_SOURCES)]:
        for row in rows:
            if row.key in merged:
                merged[row.key].cells.update(row.cells)
                merged[row.key].badges += [b for b in row.badges if b not in merged[row.key].badges]
            else:
                merged[row.key] = row
    return list(merged.values())


# ---------------------------------------------------------------------------------------------- mteb result files
MTEB_RESULTS = "mteb result files (mteb's own JSON layout, e.g. the embeddings-benchmark/results repository)"


def mteb_source(directory: str | os.PathLike) -> dict[str, str]:
    """The page's "Published sources" entry for one ``--mteb-results`` folder."""
    return {"id": "mteb-results", "citation": MTEB_RESULTS, "where": "--mteb-results", "file": str(directory)}


def load_mteb_published(dirs: Sequence[str | os.PathLike], *, models: Sequence[str] = (),
                        existing: Mapping[str, Iterable[str]] | None = None) -> list[PublishedRow]:
    """Published rows from folders of mteb result files, one per model revision (``models``: fnmatch patterns)."""
    columns = catalog_columns()
    spec = specs.find(MTEB_FAMILY)
    if spec is not None:
        table, subsets = spec.tables[0].id, configured_subsets()
        for task in (existing or {}).get(table, ()):
            columns.setdefault(task, MtebColumn(task, table, task, subset=subsets.get(task)))
    rows = []
    for directory in dirs:
        found = models_in(directory)
        seen = Counter(m.name for m in found)
        for m in found:
            if models and not any(fnmatch.fnmatch(m.name.lower(), p.lower()) for p in models):
                continue
            cells = {(c.table, c.column): cell for c in columns.values() if (cell := _mteb_cell(m, c)) is not None}
            cells |= _mteb_averages(cells)
            if cells:
                name = m.name if seen[m.name] == 1 else f"{m.name}@{m.revision[:8]}"
                rows.append(PublishedRow(RowKey(name, m.name.rsplit("/", 1)[-1], "", PUBLISHED), m.name, cells))
    return rows


def _mteb_averages(cells: Mapping[tuple[str, str], Cell]) -> dict[tuple[str, str], Cell]:
    """A table's average for a row that has all its columns, from the unrounded scores, marked as computed here."""
    out = {}
    for table in {t for t, _ in cells}:
        spec = table_spec(table)
        values = [cells[(table, c)].value for c in spec.columns or () if (table, c) in cells]
        if spec.columns and len(values) == len(spec.columns):
            mean = sum(values) / len(values)
            out[(table, AVG)] = Cell(mean, fmt(mean, spec.decimals) + COMPUTED_MARK, n=len(values), computed=True,
                                     note=f"{COMPUTED_MARK} computed here: mean of the {len(values)} mteb main scores "
                                     "(mteb result files hold no average; not a published number)")
    return out


def _mteb_cell(model: MtebModel, column: MtebColumn) -> Cell | None:
    path = model.folder / f"{column.task}.json"
    if not path.is_file():
        return None
    try:
        f = read_file(path)
        got = f.main_score(column.split, column.subset)
    except (ValueError, OSError) as exc:
        warnings.warn(f"skipping {path}: {exc}", stacklevel=2)
        return None
    if got is None:
        return None
    score, _, what = got
    spec = table_spec(column.table)
    value = score * (spec.scale or 100)
    src = {"source": "mteb-results", "citation": f"mteb result file (mteb {f.mteb_version})",
           "where": f"{column.task} main score ({what})", "file": str(path), "model": model.name,
           "revision": model.revision, "printed": repr(score), "dataset_revision": f.dataset_revision}
    return Cell(value, fmt(value, spec.decimals), note=f"published: mteb result file, {column.task} main score "
                f"({what}) x{spec.scale or 100:g}", sources=[src])
