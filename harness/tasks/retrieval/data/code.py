"""Mine a CodeSearchNet-style retrieval set from Python source (the installed stdlib by default), with no hub and no
downloads: query = a function's docstring summary; document = the function's code with that docstring removed."""

from __future__ import annotations

import ast
import gc
import hashlib
import importlib.util
import inspect
import os
import platform
import re
import sysconfig
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from harness.core.errors import DataError
from harness.tasks.retrieval.data.dataset import RetrievalDataset, in_memory

#: fnmatch patterns (case-sensitive) tested against every component of a file's path relative to the root.
DEFAULT_EXCLUDE: tuple[str, ...] = (
    "test", "tests", "test_*.py", "*_test.py", "conftest.py",  # test docstrings describe tests, not code
    "idlelib", "lib2to3", "turtledemo",                          # stdlib apps / legacy tools
    "site-packages", "dist-packages", "__pycache__",             # installed third-party code, caches
    ".*", "venv", "node_modules",                                # hidden dirs (.git, .venv, .tox), envs
)

# Summaries that describe nothing by themselves (kept modest on purpose): pointers, deprecation and TODO notes.
_TRIVIAL = re.compile(r"(deprecated|see(?! if\b| whether\b)|same as|alias(es)?|todo|xxx)\b", re.IGNORECASE)
# A bare call signature, optionally with a return annotation: "f(x) -> y", "D.get(k[,d]) -> D[k] if k in D".
_SIGNATURE = re.compile(r"[A-Za-z_][\w.]*\([^()]*\)\s*(->.*)?")

_FUNC = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCK = (ast.stmt, ast.excepthandler, ast.match_case)  # nodes whose bodies may hold def/class statements


@dataclass
class _Function:
    doc_id: str
    summary: str      # "" when the summary was rejected (the function is still a corpus document)
    code: str


