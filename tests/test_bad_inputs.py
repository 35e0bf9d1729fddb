"""The bad-input catalogue: every kind of bad input a user can give, through the real command line (in process),
must end with exit code 2, no traceback, one ``error:`` line naming the file or key and the fix, and no ok record
touched; a failure caught by the up-front checks writes nothing at all.

Each case starts from a results folder holding an ok record of the same BEIR run (``overwrite=true``, so the bad
input is really read) and a private copy of the data it may break.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

from harness.core import results
from tests.conftest import SHARED_DATA, TINY_MODEL, compose, paths, write_beir_folder, write_triplets

TINY = [f"model.path={TINY_MODEL}", "model.name=tiny-modernbert", "model.normalize=false", "model.max_length=64",
        "precision=fp32", "device=cpu"]
KD_SAMPLE = SHARED_DATA / "msmarco-hardneg-sample" / "bge_example_msmarco.jsonl"
BAD_UTF8 = b"\xff\xfe broken \xc3\x28"


def beir(tmp: Path, *extra: str) -> list[str]:
    """The seeded BEIR run (tiny model on data/toy), evaluated again."""
    return ["task=beir", "model=all-minilm-l6-v2", *TINY, f"task.data_dir={tmp}/data", "task.datasets=[toy]",
            "+task.catalog.toy={split: test}", "task.train=false", "overwrite=true", *paths(tmp), *extra]


def dpr(tmp: Path, triplets: str, *extra: str) -> list[str]:
    return beir(tmp, "task.train=true", "task.train_data.source=file", f"task.train_data.path={triplets}",
                "task.batch_size=4", "task.loss=mnrl", *extra)


def glue(tmp: Path, *extra: str) -> list[str]:
    return ["task=glue", "model=all-minilm-l6-v2", *TINY, f"task.data_dir={tmp}/glue", "task.tasks=[rte]",
            "task.max_length=32", "task.batch_size=8", "task.epochs=1", *paths(tmp), *extra]


def colbert(tmp: Path, kd: str, *extra: str) -> list[str]:
    return ["task=colbert", "model=modernbert-base", *TINY[:2], "precision=fp32", "device=cpu",
            f"task.data_dir={tmp}/data", "task.datasets=[toy]", "+task.catalog.toy={split: test}", "task.index=exact",
            "task.train=true", "task.train_data.source=file", f"task.train_data.path={kd}", "task.train_data.n_ways=4",
            "task.batch_size=2", *paths(tmp), *extra]


# ------------------------------------------------------------------------------------------------ breaking files
def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def replace_line(path: Path, index: int, text: str | bytes) -> None:
    """Line ``index`` (0-based) of ``path`` becomes ``text`` (bytes: written raw, e.g. invalid UTF-8)."""
    raw = path.read_bytes().split(b"\n")
    raw[index] = text if isinstance(text, bytes) else text.encode()
    path.write_bytes(b"\n".join(raw))


def qrels(tmp: Path) -> Path:
    return tmp / "data" / "toy" / "qrels" / "test.tsv"


def set_qrels_score(tmp: Path, score: str) -> None:
    q, d, _ = lines_of(qrels(tmp))[2].split("\t")
    replace_line(qrels(tmp), 2, f"{q}\t{d}\t{score}")


def write_glue(root: Path, label: str = "entailment", header: str = "index\tsentence1\tsentence2\tlabel") -> None:
    rows = [header] + [f"{i}\tthe cat sat {i}\ta dog ran {i}\t{('entailment', 'not_entailment')[i % 2]}"
                       for i in range(12)]
    (root / "RTE").mkdir(parents=True, exist_ok=True)
    (root / "RTE" / "train.tsv").write_text("\n".join(rows) + "\n")
    rows[3] = rows[3].rsplit("\t", 1)[0] + f"\t{label}"
    (root / "RTE" / "dev.tsv").write_text("\n".join(rows) + "\n")


def kd_rows(tmp: Path, **over: object) -> str:
    row = {"query": "what is a star", "pos": ["a star is a sun"], "neg": ["bread", "cars", "rain"],
           "pos_scores": [9.0], "neg_scores": [1.0, 2.0, 3.0]}
    path = tmp / "kd.jsonl"
    path.write_text("".join(json.dumps(row | ({k: v for k, v in over.items()} if i == 1 else {})) + "\n"
                            for i in range(4)))
    return str(path)


def model_copy(tmp: Path) -> Path:
    dest = tmp / "model"
    shutil.copytree(TINY_MODEL, dest)
    return dest


def truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def unwritable(tmp: Path) -> Path:
    """A folder nobody may create files in: /sys (read-only even for root); chmod 0o500 as a normal user."""
    import os

    if os.geteuid() == 0:
        return Path("/sys/harness-results")
    d = tmp / "readonly"
    d.mkdir()
    d.chmod(0o500)
    return d / "results"


# ------------------------------------------------------------------------------------------------ the catalogue
@dataclass(frozen=True)
class Case:
    id: str
    args: Callable[[Path], list[str]]   # breaks what it needs under tmp, returns the command line
    names: str                          # regex: the file or key the error line must name ({tmp} = the case's folder)
    fix: str                            # regex: the fix the error line must give
    upfront: bool = True                # caught before any work: the results folder must be byte-identical


def _bad_corpus_line(tmp: Path, text: str | bytes) -> list[str]:
    replace_line(tmp / "data" / "toy" / "corpus.jsonl", 2, text)
    return beir(tmp)


def _bad_queries_line(tmp: Path, text: str | bytes) -> list[str]:
    replace_line(tmp / "data" / "toy" / "queries.jsonl", 1, text)
    return beir(tmp)


def _regrade_second_judgement(tmp: Path) -> None:
    """A second line for the first (query, doc) pair, with another grade."""
    q, d, g = lines_of(qrels(tmp))[1].split("\t")
    replace_line(qrels(tmp), 3, f"{q}\t{d}\t{int(g) + 1}")


def _triplets(tmp: Path, name: str, content: str | bytes) -> list[str]:
    path = tmp / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return dpr(tmp, str(path))


def _model(tmp: Path, breaker: Callable[[Path], None]) -> list[str]:
    m = model_copy(tmp)
    breaker(m)
    return beir(tmp, f"model.path={m}")


def _glue_file(tmp: Path, *extra: str, **kw: str) -> list[str]:
    write_glue(tmp / "glue", **kw)
    return glue(tmp, *extra)


def _run_file_taken(tmp: Path) -> list[str]:
    """The seeded record's TREC run file path holds a folder (save_run=true would write the file there)."""
    (record,) = (tmp / "results").rglob("toy.json")
    record.with_name("toy.run.trec.gz").mkdir()
    return beir(tmp, "save_run=true")


