"""Issue 53, fidelity fifth pass: MNLI chaining carries every weight but the final classifier, as the authors'
``load_ignore_keys=["state/model/model.classifier*"]`` did (MB@2fed0f2:src/evals/finetuning_jobs.py:288-299), on
every architecture the harness chains; the chained points' run ids change and no other's does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import TINY_MODEL, compose

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------ MNLI chaining
def tiny_config(kind: str):
    """A random-init config of ``kind`` small enough to build in a blink (the tiny ModernBERT's vocabulary)."""
    from transformers import BertConfig, DebertaV2Config, ModernBertConfig, RobertaConfig

    shape = {"vocab_size": 2000, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "max_position_embeddings": 128}
    if kind == "modernbert":
        return ModernBertConfig(**shape, local_attention=16, global_attn_every_n_layers=2, pad_token_id=0,
                                cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)
    if kind == "bert":
        return BertConfig(**shape)
    if kind == "roberta":
        return RobertaConfig(**{**shape, "max_position_embeddings": 130}, pad_token_id=1)
    return DebertaV2Config(**shape, pooler_hidden_size=32, pooler_dropout=0.0, relative_attention=True,
                           position_buckets=16, pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm")


def pretrained_and_mnli(kind: str, tmp: Path) -> tuple[str, str]:
    """A pretrained encoder folder (the base model alone, as a hub checkpoint without a classification head) and an
    'MNLI checkpoint' of it: a 3-way classifier built on it with every weight moved, so each one differs from both
    the pretrained weights and a freshly built head."""
    from transformers import AutoModel, AutoModelForSequenceClassification

    torch.manual_seed(0)
    pre, mnli = tmp / f"{kind}-pre", tmp / f"{kind}-mnli"
    AutoModel.from_config(tiny_config(kind)).save_pretrained(pre)
    model = AutoModelForSequenceClassification.from_pretrained(pre, num_labels=3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5 + 0.25)
    model.save_pretrained(mnli)
    return str(pre), str(mnli)


#: what stays fresh after chaining, per architecture: the final classifier alone. BERT's pooler sits in the encoder
#: (``bert.pooler``), ModernBERT's head (dense, norm) and DeBERTa's ContextPooler (``pooler``) beside it, all
#: carried; RoBERTa's ClassificationHead puts its dense layer inside ``classifier``: the authors' glob
#: ``model.classifier*`` leaves it fresh too, and so does the harness
FRESH = {
    "modernbert": ["classifier.weight", "classifier.bias"],
    "bert": ["classifier.weight", "classifier.bias"],
    "roberta": ["classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight",
                "classifier.out_proj.bias"],
    "deberta-v2": ["classifier.weight", "classifier.bias"],
}


@pytest.mark.parametrize("kind", list(FRESH))
def test_mnli_chaining_carries_every_weight_but_the_final_classifier(kind: str, tmp_path: Path) -> None:
    """After chaining, every weight outside ``classifier.*`` equals the MNLI checkpoint's (the encoder and any
    pooling head beside the classifier: on today's tree ModernBERT's ``head`` and DeBERTa's ``pooler`` kept their
    pretrained or fresh weights), and the classifier is the freshly built one, not MNLI's; the weights the record
    names as fresh (``details.init_fresh``) are exactly the classifier's."""
    from transformers import AutoModelForSequenceClassification

    from harness.tasks.glue.classification import load_classifier

    pre, mnli = pretrained_and_mnli(kind, tmp_path)
    torch.manual_seed(7)
    chained = load_classifier(pre, 2, attn_implementation="eager", init_from=mnli).state_dict()
    torch.manual_seed(7)
    built = load_classifier(pre, 2, attn_implementation="eager")
    source = AutoModelForSequenceClassification.from_pretrained(mnli, attn_implementation="eager").state_dict()
    carried = [k for k in chained if not k.startswith("classifier.")]
    assert carried and all(k in source for k in carried)
    for name in carried:
        assert torch.equal(chained[name], source[name]), f"{kind}: {name} is not MNLI's"
    fresh = [k for k in chained if k.startswith("classifier.")]
    for name in fresh:
        assert torch.equal(chained[name], built.state_dict()[name]), f"{kind}: {name} is not the fresh one"
        assert chained[name].shape != source[name].shape or not torch.equal(chained[name], source[name])
    # what the record names as fresh (BERT and RoBERTa carried all this before, their encoder holding every weight
    # but the classifier's; the record did not say which weights started fresh)
    from harness.tasks.glue.classification import fresh_parameters

    assert sorted(fresh) == sorted(FRESH[kind]) == sorted(fresh_parameters(built))


def test_a_chained_checkpoint_of_another_model_is_refused_in_one_line(tmp_path: Path) -> None:
    from harness.core.errors import HarnessError
    from harness.tasks.glue.classification import load_classifier

    pre, _ = pretrained_and_mnli("bert", tmp_path)
    _, other = pretrained_and_mnli("roberta", tmp_path)
    with pytest.raises(HarnessError, match=r"does not match model .*chain only checkpoints fine-tuned from the same") \
            as refused:
        load_classifier(pre, 2, attn_implementation="eager", init_from=other)
    assert "\n" not in str(refused.value) and "(missing bert.embeddings" in str(refused.value)   # one line: why


def test_the_modernbert_head_is_carried_with_the_authors_head_settings(tmp_path: Path) -> None:
    """ModernBERT under ``model.glue`` (the authors' head: no head norm): the MNLI checkpoint saved without the
    norm is carried into a model built the same way, its ``head.dense`` included."""
    from harness.models.spec import ModelSpec
    from harness.tasks.glue.classification import load_classifier

    head = ModelSpec.from_config(compose(["model=modernbert-base"]).model).glue
    torch.manual_seed(0)
    mnli_model = load_classifier(str(TINY_MODEL), 3, head=head)
    with torch.no_grad():
        mnli_model.head.dense.weight.add_(1.0)
    mnli_model.save_pretrained(tmp_path / "mnli")
    chained = load_classifier(str(TINY_MODEL), 1, head=head, init_from=str(tmp_path / "mnli"))
    assert isinstance(chained.head.norm, torch.nn.Identity)
    assert torch.equal(chained.head.dense.weight, mnli_model.head.dense.weight)
    assert chained.classifier.out_features == 1


def test_only_chained_points_change_their_run_id(tmp_path: Path, monkeypatch) -> None:
    """A point that starts from MNLI's checkpoint (or ``task.init_from``) hashes ``load.chain`` (version 2), so its
    run id changes; the same point from the pretrained encoder keeps its id, and so does MNLI's."""
    from harness.run import planning
    from harness.tasks.glue import planner as stages
    from harness.trial.toy_data import write_tiny_glue

    glue = write_tiny_glue(tmp_path / "glue")
    base = ["task=glue", "model=modernbert-base", f"model.path={TINY_MODEL}", "model.name=tiny",
            f"task.data_dir={glue}",
            "task.lr=3e-5", "task.weight_decay=1e-6", "task.epochs=1", "task.seed=1618", "device=cpu",
            f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs", f"paths.cache={tmp_path}/cache"]

    def ids(*extra: str) -> dict[str, str]:
        cfg = compose([*base, *extra])
        return {c.dataset: c.run_id for c in planning.every_cell(cfg, planning.plan(cfg))}

    plain = ids("task.tasks=[mnli,rte]")
    chained = ids("task.tasks=[mnli,rte]", f"task.init_from={TINY_MODEL}")
    assert chained["rte"] != plain["rte"] and chained["mnli"] != plain["mnli"]   # both start from the folder
    again = stages.STAGES.replaced(**{"load.chain": stages.Stage(3, what="a later fix")})
    monkeypatch.setattr(stages, "STAGES", again)
    assert ids("task.tasks=[mnli,rte]", f"task.init_from={TINY_MODEL}")["rte"] != chained["rte"]
    assert ids("task.tasks=[mnli,rte]") == plain                                   # unchained: untouched


# ------------------------------------------------------------------------------------ one answer to "done?"
GRAPH = """data: ???
stages:
  eval: {task: beir, overrides: [task.train=false, "task.data_dir=${data}", "task.datasets=[scifact,nfcorpus]"]}
leaderboard: false
min_finished: 0.5
overrides: []
launcher: local
cluster: local
site: null
"""


def graph_args(tmp: Path, *extra: str) -> list[str]:
    return [f"paper={tmp / 'graph.yaml'}", f"paper.data={tmp / 'data'}", "model=modernbert-base",
            f"model.path={TINY_MODEL}", "model.name=tiny", "model.max_length=64", "precision=fp32", "device=cpu",
            f"paths.results={tmp}/results", f"paths.outputs={tmp}/outputs", f"paths.cache={tmp}/cache", *extra]


def run_graph(tmp: Path, *extra: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "harness.paper", *graph_args(tmp, *extra)], capture_output=True,
                          text=True, cwd=REPO, timeout=900)


def in_process(main, args: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    return code, out + err


def stamps(tmp: Path) -> dict[tuple[str, str], str]:
    """(model row, dataset) -> created_at of every record."""
    from harness.core import results

    return {(r.model["name"], r.dataset): r.created_at for _, r in results.iter_records(tmp / "results")}


def test_a_changed_local_dataset_is_one_pending_cell_for_status_resubmit_runner_and_series(tmp_path: Path,
                                                                                          capsys) -> None:
    """One function decides "done" (:func:`harness.tasks.runplan.done`): after a local dataset changes, the paper graph's
    ``--status`` shows that cell pending (it said done: it counted any finished record), a resubmit computes it
    and nothing else, the runner plans exactly it, and a series over the same data agrees; ``overwrite=true``, under
    which the runner skips nothing, is refused by the graph (as by the series) instead of being ignored."""
    from harness.paper.__main__ import main as paper_main
    from harness.run import planning
    from harness.run.overrides import compose_config
    from harness.series.__main__ import main as series_main
    from harness.tasks.runplan import pending
    from harness.trial.toy_data import write_beir_folder
    from tests.test_series import write_checkpoint

    (tmp_path / "graph.yaml").write_text(GRAPH)
    for name in ("scifact", "nfcorpus"):
        write_beir_folder(tmp_path / "data", name)
    write_checkpoint(tmp_path / "run", 100)
    series = ["task=beir", "model=modernbert-base", f"model.path={tmp_path / 'run'}", "model.max_length=64",
              "precision=fp32", "device=cpu", "task.train=false", f"task.data_dir={tmp_path / 'data'}",
              "task.datasets=[scifact,nfcorpus]", f"paths.results={tmp_path}/results",
              f"paths.outputs={tmp_path}/outputs", f"paths.cache={tmp_path}/cache"]
    logs = tmp_path / "logs"   # hydra.run.dir, out of habit: each job's logs go under it (test_hydra_* below)
    ran = run_graph(tmp_path, f"hydra.run.dir={logs}/graph")
    assert ran.returncode == 0, ran.stderr[-3000:]
    job_logs = logs / "graph" / "eval"
    assert (job_logs / ".hydra" / "config.yaml").is_file() and list(job_logs.glob("*.log"))
    code, out = in_process(series_main, [*series, f"hydra.run.dir={logs}/series"], capsys)
    assert code == 0, out
    (unit_log,) = (logs / "series").glob("*/run.log")
    assert unit_log.parent.name.startswith("beir_100_") and "nfcorpus" in unit_log.read_text()
    first = stamps(tmp_path)
    assert set(first) == {(m, d) for m in ("tiny", "run-step100") for d in ("scifact", "nfcorpus")}

    # nfcorpus now means other data: its local copy is another folder (a corrected copy, one document more); the
    # dataset's definition (its data spec) is what the runner compares, the run id stays (it never holds datasets)
    shutil.copytree(tmp_path / "data" / "nfcorpus", tmp_path / "data" / "nfcorpus-v2")
    with (tmp_path / "data" / "nfcorpus-v2" / "corpus.jsonl").open("a") as fh:
        fh.write('{"_id": "new", "title": "cats", "text": "a cat sat on a new mat"}\n')
    moved = "+task.catalog.nfcorpus.local=nfcorpus-v2"
    series.append(moved)

    code, out = in_process(paper_main, [*graph_args(tmp_path, moved), "--status"], capsys)
    assert code == 0, out
    row = next(line.split() for line in out.splitlines() if line.startswith("eval "))
    assert row[1:4] == ["pending", "1", "0"], out
    stale = [line for line in out.splitlines() if "its record's data is not what the dataset holds now" in line]
    assert len(stale) == 1 and "nfcorpus (" in stale[0] and "scifact" not in stale[0], out
    code, out = in_process(paper_main, [*graph_args(tmp_path, moved), "--dry-run"], capsys)
    assert code == 0 and next(line.split() for line in out.splitlines() if line.startswith("eval "))[2:4] == \
        ["1", "0"], out

    job = [o for o in graph_args(tmp_path, moved) if not o.startswith("paper")] + [
        "task=beir", "task.train=false", f"task.data_dir={tmp_path / 'data'}", "task.datasets=[scifact,nfcorpus]"]
    plan = planning.plan(compose_config(job))
    assert [c.dataset for c in pending(plan, plan.cells)] == ["nfcorpus"]             # the runner: that cell
    code, out = in_process(series_main, [*series, "--status"], capsys)
    assert code == 0 and next(line.split() for line in out.splitlines() if line.startswith("step100 "))[1:4] == \
        ["todo", "1", "0"], out      # todo: run here, never submitted (--launcher slurm would say pending)
    assert "nfcorpus (" in out and "its record's data is not what the dataset holds now" in out

    ran = run_graph(tmp_path, moved)                                                  # the resubmit
    assert ran.returncode == 0, ran.stderr[-3000:]
    code, out = in_process(series_main, series, capsys)
    assert code == 0, out
    now = stamps(tmp_path)
    for row_name in ("tiny", "run-step100"):
        assert now[(row_name, "scifact")] == first[(row_name, "scifact")]             # nothing else computed
        assert now[(row_name, "nfcorpus")] > first[(row_name, "nfcorpus")]            # that cell again
    code, out = in_process(paper_main, [*graph_args(tmp_path, moved), "--status"], capsys)
    assert next(line.split() for line in out.splitlines() if line.startswith("eval "))[1:4] == ["done", "1", "1"]

    # overwrite: the runner redoes every cell; the graph and the series refuse it in one line (never a 'done' the
    # runner would not honour)
    assert len(pending(planning.plan(compose_config([*job, "overwrite=true"])), plan.cells)) == 2
    code, out = in_process(paper_main, [*graph_args(tmp_path, moved, "overwrite=true"), "--status"], capsys)
    assert code == 2 and out.count("\n") == 1 and "a paper graph computes what is not done yet" in out, out
    code, out = in_process(series_main, [*series, "overwrite=true"], capsys)
    assert code == 2 and "a series computes what has no ok record yet" in out, out


# ------------------------------------------------------------------------------------ hydra.* habits
REFUSED = {"hydra/launcher=slurm": "launches its own jobs; ask for SLURM with",
           "hydra.launcher.partition=gpu": "launches its own jobs",
           "hydra.job.chdir=true": "runs its jobs in the folder it runs in",
           "hydra.sweep.dir=/tmp/x": "takes hydra.run.dir=<folder>"}


@pytest.mark.parametrize("override", list(REFUSED))
def test_hydra_overrides_the_paper_graph_cannot_apply_are_refused_in_one_line(override: str, tmp_path: Path,
                                                                             capsys) -> None:
    from harness.paper.__main__ import main as paper_main

    (tmp_path / "graph.yaml").write_text(GRAPH)
    code, out = in_process(paper_main, [*graph_args(tmp_path), override, "--dry-run"], capsys)
    assert code == 2 and out.count("\n") == 1, out
    assert out.startswith(f"error: {override!r}: python -m harness.paper ") and REFUSED[override] in out


def test_hydra_run_dir_on_the_paper_graph_gives_each_job_its_log_folder(tmp_path: Path, capsys, monkeypatch) -> None:
    """``hydra.run.dir=<dir>`` (a traceback before: the graph composed it as a config key): said once, written to
    the graph's context, and each run job's ``python -m harness`` gets ``hydra.run.dir=<dir>/<job key>``
    (test_a_changed_local_dataset_... runs it for real: Hydra writes the job's log and .hydra/ there);
    ``hydra.job.chdir=false`` is what the jobs do anyway."""
    import json

    from harness.paper import job
    from harness.paper.__main__ import main as paper_main
    from harness.trial.toy_data import write_beir_folder

    (tmp_path / "graph.yaml").write_text(GRAPH)
    for name in ("scifact", "nfcorpus"):
        write_beir_folder(tmp_path / "data", name)
    code, out = in_process(paper_main, [*graph_args(tmp_path), f"hydra.run.dir={tmp_path}/logs",
                                        "hydra.job.chdir=false", "--dry-run"], capsys)
    assert code == 0, out
    assert f"[paper] hydra.run.dir: each job's log goes to {tmp_path}/logs/<job key>/" in out
    ran: dict[str, list[str]] = {}
    monkeypatch.setattr(job, "_harness", lambda key, overrides: ran.setdefault(key, list(overrides)))
    monkeypatch.setattr(job, "run_job_process", lambda context, key: job.run_job(str(context), key) or 0)
    code, out = in_process(paper_main, [*graph_args(tmp_path), f"hydra.run.dir={tmp_path}/logs"], capsys)
    assert code == 0, out
    assert ran["eval"][-1] == f"hydra.run.dir='{tmp_path}/logs/eval'"
    assert not any(o.startswith("hydra") for o in ran["eval"][:-1])
    context = json.loads((tmp_path / "paper" / "tiny" / "context.json").read_text())
    assert context["log_dir"] == f"{tmp_path}/logs" and not any(o.startswith("hydra") for o in context["common"])


@pytest.mark.parametrize("override", list(REFUSED))
def test_hydra_overrides_the_series_cannot_apply_are_refused_in_one_line(override: str, tmp_path: Path,
                                                                         capsys) -> None:
    """(test_a_changed_local_dataset_... runs a series with ``hydra.run.dir``: each checkpoint run's log is
    ``<dir>/<run key>/run.log``.)"""
    from harness.series.__main__ import main as series_main
    from tests.test_series import make_run

    make_run(tmp_path)
    code, out = in_process(series_main, ["task=beir", f"model.path={tmp_path / 'run'}", override, "--dry-run"],
                           capsys)
    assert code == 2 and out.count("\n") == 1, out
    assert out.startswith(f"error: {override!r}: python -m harness.series ") and REFUSED[override] in out


def test_hydra_run_dir_on_the_series_is_taken(tmp_path: Path, capsys) -> None:
    """``python -m harness.series ... hydra.run.dir=<dir>``: a traceback before (its overrides were set on the
    composed config); planned now, the folder taken for the checkpoint runs' logs."""
    from harness.series.__main__ import main as series_main
    from tests.test_series import make_run

    make_run(tmp_path)
    code, out = in_process(series_main, ["task=beir", "model=modernbert-base", f"model.path={tmp_path / 'run'}",
                                         "model.max_length=64", "task.train=false", f"task.data_dir={tmp_path}/data",
                                         "task.datasets=[scifact]", f"hydra.run.dir={tmp_path}/logs",
                                         "hydra.job.chdir=false", "--dry-run"], capsys)
    assert code == 0 and "4 to run, 0 done" in out, out


# ------------------------------------------------------------------------------------ readings marked
def test_table_5s_gte_mrpc_cells_are_footnoted_as_f1_and_never_best(tmp_path: Path) -> None:
    """GTE-en-MLM's MRPC 92.1 / 93.5 are F1 by our reading (docs/fidelity.md): footnoted like its QQP cells, so
    GTE-en-MLM-large's 93.5 is no longer the best published large MRPC number (DeBERTaV3-large's 92.2 is)."""
    from harness.leaderboard import build_leaderboard
    from harness.leaderboard.cells import OTHER_METRIC_MARK, ranked

    glue = build_leaderboard([tmp_path], published=True).table("glue")
    for size, value in (("base", "92.1"), ("large", "93.5")):
        cell = glue.cells[f"pub:GTE-en-MLM-{size}|GTE-en-MLM|{size}"]["mrpc"]
        assert cell.text == value + OTHER_METRIC_MARK and cell.other_metric == "F1" and not ranked(cell)
        assert "our reading" in cell.note
    large = {row: cells["mrpc"] for row, cells in glue.cells.items() if row.endswith("|large") and "mrpc" in cells}
    best = max((c for c in large.values() if ranked(c)), key=lambda c: c.value)
    assert best.value == 92.2 and best is glue.cells["pub:DeBERTaV3-large|DeBERTaV3|large"]["mrpc"]


def test_fidelity_rows_the_audit_named_say_our_reading() -> None:
    """Each reading the fifth pass's audit found presented as the authors' is marked, and task=code has its rows."""
    from tests.test_protocol_fidelity import ROWS, parse

    reading = {(parse(r)[0][0], parse(r)[1]): r[4] for r in ROWS}   # (task=..., key) -> source
    glue = ("task.scoring_protocol", "task.early_stopping.patience_batches", "task.weight_decay_convention",
            "task.adam_beta2", "task.definitions.mrpc.metric", *(f"model.glue.{k}" for k in (
                "classifier_pooling", "classifier_activation", "classifier_dropout", "classifier_norm",
                "attention_dropout", "attention_output_dropout")))
    code = ("task.title_convention", "task.source.run", "task.catalog.codesearchnet.split",
            "task.catalog.stackoverflow-qa.split")
    for task, key in [*(("task=glue", k) for k in glue), ("task=colbert", "task.gradient_accumulation_steps"),
                      *(("task=code", k) for k in code)]:
        assert "**our reading**" in reading[(task, key)], (task, key)
    text = (REPO / "docs" / "fidelity.md").read_text()
    assert "dataloader_drop_last" in text and "training_args.py:204-212" in text
