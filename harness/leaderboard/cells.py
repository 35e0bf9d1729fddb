"""The leaderboard's data types: a row (one model, published or run here) and a cell (one number)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from harness.core.data_origin import LOCAL_MARK  # noqa: F401  (re-exported: the page's marks live here)
from harness.core.results import SUBSET_MARK  # noqa: F401

PUBLISHED = "published"
THIS_RUN = "this run"
PARTIAL_MARK = "*"
COMPUTED_MARK = "†"
#: a published number in another metric than its column's (Table 5 copies GTE-en-MLM's QQP and MRPC F1 into
#: accuracy columns): footnoted, never marked best
OTHER_METRIC_MARK = "◊"
#: a published number measured under another protocol than its column's (a later paper's own fine-tune or evaluation
#: code: Ettin's CSN/MLDR, mmBERT's GLUE via mGTE's NLU code): footnoted, never marked best
OTHER_PROTOCOL_MARK = "¶"
#: a cell's fields under their keys in the page's data (data.js; app.js reads these)
_JSON_KEYS = {"std": "s", "n": "n", "partial": "p", "failed": "f", "computed": "c", "subset": "sub", "local": "loc",
              "other_metric": "om", "other_protocol": "op", "note": "note", "sources": "src"}


@dataclass(frozen=True)
class RowKey:
    """Row identity: model, family, size, and published or run here (so both rows of one model appear)."""

    name: str
    family: str
    size: str
    origin: str = THIS_RUN

    @property
    def id(self) -> str:
        prefix = "pub" if self.origin == PUBLISHED else "run"
        return f"{prefix}:{self.name}|{self.family}|{self.size}"


@dataclass
class Cell:
    """One displayed number: ``value`` on the display scale (None: empty or failed), ``text`` as printed."""

    value: float | None
    text: str
    std: float | None = None          # mean rule: spread over seeds
    n: int = 1                        # records (or datasets, for an average) behind the number
    partial: bool = False             # an average over only some of the expected datasets
    failed: bool = False              # only failed records for this cell
    computed: bool = False            # derived here from published numbers (not itself published)
    subset: bool = False              # evaluated on part of a dataset (max_queries/...): never ranked, never best
    local: bool = False               # computed on data that is not the official copy: never ranked, never best
    other_metric: str = ""            # a published number in another metric than the column's: never ranked
    other_protocol: str = ""          # a published number under another protocol than the column's: never ranked
    note: str = ""                    # shown in tooltips and footnotes
    sources: list[dict[str, Any]] = field(default_factory=list)   # provenance, one dict per record/source

    def to_json(self) -> dict[str, Any]:
        """The page's form: value and text, then each non-default field under its short key (flags as 1)."""
        out: dict[str, Any] = {"v": self.value, "t": self.text}
        for f in fields(self)[2:]:
            value = getattr(self, f.name)
            if value != (f.default_factory() if f.default is MISSING else f.default):   # type: ignore[misc]
                out[_JSON_KEYS[f.name]] = 1 if value is True else value
        return out


def ranked(cell: Cell) -> bool:
    """A cell that competes for best: complete, on the full official datasets, in its column's metric and protocol."""
    return (cell.value is not None and not cell.partial and not cell.subset and not cell.local
            and not cell.other_metric and not cell.other_protocol)


def fmt(value: float, decimals: int = 1) -> str:
    """A number as the paper prints it (one decimal)."""
    return f"{value:.{decimals}f}"
