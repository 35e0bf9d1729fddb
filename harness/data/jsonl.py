"""The one JSONL reader of every local data format (BEIR, MLDR, KD files, CodeXGLUE): why not ``datasets``'
json loader: a bad line must be an error naming the file and line before any work, not a pyarrow trace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.data.files import text_lines
from harness.errors import DataError


def jsonl_rows(path: Path, required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line of a JSONL file (gzipped when it ends in ``.gz``; a BOM is
    ignored); invalid UTF-8, a line that is not a JSON object, or one lacking a ``required`` field is an error
    naming the line and the fix."""
    for lineno, line in enumerate(text_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path} line {lineno}: not valid JSON ({exc.msg}). Each line must be one JSON "
                            "object; fix or remove that line.") from None
        if not isinstance(row, dict):
            raise DataError(f"{path} line {lineno}: expected a JSON object, got {type(row).__name__}. Each line "
                            "must be one JSON object (JSON Lines): convert a JSON array to one object per line.")
        missing = [k for k in required if k not in row]
        if missing:
            raise DataError(f"{path} line {lineno}: missing field(s) {missing}; each line needs {list(required)}: "
                            "add the field(s) to that line.")
        yield lineno, row
