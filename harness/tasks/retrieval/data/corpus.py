"""A retrieval corpus read as it is used: ids in memory, texts read chunk by chunk from where they lie, so millions of
documents are never held whole; a document is ``title + " " + text``, stripped, or the text alone (as mteb and BEIR)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.errors import DataError
from harness.data.files import json_object, opened, reading

#: the most characters of text one chunk holds (with its token ids, what encoding holds at once: about 4 bytes a
#: character at most), and the most documents
CHUNK_CHARS, CHUNK_DOCS = 1 << 26, 1 << 18


def document(title: str, text: str) -> str:
    """A document's text as encoded: ``title + " " + text`` stripped, the text alone (stripped) without a title."""
    return f"{title} {text}".strip() if title else text.strip()


def chunk_bounds(chars: np.ndarray, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, int]]:
    """[a, b) of consecutive chunks of at most CHUNK_CHARS characters (a longer document alone), CHUNK_DOCS."""
    stop = len(chars) if stop is None else stop
    ends = np.cumsum(chars[start:stop], dtype=np.int64)
    a, before = start, 0
    while a < stop:
        b = start + int(np.searchsorted(ends, before + CHUNK_CHARS, side="right"))
        b = min(max(b, a + 1), a + CHUNK_DOCS, stop)
        yield a, b
        before, a = int(ends[b - start - 1]), b


class Corpus:
    """Document ids (in corpus order), their lengths in characters, their texts read on demand, their hashes."""

    ids: list[str]
    chars: np.ndarray
    content: Any = None
    _key: str | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def __eq__(self, other: object) -> bool:
        """The same documents: ids, and texts by their content key."""
        return isinstance(other, Corpus) and self.ids == other.ids and self.key == other.key

    __hash__ = None   # type: ignore[assignment]

    def _read(self, positions: np.ndarray) -> list[tuple[str, str]]:
        """(title, text) of the documents at ``positions`` (ascending), in that order."""
        raise NotImplementedError

    @property
    def key(self) -> str:
        if self._key is None:
            self._key = texts_key(t for _, chunk in self.chunks() for t in chunk)
        return self._key

    def texts_at(self, positions: Sequence[int] | np.ndarray) -> list[str]:
        """The documents at ``positions`` (any order), as encoded."""
        pos = np.asarray(positions, dtype=np.int64)
        order = np.argsort(pos, kind="stable")
        out: list[str] = [""] * len(pos)
        for i, (title, text) in zip(order.tolist(), self._read(pos[order]), strict=True):
            out[i] = document(title, text)
        return out

    def texts(self, start: int, stop: int) -> list[str]:
        """The documents [start, stop), as encoded."""
        return [document(t, x) for t, x in self._read(np.arange(start, min(stop, len(self)), dtype=np.int64))]

    def bounds(self) -> list[tuple[int, int]]:
        """[start, stop) of the chunks the corpus is read in (:func:`chunk_bounds`)."""
        return list(chunk_bounds(self.chars))

    def chunks(self) -> Iterator[tuple[int, list[str]]]:
        """(first position, texts) of consecutive chunks covering the corpus."""
        for a, b in self.bounds():
            yield a, self.texts(a, b)

    def rows(self) -> Iterator[tuple[str, str, str]]:
        """(id, title, text) of every document in order, chunk by chunk (exports, peers)."""
        for a, b in chunk_bounds(self.chars):
            yield from ((self.ids[i], t, x) for i, (t, x) in zip(range(a, b), self._read(np.arange(a, b)), strict=True))

    def hash_content(self) -> Any:
        """A sha256 over every (id, title, text), in order (the corpus part of a dataset's content fingerprint)."""
        h = hashlib.sha256()
        for did, title, text in self.rows():
            h.update(f"{did}\x1f{title}\x1f{text}\x1e".encode())
        return h

    def without_titles(self) -> Corpus:
        """The same documents with their titles left out (CoIR's convention: the text alone)."""
        return _Untitled(self)

    def has_titles(self) -> bool:
        return any(t for _, t, _ in self.rows())


