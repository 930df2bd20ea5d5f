"""Low-level signal functions: delays, gains, biases, windows, weighted differences.

Conventions. A delay ``d`` (s) means the sensor reports at time ``t`` what the system did at
``t − d``: the delayed prediction is ``ȳ_d(t) = ȳ(t − d)``. A gain ``g`` multiplies and a bias
``b`` adds: ``g·ȳ + b``. Everything is linear interpolation on the series' own time grid.

Windows. Comparing ``ȳ(t − d)`` with ``y(t)`` is only possible where ``t − d`` lies inside the
prediction's span ``[p₀, p₁]``. For every delay ``d ∈ [d_min, d_max]`` that holds exactly for

    t ∈ [p₀ + d_max, p₁ + d_min],

so :func:`apply_delayed_ts_window` keeps the measured samples in that interval. The residual
length then does not depend on the delay values, and no sample ever reads an extrapolated
(clamped) prediction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.timeseries import TimeSeries
from mjsysid.params.parameter import Parameter
from mjsysid.util.errors import must_be


def get_sensor_indices(
    model: mujoco.MjModel, sensor_name: str | Sequence[str], sort: bool = False
) -> list[int]:
    """Indices into ``sensordata`` of the named sensor(s), as a list.

    Args:
      model: The compiled model.
      sensor_name: One sensor name or several; indices follow the order given
        (``["af", "hpos"]`` -> ``[2, 0]`` when ``hpos`` is column 0 and ``af`` column 2).
      sort: Sort the indices ascending.

    Raises:
      KeyError: A name that is not a sensor of the model (the known ones are listed).
    """
    names = [sensor_name] if isinstance(sensor_name, str) else list(sensor_name)
    out: list[int] = []
    for name in names:
        i = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
        if i < 0:
            known = [model.sensor(k).name for k in range(model.nsensor)]
            raise KeyError(f"the model has no sensor named {name!r}; known sensors: {known}")
        adr, dim = int(model.sensor_adr[i]), int(model.sensor_dim[i])
        out.extend(range(adr, adr + dim))
    return sorted(out) if sort else out


def parameter_value(param: Parameter | npt.ArrayLike) -> np.ndarray:
    return (
        param.value
        if isinstance(param, Parameter)
        else np.asarray(param, dtype=np.float64).reshape(-1)
    )


def _scaled(ts: TimeSeries, name: str, param: Parameter | npt.ArrayLike, op: str) -> TimeSeries:
    cols = ts.columns(name)
    v = parameter_value(param)
    if v.size not in (1, cols.size):
        raise ValueError(must_be(f"{op} value for {name!r}", f"1 or {cols.size} entries", v))
    data = np.array(ts.data, dtype=np.float64)
    if op == "gain":
        data[:, cols] *= v
    else:
        data[:, cols] += v
    return TimeSeries.trusted(ts.times, data, ts.signal_mapping)


def apply_gain(ts: TimeSeries, sensor_name: str, gain: Parameter | npt.ArrayLike) -> TimeSeries:
    """Multiplies the columns of signal ``sensor_name`` by ``gain.value`` (scalar or per
    column); a new series, ``ts`` is untouched."""
    return _scaled(ts, sensor_name, gain, "gain")


def apply_bias(ts: TimeSeries, sensor_name: str, bias: Parameter | npt.ArrayLike) -> TimeSeries:
    """Adds ``bias.value`` (scalar or per column) to the columns of signal ``sensor_name``;
    a new series."""
    return _scaled(ts, sensor_name, bias, "bias")


def interp_columns(times: np.ndarray, data: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Linear interpolation of every column of ``data`` at ``query`` (inside the span)."""
    i = np.clip(np.searchsorted(times, query, side="right") - 1, 0, max(times.size - 2, 0))
    if times.size == 1:
        return np.repeat(data[:1], query.size, axis=0)
    w = ((query - times[i]) / (times[i + 1] - times[i]))[:, None]
    return cast(np.ndarray, data[i] * (1.0 - w) + data[i + 1] * w)