def _glue_bytes(tmp: Path) -> list[str]:
    write_glue(tmp / "glue")
    replace_line(tmp / "glue" / "RTE" / "dev.tsv", 4, b"4\tthe cat \xff sat\ta dog\tentailment")
    return glue(tmp)


def _glue_fp16(tmp: Path) -> list[str]:
    write_glue(tmp / "glue")
    return [a for a in glue(tmp) if a != "precision=fp32"] + ["precision=fp16"]


def _positions(model: Path, n: int) -> None:
    config = model / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "max_position_embeddings": n}))


CORPUS = r"{tmp}/data/toy/corpus\.jsonl"
QUERIES = r"{tmp}/data/toy/queries\.jsonl"
QRELS = r"{tmp}/data/toy/qrels/test\.tsv"
UTF8_FIX = r"UTF-8"
CASES = [
    # --- BEIR folders: presence (up front) -----------------------------------------------------------------
    Case("beir-folder-missing", lambda t: beir(t, f"task.data_dir={t}/nowhere"), r"{tmp}/nowhere/toy",
         r"task\.data_dir"),
    Case("beir-corpus-missing", lambda t: ((t / "data/toy/corpus.jsonl").unlink(), beir(t))[1], CORPUS,
         r"BEIR folder needs corpus\.jsonl"),
    Case("beir-queries-missing", lambda t: ((t / "data/toy/queries.jsonl").unlink(), beir(t))[1], QUERIES,
         r"BEIR folder needs"),
    Case("beir-split-missing", lambda t: beir(t, "task.split=dev"), r"{tmp}/data/toy/qrels/dev\.tsv",
         r"task\.split=<split>"),
    Case("beir-unknown-dataset", lambda t: beir(t, "task.datasets=[toyy]"), r"'toyy'", r"Add it to task\.catalog"),
    Case("beir-hub-only-offline", lambda t: beir(t, "task.data_dir=null", "task.datasets=[scifact]"),
         r"mteb/scifact", r"task\.data_dir=<dir containing scifact/>"),
    Case("beir-catalog-key-typo", lambda t: beir(t, "+task.catalog.toy.ignore_identical_id=true"),
         r"ignore_identical_id", r"ignore_identical_ids"),
    # --- BEIR folders: contents (found when read: the failure goes beside the ok record) ------------------------
    Case("corpus-bad-json", lambda t: _bad_corpus_line(t, '{"_id": "x", "text": '), CORPUS + r" line 3",
         r"fix or remove that line", upfront=False),
    Case("corpus-missing-id", lambda t: _bad_corpus_line(t, '{"text": "no id"}'), CORPUS + r" line 3",
         r"each line needs", upfront=False),
    Case("corpus-invalid-utf8", lambda t: _bad_corpus_line(t, BAD_UTF8), CORPUS + r" line 3.*byte", UTF8_FIX,
         upfront=False),
    Case("corpus-empty", lambda t: ((t / "data/toy/corpus.jsonl").write_text(""), beir(t))[1], CORPUS,
         r"Check the file", upfront=False),
    Case("corpus-duplicate-id", lambda t: _bad_corpus_line(t, lines_of(t / "data/toy/corpus.jsonl")[0]),
         CORPUS + r" line 3", r"must be unique", upfront=False),
    Case("queries-bad-json", lambda t: _bad_queries_line(t, "not json"), QUERIES + r" line 2",
         r"fix or remove that line", upfront=False),
    Case("queries-invalid-utf8", lambda t: _bad_queries_line(t, BAD_UTF8), QUERIES + r" line 2.*byte", UTF8_FIX,
         upfront=False),
    Case("queries-duplicate-id", lambda t: _bad_queries_line(t, '{"_id": "q0", "text": "another text"}'),
         QUERIES + r" line 2: query id 'q0' appears twice with different texts \(first at .*line 1\)",
         r"rename or remove one", upfront=False),
    Case("queries-null-text", lambda t: _bad_queries_line(t, '{"_id": "q1", "text": null}'),
         r"toy \({tmp}/data/toy\): 1 judged query has a null text \('q1'\)", r"give each a text", upfront=False),
    Case("queries-empty-text", lambda t: _bad_queries_line(t, '{"_id": "q1", "text": "  "}'),
         r"1 judged query has an empty text \('q1'\)", r"drop their qrels lines", upfront=False),
    Case("qrels-conflicting-grades", lambda t: (_regrade_second_judgement(t), beir(t))[1],
         QRELS + r" line 4: query 'q0' judges document 'd0-0' 3, but .*line 2 judges it 2", r"keep one of the lines",
         upfront=False),
    Case("qrels-non-numeric", lambda t: (set_qrels_score(t, "high"), beir(t))[1], QRELS + r" line 3",
         r"integer relevance grade", upfront=False),
    Case("qrels-fraction-1.5", lambda t: (set_qrels_score(t, "1.5"), beir(t))[1], QRELS + r" line 3",
         r"round or map", upfront=False),
    Case("qrels-fraction-0.5", lambda t: (set_qrels_score(t, "0.5"), beir(t))[1], QRELS + r" line 3",
         r"round or map", upfront=False),
    Case("qrels-columns", lambda t: (replace_line(qrels(t), 2, "q0 d0-1 1"), beir(t))[1], QRELS + r" line 3",
         r"tab-separated", upfront=False),
    Case("qrels-unknown-doc", lambda t: (set_qrels_score(t, "1") or replace_line(qrels(t), 2, "q0\tnope\t1"),
                                         beir(t))[1], r"{tmp}/data/toy", r"task\.strict_qrels=false", upfront=False),
    Case("qrels-invalid-utf8", lambda t: (replace_line(qrels(t), 2, BAD_UTF8), beir(t))[1],
         QRELS + r" line 3.*byte", UTF8_FIX, upfront=False),
    # --- retrieval settings and task specs (up front) ----------------------------------------------------------
    Case("config-top-k-below-cutoff", lambda t: beir(t, "task.top_k=5"), r"task\.top_k=5 is below 10",
         r"at least 10"),
    Case("config-shard-out-of-range", lambda t: beir(t, "task.shards=3", "task.shard=3"), r"task\.shard=3",
         r"< task\.shards=3"),
    Case("config-spec-main-metric", lambda t: beir(t, "task.spec.main_metric=ndcg_at_11"),
         r"spec\.main_metric='ndcg_at_11'", r"ndcg_at_10, ndcg_at_100"),
    Case("config-spec-selection-rule", lambda t: beir(t, "task.spec.selection.rule=bestest"),
         r"selection rule 'bestest'", r"best_run_on_sets"),
    # --- empty selections, counts and sizes (harness.core.typed: nonempty, count, positive) ------------------------
    Case("config-datasets-empty", lambda t: beir(t, "task.datasets=[]"), r"task\.datasets=\[\] selects nothing",
         r"list at least one, e\.g\. task\.datasets=\[arguana\] \(valid names: .*toy"),
    Case("config-max-queries-zero", lambda t: beir(t, "task.max_queries=0"), r"task\.max_queries=0 is below 1",
         r"integer >= 1, or to null \(every judged query\)"),
    Case("config-batch-tokens-zero", lambda t: beir(t, "task.batch_tokens=0"), r"task\.batch_tokens=0",
         r"set task\.batch_tokens to an integer >= 1"),
    Case("config-lr-negative", lambda t: beir(t, "task.lr=-1e-5"), r"task\.lr=-1e-05 must be above 0",
         r"a number > 0"),
    Case("config-plaid-nbits-zero", lambda t: colbert(t, "unused.jsonl", "task.plaid.nbits=0"),
         r"task\.plaid\.nbits=0", r"integer >= 1"),
    Case("config-glue-tasks-empty", lambda t: glue(t, "task.tasks=[]"), r"task\.tasks=\[\]",
         r"valid names: cola, mnli"),
    Case("config-glue-grid-empty", lambda t: glue(t, "task.grid.learning_rates=[]"),
         r"task\.grid\.learning_rates=\[\]", r"list at least one"),
    Case("config-glue-eval-interval-zero", lambda t: glue(t, "task.eval_interval.rte=0"),
         r"task\.eval_interval\.rte=0", r"integer >= 1"),
    Case("config-glue-weight-decay", lambda t: _glue_file(t, "task.weight_decay=0.2", "task.batch_size=1",
                                                          "task.lr=5e-5"),
         r"task\.weight_decay: weight decay 0\.2 under task\.weight_decay_convention=composer .* would shrink every "
         r"weight to \d+% of itself over the 12 steps", r"task\.weight_decay_convention=torch"),
    Case("config-glue-grid-weight-decay", lambda t: _glue_file(t, "task.grid.weight_decays=[1e-5,0.2]",
                                                               "task.batch_size=1", "task.lr=5e-5"),
         r"task\.grid\.weight_decays: weight decay 0\.2 ", r"task\.weight_decay_convention=torch"),
    # --- triplet files (DPR training) --------------------------------------------------------------------------
    Case("triplets-missing", lambda t: dpr(t, f"{t}/nope.tsv"), r"{tmp}/nope\.tsv", r"task\.train_data\.path"),
    Case("triplets-no-path", lambda t: beir(t, "task.train=true", "task.train_data.source=file"),
         r"task\.train_data\.path", r"task\.train_data\.path=<"),
    Case("triplets-columns", lambda t: _triplets(t, "t.tsv", "query\tpositive\tnegative\na\tb\n"),
         r"{tmp}/t\.tsv line 2", r"replace tabs inside the texts", upfront=False),
    Case("triplets-empty", lambda t: _triplets(t, "t.tsv", ""), r"{tmp}/t\.tsv", r"(rows|triplets)", upfront=False),
    Case("triplets-invalid-utf8", lambda t: _triplets(t, "t.tsv", b"query\tpositive\tnegative\na\t" + BAD_UTF8 +
                                                      b"\tc\n"), r"{tmp}/t\.tsv line 2.*byte", UTF8_FIX,
         upfront=False),
    Case("triplets-jsonl-bad-line", lambda t: _triplets(t, "t.jsonl", '{"query": "a", "positive": "b", '
                                                        '"negative": "c"}\n{oops\n'), r"{tmp}/t\.jsonl line 2",
         r"fix or remove that line", upfront=False),
    Case("triplets-extension", lambda t: _triplets(t, "t.xlsx", "a,b,c\n"), r"{tmp}/t\.xlsx", r"\.tsv",
         upfront=False),
    Case("triplets-too-few-queries", lambda t: dpr(t, str(write_triplets(t / "t.tsv", n=6)), "task.batch_size=16"),
         r"task\.batch_size=16", r"task\.batch_size<=", upfront=False),
    # --- GLUE TSVs -------------------------------------------------------------------------------------------
    Case("glue-folder-missing", lambda t: glue(t), r"{tmp}/glue", r"task\.data_dir"),
    Case("glue-unknown-task", lambda t: glue(t, "task.tasks=[rtx]"), r"'rtx'", r"rte"),
    Case("glue-unknown-label", lambda t: _glue_file(t, label="maybe"), r"{tmp}/glue/RTE/dev\.tsv line 4.*'maybe'",
         r"entailment", upfront=False),
    Case("glue-missing-column", lambda t: _glue_file(t, header="index\tsentence1\tsentence_two\tlabel"),
         r"{tmp}/glue/RTE/(train|dev)\.tsv", r"sentence2", upfront=False),
    Case("glue-invalid-utf8", lambda t: _glue_bytes(t), r"{tmp}/glue/RTE/dev\.tsv line 5.*byte", UTF8_FIX,
         upfront=False),
    Case("glue-fp16-on-cpu", _glue_fp16, r"precision=fp16 on device cpu", r"precision=fp32"),
    # --- KD files (ColBERT training) -------------------------------------------------------------------------
    Case("kd-missing", lambda t: colbert(t, f"{t}/kd-nope.jsonl"), r"{tmp}/kd-nope\.jsonl", r"task\.train_data"),
    Case("kd-scores-length", lambda t: colbert(t, kd_rows(t, neg_scores=[1.0])), r"{tmp}/kd\.jsonl line 2",
         r"(scores|one score)", upfront=False),
    Case("kd-bad-json", lambda t: colbert(t, (Path(kd_rows(t)).write_text('{"query": \n'), f"{t}/kd.jsonl")[1]),
         r"{tmp}/kd\.jsonl line 1", r"fix or remove that line", upfront=False),
    # --- model directories -----------------------------------------------------------------------------------
    Case("model-dir-missing", lambda t: beir(t, f"model.path={t}/no-model/"), r"{tmp}/no-model",
         r"model\.path="),
    Case("model-no-weights", lambda t: _model(t, lambda m: (m / "model.safetensors").unlink()), r"{tmp}/model",
         r"save_pretrained"),
    Case("model-truncated-weights", lambda t: _model(t, lambda m: truncate(m / "model.safetensors", 5000)),
         r"{tmp}/model/model\.safetensors", r"(Download|save) the model again"),
    Case("model-config-not-json", lambda t: _model(t, lambda m: (m / "config.json").write_text("{oops")),
         r"{tmp}/model/config\.json", r"Restore the file"),
    Case("model-no-config", lambda t: _model(t, lambda m: (m / "config.json").unlink()), r"{tmp}/model",
         r"config\.json"),
    Case("model-positions-below-max-length", lambda t: _model(t, lambda m: _positions(m, 32)),
         r"task\.max_length=64 is above model 'tiny-modernbert''s 32 token positions", r"task\.max_length<=32"),
    Case("model-hub-offline", lambda t: beir(t, "model.path=answerdotai/ModernBERT-base"),
         r"answerdotai/ModernBERT-base", r"model\.path=/path/to/model"),
    Case("model-path-is-a-file", lambda t: beir(t, f"model.path={model_copy(t)}/config.json"),
         r"model\.path={tmp}/model/config\.json is a file", r"folder that holds config\.json"),
    # --- config values -------------------------------------------------------------------------------------
    Case("config-unknown-task", lambda t: ["task=beri", *paths(t)], r"'beri'", r"beir"),
    Case("config-unknown-model", lambda t: ["model=modernbert-bas", *paths(t)], r"'modernbert-bas'",
         r"modernbert-base"),
    Case("config-key-typo", lambda t: beir(t, "task.lrr=1e-4"), r"task\.lrr", r"task\.lr\b"),
    Case("config-added-key-typo", lambda t: beir(t, "+task.lrr=1e-4"), r"lrr", r"'lr'"),
    Case("config-device-cuda", lambda t: beir(t, "device=cuda"), r"device=cuda", r"device=(auto|cpu)"),
    Case("config-device-unknown", lambda t: beir(t, "device=gpu"), r"'gpu'", r"device=auto, cpu, cuda"),
    Case("config-precision", lambda t: beir(t, "precision=fp8"), r"'fp8'", r"fp32"),
    Case("config-wrong-type", lambda t: beir(t, "task.lr=fast"), r"lr", r"(float|number)"),
    Case("config-choice", lambda t: beir(t, "task.similarity=euclid"), r"euclid", r"cosine"),
    Case("config-run-lock-key", lambda t: beir(t, "+run_lock.stale=10"), r"stale", r"stale_after"),
    # --- output paths ----------------------------------------------------------------------------------------
    Case("results-is-a-file", lambda t: ((t / "f").write_text("x"), [*beir(t), f"paths.results={t}/f"])[1],
         r"paths\.results={tmp}/f", r"point paths\.results at a directory"),
    Case("results-under-a-file", lambda t: ((t / "f").write_text("x"), [*beir(t), f"paths.results={t}/f/r"])[1],
         r"paths\.results={tmp}/f/r", r"point paths\.results at a directory"),
    Case("results-not-writable", lambda t: [*beir(t), f"paths.results={unwritable(t)}"], r"paths\.results=",
         r"writable folder"),
    Case("outputs-not-writable", lambda t: [*beir(t), f"paths.outputs={unwritable(t)}"], r"paths\.outputs=",
         r"writable folder"),
    Case("cache-is-a-file", lambda t: ((t / "f").write_text("x"), [*beir(t), f"paths.cache={t}/f"])[1],
         r"paths\.cache={tmp}/f", r"point paths\.cache at a directory"),
    Case("results-run-file-is-a-folder", _run_file_taken, r"{tmp}/results/.*/toy\.run\.trec\.gz is a folder",
         r"move or remove that folder", upfront=False),   # the folder the case makes is new: checked below
]


