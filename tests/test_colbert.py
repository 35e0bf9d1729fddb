"""task=colbert end to end on the tiny ModernBERT: evaluation records, KD training from the real teacher-scored sample,
reuse of training and token embeddings across index types, length caps, per-dataset query lengths, bad input
before any training, offline hub, the config, the LR sweep and selection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness import selection
from harness.core import results
from harness.core.errors import DataError, HarnessError, HubUnavailableError
from harness.run.runner import run
from tests.conftest import REPO, TINY_MODEL, compose, write_beir_folder

TINY = ["model=modernbert-base", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert", "precision=fp32",
        "device=cpu"]
BGE = REPO.parent / "shared" / "data" / "msmarco-hardneg-sample" / "bge_example_msmarco.jsonl"


def overrides(tmp: Path, data_dir: Path, *extra: str) -> list[str]:
    return ["task=colbert", *TINY, f"task.data_dir={data_dir}", "task.datasets=[toy]", "+task.catalog.toy={split: test}",
            "task.index=exact", f"paths.results={tmp}/results", f"paths.outputs={tmp}/outputs",
            f"paths.cache={tmp}/cache", *extra]


def kd_file(*extra: str) -> list[str]:
    return ["task.train_data.source=file", f"task.train_data.path={BGE}", "task.train_data.n_ways=8",
            "task.batch_size=4", "task.lr=1e-4", *extra]


def write_tiny_beir(folder: Path) -> None:
    """Three one-word documents: far too few token embeddings for PLAID's k-means."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": w}) + "\n"
                                                 for i, w in enumerate(("stars", "bread", "goals"))))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q0", "text": "stars"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n")


def records_in(tmp: Path) -> list[results.ResultRecord]:
    return [r for _, r in results.iter_records(tmp / "results")]