def check_inside(
    times: np.ndarray,
    query: np.ndarray,
    what: str,
    hint: str = "crop the measured series first with apply_delayed_ts_window",
) -> None:
    span = times[-1] - times[0]
    tol = 1e-9 * max(span, 1.0)
    bad = np.flatnonzero((query < times[0] - tol) | (query > times[-1] + tol))
    if bad.size:
        q = query[bad[0]]
        raise ValueError(
            f"{what} must read times inside the series span [{float(times[0])!r}, "
            f"{float(times[-1])!r}] s, got t={float(q)!r} s; {hint}"
        )


def _query_times(times: npt.ArrayLike, what: str) -> np.ndarray:
    query = np.asarray(times, dtype=np.float64)
    if query.ndim != 1 or query.size == 0 or not np.all(np.isfinite(query)):
        raise ValueError(must_be(what, "a non-empty 1-D array of finite times (s)", times))
    return query


def apply_delay(
    ts: TimeSeries,
    sensor_name: str,
    delay: Parameter | npt.ArrayLike,
    times: npt.ArrayLike | None = None,
) -> TimeSeries:
    """Delays signal ``sensor_name`` by ``d = delay.value[0]`` s.

    Returns the series at ``times`` (default: its own times): signal ``name`` at ``t`` holds
    its value at ``t − d``, every other signal its value at ``t`` (linear interpolation).
    Every ``t − d`` must lie inside the series: on its own times a delay ``d > 0`` has no value
    for the first ``d`` seconds (``d < 0``: the last), so pass the times to compare at, e.g.
    the measured times cropped by :func:`apply_delayed_ts_window` for the delay bounds.
    (``mujoco.sysid``'s function of this name holds the end values instead:
    :mod:`mjsysid.compat` has that one.)
    """
    name = sensor_name
    d = float(parameter_value(delay)[0])
    cols = ts.columns(name)
    query = ts.times if times is None else _query_times(times, "apply_delay: times")
    if times is not None:
        check_inside(ts.times, query, "apply_delay: times")
    check_inside(
        ts.times,
        query - d,
        f"apply_delay({name!r}, delay {d!r} s)",
        "pass times= inside the delay window, e.g. apply_delay(pred, name, d, "
        "times=apply_delayed_ts_window(measured, pred, d_min, d_max).times)",
    )
    if times is None:
        data = np.array(ts.data, dtype=np.float64)
    else:
        data = interp_columns(ts.times, ts.data, query)
    data[:, cols] = interp_columns(ts.times, ts.data[:, cols], query - d)
    return TimeSeries.trusted(query, data, ts.signal_mapping)


def delay_window(ref_times: np.ndarray, min_delay: float, max_delay: float) -> tuple[float, float]:
    """The interval ``[p₀ + d_max, p₁ + d_min]`` of usable measured times (module docstring)."""
    if min_delay > max_delay:
        raise ValueError(f"min_delay must be <= max_delay, got {min_delay!r} > {max_delay!r}")
    return float(ref_times[0] + max(max_delay, 0.0)), float(ref_times[-1] + min(min_delay, 0.0))


def apply_delayed_ts_window(
    ts: TimeSeries, ts_delayed: TimeSeries, min_delay: float, max_delay: float
) -> TimeSeries:
    """Keeps the samples of ``ts`` at which ``ts_delayed`` can be read with any delay in range.

    The window is ``[p₀ + max(d_max, 0), p₁ + min(d_min, 0)]`` (module docstring), at least 2
    samples. (``mujoco.sysid``'s function of this name keeps ``t + d_min >= p₀`` and
    ``t + d_max <= p₁`` instead: :mod:`mjsysid.compat` has that one.)

    Args:
      ts: Usually the measured series.
      ts_delayed: Usually the prediction (its span bounds what can be read).
      min_delay, max_delay: Delay bounds (s); 0 is always included.

    Raises:
      ValueError: No sample remains (the delays are too large for the recording).
    """
    lo, hi = delay_window(ts_delayed.times, min_delay, max_delay)
    tol = 1e-9 * max(float(ts_delayed.times[-1] - ts_delayed.times[0]), 1.0)
    keep = (ts.times >= lo - tol) & (ts.times <= hi + tol)
    if keep.sum() < 2:
        raise ValueError(
            f"the delay window [{lo!r}, {hi!r}] s (delays in [{min_delay!r}, {max_delay!r}] s) "
            f"leaves {int(keep.sum())} samples of the series; narrow the delay bounds"
        )
    if keep.all():
        return ts
    return TimeSeries.trusted(ts.times[keep], ts.data[keep], ts.signal_mapping)


