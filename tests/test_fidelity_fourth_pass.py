"""Issue 45, fidelity fourth pass: MRPC and QQP scored by accuracy as Table 5 prints them (F1 beside; records scored
by F1 under the previous default rescored from their kept predictions or set aside, never shown beside accuracy),
ColBERT's seed and pinned data, ModernBERT's GLUE head as the authors built it, our readings said as such, and the
newest surfaces' silent cases (GLUE fp16 on a CPU, flash_attention_2 without flash-attn, the tokenised-split cache,
a broken series checkpoint, positions shorter than max_length in a series)."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.core import results
from harness.core.errors import HarnessError
from harness.core.per_query import PerQuery, fingerprint
from harness.trial.toy_data import sentence, write_tiny_glue
from tests.conftest import TINY_MODEL, compose

REPO = Path(__file__).resolve().parents[1]
MODEL = {"name": "m", "fingerprint": "f", "family": "M", "size": "base"}


# ------------------------------------------------------------------------------------ MRPC and QQP: accuracy
@pytest.mark.parametrize("task", ["mrpc", "qqp"])
def test_mrpc_and_qqp_are_scored_by_accuracy_with_f1_beside(task: str) -> None:
    from harness.tasks.glue import metrics as glue_metrics
    from harness.tasks.glue.spec import compared_score, score_note

    metric = compose(["task=glue"]).task.definitions[task].metric
    assert metric == "accuracy_f1" and glue_metrics.score_key(metric, False) == "accuracy" == compared_score(task)
    out = glue_metrics.compute(metric, [1, 1, 0, 0], [1, 0, 0, 0])
    assert out["score"] == out["accuracy"] == 75.0 and out["f1"] == pytest.approx(200 / 3)
    assert out["f1_accuracy_mean"] == pytest.approx((200 / 3 + 75) / 2)
    assert glue_metrics.MONITOR[metric] == "accuracy"                  # the authors' sweep optimised accuracy
    assert score_note(task, "accuracy").startswith("accuracy, as Table 5 prints it")


def test_cfg_job_shows_mrpc_and_qqp_scored_by_accuracy() -> None:
    """``python -m harness task=glue --cfg job``: the definitions say ``accuracy_f1``, and a note says what scores."""
    import os

    from tests.forked import run_module

    done = run_module("harness", "task=glue", "--cfg", "job", cwd=REPO,
                      env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for task in ("mrpc", "qqp"):
        assert f"# task.definitions.{task}.metric: accuracy_f1 -> scored by accuracy" in done.stderr
    assert done.stdout.count("metric: accuracy_f1") == 2


def write_mrpc(root: Path) -> Path:
    rng = random.Random(1)
    head = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    for name, n in (("train.tsv", 24), ("dev.tsv", 10)):
        rows = [head] + [f"{i % 2}\t{i}\t{i + 1}\t{sentence(rng)}\t{sentence(rng)}" for i in range(n)]
        (root / "MRPC").mkdir(parents=True, exist_ok=True)
        (root / "MRPC" / name).write_text("\n".join(rows) + "\n")
    return root


def glue_overrides(tmp: Path, *extra: str, model: str = "all-minilm-l6-v2") -> list[str]:
    return ["task=glue", f"model={model}", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert",
            f"task.data_dir={tmp / 'glue'}", "task.max_length=32", "task.batch_size=8", "task.mnli_init=off",
            "task.lr=1e-4", "task.weight_decay=1e-6", "task.epochs=1", "task.seed=3", "precision=fp32",
            "device=cpu", f"paths.results={tmp}/results", f"paths.outputs={tmp}/outputs", f"paths.cache={tmp}/cache",
            *extra]


def test_a_local_mrpc_run_records_accuracy_as_its_score_and_f1_among_its_metrics(tmp_path: Path) -> None:
    from harness.run.runner import run

    write_mrpc(tmp_path / "glue")
    (rec,) = run(compose(glue_overrides(tmp_path, "task.tasks=[mrpc]")))
    assert rec.status == "ok" and rec.main_score == "accuracy" and rec.score == rec.metrics["accuracy"]
    assert {"f1", "f1_accuracy_mean"} <= set(rec.metrics)
    claim = rec.details["per_query"]
    assert claim["data"]["glue_metric"] == "accuracy"       # harness.compare re-scores it as a mean over examples
    assert rec.details["attn_implementation"] == "sdpa"      # every GLUE record says which attention ran


def old_record(res: Path, score: str = "f1", *, seed: int = 1618, protocol: str = "authors", keep: bool = True,
               model: dict | None = None, flip: int = 3, dataset: str = "mrpc", lr: float = 3e-5,
               preds: np.ndarray | None = None) -> tuple[Path, results.ResultRecord]:
    """An MRPC record as the third pass wrote it (scored by F1), with its kept predictions (``keep``): the labels
    with the first ``flip`` flipped, or ``preds``."""
    labels = np.array([i % 2 for i in range(20)], dtype=np.float64)
    if preds is None:
        preds = labels.copy()
        preds[:flip] = 1 - preds[:flip]
    from harness.tasks.glue.metrics import compute

    metrics = {k: v for k, v in compute("f1", preds, labels).items() if k != "score"}
    grid = "" if lr == 3e-5 else f"-lr{lr}"                               # another grid point: another configuration
    hp = {"lr": lr, "weight_decay": 1e-6, "epochs": 2, "seed": seed, "scoring_protocol": protocol,
          "scored_evaluation": "last" if protocol == "authors" else "best (restored)",
          "early_stopping_metric": "accuracy" if protocol == "authors" else "score"}
    rec = results.ResultRecord(
        task="glue", dataset=dataset, split="validation", model=model or MODEL, metrics=metrics, main_score=score,
        run_id=f"old-{protocol}-{seed}-{flip}{grid}", config_id=f"cfg-{protocol}{grid}", hyperparameters=hp,
        data_fingerprint="d", details={}, created_at=f"2026-11-2{seed % 7}T00:00:00+00:00")
    if keep:
        ids = [f"validation:{i}" for i in range(20)]
        rec.per_query = PerQuery(ids, {"prediction": preds, "label": labels},
                                 {"dev": "d", "labels": fingerprint(labels.tolist()), "glue_metric": score,
                                  "groups": fingerprint([["validation", 20]])}, unit="example")
    return results.write_record(res, rec), rec


def test_an_authors_protocol_f1_record_is_read_as_accuracy_from_its_predictions(tmp_path: Path) -> None:
    """Its training and its scored (last) evaluation did not depend on the score: only which metric is the score
    does, so its accuracy is exactly what a run scored by accuracy records."""
    from harness.selection import load_selections
    from harness.selection.comparable import comparable

    path, rec = old_record(tmp_path / "results")
    read = comparable(path, results.read_record(path))
    assert read.main_score == "accuracy" and read.score == pytest.approx(85.0) == rec.metrics["accuracy"]
    assert read.details["rescored"]["from"] == "f1" and read.details["per_query"]["data"]["glue_metric"] == "accuracy"
    assert results.read_record(path).main_score == "f1"                 # the file keeps what it says
    for seed in (42, 6033):
        old_record(tmp_path / "results", seed=seed)
    choices, _ = load_selections("glue", tmp_path / "results")
    mrpc = choices["m"].summary["tasks"]["mrpc"]
    assert mrpc["main_score"] == "accuracy" and mrpc["score"]["mean"] == pytest.approx(85.0)


@pytest.mark.parametrize("case", ["best_epoch", "no predictions", "other predictions"])
def test_an_f1_record_that_cannot_be_rescored_exactly_is_set_aside_with_its_rerun_command(tmp_path: Path,
                                                                                          case: str) -> None:
    from harness.selection.comparable import comparable

    res = tmp_path / "results"
    path, _ = old_record(res, protocol="best_epoch" if case == "best_epoch" else "authors",
                         keep=case != "no predictions")
    if case == "other predictions":   # predictions that do not give the accuracy the record claims
        data = json.loads(path.read_text())
        data["metrics"]["accuracy"] = 50.0
        path.write_text(json.dumps(data))
    read = comparable(path, results.read_record(path))
    assert read.status == "skipped" and read.details["set_aside"]["compared"] == "accuracy"
    assert read.error.startswith("not comparable: mrpc scored by f1") and "\n" not in read.error
    assert "rerun it: python -m harness task=glue model=m task.tasks=mrpc task.lr=3e-05" in read.error
    assert ("task.scoring_protocol=best_epoch" in read.error) == (case == "best_epoch")


def test_set_aside_records_are_never_shown_beside_accuracy(tmp_path: Path, capsys) -> None:
    """harness.select says why and exits 2 when nothing else is left; the leaderboard lists them, no number."""
    from harness.leaderboard import build_leaderboard
    from harness.select import main as select

    res = tmp_path / "results"
    for seed in (1618, 42, 6033):
        old_record(res, seed=seed, protocol="best_epoch")
    assert select(["--task", "glue", "--results", str(res)]) == 2
    err = capsys.readouterr().err
    assert "3 record(s) scored by f1 (an earlier default) set aside" in err and "rerun them, e.g. python -m" in err
    lb = build_leaderboard([res], published=False)
    assert any(s.startswith("set aside: m mrpc: 3 record(s)") for s in lb.meta["skipped"])
    cell = lb.table("glue").cells["run:m|M|base"]["mrpc"]
    assert cell.value is None and "not comparable" in cell.note
    new = [old_record(res, "accuracy", seed=s, model=MODEL, flip=1)[1] for s in (1618, 42, 6033)]
    assert all(r.main_score == "accuracy" for r in new)
    assert select(["--task", "glue", "--results", str(res)]) == 0
    out = capsys.readouterr().out
    assert "set aside: m mrpc: 3 record(s)" in out
    sel = json.loads((tmp_path / "selected" / "glue-m.json").read_text())
    assert sel["tasks"]["mrpc"]["score"]["mean"] == pytest.approx(95.0) and sel["set_aside"]


def test_compare_reads_an_old_f1_run_as_accuracy_and_refuses_a_set_aside_one(tmp_path: Path) -> None:
    from harness.compare.__main__ import parser, run

    def compare_lines(a: str, b: str) -> list[str]:
        return run(parser().parse_args([a, b, "--task", "glue", "--results", str(res), "--permutations", "200"]))

    res = tmp_path / "results"
    a, _ = old_record(res, flip=3)                                                  # authors: rescored
    b, _ = old_record(res, "accuracy", model={**MODEL, "name": "n"}, flip=1)        # a new accuracy record
    lines = compare_lines(str(a.parent), str(b.parent))
    assert lines[2].startswith("metric accuracy;")
    row = next(line for line in lines if line.startswith("mrpc"))
    assert row.split()[2:4] == ["85.0000", "95.0000"]                   # A rescored from F1 to accuracy, B as written
    c, _ = old_record(res, protocol="best_epoch", model={**MODEL, "name": "o"})
    with pytest.raises(HarnessError, match=r"no ok record for .*: not comparable: mrpc scored by f1.*rerun it"):
        compare_lines(str(c.parent), str(b.parent))


def test_the_pages_significance_marks_test_a_rescored_record_by_the_accuracy_its_cell_shows(tmp_path: Path) -> None:
    """The marks re-read the kept predictions from the record file, whose claim still names F1: they must re-score
    by the accuracy the cell shows, so the tested difference is the difference of the shown values."""
    from harness.leaderboard.__main__ import main

    res = tmp_path / "results"
    old_record(res, flip=3)                                                     # F1 records, read as accuracy 85
    old_record(res, model={**MODEL, "name": "n"}, flip=1)                       # ... and 95
    old_record(res, "accuracy", model={**MODEL, "name": "o"}, flip=2)           # a new record: accuracy 90
    out = tmp_path / "site"
    assert main([str(res), "--out", str(out), "--no-published", "--significance", "--permutations", "200"]) == 0
    text = (out / "data.js").read_text()
    data = json.loads(text[text.index("=") + 1:].strip().rstrip(";"))
    cells = next(x for x in data["tables"] if x["id"] == "glue")["cells"]
    shown = {row.split("|")[0]: cell["mrpc"]["v"] for row, cell in cells.items()}
    assert shown == {"run:m": 85.0, "run:n": 95.0, "run:o": 90.0}
    pairs = data["sig"]["pairs"]["glue"]["mrpc"]
    assert len(pairs) == 3                                      # the rescored and the new records are one family
    for key, t in pairs.items():
        a, b = key.split("\t")
        assert t["d"] == pytest.approx(cells[b]["mrpc"]["v"] - cells[a]["mrpc"]["v"], abs=1e-6)


def test_a_series_step_is_chosen_on_the_accuracy_an_f1_record_is_read_as(tmp_path: Path) -> None:
    """``harness.select --series`` reads the records as the leaderboard does: a step scored by F1 under the previous
    default counts with its accuracy (85.0 here, its F1 85.7), never beside another step's accuracy."""
    from harness.select import main as select

    res = tmp_path / "results"
    for step, (path, _) in ((100, old_record(res, flip=3)), (200, old_record(res, "accuracy", flip=2))):
        data = json.loads(path.read_text())
        data["details"]["series"] = {"name": "run", "step": step, "folder": f"ckpt-{step}", "fingerprint": f"w{step}"}
        path.write_text(json.dumps(data))
    assert select(["--series", "run", "--task", "glue", "--datasets", "mrpc", "--results", str(res)]) == 0
    choice = json.loads((tmp_path / "selected" / "series-run.json").read_text())
    assert {s["step"]: s["per_dataset"]["mrpc"] for s in choice["steps"]} == {100: 85.0, 200: 90.0}
    assert choice["metric"] == "accuracy" and choice["best"]["step"] == 200


