"""Dataset names -> typed catalog entries, checked and loaded through their data kind (:mod:`harness.tasks.retrieval.data.kinds`;
no kind's layout is known here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from harness.core.errors import DataError, HubUnavailableError, no_hub_copy, unknown_name
from harness.core.typed import build
from harness.tasks.retrieval.data.dataset import RetrievalDataset
from harness.tasks.retrieval.data.kinds import KINDS, DatasetEntry, get_kind, local_folder

__all__ = ["DatasetEntry", "check_entries", "check_local", "entry_from_config", "load_entry", "local_folder",
           "resolve_entries"]


def entry_from_config(name: str, raw: Mapping[str, Any] | None) -> DatasetEntry:
    """A typed catalog entry: an unknown key (``ignore_identical_id``) is an error naming the closest valid one.
    Members of a composite inherit ``split`` and ``ignore_identical_ids`` and live in ``<name>/<member>``."""
    raw = dict(raw or {})
    members_raw = raw.pop("members", None) or {}
    entry = build(DatasetEntry, {"name": name, **raw}, f"catalog entry {name!r}")
    if entry.kind not in KINDS:
        get_kind(entry.kind, f"catalog entry {name!r}")   # raises: the valid kinds, closest first
    inherited = {k: raw[k] for k in ("split", "ignore_identical_ids") if k in raw}
    members = {
        m: entry_from_config(f"{name}-{m}", {"local": f"{name}/{m}", **inherited, **dict(mraw or {})})
        for m, mraw in members_raw.items()
    }
    return replace(entry, members=members) if members else entry


def resolve_entries(names: list[str], catalog: Mapping[str, Any]) -> list[DatasetEntry]:
    """Catalog entries for ``names``. Every entry is validated (a typo anywhere in the catalog is an error); an
    unknown name fails with the valid ones, closest first."""
    entries = {name: entry_from_config(name, raw) for name, raw in catalog.items()}
    for name in names:
        if name not in entries:
            raise unknown_name(
                "dataset", name, entries,
                "Add it to task.catalog, e.g. +task.catalog.mydata={split:test} with task.data_dir=<dir with mydata/>.",
            )
    return [entries[name] for name in names]


def load_entry(
    entry: DatasetEntry, *, data_dir: str | None, split: str | None = None, strict_qrels: bool = True
) -> RetrievalDataset:
    """Load one (non-composite) dataset through its kind: ``<data_dir>/<local>``, what the entry names, or its
    pinned hub copy."""
    return get_kind(entry.kind).load(entry, data_dir, split or entry.split, strict_qrels)


def check_local(entry: DatasetEntry, data_dir: str | None, split: str | None = None) -> None:
    """The files a (non-composite) entry reads are there (its kind's check), before any model is loaded. Presence
    only: contents are validated when loaded."""
    problem = get_kind(entry.kind).check(entry, data_dir, split or entry.split)
    if problem:
        raise DataError(problem)


def hub_label(entry: DatasetEntry) -> str:
    """``hub@revision`` of an entry (of a composite's first member, with the number of members)."""
    members = list(entry.members.values())
    first = members[0] if members else entry
    return f"{first.hub}@{first.revision}" + (f", {len(members)} subsets" if members else "")


def check_entries(entries: Sequence[DatasetEntry], data_dir: str | None, split: str | None = None) -> None:
    """Before any model is loaded: every entry's local files are there (``data_dir`` set, or kinds that need
    neither it nor the hub), or its pinned hub copy exists and the hub is reachable (else one error naming each
    local alternative); hub copies a kind fetches ahead are fetched."""
    needs_hub: list[DatasetEntry] = []
    for entry in entries:
        parts = list(entry.members.values()) or [entry]
        if data_dir or not any(get_kind(p.kind).reads_data_dir for p in parts):
            for p in parts:
                check_local(p, data_dir, split or p.split)
        elif not all(get_kind(p.kind).hub_copy(p) for p in parts):
            raise no_hub_copy(entry.name, entry.local)
        else:
            needs_hub.append(entry)
    if not needs_hub:
        return
    from harness.models import hub_reachable

    if not hub_reachable():
        hints = (get_kind((list(e.members.values()) or [e])[0].kind).offline_hint(e) for e in needs_hub)
        raise HubUnavailableError(
            f"{', '.join(e.name for e in needs_hub)}: the pinned hub copies "
            f"({'; '.join(hub_label(e) for e in needs_hub)}) need the Hugging Face hub, which is not reachable "
            "from here. Offline: " + " ".join(hints)
        )
    for entry in needs_hub:
        for p in list(entry.members.values()) or [entry]:
            get_kind(p.kind).fetch(p)
