"""Device descriptions: what a microcontroller sends and understands, in one YAML file.

Example (the bundled ``examples/dcmotor/device.yaml``)::

    port: /dev/ttyUSB0            # serial port (COM3 on Windows)
    baud: 115200
    rate: 50                      # Hz: the device sends one state line per period
    model: dcmotor.xml            # optional: the MuJoCo model (for ``mjsysid device``)
    state:
      format: "S,{time_ms:d},{counts:d},{pwm:d}"
      time: time_ms               # the field holding the device clock
      fields:                     # value = raw * scale + offset, in `unit`
        time_ms: {scale: 0.001, unit: s}
        counts: {column: encoder, scale: 0.00475998887, unit: rad}
        pwm: {record: false}      # echo of the command the device applies
    command:
      format: "M{pwm:d}"          # one field: the command, in command units
      actuator: motor             # recorded as column ctrl.motor ...
      scale: 0.00392156862745098  # ... in control units: ctrl = command * scale
      limits: [-255, 255]         # commands are clipped to this range
    stop: "M0"                    # sent on every exit; `stop_value` (0) is recorded for it
    start: []                     # lines sent once after opening (e.g. ["G"])
    watchdog: {stale: 0.25, startup: 3.0}   # s without a new state line
    limits:                       # on fields, in field units (after scale)
      counts: {soft: [-3.0, 3.0], hard: [-6.0, 6.0]}
    excitation: {signal: prbs, amplitude: 200, duration: 20, hold: 0.1, seed: 0}
    reset:                        # optional: drive to centre, wait until still
      field: counts
      target: 0.0
      gain: 400                   # command units per field unit (sign: towards target)
      max_command: 120
      tolerance: 0.05
      still: {fields: [counts], within: 0.01, for: 0.5}
      timeout: 10

Soft limits: while a field is outside its soft range, a command that would push it further
out is replaced by ``stop_value`` (``direction: 1``, the default, says a positive command
increases the field; ``-1`` the opposite). Hard limits: the stop command is sent at once and
the capture ends (the recording keeps the rows so far and says why it ended).

Excitation signals are those of :mod:`mjsysid.data.excitation` (``prbs`` and ``steps`` with
``hold`` in s; ``chirp`` and ``multisine`` with ``f0``/``f1`` in Hz), ``amplitude`` in command
units, sampled at ``rate``. A mistake is a :class:`DeviceError` naming the YAML key, what was
expected and what came.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mjsysid.data.excitation import SIGNALS
from mjsysid.lab.capture.lines import LineFormat
from mjsysid.util.errors import short_repr
from mjsysid.util.files import read_yaml
from mjsysid.util.limits import check_limit


class DeviceError(ValueError):
    """A mistake in a device description; the message starts with the YAML key."""


class _Node:
    """A YAML mapping with its key path, for errors that name the key."""

    def __init__(self, data: Any, path: str, source: str) -> None:
        if not isinstance(data, dict):
            raise DeviceError(f"{source}: {path or 'the file'} must be a mapping, got {data!r}")
        self.data, self.path, self.source = data, path, source
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def fail(self, name: str, expected: str, got: Any) -> DeviceError:
        return DeviceError(
            f"{self.source}: {self.key(name)} must be {expected}, got {short_repr(got)}"
        )

    def get(self, name: str, default: Any = None, *, required: bool = False) -> Any:
        self.used.add(name)
        if name not in self.data:
            if required:
                raise DeviceError(f"{self.source}: {self.key(name)} is required")
            return default
        return self.data[name]

    def number(
        self,
        name: str,
        default: float | None = None,
        *,
        positive: bool = False,
        limit: str | None = None,
    ) -> Any:
        """A finite number (``> 0`` with ``positive``), at most the named ``limit`` of
        :mod:`mjsysid.util.limits` (a rate, a duration, a timeout)."""
        value = self.get(name, default, required=default is None)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or (positive and value <= 0):
            raise self.fail(name, "a finite number" + (" > 0" if positive else ""), value)
        if limit is not None:
            self.bounded(name, limit, value)
        return float(value)

    def bounded(self, name: str, limit: str, value: float, what: str = "") -> None:
        """``check_limit`` as a :class:`DeviceError` naming the key."""
        try:
            check_limit(limit, value, f"{self.source}: {self.key(name)}{what}")
        except ValueError as e:
            raise DeviceError(str(e)) from None

    def text(self, name: str, default: str | None = None) -> Any:
        value = self.get(name, default, required=default is None)
        if not isinstance(value, str):
            raise self.fail(name, "text", value)
        return value

    def child(self, name: str, required: bool = False) -> _Node | None:
        value = self.get(name, None, required=required)
        return None if value is None else _Node(value, self.key(name), self.source)

    def pair(self, name: str) -> tuple[float, float] | None:
        value = self.get(name)
        if value is None:
            return None
        ok = isinstance(value, list | tuple) and len(value) == 2
        ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        if not ok or not value[0] < value[1]:
            raise self.fail(name, "[low, high] with low < high", value)
        return float(value[0]), float(value[1])

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise DeviceError(
                f"{self.source}: {self.path or 'top level'} has unknown keys {unknown}; "
                f"allowed: {sorted(self.used)}"
            )


@dataclass(frozen=True)
class FieldSpec:
    """One field of the state line: ``value = raw * scale + offset`` in ``unit``.

    ``column`` is the recording's column (a model sensor or ``<joint>_qpos``/``_qvel``);
    ``None`` for a field that is not recorded.
    """

    name: str
    scale: float = 1.0
    offset: float = 0.0
    unit: str = ""
    column: str | None = None

    def value(self, raw: float) -> float:
        return raw * self.scale + self.offset

    def raw(self, value: float) -> float:
        return (value - self.offset) / self.scale


@dataclass(frozen=True)
class Limit:
    """Soft and hard ranges of one field, in field units."""

    field: str
    soft: tuple[float, float] | None = None
    hard: tuple[float, float] | None = None
    direction: int = 1


@dataclass(frozen=True)
class Excitation:
    """The excitation: a :mod:`mjsysid.data.excitation` signal in command units."""

    signal: str = "prbs"
    amplitude: float = 1.0
    duration: float = 10.0
    hold: float = 0.05
    f0: float = 0.1
    f1: float = 5.0
    seed: int = 0


@dataclass(frozen=True)
class Reset:
    """Drive ``field`` to ``target`` (P-control), then wait until the ``still`` fields vary
    less than ``within`` over ``still_for`` seconds."""

    field: str
    target: float = 0.0
    gain: float = 1.0
    max_command: float = 1.0
    tolerance: float = 0.05
    still: tuple[str, ...] = ()
    within: float = 0.01
    still_for: float = 0.5
    timeout: float = 10.0


@dataclass(frozen=True)
class DeviceDescription:
    """A validated device description (see the module docstring for the YAML)."""

    port: str
    baud: int
    rate: float
    state: LineFormat
    time_field: str
    fields: Mapping[str, FieldSpec]
    command: LineFormat
    actuator: str
    command_scale: float
    command_limits: tuple[float, float] | None
    stop: str
    stop_value: float = 0.0
    start: tuple[str, ...] = ()
    stale: float = 0.25
    startup: float = 3.0
    limits: tuple[Limit, ...] = ()
    excitation: Excitation = field(default_factory=Excitation)
    reset: Reset | None = None
    model: Path | None = None
    source: str = "<device>"

    @property
    def command_field(self) -> str:
        return self.command.fields[0]

    @property
    def period(self) -> float:
        return 1.0 / self.rate

    def clip(self, command: float) -> float:
        """``command`` within ``command_limits``, as the command line carries it."""
        if self.command_limits is not None:
            command = min(max(command, self.command_limits[0]), self.command_limits[1])
        return self.command.applied(self.command_field, command)

    def command_line(self, command: float) -> str:
        return self.command.format({self.command_field: command})

    def recorded(self) -> dict[str, str]:
        """``{field: column}`` of the recorded fields (the time field excluded)."""
        return {
            n: f.column
            for n, f in self.fields.items()
            if f.column is not None and n != self.time_field
        }


def _fields(node: _Node, fmt: LineFormat) -> dict[str, FieldSpec]:
    given = node.child("fields")
    out = {}
    for name in fmt.fields:
        sub = given.child(name) if given is not None else None
        if sub is None:
            out[name] = FieldSpec(name, column=name)
            continue
        record = sub.get("record", True)
        if not isinstance(record, bool):
            raise sub.fail("record", "true or false", record)
        column = sub.text("column", name) if record else None
        scale = sub.number("scale", 1.0)
        if scale == 0:
            raise sub.fail("scale", "a non-zero number", scale)
        out[name] = FieldSpec(name, scale, sub.number("offset", 0.0), sub.text("unit", ""), column)
        sub.finish()
    if given is not None:
        given.finish()  # a field the state format does not have
    return out


def _limits(node: _Node | None, fields: Mapping[str, FieldSpec]) -> tuple[Limit, ...]:
    if node is None:
        return ()
    out = []
    for name in list(node.data):
        if name not in fields:
            raise node.fail(name, f"a field of the state line {list(fields)}", name)
        sub = node.child(name)
        assert sub is not None
        direction = sub.get("direction", 1)
        if direction not in (1, -1):
            raise sub.fail("direction", "1 or -1", direction)
        lim = Limit(name, sub.pair("soft"), sub.pair("hard"), int(direction))
        sub.finish()
        out.append(lim)
    return tuple(out)


def _excitation(node: _Node | None) -> Excitation:
    if node is None:
        return Excitation()
    signal = node.text("signal", "prbs")
    if signal not in SIGNALS:
        raise node.fail("signal", f"one of {list(SIGNALS)}", signal)
    seed = node.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise node.fail("seed", "an integer", seed)
    exc = Excitation(
        signal,
        node.number("amplitude", 1.0),
        node.number("duration", 10.0, positive=True, limit="max_duration_s"),
        node.number("hold", 0.05, positive=True, limit="max_duration_s"),
        node.number("f0", 0.1, positive=True),
        node.number("f1", 5.0, positive=True),
        seed,
    )
    node.finish()
    return exc


def _reset(node: _Node | None, fields: Mapping[str, FieldSpec]) -> Reset | None:
    if node is None:
        return None
    name = node.text("field")
    if name not in fields:
        raise node.fail("field", f"a field of the state line {list(fields)}", name)
    still = node.child("still")
    names: tuple[str, ...] = (name,)
    within, still_for = 0.01, 0.5
    if still is not None:
        raw = still.get("fields", [name])
        if not isinstance(raw, list) or not all(f in fields for f in raw):
            raise still.fail("fields", f"a list of state fields {list(fields)}", raw)
        names, within = tuple(raw), still.number("within", 0.01, positive=True)
        still_for = still.number("for", 0.5, positive=True, limit="max_timeout_s")
        still.finish()
    reset = Reset(
        name,
        node.number("target", 0.0),
        node.number("gain", 1.0),
        node.number("max_command", 1.0, positive=True),
        node.number("tolerance", 0.05, positive=True),
        names,
        within,
        still_for,
        node.number("timeout", 10.0, positive=True, limit="max_timeout_s"),
    )
    node.finish()
    return reset


def _check_columns(source: str, fields: Mapping[str, FieldSpec], time: str, actuator: str):
    """Recorded columns are unique and not the recording's own (time, control, initial)."""
    taken = {"time": "the time", f"ctrl.{actuator}": "the control"}
    taken.update(initial_qpos="the initial state", initial_qvel="the initial state")
    for name, f in fields.items():
        if f.column is None or name == time:
            continue
        if f.column in taken:
            raise DeviceError(
                f"{source}: state.fields.{name}.column must be a column of its own, got "
                f"{f.column!r}, which is {taken[f.column]} column"
            )
        taken[f.column] = f"field {name}'s"


