"""The capture loop: read state lines, answer each with a command, stop safely, record.

The loop is driven by the device: it sends one state line per period, and the host answers
each new sample ``k`` with the command for it at once. **Convention:** the command sent after
reading sample ``k`` acts from sample ``k`` on (until the next command) and is recorded in row
``k``: the "held from this sample" zero-order hold that mjsysid's rollouts assume. What is
recorded is the command as applied: clipped to the command limits, rounded as the command
line carries it, after soft-limit overrides, in control units (``command * scale``).

Safety: the capture fails safe. The stop command goes out *first* on every way the capture
can end:

* completion, a hard limit, the watchdog, the reset's timeout: the loop sends it;
* SIGINT (Ctrl-C, once or many times), SIGTERM (``kill``), SIGHUP (the terminal closed) and
  SIGQUIT: the signal handler itself sends it at once (right after the command being written,
  if one is: a line is never cut), then no other command is sent and the loop ends at its
  next step. Further signals are counted, never abort the writing of the files; handlers are
  installed for the capture, in the main thread, and restored after;
* a lost port or any exception: a ``finally`` sends it; when the write fails and a
  ``reopen`` callable is given, the port is opened again and the stop sent there. Whether it
  went out, and the errors if not, are in the result and the sidecar.

Only SIGKILL (and a power cut) cannot be answered: the rows are safe (see
:mod:`~mjsysid.lab.capture.output`), the actuator is the firmware's watchdog's business.

Hard limits send the stop command at once and end the capture; soft limits replace outward
commands by ``stop_value``; the watchdog ends the capture when no new state line came for
``watchdog.stale`` seconds (``watchdog.startup`` for the first one).

Time stamps are checked before a sample is used: a glitched line (``S,1000000000000,...``
in the middle of a 50 Hz stream) is dropped and counted, never ends the capture. The first
sample is confirmed by the second (a later stamp, no further ahead than the host clock went;
until then the device is answered with ``stop_value``); after that a sample is dropped when its
stamp is ahead of the host clock (its host-minus-device offset is below the smallest seen, less
a slack of two periods: a line cannot arrive before it was sent; the smallest offset follows a
drifting device clock step by step) or less than half a period after the previous row (faster
than the declared ``rate``). A stamp that repeats or goes back is counted as ``repeated``.
"""

from __future__ import annotations

import enum
import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import numpy as np

from mjsysid.data.excitation import chirp, multisine, prbs, random_steps
from mjsysid.lab.capture.device import DeviceDescription, Excitation
from mjsysid.lab.capture.output import (
    Journal,
    journal_path,
    read_journal,
    sidecar_path,
    timing_summary,
    write_columns,
    write_sidecar,
)
from mjsysid.lab.capture.safety import ResetPhase, hard_violation, soft_override
from mjsysid.util.errors import must_be
from mjsysid.util.limits import check_limit

log = logging.getLogger(__name__)

Policy = Callable[[int, Mapping[str, float]], float]
"""``policy(k, values) -> command``: the command (command units) for excitation sample ``k``
given the field values (field units) just read; the default plays the excitation."""

CONVENTION = (
    "ctrl in row k is the command sent after reading sample k; it acts from sample k until "
    "the next row (zero-order hold from this sample)"
)

STOP_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
    if hasattr(signal, name)
)
"""The signals a capture answers by sending the stop command (where the platform has them)."""

DROP_REASONS = ("lost", "ahead_of_host", "too_soon", "unconfirmed_start")
"""Why a sample is not in the recording: ``lost`` (a gap in the device clock: the line never
came, or came garbled), ``ahead_of_host`` (a stamp ahead of the host clock: a glitch),
``too_soon`` (under half a period after the previous row), ``unconfirmed_start`` (a first
sample that the next one contradicted)."""


class Port(Protocol):
    """What the session needs of a serial port (``serial.Serial`` has it)."""

    def read(self, size: int = 1) -> bytes: ...

    def write(self, data: bytes) -> int | None: ...


class EndReason(str, enum.Enum):
    """Why a capture ended."""

    COMPLETED = "completed"
    HARD_LIMIT = "hard_limit"
    WATCHDOG = "watchdog"
    RESET_TIMEOUT = "reset_timeout"
    INTERRUPTED = "interrupted"
    PORT_ERROR = "port_error"
    ERROR = "error"
    KILLED = "killed"
    """Recovered from the journal of a capture that never finished (SIGKILL, a power cut)."""