# ------------------------------------------------------------------------------------------------ running
@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """A results folder with an ok record of the BEIR run every case re-runs, and the data it read."""
    from harness.run.runner import run

    base = tmp_path_factory.mktemp("seeded")
    write_beir_folder(base / "data")
    (rec,) = run(compose([a for a in beir(base) if a != "overwrite=true"]))
    assert rec.status == "ok"
    shutil.rmtree(base / "cache")
    return base


def invoke(args: list[str], capfd) -> tuple[int, str]:
    """``python -m harness <args>`` in this process: (exit code, everything printed)."""
    import logging

    from harness import cli

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    capfd.readouterr()
    with mock.patch.object(sys, "argv", ["harness", *args]):
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:   # the CLI's logging set-up points at this test's captured streams: undo it
            root.handlers[:] = handlers
            root.setLevel(level)
    out, err = capfd.readouterr()
    return code, out + err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_one_error_line(code: int, printed: str, names: str, fix: str) -> None:
    """A refusal as the catalogues want it: exit 2, no traceback, one ``error:`` line naming ``names`` (a regex)
    and the ``fix``."""
    errors = [line for line in printed.splitlines() if line.startswith("error:")]
    assert code == 2, printed[-3000:]
    assert "Traceback" not in printed, printed[-3000:]
    assert len(errors) == 1, printed[-3000:]
    assert re.search(names, errors[0]), errors[0]
    assert re.search(fix, errors[0]), errors[0]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, seeded: Path, tmp_path: Path, capfd) -> None:
    shutil.copytree(seeded / "results", tmp_path / "results")
    shutil.copytree(seeded / "data", tmp_path / "data")
    before = snapshot(tmp_path / "results")
    if case.id.startswith("kd-") and not KD_SAMPLE.parent.is_dir():
        pytest.skip("needs ../shared/data")
    code, printed = invoke(case.args(tmp_path), capfd)
    assert_one_error_line(code, printed, case.names.format(tmp=re.escape(str(tmp_path))), case.fix)
    after = snapshot(tmp_path / "results")
    assert {k: v for k, v in after.items() if k in before} == before          # the ok record is untouched
    new = set(after) - set(before)
    if case.upfront:
        assert not new, new                                                   # up-front checks write nothing
        assert not [p for p in (tmp_path / "results").rglob("*") if p.name not in
                    {q.split("/")[-1] for q in before} and p.is_dir() and not any(p.iterdir())]
    else:
        assert all(".failed-" in k for k in new), new                         # a failure goes beside it


