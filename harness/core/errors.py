"""Errors a user can fix: each message names the problem and the fix."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable


class HarnessError(Exception):
    """A problem with the user's input or environment; the CLI prints it without a traceback."""


class DataError(HarnessError):
    """A data file is missing, malformed or inconsistent."""


class HubUnavailableError(HarnessError):
    """A hub model or dataset was asked for and the hub cannot be reached."""


class TrainingDivergedError(HarnessError):
    """Training produced a NaN/inf loss."""


def no_hub_copy(name: str, folder: str | None = None) -> DataError:
    """A dataset the catalog gives no hub copy of: the local folder is the only source, so name it."""
    return DataError(f"dataset {name!r} has no hub copy in the catalog; pass task.data_dir=<dir containing "
                     f"{folder or name}/>.")


def one_line(exc: BaseException | str) -> str:
    """A message on one line (a library's multi-line text inside ours is joined), for the CLI's ``error:`` line."""
    return " ".join(str(exc).split())


def print_error(exc: BaseException | str, code: int = 2) -> int:
    """Print the CLI's ``error: <one line>`` to stderr; returns ``code``, the exit status to give."""
    print(f"error: {one_line(exc)}", file=sys.stderr, flush=True)
    return code


def closest_first(name: str, valid: Iterable[str]) -> list[str]:
    """Valid names ordered by similarity to ``name`` (closest first)."""
    valid = sorted(set(valid))
    return sorted(valid, key=lambda v: (-difflib.SequenceMatcher(None, name.lower(), v.lower()).ratio(), v))


def unknown_name(kind: str, name: str, valid: Iterable[str], how: str = "") -> HarnessError:
    options = closest_first(name, valid)
    plural = kind[:-1] + "ies" if kind.endswith("y") else kind + "s"
    msg = f"unknown {kind} {name!r}. Valid {plural} (closest first): {', '.join(options)}."
    if how:
        msg += f" {how}"
    return HarnessError(msg)
