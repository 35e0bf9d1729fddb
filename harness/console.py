"""What a run prints. By default: the harness' own progress (log lines, progress bars, the summary) and errors;
library records below ERROR (transformers' "LOAD REPORT" table on every MiniLM load, mteb's and
sentence-transformers' INFO chatter) go only to the job's log file (``<hydra output dir>/<job name>.log``, e.g. ``outputs/hydra/<time>/cli.log``), and
transformers' "Loading weights" bars are off (download bars stay). ``log_level=INFO|DEBUG|WARNING`` or
``hydra.verbose=...`` brings everything back to the console.
"""

from __future__ import annotations

import logging

from harness.errors import HarnessError

#: top-level loggers of the libraries whose routine messages a user cannot act on
LIBRARIES = (
    "transformers", "sentence_transformers", "datasets", "huggingface_hub", "mteb", "accelerate", "torch", "pylate",
    "urllib3", "filelock", "fsspec", "httpx", "codecarbon", "tensorboard", "torch.utils.tensorboard",
)
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class LibraryNoise(logging.Filter):
    """Drops library records below ERROR (a console handler's filter; the log file keeps them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or record.name.split(".", 1)[0] not in LIBRARIES


def _console_handlers(logger: logging.Logger) -> list[logging.Handler]:
    return [h for h in logger.handlers if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]


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
                for f in [f for f in handler.filters if isinstance(f, LibraryNoise)]:
                    handler.removeFilter(f)
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
    noise = LibraryNoise()
    for logger in (logging.getLogger(), *(logging.getLogger(n) for n in LIBRARIES)):
        for handler in _console_handlers(logger):
            if not any(isinstance(f, LibraryNoise) for f in handler.filters):
                handler.addFilter(noise)
