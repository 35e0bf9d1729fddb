"""The one JSONL reader of every local data format (BEIR, MLDR, KD files, CodeXGLUE): why not ``datasets``'
json loader: a bad line must be an error naming the file and line before any work, not a pyarrow trace."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.errors import DataError


def jsonl_rows(path: Path, required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line of a JSONL file (gzipped when it ends in ``.gz``; a BOM is
    ignored); a line that is not a JSON object, or lacks a ``required`` field, is an error naming the line."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path} line {lineno}: not valid JSON ({exc.msg}). Each line must be one JSON "
                                "object; fix or remove that line.") from None
            if not isinstance(row, dict):
                raise DataError(f"{path} line {lineno}: expected a JSON object, got {type(row).__name__}.")
            missing = [k for k in required if k not in row]
            if missing:
                raise DataError(f"{path} line {lineno}: missing field(s) {missing}; each line needs {list(required)}.")
            yield lineno, row
