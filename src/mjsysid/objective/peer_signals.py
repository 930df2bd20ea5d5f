"""The two signal functions whose ``mujoco.sysid`` conventions differ from mjsysid's.

``import mjsysid as sysid`` gives these under the peer's names, so a script written for
``mujoco.sysid`` computes what it computed there; :mod:`mjsysid.signal_modifier` keeps
mjsysid's stricter versions (:mod:`mjsysid.objective.signal_ops`).

* :func:`apply_delay` holds the first (last) value where ``t − d`` falls before (after) the
  series, where mjsysid's refuses to extrapolate.
* :func:`apply_delayed_ts_window` keeps the times ``t`` of ``ts`` with
  ``t + min_delay >= ts_delayed.times[0]`` and ``t + max_delay <= ts_delayed.times[-1]``
  (the peer's window); mjsysid's keeps ``[p₀ + max(d_max, 0), p₁ + min(d_min, 0)]``, the
  window inside which ``ts_delayed(t − d)`` exists for every delay in range.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.signal_ops import _interp_columns, _value_of
from mjsysid.params.parameter import Parameter


def apply_delay(ts: TimeSeries, sensor_name: str, delay: Parameter | npt.ArrayLike) -> TimeSeries:
    """Signal ``sensor_name`` becomes ``x(t − d)`` on the same times, ``d = delay.value[0]``
    (s); before the first sample it holds the first value, after the last the last one.
    Other signals are unchanged; ``ts`` is untouched."""
    d = float(_value_of(delay)[0])
    cols = ts.columns(sensor_name)
    query = np.clip(ts.times - d, ts.times[0], ts.times[-1])
    data = np.array(ts.data, dtype=np.float64)
    data[:, cols] = _interp_columns(ts.times, ts.data[:, cols], query)
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
