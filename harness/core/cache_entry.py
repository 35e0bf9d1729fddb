"""Cache entries built once and published atomically (:func:`get_or_build`: one job builds a missing entry under its
lock, the others wait and read it), and the one lock primitive (:class:`FileLock`: exclusive create, heartbeat)."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from harness.core.errors import HarnessError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: a cache lock untouched this long (seconds) is abandoned; its heartbeat beats ten times as often
STALE_AFTER = 300.0
#: how long (seconds) a job waits for another live job building the entry it needs, then gives up naming it
WAIT = 6 * 3600.0

_HELD: set[str] = set()   # tokens of the locks this process holds (a same-pid lock with another token is stale)


# ------------------------------------------------------------------------------------------------ the lock
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


def read_holder(path: Path) -> Holder | None:
    """The lock's owner, or None. A lock being written (empty) reads fresh, stale after :data:`EMPTY_GRACE` seconds."""
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


#: seconds a lock may stay empty: its creator writes its owner right after creating it, so one still empty was left
#: by a process killed in between
EMPTY_GRACE = 10.0


def is_stale(holder: Holder, stale_after: float) -> bool:
    """Untouched for ``stale_after`` s, owned by a dead process (or our finished job) here, or empty too long."""
    if holder.idle > stale_after:
        return True
    if not holder.token:
        return holder.idle > EMPTY_GRACE
    if holder.host != socket.gethostname() or holder.pid <= 0:
        return False
    if holder.pid == os.getpid():
        return holder.token not in _HELD
    return not _pid_alive(holder.pid)


class FileLock:
    """One lock file: taken with ``O_CREAT | O_EXCL``, touched while held, taken over when stale."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.token = secrets.token_hex(8)

    def try_acquire(self, stale_after: float) -> Holder | None:
        """Take the lock (None) or return its live holder; a stale lock is moved aside and taken over."""
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

    def _write(self, fd: int) -> None:
        info = {"host": socket.gethostname(), "pid": os.getpid(), "token": self.token,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        with os.fdopen(fd, "w") as fh:
            json.dump(info, fh)
            fh.flush()
            os.fsync(fh.fileno())
        _HELD.add(self.token)

    def _take_over(self, stale: Holder) -> None:
        """Move a stale lock aside (one rename wins) if still the one judged stale; a new owner's is put back."""
        now = read_holder(self.path)
        if now is None or now.token != stale.token:
            return
        log.warning("taking over the stale lock of %s", stale.describe())
        aside = self.path.with_name(f"{self.path.name}.stale-{self.token}")
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, aside)
            moved = read_holder(aside)
            if moved is not None and moved.token != stale.token:
                with contextlib.suppress(FileExistsError):
                    os.link(aside, self.path)
            aside.unlink(missing_ok=True)

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


def beat_every(stale_after: float) -> float:
    """How often (seconds) a held lock is touched: ten times within ``stale_after``, at most every 0.05 s."""
    return max(0.05, stale_after / 10)


class Heartbeat:
    """A daemon thread that touches held locks until stopped."""

    def __init__(self, locks: Sequence[FileLock], every: float) -> None:
        self.locks, self.every = list(locks), every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="harness-lock-heartbeat", daemon=True)

    def _beat(self) -> None:
        lost: set[str] = set()
        while not self._stop.wait(self.every):
            for lock in self.locks:
                if not lock.touch() and lock.token not in lost:
                    lost.add(lock.token)
                    log.warning("lost the lock %s to another process (this one stalled past its stale_after)",
                                lock.path)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# ------------------------------------------------------------------------------------------------ cache entries
class Unusable(Exception):
    """A cache entry that is there but not what it claims (raised by a reader; the message says why)."""


def lock_path(entry: Path) -> Path:
    """The lock beside ``entry`` (a file or folder): ``<entry>.lock``, never an entry's name."""
    return entry.with_name(entry.name + ".lock")


@contextlib.contextmanager
def entry_lock(path: Path, what: str, *, stale_after: float = STALE_AFTER, wait: float = WAIT) -> Iterator[None]:
    """Hold lock ``path`` (heartbeat on) while building ``what``; a live holder is waited for ``wait`` s, then named."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
    deadline, pause, told = time.monotonic() + wait, 0.02, False
    while (holder := lock.try_acquire(stale_after)) is not None:
        if time.monotonic() >= deadline:
            raise HarnessError(f"{what}: gave up after {wait:.0f} s waiting for the job building it, "
                               f"{holder.describe()}; rerun once it finishes, or delete {path} if that job is gone")
        if not told:
            log.info("%s is being built by %s; waiting for it", what, holder.describe())
            told = True
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(2.0, stale_after / 20, pause * 2)
    try:
        with Heartbeat([lock], beat_every(stale_after)):
            yield
    finally:
        lock.release()


def set_aside(path: Path) -> None:
    """Move a bad entry out of the way by one rename (readers see it whole or not at all), then delete it."""
    aside = path.with_name(f".{path.name}.aside-{secrets.token_hex(4)}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    _remove(aside)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def publish(tmp: Path, path: Path) -> bool:
    """Rename the finished ``tmp`` to ``path`` unless an entry is there already (kept; ``tmp`` removed: False)."""
    try:
        if tmp.is_dir():
            os.rename(tmp, path)
        else:
            _link(tmp, path)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
    _remove(tmp)
    return False


def _link(tmp: Path, path: Path) -> None:
    try:
        os.link(tmp, path)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        os.replace(tmp, path)   # a file system without hard links: under the entry's lock a rename is as good
        return
    tmp.unlink()


def get_or_build(read: Callable[[], T | None], build: Callable[[], T], entry: Path, *, what: str) -> tuple[T, bool]:
    """(the entry, built here): ``read`` it; on a miss take its lock, read again, and only then ``build`` it."""
    with contextlib.suppress(Unusable, OSError):
        got = read()
        if got is not None:
            return got, False
    with entry_lock(lock_path(entry), what):
        try:
            got = read()
        except (Unusable, OSError) as exc:
            why = str(exc) if isinstance(exc, Unusable) else f"is unreadable ({type(exc).__name__}: {exc})"
            log.warning("%s %s: computing it again", what, why)
            set_aside(entry)
            got = None
        if got is not None:
            return got, False
        return build(), True
