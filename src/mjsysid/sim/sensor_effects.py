"""Simulated sensor effects: what sensors with a delay, a gain and a bias report.

The forward model of a fit's ``sensor_delay``, ``sensor_gain`` and ``sensor_bias``
parameters, used by ``mjsysid simulate`` to make recordings with known effects.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.util.errors import did_you_mean, must_be

SIGNAL_EFFECTS = ("sensor_delay", "sensor_gain", "sensor_bias")


def recorded_sensor_names(model: mujoco.MjModel) -> list[str]:
    """The column name of every model sensor, as :func:`write_recording` writes it
    (``sensor<i>`` for an unnamed sensor)."""
    return [model.sensor(i).name or f"sensor{i}" for i in range(model.nsensor)]


def apply_sensor_effects(
    model: mujoco.MjModel,
    times: npt.ArrayLike,
    sensordata: npt.ArrayLike,
    effects: Sequence[tuple[str, str, npt.ArrayLike]],
) -> tuple[np.ndarray, dict[str, float]]:
    """What sensors with a delay, a gain and a bias report: the forward model of a fit's
    ``sensor_delay``, ``sensor_gain`` and ``sensor_bias`` parameters.

    The convention of :class:`mjsysid.SignalTransform` (gains and biases applied to the
    prediction, ``apply_to: predicted``): a sensor ``s`` reports at time ``t``

        ``y_s(t) = g_s · x_s(t − d_s) + b_s``

    with ``x_s`` its true value, read by linear interpolation between samples; several gains
    (biases) matching one sensor multiply (add up) in the order given. The recording has no
    value before its first or after its last sample, so for ``t − d_s`` outside
    ``[times[0], times[-1]]`` the first (last) true value is repeated: the first ``d_s``
    seconds of a delayed sensor hold its initial reading. A fit whose delay bounds include
    ``d_s`` never compares those samples (see :mod:`mjsysid.signal_modifier`).

    Args:
      model: The model whose sensors ``sensordata`` holds.
      times: ``(N,)`` strictly increasing sample times (s).
      sensordata: ``(N, nsensordata)`` true sensor values.
      effects: ``(kind, pattern, value)`` with kind one of :data:`SIGNAL_EFFECTS`, an
        :mod:`fnmatch` pattern over :func:`recorded_sensor_names` and the value: one number
        (delay in s; gain; bias in sensor units) or, for a gain or a bias, one per column of
        every matched sensor.

    Returns:
      ``(reported, delays)``: the ``(N, nsensordata)`` reported values and
      ``{sensor: delay}`` of every delayed sensor.

    Raises:
      ValueError: An unknown kind, a pattern matching no sensor, a value of the wrong size or
        not finite, a sensor delayed twice, or a delay not shorter than the recording.
    """
    t = np.asarray(times, dtype=np.float64).reshape(-1)
    data = np.asarray(sensordata, dtype=np.float64)
    if data.shape != (t.size, model.nsensordata):
        raise ValueError(
            must_be("sensordata", f"shape ({t.size}, {model.nsensordata})", data.shape)
        )
    names = recorded_sensor_names(model)
    span = float(t[-1] - t[0]) if t.size else 0.0
    delays: dict[str, float] = {}
    scales: list[tuple[bool, str, np.ndarray]] = []
    for kind, pattern, raw in effects:
        what, matched, value = _checked_effect(model, names, kind, pattern, raw)
        if kind == "sensor_delay":
            _add_delay(delays, what, matched, float(value[0]), span)
        else:
            scales.extend((kind == "sensor_gain", n, value) for n in matched)
    return _reported(model, names, t, data, delays, scales), delays


def _reported(
    model: mujoco.MjModel,
    names: list[str],
    t: np.ndarray,
    data: np.ndarray,
    delays: dict[str, float],
    scales: list[tuple[bool, str, np.ndarray]],
) -> np.ndarray:
    """``data`` delayed, then scaled by every gain, then offset by every bias."""
    out = data.copy()
    for n, d in delays.items():
        i = names.index(n)
        adr = int(model.sensor_adr[i])
        for c in range(adr, adr + int(model.sensor_dim[i])):
            out[:, c] = np.interp(t - d, t, data[:, c])
    for is_gain, n, value in [s for s in scales if s[0]] + [s for s in scales if not s[0]]:
        i = names.index(n)
        adr = int(model.sensor_adr[i])
        cols = slice(adr, adr + int(model.sensor_dim[i]))
        if is_gain:
            out[:, cols] *= value
        else:
            out[:, cols] += value
    return out


def _checked_effect(
    model: mujoco.MjModel, names: list[str], kind: str, pattern: str, raw: npt.ArrayLike
) -> tuple[str, list[str], np.ndarray]:
    """``(what, matched sensors, value)`` of one effect, its kind, pattern and size checked."""
    if kind not in SIGNAL_EFFECTS:
        raise ValueError(must_be("effect kind", f"one of {list(SIGNAL_EFFECTS)}", kind))
    what = f"{kind}:{pattern}"
    matched = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if not matched:
        raise ValueError(
            f"{what}: the pattern must match at least one sensor, got none; sensors: {names}"
            f"{did_you_mean(pattern, names)}"
        )
    value = np.asarray(raw, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(value)):
        raise ValueError(must_be(f"{what} value", "finite", value))
    for n in matched:
        width = int(model.sensor_dim[names.index(n)])
        sizes = (1,) if kind == "sensor_delay" else (1, width)
        if value.size not in sizes:
            want = "one number" if sizes == (1,) else f"1 or {width} numbers (for {n!r})"
            raise ValueError(must_be(f"{what} value", want, value))
    return what, matched, value


def _add_delay(
    delays: dict[str, float], what: str, matched: list[str], d: float, span: float
) -> None:
    """Records delay ``d`` [s] of the ``matched`` sensors (each delayed once, ``|d| < span``)."""
    if not abs(d) < span:
        raise ValueError(
            must_be(f"{what} value", f"a delay shorter than the recording ({span:g} s)", d)
        )
    twice = [n for n in matched if n in delays]
    if twice:
        raise ValueError(f"{what}: sensors {twice} must be delayed once, got a second delay")
    delays.update({n: d for n in matched})