class _Ended(Exception):
    def __init__(self, reason: EndReason, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass
class Counters:
    """Line counts: malformed lines start like a state line but do not parse; foreign lines
    do not even start like one; repeated samples carry an old device time; rejected samples
    parse but their stamp is implausible (see :data:`DROP_REASONS`)."""

    lines: int = 0
    malformed: int = 0
    foreign: int = 0
    repeated: int = 0
    soft_limited: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS[1:], 0))
    examples: list[str] = field(default_factory=list)

    def bad(self, line: str, foreign: bool) -> None:
        if foreign:
            self.foreign += 1
        else:
            self.malformed += 1
        self.example(line)

    def reject(self, reason: str, line: str) -> None:
        self.rejected[reason] += 1
        self.example(line)

    def example(self, line: str) -> None:
        if len(self.examples) < 5:
            self.examples.append(line[:80])


@dataclass
class Rows:
    """The recorded rows: device time (s, raw clock), host arrival time (s), field values
    (field units) and the applied control (control units)."""

    device_t: list[float] = field(default_factory=list)
    host_t: list[float] = field(default_factory=list)
    values: list[dict[str, float]] = field(default_factory=list)
    ctrl: list[float] = field(default_factory=list)

    def add(self, t: float, host: float, values: dict[str, float], ctrl: float) -> None:
        self.device_t.append(t)
        self.host_t.append(host)
        self.values.append(values)
        self.ctrl.append(ctrl)

    def __len__(self) -> int:
        return len(self.device_t)


@dataclass(frozen=True)
class Sample:
    host_t: float
    device_t: float
    values: dict[str, float]
    line: str = ""


@dataclass
class CaptureResult:
    """The outcome: why it ended, a message, the row count and the files written.

    ``stop_sent`` is ``None`` when unknown (a capture recovered after a crash); ``signal``
    the first stop signal received (``None``: none), ``stop_error`` why the stop could not be
    sent, ``dropped`` the samples missing from the recording (all reasons)."""

    reason: EndReason
    message: str
    rows: int
    recording: Path | None
    sidecar: Path
    stop_sent: bool | None
    signal: int | None = None
    stop_error: str | None = None
    dropped: int = 0


def excitation_commands(exc: Excitation, rate: float, duration: float) -> np.ndarray:
    """The excitation as ``(n,)`` commands (command units), ``n = round(duration * rate)``."""
    n, dt = max(2, round(duration * rate)), 1.0 / rate
    hold = max(1, round(exc.hold * rate))
    amp, seed = exc.amplitude, exc.seed
    if exc.signal == "prbs":
        u = prbs(n, 1, dt, amplitude=amp, hold=hold, seed=seed)
    elif exc.signal == "steps":
        u = random_steps(n, 1, dt, amplitude=amp, hold=hold, seed=seed)
    elif exc.signal == "chirp":
        u = chirp(n, 1, dt, amplitude=amp, f0=exc.f0, f1=exc.f1, seed=seed)
    else:
        u = multisine(n, 1, dt, amplitude=amp, f0=exc.f0, f1=exc.f1, seed=seed)
    return u[:, 0]


class _StopOnSignal:
    """The handler of :data:`STOP_SIGNALS` during a capture: sends the stop command at once
    (or right after the line being written), remembers the first signal, counts the others;
    nothing is raised, so no write (of the port, the journal, the files) is ever cut short.
    ``with _StopOnSignal(session):`` installs it (main thread only) and restores the old
    handlers on leaving."""

    def __init__(self, session: CaptureSession) -> None:
        self.session = session
        self.signal: int | None = None
        self.repeats = 0
        self._old: dict[int, Any] = {}

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.signal is None:
            self.signal = signum
        else:
            self.repeats += 1
        self.session.stop_now()

    def __enter__(self) -> _StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                self._old[s] = signal.signal(s, self)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old.clear()