def test_the_paper_graphs_sweep_selection_compares_f1_records_by_their_accuracy(tmp_path: Path) -> None:
    """A paper graph whose GLUE sweep records are scored by F1 (run with ``task.definitions.mrpc.metric=f1``: the
    fourth pass changed the default's run ids, so older records are not among a graph's runs) picks its grid point
    by accuracy, as ``harness.select`` and the leaderboard do: by F1 the all-positive run (F1 66.7, accuracy 50)
    would win, and its selection file would disagree with the page's."""
    from harness.paper.progress import JobState, choose, sweep_records

    res = tmp_path / "results"
    few = np.zeros(20)
    few[[1, 3]] = 1                                                   # labels alternate 0, 1: accuracy 60, F1 33.3
    runs = [old_record(res, lr=lr, preds=p)[1].run_id for lr, p in ((1e-5, np.ones(20)), (2e-5, few))]
    first = JobState(job=None, run_ids=(runs[0],), results=str(res))  # type: ignore[arg-type]
    second = JobState(job=None, run_ids=(runs[1],), results=str(res))  # type: ignore[arg-type]
    choice = choose("glue", sweep_records("glue", [first, second], ["mrpc"]))
    ((rec,),) = choice.cells.values()
    assert rec.hyperparameters["lr"] == 2e-5 and rec.main_score == "accuracy" and rec.score == pytest.approx(60.0)