def test_the_catalogue_covers_forty_kinds() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 40
    for family in ("beir-", "corpus-", "qrels-", "triplets-", "glue-", "kd-", "model-", "config-", "results-"):
        assert any(c.id.startswith(family) for c in CASES), family


def test_a_failed_record_is_found_beside_the_ok_one(seeded: Path, tmp_path: Path, capfd) -> None:
    """Promise "a failure never replaces an ok record": the error says where each one is."""
    shutil.copytree(seeded / "results", tmp_path / "results")
    shutil.copytree(seeded / "data", tmp_path / "data")
    set_qrels_score(tmp_path, "1.5")
    code, printed = invoke(beir(tmp_path), capfd)
    assert code == 2
    (ok_path,) = (tmp_path / "results").rglob("toy.json")
    assert results.read_record(ok_path).status == "ok"
    (side,) = (tmp_path / "results").rglob("toy.failed-*")
    assert results.read_record(side).status == "failed"
    assert "the earlier ok record is kept" in printed and str(side) in printed
    assert [r.status for _, r in results.iter_records(tmp_path / "results")] == ["ok"]   # the leaderboard's view


EARLY = {
    "unknown dataset": (lambda t: beir(t, "task.datasets=[toyy]"), "unknown dataset 'toyy'"),
    "missing data folder": (lambda t: beir(t, f"task.data_dir={t}/nowhere"), "dataset folder not found"),
    "hub-only dataset offline": (lambda t: beir(t, "task.data_dir=null", "task.datasets=[scifact]"),
                                 "need the Hugging Face hub"),
    "hub training data offline": (lambda t: beir(t, "task.train=true"), "needs the Hugging Face hub"),
    "missing triplets": (lambda t: dpr(t, f"{t}/none.tsv"), "training triplets not found"),
    "results not writable": (lambda t: [*beir(t), f"paths.results={t}/f/r"], "which is a file"),
    "device absent": (lambda t: beir(t, "device=cuda"), "no CUDA device"),
}


