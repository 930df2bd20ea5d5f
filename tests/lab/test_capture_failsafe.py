"""A capture fails safe: every way the process can end sends the stop command first, and the
rows are on disk as they arrive.

The capture runs as a real ``mjsysid capture`` process on a real pseudo-terminal served by the
simulated device (:class:`~mjsysid.lab.simdevice.SimulatedDevice`); the signals are real
signals sent to that process, the terminal closed is a real terminal. The device side records
when each line arrived and what the output folder held at the moment the stop arrived, so the
tests see the order: the stop reached the device before any file was finalized.
"""

from __future__ import annotations

import copy
import io
import os
import signal
import subprocess
import sys
import time
import tty
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.data.recording import load_recording
from mjsysid.lab.capture import CaptureSession, EndReason
from mjsysid.lab.capture.device import device_from_dict, load_device
from mjsysid.lab.capture.output import Journal, journal_path, read_journal
from mjsysid.lab.capture.serialport import open_port
from mjsysid.lab.simdevice import SimOptions, SimulatedDevice

pytest.importorskip("serial")

EXAMPLE = Path(str(resources.files("mjsysid") / "examples" / "dcmotor"))
RATE = 50.0
STOP = "H"
DEVICE = {
    "port": "",
    "rate": RATE,
    "model": str(EXAMPLE / "dcmotor.xml"),
    "state": {
        "format": "S,{time_ms:d},{counts:d},{vel},{pwm:d}",
        "time": "time_ms",
        "fields": {
            "time_ms": {"scale": 0.001, "unit": "s"},
            "counts": {"column": "encoder", "scale": 2 * np.pi / 1320, "unit": "rad"},
            "vel": {"column": "shaft_qvel", "unit": "rad/s"},
            "pwm": {"record": False},
        },
    },
    "command": {"format": "M{pwm:d}", "actuator": "motor", "scale": 1 / 255, "limits": [-255, 255]},
    "stop": STOP,
    "watchdog": {"stale": 0.5, "startup": 5.0},
    "excitation": {"signal": "prbs", "amplitude": 200, "duration": 0.6, "hold": 0.06, "seed": 3},
}