def apply_resample_and_delay(
    ts: TimeSeries,
    times: npt.ArrayLike,
    default_delay: float = 0.0,
    sensor_delays: Mapping[str, float] | None = None,
    predicted_data: bool = True,
) -> TimeSeries:
    """Resamples ``ts`` at ``times`` with a delay per signal.

    Signal ``s`` at time ``t`` gets ``ts_s(t − d_s)`` with ``d_s = sensor_delays.get(s,
    default_delay)``; with ``predicted_data=False`` (``ts`` is the measured series, shifted
    back onto the prediction's clock) it gets ``ts_s(t + d_s)``. Every sampled time must fall
    inside ``ts``'s span.
    """
    sign = 1.0 if predicted_data else -1.0
    query = _query_times(times, "apply_resample_and_delay: times")
    delays = dict(sensor_delays or {})
    unknown = sorted(set(delays) - set(ts.names))
    if unknown:
        raise KeyError(f"sensor_delays names {unknown} are not signals of the series {ts.names}")
    out = np.empty((query.size, ts.data.shape[1]))
    groups: dict[float, list[int]] = {}
    for name in ts.names:
        d = float(delays.get(name, default_delay))
        groups.setdefault(d, []).extend(ts.columns(name).tolist())
    mapped = {c for cs in groups.values() for c in cs}
    rest = [c for c in range(ts.data.shape[1]) if c not in mapped]
    if rest:
        groups.setdefault(float(default_delay), []).extend(rest)
    for d, cols in groups.items():
        q = query - sign * d
        check_inside(ts.times, q, f"apply_resample_and_delay (delay {d!r} s)")
        out[:, cols] = interp_columns(ts.times, ts.data[:, cols], q)
    return TimeSeries.trusted(query, out, ts.signal_mapping)


def _column_weights(
    meas: Any, model: mujoco.MjModel | None, weights: Mapping[str, Any] | None, ncol: int
) -> np.ndarray:
    w = np.ones(ncol)
    for name, value in (weights or {}).items():
        cols: np.ndarray | list[int]
        if isinstance(meas, TimeSeries) and meas.signal_mapping is not None:
            cols = meas.columns(name)
        elif model is not None and ncol == model.nsensordata:
            cols = get_sensor_indices(model, name)
        else:
            raise ValueError(
                f"weights[{name!r}] needs column names: pass TimeSeries with a signal mapping, or "
                f"arrays holding all {getattr(model, 'nsensordata', '?')} model sensors, got "
                f"{ncol} unnamed columns"
            )
        w[cols] *= np.asarray(value, dtype=np.float64)
    return w


def prepare_sensor_weights(
    sensor_weights: Mapping[str, Any] | None, n_sensors: int, model: mujoco.MjModel
) -> np.ndarray:
    """``(n_sensors,)`` per-column weights of ``sensordata`` laid out as the model's sensors:
    1 everywhere, the columns of each named sensor times its weight (``{"hvel": 2}`` ->
    ``[1, 2, 1]`` for sensors hpos, hvel, af)."""
    return _column_weights(None, model, sensor_weights, int(n_sensors))


