"""GLUE task definitions (from conf/task/glue.yaml) and loaders: the hub, or local TSVs read as GLUE ships them
(quoting off: texts hold unbalanced quotes; MRPC's header BOM kept; CoLA headerless)."""

from __future__ import annotations

import csv
import hashlib
import random
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core import file_hash
from harness.core.errors import DataError, HarnessError, HubUnavailableError, unknown_name
from harness.data.files import csv_rows

Column = str | int


@dataclass(frozen=True)
class SourceSpec:
    """Where one task's text, text pair and label live in a source (hub config or local folder)."""

    text_a: Column
    text_b: Column | None
    label: Column
    train: str
    dev: dict[str, str]             # dev set name -> split name (hub) or file name (local)
    config: str | None = None       # hub config name
    dir: str | None = None          # local folder under data_dir
    header: bool = True             # local: does the file start with a header row


@dataclass(frozen=True)
class GlueTask:
    """One GLUE task: label set (None = regression), metric, epoch group and its two sources."""

    name: str
    metric: str
    labels: tuple[str, ...] | None
    epoch_group: str
    hub: SourceSpec
    local: SourceSpec

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def is_regression(self) -> bool:
        return self.labels is None


def task_definitions(definitions: Mapping[str, Any], metrics: Collection[str] | None = None) -> dict[str, GlueTask]:
    """``task.definitions`` validated into :class:`GlueTask` objects, naming the task and key on any error."""
    out = {}
    for name, d in definitions.items():
        try:
            d = dict(d)
            labels = d.get("labels")
            if metrics is not None and d["metric"] not in metrics:
                raise ValueError(f"metric {d['metric']!r} is not one of {', '.join(metrics)}")
            out[name] = GlueTask(name=name, metric=d["metric"], labels=tuple(labels) if labels is not None else None,
                                 epoch_group=d["epoch_group"],
                                 hub=SourceSpec(**{**dict(d["hub"]), "dev": dict(d["hub"]["dev"])}),
                                 local=SourceSpec(**{**dict(d["local"]), "dev": dict(d["local"]["dev"])}))
        except (KeyError, TypeError, ValueError) as exc:
            raise HarnessError(
                f"GLUE task definition {name!r} in task.definitions is invalid ({exc}). Each needs metric, labels, "
                "epoch_group, hub {config, text_a, text_b, label, train, dev} and local {dir, header, text_a, "
                "text_b, label, train, dev}; see conf/task/glue.yaml."
            ) from exc
    return out


def select_tasks(names: list[str] | str, tasks: Mapping[str, GlueTask]) -> list[GlueTask]:
    """The named tasks, validated (``task.tasks`` may be one name or a list)."""
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise HarnessError("task.tasks is empty: name at least one GLUE task, e.g. task.tasks=[rte]")
    out = []
    for n in names:
        key = str(n).lower().replace("-", "")
        if key not in tasks:
            raise unknown_name("GLUE task", str(n), tasks, "Set task.tasks to names from task.definitions.")
        out.append(tasks[key])
    return out


@dataclass
class Split:
    """Parallel lists of one split: first text, optional second text, label (class id or float score)."""

    text_a: list[str]
    text_b: list[str] | None
    labels: list[Any]

    def __len__(self) -> int:
        return len(self.labels)

    def subsample(self, n: int | None, seed: int) -> Split:
        """A seeded random subset of ``n`` rows, in original order (all rows when n is None or too large)."""
        if n is None or n >= len(self):
            return self
        if n <= 0:
            raise HarnessError(f"a sample limit must be positive, got {n}")
        keep = sorted(random.Random(seed).sample(range(len(self)), n))
        return Split(
            [self.text_a[i] for i in keep],
            [self.text_b[i] for i in keep] if self.text_b is not None else None,
            [self.labels[i] for i in keep],
        )


@dataclass
class GlueData:
    """A task's train split and its dev set(s) (MNLI has two: matched and mismatched)."""

    task: GlueTask
    train: Split
    dev: dict[str, Split]
    source: str                     # folder or hub id@revision
    fingerprint: str                # sha256 of the files, or the hub revision
    meta: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- local TSVs
