"""A lock on a results folder, so that two runs never write the same folder at once.

The lock is a file, ``.mjsysid.lock``, created with ``O_CREAT | O_EXCL`` (only one process can
create it) and holding the holder's PID, host and start time. It is removed when the holder
leaves the ``with`` block. A lock left by a process that died (SIGKILL, power loss) is *stale*:
its PID is not alive on this host; the next run takes it over and says so. A lock of another
host cannot be checked and is always respected.

While holding the lock, a run may remove what killed writers left behind (see
:func:`mjsysid.util.files.remove_write_leftovers`): no other run writes the folder.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = ".mjsysid.lock"
_UNREADABLE_GRACE_S = 10.0  # a lock file still empty after this long was left by a crash


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
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        return cls(os.getpid(), socket.gethostname(), now)

    def text(self) -> str:
        return json.dumps({"pid": self.pid, "host": self.host, "started": self.started})

    def describe(self) -> str:
        return f"PID {self.pid} on {self.host!r}, started {self.started}"


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (``kill(pid, 0)`` probes, sends nothing)."""
    if pid <= 0:
        return False
    if os.name == "nt":  # (kill(pid, 0) would send CTRL_C_EVENT there): assume it lives
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def read_holder(path: Path) -> LockHolder | None:
    """The holder written in lock file ``path``; ``None`` when it is empty or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return LockHolder(int(data["pid"]), str(data["host"]), str(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _is_stale(path: Path, holder: LockHolder | None) -> bool:
    """Whether the lock at ``path`` was left by a process that is gone."""
    if holder is None:  # a crash between creating and writing it, or a foreign file
        try:
            age = _dt.datetime.now().timestamp() - path.stat().st_mtime
        except FileNotFoundError:
            return True
        return age > _UNREADABLE_GRACE_S
    return holder.host == socket.gethostname() and not _pid_alive(holder.pid)


def _try_create(path: Path, me: LockHolder) -> bool:
    """Creates the lock file holding ``me``; ``False`` when it exists already."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(me.text())
        f.flush()
        os.fsync(f.fileno())
    return True


def acquire(folder: str | Path, note: Callable[[str], None] | None = None) -> Path:
    """Takes the lock of ``folder`` (created if missing) and returns the lock file's path.

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
    path, me = folder / LOCK_FILE, LockHolder.me()
    for _ in range(3):  # (a take-over raced with another run: look again)
        if _try_create(path, me):
            return path
        holder = read_holder(path)
        if not _is_stale(path, holder):
            who = holder.describe() if holder is not None else "a run that is starting"
            raise FolderLockedError(
                f"results folder {str(folder)!r} is in use by {who}; wait for it to finish, "
                f"choose another --out, or remove {str(path)!r} if that process is gone"
            )
        if read_holder(path) == holder:  # still the same stale lock: take it over
            path.unlink(missing_ok=True)
            if note is not None:
                was = holder.describe() if holder is not None else "an unreadable lock file"
                note(f"took over the stale lock of {str(folder)!r} ({was}, no longer running)")
    raise FolderLockedError(f"results folder {str(folder)!r}: could not take its lock {path}")


def release(path: Path) -> None:
    """Removes lock file ``path`` if this process still holds it."""
    holder = read_holder(path)
    if holder is not None and holder.pid == os.getpid() and holder.host == socket.gethostname():
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def folder_lock(folder: str | Path, note: Callable[[str], None] | None = None) -> Iterator[Path]:
    """``with folder_lock(out):`` holds the lock of ``out`` (see :func:`acquire`)."""
    path = acquire(folder, note)
    try:
        yield path
    finally:
        release(path)