class CaptureSession:
    """One capture from a device over ``port``.

    Args:
      device: The device description.
      port: An open port (see :func:`mjsysid.lab.capture.serialport.open_port`).
      duration: Excitation length (s); default ``device.excitation.duration``.
      policy: Commands instead of the excitation (see :data:`Policy`).
      clock: The host clock (s).
      reopen: Opens the port again: tried once when the stop command cannot be written
        (a USB adapter that dropped out and came back under the same name).

    Raises:
      ValueError: ``duration`` not a finite number > 0, or ``duration * rate`` rows over the
        limit ``max_rows`` (checked here, before anything is sent).
    """

    def __init__(
        self,
        device: DeviceDescription,
        port: Port,
        *,
        duration: float | None = None,
        policy: Policy | None = None,
        clock: Callable[[], float] = time.monotonic,
        reopen: Callable[[], Port] | None = None,
    ) -> None:
        self.device, self.port, self.clock = device, port, clock
        self.duration = device.excitation.duration if duration is None else float(duration)
        if not (np.isfinite(self.duration) and self.duration > 0):
            raise ValueError(must_be("duration", "a finite number of seconds > 0", duration))
        check_limit("max_rows", self.duration * device.rate, "duration x rate: rows")
        self.policy, self.reopen = policy, reopen
        self.rows, self.counters = Rows(), Counters()
        self._buffer = b""
        self._pending: deque[Sample] = deque()
        self._last_t: float | None = None
        self._last_new = 0.0
        self._candidate: Sample | None = None  # the first sample, until the next confirms it
        self._min_offset = float("inf")  # the smallest host-minus-device time of a row (s)
        self._journal: Journal | None = None
        self._signals: _StopOnSignal | None = None
        self._writing = False  # a line is being written to the port: a stop waits for it
        self._stop_pending = False
        self._finished = False  # the final stop went out: signals only count
        self.stop_sent = False
        self.stop_error: str | None = None
        self.stop_via: str | None = None
        self.stop_at: float | None = None  # host clock as the stop's first write began (s)

    @property
    def signal(self) -> int | None:
        """The first stop signal received during :meth:`run` (``None``: none)."""
        return None if self._signals is None else self._signals.signal

    # -- the port -------------------------------------------------------------------------

    def send(self, line: str) -> None:
        """Sends a command line; refused once a stop signal came (no command after a stop)."""
        self._writing = True
        try:
            if self.signal is not None:
                raise _Ended(EndReason.INTERRUPTED, self._interrupted())
            self.port.write((line + "\n").encode("ascii"))
        finally:
            self._writing = False
            if self._stop_pending:
                self._stop_pending = False
                self._send_stop()

    def stop_now(self) -> None:
        """Sends the stop command now, or right after the line being written (a signal
        handler's entry: it runs between two Python steps of the main thread)."""
        if self._finished:
            return
        if self._writing:
            self._stop_pending = True
            return
        self._send_stop()

    def _send_stop(self) -> None:
        """Writes the stop line; on failure, once more on a reopened port (``reopen``)."""
        stop = (self.device.stop + "\n").encode("ascii")
        self._writing = True
        try:
            began = self.clock()
            self.port.write(stop)
            self._stopped("port", began)
            return
        except OSError as e:  # the port is gone (serial.SerialException is an OSError)
            errors = [f"{type(e).__name__}: {e}"]
        finally:
            self._writing = False
        if self.reopen is not None:
            try:
                again = self.reopen()
                try:
                    began = self.clock()
                    again.write(stop)
                finally:
                    close = getattr(again, "close", None)
                    if close is not None:
                        close()
                self._stopped("reopened port", began)
                log.warning("the stop command %r went out on the reopened port", self.device.stop)
                return
            except (OSError, ValueError) as e:
                errors.append(f"reopening: {type(e).__name__}: {e}")
        self.stop_error = "; ".join(errors)
        log.error("could not send the stop command %r: %s", self.device.stop, self.stop_error)

    def _stopped(self, via: str, began: float) -> None:
        self._stop_pending = False  # a signal during this write asked for this very line
        if not self.stop_sent:
            self.stop_sent, self.stop_via, self.stop_at = True, via, began

    def _lines(self) -> list[str]:
        # all that is waiting, or block (up to the port's timeout) for the first byte
        data = self.port.read(max(1, int(getattr(self.port, "in_waiting", 0) or 0)))
        if not data:
            return []
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > 4096:  # no newline in 4 KiB: not a line of this device
            self.counters.bad(self._buffer[:80].decode("ascii", errors="replace"), True)
            self._buffer = b""
        return [x.decode("ascii", errors="replace").rstrip("\r") for x in lines]

    def _interrupted(self) -> str:
        sig = self.signal
        name = signal.Signals(sig).name if sig is not None else "SIGINT"
        return f"interrupted ({name})"

    def _next_sample(self) -> Sample:
        """The next new state line, parsed, scaled and checked; raises the watchdog's end
        and the end by a signal."""
        dev = self.device
        while not self._pending:
            if self.signal is not None:
                raise _Ended(EndReason.INTERRUPTED, self._interrupted())
            lines = self._lines()
            now = self.clock()  # the arrival time of what was just read
            for line in lines:
                sample = self._parse(line, now)
                if sample is not None:
                    self._pending.append(sample)
            limit = dev.stale if self._last_t is not None else dev.startup
            if not self._pending and now - self._last_new > limit:
                raise _Ended(
                    EndReason.WATCHDOG,
                    f"watchdog: no new state line for {limit:g} s (device silent or "
                    "disconnected; check the cable, the firmware and the baud rate)",
                )
        return self._pending.popleft()

    def _parse(self, line: str, now: float) -> Sample | None:
        dev, c = self.device, self.counters
        if not line.strip():
            return None
        c.lines += 1
        raw = dev.state.parse(line)
        if raw is None:
            c.bad(line, dev.state.is_foreign(line))
            return None
        values = {n: f.value(raw[n]) for n, f in dev.fields.items()}
        return self._checked(Sample(now, values[dev.time_field], values, line))

    def _checked(self, s: Sample) -> Sample | None:
        """``s`` if its stamp is plausible (see the module docstring), else ``None``."""
        c, period = self.counters, self.device.period
        slack = 2.0 * period
        if self._last_t is None:  # the first sample: the next one must confirm it
            first = self._candidate
            ok = first is not None and 0 < s.device_t - first.device_t <= (
                s.host_t - first.host_t + slack
            )
            if first is None or not ok:
                if first is not None:
                    c.reject("unconfirmed_start", first.line)
                self._candidate = s
                self._hold()
                return None
            self._min_offset = first.host_t - first.device_t
        elif s.device_t <= self._last_t:
            c.repeated += 1
            return None
        elif s.host_t - s.device_t < self._min_offset - slack:
            c.reject("ahead_of_host", s.line)
            return None
        elif s.device_t - self._last_t < 0.5 * period:
            c.reject("too_soon", s.line)
            return None
        self._last_t, self._last_new = s.device_t, s.host_t
        self._min_offset = min(self._min_offset, s.host_t - s.device_t)
        return s

    def _hold(self) -> None:
        """Answers an unconfirmed first sample with ``stop_value`` (a device that waits for
        an answer before its next line goes on; nothing moves)."""
        dev = self.device
        self.send(dev.command_line(dev.clip(dev.stop_value)))

    # -- the phases -----------------------------------------------------------------------

    def _record(self, s: Sample, ctrl: float) -> None:
        """Adds a row and appends it to the journal at once."""
        self.rows.add(s.device_t, s.host_t, s.values, ctrl)
        if self._journal is not None:
            try:
                self._journal.append([s.host_t, ctrl, *(s.values[n] for n in self.device.fields)])
            except OSError as e:  # a full disk: stop rather than capture what cannot be kept
                raise _Ended(EndReason.ERROR, f"{e}; the capture stopped") from e

    def _check_hard(self, s: Sample, record: bool) -> None:
        message = hard_violation(self.device.limits, s.values)
        if message is None:
            return
        self._send_stop()
        if record:
            self._record(s, self.device.stop_value * self.device.command_scale)
        raise _Ended(EndReason.HARD_LIMIT, message + "; the stop command was sent")

    def _reset(self) -> None:
        dev = self.device
        assert dev.reset is not None
        phase = ResetPhase(dev.reset, dev.stop_value)
        t0 = None
        while True:
            s = self._next_sample()
            self._check_hard(s, record=False)
            t0 = s.device_t if t0 is None else t0
            if s.device_t - t0 > dev.reset.timeout:
                raise _Ended(
                    EndReason.RESET_TIMEOUT,
                    f"reset: {dev.reset.field} not at {dev.reset.target:g} and still within "
                    f"{dev.reset.timeout:g} s (raise gain or tolerance, or the timeout)",
                )
            command = phase.command(s.device_t, s.values)
            self.send(dev.command_line(dev.clip(dev.stop_value if command is None else command)))
            if command is None:
                return

    def _excite(self) -> None:
        dev = self.device
        commands = excitation_commands(dev.excitation, dev.rate, self.duration)
        t0 = None
        while True:
            s = self._next_sample()
            t0 = s.device_t if t0 is None else t0
            k = round((s.device_t - t0) * dev.rate)
            if k >= commands.size:
                return
            self._check_hard(s, record=True)
            wanted = commands[k] if self.policy is None else self.policy(k, s.values)
            command, limited = soft_override(
                dev.limits, s.values, dev.clip(float(wanted)), dev.stop_value
            )
            self.counters.soft_limited += limited
            self.send(dev.command_line(command))
            self._record(s, command * dev.command_scale)

    # -- the whole capture ----------------------------------------------------------------

    def run(self, recording: str | Path) -> CaptureResult:
        """Captures, always sends the stop command, writes ``recording`` (``.npz`` or
        ``.csv``) and its sidecar, and returns how it went. Rows are appended to
        ``<stem>.partial.csv`` as they come (removed once the recording is written). An
        unexpected exception is re-raised after the stop and the files (the sidecar names
        it).

        Raises:
          ValueError: ``recording`` is not a ``.npz`` or ``.csv`` name (before anything is
            sent).
          FileExistsError: The journal of an earlier capture that did not finish is there
            (recover it: ``mjsysid capture DEVICE RECORDING --recover``).
        """
        recording = Path(recording)
        if recording.suffix.lower() not in (".npz", ".csv"):
            raise ValueError(must_be("recording", "a .npz or .csv file name", str(recording)))
        reason, message, error = EndReason.COMPLETED, "completed", None
        self._signals = _StopOnSignal(self)
        with self._signals as signals:  # (a signal from here on is a capture that ends)
            self._journal = Journal(journal_path(recording), journal_columns(self.device))
            self._last_new = self.clock()
            try:
                for line in self.device.start:
                    self.send(line)
                if self.device.reset is not None:
                    self._reset()
                self._excite()
            except _Ended as e:
                reason, message = e.reason, e.message
            except KeyboardInterrupt:  # SIGINT outside the main thread's handler
                reason, message = EndReason.INTERRUPTED, "interrupted (SIGINT)"
            except OSError as e:
                reason, message = EndReason.PORT_ERROR, f"port error: {e}"
            except BaseException as e:
                reason, message, error = EndReason.ERROR, f"{type(e).__name__}: {e}", e
            finally:
                self._send_stop()
                self._finished = True  # signals from here on are only counted
            if signals.signal is not None and reason is EndReason.COMPLETED:
                message = f"completed; {self._interrupted()} while stopping"
            journal = self._journal
            try:
                journal.close()
                result = self._write(recording, reason, message)
            except OSError as e:  # a full disk: the rows stay in the journal
                raise OSError(
                    e.errno,
                    f"{e.strerror or e}; the capture had ended ({reason.value}: {message}; "
                    f"stop {'sent' if self.stop_sent else 'NOT SENT'}); its {len(self.rows)} "
                    f"rows are in {str(journal.path)!r}: make room, then finish the recording "
                    f"with 'mjsysid capture DEVICE {recording} --recover'",
                ) from e
            journal.remove()
        if error is not None:
            raise error
        return result

    def _write(self, recording: Path, reason: EndReason, message: str) -> CaptureResult:
        files_at = self.clock()
        summary, written = summarize(
            self.device,
            self.rows,
            self.counters,
            recording,
            reason=reason,
            message=message,
            stop={
                "sent": self.stop_sent,
                "via": self.stop_via,
                "error": self.stop_error,
                "signal": None if self.signal is None else signal.Signals(self.signal).name,
                "more_signals": 0 if self._signals is None else self._signals.repeats,
                "sent_at_s": self.stop_at,
                "files_at_s": files_at,
            },
        )
        side = write_sidecar(sidecar_path(recording), summary)
        return CaptureResult(
            reason,
            message,
            len(self.rows),
            written,
            side,
            self.stop_sent,
            self.signal,
            self.stop_error,
            summary["lines"]["dropped"],
        )


