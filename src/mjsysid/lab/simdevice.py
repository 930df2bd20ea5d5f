"""A simulated device: a MuJoCo model behind a pseudo-terminal, speaking a device's protocol.

:class:`SimulatedDevice` opens a pty pair (``os.openpty``); a capture opens the slave end
(:attr:`SimulatedDevice.path`) as its serial port. The device runs in real time at
``device.rate``: at every tick it steps the model over one period with the command received
during that period, then writes one state line in the device's format. A command line
(``device.command``) received after state line ``k`` therefore acts from sample ``k`` on, the
convention of :mod:`mjsysid.lab.capture.session`; the stop line sets the command to
``stop_value``.

State fields come from the model by their ``column``: a sensor name, ``<joint>_qpos`` or
``<joint>_qvel``; the time field is the simulation time; a field named like the command field
echoes the command being applied. Options (:class:`SimOptions`): Gaussian noise and
quantization per field (in field units, noise first), ``silent_after`` (stop talking, as a
crashed firmware), ``malformed_every`` (an extra garbled line after every n-th state line),
``drop_every`` (every n-th state line is lost, the device runs on), ``inject`` (raw lines
sent after given state lines: a glitched time stamp, say) and ``lockstep`` (wait, up to a
second, for the host's command before each step, so that a loaded test machine cannot make a
command miss its period). Given a ``seed``, a run is deterministic.

:attr:`SimulatedDevice.arrivals` keeps the host clock (``time.monotonic``) at which each line
arrived, and ``listener`` is called with each line as it arrives (in the device's thread), so
that a test can see what the device side had received at a given moment.
:meth:`SimulatedDevice.unplug` takes the device away as a pulled cable does.
"""

from __future__ import annotations

import errno
import os
import select
import threading
import time
import tty
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import mujoco
import numpy as np

from mjsysid.lab.capture.device import DeviceDescription


@dataclass(frozen=True)
class SimOptions:
    """Options of the simulated device (see the module docstring)."""

    noise: Mapping[str, float] = field(default_factory=dict)
    quantize: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    silent_after: float | None = None
    malformed_every: int = 0
    drop_every: int = 0
    inject: Mapping[int, str] = field(default_factory=dict)
    lockstep: bool = False


@dataclass(frozen=True)
class _Signal:
    """A scalar of ``MjData``: ``getattr(data, array)[index]``."""

    array: str
    index: int

    def __call__(self, data: mujoco.MjData) -> float:
        return float(getattr(data, self.array)[self.index])


def _signal_reader(model: mujoco.MjModel, column: str) -> _Signal:
    """The scalar model signal ``column``: a sensor, ``<joint>_qpos`` or ``<joint>_qvel``."""
    sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, column)
    if sid >= 0:
        return _Signal("sensordata", int(model.sensor_adr[sid]))
    for suffix, adrs, array in (
        ("_qpos", model.jnt_qposadr, "qpos"),
        ("_qvel", model.jnt_dofadr, "qvel"),
    ):
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, column.removesuffix(suffix))
        if column.endswith(suffix) and jid >= 0:
            return _Signal(array, int(adrs[jid]))
    raise ValueError(
        f"state field column {column!r} must be a model sensor or <joint>_qpos/_qvel of the "
        "simulated model"
    )


