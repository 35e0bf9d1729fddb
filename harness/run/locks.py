"""One process per run: ``<results>/<task>/<model>/<run id>/.lock``, so a requeued SLURM task or two users starting one
sweep never compute a run twice; a live lock is waited for up to ``wait`` seconds, then the run skipped, naming it."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.cache_entry import FileLock, Heartbeat, Holder, beat_every
from harness.run.preflight import existing_ancestor

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"


@dataclass(kw_only=True)
class LockSettings:
    """``run_lock`` in the config (seconds)."""

    stale_after: float
    wait: float

    @property
    def poll(self) -> float:
        return min(5.0, max(0.05, self.stale_after / 20))


class RunLock(FileLock):
    """One run folder's :class:`~harness.core.cache_entry.FileLock`; folders made for it go on release if unused."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(Path(run_dir) / LOCK_NAME)
        self.created: list[Path] = []

    def try_acquire(self, stale_after: float) -> Holder | None:
        folder, found = self.path.parent, existing_ancestor(self.path.parent)
        self.created = [d for d in (folder, *folder.parents) if d not in (found, *found.parents)]   # deepest first
        folder.mkdir(parents=True, exist_ok=True)
        return super().try_acquire(stale_after)

    def release(self) -> None:
        super().release()
        for d in self.created:   # a run that failed before writing anything leaves no empty folders behind
            try:
                d.rmdir()
            except OSError:
                break


@contextlib.contextmanager
def hold(dirs: Mapping[str, Path], settings: LockSettings) -> Iterator[set[str]]:
    """Lock the runs ``dirs`` names and yield those held; one held elsewhere is waited for, then skipped."""
    # the locks held: beating while the others are waited for
    with Heartbeat([], beat_every(settings.stale_after)) as beat:
        try:
            busy = _acquire_all(dirs, settings, beat.locks)
            for rid, holder in busy.items():
                log.warning("run %s is being computed by %s; skipped here: its records appear when that process "
                            "finishes. Rerun later, or wait longer with run_lock.wait=<seconds>.", rid,
                            holder.describe())
            yield set(dirs) - set(busy) if beat.locks else set()
        finally:
            for lock in reversed(beat.locks):   # last made, first removed: empty shared folders go too
                lock.release()


def _acquire_all(dirs: Mapping[str, Path], settings: LockSettings, held: list[FileLock]) -> dict[str, Holder]:
    """Take the locks of ``dirs`` into ``held``, waiting up to ``settings.wait``; returns busy runs' holders."""
    busy: dict[str, Holder] = {}
    deadline = time.monotonic() + settings.wait
    pending = dict(dirs)
    while True:
        for rid, d in list(pending.items()):
            lock = RunLock(d)
            holder = lock.try_acquire(settings.stale_after)
            if holder is None:
                held.append(lock)
                busy.pop(rid, None)
                del pending[rid]
                continue
            if rid not in busy:
                log.info("run %s is locked by %s; waiting up to %.0f s", rid, holder.describe(), settings.wait)
            busy[rid] = holder
        if not pending or time.monotonic() >= deadline:
            return busy
        time.sleep(min(settings.poll, max(0.0, deadline - time.monotonic())))