def journal_columns(device: DeviceDescription) -> list[str]:
    """The journal's columns: host time, the control, then every field by name."""
    return ["host_time_s", f"ctrl.{device.actuator}", *(f"field.{n}" for n in device.fields)]


def _columns(device: DeviceDescription, rows: Rows) -> dict[str, np.ndarray]:
    t = np.asarray(rows.device_t)
    # differences of a decimal clock (ms * 0.001) carry float noise: rounded to 1 ns
    cols = {"time": np.round(t - t[0], 9), f"ctrl.{device.actuator}": np.asarray(rows.ctrl)}
    for name, column in device.recorded().items():
        cols[column] = np.array([v[name] for v in rows.values])
    return cols


def _late_commands(device: DeviceDescription, rows: Rows) -> int | None:
    """Rows whose echoed command (a state field named like the command field) differs from
    the command sent after the row before: the device applied it a sample late."""
    echo = device.fields.get(device.command_field)
    if echo is None or len(rows) < 2:
        return None
    got = np.array([echo.raw(v[echo.name]) for v in rows.values[1:]])
    sent = np.asarray(rows.ctrl[:-1]) / device.command_scale
    return int(np.sum(np.abs(got - sent) > 1e-6 * max(1.0, float(np.max(np.abs(sent))))))


