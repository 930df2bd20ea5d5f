"""A lock on a results folder, so that two runs never write the same folder at once.

The lock is the file ``.mjsysid.lock``, taken with the ``filelock`` package's
:class:`filelock.MarkerSoftFileLock`: created exclusively (only one process can create it),
holding the holder's owner record (PID, host and process start), and removed when the holder
leaves the ``with`` block. A lock left by a process that died (SIGKILL, power loss) is
*stale*: its PID is not alive on this host (or now names another process); filelock takes it
over and this module says so (the ``note``). A lock of another host cannot be checked and is
always respected. A lock file without a readable record (a crash between creating and writing
it, or a foreign file) is a run that is starting, until it is :data:`_UNREADABLE_GRACE_S` old.

While holding the lock, a run may remove what killed writers left behind (see
:func:`mjsysid.util.files.remove_write_leftovers`): no other run writes the folder.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from filelock import MarkerSoftFileLock, Timeout

LOCK_FILE = ".mjsysid.lock"
_UNREADABLE_GRACE_S = 10.0  # a lock file still unreadable after this long was left by a crash
_TAKE_S = 0.25  # how long a run tries for a lock (filelock breaks a stale one on a retry)
_OWNER_RECORD = "filelock/2"  # the first line of filelock's owner record (its protocol 2)

_held: dict[Path, MarkerSoftFileLock] = {}  # the locks this process holds, by lock file
_held_guard = threading.Lock()


class FolderLockedError(OSError):
    """Another live run holds the results folder's lock."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock: process id, host name and start time (ISO 8601, UTC)."""

    pid: int
    host: str
    started: str

    @classmethod
    def me(cls) -> LockHolder:
        return cls(os.getpid(), socket.gethostname(), _iso(_dt.datetime.now().timestamp()))

    def text(self) -> str:
        """The lock file's content for this holder: filelock's exclusive owner record (the
        start time is the file's own)."""
        lines = (_OWNER_RECORD, f"pid={self.pid}", f"host={self.host}", "mode=exclusive")
        return "".join(f"{line}\n" for line in lines)

    def describe(self) -> str:
        return f"PID {self.pid} on {self.host!r}, started {self.started}"


def _iso(timestamp: float) -> str:
    """``timestamp`` (s since the epoch) in ISO 8601, UTC, to the second."""
    when = _dt.datetime.fromtimestamp(timestamp, _dt.timezone.utc)
    return when.isoformat(timespec="seconds")


def read_holder(path: Path) -> LockHolder | None:
    """The holder written in lock file ``path`` (started: when the file was written);
    ``None`` when it is missing, empty or unreadable."""
    owner = MarkerSoftFileLock(path).owner
    if owner is None:
        return None
    try:
        started = _iso(path.stat().st_mtime)
    except OSError:  # released meanwhile
        return None
    return LockHolder(owner.pid, owner.hostname, started)


def _unreadable_and_old(path: Path) -> bool:
    """Whether lock file ``path`` holds no readable record and is older than the grace."""
    if read_holder(path) is not None:
        return False
    try:
        age = _dt.datetime.now().timestamp() - path.stat().st_mtime
    except FileNotFoundError:
        return False
    return age > _UNREADABLE_GRACE_S


def _in_use(folder: Path, path: Path) -> FolderLockedError:
    holder = read_holder(path)
    who = holder.describe() if holder is not None else "a run that is starting"
    return FolderLockedError(
        f"results folder {str(folder)!r} is in use by {who}; wait for it to finish, "
        f"choose another --out, or remove {str(path)!r} if that process is gone"
    )


def _take(path: Path) -> MarkerSoftFileLock | None:
    """The lock of ``path``, taken within :data:`_TAKE_S` (a stale one taken over); ``None``
    when another holds it."""
    lock = MarkerSoftFileLock(path, timeout=_TAKE_S, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        return None
    return lock


def acquire(folder: str | Path, note: Callable[[str], None] | None = None) -> Path:
    """Takes the lock of ``folder`` (created if missing) and returns the lock file's path.

    The lock is held by this process until :func:`release` (or the process ends).

    Args:
      folder: The results folder.
      note: Called with a sentence when a stale lock is taken over (e.g. print to stderr).

    Raises:
      FolderLockedError: A live process holds the lock (its PID and start time are named).
      OSError: The folder cannot be created or written.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(f"cannot create the results folder {str(folder)!r}: {e}") from e
    path = folder / LOCK_FILE
    for _ in range(3):  # (an unreadable lock removed, or a race with another run: again)
        was = read_holder(path)
        lock = _take(path)
        if lock is None:
            if not _unreadable_and_old(path):
                raise _in_use(folder, path)
            MarkerSoftFileLock(path).force_break()
            _said(note, folder, "an unreadable lock file")
            continue
        if was is not None:  # filelock took over the record of a process that is gone
            _said(note, folder, was.describe())
        with _held_guard:
            _held[path] = lock
        return path
    raise FolderLockedError(f"results folder {str(folder)!r}: could not take its lock {path}")


def _said(note: Callable[[str], None] | None, folder: Path, was: str) -> None:
    if note is not None:
        note(f"took over the stale lock of {str(folder)!r} ({was}, no longer running)")


def release(path: Path) -> None:
    """Removes lock file ``path`` if this process still holds it."""
    with _held_guard:
        lock = _held.pop(Path(path), None)
    if lock is not None:
        lock.release()


@contextlib.contextmanager
def folder_lock(folder: str | Path, note: Callable[[str], None] | None = None) -> Iterator[Path]:
    """``with folder_lock(out):`` holds the lock of ``out`` (see :func:`acquire`)."""
    path = acquire(folder, note)
    try:
        yield path
    finally:
        release(path)
