"""Reading local data files (UTF-8 text, plain or gzipped; delimited rows, JSON Lines, Parquet), so an undecodable
file is one ``DataError`` line naming the file, line and fix, not a traceback (hence not ``datasets``' json loader)."""

from __future__ import annotations

import csv
import gzip
import json
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.core.errors import DataError, one_line

UTF8_FIX = "re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 old > new)"


def opened(path: Path, mode: str = "rb", **kwargs: Any) -> Any:
    """``path`` opened (``.gz``: gunzipped)."""
    return (gzip.open if path.suffix == ".gz" else open)(path, mode, **kwargs)


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Reading ``path`` in the block: bad UTF-8, a corrupt gzip or an unreadable file is a one-line DataError."""
    try:
        yield
    except UnicodeDecodeError:
        raise utf8_error(path) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: not a valid gzip file ({one_line(exc)}); re-compress it with gzip, or drop the "
                        ".gz suffix if it is plain text.") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({one_line(exc.strerror or exc)}); check that it is a readable "
                        "file.") from None


def text_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 text file (ends kept; BOM dropped; ``.gz`` gunzipped), read as :func:`reading`."""
    with reading(path), opened(path, "rt", encoding="utf-8-sig", newline="") as fh:
        yield from fh


def utf8_error(path: Path) -> DataError:
    """The error for a file that is not valid UTF-8, naming the line and byte offset of its first invalid sequence
    (offsets of the uncompressed text for ``.gz``; lines end at ``\\n``, ``\\r\\n`` or ``\\r``)."""
    offset, lineno = 0, 1
    with opened(path) as fh:
        for raw in fh:  # binary lines end at b"\n", which no multi-byte UTF-8 sequence contains
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                head = raw[: exc.start]
                lineno += head.count(b"\r") - head.count(b"\r\n")
                where = "byte offset" if path.suffix != ".gz" else "uncompressed byte offset"
                return DataError(f"{path} line {lineno}: invalid UTF-8 byte 0x{raw[exc.start:exc.start + 1].hex()} at "
                                 f"{where} {offset + exc.start} ({exc.reason}); {UTF8_FIX}.")
            offset += len(raw)
            lineno += 1 + raw.count(b"\r") - raw.count(b"\r\n")
    return DataError(f"{path}: not valid UTF-8; {UTF8_FIX}.")


def _csv_error(path: Path, start: int, end: int, exc: csv.Error) -> DataError:
    """A csv failure of the row that starts on line ``start`` (and was read up to line ``end``)."""
    runs = f" (the row runs on to line {end})" if end > start else ""
    if "field limit" in str(exc):
        fix = (f"a field is longer than {csv.field_size_limit()} characters: an unbalanced quote probably runs on "
               "past the row's end; balance the quotes on that line (or shorten the field)")
    else:
        fix = "fix the quoting on that line"
    return DataError(f"{path} line {start}: {one_line(exc)}{runs}; {fix}.")


def csv_rows(path: Path, delimiter: str, quoting: int = csv.QUOTE_MINIMAL) -> Iterator[tuple[int, list[str]]]:
    """(start line, fields) of each row of a delimited UTF-8 file (blank: ``[]``); problems are one-line DataErrors."""
    reader = csv.reader(text_lines(path), delimiter=delimiter, quoting=quoting)
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise _csv_error(path, start, reader.line_num, exc) from None
        yield start, row


def jsonl_rows(path: Path, required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line of a JSONL file; a bad line is an error naming it."""
    for lineno, line in enumerate(text_lines(path), start=1):
        if line.strip():
            yield lineno, json_object(path, lineno, line, required)


def json_object(path: Path, lineno: int, line: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """Line ``lineno`` of the JSONL file ``path`` as an object with the ``required`` fields, else a one-line error."""
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
    return row


def table_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) of each row of a Parquet or JSONL file; unreadable Parquet is a one-line DataError."""
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        try:
            rows = pq.read_table(path).to_pylist()
        except (pa.ArrowException, OSError) as exc:
            raise DataError(f"{path}: not a readable Parquet file ({one_line(exc)[:200]}); re-export it (e.g. "
                            "pandas.DataFrame.to_parquet) or convert it to JSONL.") from None
        for i, row in enumerate(rows, start=1):
            yield f"{path} row {i}", row
        return
    for lineno, row in jsonl_rows(path):
        yield f"{path} line {lineno}", row


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """``rows`` as JSON Lines: UTF-8, LF line ends, non-ASCII text written as is."""
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
