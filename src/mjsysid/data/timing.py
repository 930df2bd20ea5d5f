"""Timing of a recording: when its commands act, how regular its clock is, regular grids.

Command timing (``command_timing``)
    A control row is stamped with one time; what that time means depends on the rig:

    * ``"held"`` (default): row ``k``'s command acts from sample ``k`` until sample ``k+1``
      (a controller that reads the sensors, then sets the command, then logs both);
    * ``"before"``: row ``k`` holds the command that acted *before* sample ``k``, from sample
      ``k-1`` to ``k`` (a microcontroller loop that applies the PWM, waits, samples, then logs
      the row). The commands move one row earlier: row ``k`` gets row ``k+1``'s command; the
      first row's command (what acted before the first sample) is dropped and the last
      command is held over the last row (it acts on nothing the fit sees);
    * a number ``latency`` (s): each command acts ``latency`` s after its stamp (driver or
      bus delay); the control time axis moves by ``latency``. With ``latency > 0`` the first
      ``latency`` s hold the first command, with ``latency < 0`` the last command is held
      to the end, so that the controls still cover the sensors' span.

Clock jitter
    :func:`jitter_stats` measures how far the time steps spread around their median (dropped
    samples left out); :func:`jitter_message` turns a spread above a tolerance into a
    :class:`TimingWarning` text with the numbers and the fixes: a device clock column, or
    :func:`retime` (the rows were sampled regularly and only their stamps jitter: a host's
    receive clock) or :func:`resample_recording` (the samples really are irregular: robot
    logs from several topics).

Recognises measured data stamped the way ``mujoco.sysid``'s rollout stamps it.

``mujoco.sysid.sysid_rollout`` reads the sensors *before* step ``k`` (``mujoco.rollout``
does) but stamps row ``k`` with ``t_k + dt``, the time *after* the step, and drops the last
control row. Data saved from it (or made to match it) is one timestep late against its
control and initial state. mjsysid stamps row ``k`` at ``t_k``; :func:`warn_if_peer_stamped`
warns once, with the fix, when a measurement looks shifted that way:

(a) sensor times equal the control times plus ``dt``, row for row;
(b) one row fewer, sensor times equal the control times from the second row on;
(c) the first sensor time is the initial state's time plus ``dt``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from mjsysid.data.timeseries import TimeSeries
from mjsysid.util.errors import finite_real, must_be

__all__ = [
    "JITTER_TOLERANCE",
    "CommandTiming",
    "JitterStats",
    "TimingWarning",
    "apply_command_timing",
    "jitter_message",
    "jitter_stats",
    "parse_command_timing",
    "resample_recording",
    "retime",
]

JITTER_TOLERANCE = 0.02
"""Default tolerance of the step spread, as a fraction of the median step (2 %)."""

_GAP = 1.5  # a step this many median steps long is a dropped sample, not jitter

CommandTiming = str | float
"""``"held"``, ``"before"`` or a latency in seconds (see the module docstring)."""


class TimingWarning(UserWarning):
    """A recording's timing looks wrong (jittering clock, shifted commands)."""


def parse_command_timing(value: Any, what: str = "command_timing") -> str | float:
    """``"held"``, ``"before"`` or a finite latency (s) as a float.

    Raises:
      ValueError: Anything else (names the three forms).
    """
    if value in ("held", "before"):
        return str(value)
    if finite_real(value):
        return float(value)
    raise ValueError(
        must_be(
            what,
            "'held' (row k's command acts from sample k), 'before' (it acted before sample "
            "k, from sample k-1) or a latency in seconds",
            value,
        )
    )


def apply_command_timing(control: TimeSeries, timing: Any) -> tuple[TimeSeries, str]:
    """The control series as it acts, under ``timing`` (see the module docstring).

    Args:
      control: ``(N, nu)`` controls on the recording's times, in file rows.
      timing: ``"held"``, ``"before"`` or a latency (s).

    Returns:
      ``(control, note)``: the series (same mapping) and one line saying what happened at
      the edges (empty for ``"held"``).
    """
    timing = parse_command_timing(timing)
    if timing == "held" or timing == 0.0:
        return control, ""
    data, times = np.asarray(control.data), np.asarray(control.times)
    if timing == "before":
        if len(control) < 2:
            raise ValueError(must_be("command_timing 'before'", "at least 2 rows", len(control)))
        shifted = np.concatenate([data[1:], data[-1:]], axis=0)
        note = (
            "command_timing: before: the commands moved one row earlier (row k now holds the "
            "command that acted from sample k to k+1); the first row's command, which acted "
            "before the first sample, is not used, and the last command is held over the "
            "last row"
        )
        return TimeSeries(times, shifted, control.signal_mapping), note
    assert isinstance(timing, float)
    span = float(times[-1] - times[0])
    if abs(timing) >= span:
        raise ValueError(
            must_be("command_timing latency", f"shorter than the recording ({span!r} s)", timing)
        )
    if timing > 0:
        new_t = np.concatenate([times[:1], times + timing])
        new_d = np.concatenate([data[:1], data], axis=0)
        edge = f"the first {timing!r} s hold the first command (what acted then is unknown)"
    else:
        new_t = np.concatenate([times + timing, times[-1:]])
        new_d = np.concatenate([data, data[-1:]], axis=0)
        edge = f"the last {-timing!r} s hold the last command"
    note = f"command_timing: the commands act {timing!r} s after their stamps; {edge}"
    return TimeSeries(new_t, new_d, control.signal_mapping), note


