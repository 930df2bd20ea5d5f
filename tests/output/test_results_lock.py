"""The results-folder lock: two runs never write one folder at once; stale locks are taken over."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mjsysid.util.files import read_yaml
from mjsysid.util.lock import (
    LOCK_FILE,
    FolderLockedError,
    LockHolder,
    acquire,
    folder_lock,
    read_holder,
)

SRC = Path(__file__).resolve().parents[1] / "src"
CLI = "import sys; from mjsysid.app.cli import main; sys.exit(main(sys.argv[1:]))"


def _cli(*argv: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [sys.executable, "-c", CLI, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_two_fits_into_one_folder_the_second_refuses_with_the_holders_pid(tmp_path: Path):
    out = tmp_path / "res"
    first = _cli("fit", "example:dcmotor", "--out", str(out))
    try:
        deadline = time.monotonic() + 60
        while not (out / LOCK_FILE).exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first fit never took the lock"
            time.sleep(0.01)
        second = _cli("fit", "example:dcmotor", "--out", str(out), "-q", "--no-report")
        _, err2 = second.communicate(timeout=120)
        first_still_running = first.poll() is None
    finally:
        _, err1 = first.communicate(timeout=120)
    assert first.returncode == 0, err1
    if not first_still_running:
        pytest.skip("the first fit ended before the second reached the lock (a slow machine)")
    assert second.returncode == 1, err2
    assert f"is in use by PID {first.pid} on {socket.gethostname()!r}, started " in err2
    # The folder is entirely the first fit's, and the lock is gone with it.
    assert not (out / LOCK_FILE).exists()
    summary = read_yaml(out / "result.yaml")
    assert all((out / f).is_file() for f in summary["files"])
    assert (out / "report.html").is_file() or "report skipped" in err1


def test_a_live_lock_is_respected(tmp_path: Path):
    with folder_lock(tmp_path):
        holder = read_holder(tmp_path / LOCK_FILE)
        assert holder is not None and holder.pid == os.getpid()
        with pytest.raises(FolderLockedError, match=rf"in use by PID {os.getpid()} on .*started"):
            acquire(tmp_path)
    assert not (tmp_path / LOCK_FILE).exists()  # released on leaving


def test_a_stale_lock_of_a_dead_process_is_taken_over_and_said_so(tmp_path: Path):
    dead = LockHolder(_dead_pid(), socket.gethostname(), "2026-01-01T00:00:00+00:00")
    (tmp_path / LOCK_FILE).write_text(dead.text())
    notes: list[str] = []
    with folder_lock(tmp_path, note=notes.append):
        holder = read_holder(tmp_path / LOCK_FILE)
        assert holder is not None and holder.pid == os.getpid()
    assert len(notes) == 1
    assert f"took over the stale lock of {str(tmp_path)!r} (PID {dead.pid}" in notes[0]
    assert "no longer running" in notes[0]


def test_a_lock_of_another_host_is_respected(tmp_path: Path):
    other = LockHolder(_dead_pid(), "not-" + socket.gethostname(), "2026-01-01T00:00:00+00:00")
    (tmp_path / LOCK_FILE).write_text(other.text())
    with pytest.raises(FolderLockedError, match=r"remove .* if that process is gone"):
        acquire(tmp_path)


def test_the_cli_names_the_holder(tmp_path: Path, capsys):
    from mjsysid.app.cli import main

    with folder_lock(tmp_path / "res"):
        code = main(["fit", "example:box", "--out", str(tmp_path / "res"), "-q"])
    assert code == 1
    assert f"in use by PID {os.getpid()}" in capsys.readouterr().err


def test_an_unreadable_lock_is_a_starting_run_until_it_is_old(tmp_path: Path):
    path = tmp_path / LOCK_FILE
    path.write_text("")  # a crash between creating the file and writing its record
    with pytest.raises(FolderLockedError, match=r"in use by a run that is starting"):
        acquire(tmp_path)
    old = time.time() - 60
    os.utime(path, (old, old))
    notes: list[str] = []
    with folder_lock(tmp_path, note=notes.append):
        holder = read_holder(path)
        assert holder is not None and holder.pid == os.getpid()
    was = "an unreadable lock file, no longer running"
    assert notes == [f"took over the stale lock of {str(tmp_path)!r} ({was})"]
    assert not path.exists()


def test_the_holder_written_is_the_one_read_back(tmp_path: Path):
    me = LockHolder.me()
    (tmp_path / LOCK_FILE).write_text(me.text())
    holder = read_holder(tmp_path / LOCK_FILE)
    assert holder is not None and (holder.pid, holder.host) == (me.pid, me.host)
    assert read_holder(tmp_path / "missing.lock") is None
