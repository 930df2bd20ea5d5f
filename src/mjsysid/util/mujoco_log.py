"""Where MuJoCo writes its log: the results folder (or nowhere), never the working directory.

MuJoCo appends every warning and error it reports (an unstable simulation, say) to
``MUJOCO_LOG.TXT`` in the current directory and prints each to stdout: an unstable fit
printed thousands of lines and left the file behind. Within :func:`mujoco_log_in`, MuJoCo
logs to a file of its own in a private temporary folder (``mkdtemp``: only this user can write
there, so no link planted by someone else can redirect the log; made once per process, on
first use, and removed at exit) and prints nothing; on leaving, the setting is restored, the
log is appended to ``<folder>/mujoco_log.txt`` when a folder is given (a symbolic link or a
hard link in its place is replaced, never written through), the block's file is removed, and
one warning (:mod:`logging`) says how many messages MuJoCo logged and the first of them.

The command line runs every command within ``mujoco_log_in(None)``; a command with a results
folder nests ``mujoco_log_in(out)`` inside (see
:func:`mjsysid.app.commands.common.results_folder`). Library calls that simulate many
candidates (:func:`mjsysid.optimize`) run within :func:`quiet_mujoco`: MuJoCo's messages of a
diverging candidate then reach a Python user as one summarising warning, not as hundreds of
printed lines and a ``MUJOCO_LOG.TXT`` in their working directory; inside a
:func:`mujoco_log_in` block (the command line's) they stay with that block.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import logging
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

import mujoco

from mjsysid.util.files import write_error

MUJOCO_LOG = "mujoco_log.txt"

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

_blocks = 0  # mujoco_log_in blocks open in this process (MuJoCo's log setting is process-wide)
_blocks_lock = threading.Lock()
_private: Path | None = None  # the process's private folder of block log files
_serial = itertools.count()


def _block_file() -> Path:
    """A fresh file name in the process's private folder (made on first use: a folder per
    block cost more than a small fit's evaluations)."""
    global _private
    with _blocks_lock:
        if _private is None or not _private.is_dir():
            _private = Path(tempfile.mkdtemp(prefix="mjsysid-mujoco-log-"))
            atexit.register(_remove_private, _private, os.getpid())
        return _private / f"MUJOCO_LOG-{os.getpid()}-{next(_serial)}.TXT"


def _remove_private(folder: Path, owner: int) -> None:
    """At exit, the private folder of the process that made it (not of a forked child's)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class MujocoLog:
    """What MuJoCo logged within :func:`mujoco_log_in` (filled in on leaving).

    Attributes:
      path: Where the messages are kept (``<folder>/mujoco_log.txt``), ``None`` without a
        folder (they are summarised, then removed with the temporary folder).
      messages: How many messages MuJoCo logged.
      first: The first of them (without MuJoCo's time stamp), ``""`` when none.
    """

    path: Path | None
    messages: int = 0
    first: str = ""


def _summary(path: Path) -> tuple[int, str]:
    """Messages in a MuJoCo log file (one per non-empty line) and the first one's text."""
    count, first = 0, ""
    with path.open("rb") as f:
        for raw in f:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            count += 1
            if not first:  # "WARNING Thu Dec  3 19:05:21 2026: Nan, Inf ..." -> after ': '
                head, sep, text = line.partition(": ")
                first = text if sep and head.split(" ", 1)[0].isupper() else line
    return count, first[:200]


def _open_for_append(path: Path) -> int:
    """An fd appending to ``path`` as a regular file of its own: a symbolic link (``O_NOFOLLOW``)
    or a file with other hard links in its place is removed first and a fresh file made; a
    FIFO, a device or a folder is refused."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    safe = flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    for _ in range(3):
        try:
            fd = os.open(path, safe, 0o666)
        except OSError as e:
            if path.is_symlink():  # ELOOP (or EMLINK on some systems): replace the link
                logger.warning("%s was a symbolic link: replaced by a file, not followed", path)
                path.unlink()
                continue
            raise write_error(e, path) from e
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1:
            return fd
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"cannot write {str(path)!r}: not a regular file")
        logger.warning("%s had other hard links: replaced by a file of its own", path)
        path.unlink()
    raise OSError(f"cannot write {str(path)!r}: it keeps being replaced")


def _keep(source: Path, folder: Path) -> Path:
    """Appends ``source`` to ``folder/mujoco_log.txt`` (see :func:`_open_for_append`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MUJOCO_LOG
    fd = _open_for_append(path)
    try:
        with source.open("rb") as src, os.fdopen(fd, "ab", closefd=False) as dest:
            shutil.copyfileobj(src, dest)
    except OSError as e:
        raise write_error(e, path) from e
    finally:
        os.close(fd)
    return path


@contextlib.contextmanager
def mujoco_log_in(folder: str | Path | None) -> Iterator[MujocoLog]:
    """``with mujoco_log_in(out) as log:`` MuJoCo's messages go to ``out/mujoco_log.txt``
    (``None``: nowhere but one summarising warning), never to the working directory or stdout.

    The setting is process-wide (MuJoCo keeps one log configuration); it is restored on
    leaving, so blocks nest (an inner block keeps its own messages).
    """
    temp = _block_file()
    config = mujoco.MjLogConfig.get()
    previous = (config.logfile, config.logto_console, config.logto_file)
    config.logfile, config.logto_console, config.logto_file = str(temp), False, True
    config.set()
    log = MujocoLog(None if folder is None else Path(folder) / MUJOCO_LOG)
    global _blocks
    with _blocks_lock:
        _blocks += 1
    try:
        yield log
    finally:
        with _blocks_lock:
            _blocks -= 1
        config = mujoco.MjLogConfig.get()
        config.logfile, config.logto_console, config.logto_file = previous
        config.set()
        try:
            if temp.is_file() and temp.stat().st_size:
                log.messages, log.first = _summary(temp)
                if folder is not None:
                    log.path = _keep(temp, Path(folder))
        finally:
            temp.unlink(missing_ok=True)
        if log.messages:
            where = f"all of them in {log.path}" if log.path is not None else "not kept"
            logger.warning(
                "MuJoCo logged %d message(s), the first: %s (%s)", log.messages, log.first, where
            )


@contextlib.contextmanager
def quiet_mujoco() -> Iterator[None]:
    """``with quiet_mujoco():`` as ``mujoco_log_in(None)`` (MuJoCo's messages summarised in
    one warning, none printed, no ``MUJOCO_LOG.TXT``), unless a :func:`mujoco_log_in` block is
    already open: its folder keeps them then, and nothing changes."""
    if _blocks:
        yield
        return
    with mujoco_log_in(None):
        yield


def quietly(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run within :func:`quiet_mujoco` (for the library's calls that simulate many
    candidates: a fit, its intervals, an audit, an excitation design)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with quiet_mujoco():
            return fn(*args, **kwargs)

    return wrapper
