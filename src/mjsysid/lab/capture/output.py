"""What a capture leaves on disk: the rows as they arrive, the recording and its sidecar.

The recording has the layout :func:`mjsysid.data.recording.load_recording` reads: ``time``
(s, the device clock from the first row), ``ctrl.<actuator>`` (the commands as applied, in
control units) and one column per recorded field (named by its ``column``). It is written
column by column rather than with :func:`~mjsysid.data.recording.write_recording`, which needs
a model and writes model sensors only (a capture also records joint states such as
``shaft_qvel`` and does not need the model).

**Rows reach the disk as they arrive.** A :class:`Journal` ``<recording stem>.partial.csv``
is created before the first byte goes to the device, its header first; every row is appended
with one ``write`` as soon as its command is sent, so a capture killed by SIGKILL, an
out-of-memory killer or a power cut (up to what the kernel had not yet flushed) keeps its rows.
At the end the recording and the sidecar are written atomically and the journal is removed;
after a crash, :func:`read_journal` reads it back (a last line cut in the middle of its write
is dropped and counted) and ``mjsysid capture DEVICE RECORDING --recover`` finishes the
recording from it.

The sidecar ``<recording stem>.capture.yaml`` holds how the capture went: rates, dropped
(with reasons), repeated, malformed and foreign lines, host and device clock jitter, soft-limit
interventions, late commands, whether and how the stop command was sent, and why it ended.
"""

from __future__ import annotations

import csv
import errno
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mjsysid.util.errors import must_be
from mjsysid.util.files import atomic_savez, atomic_write_text, write_error
from mjsysid.util.limits import check_limit