def test_a_paper_graph_selection_over_set_aside_records_fails_saying_why(tmp_path: Path) -> None:
    """F1 records whose accuracy cannot be recovered exactly (best_epoch restored the evaluation best by F1): the
    select job fails with the set-aside line and its rerun command, not only 'no usable record'."""
    from harness.paper.graph import Job
    from harness.paper.job import JobFailed, select
    from harness.paper.progress import JobState

    res = tmp_path / "results"
    rid = old_record(res, protocol="best_epoch")[1].run_id
    sweep = JobState(job=Job("glue-sweep-0", "glue", "run", "glue"), cells=1, done=1, run_ids=(rid,), results=str(res))
    with pytest.raises(JobFailed, match=r"glue-select: no usable record among 1 runs; set aside: m mrpc: 1 record\(s\) "
                       r"scored by f1 .*rerun them, e\.g\. python -m harness task=glue"):
        select(Job("glue-select", "glue-select", "select", "glue"), [sweep], 1.0)


def test_what_chooses_or_shows_scores_reads_records_through_the_comparable_view() -> None:
    """The modules that read record files as written: they plan (finished cells, chaining, lineage, costs, status)
    or export as written. Whatever chooses or shows a score reads through ``selection.comparable`` (a new raw
    reader must be added here, on purpose)."""
    raw = {str(p.relative_to(REPO)) for p in (REPO / "harness").rglob("*.py")
           if re.search(r"\b(iter_records|read_record)\(", p.read_text())}
    assert raw == {"harness/core/results.py", "harness/selection/comparable.py", "harness/run/runner.py",
                   "harness/tasks/glue/chain.py", "harness/run/planning.py", "harness/paper/cost.py",
                   "harness/paper/progress.py", "harness/export.py",
                   "harness/mteb_results/export.py"}