# the child: optionally on a controlling terminal (a session leader's first tty), then the CLI
LAUNCH = (
    "import os, sys\n"
    "if sys.argv[1] != '-':\n"
    "    fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "    for i in (0, 1, 2):\n"
    "        os.dup2(fd, i)\n"
    "from mjsysid.app.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_path(str(EXAMPLE / "dcmotor.xml"))


def _device_file(tmp_path: Path, **changes) -> Path:
    data = copy.deepcopy(DEVICE)
    data.update(changes)
    path = tmp_path / "device.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@dataclass
class StopWatch:
    """The device side's listener: when the first stop line arrives, what the output folder
    holds (a snapshot taken in the device's thread as the line is read)."""

    folder: Path
    at: float | None = None
    files: list[str] = field(default_factory=list)

    def __call__(self, line: str) -> None:
        if line.strip() == STOP and self.at is None:
            self.files = sorted(p.name for p in self.folder.iterdir())
            self.at = time.monotonic()


def _rows_on_disk(path: Path) -> int:
    try:
        return max(0, path.read_bytes().count(b"\n") - 1)
    except FileNotFoundError:
        return 0


def _wait_for_rows(path: Path, proc: subprocess.Popen, n: int, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while _rows_on_disk(path) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < timeout, "the capture wrote no rows"
        time.sleep(0.01)


def _start(tmp_path: Path, sim: SimulatedDevice, terminal: str = "-", **popen) -> subprocess.Popen:
    out = tmp_path / "out"
    argv = ["capture", str(tmp_path / "device.yaml"), str(out / "run.csv")]
    argv += ["--port", sim.path, "--duration", "60"]
    (tmp_path / "tmp").mkdir(exist_ok=True)  # the child's temporary folders (SIGKILL leaves one)
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    return subprocess.Popen([sys.executable, "-c", LAUNCH, terminal, *argv], env=env, **popen)


def _check_stop_first(sim: SimulatedDevice, watch: StopWatch, t_signal: float, side: dict) -> None:
    """The stop went out before anything else and reached the device side of the pty.

    ``sent_at_s`` and ``files_at_s`` are the capture's own host clock (``CLOCK_MONOTONIC``,
    the same clock as the test's) when the stop's write began and when it began its files;
    the device side's arrival time and folder snapshot are taken independently, in the
    device's thread, as it reads the line."""
    stop = side["stop"]
    assert t_signal <= stop["sent_at_s"] < stop["files_at_s"]  # stop, then the files
    assert watch.at is not None, f"no stop line reached the device: {sim.received[-5:]}"
    assert watch.at >= stop["sent_at_s"]  # the device read it after it was written
    if watch.at < stop["files_at_s"]:  # read before the files began (the usual case) ...
        assert watch.files == ["run.partial.csv"]  # ... the folder held the journal only
    after = [line for t, line in sim.arrivals if t >= t_signal]
    first = after.index(STOP)
    # before it, only commands written before the signal was handled: the one in flight (and,
    # on a busy machine, one the device side had not read yet when the signal was sent)
    assert len(after[:first]) <= 2
    assert not any(line.startswith("M") for line in after[first:])  # nothing moves after it


def _check_files(out: Path, model, signame: str | None) -> dict:
    side = yaml.safe_load((out / "run.capture.yaml").read_text())
    rec = load_recording(out / "run.csv", model)
    assert rec.times.size == side["rows"] >= 10
    assert not (out / "run.partial.csv").exists()  # the journal is gone once all is written
    assert list((out.parent / "tmp").iterdir()) == []  # and the temporary folders
    assert side["stop_sent"] is True and side["stop"]["via"] == "port"
    if signame is not None:
        assert side["ended"] == "interrupted" and side["stop"]["signal"] == signame
        assert side["message"] == f"interrupted ({signame})"
    return side


SIGNAL_CASES = [
    ("SIGHUP", [signal.SIGHUP], 0.0, 129),
    ("SIGTERM", [signal.SIGTERM], 0.0, 143),
    ("SIGINT", [signal.SIGINT], 0.0, 130),
    ("SIGQUIT", [signal.SIGQUIT], 0.0, 131),
    ("SIGINT twice 0.5 ms apart", [signal.SIGINT, signal.SIGINT], 0.0005, 130),
    ("SIGINT twice 3 ms apart", [signal.SIGINT, signal.SIGINT], 0.003, 130),
    ("SIGTERM then SIGHUP 1 ms apart", [signal.SIGTERM, signal.SIGHUP], 0.001, 143),
]


@pytest.mark.parametrize(
    ("name", "signals", "gap", "code"), SIGNAL_CASES, ids=[c[0] for c in SIGNAL_CASES]
)
def test_a_signal_sends_the_stop_first_and_keeps_every_file(
    model, tmp_path, name, signals, gap, code
):
    _device_file(tmp_path)
    (tmp_path / "out").mkdir()
    watch = StopWatch(tmp_path / "out")
    device = load_device(tmp_path / "device.yaml")
    with SimulatedDevice(device, model, SimOptions(lockstep=True), listener=watch) as sim:
        proc = _start(tmp_path, sim, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_for_rows(tmp_path / "out" / "run.partial.csv", proc, 10)
        t_signal = time.monotonic()
        for i, sig in enumerate(signals):
            if i:
                time.sleep(gap)
            os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
        time.sleep(0.05)  # the device side reads what is still on the line
    assert b"Traceback" not in err
    # two signals pending at once are delivered in the order of their numbers
    seen = signal.Signals(proc.returncode - 128) if proc.returncode > 128 else None
    assert seen in signals and (len(set(signals)) > 1 or proc.returncode == code), err.decode()
    side = _check_files(tmp_path / "out", model, seen.name)
    _check_stop_first(sim, watch, t_signal, side)
    assert side["stop"]["more_signals"] <= len(signals) - 1
    assert f"{side['rows']} rows" in out.decode()


def test_closing_the_terminal_sends_the_stop_first(model, tmp_path):
    """The capture runs on a terminal (a pty it has as its controlling terminal); closing the
    terminal's end hangs it up: the kernel sends SIGHUP and writes to the terminal fail."""
    _device_file(tmp_path)
    (tmp_path / "out").mkdir()
    watch = StopWatch(tmp_path / "out")
    term_master, term_slave = os.openpty()
    tty.setraw(term_slave)
    terminal = os.ttyname(term_slave)
    os.close(term_slave)
    device = load_device(tmp_path / "device.yaml")
    try:
        with SimulatedDevice(device, model, SimOptions(lockstep=True), listener=watch) as sim:
            proc = _start(tmp_path, sim, terminal, start_new_session=True)
            _wait_for_rows(tmp_path / "out" / "run.partial.csv", proc, 10)
            t_signal = time.monotonic()
            os.close(term_master)  # the terminal window closes
            term_master = -1
            proc.wait(timeout=60)
            time.sleep(0.05)
    finally:
        if term_master >= 0:
            os.close(term_master)
    assert proc.returncode == 129
    side = _check_files(tmp_path / "out", model, "SIGHUP")
    _check_stop_first(sim, watch, t_signal, side)


def test_sigkill_leaves_the_rows_on_disk_and_recover_finishes_the_recording(model, tmp_path):
    """SIGKILL cannot be answered (the firmware's own watchdog must stop the motor), but every
    row answered so far is in the journal, and ``--recover`` makes the recording of it."""
    dev_file = _device_file(tmp_path)
    (tmp_path / "out").mkdir()
    device = load_device(dev_file)
    journal = tmp_path / "out" / "run.partial.csv"
    with SimulatedDevice(device, model, SimOptions(lockstep=True)) as sim:
        proc = _start(tmp_path, sim, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_for_rows(journal, proc, 20)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        time.sleep(0.05)
    assert proc.returncode == -signal.SIGKILL
    assert STOP not in sim.received  # nothing could answer SIGKILL ...
    assert [p.name[:19] for p in (tmp_path / "tmp").iterdir()] == ["mjsysid-mujoco-log-"]
    found = read_journal(journal)  # ... but the rows are there
    assert found.columns[:2] == ("host_time_s", "ctrl.motor")
    assert found.rows.shape[0] >= 20 and not found.cut
    answered = [line for line in sim.received if line.startswith("M")]
    # every row's command was sent before the row was written (the first answer holds still)
    assert found.rows.shape[0] <= len(answered) - 1
    np.testing.assert_allclose(np.diff(found.rows[:, 2 + 0]), 1 / RATE, atol=1e-9)
    # a new capture to the same name refuses to overwrite the only copy of these rows
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["capture", str(dev_file), str(tmp_path / "out" / "run.csv"), "--port", "/dev/null"]
    assert main(argv, stdout=stdout, stderr=stderr) == 1
    assert "run.partial.csv' holds the rows of a capture that did not finish" in stderr.getvalue()
    assert _rows_on_disk(journal) == found.rows.shape[0]
    # --recover finishes the recording
    assert main([*argv[:3], "--recover"], stdout=stdout, stderr=stderr) == 0, stderr.getvalue()
    side = yaml.safe_load((tmp_path / "out" / "run.capture.yaml").read_text())
    assert side["ended"] == "killed" and side["stop_sent"] is None
    assert side["rows"] == found.rows.shape[0] and not journal.exists()
    rec = load_recording(tmp_path / "out" / "run.csv", model)
    np.testing.assert_allclose(rec.control.data[:, 0], found.rows[:, 1])


def test_a_last_line_cut_by_a_crash_is_dropped_and_said(model, tmp_path):
    device = device_from_dict(copy.deepcopy(DEVICE), "test-device")
    from mjsysid.lab.capture.session import journal_columns

    path = journal_path(tmp_path / "run.npz")
    journal = Journal(path, journal_columns(device))
    for k in range(5):
        journal.append([10.0 + 0.02 * k, 0.1 * k, 0.02 * k, 0.0, 0.0, 25.5 * k])
    journal.close()
    with path.open("ab") as f:
        f.write(b"10.1,0.5,0.1")  # the write the crash cut short
    found = read_journal(path)
    assert found.cut and found.rows.shape == (5, 6)
    with path.open("ab") as f:
        f.write(b"\n1,2,3,4,5,6\n")  # a damaged line before the last one is an error
    with pytest.raises(ValueError, match=r"run.partial.csv' line 7: must be 6 numbers"):
        read_journal(path)


def test_rows_are_on_disk_while_the_capture_runs(model, tmp_path):
    device = device_from_dict(copy.deepcopy(DEVICE), "test-device")
    seen = {}

    def policy(k, values):
        if k == 10:  # rows 0..9 were answered: they are on disk already
            seen["rows"] = read_journal(tmp_path / "run.partial.csv").rows
        return 100.0

    with SimulatedDevice(device, model, SimOptions(lockstep=True)) as sim:
        port = open_port(device, sim.path)
        try:
            result = CaptureSession(device, port, policy=policy).run(tmp_path / "run.csv")
        finally:
            port.close()
    assert result.reason is EndReason.COMPLETED
    assert seen["rows"].shape == (10, 6)
    rec = load_recording(tmp_path / "run.csv", model)
    np.testing.assert_allclose(rec.control.data[:10, 0], seen["rows"][:, 1])


def test_a_lost_port_attempts_the_stop_and_says_it_could_not(model, tmp_path, caplog):
    """The cable is pulled: reading fails, the stop is attempted on the port (the write
    fails) and on the port opened again (it is gone); the capture says so loudly."""
    device = device_from_dict(copy.deepcopy(DEVICE), "test-device")
    sim = SimulatedDevice(device, model, SimOptions(lockstep=True)).start()

    def policy(k, values):
        if k == 5:
            sim.unplug()
        return 100.0

    try:
        port = open_port(device, sim.path)
        session = CaptureSession(
            device, port, policy=policy, reopen=lambda: open_port(device, sim.path)
        )
        try:
            result = session.run(tmp_path / "run.csv")
        finally:
            port.close()
    finally:
        sim.stop()
    assert result.reason is EndReason.PORT_ERROR
    assert "port error: write failed: [Errno 5] Input/output error" in result.message
    assert result.stop_sent is False
    assert result.stop_error is not None
    assert "write failed: [Errno 5] Input/output error" in result.stop_error  # attempted
    assert "reopening: " in result.stop_error  # and attempted again on a reopened port
    assert any("could not send the stop command" in r.message for r in caplog.records)
    side = yaml.safe_load(result.sidecar.read_text())
    assert side["ended"] == "port_error" and side["stop_sent"] is False
    assert side["stop"]["error"] == result.stop_error
    assert side["rows"] == 5 and load_recording(tmp_path / "run.csv", model).times.size == 5
    assert not (tmp_path / "run.partial.csv").exists()


def test_a_lost_port_on_the_command_line(model, tmp_path):
    _device_file(tmp_path)
    (tmp_path / "out").mkdir()
    device = load_device(tmp_path / "device.yaml")
    sim = SimulatedDevice(device, model, SimOptions(lockstep=True)).start()
    try:
        proc = _start(tmp_path, sim, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_for_rows(tmp_path / "out" / "run.partial.csv", proc, 10)
        sim.unplug()
        _, err = proc.communicate(timeout=60)
    finally:
        sim.stop()
    assert proc.returncode == 1
    text = err.decode()
    assert "capture ended early (port_error)" in text
    assert "THE STOP COMMAND COULD NOT BE SENT: SerialException: write failed" in text
    assert yaml.safe_load((tmp_path / "out" / "run.capture.yaml").read_text())["rows"] >= 10


GLITCHES = [
    # (name, the raw line after the given state line, the reason it is dropped)
    ("a stamp 31 years ahead", {10: "S,1000000000000,0,0.0,0"}, "ahead_of_host"),
    ("a stamp 2 s ahead", {10: "S,2200,0,0.0,0"}, "ahead_of_host"),
    ("a stamp going back", {10: "S,40,0,0.0,0"}, "repeated"),
    ("a stamp 1 ms after the last", {10: "S,181,0,0.0,0"}, "too_soon"),
    # (the lines sent before the port opened are flushed: the glitch follows line 1 and 2)
    (
        "a glitch before the first row",
        dict.fromkeys((1, 2), "S,999999999,0,0.0,0"),
        "unconfirmed_start",
    ),
]


@pytest.mark.parametrize(("name", "inject", "reason"), GLITCHES, ids=[g[0] for g in GLITCHES])
def test_a_glitched_time_stamp_is_dropped_and_counted(model, tmp_path, name, inject, reason):
    """Such a line ended the capture after 50 of 150 rows as 'completed', rc 0, dropped: 0."""
    dev_file = _device_file(tmp_path, excitation=dict(DEVICE["excitation"], duration=1.0))
    device = load_device(dev_file)
    with SimulatedDevice(device, model, SimOptions(lockstep=True, inject=inject)) as sim:
        out, err = io.StringIO(), io.StringIO()
        argv = ["capture", str(dev_file), str(tmp_path / "run.csv"), "--port", sim.path]
        assert main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    side = yaml.safe_load((tmp_path / "run.capture.yaml").read_text())
    assert side["ended"] == "completed" and side["rows"] == 50
    rec = load_recording(tmp_path / "run.csv", model)
    np.testing.assert_allclose(np.diff(rec.times), 1 / RATE, atol=1e-9)  # no jump, no gap
    lines = side["lines"]
    if reason == "repeated":
        assert lines["repeated"] == 1 and lines["dropped"] == 0
    else:
        assert lines["dropped_reasons"][reason] >= 1
        assert lines["dropped"] == sum(lines["dropped_reasons"].values())
        assert lines["dropped_reasons"]["lost"] == 0
        assert next(iter(inject.values())) in lines["examples"]
        assert f"{lines['dropped']} samples dropped" in out.getvalue()


@pytest.fixture
def small_disk(small_tmpfs):
    """The small tmpfs filled but for two pages."""
    free = os.statvfs(small_tmpfs).f_bavail * os.statvfs(small_tmpfs).f_frsize
    (small_tmpfs / "filler").write_bytes(b"\0" * (free - 2 * 4096))
    return small_tmpfs


def test_a_full_disk_stops_the_capture_and_keeps_what_it_could(model, small_disk, tmp_path):
    """The journal fills the disk: the capture stops (the stop goes out first), the error names
    the file, and the rows written so far stay in the journal for --recover."""
    dev_file = _device_file(tmp_path, excitation=dict(DEVICE["excitation"], duration=5.0))
    device = load_device(dev_file)
    with SimulatedDevice(device, model, SimOptions(lockstep=True)) as sim:
        out, err = io.StringIO(), io.StringIO()
        argv = ["capture", str(dev_file), str(small_disk / "run.csv"), "--port", sim.path]
        assert main(argv, stdout=out, stderr=err) == 1
    journal = small_disk / "run.partial.csv"
    assert sim.received[-1] == STOP
    text = err.getvalue()
    assert "No space left on device" in text and "stop sent" in text
    assert f"rows are in {str(journal)!r}" in text and "--recover" in text
    rows = read_journal(journal).rows  # what fitted on the disk is readable
    assert 5 <= rows.shape[0] < 250
