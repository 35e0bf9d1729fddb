"""What a run prints: the harness' own progress and errors; library records below ERROR go only to the job's log
file (``log_level=INFO|DEBUG`` brings them back); ``log_level=WARNING`` silences progress lines too."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from harness.core.data_origin import LOCAL_MARK, local_data
from harness.core.errors import HarnessError
from harness.core.results import STATUS_OK, STATUS_SKIPPED, SUBSET_MARK, ResultRecord, evaluated_subset

log = logging.getLogger("harness.progress")

#: top-level loggers of the libraries whose routine messages a user cannot act on
LIBRARIES = (
    "transformers", "sentence_transformers", "datasets", "huggingface_hub", "mteb", "accelerate", "torch", "pylate",
    "urllib3", "filelock", "fsspec", "httpx", "codecarbon", "tensorboard", "torch.utils.tensorboard",
)
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _library_noise(record: logging.LogRecord) -> bool:
    """Drops library records below ERROR (a console handler's filter; the log file keeps them)."""
    return record.levelno >= logging.ERROR or record.name.split(".", 1)[0] not in LIBRARIES


def level_of(log_level: str | None) -> int | None:
    """``log_level`` as a logging level (None: the quiet default); an unknown name is a one-line error."""
    if log_level in (None, "", "null"):
        return None
    name = str(log_level).upper()
    if name not in LEVELS:
        raise HarnessError(f"log_level={log_level!r} is not one of {', '.join(LEVELS)} (or null for the default)")
    return getattr(logging, name)


def configure(log_level: str | None = None, verbose: object = False) -> None:
    """Set up the console for one run (call after Hydra has configured logging)."""
    level = level_of(log_level)
    import transformers.utils.logging as tlog
    if level is not None or verbose:   # an earlier quiet job of this process (multirun) must not keep its filters
        for logger in (logging.getLogger(), *(logging.getLogger(n) for n in LIBRARIES)):
            for handler in logger.handlers:
                handler.removeFilter(_library_noise)
        tlog.enable_progress_bar()
    if level is not None:
        logging.getLogger().setLevel(level)
        for name in LIBRARIES:
            logging.getLogger(name).setLevel(level)
        tlog.set_verbosity(level)
        return
    if verbose:   # hydra.verbose: Hydra has set the levels it was asked for; show what they let through
        return
    tlog.disable_default_handler()   # transformers' own stderr handler: route its records through ours instead
    tlog.enable_propagation()
    tlog.disable_progress_bar()      # "Loading weights": a local file read, not progress a user waits for
    import huggingface_hub.utils
    huggingface_hub.utils.enable_progress_bars()   # ... but downloads keep theirs
    import datasets.utils.logging  # noqa: F401 - importing it adds datasets' own stream handler, filtered below
    for logger in (logging.getLogger(), *(logging.getLogger(n) for n in LIBRARIES)):
        for handler in logger.handlers:   # the console's, not the log file's; logging adds a filter once
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                handler.addFilter(_library_noise)


# ------------------------------------------------------------------------------------------------ progress
def interactive() -> bool:
    """Whether progress can be redrawn in place: stderr (where bars go) is a terminal."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def progress_interval() -> float:
    """Seconds between progress lines where no bar is drawn: ``HARNESS_PROGRESS_S`` (default 30)."""
    try:
        return float(os.environ.get("HARNESS_PROGRESS_S", "30"))
    except ValueError:
        return 30.0


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class Progress:
    """A counted step: a tqdm bar on a terminal, one log line when done; ``show=False``: nothing."""

    def __init__(self, total: int | None, desc: str, unit: str = "it", *, show: bool = True,
                 unit_scale: bool = False, each_update_is_a_step: bool = False) -> None:
        from tqdm.auto import tqdm
        self.total, self.desc, self.unit = total, desc, unit
        self.show = show and log.isEnabledFor(logging.INFO)      # log_level=WARNING: no bar either
        self.steps = each_update_is_a_step and not interactive()
        self.n, self.t0 = 0, time.perf_counter()
        self.last = self.t0                                       # when the last progress line was written
        self.bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, leave=False,
                        disable=not (self.show and interactive()))

    def update(self, n: int = 1, note: str = "", left_s: float | None = None) -> None:
        """``n`` more done; ``note``: how the last step went; ``left_s`` replaces the estimate (e.g. a time budget)."""
        self.n += n
        self.bar.update(n)
        now = time.perf_counter()
        elapsed = now - self.t0
        left = elapsed / self.n * (self.total - self.n) if self.total and 0 < self.n < self.total else None
        if self.show and self.steps:
            left = left if left_s is None else left_s
            log.info("%s: %d/%s %s%s (%s in all%s)", self.desc, self.n, self.total or "?", self.unit,
                     f", {note}" if note else "", _duration(elapsed), f", about {_duration(left)} left" if left else "")
        elif self.show and not interactive() and now - self.last >= progress_interval():
            self.last = now                  # no bar (a SLURM log, a pipe): a line every progress_interval() s
            done = f"{self.n:,}/{self.total:,}" if self.total else f"{self.n:,}"
            pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
            log.info("%s: %s %s%s, %s so far%s", self.desc, done, self.unit, pct, _duration(elapsed),
                     f", about {_duration(left)} left" if left else "")

    def stop(self, reason: str) -> None:
        """Finish before ``total``: one line saying where and why (a budget reached)."""
        if self.show:
            log.info("%s: stopped at %d/%s %s: %s", self.desc, self.n, self.total or "?", self.unit, reason)
        self.show = False

    def close(self, ok: bool = True) -> None:
        self.bar.close()
        if self.show and ok and not self.steps:
            count = f"{self.n:,}" if self.n < 10_000 else f"{self.n / 1000:,.0f}k"
            log.info("%s: %s %s in %s", self.desc, count, self.unit, _duration(time.perf_counter() - self.t0))

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.close(ok=exc_type is None)


class Step:
    """What :func:`step` yields: set ``outcome`` to say how the step ended (default "done")."""

    outcome: str = "done"


@contextmanager
def step(what: str, *, show: bool = True, starting: str = "") -> Iterator[Step]:
    """One long step of unknown length: a line when it starts (on a terminal) and one when it finishes."""
    if show and interactive():
        log.info("%s ...%s", what, f" ({starting})" if starting else "")
    t0, result = time.perf_counter(), Step()
    yield result
    if show:
        log.info("%s: %s (%s)", what, result.outcome, _duration(time.perf_counter() - t0))


# -------------------------------------------------------------------------------- the table at the end of a run
def seconds(timings: Mapping[str, Any]) -> float:
    """A record's wall time: its timings' ``total`` where present (GLUE), else the sum of its numeric parts."""
    numbers = {k: v for k, v in timings.items() if isinstance(v, int | float)}
    return float(numbers["total"]) if "total" in numbers else float(sum(numbers.values()))


def format_summary(records: Sequence[ResultRecord]) -> str:
    """One row per record: task, dataset, model, main score (marks explained below), status, seconds."""
    rows = [("task", "dataset", "model", "run", "metric", "score", "status", "time (s)")]
    cut: dict[str, str] = {}
    local: dict[str, str] = {}
    for r in records:
        score = r.score
        subset, other = evaluated_subset(r), local_data(r)
        if subset and r.status == STATUS_OK:
            cut[r.dataset] = subset
        if other and r.status == STATUS_OK:
            local[r.dataset] = other
        marks = (SUBSET_MARK if subset else "") + (LOCAL_MARK if other else "")
        rows.append((
            r.task, r.dataset, r.model.get("name", "?"), r.run_id, r.main_score,
            f"{score:.4f}{marks}" if r.status == STATUS_OK and score is not None else "-",
            r.status if r.status == STATUS_OK else
            f"skipped: {(r.error or '')[:60]}" if r.status == STATUS_SKIPPED else f"FAILED: {(r.error or '')[:60]}",
            f"{seconds(r.timings):.1f}" if r.timings else "-",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += [f"{SUBSET_MARK} {d}: evaluated on part of the dataset ({why}); not comparable with full-set numbers"
              for d, why in cut.items()]
    lines += [f"{LOCAL_MARK} {d}: {why}, not the pinned official copy; not comparable with published numbers"
              for d, why in local.items()]
    return "\n".join(lines)


def print_summary(records: Sequence[ResultRecord]) -> None:
    if records:
        print("\n" + format_summary(records) + "\n", flush=True)


def format_series(title: str, rows: Sequence[tuple[int, float | None, str]], higher_is_better: bool = True) -> str:
    """A series as a table: a row per step (score, difference to the previous scored step, or why none), best ``*``."""
    scored = [(step, score) for step, score, _ in rows if score is not None]
    best = (max if higher_is_better else min)(scored, key=lambda p: p[1])[0] if scored else None
    table = [("step", "score", "vs previous")]
    previous: float | None = None
    for step, score, note in rows:
        if score is None:
            table.append((str(step), "-", note))
            continue
        change = f"{score - previous:+.4f}" if previous is not None else "-"
        table.append((str(step), f"{score:.4f}" + ("*" if step == best else " "), change))
        previous = score
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    lines = [title] + ["  " + "  ".join([r[0].rjust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2])
                                         if r[1] != "-" else r[2]]).rstrip() for r in table]
    if best is not None:
        lines.append(f"  * best step: {best} ({'highest' if higher_is_better else 'lowest'} score)")
    return "\n".join(lines)