def test_table_5s_gte_qqp_cells_are_footnoted_as_f1_and_never_best(tmp_path: Path) -> None:
    from harness.leaderboard import build_leaderboard
    from harness.leaderboard.cells import OTHER_METRIC_MARK, ranked
    from harness.leaderboard.tables import markdown

    lb = build_leaderboard([tmp_path], published=True)
    glue = lb.table("glue")
    for size, value in (("base", "88.8"), ("large", "89.2")):
        cell = glue.cells[f"pub:GTE-en-MLM-{size}|GTE-en-MLM|{size}"]["qqp"]
        assert cell.text == value + OTHER_METRIC_MARK and cell.other_metric == "F1" and not ranked(cell)
    assert not glue.cells["pub:ModernBERT-base|ModernBERT|base"]["qqp"].other_metric
    md = markdown(lb)
    assert f"88.8{OTHER_METRIC_MARK}" in md and "F1, not the column's metric" in md


# ------------------------------------------------------------------------------------ ColBERT: seed and data
def test_colbert_trains_under_the_seed_the_authors_ran_on_a_pinned_commit() -> None:
    from sentence_transformers import SentenceTransformerTrainingArguments

    from harness.tasks.retrieval.data.kd import pinned_commit

    task = compose(["task=colbert"]).task
    assert task.train_seed == 42 == SentenceTransformerTrainingArguments(output_dir="x").seed
    assert pinned_commit(task.train_data.hub_revision) == "11e6ffa" and pinned_commit("main") is None