@dataclass(frozen=True)
class JitterStats:
    """How regular a recording's clock is (all times in seconds).

    Attributes:
      n_steps: Number of time steps.
      median: Median step (the nominal period).
      spread: Standard deviation of the steps shorter than ``1.5 * median`` (the longer
        ones are dropped samples or pauses, which do not count; a jittering clock does).
      std: Plain standard deviation of the steps.
      max_deviation: Largest ``|dt - median|``.
      n_irregular: Steps that differ from ``median`` by more than ``tolerance * median``.
      tolerance: The tolerance used, a fraction of ``median``.
    """

    n_steps: int
    median: float
    spread: float
    std: float
    max_deviation: float
    n_irregular: int
    tolerance: float

    @property
    def jittery(self) -> bool:
        """Whether the spread exceeds the tolerance."""
        return self.spread > self.tolerance * self.median


def jitter_stats(times: np.ndarray, tolerance: float = JITTER_TOLERANCE) -> JitterStats:
    """Statistics of the steps of ``times (N,)`` (s, increasing, ``N >= 2``)."""
    if not (finite_real(tolerance) and tolerance > 0):
        raise ValueError(must_be("jitter_tolerance", "a finite number > 0", tolerance))
    dt = np.diff(np.asarray(times, dtype=np.float64))
    if dt.size == 0:
        raise ValueError(must_be("times", "at least 2 samples", len(times)))
    median = float(np.median(dt))
    dev = np.abs(dt - median)
    with np.errstate(over="ignore", invalid="ignore"):  # a glitched stamp (1e300) is named later
        spread, std = float(dt[dt < _GAP * median].std()), float(dt.std())
    return JitterStats(
        n_steps=int(dt.size),
        median=median,
        spread=spread,
        std=std,
        max_deviation=float(dev.max()),
        n_irregular=int(np.count_nonzero(dev > tolerance * median)),
        tolerance=float(tolerance),
    )


def jitter_message(stats: JitterStats, where: str) -> str:
    """The warning for a jittering clock (empty when ``stats`` is within tolerance)."""
    if not stats.jittery:
        return ""
    ms = 1e3
    return (
        f"{where}: the time stamps jitter: median step {stats.median * ms:.4g} ms, spread "
        f"{stats.spread * ms:.3g} ms ({100 * stats.spread / stats.median:.3g} % of the step, "
        f"tolerance {100 * stats.tolerance:.3g} %), std {stats.std * ms:.3g} ms, max "
        f"deviation {stats.max_deviation * ms:.3g} ms, {stats.n_irregular} of "
        f"{stats.n_steps} steps irregular. Taken as they are they bias the fit (commands "
        "switch and samples are compared at the wrong times). Fix: use the device's own "
        "clock column (time: <column>); if the device sampled at a regular rate and only "
        f"the stamps jitter (a host's receive clock), retime: {stats.median:.6g} (snap the "
        "rows onto a regular grid); if the samples really are irregular, resample: "
        f"{stats.median:.6g} (interpolate onto a regular grid); or raise jitter_tolerance "
        "if this is expected"
    )