class SimulatedDevice:
    """Serves ``model`` behind a pty as the device ``device`` describes.

    Attributes:
      path: The slave end's file name (give it to the capture as its port).
      received: Every line received, in order.
      applied: The command (command units) applied over each period, one per state line after
        the first.
      stops: How many stop lines came.
      bad_commands: Lines that were neither a command nor the stop.
    """

    def __init__(
        self,
        device: DeviceDescription,
        model: mujoco.MjModel,
        options: SimOptions | None = None,
        listener: Callable[[str], None] | None = None,
    ) -> None:
        self.device, self.model = device, model
        self.options = options or SimOptions()
        self.data = mujoco.MjData(model)
        self.substeps = round(device.period / model.opt.timestep)
        if self.substeps < 1 or abs(self.substeps * model.opt.timestep - device.period) > 1e-9:
            raise ValueError(
                f"{device.source}: the period 1/rate = {device.period:g} s must be a multiple "
                f"of the model timestep {model.opt.timestep:g} s"
            )
        self.actuator = model.actuator(device.actuator).id
        self.readers = {
            n: _signal_reader(model, f.column or n)
            for n, f in device.fields.items()
            if n not in (device.time_field, device.command_field)
        }
        self.rng = np.random.default_rng(self.options.seed)
        self.command = device.stop_value
        self.received: list[str] = []
        self.arrivals: list[tuple[float, str]] = []
        self.listener = listener
        self.applied: list[float] = []
        self.stops = self.bad_commands = self.lines_sent = 0
        self._fresh = False
        self._ticks = 0
        self._buffer = b""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._unplugged = False
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)  # no echo, no line editing: bytes pass as they are
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)

    # -- the protocol ---------------------------------------------------------------------

    def state_line(self) -> str:
        """The state line of the current simulation state."""
        dev, opt = self.device, self.options
        values = {dev.time_field: float(self.data.time)}
        for name, read in self.readers.items():
            v = read(self.data) + (
                self.rng.normal(0.0, opt.noise[name]) if name in opt.noise else 0
            )
            q = opt.quantize.get(name)
            values[name] = float(np.round(v / q) * q) if q else v
        raw = {n: dev.fields[n].raw(v) for n, v in values.items()}
        if dev.command_field in dev.fields:
            raw[dev.command_field] = self.command
        return dev.state.format(raw)

    def _handle(self, line: str) -> None:
        dev = self.device
        self.received.append(line)
        self.arrivals.append((time.monotonic(), line))
        if self.listener is not None:
            self.listener(line)
        if line.strip() == dev.stop.strip():
            self.command, self._fresh = dev.stop_value, True
            self.stops += 1
            return
        parsed = dev.command.parse(line)
        if parsed is None:
            self.bad_commands += 1
            return
        self.command, self._fresh = dev.clip(parsed[dev.command_field]), True

    def _receive(self, timeout: float) -> None:
        """Reads and handles the command lines arriving within ``timeout`` seconds."""
        ready, _, _ = select.select([self.master], [], [], max(0.0, timeout))
        if not ready:
            return
        try:
            data = os.read(self.master, 4096)
        except OSError as e:  # EIO: no process has the slave open
            if e.errno != errno.EIO:
                raise
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            self._handle(raw.decode("ascii", errors="replace").rstrip("\r"))

    def _write(self, line: str) -> None:
        try:
            os.write(self.master, (line + "\n").encode("ascii"))
            self.lines_sent += 1
        except BlockingIOError:  # nobody reads: the line is lost, as on a real UART
            pass

    # -- the real-time loop ---------------------------------------------------------------

    def _wait_period(self, deadline: float) -> None:
        """Receives commands until ``deadline`` (host clock); in lockstep also until a new
        command came (at most one second more)."""
        late = deadline + 1.0
        while not self._stop.is_set():
            now = time.monotonic()
            waiting = self.options.lockstep and not self._fresh and now < late
            if now >= deadline and not waiting:
                return
            self._receive(min(0.002, max(0.0, (deadline if now < deadline else late) - now)))

    def _tick(self) -> None:
        """Steps one period with the current command, then sends the state line."""
        self.applied.append(self.command)
        self.data.ctrl[self.actuator] = self.command * self.device.command_scale
        for _ in range(self.substeps):
            mujoco.mj_step(self.model, self.data)
        mujoco.mj_forward(self.model, self.data)  # sensors of the new state, not the last step's
        self._emit()

    def _emit(self) -> None:
        opt = self.options
        if opt.silent_after is not None and self.data.time > opt.silent_after:
            return
        line = self.state_line()
        self._ticks += 1
        if opt.drop_every and self._ticks % opt.drop_every == 0:
            self._fresh = True  # a lost line: the host cannot answer it, lockstep goes on
            return
        self._write(line)
        self._fresh = False
        if opt.malformed_every and (self.lines_sent % opt.malformed_every == 0):
            self._write(line[: max(1, len(line) // 2)] + ",x")
        if self._ticks in opt.inject:
            self._write(opt.inject[self._ticks])

    def serve(self, duration: float | None = None) -> None:
        """Runs until :meth:`stop` (or ``duration`` seconds), in the calling thread."""
        mujoco.mj_forward(self.model, self.data)
        start = time.monotonic()
        self._emit()
        k = 0
        while not self._stop.is_set():
            k += 1
            if duration is not None and k * self.device.period > duration:
                break
            self._wait_period(start + k * self.device.period)
            if not self._stop.is_set():
                self._tick()

    def start(self) -> SimulatedDevice:
        """Serves in a background thread; returns ``self``."""
        self._thread = threading.Thread(target=self.serve, name="simdevice", daemon=True)
        self._thread.start()
        return self

    def unplug(self) -> None:
        """Stops serving and closes the device's end of the pty: the port's end sees the
        hang-up of a pulled cable (reads and writes fail)."""
        if self._unplugged or self._closed:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._receive(0.0)
        os.close(self.master)
        self._unplugged = True

    def stop(self) -> None:
        """Stops serving (drains the commands still queued) and closes the pty."""
        if self._closed:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if not self._unplugged:
            self._receive(0.0)
            os.close(self.master)
        os.close(self.slave)
        self._closed = True

    def __enter__(self) -> SimulatedDevice:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
