"""Result records: one JSON file per (run, dataset), written atomically; the only writer of results. A run id is a
readable slug plus a hash of everything that defines the run, so a re-run redoes only the missing cells."""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import subprocess
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.core.file_hash import file_sha  # noqa: F401  (the 16-digit file hash run ids hold, cached)
from harness.core.layout import record_path

SCHEMA_VERSION = 2   # 2: higher_is_better, config_id (v1 records read with their defaults)
#: the record schemas this harness reads; a record of any other (a newer harness's) is refused, never guessed at
READABLE_SCHEMAS = (1, 2)
STATUS_OK = "ok"
STATUS_FAILED = "failed"
#: the cell cannot apply to this model (8,192-token inputs for a 512-position model; ``error`` says why): final like
#: ok (not retried), but it has no score and is never selected
STATUS_SKIPPED = "skipped"

_VERSIONED_PACKAGES = ("harness", "torch", "transformers", "sentence-transformers", "tokenizers", "datasets",
                       "hydra-core", "pytrec-eval-terrier", "numpy", "scikit-learn", "mteb", "pylate")


@dataclass
class ResultRecord:
    """One (run, dataset)'s output: raw ``metrics`` (0-1 for IR, x100 for GLUE) and the ``main_score`` metric."""

    task: str                       # task family (its registry name): beir | code | glue | ...
    dataset: str                    # e.g. scifact, rte
    split: str                      # e.g. test, validation
    model: dict[str, Any]           # name, path, revision, family, size, fingerprint
    metrics: dict[str, float]
    main_score: str                 # key of `metrics`
    run_id: str
    higher_is_better: bool = True   # direction of the main score (latencies: False)
    config_id: str | None = None    # hash of the run identity minus seeds: runs that differ only in seed share it
    status: str = STATUS_OK         # ok | failed | skipped
    error: str | None = None        # failure message when failed; the reason when skipped
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    sweep: str | None = None        # name of the sweep this run belongs to, if any
    experiment: str | None = None   # the ``experiment`` config key: scopes harness.select in a shared results folder
    details: dict[str, Any] = field(default_factory=dict)   # task-specific extras (best epoch, n queries, ...)
    config: dict[str, Any] = field(default_factory=dict)    # the composed Hydra config
    precision: str | None = None    # precision that produced the number (fp32 | bf16 | fp16)
    data_fingerprint: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    git_sha: str | None = None
    timings: dict[str, float] = field(default_factory=dict)   # seconds
    scheduler: dict[str, Any] = field(default_factory=dict)  # where it ran: node, SLURM job/array ids, GPU, Hydra job
    created_at: str = ""
    schema_version: int = SCHEMA_VERSION
    #: per-query / per-example scores, written beside the record (harness.core.per_query), never into its JSON
    per_query: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        fail_nonfinite(self)

    @property
    def score(self) -> float | None:
        return self.metrics.get(self.main_score)

    def to_dict(self) -> dict[str, Any]:
        kept, self.per_query = self.per_query, None   # not deep-copied by asdict, not in the JSON
        try:
            data = asdict(self)
        finally:
            self.per_query = kept
        data.pop("per_query")
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ResultRecord:
        missing = [k for k in ("task", "dataset", "split", "model", "metrics", "main_score", "run_id") if k not in data]
        if missing:
            raise ValueError(f"not a harness result record: missing keys {missing}")
        version = data.get("schema_version", SCHEMA_VERSION)
        if isinstance(version, bool) or version not in READABLE_SCHEMAS:
            raise UnknownSchemaError(f"schema_version {version!r} is not one this harness reads "
                                     f"({', '.join(map(str, READABLE_SCHEMAS))}): written by another harness version; "
                                     "read it with that version, or move it out of the results folder")
        known = {f for f in cls.__dataclass_fields__} - {"per_query"}
        return cls(**{k: v for k, v in data.items() if k in known})


class UnknownSchemaError(ValueError):
    """A record whose ``schema_version`` this harness does not read (a newer harness's, or a corrupt field)."""


def _nonfinite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def nonfinite_metrics(metrics: Mapping[str, Any]) -> list[str]:
    """``name=value`` of each metric that is a number but not a finite one (NaN, inf)."""
    return [f"{k}={v}" for k, v in (metrics or {}).items() if _nonfinite(v)]


def fail_nonfinite(record: ResultRecord) -> None:
    """An ok record with a NaN or infinite metric becomes a failed one whose error names the metrics."""
    bad = nonfinite_metrics(record.metrics) if record.status == STATUS_OK else []
    if bad:
        record.status = STATUS_FAILED
        record.error = (f"metric {', '.join(bad)} is not a finite number: the evaluation produced no valid score "
                        "(a diverged model or a degenerate evaluation set); rerun it")


#: hyperparameters that shrink the evaluated data below the whole dataset (a quick run, not a full-set number)
SUBSET_KEYS = ("max_queries", "max_docs", "max_eval_samples")
#: beside every number computed on part of a dataset (terminal summary, leaderboard): never comparable to full sets
SUBSET_MARK = "§"