GLUE_FIX = "re-download the file (download_glue_data.py writes GLUE's layout)"


def read_tsv(path: Path, header: bool) -> tuple[list[str] | None, list[tuple[int, list[str]]]]:
    """(header, [(line number, fields)]) of a GLUE TSV, quoting off, blank lines skipped, column counts checked."""
    if not path.is_file():
        raise DataError(f"GLUE file {path} does not exist. task.data_dir must point at a folder in GLUE's layout "
                        f"(e.g. RTE/train.tsv, RTE/dev.tsv as download_glue_data.py writes them).")
    rows = [(n, r) for n, r in csv_rows(path, "\t", csv.QUOTE_NONE) if r]  # a trailing blank line is not a row
    if not rows:
        raise DataError(f"GLUE file {path} is empty; {GLUE_FIX}.")
    head = rows.pop(0)[1] if header else None
    width = len(head) if head is not None else len(rows[0][1])
    for line, row in rows:
        if len(row) != width:
            raise DataError(
                f"{path} line {line}: {len(row)} tab-separated columns, expected {width}. GLUE files are read with "
                "quoting off; a row with a different column count means the file is truncated or re-saved with "
                f"quoting: {GLUE_FIX} or fix that line."
            )
    return head, rows


def _column(spec: Column, head: list[str] | None, path: Path, task: str, key: str) -> int:
    if isinstance(spec, int):
        return spec
    if head is None:
        raise DataError(f"{path} has no header, so column {spec!r} must be given as an index: set "
                        f"task.definitions.{task}.local.{key} to a column number.")
    if spec not in head:
        raise DataError(f"{path} line 1 (header): no column {spec!r}; the header has {head}. Fix "
                        f"task.definitions.{task}.local.{key} to name one of them, or rename the column in the file.")
    return head.index(spec)


def _label(value: str, task: GlueTask, where: str) -> Any:
    value = value.strip()
    if task.labels is None:
        try:
            return float(value)
        except ValueError:
            raise DataError(f"{where}: label {value!r} is not a number (task {task.name} is a regression); write a "
                            "number (e.g. 3.8) in the label column of that line.") from None
    if value in task.labels:
        return task.labels.index(value)
    if value.lstrip("-").isdigit() and 0 <= int(value) < len(task.labels):
        return int(value)
    raise DataError(
        f"{where}: label {value!r} is neither one of {list(task.labels)} nor a class id 0-{len(task.labels) - 1}; "
        f"valid values: {', '.join(task.labels)}, {', '.join(map(str, range(len(task.labels))))}. Fix the label on "
        f"that line (or task.definitions.{task.name}.labels if the file uses other names)."
    )


def read_local_split(path: Path, task: GlueTask) -> Split:
    spec = task.local
    head, rows = read_tsv(path, spec.header)
    if not rows:
        raise DataError(f"{path} line 1: only a header, no data rows; {GLUE_FIX}.")
    ia = _column(spec.text_a, head, path, task.name, "text_a")
    ib = _column(spec.text_b, head, path, task.name, "text_b") if spec.text_b is not None else None
    il = _column(spec.label, head, path, task.name, "label")
    width = len(rows[0][1])
    for key, idx in (("text_a", ia), ("text_b", ib), ("label", il)):
        if idx is not None and not 0 <= idx < width:
            raise DataError(f"{path} line {rows[0][0]}: column index {idx} is out of range for {width} columns; set "
                            f"task.definitions.{task.name}.local.{key} to 0-{width - 1}.")
    return Split(text_a=[r[ia] for _, r in rows], text_b=[r[ib] for _, r in rows] if ib is not None else None,
                 labels=[_label(r[il], task, f"{path} line {n}") for n, r in rows])


