"""Quiet by default: library noise (transformers' LOAD REPORT table, INFO chatter) stays off the console and in the
job's log file; ``log_level`` (or ``hydra.verbose``) brings it back; the run's own progress and summary remain."""

from __future__ import annotations

import io
import logging
import os
import re
from pathlib import Path

import pytest

from harness.core import console
from harness.core.errors import HarnessError
from tests.conftest import REPO
from tests.forked import run_module


@pytest.fixture()
def handlers(tmp_path: Path):
    """Hydra's job logging: a console and a file handler on the root logger (restored afterwards)."""
    import transformers.utils.logging as tlog

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    out = io.StringIO()
    screen, file = logging.StreamHandler(out), logging.FileHandler(tmp_path / "job.log")
    root.handlers[:] = [screen, file]
    root.setLevel(logging.INFO)
    yield out, tmp_path / "job.log"
    root.handlers[:], level = saved
    root.setLevel(level)
    for name in console.LIBRARIES:
        logging.getLogger(name).setLevel(logging.NOTSET)
    tlog.set_verbosity_warning()
    tlog.disable_propagation()
    tlog.enable_default_handler()
    tlog.enable_progress_bar()
    file.close()


def _emit() -> None:
    logging.getLogger("transformers.modeling_utils").warning("BertModel LOAD REPORT from: /some/model")
    logging.getLogger("sentence_transformers.SentenceTransformer").info("Load pretrained SentenceTransformer")
    logging.getLogger("mteb.models").error("mteb broke")
    logging.getLogger("harness.tasks.retrieval.planner").info("stdlib: 100 docs, 20 queries")


def test_default_keeps_library_noise_in_the_log_file_only(handlers) -> None:
    import transformers.utils.logging as tlog

    screen, logfile = handlers
    console.configure(None, False)
    _emit()
    shown = screen.getvalue()
    assert "stdlib: 100 docs" in shown and "mteb broke" in shown          # our progress, and library errors
    assert "LOAD REPORT" not in shown and "Load pretrained" not in shown
    assert "LOAD REPORT" in logfile.read_text()                             # nothing lost
    assert not tlog.is_progress_bar_enabled()                               # no "Loading weights" bars


@pytest.mark.parametrize("how", [("INFO", False), (None, True)])
def test_log_level_or_hydra_verbose_brings_it_back(handlers, how) -> None:
    screen, _ = handlers
    console.configure(None, False)          # an earlier quiet job in the same process (multirun)
    console.configure(*how)
    _emit()
    assert "LOAD REPORT" in screen.getvalue()
    if how[0] == "INFO":
        assert "Load pretrained SentenceTransformer" in screen.getvalue()


def test_bad_log_level_is_a_one_line_error() -> None:
    with pytest.raises(HarnessError, match=r"log_level='loud' is not one of DEBUG, INFO, WARNING, ERROR"):
        console.level_of("loud")


@pytest.mark.slow
def test_main_job_prints_progress_and_summary_without_library_tables(tmp_path: Path) -> None:
    """The default command (packaged MiniLM, stdlib code set; smaller here) through the real CLI."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    p = run_module("harness", "task.catalog.stdlib.max_queries=20", "task.catalog.stdlib.max_corpus=100",
                   "precision=fp32", f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs",
                   f"paths.cache={tmp_path}/cache", cwd=REPO, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    both = p.stdout + p.stderr
    for noise in ("LOAD REPORT", "UNEXPECTED", "Loading weights", "Load pretrained SentenceTransformer"):
        assert noise not in both, noise
    # not a terminal: no bar, one line per finished step (the corpus encoding, the search)
    assert re.search(r"stdlib: corpus: [\d,.]+k? tokens in [\d.]+ (s|min)", p.stdout), p.stdout[-2000:]
    assert not re.search(r"stdlib: corpus:\s+\d+%\|", both)                             # ... and no bar
    assert re.search(r"code\s+stdlib\s+all-minilm-l6-v2\s+eval=fp32-\w+\s+ndcg_at_10\s+0\.\d{4}\s+ok", p.stdout)
    (log,) = (tmp_path / "outputs" / "hydra").glob("*/cli.log")
    assert "LOAD REPORT" in log.read_text()                                           # kept for whoever needs it


def test_progress_off_a_terminal_is_one_line_per_finished_step(handlers, monkeypatch: pytest.MonkeyPatch) -> None:
    screen, _ = handlers
    monkeypatch.setattr(console, "interactive", lambda: False)
    with console.Progress(3000, "scifact: corpus", "tokens") as bar:
        for _ in range(3):
            bar.update(1000)
    with console.Progress(3, "efficiency/short_fixed", "passes", each_update_is_a_step=True) as passes:
        passes.update(1, "warm-up 2.0 s")
        passes.update(1, "timed 2.0 s")
        passes.stop("1 of 2 timed passes fit in the 5 s budget per set")
    with console.step("PLAID index over 10 documents") as done:
        done.outcome = "built"
    lines = screen.getvalue().splitlines()
    assert [re.sub(r"[\d.]+ s\b", "T s", line) for line in lines] == [
        "scifact: corpus: 3,000 tokens in T s",
        "efficiency/short_fixed: 1/3 passes, warm-up T s (T s in all, about T s left)",
        "efficiency/short_fixed: 2/3 passes, timed T s (T s in all, about T s left)",
        "efficiency/short_fixed: stopped at 2/3 passes: 1 of 2 timed passes fit in the T s budget per set",
        "PLAID index over 10 documents: built (T s)",
    ]


def test_a_terminal_also_sees_a_step_start_and_log_level_warning_silences_progress(handlers, monkeypatch) -> None:
    screen, _ = handlers
    monkeypatch.setattr(console, "interactive", lambda: True)
    with console.step("compiling", starting="first use, about 2 minutes"):
        pass
    assert screen.getvalue().splitlines()[0] == "compiling ... (first use, about 2 minutes)"
    with pytest.raises(RuntimeError), console.step("failing"):
        raise RuntimeError("boom")
    assert "failing:" not in screen.getvalue()          # a step that raised says nothing more than its error
    console.configure("WARNING")
    with console.Progress(2, "queries", "texts") as bar, console.step("search"):
        bar.update(2)
    assert "queries:" not in screen.getvalue() and "search:" not in screen.getvalue() and bar.bar.disable


def test_progress_writes_a_line_every_interval_when_no_bar_is_drawn(monkeypatch, caplog) -> None:
    """Issue 31: with output to a file (a SLURM log) a long step writes done/total, the share and an ETA at least
    every HARNESS_PROGRESS_S seconds (30 by default), not only when it ends."""
    import logging

    from harness.core import console

    monkeypatch.setenv("HARNESS_PROGRESS_S", "0")
    monkeypatch.setattr(console, "interactive", lambda: False)
    caplog.set_level(logging.INFO, logger=console.log.name)
    with console.Progress(100, "corpus", "tokens") as bar:
        for _ in range(4):
            bar.update(25)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("corpus: 25/100 tokens (25%), ") and "left" in lines[0]
    assert any(line.startswith("corpus: 75/100 tokens (75%)") for line in lines)
    assert len(lines) == 5 and lines[-1].startswith("corpus: 100 tokens in ")      # 4 progress lines, then the end
    monkeypatch.setenv("HARNESS_PROGRESS_S", "3600")
    caplog.clear()
    with console.Progress(100, "corpus", "tokens") as bar:
        bar.update(50)
    assert len(caplog.records) == 1                                                 # only the final line