def evaluated_subset(record: ResultRecord) -> str | None:
    """How a record's data was cut below the whole dataset (``max_queries=50, max_docs=1000``), or None."""
    hp = record.hyperparameters or {}
    cut = [f"{k}={hp[k]}" for k in SUBSET_KEYS if hp.get(k)]
    return ", ".join(cut) or None


def stable_hash(obj: Any, length: int = 10) -> str:
    """Hash of a JSON-serialisable object, independent of key order."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def run_id(identity: Mapping[str, Any], readable: Mapping[str, Any] | None = None) -> str:
    """``<k=v_k=v>-<hash>``: ``identity`` holds everything that changes the numbers, ``readable`` the slug's keys."""
    slug = "_".join(f"{k}={_fmt(v)}" for k, v in (readable or {}).items())
    slug = "".join(c if c.isalnum() or c in "=._-" else "-" for c in slug)[:80]
    h = stable_hash(identity)
    return f"{slug}-{h}" if slug else h


def path_of(results_dir: str | os.PathLike, record: ResultRecord) -> Path:
    return record_path(results_dir, record.task, record.model["name"], record.run_id, record.dataset)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_json(path: Path, data: Any) -> None:
    """Write to a temp file, fsync, rename (never half-written), with the mode ``open`` gives (not 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_record(results_dir: str | os.PathLike, record: ResultRecord) -> Path:
    """Fill provenance if unset and write the record atomically (a failure beside a finished one); where."""
    if not record.created_at:
        record.created_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if not record.versions:
        record.versions = library_versions()
    if record.git_sha is None:
        record.git_sha = git_sha()
    fail_nonfinite(record)   # metrics may have been set after the record was built
    if record.main_score not in record.metrics and record.status == STATUS_OK:
        raise ValueError(f"record for {record.dataset}: main_score {record.main_score!r} not in metrics")
    path = path_of(results_dir, record)
    if record.status == STATUS_FAILED and finished_at(path) is not None:
        stamp = "".join(c for c in record.created_at[:19] if c.isalnum()) + "Z"
        path = path.with_name(f"{path.stem}.failed-{stamp}")
    if record.per_query is not None and record.status == STATUS_OK:
        from harness.core import per_query
        record.details["per_query"] = per_query.write(path, record.per_query)   # first: the JSON claims it
    data = record.to_dict()
    data["metrics"] = {k: None if _nonfinite(v) else v for k, v in record.metrics.items()}
    atomic_write_json(path, data)   # strict JSON: a NaN is written as null (the error names its value)
    return path


#: what a record set aside is renamed to: ``<dataset>.superseded-<UTC time>`` (not ``*.json``: no reader takes it)
SUPERSEDED = ".superseded-"


def set_aside(path: Path) -> Path:
    """Move the record at ``path`` and its side files out of the readers' reach, unchanged; returns where."""
    from harness.core.per_query import RUN_SUFFIX, SUFFIX
    stem = path.name.removesuffix(".json")
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    n, target = 1, path.with_name(f"{stem}{SUPERSEDED}{stamp}")
    while target.exists() or any(target.with_name(target.name + s).exists() for s in (SUFFIX, RUN_SUFFIX)):
        n += 1
        target = path.with_name(f"{stem}{SUPERSEDED}{stamp}-{n}")
    for suffix in (SUFFIX, RUN_SUFFIX):
        side = path.with_name(stem + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    path.rename(target)
    return target


def finished_at(path: Path) -> ResultRecord | None:
    """The ok (or skipped) record at ``path``, if any (failed, unreadable or absent records count as not finished)."""
    try:
        rec = read_record(path)
    except (ValueError, OSError, TypeError):
        return None
    return rec if rec.status in (STATUS_OK, STATUS_SKIPPED) else None


def read_record(path: str | os.PathLike) -> ResultRecord:
    with open(path) as fh:
        return ResultRecord.from_dict(json.load(fh))


def iter_records(dirs: str | os.PathLike | Iterable[str | os.PathLike], *, warn: bool = True,
                 strict_schema: bool = False) -> Iterator[tuple[Path, ResultRecord]]:
    """Every record under the results directories; a bad file is skipped with a warning naming it."""
    if isinstance(dirs, str | os.PathLike):
        dirs = [dirs]
    for d in dirs:
        for path in sorted(Path(d).rglob("*.json")):
            if path.name.startswith("."):
                continue
            try:
                with open(path) as fh:
                    data = json.load(fh)
                if not isinstance(data, dict):
                    raise ValueError("top-level JSON is not an object")
                yield path, ResultRecord.from_dict(data)
            except (ValueError, OSError, TypeError) as exc:   # UnknownSchemaError, json's errors: ValueErrors
                if strict_schema and isinstance(exc, UnknownSchemaError):
                    raise UnknownSchemaError(f"{path}: {exc}") from None
                if warn:
                    warnings.warn(f"skipping {path}: {exc}", stacklevel=2)


def library_versions() -> dict[str, str]:
    out = {}
    for pkg in _VERSIONED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def git_sha() -> str | None:
    """Commit of the harness checkout (with ``-dirty`` when it has uncommitted changes), if it is one."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True,
                               text=True, timeout=5).stdout.strip()
        return f"{sha}-dirty" if dirty else sha
    except (OSError, subprocess.SubprocessError):
        return None