def summarize(
    device: DeviceDescription,
    rows: Rows,
    counters: Counters,
    recording: Path,
    *,
    reason: EndReason,
    message: str,
    stop: Mapping[str, Any],
) -> tuple[dict[str, Any], Path | None]:
    """Writes the recording (2 rows or more) and returns ``(the sidecar's contents, the
    recording written or None)``."""
    dev, c = device, counters
    written = write_columns(recording, _columns(dev, rows)) if len(rows) >= 2 else None
    t, host = np.asarray(rows.device_t), np.asarray(rows.host_t)
    gaps = np.round(np.diff(t) * dev.rate) - 1 if t.size > 1 else np.zeros(0)
    reasons = {"lost": int(np.sum(np.clip(gaps, 0, None))), **c.rejected}
    summary = {
        "ended": reason.value,
        "message": message,
        "stop_sent": stop.get("sent"),
        "stop": dict(stop),
        "recording": None if written is None else written.name,
        "rows": len(rows),
        "device_time_origin_s": float(t[0]) if t.size else None,
        "convention": CONVENTION,
        "columns": {
            "time": "device clock (s) from the first row",
            f"ctrl.{dev.actuator}": f"command * {dev.command_scale:g} (control units)",
            **{
                col: f"field {n} ({dev.fields[n].unit or 'no unit'})"
                for n, col in dev.recorded().items()
            },
        },
        "timing": timing_summary(t, host, dev.rate),
        "lines": {
            "read": c.lines,
            "malformed": c.malformed,
            "foreign": c.foreign,
            "repeated": c.repeated,
            "dropped": sum(reasons.values()),
            "dropped_reasons": reasons,
            "examples": list(c.examples),
        },
        "soft_limited": c.soft_limited,
        "late_commands": _late_commands(dev, rows),
        "device": dev.source,
    }
    return summary, written