def test_the_pinned_kd_commit_is_resolved_fail_closed(monkeypatch, caplog) -> None:
    import huggingface_hub

    from harness.core.errors import DataError
    from harness.tasks.retrieval.data import kd

    full = "11e6ffa" + "0" * 33

    class Api:
        def __init__(self, sha: str | None) -> None:
            self.sha = sha

        def __call__(self):
            return self

        def dataset_info(self, path, revision=None):
            if self.sha is None:
                raise OSError("no API here")
            return type("Info", (), {"sha": self.sha})()

    monkeypatch.setattr(huggingface_hub, "HfApi", Api(full))
    assert kd._hub_commit("lightonai/ms-marco-en-bge", "11e6ffa") == full
    monkeypatch.setattr(huggingface_hub, "HfApi", Api("a" * 40))
    with pytest.raises(DataError, match=r"resolved to commit a{40}, which is not the pinned 11e6ffa"):
        kd._hub_commit("lightonai/ms-marco-en-bge", "11e6ffa")
    monkeypatch.setattr(huggingface_hub, "HfApi", Api(None))
    with pytest.raises(DataError, match=r"did not resolve the pinned commit"):
        kd._hub_commit("lightonai/ms-marco-en-bge", "11e6ffa")
    assert kd._hub_commit("lightonai/ms-marco-en-bge", "main") is None       # a branch: read by name, warned


# ------------------------------------------------------------------------------------ ModernBERT's GLUE head
HEAD = {"classifier_pooling": "cls", "classifier_activation": "gelu", "classifier_dropout": 0.0,
        "classifier_norm": False, "attention_dropout": 0.0, "attention_output_dropout": 0.1}


def test_modernbert_models_set_the_authors_head_and_the_baselines_keep_their_own() -> None:
    for name in ("modernbert-base", "modernbert-large"):
        assert compose(["task=glue", f"model={name}"]).model.glue == HEAD
        text = (REPO / "conf" / "model" / f"{name}.yaml").read_text()
        for key in HEAD:
            line = next(x for x in text.splitlines() if x.strip().startswith(f"{key}:"))
            assert re.search(r"MB@[0-9a-f]{7}:", line), f"{name}: model.glue.{key} cites no source"
    for name in ("bert-base", "roberta-large", "deberta-v3-base", "gte-en-mlm-base", "nomicbert-2048"):
        assert compose(["task=glue", f"model={name}"]).model.glue is None


