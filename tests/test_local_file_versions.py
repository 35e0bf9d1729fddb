"""Issue 60, trust first: a record computed on a local file that now holds other data is never reused. What each
cell reads is fingerprinted at plan time (size and content hash, cached by path and stat: an unchanged 5M-document
corpus is hashed once), in the record's data spec, never in its run id; the record shows it, the ‡ note says it; the
old record is set aside when the new one is written."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.core import results
from harness.run import planning
from harness.run.runner import run
from harness.tasks.runplan import pending
from harness.trial.toy_data import write_beir_folder, write_tiny_glue
from tests.conftest import TINY_MODEL, compose, paths

TINY = ["model=all-minilm-l6-v2", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert", "model.normalize=false",
        "model.max_length=64", "precision=fp32", "device=cpu"]


def beir(tmp: Path, data: Path, *extra: str, train: bool = False) -> list[str]:
    return ["task=beir", *TINY, f"task.train={str(train).lower()}", f"task.data_dir={data}", "task.datasets=[toy]",
            "+task.catalog.toy={split: test}", *paths(tmp), *extra]


def age(folder: Path, seconds: float = 60.0) -> None:
    """Date every file back ``seconds``: files written this instant are never cached (an edit in the same clock
    tick would not show), files a user wrote a minute ago are."""
    then = time.time() - seconds
    for p in [folder, *folder.rglob("*")]:
        os.utime(p, (then, then))


def rewrite_texts(corpus: Path) -> None:
    """Every document's text replaced (same ids, same titles): what the issue's user did."""
    rows = [json.loads(line) for line in corpus.read_text().splitlines() if line.strip()]
    corpus.write_text("".join(json.dumps({**r, "text": f"replaced text number {i} about nothing"}) + "\n"
                              for i, r in enumerate(rows)))


def aside(tmp: Path, dataset: str) -> list[Path]:
    """The records set aside (not their per-query files)."""
    return [p for p in (tmp / "results").rglob(f"{dataset}.superseded-*") if not p.name.endswith((".npz", ".gz"))]


def test_a_beir_folder_edited_in_place_is_recomputed_and_the_old_record_kept_aside(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_beir_folder(data)
    age(data)
    (first,) = run(compose(beir(tmp_path, data)))
    files = first.details["data_files"]
    assert set(files["files"]) == {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv"}   # what the run read
    assert files["fingerprint"].startswith("sha256:") and files["n"] == 3

    rewrite_texts(data / "toy" / "corpus.jsonl")
    cfg = compose(beir(tmp_path, data))
    plan = planning.plan(cfg)
    assert plan.cells[0].run_id == first.run_id                      # the same run: the data spec differs
    assert [c.dataset for c in pending(plan, plan.cells)] == ["toy"]  # was: "skip beir/toy: record exists"
    (second,) = run(cfg)
    assert second.created_at >= first.created_at and second.details["data_spec"] != first.details["data_spec"]
    assert second.details["data_files"]["fingerprint"] != files["fingerprint"]
    assert second.data_fingerprint != first.data_fingerprint          # it read the new texts
    (kept,) = aside(tmp_path, "toy")
    old = results.read_record(kept)                                   # the old record, unchanged, beside
    assert (old.created_at, old.metrics) == (first.created_at, first.metrics)
    assert kept.with_name(kept.name + ".perquery.npz").is_file()       # its per-query scores moved with it
    (third,) = run(cfg)                                               # now done: skipped
    assert third.created_at == second.created_at and len(aside(tmp_path, "toy")) == 1


def test_an_unchanged_folder_is_hashed_once_and_read_from_the_cache_after(tmp_path: Path, monkeypatch) -> None:
    from harness.core import file_hash

    data = tmp_path / "data"
    write_beir_folder(data)
    age(data)
    hashed: list[Path] = []
    real = file_hash.sha256_of
    monkeypatch.setattr(file_hash, "sha256_of", lambda p: hashed.append(p) or real(p))
    file_hash._memo.clear()
    first = planning.plan(compose(beir(tmp_path, data))).cells[0]
    assert sorted(p.name for p in hashed) == ["corpus.jsonl", "queries.jsonl", "test.tsv"]
    entries = list((tmp_path / "cache" / "file-hashes").rglob("*.json"))   # under paths.cache
    assert len(entries) == 3 and {json.loads(e.read_text())["tag"] for e in entries} == {"sha256"}

    file_hash._memo.clear()                                                # as a new process: the cache on disk
    hashed.clear()
    again = planning.plan(compose(beir(tmp_path, data))).cells[0]
    assert hashed == [] and again.spec == first.spec

    rewrite_texts(data / "toy" / "corpus.jsonl")                        # only the changed file is read again
    os.utime(data / "toy" / "corpus.jsonl", (time.time() - 60, time.time() - 60))
    assert planning.plan(compose(beir(tmp_path, data))).cells[0].spec != first.spec
    assert [p.name for p in hashed] == ["corpus.jsonl"]


def test_a_file_written_this_instant_is_not_cached(tmp_path: Path) -> None:
    """An edit within the file's clock tick would keep its size and time: a fresh file's hash is not kept."""
    from harness.core import file_hash

    path = tmp_path / "f.txt"
    path.write_text("one")
    file_hash.use_cache(tmp_path / "hashes")
    try:
        assert file_hash.file_sha(path) == file_hash.file_sha(path)
        assert not (tmp_path / "hashes").exists()
        age(tmp_path)
        file_hash.file_sha(path)
        assert len(list((tmp_path / "hashes").rglob("*.json"))) == 1
    finally:
        file_hash.use_cache(None)


def glue(tmp: Path, data: Path) -> list[str]:
    return ["task=glue", *TINY, f"task.data_dir={data}", "task.tasks=[rte]", "task.lr=1e-4", "task.weight_decay=0",
            "task.epochs=1", "task.seed=1", "task.max_length=32", "task.batch_size=8", *paths(tmp)]


def test_a_glue_tsv_edited_in_place_is_recomputed_and_the_old_record_kept_aside(tmp_path: Path) -> None:
    """GLUE's run id always held its files' content (task.data), so an edit is a new run; its record on the
    earlier file stayed beside it as a configuration of its own, chosen by selection and shown: now set aside."""
    data = write_tiny_glue(tmp_path / "glue")
    age(data)
    (first,) = run(compose(glue(tmp_path, data)))
    assert set(first.details["data_files"]["files"]) == {"RTE/train.tsv", "RTE/dev.tsv"}
    dev = data / "RTE" / "dev.tsv"
    lines = dev.read_text().splitlines()
    flipped = {"entailment": "not_entailment", "not_entailment": "entailment"}
    dev.write_text("\n".join([lines[0], *("\t".join([*ln.split("\t")[:-1], flipped[ln.split("\t")[-1]]])
                                          for ln in lines[1:])]) + "\n")
    (second,) = run(compose(glue(tmp_path, data)))
    assert second.run_id != first.run_id and second.created_at >= first.created_at
    assert second.details["data_free_key"] == first.details["data_free_key"]
    current = [r for _, r in results.iter_records(tmp_path / "results")]
    assert [r.run_id for r in current] == [second.run_id]              # the earlier file's record is no candidate
    (kept,) = aside(tmp_path, "rte")
    assert results.read_record(kept).created_at == first.created_at


def test_a_glue_tsv_of_another_folder_sets_nothing_aside(tmp_path: Path) -> None:
    """Two copies of GLUE are two datasets: each run keeps its record (only an edit in place supersedes one)."""
    from harness.run.runner import earlier_versions

    a, b = write_tiny_glue(tmp_path / "a"), write_tiny_glue(tmp_path / "b")
    (b / "RTE" / "dev.tsv").write_text((b / "RTE" / "dev.tsv").read_text() + "99\tx y .\tz w .\tentailment\n")
    plans = [planning.plan(compose(glue(tmp_path, d))) for d in (a, b)]
    cells = [p.cells[0] for p in plans]
    assert cells[0].run_id != cells[1].run_id and cells[0].data_free_key != cells[1].data_free_key
    rec = plans[0].header.record(cells[0], split="validation", metrics={"accuracy": 50.0}, main_score="accuracy")
    results.write_record(tmp_path / "results", rec)
    other = plans[1].header.record(cells[1], split="validation", metrics={"accuracy": 60.0}, main_score="accuracy")
    assert earlier_versions(results.path_of(tmp_path / "results", other), other) == []


def test_every_kind_of_local_file_is_in_the_file_lists(tmp_path: Path, monkeypatch) -> None:
    """Triplet and KD training files, an MLDR folder (its corpus and the split read) and mteb task files are
    fingerprinted in each cell's data spec; hub data is not hashed (its pinned revision is its identity)."""
    from harness.trial.toy_data import write_paper_data, write_triplets

    root = write_paper_data(tmp_path / "paper")
    write_beir_folder(tmp_path / "data")
    triplets = write_triplets(tmp_path / "triplets.tsv")
    cell = planning.plan(compose(beir(tmp_path, tmp_path / "data", "task.train_data.source=file",
                                      f"task.train_data.path={triplets}", train=True))).cells[0]
    assert str(triplets) in cell.files["files"] and "corpus.jsonl" in cell.files["files"]
    assert cell.data_free_key is not None          # the file's content is in the run id: an edit is a new run

    cell = planning.plan(compose(["task=colbert", *TINY, f"task.data_dir={tmp_path / 'data'}", "task.datasets=[toy]",
                                  "+task.catalog.toy={split: test}", "task.train_data.source=file",
                                  f"task.train_data.path={root / 'kd.jsonl'}", *paths(tmp_path)])).cells[0]
    assert str(root / "kd.jsonl") in cell.files["files"] and cell.data_free_key is not None

    cell = planning.plan(compose(["task=mldr", *TINY, "task.source.run=null", f"task.data_dir={root}",
                                  *paths(tmp_path)])).cells[0]
    assert {"corpus.jsonl", "test.jsonl"} <= set(cell.files["files"]) and "train.jsonl" not in cell.files["files"]

    hub = planning.plan(compose(["task=beir", *TINY, "task.train=false", "task.datasets=[scifact]",
                                 *paths(tmp_path)])).cells[0]
    assert hub.files is None                      # the pinned hub copy: no local file, nothing hashed

    pytest.importorskip("mteb")
    task_file = tmp_path / "my_tasks.py"
    task_file.write_text(MTEB_TASK.format(data=tmp_path / "data" / "toy"))
    mteb = ["task=mteb", *TINY, f"task.task_files=[{task_file}]", "task.tasks=[MyToy]", *paths(tmp_path)]
    cell = planning.plan(compose(mteb)).cells[0]
    assert set(cell.files["files"]) >= {str(task_file), str(tmp_path / "data" / "toy" / "corpus.jsonl")}
    rewrite_texts(tmp_path / "data" / "toy" / "corpus.jsonl")
    assert planning.plan(compose(mteb)).cells[0].spec != cell.spec      # its data changed: another spec