@pytest.mark.parametrize("kind", list(EARLY))
def test_checks_run_before_the_model_loads(kind: str, tmp_path: Path, monkeypatch) -> None:
    """Promise "bad input fails before any work": names, paths, writability, the device and hub needs are checked
    before a model is loaded (here, loading one is an error)."""
    from harness import models
    from harness.core.errors import HarnessError
    from harness.run.runner import run

    def no_model(*a: object, **k: object) -> None:
        raise AssertionError("a model was loaded before the bad input was reported")

    monkeypatch.setattr(models, "load_sentence_transformer", no_model)
    write_beir_folder(tmp_path / "data")
    (tmp_path / "f").write_text("x")
    args, message = EARLY[kind]
    cli_args = [a for a in args(tmp_path) if not a.startswith("overwrite")]
    with pytest.raises(HarnessError, match=message):
        run(compose(cli_args))
    assert not (tmp_path / "results").exists()


def test_a_top_k_below_a_metrics_cutoff_leaves_that_metric_out(seeded: Path, tmp_path: Path, capfd) -> None:
    """task.top_k=10 over a 48-document corpus: metrics at 100 and 1000 would count only 10 hits, so the record
    leaves them out and says why (nDCG@10 and recall@10 stay)."""
    shutil.copytree(seeded / "data", tmp_path / "data")
    code, printed = invoke(beir(tmp_path, "task.top_k=10"), capfd)
    assert code == 0, printed[-3000:]
    (path,) = (tmp_path / "results").rglob("toy.json")
    rec = results.read_record(path)
    assert set(rec.metrics) == {"ndcg_at_10", "map_at_10", "recall_at_10", "mrr_at_10"}
    assert rec.details["metrics_left_out"] == {
        "metrics": ["ndcg_at_100", "recall_at_100", "recall_at_1000"], "why": "their cutoff exceeds top_k=10"}


