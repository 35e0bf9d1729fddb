"""Per-query (retrieval) or per-example (GLUE) scores of a record, stored beside it for paired comparisons in
``<dataset>.perquery.npz``, named in ``details.per_query`` with its sha256 and the items' fingerprints."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SUFFIX = ".perquery.npz"
RUN_SUFFIX = ".run.trec.gz"


class PerQueryError(ValueError):
    """A record's per-query scores are missing, or do not match what the record claims."""


@dataclass
class PerQuery:
    """Scores per item (query or example) of one record; ``data``: fingerprints of what was scored."""

    ids: list[str]
    scores: dict[str, np.ndarray]
    data: dict[str, str] = field(default_factory=dict)
    unit: str = "query"          # query | example
    run: dict[str, dict[str, float]] | None = None   # the ranking (query -> doc -> score): saved as a TREC run file

    def __post_init__(self) -> None:
        for name, v in self.scores.items():
            if len(v) != len(self.ids):
                raise PerQueryError(f"per-query {name}: {len(v)} values for {len(self.ids)} {self.unit} ids")


def fingerprint(obj: Any) -> str:
    """sha256 (16 hex) of ``obj`` as canonical JSON (sorted keys)."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def from_metrics(per_query: Mapping[str, Mapping[str, float]], data: Mapping[str, str]) -> PerQuery:
    """A :class:`PerQuery` from metric -> query id -> value (every metric over the same ids)."""
    ids = list(next(iter(per_query.values()), {}))
    return PerQuery(ids, {m: np.array([v[i] for i in ids], dtype=np.float64) for m, v in per_query.items()}, dict(data))


def _beside(record_path: Path, suffix: str) -> Path:
    """``<dataset><suffix>`` beside ``<dataset>.json``: per-query scores, or the ``save_run=true`` TREC run file."""
    return record_path.with_name(record_path.name.removesuffix(".json") + suffix)


def files_of(record_path: Path, save_run: bool) -> dict[Path, str]:
    """Every file a record at ``record_path`` is written to, and what each holds (checked before any work)."""
    files = {record_path: "the record", _beside(record_path, SUFFIX): "its per-query scores"}
    if save_run:
        files[_beside(record_path, RUN_SUFFIX)] = "its TREC run file (save_run=true)"
    return files


def write(record_path: Path, pq: PerQuery) -> dict[str, Any]:
    """Write ``pq`` beside ``record_path`` atomically; returns what the record's ``details.per_query`` says."""
    buf = io.BytesIO()
    np.savez_compressed(buf, ids=np.array(pq.ids, dtype=str), **{f"m_{k}": v for k, v in pq.scores.items()})
    blob = buf.getvalue()
    path = _beside(record_path, SUFFIX)
    _atomic(path, blob)
    claim = {"file": path.name, "sha256": hashlib.sha256(blob).hexdigest(), "n": len(pq.ids), "unit": pq.unit,
             "metrics": sorted(pq.scores), "data": dict(pq.data), "bytes": len(blob)}
    if pq.run is not None:
        run_blob = gzip.compress(trec_lines(pq.run, record_path.parent.name).encode(), mtime=0)
        trec = _beside(record_path, RUN_SUFFIX)
        _atomic(trec, run_blob)
        claim["run_file"] = {"file": trec.name, "sha256": hashlib.sha256(run_blob).hexdigest()}
    return claim


def _atomic(path: Path, blob: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(blob)
    tmp.replace(path)


def trec_lines(run: Mapping[str, Mapping[str, float]], tag: str) -> str:
    """A TREC run file (``qid Q0 docid rank score tag``), each query's hits best first, ties by doc id."""
    out = []
    for qid, hits in run.items():
        ranked = sorted(hits.items(), key=lambda x: (-x[1], x[0]))
        out += [f"{qid} Q0 {did} {rank} {score!r} {tag}" for rank, (did, score) in enumerate(ranked, start=1)]
    return "\n".join(out) + ("\n" if out else "")


def read(record_path: Path, claim: Mapping[str, Any] | None) -> PerQuery:
    """The per-query scores of the record at ``record_path``, checked against ``claim``; else :class:`PerQueryError`."""
    if not claim:
        raise PerQueryError(f"{record_path} keeps no per-query scores (written before they were stored): "
                            "re-run it (delete the record) to compare it")
    path = record_path.with_name(str(claim["file"]))
    if not path.is_file():
        raise PerQueryError(f"{path} is missing (the record {record_path.name} claims it): re-run the record")
    blob = path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != claim.get("sha256"):
        raise PerQueryError(f"{path} is not the file its record claims (sha256 differs; replaced or corrupt): "
                            "re-run the record")
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        ids = [str(x) for x in z["ids"]]
        scores = {k[2:]: z[k].astype(np.float64) for k in z.files if k.startswith("m_")}
    return PerQuery(ids, scores, dict(claim.get("data") or {}), str(claim.get("unit", "query")))


def aligned(a: PerQuery, b: PerQuery, metric: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The two records' ``metric`` over the same items, in ``a``'s order; refuses unless they scored the same."""
    if a.data != b.data:
        diff = sorted(k for k in {*a.data, *b.data} if a.data.get(k) != b.data.get(k))
        raise PerQueryError(f"the two records were scored on different data ({', '.join(diff)} differ): "
                            "compare runs on the same queries and qrels")
    if set(a.ids) != set(b.ids):
        raise PerQueryError(f"the two records scored different {a.unit} ids ({len(a.ids)} vs {len(b.ids)})")
    for pq in (a, b):
        if metric not in pq.scores:
            raise PerQueryError(f"metric {metric} is not kept per {pq.unit} (kept: {', '.join(sorted(pq.scores))})")
    where = {q: i for i, q in enumerate(b.ids)}
    order = [where[q] for q in a.ids]
    return a.scores[metric], b.scores[metric][order], list(a.ids)