MTEB_TASK = '''
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata


class MyToy(AbsTaskRetrieval):
    metadata = TaskMetadata(
        type="Retrieval", name="MyToy", main_score="ndcg_at_10", description="a toy", reference=None,
        dataset={{"path": "{data}", "revision": "1"}}, category="t2t", eval_splits=["test"],
        eval_langs=["eng-Latn"], date=None, dialect=[], domains=[], task_subtypes=[], license="cc-by-4.0",
        annotations_creators="human-annotated", modalities=["text"], sample_creation="found", bibtex_citation="",
    )
'''


def test_the_leaderboard_note_says_which_file_version_a_local_cell_was_computed_on(tmp_path: Path) -> None:
    """The page reads records, never compute code: the ‡ note names the files' fingerprint the record holds."""
    from harness.leaderboard import build_leaderboard

    rec = results.ResultRecord(task="beir", dataset="scifact", split="test", run_id="r",
                               model={"name": "m", "path": "p", "revision": None, "family": "m", "size": "small"},
                               metrics={"ndcg_at_10": 0.5}, main_score="ndcg_at_10",
                               details={"data": {"source": "local", "official": False, "path": "/d/scifact"},
                                        "data_files": {"fingerprint": "sha256:0123456789abcdef", "n": 3,
                                                       "bytes": 7_400_000}})
    results.write_record(tmp_path / "results", rec)
    cell = build_leaderboard([tmp_path / "results"]).table("beir").cells["run:m|m|small"]["scifact"]
    assert cell.local and "local data at /d/scifact (files sha256:0123456789abcdef: 3 files, 7.4 MB)" in cell.note


def test_a_finished_training_on_other_files_is_not_reused(tmp_path: Path) -> None:
    """Mined from a local BEIR train split (whose content is not in the run id): the trained model is reused only
    on the files it was trained on."""
    from harness.tasks.retrieval import compute

    data = tmp_path / "data"
    write_beir_folder(data)
    (data / "toy" / "qrels" / "train.tsv").write_text((data / "toy" / "qrels" / "test.tsv").read_text())
    cfg = compose(beir(tmp_path, data, "task.train_data.source=beir", "task.train_data.dataset=toy",
                       "task.train_data.split=train", train=True))
    plan = planning.plan(cfg)
    assert plan.stages.train_files is not None
    plan.stages.train_dir.mkdir(parents=True)
    results.atomic_write_json(plan.stages.train_dir / compute.TRAIN_DONE,
                              {"model_dir": "x", "train_files": plan.stages.train_files})
    assert compute.trained(plan)
    rewrite_texts(data / "toy" / "corpus.jsonl")
    again = planning.plan(cfg)
    assert again.stages.train_dir == plan.stages.train_dir and not compute.trained(again)
    assert again.cells[0].run_id == plan.cells[0].run_id and again.cells[0].spec != plan.cells[0].spec
