"""Recognises measured data stamped the way ``mujoco.sysid``'s rollout stamps it.

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

import numpy as np

from mjsysid.data.timeseries import TimeSeries


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
