"""Interpolation of sampled signals: linear, splines of degree 2, 3 and 5, zero-order hold.

The kernels work on a time grid ``times`` ``(N,)`` [s] (finite, strictly increasing) and
samples ``data`` ``(N, D)``; the query times must already lie in ``[times[0], times[-1]]``
(the :class:`~mjsysid.data.timeseries.TimeSeries` methods check or clamp them first).

Methods (the names of ``mujoco.sysid``'s ``InterpolationMethod``):

* ``"linear"``: piecewise linear, ``(1 - w) x_i + w x_{i+1}``; reproduces the samples bit for
  bit. The fast path (an index map, see :func:`index_map`), also used by the residual code.
* ``"quadratic"``, ``"cubic"``, ``"quintic"``: the interpolating B-spline of degree
  ``k = 2, 3, 5`` through all samples, ``scipy.interpolate.make_interp_spline(times, data,
  k=k)`` (not-a-knot end conditions for odd ``k``; for ``k = 2`` the knots of scipy's default,
  the same spline as ``scipy.interpolate.interp1d(kind="quadratic")``). A spline of degree
  ``k`` reproduces a polynomial of degree ``<= k`` exactly and needs ``k + 1`` samples
  (de Boor, *A Practical Guide to Splines*, 2001, ch. IX and XIII). The peer toolbox raises
  ``NotImplementedError`` for ``"quintic"``; here it is the degree-5 spline.
* ``"zero_order_hold"`` (alias ``"zoh"``): the last sample at or before ``t``; a ``t`` within
  ``tol`` of a sample time counts as that sample.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

import numpy as np
from scipy.interpolate import make_interp_spline

from mjsysid.util.errors import must_be

__all__ = [
    "Interpolation",
    "InterpolationMethod",
    "apply_index_map",
    "hold_rows",
    "index_map",
    "interpolate_rows",
    "method_degree",
]

InterpolationMethod = Literal["linear", "cubic", "quadratic", "quintic", "zero_order_hold", "zoh"]
"""The method names accepted by ``interpolate``/``get``/``resample`` (as in ``mujoco.sysid``)."""


class Interpolation(str, enum.Enum):
    """The interpolation methods as an enum; each member equals its method name."""

    LINEAR = "linear"
    QUADRATIC = "quadratic"
    CUBIC = "cubic"
    QUINTIC = "quintic"
    ZERO_ORDER_HOLD = "zero_order_hold"
    ZOH = "zero_order_hold"  # an alias of ZERO_ORDER_HOLD (same value)


_DEGREE = {"linear": 1, "quadratic": 2, "cubic": 3, "quintic": 5, "zero_order_hold": 0, "zoh": 0}
_CHOICES = "one of 'linear', 'cubic', 'quadratic', 'quintic', 'zero_order_hold', 'zoh'"


def method_degree(method: Any) -> int:
    """Degree of an interpolation method: 0 (zero-order hold), 1, 2, 3 or 5.

    Args:
      method: A name of :data:`InterpolationMethod` or an :class:`Interpolation` member.

    Raises:
      ValueError: An unknown name (the message lists the choices).
      TypeError: Not a string.
    """
    if isinstance(method, Interpolation):
        return _DEGREE[method.value]
    if not isinstance(method, str):
        raise TypeError(must_be("method", f"{_CHOICES} (a string)", method))
    degree = _DEGREE.get(method)
    if degree is None:
        raise ValueError(must_be("method", _CHOICES, method))
    return degree


def index_map(times: np.ndarray, new_times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear-interpolation index map from ``times`` (N,) to ``new_times`` (M,).

    ``new_times`` must already lie in ``[times[0], times[-1]]`` (no check here). Returns
    ``(i0, w)``: rows ``i0`` (M,) and weights ``w`` (M,) in ``[0, 1]`` such that the value at
    ``new_times[m]`` is ``(1 - w[m]) * data[i0[m]] + w[m] * data[i0[m] + 1]``. At a sample time
    the weight is exactly 0 (or exactly 1 at the last sample), so sample values are reproduced
    bit for bit. For a single-sample series ``i0 = 0`` and ``w = 0`` (``i0 + 1`` is then
    clipped by :func:`apply_index_map`).
    """
    n = times.shape[0]
    if n == 1:
        return np.zeros(new_times.shape[0], dtype=np.intp), np.zeros(new_times.shape[0])
    i0 = np.searchsorted(times, new_times, side="right") - 1
    np.clip(i0, 0, n - 2, out=i0)
    t0 = times[i0]
    w = (new_times - t0) / (times[i0 + 1] - t0)
    return i0, w


def apply_index_map(data: np.ndarray, i0: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Applies an index map from :func:`index_map` to ``data`` of shape ``(..., N, D)``.

    Returns ``(..., M, D)``; leading batch axes (for example ``k`` candidates) are kept, so
    one map serves a whole batch of predictions on the same grid.
    """
    n = data.shape[-2]
    i1 = np.minimum(i0 + 1, n - 1)
    wc = w[:, None]
    out = data[..., i0, :]  # fancy indexing copies, so the in-place updates below are safe
    out *= 1.0 - wc
    upper = data[..., i1, :]
    upper *= wc
    out += upper
    return out


def hold_rows(times: np.ndarray, t: np.ndarray, tol: float) -> np.ndarray:
    """Zero-order-hold rows: index of the last sample at or before each ``t`` (M,).

    A ``t`` within ``tol`` [s] below a sample time counts as that sample, so float noise in a
    time grid never picks the previous sample.
    """
    idx = np.searchsorted(times, t + tol, side="right") - 1
    np.clip(idx, 0, times.shape[0] - 1, out=idx)
    return idx


def _spline_values(times: np.ndarray, data: np.ndarray, t: np.ndarray, k: int) -> np.ndarray:
    """The degree-``k`` interpolating spline of ``data`` (N, D) evaluated at ``t`` (M,)."""
    n = times.shape[0]
    if n == 1:
        return np.repeat(data, t.shape[0], axis=0)
    if n <= k:
        name = {2: "quadratic", 3: "cubic", 5: "quintic"}[k]
        raise ValueError(
            f"the series must have at least {k + 1} samples for method {name!r} (a degree-{k} "
            f"spline), got {n}; use method='linear' or a lower degree"
        )
    spline = make_interp_spline(times, data, k=k, axis=0, check_finite=False)
    return np.asarray(spline(t), dtype=np.float64)


def interpolate_rows(
    times: np.ndarray, data: np.ndarray, t: np.ndarray, degree: int, tol: float
) -> np.ndarray:
    """Values of ``data`` (N, D) at ``t`` (M,) by the method of degree ``degree``.

    Args:
      times: ``(N,)`` sample times [s], strictly increasing.
      data: ``(N, D)`` samples.
      t: ``(M,)`` query times [s], inside ``[times[0], times[-1]]``.
      degree: From :func:`method_degree`: 0 zero-order hold, 1 linear, 2/3/5 spline.
      tol: Float-noise tolerance of the zero-order hold [s] (see :func:`hold_rows`).

    Returns:
      ``(M, D)`` new array.
    """
    if degree == 1:
        i0, w = index_map(times, t)
        return apply_index_map(data, i0, w)
    if degree == 0:
        return data[hold_rows(times, t, tol)]
    return _spline_values(times, data, t, degree)