def stdlib_root() -> Path:
    """Directory of the running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def build_code_retrieval_set(root: str | Path | None = None, *, name: str | None = None,
                             max_queries: int | None = 500, max_corpus: int | None = None, min_summary_words: int = 4,
                             min_code_lines: int = 3, max_code_chars: int = 4000,
                             exclude: tuple[str, ...] = DEFAULT_EXCLUDE) -> RetrievalDataset:
    """Mine functions with docstrings under ``root`` (None = installed stdlib) into a retrieval set: a document per
    function or method (``<relpath>:<qualname>:<lineno>``), its docstring summary the query unless too short, trivial or
    shared; ``max_queries`` kept by a hash of their ids, ``max_corpus`` capping the rest. Same tree -> same set."""
    _check_settings(max_queries, max_corpus, min_summary_words, min_code_lines, max_code_chars)
    is_stdlib = root is None
    base, files = _source_files(root, exclude)
    if name is None:
        name = "stdlib" if is_stdlib else (base.name or "code")

    stats: Counter[str] = Counter(files=len(files))
    failed: list[str] = []
    mined: list[_Function] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # ASTs are acyclic (refcounting frees them); collections during parsing cost ~15% time
    try:
        for rel in files:
            parsed = _source_tree(base / rel)
            if parsed is None:
                failed.append(rel)
                continue
            stats["parsed"] += 1
            mined.extend(_mine_file(rel, *parsed, stats, min_summary_words, min_code_lines))
    finally:
        if gc_was_enabled:
            gc.enable()

    # Deduplicate code (whitespace-normalised), then drop summaries shared by several kept functions.
    seen: set[str] = set()
    corpus: list[_Function] = []
    for fn in mined:
        key = " ".join(fn.code.split())
        if key in seen:
            stats["dropped_duplicates"] += 1
            continue
        seen.add(key)
        corpus.append(fn)
    summary_count = Counter(_summary_key(fn.summary) for fn in corpus if fn.summary)
    candidates = []
    for fn in corpus:
        if fn.summary and summary_count[_summary_key(fn.summary)] > 1:
            stats["dropped_ambiguous"] += 1
        elif fn.summary:
            candidates.append(fn)
    stats["corpus_mined"], stats["candidate_queries"] = len(corpus), len(candidates)
    if not candidates:
        raise DataError(
            f"no usable functions under {str(base)!r}: {stats['files']} .py files ({stats['parsed']} parsed, "
            f"{len(failed)} failed), {stats['functions']} functions, {stats['with_docstring']} with a docstring, "
            f"{stats['stub']} stubs, {stats['short_code']} with fewer than min_code_lines={min_code_lines} code lines, "
            f"{stats['short_summary']} with a summary under min_summary_words={min_summary_words} words, "
            f"{stats['trivial_summary']} trivial, {stats['dropped_ambiguous']} ambiguous. Relax min_code_lines "
            "or min_summary_words (or exclude), or point root at a tree with documented functions.")

    chosen = set(_hash_sample([f"q:{fn.doc_id}" for fn in candidates], max_queries))
    queries = [fn for fn in candidates if f"q:{fn.doc_id}" in chosen]
    keep = _capped_corpus([fn.doc_id for fn in corpus], {fn.doc_id for fn in queries}, max_corpus,
                         "selected queries' documents")
    corpus = [fn for fn in corpus if fn.doc_id in keep]

    texts = [_truncate(fn.code, max_code_chars) for fn in corpus]
    stats["truncated"] = sum(len(t) < len(fn.code) for t, fn in zip(texts, corpus, strict=True))
    stats["corpus"], stats["queries"] = len(corpus), len(queries)
    meta: dict[str, object] = {
        **{k: stats[k] for k in _STAT_KEYS}, "failed": len(failed), "failed_files": failed[:20],
        "python": platform.python_version(), "stdlib": is_stdlib,
        "settings": {"max_queries": max_queries, "max_corpus": max_corpus, "min_summary_words": min_summary_words,
                     "min_code_lines": min_code_lines, "max_code_chars": max_code_chars, "exclude": list(exclude)},
    }
    # No titles: the qualified name as a title would hand the encoder a keyword match for queries that
    # name the function. The code keeps its def line, as in CodeSearchNet.
    return in_memory(name, "test", [fn.doc_id for fn in corpus], [""] * len(corpus), texts,
                     queries={f"q:{fn.doc_id}": fn.summary for fn in queries},
                     qrels={f"q:{fn.doc_id}": {fn.doc_id: 1} for fn in queries}, source=str(base), meta=meta)


_STAT_KEYS = ("files", "parsed", "functions", "with_docstring", "short_summary", "trivial_summary",
              "stub", "short_code", "dropped_duplicates", "dropped_ambiguous", "corpus_mined", "candidate_queries",
              "corpus", "queries", "truncated")


def _check_settings(max_queries: int | None, max_corpus: int | None, min_summary_words: int,
                    min_code_lines: int, max_code_chars: int) -> None:
    for key, value, low in (("max_queries", max_queries, 1), ("max_corpus", max_corpus, 1),
                            ("min_summary_words", min_summary_words, 0), ("min_code_lines", min_code_lines, 0),
                            ("max_code_chars", max_code_chars, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise DataError(f"{key}={value!r} is invalid; use an integer >= {low}"
                            + (" (or None for no limit)." if key.startswith("max_q") or key == "max_corpus"
                               else "."))


def _excluded(part: str, exclude: tuple[str, ...]) -> bool:
    return any(fnmatchcase(part, pat) for pat in exclude)


def _source_files(root: str | Path | None, exclude: tuple[str, ...]) -> tuple[Path, list[str]]:
    """The resolved source folder (None: the installed stdlib) and its *.py files, relative and sorted."""
    base = stdlib_root() if root is None else Path(root).expanduser()
    if not base.exists():
        raise DataError(f"code root {str(base)!r} does not exist; pass an existing source folder "
                        "(or root=None for the installed standard library).")
    if not base.is_dir():
        raise DataError(f"code root {str(base)!r} is not a folder; pass the folder that holds the .py files.")
    base = base.resolve()
    files = _python_files(base, exclude)
    if not files:
        hint = (" This interpreter ships no stdlib sources (bytecode-only install?); pass root=<a source folder>."
                if root is None else "")
        raise DataError(f"no Python files (*.py) under {str(base)!r} after excluding {list(exclude)}; point "
                        f"root at a source tree or relax exclude.{hint}")
    return base, files


def _python_files(base: Path, exclude: tuple[str, ...]) -> list[str]:
    """Relative POSIX paths of the *.py files under ``base``, sorted; excluded dirs are not entered."""
    found = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if not _excluded(d, exclude)]
        rel_dir = Path(dirpath).relative_to(base)
        for fname in filenames:
            if fname.endswith(".py") and not _excluded(fname, exclude):
                found.append((rel_dir / fname).as_posix())
    return sorted(found)


def _source_tree(path: Path) -> tuple[str, ast.Module] | None:
    """The decoded source (PEP 263 honoured, LF newlines) and its AST, or None if unreadable or unparsable."""
    try:
        source = importlib.util.decode_source(path.read_bytes())
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. in mined code are not our concern
            return source, ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualname, def) for module-level functions and methods, in source order; not inside functions."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _FUNC):
            yield prefix + child.name, child
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, _BLOCK):
            yield from _functions(child, prefix)


def _mine_file(rel: str, source: str, tree: ast.Module, stats: Counter[str], min_summary_words: int,
               min_code_lines: int) -> list[_Function]:
    lines: list[str] | None = None
    out = []
    for qualname, fn in _functions(tree):
        stats["functions"] += 1
        docstring = ast.get_docstring(fn, clean=False)
        if docstring is None:
            continue
        stats["with_docstring"] += 1
        if lines is None:
            lines = source.split("\n")  # not splitlines(): ast counts "\n" only (\f, \x1c... are not breaks)
        code = _code_without_docstring(lines, fn)
        if code is None:
            stats["stub"] += 1
            continue
        if sum(1 for line in code.split("\n") if line.strip()) < min_code_lines:
            stats["short_code"] += 1
            continue
        summary = _summary(docstring)
        if len(summary.split()) < min_summary_words:
            stats["short_summary"] += 1
            summary = ""
        elif _is_trivial(summary):
            stats["trivial_summary"] += 1
            summary = ""
        out.append(_Function(f"{rel}:{qualname}:{fn.lineno}", summary, code))
    return out


def _summary(docstring: str) -> str:
    """First paragraph of the cleaned docstring, whitespace collapsed, a leading signature line skipped."""
    lines = inspect.cleandoc(docstring).split("\n")
    if len(lines) > 1 and _SIGNATURE.fullmatch(lines[0].strip()) and any(x.strip() for x in lines[1:]):
        lines = lines[1:]
    para: list[str] = []
    for line in lines:
        if not line.strip():
            if para:
                break
            continue
        para.append(line)
    return " ".join(" ".join(para).split())


def _is_trivial(summary: str) -> bool:
    return bool(_TRIVIAL.match(summary) or _SIGNATURE.fullmatch(summary))


def _summary_key(summary: str) -> str:
    """Ambiguity key: case and a trailing period do not make two summaries different queries."""
    return summary.casefold().rstrip(".")


def _around_docstring(first: str, last: str, doc: ast.stmt) -> str:
    """What is left of the docstring's first and last lines once it is cut out (ast columns are UTF-8 byte offsets)."""
    assert doc.end_col_offset is not None
    head = first.encode("utf-8")[: doc.col_offset].decode("utf-8")
    tail = last.encode("utf-8")[doc.end_col_offset :].decode("utf-8").lstrip()
    if tail.startswith(";"):  # def f(): "doc"; return 1
        tail = tail[1:].lstrip()
    return head + tail


