"""Validation of a :class:`~mjsysid.data.timeseries.TimeSeries`: arrays, mappings, query times.

Messages follow mjsysid's ``"X must be E, got G"`` form and carry the key words of
``mujoco.sysid``'s messages (``Empty``, ``1D``, ``Length``) so that code matching either
toolbox's errors keeps working.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from mjsysid.data.signals import SignalType
from mjsysid.data.timeseries_files import SignalMapping
from mjsysid.util.errors import first_bad_index, must_be

REL_TIME_TOL = 1e-12
"""Times within ``REL_TIME_TOL * max(1, |t0|, |t_end|)`` of the span or a sample count as on it."""


class ResampleArgumentError(TypeError, ValueError):
    """``resample`` got neither (or both) of ``new_times`` and ``target_dt``.

    Both a ``TypeError`` (mjsysid's contract: a wrong call) and a ``ValueError`` (what
    ``mujoco.sysid`` raises), so handlers written for either catch it.
    """


def as_float_array(name: str, value: Any) -> np.ndarray:
    """A float64 copy of ``value``; refuses bool, complex, strings and objects."""
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged nested lists
        raise ValueError(must_be(name, "a rectangular array (rows of one length)", value)) from None
    if arr.dtype.kind not in "iuf":
        raise TypeError(must_be(name, "a real numeric array", arr))
    return np.array(arr, dtype=np.float64, copy=True)


def check_times(name: str, times: np.ndarray) -> None:
    """Checks that ``times`` (float64) is 1-D, non-empty, finite and strictly increasing."""
    if times.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array, got shape {times.shape}: a TimeSeries needs 1D "
            f"{name}, one per sample"
        )
    if times.shape[0] == 0:
        raise ValueError(
            f"{name} must have at least one sample, got 0 (Empty arrays are not allowed in "
            "TimeSeries)"
        )
    bad = ~np.isfinite(times)
    if bad.any():
        i = first_bad_index(bad)
        raise ValueError(f"{name} must be finite, got {times[i]} at index {i}")
    if times.shape[0] > 1:
        step = np.diff(times)
        bad = step <= 0.0
        if bad.any():
            i = first_bad_index(bad) + 1
            raise ValueError(
                f"{name} must be strictly increasing, got {name}[{i}]={float(times[i])!r} <= "
                f"{name}[{i - 1}]={float(times[i - 1])!r}"
            )


def validated_arrays(times: Any, data: Any) -> tuple[np.ndarray, np.ndarray]:
    """Read-only float64 copies of ``times`` (N,) and ``data`` (N,) or (N, D), fully checked.

    1-D ``data`` stays 1-D (one signal; see :func:`as_2d` for the ``(N, 1)`` view).
    """
    t = as_float_array("times", times)
    check_times("times", t)
    d = as_float_array("data", data)
    if d.ndim not in (1, 2):
        raise ValueError(f"data must be a 1-D (N,) or 2-D (N, D) array, got shape {d.shape}")
    if d.shape[0] != t.shape[0]:
        raise ValueError(
            f"times and data must have the same length, got {t.shape[0]} and {d.shape[0]} "
            f"(Length of times ({t.shape[0]}) and data ({d.shape[0]}) must match)"
        )
    bad = ~np.isfinite(d)
    if bad.any():
        row, col = divmod(first_bad_index(bad), 1 if d.ndim == 1 else d.shape[1])
        value = d[row] if d.ndim == 1 else d[row, col]
        raise ValueError(f"data must be finite, got {value} at row {row}, column {col}")
    t.flags.writeable = False
    d.flags.writeable = False
    return t, d


def as_2d(data: np.ndarray) -> np.ndarray:
    """``data`` as ``(N, D)``: 1-D ``(N,)`` data becomes a one-column view ``(N, 1)``."""
    return data[:, None] if data.ndim == 1 else data


def width(data: np.ndarray) -> int:
    """Number of columns D of ``(N,)`` (1) or ``(N, D)`` data."""
    return 1 if data.ndim == 1 else int(data.shape[1])


def _mapping_entry(name: Any, entry: Any, dim: int) -> tuple[SignalType, np.ndarray]:
    """One checked ``(SignalType, read-only int indices)`` entry of a signal mapping."""
    if not isinstance(name, str) or not name:
        raise TypeError(must_be("signal_mapping keys", "non-empty strings", name))
    what = f"signal_mapping[{name!r}]"
    if not isinstance(entry, (tuple, list)) or len(entry) != 2:
        raise TypeError(must_be(what, "a (SignalType, indices) pair", entry))
    kind, idx = entry
    if not isinstance(kind, SignalType):
        raise TypeError(
            must_be(f"{what} type", f"a SignalType ({', '.join(s.name for s in SignalType)})", kind)
        )
    arr = np.asarray(idx)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(must_be(f"{what} indices", "a non-empty 1-D array", arr))
    if arr.dtype.kind not in "iu":
        raise TypeError(must_be(f"{what} indices", "integers", arr))
    arr = np.array(arr, dtype=np.intp, copy=True)
    bad = (arr < 0) | (arr >= dim)
    if bad.any():
        j = first_bad_index(bad)
        raise ValueError(
            f"{what} indices must be data columns in [0, {dim}), got {int(arr[j])} at position {j}"
        )
    arr.flags.writeable = False
    return kind, arr


def validated_mapping(mapping: Any, dim: int) -> SignalMapping:
    """A fresh mapping with read-only int index arrays; checks range and column ownership.

    Index entries may be arrays, lists or single ints (each becomes a 1-D int array).
    """
    if not isinstance(mapping, Mapping):
        raise TypeError(must_be("signal_mapping", "a dict {name: (SignalType, indices)}", mapping))
    out: SignalMapping = {}
    owner: dict[int, str] = {}
    for name, entry in mapping.items():
        kind, arr = _mapping_entry(name, entry, dim)
        for col in arr.tolist():
            if col in owner:
                other = owner[col]
                who = f"twice by {name!r}" if other == name else f"by {other!r} and {name!r}"
                raise ValueError(
                    f"signal_mapping column {col} must belong to one signal only, got claimed {who}"
                )
            owner[col] = name
        out[name] = (kind, arr)
    return out


def uniform_grid(t0: float, t1: float, target_dt: Any) -> np.ndarray:
    """``t0 + k * target_dt`` up to at most ``t1`` [s] (the grid of ``resample(target_dt=)``).

    ``mujoco.sysid`` uses ``linspace(t0, t1, ceil((t1 - t0) / dt) + 1)`` instead, which keeps
    ``t1`` but whose step is not ``dt`` (0.1333 s for a 0.4 s span at ``dt = 0.15``); here the
    step is the one asked for.
    """
    dt = float(target_dt) if isinstance(target_dt, (int, float, np.number)) else math.nan
    if isinstance(target_dt, bool) or not (math.isfinite(dt) and dt > 0):
        raise ValueError(must_be("target_dt", "a finite positive number", target_dt))
    steps = math.floor((t1 - t0) / dt + 1e-9)
    grid = t0 + dt * np.arange(steps + 1, dtype=np.float64)
    if grid[-1] > t1:  # float noise only: the 1e-9 slack above is far below dt
        grid[-1] = t1
    if grid.shape[0] > 1 and not np.all(np.diff(grid) > 0):
        raise ValueError(must_be("target_dt", f"resolvable at times near {t1!r}", target_dt))
    return grid


def resample_grid(times: np.ndarray, new_times: Any, target_dt: Any) -> np.ndarray:
    """The grid of ``resample``: ``new_times`` checked, or the uniform grid of ``target_dt``.

    Raises:
      ResampleArgumentError: Neither or both given.
      ValueError: Bad ``new_times`` or ``target_dt``.
    """
    if (new_times is None) == (target_dt is None):
        raise ResampleArgumentError(
            "resample needs exactly one of new_times or target_dt, got "
            + ("neither" if new_times is None else "both")
        )
    if target_dt is not None:
        return uniform_grid(float(times[0]), float(times[-1]), target_dt)
    grid = as_float_array("new_times", new_times)
    check_times("new_times", grid)
    return grid


def time_tol(times: np.ndarray) -> float:
    """The float-noise tolerance [s] of a series with these ``times`` (see REL_TIME_TOL)."""
    return REL_TIME_TOL * max(1.0, abs(float(times[0])), abs(float(times[-1])))


def query_times(name: str, t: Any) -> np.ndarray:
    """``t`` as a float64 scalar (0-D) or 1-D array."""
    arr = as_float_array(name, t)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {arr.shape}")
    return arr


def in_span(times: np.ndarray, name: str, t: np.ndarray, hold: bool) -> np.ndarray:
    """``t`` checked finite and inside the span of ``times`` (or clipped to it when ``hold``)."""
    bad = ~np.isfinite(t)
    if bad.any():
        i = first_bad_index(bad)
        where = "" if t.ndim == 0 else f"[{i}]"
        raise ValueError(f"{name} must be finite, got {name}{where}={float(t.ravel()[i])!r}")
    t0, t1 = times[0], times[-1]
    if not hold:
        tol = time_tol(times)
        bad = (t < t0 - tol) | (t > t1 + tol)
        if bad.any():
            i = first_bad_index(bad)
            where = "" if t.ndim == 0 else f"[{i}]"
            raise ValueError(
                f"{name} must lie within the series span [{float(t0)!r}, {float(t1)!r}], got "
                f"{name}{where}={float(t.ravel()[i])!r}; no extrapolation is done (trim the "
                "times, or pass hold=True to hold the end values)"
            )
    return np.clip(t, t0, t1)


def check_duration(name: str, value: Any) -> float:
    """``value`` as a finite float ``>= 0`` [s]."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.number))
        or not (math.isfinite(float(value)) and float(value) >= 0)
    ):
        raise ValueError(must_be(name, "a finite number >= 0 (seconds)", value))
    return float(value)
