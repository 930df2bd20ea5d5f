"""Time series of recorded or predicted signals, labelled with what each column holds.

A :class:`TimeSeries` is a frozen pair of arrays, ``times`` of shape ``(N,)`` in seconds and
``data`` of shape ``(N, D)``, plus an optional ``signal_mapping``.

Columns and the signal mapping
    ``signal_mapping`` maps a signal name to ``(SignalType, indices)``. ``indices`` are **column
    indices into** ``data`` (an int array, one entry per column the signal occupies), not
    indices into the model. A signal may occupy several columns (a 3-D ``framepos`` sensor, the
    7 qpos entries of a free joint); no column belongs to two signals; columns that no signal
    claims are allowed. The factories (:meth:`TimeSeries.from_names`,
    :meth:`TimeSeries.from_control_names`, :meth:`TimeSeries.from_custom_map`) lay the signals
    out side by side in the order given, each with its natural width.

    Where a signal comes from in a simulation is given by :func:`signal_source_indices`:
    ``MjSensor`` -> ``sensordata``, ``MjStateQPos`` -> ``qpos``, ``MjStateQVel`` -> ``qvel``,
    ``MjStateAct`` -> ``act``, ``MjCtrl`` -> ``ctrl``; ``CustomObs`` has no model source.

    Canonical names: a sensor keeps its name; a joint state is ``"<joint>_qpos"`` /
    ``"<joint>_qvel"``; an actuator's activation is ``"<actuator>_act"``; a control is the
    actuator's name.

Times
    ``times`` are finite and strictly increasing (checked at construction). Nothing assumes a
    uniform step; :meth:`TimeSeries.dt_statistics` reports how uniform it is. A series is
    defined on its *span* ``[times[0], times[-1]]``: :meth:`~TimeSeries.resample`,
    :meth:`~TimeSeries.interpolate` and :meth:`~TimeSeries.get` refuse times outside the span
    with a ``ValueError`` rather than clamping silently (``hold=True`` asks for the
    end-value hold explicitly). Times within ``1e-12 * max(1, |times[0]|, |times[-1]|)`` of
    the span or of a sample count as on it, so float noise in a time grid is harmless.
    ``remove_from_beginning`` drops samples but never shifts the time axis.

Immutability
    The constructor stores read-only float64 copies of ``times`` and ``data``; every method
    returns a new series. ``signal_mapping`` is a plain ``dict`` whose index arrays are
    read-only; treat the dict as read-only too (derived series may share it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.signals import (
    SignalType,
    _check_model,
    _find,
    _names,
    _preview,
    _resolve_plain,
    _SignalKeyError,
    _unknown,
    _width,
    resolve_signal_name,
    signal_source_indices,
)
from mjsysid.data.timeseries_files import (
    TIMESERIES_SCHEMA_VERSION as TIMESERIES_SCHEMA_VERSION,
)
from mjsysid.data.timeseries_files import (
    SignalMapping,
    load_series_npz,
    save_series_npz,
)
from mjsysid.util.errors import first_bad_index, must_be

__all__ = [
    "DtStatistics",
    "SignalType",
    "TimeSeries",
    "resolve_signal_name",
    "signal_source_indices",
]


_REL_TIME_TOL = 1e-12


@dataclasses.dataclass(frozen=True)
class DtStatistics:
    """Statistics of the time steps ``np.diff(times)`` of a series, in seconds.

    Attributes:
      mean: Mean step.
      std: Standard deviation of the steps (population, ``ddof=0``).
      min: Smallest step.
      max: Largest step.
      median: Median step (the nominal sampling period of a mostly regular recording).
      n_irregular: Number of steps that differ from ``median`` by more than 1 % of ``median``
        (dropped samples, jitter, pauses). 0 for a uniform grid.
    """

    mean: float
    std: float
    min: float
    max: float
    median: float
    n_irregular: int


# --------------------------------------------------------------------------------------------
# Array validation


def _as_float_array(name: str, value: Any) -> np.ndarray:
    """A float64 copy of ``value``; refuses bool, complex, strings and objects."""
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged nested lists
        raise ValueError(must_be(name, "a rectangular array (rows of one length)", value)) from None
    if arr.dtype.kind not in "iuf":
        raise TypeError(must_be(name, "a real numeric array", arr))
    return np.array(arr, dtype=np.float64, copy=True)


def _check_times(name: str, times: np.ndarray) -> None:
    """Checks that ``times`` (1-D float64) is non-empty, finite and strictly increasing."""
    if times.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {times.shape}")
    if times.shape[0] == 0:
        raise ValueError(f"{name} must have at least one sample, got 0")
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


def _validated_arrays(times: Any, data: Any) -> tuple[np.ndarray, np.ndarray]:
    """Read-only float64 copies of ``times`` (N,) and ``data`` (N, D), fully checked."""
    t = _as_float_array("times", times)
    _check_times("times", t)
    d = _as_float_array("data", data)
    if d.ndim == 1:
        d = d.reshape(-1, 1)
    if d.ndim != 2:
        raise ValueError(f"data must be a 1-D (N,) or 2-D (N, D) array, got shape {d.shape}")
    if d.shape[0] != t.shape[0]:
        raise ValueError(
            f"times and data must have the same length, got {t.shape[0]} and {d.shape[0]}"
        )
    bad = ~np.isfinite(d)
    if bad.any():
        row, col = divmod(first_bad_index(bad), d.shape[1])
        raise ValueError(f"data must be finite, got {d[row, col]} at row {row}, column {col}")
    t.flags.writeable = False
    d.flags.writeable = False
    return t, d


def _validated_mapping(mapping: Any, dim: int) -> SignalMapping:
    """A fresh mapping with read-only int index arrays; checks range and column ownership."""
    if not isinstance(mapping, Mapping):
        raise TypeError(must_be("signal_mapping", "a dict {name: (SignalType, indices)}", mapping))
    out: SignalMapping = {}
    owner: dict[int, str] = {}
    for name, entry in mapping.items():
        if not isinstance(name, str) or not name:
            raise TypeError(must_be("signal_mapping keys", "non-empty strings", name))
        what = f"signal_mapping[{name!r}]"
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise TypeError(must_be(what, "a (SignalType, indices) pair", entry))
        kind, idx = entry
        if not isinstance(kind, SignalType):
            raise TypeError(
                must_be(
                    f"{what} type",
                    f"a SignalType ({', '.join(s.name for s in SignalType)})",
                    kind,
                )
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
                f"{what} indices must be data columns in [0, {dim}), got {int(arr[j])} at "
                f"position {j}"
            )
        for col in arr.tolist():
            if col in owner:
                other = owner[col]
                who = f"twice by {name!r}" if other == name else f"by {other!r} and {name!r}"
                raise ValueError(
                    f"signal_mapping column {col} must belong to one signal only, got claimed {who}"
                )
            owner[col] = name
        arr.flags.writeable = False
        out[name] = (kind, arr)
    return out


def _consecutive_mapping(layout: Sequence[tuple[str, SignalType, int]]) -> SignalMapping:
    """Mapping that lays ``(name, type, width)`` signals out side by side from column 0."""
    out: SignalMapping = {}
    start = 0
    for name, kind, width in layout:
        idx = np.arange(start, start + width, dtype=np.intp)
        idx.flags.writeable = False
        out[name] = (kind, idx)
        start += width
    return out


def _check_layout_width(data: np.ndarray, layout: Sequence[tuple[str, SignalType, int]]) -> None:
    total = sum(w for _, _, w in layout)
    if data.shape[1] != total:
        parts = [f"{n}:{w}" for n, _, w in layout[:12]]
        if len(layout) > 12:
            parts.append(f"... {len(layout) - 12} more")
        raise ValueError(
            f"data must have {total} columns ({', '.join(parts)}), got {data.shape[1]}"
        )


# --------------------------------------------------------------------------------------------
# Interpolation kernels (shared with the residual code: precompute the map once, apply often)


def _index_map(times: np.ndarray, new_times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear-interpolation index map from ``times`` (N,) to ``new_times`` (M,).

    ``new_times`` must already lie in ``[times[0], times[-1]]`` (no check here). Returns
    ``(i0, w)``: rows ``i0`` (M,) and weights ``w`` (M,) in ``[0, 1]`` such that the value at
    ``new_times[m]`` is ``(1 - w[m]) * data[i0[m]] + w[m] * data[i0[m] + 1]``. At a sample time
    the weight is exactly 0 (or exactly 1 at the last sample), so sample values are reproduced
    bit for bit. For a single-sample series ``i0 = 0`` and ``w = 0`` (``i0 + 1`` is then
    clipped by :func:`_apply_index_map`).
    """
    n = times.shape[0]
    if n == 1:
        return np.zeros(new_times.shape[0], dtype=np.intp), np.zeros(new_times.shape[0])
    i0 = np.searchsorted(times, new_times, side="right") - 1
    np.clip(i0, 0, n - 2, out=i0)
    t0 = times[i0]
    w = (new_times - t0) / (times[i0 + 1] - t0)
    return i0, w


