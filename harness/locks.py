"""One process per run: a lock file in the run's results folder, so a requeued SLURM array task that overlaps the
original (or two users starting the same sweep) never computes a run twice.

``<results>/<task>/<model>/<run id>/.lock`` holds the owner's host, pid, a token and its start time; the owner
touches it every ``stale_after / 10`` seconds. A lock is stale (its owner died: kill -9, a lost node) when it has
not been touched for ``stale_after`` seconds, or at once when its owner was a process on this host that no longer
exists; a stale lock is taken over. A live lock is waited for up to ``wait`` seconds, then the run is skipped
with a message naming the owner. Our own code (no library does this): file locks (``fcntl``) do not hold across
the NFS/Lustre nodes of a cluster, ``O_CREAT | O_EXCL`` and a heartbeat do.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.typed import build

if TYPE_CHECKING:
    from harness.families.base import Cell

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
_HELD: set[str] = set()   # tokens of the locks this process holds (a same-pid lock with another token is stale)


@dataclass(kw_only=True)
class LockSettings:
    """``run_lock`` in the config (seconds)."""

    stale_after: float
    wait: float

    @property
    def heartbeat(self) -> float:
        return max(0.05, self.stale_after / 10)

    @property
    def poll(self) -> float:
        return min(5.0, max(0.05, self.stale_after / 20))


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as its file says, and how long ago it was last touched."""

    path: Path
    host: str
    pid: int
    token: str
    started: str
    idle: float

    def describe(self) -> str:
        return (f"{self.host}:{self.pid} (since {self.started or '?'}, last heartbeat {self.idle:.0f} s ago; "
                f"lock {self.path})")


def settings_from(raw: Mapping[str, Any] | None) -> LockSettings:
    """Typed ``run_lock`` settings: an unknown key is an error naming the closest valid one."""
    return build(LockSettings, dict(raw or {}), "run_lock")


def read_holder(path: Path) -> Holder | None:
    """The lock's owner, or None when there is no lock. A lock being written (empty) reads as a fresh one."""
    try:
        idle = time.time() - path.stat().st_mtime
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = {}
    return Holder(path, str(data.get("host", "?")), int(data.get("pid", -1)), str(data.get("token", "")),
                  str(data.get("started", "")), max(0.0, idle))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale(holder: Holder, stale_after: float) -> bool:
    """Untouched for ``stale_after`` seconds, or owned by a dead process (or a finished job of ours) on this host."""
    if holder.idle > stale_after:
        return True
    if holder.host != socket.gethostname() or holder.pid <= 0:
        return False
    if holder.pid == os.getpid():
        return holder.token not in _HELD
    return not _pid_alive(holder.pid)


class RunLock:
    """The lock of one run folder."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self.token = secrets.token_hex(8)
        self.created: list[Path] = []   # folders made for the lock, removed again if the run wrote nothing

    def try_acquire(self, stale_after: float) -> Holder | None:
        """Take the lock (None) or return its live holder; a stale lock is moved aside and taken over."""
        self._make_parents()
        holder = None
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = read_holder(self.path)
                if holder is None:
                    continue
                if not is_stale(holder, stale_after):
                    return holder
                self._take_over(holder)
                continue
            self._write(fd)
            return None
        return holder

    def _make_parents(self) -> None:
        missing = []
        d = self.path.parent
        while not d.exists() and d.parent != d:
            missing.append(d)
            d = d.parent
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.created = missing   # deepest first

    def _write(self, fd: int) -> None:
        info = {"host": socket.gethostname(), "pid": os.getpid(), "token": self.token,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        with os.fdopen(fd, "w") as fh:
            json.dump(info, fh)
            fh.flush()
            os.fsync(fh.fileno())
        _HELD.add(self.token)

    def _take_over(self, stale: Holder) -> None:
        """Move a stale lock aside (one rename wins) after checking it is still the one judged stale."""
        now = read_holder(self.path)
        if now is None or now.token != stale.token:
            return
        log.warning("taking over the stale lock of %s", stale.describe())
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, self.path.with_name(f"{LOCK_NAME}.stale-{self.token}"))
            self.path.with_name(f"{LOCK_NAME}.stale-{self.token}").unlink(missing_ok=True)

    def touch(self) -> bool:
        """Heartbeat; False when the lock is no longer ours (taken over after we stalled)."""
        holder = read_holder(self.path)
        if holder is None or holder.token != self.token:
            return False
        with contextlib.suppress(FileNotFoundError):
            os.utime(self.path)
        return True

    def release(self) -> None:
        _HELD.discard(self.token)
        holder = read_holder(self.path)
        if holder is not None and holder.token == self.token:
            self.path.unlink(missing_ok=True)
        for d in self.created:   # a run that failed before writing anything leaves no empty folders behind
            try:
                d.rmdir()
            except OSError:
                break


class Heartbeat:
    """A daemon thread that touches held locks until stopped."""

    def __init__(self, locks: Sequence[RunLock], every: float) -> None:
        self.locks, self.every = list(locks), every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="harness-lock-heartbeat", daemon=True)

    def _beat(self) -> None:
        lost: set[str] = set()
        while not self._stop.wait(self.every):
            for lock in self.locks:
                if not lock.touch() and lock.token not in lost:
                    lost.add(lock.token)
                    log.warning("lost the lock %s to another process (this one stalled past run_lock.stale_after)",
                                lock.path)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def hold(todo: Sequence[Cell], run_dir: Callable[[Cell], Path], settings: LockSettings,
         replan: Callable[[list[Cell]], list[Cell]]) -> Iterator[list[Cell]]:
    """Lock the runs of ``todo`` and yield the cells this process should compute: a run another live process
    holds is waited for up to ``settings.wait`` seconds, then skipped with a warning; once locked, cells are
    planned again (``replan``), so what the other process finished meanwhile is not computed twice."""
    dirs: dict[str, Path] = {}
    for cell in todo:
        dirs.setdefault(cell.run_id, run_dir(cell))
    held: dict[str, RunLock] = {}
    with Heartbeat([], settings.heartbeat) as beat:   # beats for the locks taken while waiting for the others
        try:
            busy = _acquire_all(dirs, settings, held, beat.locks)
            for rid, holder in busy.items():
                log.warning("run %s is being computed by %s; skipped here: its records appear when that process "
                            "finishes. Rerun later, or wait longer with run_lock.wait=<seconds>.", rid,
                            holder.describe())
            yield replan([c for c in todo if c.run_id in held]) if held else []
        finally:
            for lock in reversed(held.values()):   # last made, first removed: empty shared folders go too
                lock.release()


def _acquire_all(dirs: Mapping[str, Path], settings: LockSettings, held: dict[str, RunLock],
                 beating: list[RunLock]) -> dict[str, Holder]:
    """Take the locks of ``dirs`` into ``held`` (and ``beating``), waiting up to ``settings.wait`` for busy runs;
    returns the live holders of the runs still busy."""
    busy: dict[str, Holder] = {}
    deadline = time.monotonic() + settings.wait
    pending = dict(dirs)
    while True:
        for rid, d in list(pending.items()):
            lock = RunLock(d)
            holder = lock.try_acquire(settings.stale_after)
            if holder is None:
                held[rid] = lock
                beating.append(lock)
                busy.pop(rid, None)
                del pending[rid]
                continue
            if rid not in busy:
                log.info("run %s is locked by %s; waiting up to %.0f s", rid, holder.describe(), settings.wait)
            busy[rid] = holder
        if not pending or time.monotonic() >= deadline:
            return busy
        time.sleep(min(settings.poll, max(0.0, deadline - time.monotonic())))