def test_the_tiny_modernbert_through_the_glue_path_builds_the_authors_head(tmp_path: Path) -> None:
    """A GLUE run of model=modernbert-base on the tiny ModernBERT: the head it trained is the one model.glue says
    (read from the built model), its run id holds the head, and other runs keep theirs."""
    import torch

    from harness.models import ModelSpec
    from harness.run.planning import planner_of
    from harness.run.runner import run
    from harness.tasks.glue.classification import load_classifier

    write_tiny_glue(tmp_path / "glue")
    overrides = glue_overrides(tmp_path, "task.tasks=[rte]", model="modernbert-base")
    (rec,) = run(compose(overrides))
    assert rec.status == "ok" and rec.details["head"] == {"class": "ModernBertForSequenceClassification", **HEAD}
    assert rec.details["attn_implementation"] == "sdpa" and rec.model["attention"]["requested"] == "auto"
    spec = ModelSpec.from_config(compose(overrides).model)
    model = load_classifier(str(TINY_MODEL), 2, head=spec.glue, device="cpu")
    assert isinstance(model.head.norm, torch.nn.Identity) and model.config.classifier_pooling == "cls"
    assert all(layer.attn.out_drop.p == 0.1 for layer in model.model.layers) and model.drop.p == 0.0
    plain = load_classifier(str(TINY_MODEL), 2, device="cpu")                       # the checkpoint's own head
    assert isinstance(plain.head.norm, torch.nn.LayerNorm)
    ids = {h: planner_of(compose([*overrides, *h])).cells()[0].run_id
           for h in ((), ("model.glue.classifier_pooling=mean",), ("model.glue=null",))}
    assert len(set(ids.values())) == 3
    minilm = planner_of(compose(glue_overrides(tmp_path, "task.tasks=[rte]"))).cells()[0].identity
    assert "head" not in minilm["task"] and "glue" not in minilm["model"]          # unchanged for other models
    with pytest.raises(HarnessError, match=r"model.glue sets a ModernBERT classification head, but .* is a bert"):
        load_classifier(str(_bert(tmp_path)), 2, head=spec.glue, device="cpu")


def _bert(tmp: Path) -> Path:
    from transformers import BertConfig, BertModel

    folder = tmp / "bert"
    BertModel(BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=16)).save_pretrained(folder)
    return folder


# ------------------------------------------------------------------------------------ our readings
OURS = [("task=glue", "task.grid.weight_decays"), ("task=glue", "task.grid.epochs"),
        ("task=glue", "task.spec.depends_on[0].for_datasets"), ("task=beir", "task.train_data.hub_revision"),
        ("task=colbert", "task.train_data.hub_revision"), ("task=colbert", "task.train_seed"),
        ("task=mldr model=modernbert-base", "task.max_length"), ("task=mldr", "task.setting"),
        ("task=mldr", "task.multi_vector.query_length")]


@pytest.mark.parametrize(("command", "key"), OURS, ids=[f"{c} {k}" for c, k in OURS])
def test_rows_where_the_sources_are_silent_say_our_reading(command: str, key: str) -> None:
    """The GLUE selection among complete configurations, the MNLI chain from the first seed, the epoch grid, the
    training-set pins, the seeded ColBERT projection and every MLDR setting are the harness's choices."""
    from tests.test_protocol_fidelity import OUR_READING, ROWS, parse

    (row,) = [r for r in ROWS if " ".join(parse(r)[0]) == command and parse(r)[1] == key]
    assert OUR_READING in row[4]
    assert all(OUR_READING in r[4] for r in ROWS if "task=mldr" in r[0])


# ------------------------------------------------------------------------------------ silent cases
def test_glue_fp16_on_a_cpu_is_refused_before_any_work(tmp_path: Path) -> None:
    from harness.run.runner import run

    write_tiny_glue(tmp_path / "glue")
    with pytest.raises(HarnessError, match=r"precision=fp16 on device cpu: transformers' Trainer runs fp32 there"):
        run(compose(glue_overrides(tmp_path, "task.tasks=[rte]", "precision=fp16")))
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("task", ["glue", "beir", "colbert", "efficiency"])
def test_flash_attention_2_without_flash_attn_is_one_rule_for_every_task(tmp_path: Path, task: str,
                                                                        monkeypatch) -> None:
    from harness.run.runner import run
    from tests.conftest import write_beir_folder

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else real(name, *a))
    write_tiny_glue(tmp_path / "glue")
    write_beir_folder(tmp_path / "data", "toy")
    extra = {"glue": glue_overrides(tmp_path, "task.tasks=[rte]"),
             "beir": ["task=beir", "task.train=false", "task.datasets=[toy]", "+task.catalog.toy={split: test}",
                      f"task.data_dir={tmp_path / 'data'}"],
             "colbert": ["task=colbert", "task.train=false", "task.datasets=[toy]", "+task.catalog.toy={split: test}",
                         f"task.data_dir={tmp_path / 'data'}"],
             "efficiency": ["task=efficiency", "task.n_docs=8"]}[task]
    cfg = compose([f"model.path={TINY_MODEL}", "model.name=tiny", "device=cpu", "precision=fp32",
                   f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs",
                   f"paths.cache={tmp_path}/cache", *extra, "model.attn_implementation=flash_attention_2"])
    with pytest.raises(HarnessError, match=r"model.attn_implementation=flash_attention_2 needs flash-attn, which is "
                                           r"not installed"):
        run(cfg)
    assert not list((tmp_path / "results").rglob("*.json")) if (tmp_path / "results").exists() else True


