"""CoIR's code-retrieval sets as the paper ran them, and local stand-ins: CodeSearchNet (hub or local copy; a
function's code -> its docstring, ``test`` queries as mteb 2.26), CodeXGLUE's CodeSearchNet, CoSQA."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import DataError, one_line
from harness.data.files import jsonl_rows, text_lines, write_jsonl
from harness.tasks.retrieval.data.dataset import RetrievalDataset, in_memory
from harness.tasks.retrieval.data.hub_layout import Row, dataset_from_rows

#: CodeXGLUE partitions, in the order their docstrings enter the corpus (first occurrence keeps its id)
PARTITIONS = ("train", "valid", "test")
CSN_LANGUAGES = ("go", "java", "javascript", "php", "python", "ruby")


@dataclass
class CoirTriple:
    """A CoIR set in hub form: corpus rows, query rows (with their partition) and qrels rows of one split."""

    corpus: list[dict[str, Any]]          # {_id, title, text}
    queries: list[dict[str, Any]]         # {_id, text, partition}
    qrels: list[dict[str, Any]]           # {query-id, corpus-id, score}
    split: str = "test"


# ------------------------------------------------------------------------------------------ CodeXGLUE -> CoIR
def read_codexglue(folder: Path, lang: str) -> list[dict[str, Any]]:
    """Rows of ``folder/{train,valid,test}.jsonl`` in :data:`PARTITIONS` order, each with code, docstring, partition."""
    files = [folder / f"{p}.jsonl" for p in PARTITIONS if (folder / f"{p}.jsonl").is_file()]
    if not (folder / "test.jsonl").is_file():
        raise DataError(
            f"{folder}: no test.jsonl. A CodeXGLUE CodeSearchNet folder holds {{train,valid,test}}.jsonl for one "
            f"language (at least test.jsonl); point task.data_dir at the folder that contains {folder.parent.name}/"
            f"{folder.name}/, or use the hub copy (no task.data_dir)."
        )
    rows = []
    for path in files:
        for lineno, row in jsonl_rows(path, ("code", "docstring")):
            if row.get("language", lang) != lang:
                raise DataError(f"{path} line {lineno}: language {row.get('language')!r}, expected {lang!r}; "
                                "one folder holds one language.")
            row.setdefault("partition", path.stem)
            rows.append(row)
    return rows


def coir_from_codexglue(rows: Iterable[dict[str, Any]], lang: str, split: str = "test") -> CoirTriple:
    """CoIR's code -> docstring over CodeXGLUE rows: a query per row, a document per docstring, ``split``'s qrels."""
    corpus: list[dict[str, str]] = []
    queries: list[dict[str, str]] = []
    qrels: list[dict[str, Any]] = []
    doc_of_text: dict[str, str] = {}
    counters: dict[str, int] = {}
    for row in rows:
        part = str(row["partition"])
        i = counters[part] = counters.get(part, -1) + 1
        doc_text = str(row["docstring"])
        if doc_text not in doc_of_text:
            doc_of_text[doc_text] = f"d-{lang}-{part}-{i}"
            corpus.append({"_id": doc_of_text[doc_text], "title": "", "text": doc_text})
        qid = f"q-{lang}-{part}-{i}"
        queries.append({"_id": qid, "text": str(row["code"]), "partition": part})
        if part == split:
            qrels.append({"query-id": qid, "corpus-id": doc_of_text[doc_text], "score": 1})
    if not qrels:
        raise DataError(f"CodeSearchNet {lang}: no rows of partition {split!r}; nothing to evaluate.")
    return CoirTriple(corpus, queries, qrels, split)


def dataset_from_triple(triple: CoirTriple, name: str, split: str, source: str, fingerprint: str = "",
                        strict_qrels: bool = True) -> RetrievalDataset:
    """A :class:`RetrievalDataset` from CoIR hub rows: queries of partition ``split`` only (mteb's filter)."""
    def rows(table: str, items: list[dict[str, Any]]) -> list[Row]:
        return [(f"{source} {table} row {i}", r) for i, r in enumerate(items, start=1)]

    queries = [(w, q) for w, q in rows("queries", triple.queries) if q.get("partition", split) == split]
    return dataset_from_rows(rows("corpus", triple.corpus), queries, rows("qrels", triple.qrels), name=name,
                             split=split, where=source, source=source, strict_qrels=strict_qrels,
                             fingerprint=fingerprint)


def export_coir_layout(triple: CoirTriple, out_dir: str | Path, lang: str) -> Path:
    """Write ``triple`` in CoIR's hub layout (JSONL configs and a README), readable as the hub copy is."""
    out = Path(out_dir)
    parts = {"corpus": ("corpus", triple.corpus), "queries": ("queries", triple.queries),
             "qrels": (triple.split, triple.qrels)}
    for kind, (split, rows) in parts.items():
        folder = out / f"{lang}-{kind}"
        folder.mkdir(parents=True, exist_ok=True)
        write_jsonl(folder / f"{split}.jsonl", rows)
    configs = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir() and "-" in p.name):
        for f in sorted(folder.glob("*.jsonl")):
            configs.append(f"- config_name: {folder.name}\n  data_files:\n  - split: {f.stem}\n"
                           f"    path: {folder.name}/{f.name}\n")
    (out / "README.md").write_text("---\nconfigs:\n" + "".join(configs) + "---\n")
    return out