def test_eval_only_record(tmp_path: Path, toy_beir: Path, capsys) -> None:
    (rec,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false")))
    assert rec.task == "colbert" and rec.status == "ok" and 0 < rec.metrics["ndcg_at_10"] <= 1
    d = rec.details
    assert d["retriever"] == "multi_vector" and d["similarity"] == "MaxSim" and d["index"] == "exact"
    assert (d["query_length"], d["document_length"], d["position_limit"]) == (32, 510, 512)
    assert rec.model["colbert"]["head"] == "new projection, seed 42" and rec.run_id.startswith("eval=fp32_index=exact-")
    assert rec.hyperparameters["train"] is None and rec.hyperparameters["document_length"] == 510
    assert {"encode_corpus_s", "encode_queries_s", "search_s"} <= set(rec.timings)
    assert "ndcg_at_10" in capsys.readouterr().out


@pytest.mark.slow
def test_kd_training_on_the_real_sample_then_reuse_across_index_types(tmp_path: Path, toy_beir: Path) -> None:
    if not BGE.is_file():
        pytest.skip(f"{BGE} not present")
    write_tiny_beir(toy_beir / "mini")   # too few tokens for PLAID's k-means: no C++ build in this test
    mini = ["task.datasets=[mini]", "+task.catalog.mini={split: test}"]
    (rec,) = run(compose(overrides(tmp_path, toy_beir, *kd_file(), *mini)))
    trained = rec.model["trained"]
    assert rec.status == "ok" and trained["steps"] == 3 and trained["n_samples"] == 10
    assert trained["data"] == {"source": "file", "path": str(BGE), "layout": "flag", "n_rows_in_file": 10,
                               "n_samples": 10, "n_ways": 8, "max_samples": 810000}
    assert trained["report_to"] == "none" and trained["fingerprint"] != rec.model["fingerprint"]
    assert rec.hyperparameters["lr"] == 1e-4 and rec.hyperparameters["train"]["data"]["file_sha"]
    assert rec.model["colbert"]["head"] == "new projection, seed 42"
    # another index type: a new run id, the same trained model, the same token embeddings (no training, no encoding)
    (again,) = run(compose(overrides(tmp_path, toy_beir, *kd_file(), *mini, "task.index=plaid", "task.top_k=100")))
    assert again.run_id != rec.run_id and again.run_id.startswith("lr=0.0001_index=plaid-")
    assert again.model["trained"]["model_dir"] == trained["model_dir"]
    assert again.details["embedding_cache_hit"] is True
    assert again.details["index_requested"] == "plaid" and "too small for PLAID" in again.details["index_fallback"]
    assert again.metrics == rec.metrics
    # the saved checkpoint, evaluated on its own (task.train=false): PyLate's head is loaded, same numbers
    (ckpt,) = run(compose(overrides(tmp_path, toy_beir, *mini, "task.train=false", f"model.path={trained['model_dir']}")))
    assert ckpt.model["colbert"]["head"] == "loaded from the checkpoint" and ckpt.model["fingerprint"] == trained["fingerprint"]
    assert ckpt.metrics == pytest.approx(rec.metrics, abs=1e-6)
    assert again.hyperparameters["plaid"]["backend"] in ("fast", "stanford")


def test_document_length_beyond_positions_is_capped_and_recorded(tmp_path: Path, toy_beir: Path) -> None:
    (rec,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false", "task.document_length=8192")))
    assert rec.status == "ok"
    assert (rec.details["document_length"], rec.details["document_length_requested"]) == (512, 8192)


def test_query_length_per_dataset_is_data(tmp_path: Path, toy_beir: Path) -> None:
    write_beir_folder(toy_beir, "scifact")
    cfg = compose(overrides(tmp_path, toy_beir, "task.train=false", "task.datasets=[toy,scifact]",
                            "task.query_length_recipe=pylate_beir"))
    assert cfg.task.query_lengths.scifact == 48
    by = {r.dataset: r for r in run(cfg)}
    assert by["scifact"].details["query_length"] == 48 and by["toy"].details["query_length"] == 32
    # changing one dataset's query length re-evaluates that dataset only (its data spec), same run id
    cfg2 = compose(overrides(tmp_path, toy_beir, "task.train=false", "task.datasets=[toy,scifact]",
                             "task.query_length_recipe=pylate_beir", "task.query_length_recipes.pylate_beir.scifact=40"))
    by2 = {r.dataset: r for r in run(cfg2)}
    assert by2["scifact"].details["query_length"] == 40 and by2["scifact"].run_id == by["scifact"].run_id
    assert len(list((tmp_path / "results").rglob("scifact.superseded-*[0-9Z]"))) == 1     # re-evaluated, old one kept
    assert by2["toy"].created_at == by["toy"].created_at and by2["toy"].run_id == by["toy"].run_id


@pytest.mark.parametrize(("extra", "error", "message"), [
    (["task.train_data.n_ways=32"], DataError, r"line 1: 26 documents, fewer than task\.train_data\.n_ways=32"),
    (["task.train_data.path=/nonexistent/kd.jsonl"], DataError, r"KD training file not found: /nonexistent/kd\.jsonl"),
])
def test_bad_training_data_fails_before_training_and_writes_nothing(tmp_path: Path, toy_beir: Path, extra, error,
                                                                    message) -> None:
    if not BGE.is_file():
        pytest.skip(f"{BGE} not present")
    with pytest.raises(error, match=message):
        run(compose(overrides(tmp_path, toy_beir, *kd_file(*extra))))
    assert records_in(tmp_path) == [] and not (tmp_path / "outputs" / "models").exists()


def test_offline_hub_fails_fast_with_the_local_alternatives(tmp_path: Path, toy_beir: Path) -> None:
    with pytest.raises(HubUnavailableError, match=r"model 'answerdotai/ModernBERT-base' needs the Hugging Face hub.*"
                                                  r"model\.path="):
        run(compose(["task=colbert", "model=modernbert-base", f"paths.results={tmp_path}/r",
                     f"paths.outputs={tmp_path}/o"]))
    with pytest.raises(HubUnavailableError, match=r"KD training set 'lightonai/ms-marco-en-bge' needs the Hugging "
                                                  r"Face hub.*task\.train_data\.source=file"):
        run(compose(overrides(tmp_path, toy_beir)))
    assert records_in(tmp_path) == []


def test_dpr_keys_are_refused_with_the_colbert_key(tmp_path: Path, toy_beir: Path) -> None:
    with pytest.raises(HarnessError, match=r"task\.max_length is a DPR setting; task=colbert uses task\.document_length"):
        run(compose(overrides(tmp_path, toy_beir, "+task.max_length=256")))


def test_config_matches_the_paper_and_the_beir_catalog() -> None:
    cfg = compose(["task=colbert", "model=modernbert-base"])
    t = cfg.task
    assert (t.lr, t.batch_size, t.warmup_ratio, t.epochs, t.embedding_size) == (1e-4, 16, 0.05, 1, 128)
    assert (t.train_query_length, t.train_document_length, t.document_length, t.query_length) == (32, 180, 510, 32)
    assert (t.train_data.hub_path, t.train_data.n_ways, t.train_data.max_samples) == ("lightonai/ms-marco-en-bge",
                                                                                      32, 810000)
    assert t.query_length_recipe == "authors_code" and dict(t.query_lengths) == {}   # evaluate_pylate.py: 32 everywhere
    assert dict(t.query_length_recipes.pylate_beir) == {"scifact": 48, "trec-covid": 48, "scidocs": 48, "arguana": 64,
                                                        "climate-fever": 64}
    beir = compose(["task=beir", "model=modernbert-base"]).task
    assert OmegaConf.to_container(t.catalog) == OmegaConf.to_container(beir.catalog)
    assert list(t.datasets) == list(beir.datasets) and list(t.spec.selection.sets) == list(beir.spec.selection.sets)
    assert compose(["task=colbert", "model=bert-base"]).task.lr == 8e-5   # Table 9, through model.colbert.lr


def test_lr_sweep_composes_the_six_rates_of_beir_lr(tmp_path: Path) -> None:
    def params(sweep: str) -> str:
        out = subprocess.run([sys.executable, "-m", "harness", f"sweep={sweep}", "model=modernbert-base", "--cfg",
                              "hydra", "-p", "hydra.sweeper.params"], capture_output=True, text=True, cwd=REPO,
                             check=True)
        return out.stdout
    assert params("colbert-lr") == params("beir-lr")
    cfg = compose(["sweep=colbert-lr", "model=modernbert-base"])
    assert cfg.task.name == "colbert" and list(cfg.task.datasets) == ["nfcorpus", "scifact", "trec-covid", "fiqa"]


def test_selection_picks_one_lr_by_the_selection_sets_from_records(tmp_path: Path, toy_beir: Path) -> None:
    (base,) = run(compose(overrides(tmp_path, toy_beir, "task.train=false")))
    recs = []
    for lr, scores in ((1e-5, (0.36, 0.74, 0.60, 0.30, 0.50)), (8e-5, (0.35, 0.73, 0.80, 0.38, 0.45))):
        for ds, s in zip(("nfcorpus", "scifact", "trec-covid", "fiqa", "nq"), scores, strict=True):
            r = results.ResultRecord.from_dict({**base.to_dict(), "dataset": ds, "metrics": {"ndcg_at_10": s},
                                                "run_id": f"lr={lr}", "config_id": f"c{lr}",
                                                "hyperparameters": {"lr": lr}})
            spec = {**r.config["task"]["spec"], "selection": {"rule": "best_run_on_sets",
                                                               "sets": ["nfcorpus", "scifact", "trec-covid", "fiqa"]}}
            r.config = {**r.config, "task": {**r.config["task"], "spec": spec}}
            recs.append(r)
    chosen = selection.choose("colbert", recs)["tiny-modernbert"]
    assert chosen.summary["selected_run_id"] == "lr=8e-05"
    assert chosen.summary["next_command"] == "python -m harness task=colbert model=tiny-modernbert task.lr=8e-05"
    assert json.dumps(chosen.summary)   # the selection summary is plain JSON