def test_a_glue_tokenisation_cache_with_token_ids_altered_in_place_is_rebuilt(tmp_path: Path, caplog) -> None:
    import datasets
    from transformers import AutoTokenizer

    from harness.tasks.glue.data import Split
    from harness.tasks.glue.tokens import cached_tokenize

    tok = AutoTokenizer.from_pretrained(TINY_MODEL)
    split = Split([f"the cat sat {i}" for i in range(8)], None, [i % 2 for i in range(8)])
    entry = tmp_path / "k" / "train"
    want = cached_tokenize(split, tok, 16, False, entry)["input_ids"]
    altered = datasets.load_from_disk(str(entry)).map(lambda r: {"input_ids": [1, *r["input_ids"][1:]]})
    altered.save_to_disk(str(tmp_path / "altered"))
    for arrow in entry.glob("*.arrow"):                    # same claim, same texts and labels, other token ids
        arrow.unlink()
    for arrow in (tmp_path / "altered").glob("*.arrow"):
        shutil.copyfile(arrow, entry / arrow.name)
    assert datasets.load_from_disk(str(entry))["input_ids"] != want
    with caplog.at_level("WARNING"):
        assert cached_tokenize(split, tok, 16, False, entry)["input_ids"] == want
    assert "does not hold the token ids its claim hashes" in caplog.text


def test_a_series_checkpoint_whose_trainer_finished_but_whose_config_is_broken_is_an_error(tmp_path: Path,
                                                                                           capsys) -> None:
    from harness.series.discover import incomplete
    from tests.test_series import make_run, series, series_args

    run_dir = make_run(tmp_path)
    for step in (100, 200, 300, 400):
        (run_dir / f"checkpoint-{step}" / "config.json").write_text('{"model_type": ')
    why = incomplete(run_dir / "checkpoint-100", settle=60)
    assert why.startswith("broken: config.json is not valid JSON, though its trainer_state.json")
    code, out = series(series_args(tmp_path), capsys)
    assert code == 2, out
    assert "error: no checkpoint could be evaluated: 4 broken, the first (step 100" in out
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("*.json"))


def test_a_series_whose_positions_are_shorter_than_max_length_is_refused_once_up_front(tmp_path: Path,
                                                                                     capsys) -> None:
    from tests.test_series import make_run, series, series_args

    run_dir = make_run(tmp_path)
    for step in (100, 200, 300, 400):
        config = run_dir / f"checkpoint-{step}" / "config.json"
        config.write_text(json.dumps({**json.loads(config.read_text()), "max_position_embeddings": 32}))
    code, out = series(series_args(tmp_path), capsys)
    assert code == 2, out
    assert out.count("task.max_length=64 is above model") == 1 and "32 token positions" in out
    assert "step 100 (" not in out                                   # no checkpoint was loaded or run


def test_a_run_whose_max_length_exceeds_the_positions_is_refused_before_loading(tmp_path: Path) -> None:
    from harness.run.runner import run

    write_tiny_glue(tmp_path / "glue")
    with pytest.raises(HarnessError, match=r"task.max_length=600 is above model 'tiny-modernbert''s 512 token "
                                           r"positions; set task.max_length<=512"):
        run(compose([*glue_overrides(tmp_path, "task.tasks=[rte]"), "task.max_length=600"]))
    assert not (tmp_path / "cache").exists()


def test_records_keep_the_file_they_were_read_from_unchanged(tmp_path: Path) -> None:
    """The readers' rescoring is in memory only: the record file and its sidecar are byte-identical after."""
    from harness.selection.comparable import comparable_records

    path, _ = old_record(tmp_path / "results")
    before = {p: p.read_bytes() for p in path.parent.iterdir()}
    got = [r for _, r in comparable_records(tmp_path / "results")]
    assert [r.main_score for r in got] == ["accuracy"]
    assert {p: p.read_bytes() for p in path.parent.iterdir()} == before
    assert replace(got[0], main_score="f1").score == got[0].metrics["f1"]