def _command(node: _Node) -> tuple[LineFormat, str, float, tuple[float, float] | None]:
    fmt = LineFormat.compile(node.text("format"), node.key("format"))
    if len(fmt.fields) != 1:
        raise node.fail("format", "a template with exactly one field (the command)", fmt.template)
    out = fmt, node.text("actuator"), node.number("scale", 1.0), node.pair("limits")
    node.finish()
    return out


def device_from_dict(data: Any, source: str = "<device>", folder: Path | None = None):
    """A :class:`DeviceDescription` from parsed YAML; ``folder`` resolves ``model``."""
    top = _Node(data, "", source)
    port, baud = top.text("port", ""), top.get("baud", 115200)
    if not isinstance(baud, int) or isinstance(baud, bool) or baud <= 0:
        raise top.fail("baud", "a positive integer (bits/s)", baud)
    state = top.child("state", required=True)
    assert state is not None
    fmt = LineFormat.compile(state.text("format"), state.key("format"))
    time_field = state.text("time")
    if time_field not in fmt.fields:
        raise state.fail("time", f"a field of {fmt.template!r}", time_field)
    fields = _fields(state, fmt)
    state.finish()
    command = top.child("command", required=True)
    assert command is not None
    cmd_fmt, actuator, cmd_scale, cmd_limits = _command(command)
    _check_columns(source, fields, time_field, actuator)
    stop = top.text("stop")
    if not stop.strip() or not stop.isascii() or "\n" in stop:
        raise top.fail("stop", "one non-empty line of ASCII text (e.g. M0)", stop)
    start = top.get("start", [])
    ok = isinstance(start, list) and all(isinstance(s, str) and s.isascii() for s in start)
    if not ok:
        raise top.fail("start", "a list of ASCII lines", start)
    watchdog = top.child("watchdog") or _Node({}, "watchdog", source)
    stale, startup = (
        watchdog.number("stale", 0.25, positive=True, limit="max_timeout_s"),
        watchdog.number("startup", 3.0, positive=True, limit="max_timeout_s"),
    )
    watchdog.finish()
    model = top.get("model")
    if model is not None and not isinstance(model, str):
        raise top.fail("model", "a file name", model)
    rate = top.number("rate", positive=True, limit="max_rate_hz")
    desc = DeviceDescription(
        port=port,
        baud=baud,
        rate=rate,
        state=fmt,
        time_field=time_field,
        fields=fields,
        command=cmd_fmt,
        actuator=actuator,
        command_scale=cmd_scale,
        command_limits=cmd_limits,
        stop=stop,
        stop_value=top.number("stop_value", 0.0),
        start=tuple(start),
        stale=stale,
        startup=startup,
        limits=_limits(top.child("limits"), fields),
        excitation=_excitation(top.child("excitation")),
        reset=_reset(top.child("reset"), fields),
        model=None if model is None else (folder or Path()) / model,
        source=source,
    )
    top.finish()
    rows = desc.excitation.duration * rate
    (top.child("excitation") or top).bounded("duration", "max_rows", rows, " x rate: rows")
    return desc


def load_device(path: str | Path) -> DeviceDescription:
    """Reads and validates a device description YAML file.

    Raises:
      FileNotFoundError: No such file.
      DeviceError: A key with a wrong value, a missing or an unknown key.
    """
    path = Path(path)
    return device_from_dict(read_yaml(path), str(path), path.parent)