def test_a_subset_run_is_marked_in_the_terminal_summary(seeded: Path, tmp_path: Path, capfd) -> None:
    """Issue 31: the page marks a number computed on part of a dataset; the terminal summary marks it too."""
    shutil.copytree(seeded / "data", tmp_path / "data")
    code, printed = invoke(beir(tmp_path, "task.max_queries=2"), capfd)
    assert code == 0, printed[-3000:]
    (row,) = [ln for ln in printed.splitlines() if ln.startswith("beir ") and " toy " in ln]
    assert row.split()[5].endswith("§")
    assert "§ toy: evaluated on part of the dataset (max_queries=2); not comparable with full-set numbers" in printed
    code, printed = invoke(beir(tmp_path), capfd)
    assert "§" not in printed


def test_a_folder_in_a_records_way_and_a_weight_decay_fail_before_the_model_loads(seeded: Path, tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """The run file's path taken by a folder (it used to fail with a traceback after the whole evaluation, writing
    no record) and a GLUE weight decay that would shrink the weights (it used to train to Spearman -0.03) are
    refused before any model is loaded."""
    from harness import models
    from harness.core.errors import HarnessError
    from harness.run.runner import run
    from harness.tasks.glue import compute as glue_compute

    def no_model(*a: object, **k: object) -> None:
        raise AssertionError("a model was loaded before the bad input was reported")

    monkeypatch.setattr(models, "load_sentence_transformer", no_model)
    monkeypatch.setattr(glue_compute, "context", no_model)
    shutil.copytree(seeded / "results", tmp_path / "results")
    shutil.copytree(seeded / "data", tmp_path / "data")
    with pytest.raises(HarnessError, match=r"toy\.run\.trec\.gz is a folder"):
        run(compose(_run_file_taken(tmp_path)))
    write_glue(tmp_path / "glue")
    with pytest.raises(HarnessError, match=r"would shrink every weight to 27% of itself over the 12 steps"):
        run(compose(glue(tmp_path, "task.weight_decay=0.2", "task.batch_size=1", "task.lr=5e-5")))
    assert not list((tmp_path / "results").glob("glue"))
