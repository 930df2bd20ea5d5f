"""Time series of recorded or predicted signals, labelled with what each column holds.

A :class:`TimeSeries` is a frozen pair of arrays, ``times`` of shape ``(N,)`` in seconds and
``data`` of shape ``(N, D)`` (or ``(N,)`` for one signal: 1-D data stays 1-D, as in
``mujoco.sysid``; :attr:`TimeSeries.data_2d` is always ``(N, D)``), plus an optional
``signal_mapping``.

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
    The mappings of a whole model are :meth:`TimeSeries.compute_all_sensor_mapping`,
    :meth:`~TimeSeries.compute_all_state_mappings` and
    :meth:`~TimeSeries.compute_all_control_mapping`.

    Canonical names: a sensor keeps its name; a joint state is ``"<joint>_qpos"`` /
    ``"<joint>_qvel"``; an actuator's activation is ``"<actuator>_act"``; a control is
    ``"<actuator>_ctrl"``. A control is also found by the bare actuator name (``signal``,
    ``columns``, ``get_indices``, ``slice_by_name``), the key earlier mjsysid versions used.

Times
    ``times`` are finite and strictly increasing (checked at construction). Nothing assumes a
    uniform step; :meth:`TimeSeries.dt_statistics` reports how uniform it is. A series is
    defined on its *span* ``[times[0], times[-1]]``: :meth:`~TimeSeries.resample`,
    :meth:`~TimeSeries.interpolate` and :meth:`~TimeSeries.get` refuse times outside the span
    with a ``ValueError`` rather than clamping silently as ``mujoco.sysid`` does (``hold=True``
    asks for the end-value hold explicitly). Times within
    ``1e-12 * max(1, |times[0]|, |times[-1]|)`` of the span or of a sample count as on it, so
    float noise in a time grid is harmless. ``remove_from_beginning`` drops samples but never
    shifts the time axis. Interpolation methods: see :mod:`mjsysid.data.interpolation`.

Immutability
    The constructor stores read-only float64 copies of ``times`` and ``data``; every method
    returns a new series. ``signal_mapping`` is a plain ``dict`` whose index arrays are
    read-only; treat the dict as read-only too (derived series may share it).

Validation of a :class:`~mjsysid.data.timeseries.TimeSeries`: arrays, mappings, query times.

Messages follow mjsysid's ``"X must be E, got G"`` form and carry the key words of
``mujoco.sysid``'s messages (``Empty``, ``1D``, ``Length``) so that code matching either
toolbox's errors keeps working.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.interpolation import (
    Interpolation,
    InterpolationMethod,
    interpolate_rows,
    method_degree,
)
from mjsysid.data.signal_layout import (
    Layout,
    check_layout_width,
    compute_all_control_mapping,
    compute_all_sensor_mapping,
    compute_all_state_mappings,
    consecutive_mapping,
    control_layout,
    custom_layout,
    model_layout,
    sensor_layout,
)
from mjsysid.data.signals import (
    SignalNameError,
    SignalType,
    check_model,
    mapping_key,
    preview_names,
    resolve_signal_name,
    signal_source_indices,
    unknown_signal,
)
from mjsysid.data.timeseries_files import (
    TIMESERIES_SCHEMA_VERSION as TIMESERIES_SCHEMA_VERSION,
)
from mjsysid.data.timeseries_files import (
    SignalMapping,
    decode_signal_mapping,
    encode_signal_mapping,
    load_series_npz,
    save_series_csv,
    save_series_npz,
)
from mjsysid.util.errors import first_bad_index, must_be

__all__ = [
    "DtStatistics",
    "Interpolation",
    "InterpolationMethod",
    "SignalMapping",
    "SignalMappingType",
    "SignalType",
    "TimeSeries",
    "decode_signal_mapping",
    "encode_signal_mapping",
    "resolve_signal_name",
    "signal_source_indices",
]

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


SignalMappingType = SignalMapping
"""``mujoco.sysid``'s name of :data:`SignalMapping`: ``dict[str, (SignalType, indices)]``."""

Method = InterpolationMethod | Interpolation


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


def _dt_statistics(times: np.ndarray) -> DtStatistics:
    if times.shape[0] < 2:
        raise ValueError(f"dt_statistics needs at least 2 samples, got {times.shape[0]}")
    dt = np.diff(times)
    median = float(np.median(dt))
    return DtStatistics(
        mean=float(dt.mean()),
        std=float(dt.std()),
        min=float(dt.min()),
        max=float(dt.max()),
        median=median,
        n_irregular=int(np.count_nonzero(np.abs(dt - median) > 0.01 * median)),
    )


