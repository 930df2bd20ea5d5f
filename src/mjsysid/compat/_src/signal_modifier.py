"""``mujoco.sysid._src.signal_modifier``: the low-level signal functions, computing what the
peer's compute.

Three differ from :mod:`mjsysid.signal_modifier`'s of the same name:

* :func:`apply_delay` holds the first (last) value where ``t − d`` falls before (after) the
  series, where mjsysid's refuses to extrapolate.
* :func:`apply_delayed_ts_window` keeps the times ``t`` of ``ts`` with
  ``t + min_delay >= ts_delayed.times[0]`` and ``t + max_delay <= ts_delayed.times[-1]``
  (the peer's window); mjsysid's keeps ``[p₀ + max(d_max, 0), p₁ + min(d_min, 0)]``, the
  window inside which ``ts_delayed(t − d)`` exists for every delay in range.
* :func:`normalize_residual` divides by ``‖m‖ / √2`` per measured column (the peer's scale,
  which its docstring calls the standard deviation); mjsysid's divides by the column's RMS
  ``‖m‖ / √N``.

The others are mjsysid's own (the same numbers as the peer's).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.signal_ops import (
    apply_bias,
    apply_gain,
    apply_resample_and_delay,
    apply_time_window,
    get_sensor_indices,
    interp_columns,
    parameter_value,
    prepare_sensor_weights,
    weighted_diff,
)
from mjsysid.params.parameter import Parameter

__all__ = [
    "apply_bias",
    "apply_delay",
    "apply_delayed_ts_window",
    "apply_gain",
    "apply_resample_and_delay",
    "apply_time_window",
    "get_sensor_indices",
    "normalize_residual",
    "prepare_sensor_weights",
    "weighted_diff",
]


def apply_delay(ts: TimeSeries, sensor_name: str, delay: Parameter | npt.ArrayLike) -> TimeSeries:
    """Signal ``sensor_name`` becomes ``x(t − d)`` on the same times, ``d = delay.value[0]``
    (s); before the first sample it holds the first value, after the last the last one.
    Other signals are unchanged; ``ts`` is untouched."""
    d = float(parameter_value(delay)[0])
    cols = ts.columns(sensor_name)
    query = np.clip(ts.times - d, ts.times[0], ts.times[-1])
    data = np.array(ts.data, dtype=np.float64)
    data[:, cols] = interp_columns(ts.times, ts.data[:, cols], query)
    return TimeSeries.trusted(ts.times, data, ts.signal_mapping)


def apply_delayed_ts_window(
    ts: TimeSeries, ts_delayed: TimeSeries, min_delay: float, max_delay: float
) -> TimeSeries:
    """The samples of ``ts`` at times ``t`` with ``t + min_delay >= ts_delayed.times[0]``
    and ``t + max_delay <= ts_delayed.times[-1]`` (``mujoco.sysid``'s window).

    Raises:
      ValueError: No sample remains.
    """
    keep = (ts.times + min_delay >= ts_delayed.times[0]) & (
        ts.times + max_delay <= ts_delayed.times[-1]
    )
    if not keep.any():
        raise ValueError(
            f"the delay window (delays in [{min_delay!r}, {max_delay!r}] s) leaves no sample "
            "of the series; narrow the delay bounds"
        )
    return TimeSeries.trusted(ts.times[keep], ts.data[keep], ts.signal_mapping)


def normalize_residual(
    residual: npt.ArrayLike, measured_data: TimeSeries | npt.ArrayLike
) -> np.ndarray:
    """``residual / (‖m_j‖ / √2)`` column by column, ``m`` the measured data: the peer's
    numbers (``(N, D)`` arrays; a measured column of zeros gives ``inf``/``nan`` there and
    here)."""
    m = measured_data.data if isinstance(measured_data, TimeSeries) else measured_data
    scale = np.linalg.norm(np.asarray(m, dtype=np.float64), axis=0) / np.sqrt(2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(residual, dtype=np.float64) / scale