def retime(times: np.ndarray, dt: float | None = None) -> np.ndarray:
    """Regular times for rows sampled on a regular clock but stamped with jitter.

    Every row ``i`` is assigned a grid slot ``k_i``, each step ``t_i - t_{i-1}`` counting
    ``round(step / dt)`` slots (a dropped sample leaves a slot empty), then the grid
    ``t_0' + k dt'`` is fitted to the stamps by
    least squares (``dt'`` is ``dt`` refined by the fit when ``dt`` is ``None``: the median
    step is the first guess). The rows keep their order; the stamps' jitter goes.

    Args:
      times: ``(N,)`` stamps (s), increasing.
      dt: The sampling period (s); ``None``: estimated from the stamps.

    Returns:
      ``(N,)`` regular times (s).

    Raises:
      ValueError: Two rows fall on one slot (the jitter exceeds half a period, or ``dt`` is
        too long).
    """
    t = np.asarray(times, dtype=np.float64)
    guess = float(np.median(np.diff(t))) if dt is None else float(dt)
    if not (finite_real(guess) and guess > 0):
        raise ValueError(must_be("retime", "a finite period > 0 (s)", dt))
    steps = np.round(np.diff(t) / guess).astype(np.int64)  # local: no drift builds up
    slots = np.concatenate([[0], np.cumsum(steps)])
    same = np.flatnonzero(steps <= 0)
    if same.size:
        i = int(same[0])
        raise ValueError(
            must_be(
                "retime",
                "a period that gives every row a slot of its own",
                guess,
                f"rows {i + 1} and {i + 2} (stamps {t[i]!r}, {t[i + 1]!r} s) fall on one "
                "slot: the stamps jitter by more than half a period, or the period is wrong",
            )
        )
    if dt is None and slots[-1] > 0:
        slope, offset = np.polyfit(slots.astype(np.float64), t, 1)
    else:
        slope, offset = guess, float(np.mean(t - guess * slots))
    return offset + slope * slots.astype(np.float64)


def resample_recording(
    sensors: TimeSeries, control: TimeSeries | None, dt: float
) -> tuple[TimeSeries, TimeSeries | None]:
    """Sensors (linear interpolation) and controls (zero-order hold) on ``t0 + k dt``.

    The grid spans the sensors' times; the controls are sampled at the last control row at
    or before each grid time (the held command).
    """
    if not (finite_real(dt) and dt > 0):
        raise ValueError(must_be("resample", "a finite step > 0 (s)", dt))
    new_sens = sensors.resample(target_dt=float(dt))
    if control is None:
        return new_sens, None
    held = control.get(new_sens.times, method="zoh", hold=True)[1]
    return new_sens, TimeSeries(new_sens.times, held, control.signal_mapping)


class PeerTimestampWarning(UserWarning):
    """Measured data whose times look one timestep late (the ``mujoco.sysid`` stamping)."""


def _close(a: np.ndarray, b: np.ndarray, dt: float) -> bool:
    tol = 1e-9 * max(1.0, float(np.max(np.abs(b)))) + 1e-6 * dt
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol))


def peer_stamp_pattern(
    sensor_times: np.ndarray,
    control_times: np.ndarray | None,
    initial_time: float | None,
    dt: float,
) -> str | None:
    """Which of the patterns (a)-(c) of the module docstring the times show, or ``None``.

    Args:
      sensor_times: ``(N,)`` measured sample times (s).
      control_times: ``(M,)`` control times (s), or ``None``.
      initial_time: The initial state's time entry (s), or ``None``.
      dt: The model timestep (s).
    """
    s = np.asarray(sensor_times, dtype=np.float64)
    if s.size == 0 or not dt > 0:
        return None
    if control_times is not None:
        c = np.asarray(control_times, dtype=np.float64)
        if s.size == c.size and _close(s, c + dt, dt):
            return "its times are the control times shifted by one timestep"
        if s.size == c.size - 1 and s.size and _close(s, c[1:], dt):
            return "it has one row fewer than the control, each stamped one timestep later"
    if initial_time is not None and _close(s[:1], np.array([initial_time + dt]), dt):
        return "its first sample is one timestep after the initial state"
    return None


def warn_if_peer_stamped(
    sensordata: TimeSeries,
    control: TimeSeries | None,
    initial_time: float | None,
    dt: float,
    where: str = "sensordata",
) -> bool:
    """Warns (:class:`PeerTimestampWarning`) when ``sensordata`` looks stamped one timestep
    late; returns whether it warned."""
    pattern = peer_stamp_pattern(
        sensordata.times, None if control is None else control.times, initial_time, dt
    )
    if pattern is None:
        return False
    warnings.warn(
        f"{where} looks stamped the mujoco.sysid way ({pattern}, dt={dt!r} s): that rollout "
        "reads sensor row k at t_k but stamps it t_k + dt, one timestep late. mjsysid "
        "compares row k with the state at its stamp. If this data came from mujoco.sysid, "
        "shift it back: sensordata = TimeSeries(sensordata.times - dt, sensordata.data, "
        "sensordata.signal_mapping)",
        PeerTimestampWarning,
        stacklevel=3,
    )
    return True
