"""MLDR: data in MLDR's layout (and its bad input), the training lineage (the selected task=beir run, a run id,
a checkpoint), out-of-domain and in-domain runs through the CLI on a local MLDR-layout sample built from real
text, the records' setting and lineage, and the leaderboard's MLDR columns."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from harness import specs
from harness.core import results
from harness.core.errors import DataError, HarnessError, HubUnavailableError
from harness.run.runner import run
from harness.tasks.retrieval.data import code, longdocs, mldr
from tests.conftest import TINY_MODEL, compose, write_beir_folder, write_triplets
from tests.test_retrieval_runs import cli

TINY = ["model=all-minilm-l6-v2", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert", "model.normalize=false",
        "model.max_length=256", "precision=fp32"]


def row(qid: str, query: str, pos: list[str], neg: list[str] = ()) -> dict:
    return {"query_id": qid, "query": query, "positive_passages": [{"docid": d, "text": f"text of {d}"} for d in pos],
            "negative_passages": [{"docid": d, "text": f"text of {d}"} for d in neg]}


def write_mldr(folder: Path, test: list[dict], train: list[dict] = (), docs=("d1", "d2", "d3"), gz: bool = False) -> Path:
    mldr.write_folder(folder, [(d, f"text of {d}") for d in docs], {"test": test, "train": list(train)})
    if gz:
        for name in ("corpus.jsonl", "test.jsonl"):
            (folder / f"{name}.gz").write_bytes(gzip.compress((folder / name).read_bytes()))
            (folder / name).unlink()
    return folder


# ------------------------------------------------------------------------------------------------ data
def test_local_folder_in_mldrs_layout_plain_or_gzipped(tmp_path: Path) -> None:
    for gz in (False, True):
        folder = write_mldr(tmp_path / f"m{gz}", [row("q1", "who?", ["d2"]), row("q2", "what?", ["d1", "d3"])], gz=gz)
        ds = mldr.load_local(folder, "mldr-en", "test")
        assert ds.corpus_ids == ["d1", "d2", "d3"] and [x for _, _, x in ds.corpus.rows()][1] == "text of d2"
        assert ds.queries == {"q1": "who?", "q2": "what?"} and ds.qrels == {"q1": {"d2": 1}, "q2": {"d1": 1, "d3": 1}}


def test_bad_mldr_input_names_the_problem_and_the_fix(tmp_path: Path) -> None:
    bad = row("q7", "x", [])
    folder = write_mldr(tmp_path / "a", [row("q1", "who?", ["d1"]), bad])
    with pytest.raises(DataError, match=r"test.jsonl line 2 \(query_id 'q7'\): no positive passage; every MLDR row "
                                        r"needs at least one entry in positive_passages. Fix that row or remove it"):
        mldr.load_local(folder, "x")
    with pytest.raises(DataError, match=r"train.jsonl line 1 \(query_id 'q7'\): no positive passage"):
        mldr.train_rows_local(write_mldr(tmp_path / "b", [row("q1", "who?", ["d1"])], train=[bad]), "train")
    folder = write_mldr(tmp_path / "c", [row("q1", "who?", ["d1"]), row("q2", "lost?", ["d9"])])
    with pytest.raises(DataError, match=r"1 query have a positive that is not in the corpus \(first: query 'q2' -> "
                                        r"'d9'\).*same MLDR release.*task.strict_qrels=false"):
        mldr.load_local(folder, "x")
    assert mldr.load_local(folder, "x", strict_qrels=False).qrels == {"q1": {"d1": 1}}
    with pytest.raises(DataError, match=r"MLDR folder not found: .*nope.*MLDR's layout"):
        mldr.load_local(tmp_path / "nope", "x")
    (tmp_path / "d").mkdir()
    with pytest.raises(DataError, match=r"no test.jsonl\(.gz\); MLDR's layout has corpus.jsonl"):
        mldr.load_local(tmp_path / "d", "x")


def test_triplets_take_each_rows_positive_with_its_first_negatives() -> None:
    rows = [row("q1", "a?", ["d1"], ["d2", "d3"]), row("q2", "b?", ["d2"], []), row("q3", "c?", ["d3"], ["d1"])]
    ds, stats = mldr.triplets(rows, num_negatives=2, max_samples=None, seed=12)
    assert ds["anchor"] == ["a?", "a?", "c?"] and ds["negative"] == ["text of d2", "text of d3", "text of d1"]
    assert stats == {"rows": 3, "rows_without_negative": 1, "triplets": 3}
    with pytest.raises(DataError, match="none of the 1 training rows has a negative passage"):
        mldr.triplets([rows[1]], num_negatives=1, max_samples=None, seed=12)


def test_hub_data_fails_fast_offline_naming_the_local_layout() -> None:
    with pytest.raises(HubUnavailableError, match=r"Shitao/MLDR@f3837ca.*task.train_data.source=local"):
        mldr.train_rows_hub("Shitao/MLDR", "f3837caa8004c6b49954bb6b511d424222eb9161", "mldr-v1.0-en", "train")
    with pytest.raises(HubUnavailableError, match=r"mteb/MultiLongDocRetrieval.*task.data_dir=<dir containing "
                                                  r"mldr-v1.0-en/>"):
        mldr.load_hub("mteb/MultiLongDocRetrieval", "837028901907a7d419b4ab906f28e011ce1cc824", "en", "mldr-en")


# ------------------------------------------------------------------------------------------------ lineage
def make_record(task: str, run_id: str, score: float, model_dir: str | None = None, lr: float = 1e-4,
                setting: str = "ood", retriever: str = "single_vector", dataset: str = "scifact",
                created: str = "2025-01-01T00:00:00+00:00") -> results.ResultRecord:
    model = {"name": "tiny-modernbert", "family": "ModernBERT", "size": "base"}
    if model_dir:
        model["trained"] = {"model_dir": model_dir, "fingerprint": "abc"}
    return results.ResultRecord(
        task=task, dataset=dataset, split="test", model=model, metrics={"ndcg_at_10": score},
        main_score="ndcg_at_10", run_id=run_id, hyperparameters={"lr": lr}, config={"task": {}},
        details={"setting": setting, "retriever": retriever}, created_at=created, config_id=run_id)


def mldr_overrides(tmp_path: Path, *extra: str) -> list[str]:
    return ["task=mldr", *TINY, f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs",
            f"paths.cache={tmp_path}/cache", *extra]


def test_source_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"no task=beir record of model 'tiny-modernbert' under .*results, so there "
                                           r"is no selected run.*sweep=beir-lr.*task.source.run=null"):
        run(compose(mldr_overrides(tmp_path)))
    for rid in ("lr=1e-05-aaaa", "lr=0.0001-bbbb"):
        results.write_record(tmp_path / "results", make_record("beir", rid, 0.5, str(tmp_path / rid)))
    with pytest.raises(HarnessError, match=r"task.source.run='lr=1e-05-aaab': no task=beir run with that id for model "
                                           r"'tiny-modernbert'.*Known run ids \(closest first\): lr=1e-05-aaaa, "
                                           r"lr=0.0001-bbbb"):
        run(compose(mldr_overrides(tmp_path, "task.source.run='lr=1e-05-aaab'")))
    with pytest.raises(HarnessError, match=r"the trained model of task=beir run lr=1e-05-aaaa is gone .*Re-run that "
                                           r"configuration.*model.path=<dir> with task.source.run=null"):
        run(compose(mldr_overrides(tmp_path, "task.source.run='lr=1e-05-aaaa'")))


def test_records_land_in_the_mldr_columns() -> None:
    assert specs.get("mldr").column_of(make_record("mldr", "r", 0.3)) == ("mldr", "scifact/ood")
    assert specs.get("mldr").column_of(make_record("mldr", "r", 0.3, dataset="mldr-en")) == ("mldr", "mldr-en/ood")
    assert specs.get("mldr").column_of(make_record("mldr", "r", 0.3, dataset="mldr-en", setting="id")) == ("mldr", "mldr-en/id")
    assert specs.get("mldr").column_of(make_record("mldr", "r", 0.3, dataset="mldr-en", retriever="multi_vector")) == (
        "mldr", "mldr-en/ood-colbert")


def test_selection_reports_the_newest_configuration_per_column() -> None:
    from harness import selection

    old = make_record("mldr", "old", 0.9, dataset="mldr-en", created="2025-01-01T00:00:00+00:00")
    new = make_record("mldr", "new", 0.2, dataset="mldr-en", created="2025-02-01T00:00:00+00:00")
    (choice,) = selection.choose("mldr", [old, new]).values()
    assert [r.run_id for r in choice.cells["mldr", "mldr-en/ood"]] == ["new"]


# ------------------------------------------------------------------------------------------------ end to end
@pytest.fixture()
def trained_beir(tmp_path: Path) -> Path:
    """A task=beir DPR run of the tiny ModernBERT (trained on toy triplets), then an MLDR-layout sample of real
    text: the email package's files, their functions' docstrings as queries (train rows with 2 negative files)."""
    data = tmp_path / "data"
    write_beir_folder(data)
    triplets = write_triplets(tmp_path / "triplets.tsv")
    run(compose(["task=beir", *TINY, f"task.data_dir={data}", "task.datasets=[toy]", "+task.catalog.toy={split: test}",
                 "task.train_data.source=file", f"task.train_data.path={triplets}", "task.batch_size=8",
                 "task.gradient_accumulation_steps=1", "task.lr=1e-4", "task.loss=mnrl",
                 f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs",
                 f"paths.cache={tmp_path}/cache"]))
    lds = longdocs.mine(code.stdlib_root() / "email")
    longdocs.export_mldr(lds, data / "mldr-v1.0-en", max_train=48, max_test=40, negatives=2)
    return tmp_path


def test_ood_then_in_domain_fine_tuning_through_the_cli(trained_beir: Path) -> None:
    tmp = trained_beir
    (beir,) = [r for _, r in results.iter_records(tmp / "results") if r.task == "beir"]
    data = f"task.data_dir={tmp}/data"
    (ood,) = run(compose(mldr_overrides(tmp, data)))
    assert ood.details["setting"] == "ood" and ood.details["lineage"]["run_id"] == beir.run_id
    assert ood.details["lineage"]["mode"] == "selected" and ood.model["fingerprint"] == beir.model["trained"]["fingerprint"]
    assert ood.model["ref"]["source_run"] == beir.run_id and "trained" not in ood.model
    assert ood.details["n_queries"] == 40 and ood.details["max_length"] == 256

    p = cli(*mldr_overrides(tmp, data, "task.setting=id", "task.train_data.source=local", "task.batch_size=8",
                            "task.max_seq_length=128", "task.mini_batch_size=8"), cwd=Path.cwd())
    assert p.returncode == 0, p.stderr[-3000:]
    (idr,) = [r for _, r in results.iter_records(tmp / "results") if r.task == "mldr" and r.details["setting"] == "id"]
    trained = idr.model["trained"]
    # NO_DUPLICATES batches: the 48 queries share 29 files as positives, so fewer than 48 / 8 batches fill
    assert trained["fine_tuned_from"]["run_id"] == beir.run_id and 1 <= trained["steps"] <= 6
    assert trained["fingerprint"] != beir.model["trained"]["fingerprint"] and Path(trained["model_dir"]).is_dir()
    assert trained["data"] == {"rows": 48, "rows_without_negative": 0, "triplets": 48}
    assert idr.hyperparameters["lr"] == beir.hyperparameters["lr"] == 1e-4   # default: the selected DPR LR
    train = idr.hyperparameters["train"]
    assert (train["loss"], train["epochs"], train["batch_size"], train["gradient_accumulation_steps"],
            train["max_seq_length"], train["data"]["source"]) == ("cached_mnrl", 1.0, 8, 1, 128, "local")
    assert idr.run_id.startswith("setting=id_lr=0.0001-") and idr.run_id != ood.run_id

    from harness.leaderboard import build_leaderboard

    lb = build_leaderboard([tmp / "results"], published=False)
    row = lb.table("overview").cells["run:tiny-modernbert|all-MiniLM-L6-v2|small"]
    assert row["mldr_ood_dpr"].value == pytest.approx(ood.score * 100)
    assert row["mldr_id_dpr"].value == pytest.approx(idr.score * 100)
    assert [c for c, _ in lb.table("mldr").columns] == ["mldr-en/ood", "mldr-en/id"]

    again = run(compose(mldr_overrides(tmp, data)))            # finished: skipped, nothing reloaded
    assert again[0].created_at == ood.created_at


def test_cli_shows_the_pinned_mldr_sets_and_fails_fast_offline(tmp_path: Path) -> None:
    p = cli("task=mldr", "model=modernbert-base", "--cfg", "job", "--resolve")
    assert p.returncode == 0, p.stderr
    for needle in ("hub: mteb/MultiLongDocRetrieval", "revision: 837028901907a7d419b4ab906f28e011ce1cc824",
                   "hub_config: en", "split: test", "max_length: 8192", "max_seq_length: 8192",
                   "hub_path: Shitao/MLDR", "hub_revision: f3837caa8004c6b49954bb6b511d424222eb9161",
                   "hub_dir: mldr-v1.0-en", "setting: ood", "run: selected"):
        assert needle in p.stdout, needle
    p = cli("task=mldr", "model=all-minilm-l6-v2", "task.source.run=null", f"paths.results={tmp_path}/r")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "mteb/MultiLongDocRetrieval@837028901907a7d419b4ab906f28e011ce1cc824" in p.stderr
    assert "task.data_dir=<dir containing mldr-v1.0-en/> in MLDR's layout" in p.stderr
    write_mldr(tmp_path / "d" / "mldr-v1.0-en", [row("q1", "who?", ["d1"])])
    p = cli("task=mldr", "model=all-minilm-l6-v2", "task.source.run=null", "task.setting=id",
            f"task.data_dir={tmp_path}/d", f"paths.results={tmp_path}/r")
    assert p.returncode == 2 and "needs the Hugging Face hub" in p.stderr
    assert "task.train_data.source=local" in p.stderr


@pytest.mark.slow
def test_ood_colbert_evaluates_the_selected_colbert_run_at_the_models_positions(tmp_path: Path) -> None:
    """MLDR OOD (ColBERT): the selected task=colbert run (KD-trained on the real teacher-scored sample), evaluated
    as is on an MLDR-layout sample with document length 8,192 capped at the tiny model's 512 positions."""
    from tests.test_colbert import BGE, kd_file
    from tests.test_colbert import TINY as COLBERT_TINY

    if not BGE.is_file():
        pytest.skip(f"{BGE} not present")
    data = tmp_path / "data"
    write_beir_folder(data)
    paths = [f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs", f"paths.cache={tmp_path}/c"]
    (colbert,) = run(compose(["task=colbert", *COLBERT_TINY, f"task.data_dir={data}", "task.datasets=[toy]",
                              "+task.catalog.toy={split: test}", "task.index=exact", *kd_file(), *paths]))
    lds = longdocs.mine(code.stdlib_root() / "email")
    longdocs.export_mldr(lds, data / "mldr-v1.0-en", max_train=0, max_test=20, negatives=0)
    base = ["task=mldr", *COLBERT_TINY, f"task.data_dir={data}", *paths, "task.retriever=multi_vector"]
    with pytest.raises(HarnessError, match=r"task.retriever=multi_vector evaluates the ColBERT model of task=colbert.*"
                                           r"task.source.task=colbert"):
        run(compose(base))
    (rec,) = run(compose([*base, "task.source.task=colbert", "task.multi_vector.index=exact"]))
    d = rec.details
    assert rec.status == "ok" and d["retriever"] == "multi_vector" and d["setting"] == "ood"
    assert d["lineage"]["run_id"] == colbert.run_id and d["lineage"]["task"] == "colbert"
    assert rec.model["fingerprint"] == colbert.model["trained"]["fingerprint"]
    assert rec.model["colbert"]["head"] == "loaded from the checkpoint"
    assert (d["document_length"], d["document_length_requested"], d["query_length"]) == (512, 8192, 32)
    assert d["max_length"] == 512 and d["n_queries"] == 20 and rec.run_id.startswith("setting=ood-colbert-")

    from harness.leaderboard import build_leaderboard

    lb = build_leaderboard([tmp_path / "results"], published=False)
    row = lb.table("overview").cells["run:tiny-modernbert|ModernBERT|base"]
    assert row["mldr_ood_colbert"].value == pytest.approx(rec.score * 100)


def test_source_weights_that_changed_since_their_run_are_refused() -> None:
    from harness.tasks.runplan import Lineage

    lin = Lineage("selected", "beir", "lr=1e-4-aaaa", "/m/dir", "fp-1")
    assert lin.loaded({"fingerprint": "fp-1"}, "hub/id") == {"path": "hub/id", "lineage": lin.record()}
    with pytest.raises(HarnessError, match=r"^the weights in /m/dir changed since task=beir run lr=1e-4-aaaa recorded "
                                           r"them \(fingerprint fp-2 != fp-1\); re-run that configuration or pass the "
                                           r"directory as model.path=<dir> with task.source.run=null.$"):
        lin.loaded({"fingerprint": "fp-2"}, "hub/id")