def texts_key(texts: Sequence[str] | Iterator[str]) -> str:
    """Content hash of texts in order (what their embeddings depend on, besides the model)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode())
        h.update(b"\x1e")
    return "texts:" + h.hexdigest()[:24]


class InMemoryCorpus(Corpus):
    """A corpus of lists: the small sets the harness builds (code mined from a tree, CoSQA, NanoBEIR's hub layout)."""

    def __init__(self, ids: list[str], titles: list[str], texts: list[str]) -> None:
        if not len(ids) == len(titles) == len(texts):
            raise ValueError("ids, titles and texts must have one entry per document")
        self.ids, self.titles, self.text_list = ids, titles, texts
        self.chars = np.fromiter((len(a) + len(b) + 1 for a, b in zip(titles, texts, strict=True)), dtype=np.int64,
                                 count=len(ids))
        self.content = self.hash_content()

    def _read(self, positions: np.ndarray) -> list[tuple[str, str]]:
        return [(self.titles[i], self.text_list[i]) for i in positions.tolist()]


class _Untitled(Corpus):
    def __init__(self, base: Corpus) -> None:
        self.base, self.ids, self.chars = base, base.ids, base.chars

    def _read(self, positions: np.ndarray) -> list[tuple[str, str]]:
        return [("", text) for _, text in self.base._read(positions)]


class SubsetCorpus(Corpus):
    """Some documents of ``base``, at its ``positions`` (ascending)."""

    def __init__(self, base: Corpus, positions: np.ndarray) -> None:
        self.base, self.positions = base, np.asarray(positions, dtype=np.int64)
        self.ids = [base.ids[i] for i in self.positions.tolist()]
        self.chars = base.chars[self.positions]
        self.content = self.hash_content()

    def _read(self, positions: np.ndarray) -> list[tuple[str, str]]:
        return self.base._read(self.positions[positions])


class ArrowCorpus(Corpus):
    """A hub copy's corpus: a memory-mapped ``datasets.Dataset`` read a slice at a time, keyed by its source."""

    def __init__(self, table: Any, source: str, id_column: str = "_id") -> None:
        self.table, self.source = table, source
        self.ids = [str(x) for x in table[id_column]]
        self.has_title = "title" in table.column_names
        columns = ["text", *(["title"] if self.has_title else [])]
        self.view = table.select_columns(columns)
        self.chars = np.zeros(len(self.ids), dtype=np.int64)
        for a in range(0, len(self.ids), 1 << 16):      # lengths only: chunks are sized by characters
            rows = self.view[a : a + (1 << 16)]
            self.chars[a : a + len(rows["text"])] = [len(x or "") for x in rows["text"]]

    def _read(self, positions: np.ndarray) -> list[tuple[str, str]]:
        if not len(positions):
            return []
        a, b = int(positions[0]), int(positions[-1]) + 1
        rows = self.view[a:b] if b - a == len(positions) else self.view.select(positions.tolist())[:]
        titles = rows["title"] if self.has_title else [""] * len(rows["text"])
        return [(str(t or ""), str(x or "")) for t, x in zip(titles, rows["text"], strict=True)]

    @property
    def key(self) -> str:
        return f"hub:{self.source}"


class JsonlCorpus(Corpus):
    """A JSONL corpus file scanned once (ids, byte offsets, lengths, hash); texts then read by offset."""

    def __init__(self, path: Path, id_key: str = "_id", id_name: str = "document id", empty_fix: str = "") -> None:
        self.path, self.id_key = path, id_key
        self.ids, offsets, chars = [], [], []
        content, texts = hashlib.sha256(), hashlib.sha256()
        seen: set[str] = set()
        for lineno, offset, row in _scan(path, (id_key, "text")):
            did = str(row[id_key])
            if did in seen:
                first = next(n for n, _, r in _scan(path) if str(r[id_key]) == did)   # error path only: rescan
                raise DataError(f"{path} line {lineno}: duplicate {id_name} {did!r} (first on line {first}); "
                                "document ids must be unique: rename or remove one of them.")
            seen.add(did)
            title, text = str(row.get("title") or ""), str(row["text"] or "")
            self.ids.append(did)
            offsets.append(offset)
            chars.append(len(title) + len(text) + 1)
            content.update(f"{did}\x1f{title}\x1f{text}\x1e".encode())
            texts.update(document(title, text).encode() + b"\x1e")
        if not self.ids:
            raise DataError(f"{path} is empty: the corpus has no documents{empty_fix}")
        self.offsets, self.chars = np.asarray(offsets, dtype=np.int64), np.asarray(chars, dtype=np.int64)
        self.content, self._key = content, "texts:" + texts.hexdigest()[:24]
        self._fh: Any = None
        self._stat = _stat(path)

    def _lines(self, positions: np.ndarray) -> Iterator[dict[str, Any]]:
        """The rows at ``positions`` (ascending): a seek where they are not consecutive, else read on."""
        if self._fh is None:
            if _stat(self.path) != self._stat:
                raise DataError(f"{self.path} changed while it was being read (its size or modification time is not "
                                "what it was when loaded); run again once the file is no longer being written.")
            self._fh = opened(self.path)
        fh, at = self._fh, None
        for i in positions.tolist():
            if at != self.offsets[i]:
                fh.seek(int(self.offsets[i]))
            line = fh.readline()
            while not line.strip():      # blank lines between documents
                line = fh.readline()
            at = fh.tell()
            yield json.loads(line.decode("utf-8"))

    def _read(self, positions: np.ndarray) -> list[tuple[str, str]]:
        return [(str(r.get("title") or ""), str(r["text"] or "")) for r in self._lines(positions)]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fh": None}

    def __del__(self) -> None:
        if getattr(self, "_fh", None) is not None:
            self._fh.close()


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _scan(path: Path, required: tuple[str, ...] = ()) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line number, byte offset, object) of each non-empty line of a JSONL file, checked as ``jsonl_rows``."""
    offset = 0
    with reading(path), opened(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            start, offset = offset, offset + len(raw)
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw, start = raw[3:], start + 3
            if raw.strip():
                yield lineno, start, json_object(path, lineno, raw.decode("utf-8"), required)
