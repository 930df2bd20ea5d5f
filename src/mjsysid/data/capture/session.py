"""The capture loop: read state lines, answer each with a command, stop safely, record.

The loop is driven by the device: it sends one state line per period, and the host answers
each new sample ``k`` with the command for it at once. **Convention:** the command sent after
reading sample ``k`` acts from sample ``k`` on (until the next command) and is recorded in row
``k``: the "held from this sample" zero-order hold that mjsysid's rollouts assume. What is
recorded is the command as applied: clipped to the command limits, rounded as the command
line carries it, after soft-limit overrides, in control units (``command * scale``).

Safety. Hard limits send the stop command at once and end the capture; soft limits replace
outward commands by ``stop_value``; the watchdog ends the capture when no new state line came
for ``watchdog.stale`` seconds (``watchdog.startup`` for the first one). The stop command is
sent on every way out: completion, a limit, the watchdog, Ctrl-C, SIGTERM and any exception
(a ``finally``; SIGINT and SIGTERM handlers are installed for the capture and restored
after, when it runs in the main thread). The recording keeps what was captured, and the
sidecar says why it ended.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mjsysid.data.capture.device import DeviceDescription, Excitation
from mjsysid.data.capture.output import sidecar_path, timing_summary, write_columns, write_sidecar
from mjsysid.data.capture.safety import ResetPhase, hard_violation, soft_override
from mjsysid.data.excitation import chirp, multisine, prbs, random_steps

log = logging.getLogger(__name__)

Policy = Callable[[int, Mapping[str, float]], float]
"""``policy(k, values) -> command``: the command (command units) for excitation sample ``k``
given the field values (field units) just read; the default plays the excitation."""

CONVENTION = (
    "ctrl in row k is the command sent after reading sample k; it acts from sample k until "
    "the next row (zero-order hold from this sample)"
)


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


class CaptureInterrupted(Exception):
    """Raised in the capture loop by the SIGINT/SIGTERM handler."""


class _Ended(Exception):
    def __init__(self, reason: EndReason, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass
class Counters:
    """Line counts: malformed lines start like a state line but do not parse; foreign lines
    do not even start like one; repeated samples carry an old device time; dropped samples
    are gaps in the device clock."""

    lines: int = 0
    malformed: int = 0
    foreign: int = 0
    repeated: int = 0
    soft_limited: int = 0
    examples: list[str] = field(default_factory=list)

    def bad(self, line: str, foreign: bool) -> None:
        if foreign:
            self.foreign += 1
        else:
            self.malformed += 1
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


@dataclass
class CaptureResult:
    """The outcome: why it ended, a message, the row count and the files written."""

    reason: EndReason
    message: str
    rows: int
    recording: Path | None
    sidecar: Path
    stop_sent: bool


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


class _RaiseOnce:
    """A signal handler raising :class:`CaptureInterrupted` the first time only: a second
    Ctrl-C while the stop command is being sent must not interrupt sending it."""

    def __init__(self) -> None:
        self.raised = False

    def __call__(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.raised:
            log.warning("%s again: already stopping", name)
            return
        self.raised = True
        raise CaptureInterrupted(name)


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`CaptureInterrupted` inside the block (main thread
    only; elsewhere signals cannot be handled and the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    old = {s: signal.signal(s, _RaiseOnce()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class CaptureSession:
    """One capture from a device over ``port``.

    Args:
      device: The device description.
      port: An open port (see :func:`mjsysid.data.capture.serialport.open_port`).
      duration: Excitation length (s); default ``device.excitation.duration``.
      policy: Commands instead of the excitation (see :data:`Policy`).
      clock: The host clock (s).
    """

    def __init__(
        self,
        device: DeviceDescription,
        port: Port,
        *,
        duration: float | None = None,
        policy: Policy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.device, self.port, self.clock = device, port, clock
        self.duration = device.excitation.duration if duration is None else float(duration)
        self.policy = policy
        self.rows, self.counters = Rows(), Counters()
        self._buffer = b""
        self._pending: deque[Sample] = deque()
        self._last_t: float | None = None
        self._last_new = 0.0
        self.stop_sent = False

    # -- the port -------------------------------------------------------------------------

    def send(self, line: str) -> None:
        self.port.write((line + "\n").encode("ascii"))

    def _send_stop(self) -> None:
        try:
            self.send(self.device.stop)
            self.stop_sent = True
        except OSError as e:  # the port is gone: nothing more can be sent
            log.error("could not send the stop command %r: %s", self.device.stop, e)

    def _lines(self) -> list[str]:
        # all that is waiting, or block (up to the port's timeout) for the first byte
        data = self.port.read(max(1, int(getattr(self.port, "in_waiting", 0) or 0)))
        if not data:
            return []
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        return [x.decode("ascii", errors="replace").rstrip("\r") for x in lines]

    def _next_sample(self) -> Sample:
        """The next new state line, parsed and scaled; raises the watchdog's end."""
        dev = self.device
        while not self._pending:
            lines = self._lines()
            now = self.clock()  # the arrival time of what was just read
            parsed = (self._parse(line, now) for line in lines)
            self._pending.extend(p for p in parsed if p is not None)
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
        t = values[dev.time_field]
        if self._last_t is not None and t <= self._last_t:
            c.repeated += 1
            return None
        self._last_t, self._last_new = t, now
        return Sample(now, t, values)

    # -- the phases -----------------------------------------------------------------------

    def _check_hard(self, s: Sample, record: bool) -> None:
        message = hard_violation(self.device.limits, s.values)
        if message is None:
            return
        self._send_stop()
        if record:
            stop_ctrl = self.device.stop_value * self.device.command_scale
            self.rows.add(s.device_t, s.host_t, s.values, stop_ctrl)
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
            self.rows.add(s.device_t, s.host_t, s.values, command * dev.command_scale)

    # -- the whole capture ----------------------------------------------------------------

    def run(self, recording: str | Path) -> CaptureResult:
        """Captures, always sends the stop command, writes ``recording`` (``.npz`` or
        ``.csv``) and its sidecar, and returns how it went. An unexpected exception is
        re-raised after the stop and the files (the sidecar names it)."""
        reason, message, error = EndReason.COMPLETED, "completed", None
        self._last_new = self.clock()
        with _signals_raise():
            try:
                for line in self.device.start:
                    self.send(line)
                if self.device.reset is not None:
                    self._reset()
                self._excite()
            except _Ended as e:
                reason, message = e.reason, e.message
            except (CaptureInterrupted, KeyboardInterrupt) as e:
                reason, message = EndReason.INTERRUPTED, f"interrupted ({e or 'SIGINT'})"
            except OSError as e:
                reason, message = EndReason.PORT_ERROR, f"port error: {e}"
            except BaseException as e:
                reason, message, error = EndReason.ERROR, f"{type(e).__name__}: {e}", e
            finally:
                self._send_stop()
        result = self._write(Path(recording), reason, message)
        if error is not None:
            raise error
        return result

    def _columns(self) -> dict[str, np.ndarray]:
        dev, rows = self.device, self.rows
        t = np.asarray(rows.device_t)
        # differences of a decimal clock (ms * 0.001) carry float noise: rounded to 1 ns
        cols = {"time": np.round(t - t[0], 9), f"ctrl.{dev.actuator}": np.asarray(rows.ctrl)}
        for name, column in dev.recorded().items():
            cols[column] = np.array([v[name] for v in rows.values])
        return cols

    def _late_commands(self) -> int | None:
        """Rows whose echoed command (a state field named like the command field) differs
        from the command sent after the row before: the device applied it a sample late."""
        dev, rows = self.device, self.rows
        echo = dev.fields.get(dev.command_field)
        if echo is None or len(rows) < 2:
            return None
        got = np.array([echo.raw(v[echo.name]) for v in rows.values[1:]])
        sent = np.asarray(rows.ctrl[:-1]) / dev.command_scale
        return int(np.sum(np.abs(got - sent) > 1e-6 * max(1.0, float(np.max(np.abs(sent))))))

    def _write(self, recording: Path, reason: EndReason, message: str) -> CaptureResult:
        dev, rows, c = self.device, self.rows, self.counters
        written = write_columns(recording, self._columns()) if len(rows) >= 2 else None
        t, host = np.asarray(rows.device_t), np.asarray(rows.host_t)
        gaps = np.round(np.diff(t) * dev.rate) - 1 if t.size > 1 else np.zeros(0)
        summary = {
            "ended": reason.value,
            "message": message,
            "stop_sent": self.stop_sent,
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
                "dropped": int(np.sum(np.clip(gaps, 0, None))),
                "examples": list(c.examples),
            },
            "soft_limited": c.soft_limited,
            "late_commands": self._late_commands(),
            "device": dev.source,
        }
        side = write_sidecar(sidecar_path(recording), summary)
        return CaptureResult(reason, message, len(rows), written, side, self.stop_sent)