def weighted_diff(
    predicted_data: TimeSeries | npt.ArrayLike,
    measured_data: TimeSeries | npt.ArrayLike,
    model: mujoco.MjModel | None = None,
    sensor_weights: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """``(measured − predicted) · w`` column-wise, shape ``(N, D)``.

    Args:
      predicted_data, measured_data: Series (or ``(N, D)`` arrays) on the same times.
      model: Needed to name columns of plain arrays (all sensors, model order).
      sensor_weights: ``{signal_name: weight}`` (scalar or per column).
    """
    predicted, measured, weights = predicted_data, measured_data, sensor_weights
    p = (
        predicted.data
        if isinstance(predicted, TimeSeries)
        else np.asarray(predicted, dtype=np.float64)
    )
    m = (
        measured.data
        if isinstance(measured, TimeSeries)
        else np.asarray(measured, dtype=np.float64)
    )
    if p.shape != m.shape:
        raise ValueError(
            must_be("weighted_diff: predicted", f"the measured shape {m.shape}", f"shape {p.shape}")
        )
    return cast(
        np.ndarray,
        (m - p) * _column_weights(measured, model, weights, m.shape[-1] if m.ndim > 1 else 1),
    )


def signal_rms(measured: TimeSeries, label: str = "sensordata") -> np.ndarray:
    """RMS of each measured *signal* (over all its columns), repeated per column, ``(D,)``.

    Normalising a multi-dimensional sensor by one RMS keeps its axes in the same units and
    lets a component that is legitimately always zero (``y`` of a planar arm's tip) be fitted.
    Columns outside the mapping are normalised on their own.

    Raises:
      ValueError: A whole signal is zero (it carries no information to normalise by).
    """
    data = measured.data
    rms = np.sqrt(np.mean(np.square(data), axis=0))
    for name in measured.names:
        cols = measured.columns(name)
        rms[cols] = np.sqrt(np.mean(np.square(data[:, cols])))
    zero = np.flatnonzero(rms == 0)
    if zero.size:
        col = int(zero[0])
        owner = next((n for n in measured.names if col in measured.columns(n)), f"column {col}")
        raise ValueError(
            f"{label}: measured signal {owner!r} must not be all zeros to be RMS-normalised, got "
            "only zeros; drop it (enabled_observations / enable_sensors), or pass normalize=False"
        )
    return cast(np.ndarray, rms)


def column_rms(measured: TimeSeries, label: str = "sensordata") -> np.ndarray:
    """Per-column normalisation scale, ``(D,)``: each column's own RMS.

    Gives small but informative components (the tilt entries of an orientation quaternion)
    as much weight as large ones, which can speed up convergence, but also amplifies columns
    that hold little more than noise. A column below ``1e-3`` of its signal's RMS (an
    always-zero axis) falls back to the signal's RMS (:func:`signal_rms`).
    """
    signal = signal_rms(measured, label)
    column = np.sqrt(np.mean(np.square(measured.data), axis=0))
    return np.where(column >= 1e-3 * signal, column, signal)


def normalize_residual(
    residual: npt.ArrayLike, measured_data: TimeSeries | npt.ArrayLike
) -> np.ndarray:
    """Divides each residual column by the RMS of that measured column,
    ``sqrt(Σ_k m_k² / N)`` (the mean not subtracted: a signal's size, not its spread).

    Args:
      residual: ``(N, D)`` residual.
      measured_data: ``(N, D)`` measured series or array.

    Raises:
      ValueError: No rows, or a measured column of zeros (its RMS is 0).
    """
    r = np.asarray(residual, dtype=np.float64)
    m = (
        measured_data.data
        if isinstance(measured_data, TimeSeries)
        else np.asarray(measured_data, dtype=np.float64)
    )
    if m.shape[0] < 1:
        raise ValueError(must_be("normalize_residual: measured_data", "at least 1 row", 0))
    rms = np.sqrt(np.mean(np.square(m), axis=0))
    zero = np.flatnonzero(rms == 0)
    if zero.size:
        raise ValueError(
            f"normalize_residual: measured column {int(zero[0])} must not be all zeros (RMS 0 "
            "would divide by zero); drop it or use an explicit weight instead"
        )
    return cast(np.ndarray, r / rms)


def apply_time_window(ts: TimeSeries, min_t: float, max_t: float) -> TimeSeries:
    """The samples of ``ts`` with ``min_t <= t <= max_t``, a new series.

    Raises:
      ValueError: No sample lies in the interval.
    """
    keep = (ts.times >= min_t) & (ts.times <= max_t)
    if not keep.any():
        raise ValueError(
            must_be(
                "apply_time_window: [min_t, max_t]",
                f"an interval holding samples of the series span {ts.span}",
                (min_t, max_t),
            )
        )
    return TimeSeries.trusted(ts.times[keep], ts.data[keep], ts.signal_mapping)