# ------------------------------------------------------------------------------------------ loaders
def _csn_config(path: str, revision: str | None, lang: str, kind: str, split: str, columns: tuple[str, ...],
                cache_dir: str | None) -> Any:
    """One split of config ``<lang>-<kind>`` (the hub's, or a local folder's) with its ``columns``."""
    from datasets import load_dataset
    where = f"{path}@{revision} {lang}-{kind}" if cache_dir is None else str(Path(path) / f"{lang}-{kind}")
    try:
        splits = load_dataset(path, f"{lang}-{kind}", revision=revision,
                              **({} if cache_dir is None else {"cache_dir": cache_dir}))
    except Exception as exc:
        if cache_dir is None:
            raise
        raise DataError(f"{where}: datasets cannot read it ({one_line(exc)[:200]}); fix the files or re-export the "
                        "folder (export_coir_layout writes this layout).") from exc
    if split not in splits:
        raise DataError(f"{where}: no split {split!r} (has {list(splits)}); choose one with task.split=<split>.")
    rows = splits[split]
    missing = [c for c in columns if c not in rows.column_names]
    if missing:
        raise DataError(f"{where}: no column(s) {missing} (has {rows.column_names}); CoIR's layout needs "
                        f"{list(columns)}: check the files.")
    return rows


def load_csn(path: str, revision: str | None, lang: str, name: str, split: str = "test",
             strict_qrels: bool = True, *, hub: bool = True) -> RetrievalDataset:
    """CoIR CodeSearchNet for one language, hub (fast failure offline) or local, read as mteb 2.26 reads it."""
    if hub:
        from harness.models import require_hub
        require_hub(f"dataset {path!r} ({lang})",
                    f"Offline, use the CodeXGLUE Ruby slice: task.datasets=[csn-ruby] task.data_dir=<dir containing "
                    f"codesearchnet/ruby/test.jsonl> (../shared/data), or a local copy in CoIR's layout under "
                    f"task.data_dir=<dir containing codesearchnet/{lang}/>.")
    else:
        check_local_layout(Path(path), lang)
    # a cache of the folder's own content: datasets keys local folders by name (alike names would share a stale cache)
    cache_dir = None if hub else local_cache_dir(Path(path))
    qrels = _csn_config(path, revision, lang, "qrels", split, ("query-id", "corpus-id", "score"), cache_dir)
    corpus = _csn_config(path, revision, lang, "corpus", "corpus", ("_id", "text"), cache_dir)
    queries = _csn_config(path, revision, lang, "queries", "queries", ("_id", "text"), cache_dir)
    triple = CoirTriple(corpus=list(corpus), queries=list(queries), qrels=list(qrels), split=split)
    fingerprint = f"hub:{path}@{revision}:{lang}" if hub else ""
    return dataset_from_triple(triple, name, split, f"{path}@{revision}:{lang}" if hub else str(path),
                               fingerprint, strict_qrels)


def check_local_layout(folder: Path, lang: str) -> None:
    """Every JSONL file of a local CoIR-layout folder parses (an error names file, line and fix) before ``datasets``."""
    for kind in ("corpus", "queries", "qrels"):
        for path in sorted((folder / f"{lang}-{kind}").glob("*.jsonl")):
            for _ in jsonl_rows(path):
                pass