def recover(device: DeviceDescription, recording: str | Path) -> CaptureResult:
    """Finishes the recording of a capture that never ended, from its journal
    (``<stem>.partial.csv``): writes ``recording`` and its sidecar (``ended: killed``), then
    removes the journal.

    Raises:
      FileNotFoundError: No journal for ``recording``.
      ValueError: The journal is damaged before its last line, or its columns are not this
        device's.
    """
    recording = Path(recording)
    if recording.suffix.lower() not in (".npz", ".csv"):
        raise ValueError(must_be("recording", "a .npz or .csv file name", str(recording)))
    path = journal_path(recording)
    if not path.is_file():
        raise FileNotFoundError(f"no partial capture to recover: {str(path)!r} does not exist")
    found = read_journal(path)
    expected = tuple(journal_columns(device))
    if found.columns != expected:
        raise ValueError(
            must_be(
                f"{str(path)!r}: the columns",
                f"this device's {list(expected)}",
                list(found.columns),
            )
        )
    rows = Rows()
    names = list(device.fields)
    for row in found.rows:
        values = {n: float(v) for n, v in zip(names, row[2:], strict=True)}
        rows.add(values[device.time_field], float(row[0]), values, float(row[1]))
    message = (
        f"the capture process ended without finishing (killed, or the power failed); "
        f"{len(rows)} rows recovered from {path.name}"
        + ("; its last line, cut short, was dropped" if found.cut else "")
        + "; whether the stop command was sent is unknown"
    )
    summary, written = summarize(
        device,
        rows,
        Counters(),
        recording,
        reason=EndReason.KILLED,
        message=message,
        stop={"sent": None, "via": None, "error": None, "signal": None, "more_signals": 0},
    )
    summary["lines"] = {"recovered_rows": len(rows), "cut_last_line": found.cut}
    side = write_sidecar(sidecar_path(recording), summary)
    path.unlink()
    return CaptureResult(EndReason.KILLED, message, len(rows), written, side, None)