def _apply_index_map(data: np.ndarray, i0: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Applies an index map from :func:`_index_map` to ``data`` of shape ``(..., N, D)``.

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


# --------------------------------------------------------------------------------------------
# Model name resolution


def _unnamed_error(what: str, i: int, detail: str, arg: str) -> ValueError:
    return ValueError(
        f"{what} {i}{detail} must have a name to be mapped by default, got an unnamed one; "
        f"name every {what} in the MJCF or pass {arg}=[...] explicitly"
    )


def _model_layout(
    model: mujoco.MjModel,
    names: Iterable[str | tuple[str, SignalType]],
    allowed: tuple[SignalType, ...],
    plain_kind: SignalType | None,
) -> list[tuple[str, SignalType, int]]:
    """``(canonical name, type, width)`` of each requested signal, in order."""
    if isinstance(names, str):
        names = [names]
    layout: list[tuple[str, SignalType, int]] = []
    seen: dict[str, Any] = {}
    for item in names:
        if isinstance(item, str):
            if plain_kind is None:
                canonical, kind, oid = _resolve_plain(model, item)
            else:
                kind = plain_kind
                canonical, oid = _find(model, item, kind)
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            name, kind = item
            if not isinstance(kind, SignalType):
                raise TypeError(must_be(f"signal type of {name!r}", "a SignalType", kind))
            if kind not in allowed:
                raise ValueError(
                    must_be(
                        f"signal type of {name!r}",
                        f"one of {[k.name for k in allowed]}",
                        kind.name,
                        "use TimeSeries.from_custom_map for CustomObs"
                        if kind is SignalType.CustomObs
                        else "",
                    )
                )
            canonical, oid = _find(model, name, kind)
        else:
            raise TypeError(must_be("each name", "a string or a (name, SignalType) pair", item))
        if canonical in seen:
            first, first_kind = seen[canonical]
            clash = (
                f"; the {first_kind.name} and the {kind.name} signal share the mapping key "
                f"{canonical!r}, so they cannot be in one series (put them in two series, or "
                "rename the sensor)"
                if first_kind is not kind
                else ""
            )
            raise ValueError(
                f"names must name each signal once, got {canonical!r} twice "
                f"(from {first!r} and {item!r}){clash}"
            )
        seen[canonical] = (item, kind)
        layout.append((canonical, kind, _width(model, kind, oid)))
    return layout


# --------------------------------------------------------------------------------------------
# TimeSeries


def _sensor_layout(model: mujoco.MjModel) -> list[tuple[str, SignalType, int]]:
    """Every sensor of ``model`` in model order (each must have a name)."""
    sensors = _names(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)
    for i, s in enumerate(sensors):
        if not s:
            kind = mujoco.mjtSensor(int(model.sensor_type[i])).name
            raise _unnamed_error("sensor", i, f" (type {kind})", "names")
    return [(s, SignalType.MjSensor, int(model.sensor_dim[i])) for i, s in enumerate(sensors)]


def _custom_layout(signals: Iterable[str | tuple[str, int]]) -> list[tuple[str, SignalType, int]]:
    """The layout of :meth:`TimeSeries.from_custom_map`: names or ``(name, width)`` pairs."""
    if isinstance(signals, str):
        signals = [signals]
    layout: list[tuple[str, SignalType, int]] = []
    seen: set[str] = set()
    for item in signals:
        if isinstance(item, str):
            name, width = item, 1
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            name, width = item
        else:
            raise TypeError(must_be("each signal", "a name or a (name, width) pair", item))
        if not isinstance(name, str) or not name:
            raise TypeError(must_be("signal name", "a non-empty string", name))
        if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1:
            raise ValueError(must_be(f"width of {name!r}", "a positive integer", width))
        if name in seen:
            raise ValueError(f"signals must name each signal once, got {name!r} twice")
        seen.add(name)
        layout.append((name, SignalType.CustomObs, int(width)))
    return layout


def _uniform_grid(t0: float, t1: float, target_dt: Any) -> np.ndarray:
    """``t0 + k * target_dt`` up to at most ``t1`` [s] (the grid of ``resample(target_dt=)``)."""
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


@dataclasses.dataclass(frozen=True, eq=False)
class TimeSeries:
    """Samples of one or more signals at strictly increasing times.

    Attributes:
      times: ``(N,)`` sample times in seconds, finite, strictly increasing, ``N >= 1``.
      data: ``(N, D)`` samples, finite (1-D input of length N becomes ``(N, 1)``).
      signal_mapping: Optional ``{name: (SignalType, column indices)}`` labelling the columns
        of ``data`` (see the module docstring). ``None`` for raw arrays.

    All three are stored as read-only copies; the series never changes after construction.
    """

    times: np.ndarray
    data: np.ndarray
    signal_mapping: SignalMapping | None = None

    def __post_init__(self) -> None:
        times, data = _validated_arrays(self.times, self.data)
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "data", data)
        if self.signal_mapping is not None:
            mapping = _validated_mapping(self.signal_mapping, data.shape[1])
            object.__setattr__(self, "signal_mapping", mapping)

    @classmethod
    def _unchecked(
        cls,
        times: np.ndarray,
        data: np.ndarray,
        signal_mapping: SignalMapping | None,
    ) -> TimeSeries:
        """Internal fast constructor: no validation, no copies, arrays stored as given.

        The caller guarantees ``times`` (N,) float64 strictly increasing, ``data`` (N, D)
        float64 finite, and a mapping whose indices are valid int arrays for D columns.
        """
        obj = object.__new__(cls)
        object.__setattr__(obj, "times", times)
        object.__setattr__(obj, "data", data)
        object.__setattr__(obj, "signal_mapping", signal_mapping)
        return obj

    # ---------------------------------------------------------------- factories

    @classmethod
    def from_names(
        cls,
        times: npt.ArrayLike,
        data: npt.ArrayLike,
        model: mujoco.MjModel,
        names: Iterable[str | tuple[str, SignalType]] | None = None,
    ) -> TimeSeries:
        """Sensor and state observations named after the model.

        Args:
          times: ``(N,)`` seconds.
          data: ``(N, D)``: the signals side by side in the order of ``names``, each with its
            width (``sensor_dim``, joint qpos/qvel width, actuator ``actnum``).
          model: Compiled model the names refer to.
          names: ``None`` for every sensor in model order. Otherwise plain names (resolved by
            :func:`resolve_signal_name`) or explicit ``(name, SignalType)`` pairs with type
            ``MjSensor``, ``MjStateQPos``/``MjStateQVel`` (joint name or
            ``"<joint>_qpos"``/``"<joint>_qvel"``), ``MjStateAct`` or ``MjCtrl``.

        Mapping keys are canonical names (``"<joint>_qpos"``, ``"<actuator>_act"``, ...).
        """
        t, d = _validated_arrays(times, data)
        _check_model(model)
        if names is None:
            layout = _sensor_layout(model)
        else:
            allowed = tuple(k for k in SignalType if k is not SignalType.CustomObs)
            layout = _model_layout(model, names, allowed, None)
        _check_layout_width(d, layout)
        return cls._unchecked(t, d, _consecutive_mapping(layout))

    @classmethod
    def from_control_names(
        cls,
        times: npt.ArrayLike,
        data: npt.ArrayLike,
        model: mujoco.MjModel,
        names: Iterable[str] | None = None,
    ) -> TimeSeries:
        """Control signals (``MjCtrl``), one column per actuator.

        Args:
          times: ``(N,)`` seconds.
          data: ``(N, len(names))`` controls in the order of ``names``.
          model: Compiled model.
          names: Actuator names (``"<actuator>_ctrl"`` is accepted too); ``None`` for every
            actuator in model order. Mapping keys are the actuator names.
        """
        t, d = _validated_arrays(times, data)
        _check_model(model)
        if names is None:
            acts = _names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)
            for i, a in enumerate(acts):
                if not a:
                    raise _unnamed_error("actuator", i, "", "names")
            layout = [(a, SignalType.MjCtrl, 1) for a in acts]
        else:
            layout = _model_layout(model, names, (SignalType.MjCtrl,), SignalType.MjCtrl)
        _check_layout_width(d, layout)
        return cls._unchecked(t, d, _consecutive_mapping(layout))

    @classmethod
    def from_custom_map(
        cls,
        times: npt.ArrayLike,
        data: npt.ArrayLike,
        signals: Iterable[str | tuple[str, int]],
    ) -> TimeSeries:
        """Custom observations (``CustomObs``) laid out side by side.

        Args:
          times: ``(N,)`` seconds.
          data: ``(N, D)`` with D the total width.
          signals: Names (one column each) or ``(name, width)`` pairs, in column order.
        """
        t, d = _validated_arrays(times, data)
        layout = _custom_layout(signals)
        _check_layout_width(d, layout)
        return cls._unchecked(t, d, _consecutive_mapping(layout))

    # ---------------------------------------------------------------- inspection

    def __len__(self) -> int:
        return int(self.times.shape[0])

    @property
    def dim(self) -> int:
        """Number of data columns D."""
        return int(self.data.shape[1])

    @property
    def n_signals(self) -> int:
        """Number of named signals (0 without a mapping)."""
        return 0 if self.signal_mapping is None else len(self.signal_mapping)

    @property
    def names(self) -> list[str]:
        """Signal names in mapping order (``[]`` without a mapping)."""
        return [] if self.signal_mapping is None else list(self.signal_mapping)

    @property
    def span(self) -> tuple[float, float]:
        """``(times[0], times[-1])`` in seconds."""
        return float(self.times[0]), float(self.times[-1])

    def _entry(self, name: str) -> tuple[SignalType, np.ndarray]:
        mapping = self.signal_mapping
        if mapping is None:
            raise _SignalKeyError(
                f"signal {name!r} must be in signal_mapping, got a series without a mapping "
                "(build it with from_names/from_control_names/from_custom_map)"
            )
        entry = mapping.get(name) if isinstance(name, str) else None
        if entry is None:
            known = list(mapping)
            raise _unknown("signal", name, known, f"(known signals: {_preview(known)})")
        return entry

    def columns(self, name: str) -> np.ndarray:
        """Read-only int array of the data columns of signal ``name``."""
        return self._entry(name)[1]

    def signal_type(self, name: str) -> SignalType:
        """The :class:`SignalType` of signal ``name``."""
        return self._entry(name)[0]

    def signal(self, name: str) -> np.ndarray:
        """``(N, width)`` samples of signal ``name`` (a copy)."""
        return self.data[:, self._entry(name)[1]]

    def __repr__(self) -> str:
        t0, t1 = self.span
        names = "None" if self.signal_mapping is None else _preview(self.names)
        return (
            f"TimeSeries(N={len(self)}, D={self.dim}, span=[{t0:.6g}, {t1:.6g}] s, signals={names})"
        )

    # ---------------------------------------------------------------- time queries

    def _tol(self) -> float:
        t = self.times
        return _REL_TIME_TOL * max(1.0, abs(float(t[0])), abs(float(t[-1])))

    def _in_span(self, name: str, t: np.ndarray, hold: bool) -> np.ndarray:
        """``t`` checked finite and inside the span (or clipped to it when ``hold``)."""
        bad = ~np.isfinite(t)
        if bad.any():
            i = first_bad_index(bad)
            where = "" if t.ndim == 0 else f"[{i}]"
            raise ValueError(f"{name} must be finite, got {name}{where}={float(t.ravel()[i])!r}")
        t0, t1 = self.times[0], self.times[-1]
        if not hold:
            tol = self._tol()
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

    @staticmethod
    def _query(name: str, t: Any) -> np.ndarray:
        arr = _as_float_array(name, t)
        if arr.ndim > 1:
            raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {arr.shape}")
        return arr

    def interpolate(self, t: npt.ArrayLike, *, hold: bool = False) -> np.ndarray:
        """Linear interpolation of all columns.

        Args:
          t: Scalar time, or ``(M,)`` times in any order, in seconds.
          hold: Times outside the span take the first/last sample instead of raising.

        Returns:
          ``(D,)`` for a scalar ``t``, ``(M, D)`` for an array.

        Raises:
          ValueError: Non-finite ``t``, or ``t`` outside the span without ``hold``.
        """
        arr = self._query("t", t)
        tc = self._in_span("t", arr, hold)
        flat = tc.reshape(-1)
        i0, w = _index_map(self.times, flat)
        out = _apply_index_map(self.data, i0, w)
        return out[0] if arr.ndim == 0 else out

    def get(self, t: npt.ArrayLike, *, hold: bool = False) -> np.ndarray:
        """Zero-order hold: the sample at or before ``t``.

        A ``t`` within float noise (see the module docstring) of a sample time returns exactly
        that sample.

        Args:
          t: Scalar time, or ``(M,)`` times, in seconds.
          hold: Times outside the span take the first/last sample instead of raising.

        Returns:
          ``(D,)`` for a scalar ``t``, ``(M, D)`` for an array (copies).
        """
        arr = self._query("t", t)
        tc = self._in_span("t", arr, hold).reshape(-1)
        idx = np.searchsorted(self.times, tc + self._tol(), side="right") - 1
        np.clip(idx, 0, len(self) - 1, out=idx)
        out = self.data[idx]
        return out[0] if arr.ndim == 0 else out

    def resample(
        self, new_times: npt.ArrayLike | None = None, *, target_dt: float | None = None
    ) -> TimeSeries:
        """Linear interpolation onto new times (the mapping is kept).

        Args:
          new_times: ``(M,)`` finite, strictly increasing times inside the span.
          target_dt: Instead of ``new_times``: a uniform step in seconds; the grid is
            ``times[0] + k * target_dt`` up to at most ``times[-1]``.

        Raises:
          TypeError: Neither or both of ``new_times`` and ``target_dt``.
          ValueError: Bad times, or a time outside the span (named in the message).
        """
        if (new_times is None) == (target_dt is None):
            raise TypeError(
                "resample needs exactly one of new_times or target_dt, got "
                + ("neither" if new_times is None else "both")
            )
        if target_dt is not None:
            grid = _uniform_grid(float(self.times[0]), float(self.times[-1]), target_dt)
        else:
            grid = _as_float_array("new_times", new_times)
            _check_times("new_times", grid)
        i0, w = _index_map(self.times, self._in_span("new_times", grid, hold=False))
        data = _apply_index_map(self.data, i0, w)
        grid.flags.writeable = False
        data.flags.writeable = False
        return TimeSeries._unchecked(grid, data, self.signal_mapping)

    def dt_statistics(self) -> DtStatistics:
        """Statistics of the time steps (see :class:`DtStatistics`); needs two samples."""
        if len(self) < 2:
            raise ValueError(f"dt_statistics needs at least 2 samples, got {len(self)}")
        dt = np.diff(self.times)
        median = float(np.median(dt))
        return DtStatistics(
            mean=float(dt.mean()),
            std=float(dt.std()),
            min=float(dt.min()),
            max=float(dt.max()),
            median=median,
            n_irregular=int(np.count_nonzero(np.abs(dt - median) > 0.01 * median)),
        )

    def remove_from_beginning(self, t: float) -> TimeSeries:
        """Drops the samples with ``times < times[0] + t``; times are not shifted.

        Args:
          t: Duration to drop in seconds, finite and ``>= 0``.

        Raises:
          ValueError: Negative/non-finite ``t``, or nothing would remain.
        """
        if (
            isinstance(t, bool)
            or not isinstance(t, (int, float, np.number))
            or not (math.isfinite(float(t)) and float(t) >= 0)
        ):
            raise ValueError(must_be("t", "a finite number >= 0 (seconds)", t))
        cut = float(self.times[0]) + float(t)
        start = int(np.searchsorted(self.times, cut - self._tol(), side="left"))
        if start >= len(self):
            t0, t1 = self.span
            raise ValueError(
                f"t must leave at least one sample, got {t!r} which drops all {len(self)} "
                f"samples of the span [{t0!r}, {t1!r}] (duration {t1 - t0!r} s)"
            )
        return TimeSeries._unchecked(self.times[start:], self.data[start:], self.signal_mapping)

    def slice_by_name(self, names: str | Iterable[str]) -> TimeSeries:
        """A series with only the named signals, columns re-indexed in the order given.

        Works as ``ts.slice_by_name(names)`` and ``TimeSeries.slice_by_name(ts, names)``.

        Raises:
          KeyError: An unknown name (the message lists the known ones).
          ValueError: A name given twice.
        """
        if isinstance(names, str):
            names = [names]
        names = list(names)
        if len(set(names)) != len(names):
            dup = next(n for i, n in enumerate(names) if n in names[:i])
            raise ValueError(f"names must name each signal once, got {dup!r} twice")
        entries = [self._entry(n) for n in names]
        cols = np.concatenate([c for _, c in entries]) if entries else np.zeros(0, dtype=np.intp)
        data = self.data[:, cols]
        data.flags.writeable = False
        mapping = _consecutive_mapping(
            [(n, kind, c.shape[0]) for n, (kind, c) in zip(names, entries, strict=True)]
        )
        return TimeSeries._unchecked(self.times, data, mapping)

    # ---------------------------------------------------------------- files

    def save_to_disk(self, path: str | Path) -> Path:
        """Writes the series to an ``.npz`` (atomically; no pickle).

        Keys: ``times``, ``data``, ``signal_mapping_json`` (JSON: ``null`` or a list of
        ``{"name", "type", "indices"}`` in mapping order) and ``schema_version``.

        Returns:
          The path written (exactly ``path``; no suffix is added).
        """
        return save_series_npz(path, self.times, self.data, self.signal_mapping)

    @classmethod
    def load_from_disk(cls, path: str | Path) -> TimeSeries:
        """Reads a series written by :meth:`save_to_disk`, validating everything.

        Raises:
          FileNotFoundError: No such file.
          ValueError: Not a readable npz, missing keys, a newer schema version, a malformed
            mapping or invalid arrays.
        """
        times, data, mapping = load_series_npz(path)
        try:
            return cls(times, data, mapping)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{str(path)!r}: {e}") from None