def _values_at(
    times: np.ndarray, data: np.ndarray, t: Any, method: Any, hold: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``(query times, values)`` of ``data`` at ``t`` by ``method``.

    Values are ``(M, D)`` for 2-D data, ``(M,)`` for 1-D data; ``M = 1`` for a scalar ``t``.
    """
    degree = method_degree(method)
    arr = query_times("t", t)
    tc = in_span(times, "t", arr, hold).reshape(-1)
    out = interpolate_rows(times, as_2d(data), tc, degree, time_tol(times))
    return arr, out[:, 0] if data.ndim == 1 else out


def _cut_start(times: np.ndarray, seconds: Any) -> int:
    """First row kept by ``remove_from_beginning(seconds)``."""
    dur = check_duration("t", seconds)
    start = int(np.searchsorted(times, float(times[0]) + dur - time_tol(times), side="left"))
    if start >= times.shape[0]:
        t0, t1 = float(times[0]), float(times[-1])
        raise ValueError(
            f"t must leave at least one sample, got {seconds!r} which drops all "
            f"{times.shape[0]} samples of the span [{t0!r}, {t1!r}] (duration {t1 - t0!r} s)"
        )
    return start


@dataclasses.dataclass(frozen=True, eq=False)
class TimeSeries:
    """Samples of one or more signals at strictly increasing times.

    Attributes:
      times: ``(N,)`` sample times in seconds, finite, strictly increasing, ``N >= 1``.
      data: ``(N, D)`` samples, finite; 1-D input ``(N,)`` stays 1-D (one column, see
        :attr:`data_2d`).
      signal_mapping: Optional ``{name: (SignalType, column indices)}`` labelling the columns
        of ``data`` (see the module docstring). ``None`` for raw arrays. Index entries may be
        given as arrays, lists or single ints.

    All three are stored as read-only copies; the series never changes after construction.
    """

    times: np.ndarray
    data: np.ndarray
    signal_mapping: SignalMapping | None = None

    def __post_init__(self) -> None:
        times, data = validated_arrays(self.times, self.data)
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "data", data)
        if self.signal_mapping is not None:
            mapping = validated_mapping(self.signal_mapping, width(data))
            object.__setattr__(self, "signal_mapping", mapping)

    @classmethod
    def trusted(
        cls,
        times: np.ndarray,
        data: np.ndarray,
        signal_mapping: SignalMapping | None,
    ) -> TimeSeries:
        """A series from arrays the caller already validated: no checks, no copies (the hot
        paths of the residual use it; other stages meet the series here, not at a private
        constructor).

        The caller guarantees ``times`` (N,) float64 strictly increasing, ``data`` (N, D) or
        (N,) float64 finite, and a mapping whose indices are valid int arrays for D columns.
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
        allowed = tuple(k for k in SignalType if k is not SignalType.CustomObs)
        return cls._laid_out(
            times,
            data,
            model,
            lambda: (
                sensor_layout(model) if names is None else model_layout(model, names, allowed, None)
            ),
        )

    @classmethod
    def from_control_names(
        cls,
        times: npt.ArrayLike,
        data: npt.ArrayLike,
        model: mujoco.MjModel,
        names: Iterable[str | tuple[str, SignalType]] | None = None,
    ) -> TimeSeries:
        """Control signals (``MjCtrl``), one column per actuator.

        Args:
          times: ``(N,)`` seconds.
          data: ``(N, len(names))`` controls in the order of ``names``.
          model: Compiled model.
          names: Actuator names or ``"<actuator>_ctrl"``; ``None`` for every actuator in
            model order. Mapping keys are ``"<actuator>_ctrl"`` (``mujoco.sysid``'s names);
            lookups by the bare actuator name keep working.
        """
        return cls._laid_out(
            times,
            data,
            model,
            lambda: (
                control_layout(model)
                if names is None
                else model_layout(model, names, (SignalType.MjCtrl,), SignalType.MjCtrl)
            ),
        )

    @classmethod
    def _laid_out(
        cls,
        times: npt.ArrayLike,
        data: npt.ArrayLike,
        model: mujoco.MjModel,
        layout_of: Callable[[], Layout],
    ) -> TimeSeries:
        """The series of ``data (N, D)`` at ``times (N,)`` (s), its columns laid out by
        ``layout_of()`` (called once the arrays and ``model`` are checked; its width must be
        ``D``)."""
        t, d = validated_arrays(times, data)
        check_model(model)
        layout = layout_of()
        check_layout_width(width(d), layout)
        return cls.trusted(t, d, consecutive_mapping(layout))

    @classmethod
    def from_custom_map(
        cls,
        times: npt.ArrayLike,
        data: npt.ArrayLike,
        signals: Iterable[str | tuple[str, int] | tuple[str, int, SignalType]],
    ) -> TimeSeries:
        """Custom observations laid out side by side.

        Args:
          times: ``(N,)`` seconds.
          data: ``(N, D)`` with D the total width.
          signals: In column order: names (one ``CustomObs`` column each), ``(name, width)``
            pairs (``CustomObs``) or ``(name, width, SignalType)`` triples (any type, as in
            ``mujoco.sysid``).
        """
        t, d = validated_arrays(times, data)
        layout = custom_layout(signals)
        check_layout_width(width(d), layout)
        return cls.trusted(t, d, consecutive_mapping(layout))

    @staticmethod
    def create(times: npt.ArrayLike, data: npt.ArrayLike, signal_mapping: Any = None) -> TimeSeries:
        """``TimeSeries(times, data, signal_mapping)``; index entries (int, list, array) become
        int arrays (``mujoco.sysid``'s factory of that name)."""
        return TimeSeries(np.asarray(times), np.asarray(data), signal_mapping)

    compute_all_state_mappings = staticmethod(compute_all_state_mappings)
    compute_all_sensor_mapping = staticmethod(compute_all_sensor_mapping)
    compute_all_control_mapping = staticmethod(compute_all_control_mapping)

    # ---------------------------------------------------------------- inspection

    def __len__(self) -> int:
        return int(self.times.shape[0])

    @property
    def dim(self) -> int:
        """Number of data columns D (1 for 1-D data)."""
        return width(self.data)

    @property
    def data_2d(self) -> np.ndarray:
        """``data`` as ``(N, D)``: 1-D data as a one-column read-only view."""
        return as_2d(self.data)

    def as_2d(self) -> TimeSeries:
        """This series with ``(N, D)`` data (``self`` when it already is; no copy)."""
        if self.data.ndim == 2:
            return self
        return TimeSeries.trusted(self.times, self.data_2d, self.signal_mapping)

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

    def _key(self, name: str) -> str:
        """The mapping key of signal ``name`` (a control also by its actuator name)."""
        mapping = self.signal_mapping
        if mapping is None:
            raise SignalNameError(
                f"signal {name!r} must be in signal_mapping, got a series without a mapping "
                "(build it with from_names/from_control_names/from_custom_map)"
            )
        key = mapping_key(mapping, name)
        if key is None:
            known = list(mapping)
            raise unknown_signal("signal", name, known, f"(known signals: {preview_names(known)})")
        return key

    def _entry(self, name: str) -> tuple[SignalType, np.ndarray]:
        key = self._key(name)
        assert self.signal_mapping is not None  # _key raised otherwise
        return self.signal_mapping[key]

    def columns(self, name: str) -> np.ndarray:
        """Read-only int array of the data columns of signal ``name``."""
        return self._entry(name)[1]

    def signal_type(self, name: str) -> SignalType:
        """The :class:`SignalType` of signal ``name``."""
        return self._entry(name)[0]

    def get_indices(self, obs_name: str) -> tuple[SignalType, np.ndarray]:
        """``(SignalType, data columns)`` of signal ``obs_name``.

        Raises:
          KeyError: An unknown name (the message lists the known ones and the closest).
        """
        return self._entry(obs_name)

    def signal(self, name: str) -> np.ndarray:
        """``(N, width)`` samples of signal ``name`` (a copy)."""
        return self.data_2d[:, self._entry(name)[1]]

    def __repr__(self) -> str:
        t0, t1 = self.span
        names = "None" if self.signal_mapping is None else preview_names(self.names)
        return (
            f"TimeSeries(N={len(self)}, D={self.dim}, span=[{t0:.6g}, {t1:.6g}] s, signals={names})"
        )

    # ---------------------------------------------------------------- time queries

    def interpolate(
        self, t: npt.ArrayLike, method: Method = "linear", *, hold: bool = False
    ) -> np.ndarray:
        """Values of all columns at ``t``.

        Args:
          t: Scalar time, or ``(M,)`` times in any order, in seconds.
          method: ``"linear"`` (default), ``"quadratic"``, ``"cubic"``, ``"quintic"`` (splines
            through all samples) or ``"zero_order_hold"``/``"zoh"`` (the sample at or before
            ``t``); see :mod:`mjsysid.data.interpolation`. An :class:`Interpolation` member
            works too.
          hold: Times outside the span take the first/last sample instead of raising.

        Returns:
          2-D data: ``(D,)`` for a scalar ``t``, ``(M, D)`` for an array. 1-D data: ``(1,)``
          for a scalar, ``(M,)`` for an array.

        Raises:
          ValueError: Non-finite ``t``, ``t`` outside the span without ``hold``, an unknown
            method, or too few samples for the spline's degree.
        """
        arr, out = _values_at(self.times, self.data, t, method, hold)
        return out[0] if arr.ndim == 0 and self.data.ndim == 2 else out

    def get(
        self, t: npt.ArrayLike, method: Method = "linear", *, hold: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(times, values)`` at ``t`` (``mujoco.sysid``'s query without a new series).

        Same methods and span rule as :meth:`interpolate`; ``method="zoh"`` returns exactly
        the sample at or before ``t`` (a ``t`` within float noise of a sample time is that
        sample).

        Returns:
          ``times`` as given (float, 0-D for a scalar) and ``values``: for a scalar ``t``
          ``(D,)`` (2-D data) or ``()`` (1-D data); for ``(M,)`` times ``(M, D)`` or ``(M,)``.
        """
        arr, out = _values_at(self.times, self.data, t, method, hold)
        return arr, out[0] if arr.ndim == 0 else out

    def resample(
        self,
        new_times: npt.ArrayLike | None = None,
        target_dt: float | None = None,
        method: Method = "linear",
    ) -> TimeSeries:
        """Interpolation onto new times (the mapping is kept).

        Args:
          new_times: ``(M,)`` finite, strictly increasing times inside the span.
          target_dt: Instead of ``new_times``: a uniform step in seconds; the grid is
            ``times[0] + k * target_dt`` up to at most ``times[-1]`` (``mujoco.sysid`` uses a
            ``linspace`` that keeps the end but whose step is not ``target_dt``).
          method: As in :meth:`interpolate`.

        Raises:
          ResampleArgumentError: Neither or both of ``new_times`` and ``target_dt`` (a
            ``TypeError`` and a ``ValueError``).
          ValueError: Bad times, or a time outside the span (named in the message).
        """
        degree = method_degree(method)
        grid = resample_grid(self.times, new_times, target_dt)
        tc = in_span(self.times, "new_times", grid, hold=False)
        out = interpolate_rows(self.times, self.data_2d, tc, degree, time_tol(self.times))
        data = out[:, 0] if self.data.ndim == 1 else out
        grid.flags.writeable = False
        data.flags.writeable = False
        return TimeSeries.trusted(grid, data, self.signal_mapping)

    def dt_statistics(self) -> DtStatistics:
        """Statistics of the time steps (see :class:`DtStatistics`); needs two samples."""
        return _dt_statistics(self.times)

    def remove_from_beginning(
        self, time_to_remove_s: float | None = None, *, t: float | None = None
    ) -> TimeSeries:
        """Drops the samples with ``times < times[0] + t``; times are not shifted.

        ``mujoco.sysid`` also re-zeroes the kept times; mjsysid keeps them, so the series
        stays aligned with its control and initial state.

        Args:
          time_to_remove_s: Duration ``t`` to drop in seconds, finite and ``>= 0``.
          t: The same, by mjsysid's keyword (give one of the two).

        Raises:
          ValueError: Negative/non-finite ``t``, or nothing would remain.
        """
        if (time_to_remove_s is None) == (t is None):
            raise TypeError(
                "remove_from_beginning needs exactly one of time_to_remove_s or t, got "
                + ("neither" if t is None else "both")
            )
        start = _cut_start(self.times, t if time_to_remove_s is None else time_to_remove_s)
        return TimeSeries.trusted(self.times[start:], self.data[start:], self.signal_mapping)

    def slice_by_name(self, names: str | Iterable[str]) -> TimeSeries:
        """A series with only the named signals, columns re-indexed in the order given.

        Works as ``ts.slice_by_name(names)`` and ``TimeSeries.slice_by_name(ts, names)``. A
        control may be named by its actuator; the new mapping uses the series' own keys.

        Raises:
          KeyError: An unknown name (the message lists the known ones).
          ValueError: A name given twice.
        """
        return _sliced(self, [names] if isinstance(names, str) else list(names))

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

    def save_to_csv(self, path: str | Path) -> None:
        """Writes ``time, column 0, column 1, ...`` rows as CSV (``%.18e``, no header).

        The layout of ``mujoco.sysid``'s ``save_to_csv`` (1-D data too, where the peer
        fails); the mapping is not stored. Read back with ``np.loadtxt(path, delimiter=",")``.
        Written atomically.
        """
        save_series_csv(path, self.times, self.data)


def _sliced(ts: TimeSeries, names: Sequence[str]) -> TimeSeries:
    """The series of :meth:`TimeSeries.slice_by_name`."""
    keys = [ts._key(n) for n in names]
    if len(set(keys)) != len(keys):
        i = next(i for i, k in enumerate(keys) if k in keys[:i])
        raise ValueError(f"names must name each signal once, got {names[i]!r} twice")
    entries = [ts._entry(k) for k in keys]
    cols = np.concatenate([c for _, c in entries]) if entries else np.zeros(0, dtype=np.intp)
    if ts.data.ndim == 1 and cols.tolist() == [0]:
        data = ts.data
    else:
        data = ts.data_2d[:, cols]
        data.flags.writeable = False
    mapping = consecutive_mapping(
        [(k, kind, c.shape[0]) for k, (kind, c) in zip(keys, entries, strict=True)]
    )
    return TimeSeries.trusted(ts.times, data, mapping)