def content_key(folder: Path) -> str:
    """A key of a local folder's files (path, size, mtime): changes whenever a file does."""
    import hashlib
    h = hashlib.sha256(str(folder.resolve()).encode())
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        st = f.stat()
        h.update(f"{f.relative_to(folder)}\x1f{st.st_size}\x1f{st.st_mtime_ns}\x1e".encode())
    return h.hexdigest()[:16]


def local_cache_dir(folder: Path) -> str:
    """datasets' cache for one local folder's current content."""
    from datasets import config
    return str(Path(config.HF_DATASETS_CACHE) / "harness-local" / content_key(folder))


def load_csn_local(folder: Path, lang: str, name: str, split: str = "test",
                   strict_qrels: bool = True) -> RetrievalDataset:
    """A local CodeSearchNet language folder: CoIR's hub layout (a README with configs) or CodeXGLUE JSONL."""
    if not folder.is_dir():
        raise DataError(
            f"dataset folder not found: {folder}. Set task.data_dir to the directory that holds "
            f"{folder.parent.name}/{folder.name}/ with CodeXGLUE {{train,valid,test}}.jsonl (../shared/data has the "
            "Ruby slice) or a copy of the hub dataset in CoIR's layout."
        )
    if (folder / "README.md").is_file() and (folder / f"{lang}-qrels").is_dir():
        return load_csn(str(folder), None, lang, name, split, strict_qrels, hub=False)
    triple = coir_from_codexglue(read_codexglue(folder, lang), lang, split)
    return dataset_from_triple(triple, name, split, str(folder.resolve()), strict_qrels=strict_qrels)


def _cosqa_pairs(path: Path) -> list[dict[str, Any]]:
    """The pairs of a CoSQA JSON file (one array of {idx, doc, code, label} objects), each checked (label 0 or 1)."""
    try:
        pairs = json.loads("".join(text_lines(path)))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} line {exc.lineno}: not valid JSON ({exc.msg}); CoSQA files are one JSON array of "
                        "pairs: fix that line.") from None
    if not isinstance(pairs, list) or not pairs:
        raise DataError(f"{path}: expected a non-empty JSON array of {{idx, doc, code, label}} pairs; the file holds "
                        f"{type(pairs).__name__ if pairs else 'nothing'}.")
    for n, pair in enumerate(pairs):
        if not isinstance(pair, dict):
            raise DataError(f"{path} pair {n}: expected a JSON object {{idx, doc, code, label}}, got "
                            f"{type(pair).__name__}; fix that entry of the array.")
        missing = [k for k in ("idx", "doc", "code", "label") if k not in pair]
        if missing:
            raise DataError(f"{path} pair {n}: missing field(s) {missing}; each pair needs idx, doc, code, label: "
                            "add them.")
        label = pair["label"]
        if isinstance(label, bool) or str(label).strip() not in ("0", "1"):
            raise DataError(f"{path} pair {n}: label {label!r} is not 0 or 1; CoSQA labels are 1 (the code answers "
                            "the query) or 0: fix that pair.")
    return pairs


def load_cosqa_pairs(path: Path, name: str, split: str = "test") -> RetrievalDataset:
    """CoSQA pairs as a retrieval set: queries labelled 1, corpus the distinct snippets, relevant its own."""
    if not path.is_file():
        raise DataError(f"CoSQA file not found: {path}. Point task.data_dir at the folder that contains "
                        "cosqa/cosqa-dev.json (../shared/data), or set the catalog entry's `local` to the file.")
    doc_of_code: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for pair in _cosqa_pairs(path):
        did = doc_of_code.setdefault(str(pair["code"]), f"c-{pair['idx']}")
        if int(pair["label"]) == 1:
            queries[str(pair["idx"])] = str(pair["doc"])
            qrels[str(pair["idx"])] = {did: 1}
    if not qrels:
        raise DataError(f"{path}: no pair is labelled 1, so no query has a relevant snippet.")
    codes = list(doc_of_code)
    return in_memory(name, split, [doc_of_code[c] for c in codes], [""] * len(codes), codes, queries=queries,
                     qrels=qrels, source=str(path.resolve()))