def write_columns(path: str | Path, columns: Mapping[str, np.ndarray]) -> Path:
    """Writes 1-D columns of one length as ``.npz`` arrays or ``.csv`` columns."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return atomic_savez(path, {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()})
    if suffix != ".csv":
        raise ValueError(must_be("recording", "a .npz or .csv file name", str(path)))
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(list(columns))
    for row in zip(*columns.values(), strict=True):
        w.writerow([repr(float(x)) for x in row])
    return atomic_write_text(path, out.getvalue())


def sidecar_path(recording: str | Path) -> Path:
    """``run1.npz`` -> ``run1.capture.yaml``."""
    recording = Path(recording)
    return recording.with_name(recording.stem + ".capture.yaml")


def journal_path(recording: str | Path) -> Path:
    """``run1.npz`` -> ``run1.partial.csv``: the rows of a capture while it runs."""
    recording = Path(recording)
    return recording.with_name(recording.stem + ".partial.csv")


class Journal:
    """An append-only CSV of the rows of a running capture (see the module docstring).

    Created with ``O_EXCL`` (an existing journal is the only copy of a killed capture's rows:
    it is never overwritten) and ``O_NOFOLLOW`` (a symbolic link in its place is refused).

    Raises:
      FileExistsError: A journal is already there (recover it or delete it).
      OSError: It cannot be created or written (the message names it).
    """

    def __init__(self, path: str | Path, columns: Sequence[str]) -> None:
        self.path = Path(path)
        self.columns = tuple(columns)
        self.rows = 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            self._fd: int | None = os.open(self.path, flags, 0o666)
        except FileExistsError:
            raise _left_over(self.path) from None
        except OSError as e:
            raise write_error(e, self.path, "cannot create") from e
        try:
            self._write(",".join(self.columns) + "\n")
        except OSError:  # a full disk: no journal at all rather than an empty one in the way
            self.remove()
            raise

    def append(self, values: Sequence[float]) -> None:
        """Appends one row (``len(columns)`` numbers) with a single ``write``."""
        self._write(",".join(repr(float(v)) for v in values) + "\n")
        self.rows += 1

    def _write(self, text: str) -> None:
        if self._fd is None:
            raise ValueError(f"journal {str(self.path)!r} is closed")
        data = text.encode("ascii")
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError as e:
            raise write_error(e, self.path) from e

    def close(self) -> None:
        """Syncs the journal to disk and closes it (again: nothing)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.fsync(fd)
        except OSError as e:
            raise write_error(e, self.path) from e
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Closes and deletes the journal (once the recording is written)."""
        self.close()
        self.path.unlink(missing_ok=True)


def _left_over(path: Path) -> FileExistsError:
    return FileExistsError(
        errno.EEXIST,
        f"{str(path)!r} holds the rows of a capture that did not finish (killed, or the "
        "power failed): finish its recording with 'mjsysid capture DEVICE "
        f"{path.name.removesuffix('.partial.csv')}.<csv|npz> --recover', or delete it, before "
        "capturing to the same name again",
    )


def check_no_journal(recording: str | Path) -> None:
    """Refuses to start a capture over the journal of one that did not finish (its rows are
    the only copy), before the port is opened.

    Raises:
      FileExistsError: The journal (or a link in its place) is there.
    """
    path = journal_path(recording)
    if path.exists() or path.is_symlink():
        raise _left_over(path)


@dataclass(frozen=True)
class JournalRows:
    """What :func:`read_journal` found: the header, the ``(N, columns)`` rows, and whether a
    last line cut in the middle of its write was dropped."""

    columns: tuple[str, ...]
    rows: np.ndarray
    cut: bool


def read_journal(path: str | Path) -> JournalRows:
    """Reads a journal, accepting a last line cut short by a crash (it is dropped).

    Raises:
      FileNotFoundError: No such file.
      ValueError: Over the ``max_file_bytes`` limit, no header, or a damaged line before the
        last one (the message names the file and the line).
    """
    path = Path(path)
    where = repr(str(path))
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {where}")
    check_limit("max_file_bytes", path.stat().st_size, f"{where}: bytes")
    lines = path.read_bytes().split(b"\n")
    # a complete file ends with a newline: the last piece is empty; otherwise it was cut
    last, lines = lines[-1], lines[:-1]
    if not lines:
        raise ValueError(f"{where} must start with a complete header line, got none")
    try:
        columns = tuple(lines[0].decode("ascii").split(","))
    except UnicodeDecodeError:
        raise ValueError(f"{where} line 1: the header must be ASCII column names") from None
    cut = bool(last)
    body: list[list[float]] = []
    for i, line in enumerate(lines[1:], start=2):
        parsed = _journal_row(line, len(columns))
        if parsed is None:
            raise ValueError(
                f"{where} line {i}: must be {len(columns)} numbers separated by commas; the "
                "file is damaged (only its last line may be cut short by a crash)"
            )
        body.append(parsed)
    rows = np.array(body, dtype=np.float64).reshape(len(body), len(columns))
    return JournalRows(columns, rows, cut)


def _journal_row(line: bytes, n: int) -> list[float] | None:
    parts = line.split(b",")
    if len(parts) != n:
        return None
    try:
        return [float(x) for x in parts]
    except ValueError:
        return None


def _spacing(times: np.ndarray) -> dict[str, float] | None:
    """Median, std, min and max of the spacing of ``times (N,)`` (s)."""
    if times.size < 2:
        return None
    d = np.diff(times)
    return {
        "median_s": float(np.median(d)),
        "std_s": float(np.std(d)),
        "min_s": float(np.min(d)),
        "max_s": float(np.max(d)),
    }


def timing_summary(device_t: np.ndarray, host_t: np.ndarray, rate: float) -> dict[str, Any]:
    """Rates and jitter of the device clock and of the host's arrival times (both s)."""
    dev, host = _spacing(device_t), _spacing(host_t)
    out: dict[str, Any] = {"nominal_hz": float(rate)}
    if dev is not None and host is not None:
        latency = host_t - device_t
        latency = latency - np.min(latency)
        out.update(
            device_hz=1.0 / dev["median_s"] if dev["median_s"] > 0 else None,
            host_hz=1.0 / host["median_s"] if host["median_s"] > 0 else None,
            device_spacing=dev,
            host_spacing=host,
            latency_spread_s={"std": float(np.std(latency)), "max": float(np.max(latency))},
        )
    return out


def write_sidecar(path: str | Path, summary: Mapping[str, Any]) -> Path:
    """Writes the capture summary as YAML."""
    return atomic_write_text(path, yaml.safe_dump(dict(summary), sort_keys=False))