def file_fingerprint(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return "sha256:" + h.hexdigest()[:16]


def local_paths(task: GlueTask, data_dir: str | Path) -> tuple[Path, Path, dict[str, Path]]:
    """(folder, train file, dev files by name) of a task under ``data_dir``."""
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise DataError(f"task.data_dir={data_dir} is not a directory. Point it at a GLUE folder (glue_data/ layout)")
    folder = root / str(task.local.dir)
    return folder, folder / task.local.train, {name: folder / f for name, f in task.local.dev.items()}


def local_files(task: GlueTask, data_dir: str) -> list[Path]:
    """The train and dev files a task reads under ``data_dir``; a missing one is a one-line error."""
    _, train, dev = local_paths(task, data_dir)
    for p in (train, *dev.values()):
        if not p.is_file():
            raise DataError(f"GLUE {task.name}: {p} not found. task.data_dir must hold GLUE's layout ({task.local.dir}/"
                            f"{task.local.train}, ...)")
    return [train, *dev.values()]


def data_fingerprint(task: GlueTask, data_dir: str | None, hub_path: str, hub_revision: str | None) -> str:
    """What identifies a task's data without parsing it: the local files' content hash, or the hub revision."""
    if not data_dir:
        return f"hub:{hub_path}@{hub_revision}"
    paths = local_files(task, data_dir)
    return file_hash.cached("glue-files", paths, lambda: file_fingerprint(paths))


def load_local(task: GlueTask, data_dir: str | Path) -> GlueData:
    """A task from ``<data_dir>/<local.dir>/`` (train file and dev file(s))."""
    folder, train_path, dev_paths = local_paths(task, data_dir)
    train = read_local_split(train_path, task)
    dev = {name: read_local_split(p, task) for name, p in dev_paths.items()}
    return GlueData(task, train, dev, str(folder.resolve()), file_fingerprint([train_path, *dev_paths.values()]))


# ---------------------------------------------------------------------------------------------- hub
def load_hub(task: GlueTask, path: str, revision: str | None) -> GlueData:
    """A task from the hub dataset (``datasets.load_dataset(path, config, revision=...)``). Fails fast offline."""
    from huggingface_hub import constants

    from harness.models import hub_reachable
    fix = ("Use local GLUE files instead: task.data_dir=/path/to/glue_data (the original GLUE TSV layout), "
           "or run where the hub is reachable.")
    online = hub_reachable()
    if not online and not constants.HF_HUB_OFFLINE:
        raise HubUnavailableError(f"GLUE task {task.name} ({path}) needs the Hugging Face hub, which is not reachable. {fix}")
    import datasets
    try:
        ds = datasets.load_dataset(path, task.hub.config, revision=revision)
    except Exception as exc:
        if not online:  # offline and not in the datasets cache
            raise HubUnavailableError(
                f"GLUE task {task.name} ({path}@{revision}) needs the Hugging Face hub, which is offline here "
                f"(HF_HUB_OFFLINE), and the dataset is not in the local datasets cache. {fix}"
            ) from exc
        raise DataError(f"could not load {path}/{task.hub.config}@{revision} from the hub: {exc}") from exc

    def split(name: str) -> Split:
        if name not in ds:
            raise DataError(f"{path}/{task.hub.config} has no split {name!r} (it has {list(ds)}); fix task.definitions")
        s = ds[name]
        for col in (task.hub.text_a, task.hub.text_b, task.hub.label):
            if col is not None and col not in s.column_names:
                raise DataError(f"{path}/{task.hub.config}: no column {col!r} (has {s.column_names})")
        labels = [float(v) for v in s[task.hub.label]] if task.is_regression else [int(v) for v in s[task.hub.label]]
        return Split(list(s[task.hub.text_a]), list(s[task.hub.text_b]) if task.hub.text_b else None, labels)

    return GlueData(task, split(task.hub.train), {k: split(v) for k, v in task.hub.dev.items()},
                    f"{path}@{revision}", f"hub:{path}@{revision}")


def load(task: GlueTask, data_dir: str | None, hub_path: str, hub_revision: str | None) -> GlueData:
    """Local files when ``data_dir`` is set, else the hub."""
    return load_local(task, data_dir) if data_dir else load_hub(task, hub_path, hub_revision)