def _is_stub(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The docstring is (nearly) the whole body: nothing, ``pass``, ``...`` or ``raise NotImplementedError`` next."""
    if len(fn.body) != 2:
        return len(fn.body) < 2
    stmt = fn.body[1]
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return stmt.value.value is Ellipsis
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def _code_without_docstring(lines: list[str], fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The function's source (decorators included) without its docstring, de-indented (only lines that start with the
    def line's indentation: multi-line strings further left are kept); None if no body is left."""
    if _is_stub(fn):
        return None
    doc = fn.body[0]
    assert doc.end_lineno is not None and fn.end_lineno is not None
    start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    seg = lines[start - 1 : fn.end_lineno]
    i0, i1 = doc.lineno - start, doc.end_lineno - start
    joined = _around_docstring(seg[i0], seg[i1], doc)
    if joined.strip():
        seg[i0 : i1 + 1] = [joined]
    else:
        j = i1 + 1
        while j < len(seg) and not seg[j].strip():
            j += 1
        seg[i0:j] = []
    indent = seg[0][: len(seg[0]) - len(seg[0].lstrip())]
    return "\n".join((line[len(indent):] if line.startswith(indent) else line).rstrip() for line in seg).strip("\n")


def _truncate(code: str, max_chars: int) -> str:
    """At most ``max_chars`` characters, cut at the last line break that fits (a hard cut if none does)."""
    if len(code) <= max_chars:
        return code
    cut = code.rfind("\n", 0, max_chars + 1)
    return code[:cut] if cut > 0 else code[:max_chars]


def _hash_sample(ids: list[str], k: int | None) -> list[str]:
    """The ``k`` ids with the smallest sha256 (all when k is None): deterministic, independent of RNG state."""
    if k is None or k >= len(ids):
        return list(ids)
    return sorted(ids, key=lambda i: (hashlib.sha256(i.encode("utf-8")).digest(), i))[:k]


def _capped_corpus(ids: list[str], positives: set[str], max_corpus: int | None, what: str) -> set[str]:
    """The documents kept under ``max_corpus``: all of ``positives``, then a hash sample; all ``ids`` when they fit."""
    if max_corpus is None or len(ids) <= max_corpus:
        return set(ids)
    if len(positives) > max_corpus:
        raise DataError(f"max_corpus={max_corpus} cannot hold the {len(positives)} {what}; raise max_corpus or "
                        f"lower max_queries to at most {max_corpus}.")
    return positives | set(_hash_sample([d for d in ids if d not in positives], max_corpus - len(positives)))
