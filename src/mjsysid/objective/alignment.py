"""How a recorded sequence maps onto the simulation, computed once per residual function.

For one sequence: the simulation grid ``t0 + k·dt`` (``t0`` the first measured time, ``dt``
the model's timestep) covering the last measured time, the controls sampled on it, the source
of every measured column (a ``sensordata`` index or a full-physics state index) and, for every
measured time ``t``, the grid row ``i`` and weight ``w`` with ``ȳ(t) = (1 − w)·ȳ[i] + w·ȳ[i+1]``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, cast

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import state_slices
from mjsysid.data.timeseries import SignalType, TimeSeries, signal_source_indices
from mjsysid.objective.signal_ops import column_rms, signal_rms
from mjsysid.util.errors import must_be

_STATE_TYPES = {
    SignalType.MjStateQPos: "qpos",
    SignalType.MjStateQVel: "qvel",
    SignalType.MjStateAct: "act",
}


def grid_length(t0: float, t1: float, dt: float) -> int:
    """Number of simulation steps whose instants ``t0 + k·dt`` cover ``[t0, t1]``."""
    return int(np.ceil((t1 - t0) / dt - 1e-9)) + 1


def zoh_indices(sample_times: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Index of the last sample at or before each query time (zero-order hold).

    A tolerance of 1e-9 of the sample spacing absorbs floating-point noise on exact hits.
    """
    tol = 1e-9 * (np.median(np.diff(sample_times)) if sample_times.size > 1 else 1.0)
    idx = np.searchsorted(sample_times, query + tol, side="right") - 1
    return np.clip(idx, 0, sample_times.size - 1)


def linear_weights(
    t0: float, dt: float, nstep: int, query: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Index ``i`` and weight ``w`` so that ``f(q) ≈ (1-w)·f[i] + w·f[i+1]`` on a uniform grid."""
    u = (query - t0) / dt
    i = np.clip(np.floor(u + 1e-9).astype(np.int64), 0, max(nstep - 2, 0))
    w = u - i
    if nstep == 1:
        w = np.zeros_like(w)
    # A time on a grid instant (the last one in particular) reads that instant exactly.
    snap = w > 1.0 - 1e-9
    i[snap] += 1
    w[snap] = 0.0
    return i, w


@dataclass
class PreparedSequence:
    """Everything precomputed for one recorded sequence (see :func:`prepare_sequence`)."""

    ms_index: int
    seq_index: int
    label: str
    meas: TimeSeries
    x0: np.ndarray  # (nstate,) with time = t0
    control: np.ndarray  # (nstep, nu) on the simulation grid
    grid: np.ndarray  # (nstep,) simulation instants
    sens_cols: np.ndarray  # measured columns fed by sensordata
    sens_src: np.ndarray  # their sensordata indices
    state_cols: np.ndarray  # measured columns fed by the state
    state_src: np.ndarray  # their state indices
    interp_i: np.ndarray  # (N,) grid index per measured time
    interp_w: np.ndarray  # (N,) interpolation weight
    scale: np.ndarray  # (D,) weight / rms per measured column
    on_grid: bool  # every measured time is a simulation instant (no interpolation needed)
    identity_grid: bool  # the measured times are exactly the simulation instants
    all_sensors: bool  # the measured columns are all model sensors in model order
    column_labels: list[str] = field(default_factory=list)
    rms_ref: TimeSeries | None = None  # what normalises it, when not its own data (a window)
    # the force laws' data: recorded inputs held on the grid (nstep,) each, per-recording
    # constants, and whether a recorded command row starts at each step (nstep,)
    law_inputs: dict[str, np.ndarray] = field(default_factory=dict)
    law_constants: dict[str, float] = field(default_factory=dict)
    new_command: np.ndarray | None = None

    @property
    def nstep(self) -> int:
        return self.grid.size


def head_samples(
    times: np.ndarray, fraction: float, delays: tuple[float, float] = (0.0, 0.0)
) -> int:
    """How many of the sorted sample ``times`` lie in the first ``fraction`` of their span:
    those up to ``t0 + fraction·(t_last − t0)`` (within rounding). With ``delays = (lo, hi)``
    (s) only those at which a series spanning the head can be read with every delay in
    ``[lo, hi]``: ``t0 + max(hi, 0) <= t <= t_head_end + min(lo, 0)``."""
    t0, t_last = float(times[0]), float(times[-1])
    t_end = t0 + fraction * (t_last - t0)
    n = int(np.searchsorted(times, t_end + 1e-9 * max(1.0, abs(t_end)), side="right"))
    lo, hi = delays
    if n == 0 or (lo >= 0.0 and hi <= 0.0):
        return n
    head = times[:n]
    return int(np.count_nonzero((head >= t0 + max(hi, 0.0)) & (head <= head[-1] + min(lo, 0.0))))


def sequence_head(seq: PreparedSequence, fraction: float) -> PreparedSequence:
    """The first ``fraction`` of a prepared sequence: the measured samples up to
    ``t0 + fraction·(t_last − t0)`` and the simulation grid covering them.

    Everything else is kept, the column scales in particular, so the residual of the head is
    the leading part of the whole sequence's residual.

    Raises:
      ValueError: Fewer than 2 measured samples would remain.
    """
    times = seq.meas.times
    t0 = float(times[0])
    n = head_samples(times, fraction)
    if n < 2:
        raise ValueError(
            must_be(
                f"{seq.label}: the first {fraction:g} of the sequence",
                "at least 2 measured samples",
                n,
                "use a larger horizon fraction",
            )
        )
    if n == times.size:
        return seq
    dt = float(seq.grid[1] - seq.grid[0])
    nstep = min(grid_length(t0, float(times[n - 1]), dt), seq.nstep)
    meas = TimeSeries.trusted(times[:n], seq.meas.data[:n], seq.meas.signal_mapping)
    interp_i, interp_w = seq.interp_i[:n].copy(), seq.interp_w[:n].copy()
    over = interp_i >= nstep - 1  # a time on the last instant reads it exactly
    interp_i[over], interp_w[over] = nstep - 1, 0.0
    return replace(
        seq,
        meas=meas,
        control=seq.control[:nstep],
        grid=seq.grid[:nstep],
        interp_i=interp_i,
        interp_w=interp_w,
        identity_grid=seq.identity_grid and n == nstep,
        law_inputs={k: v[:nstep] for k, v in seq.law_inputs.items()},
        new_command=None if seq.new_command is None else seq.new_command[:nstep],
    )


def prepare_sequence(
    models_sequences: Sequence[ModelSequences],
    mi: int,
    si: int,
    *,
    enabled_observations: list[str] | None,
    control_interpolation: str,
    sensor_weights: Mapping[str, Any],
    normalize: bool | str,
    custom_residual: bool,
) -> PreparedSequence:
    """Sequence ``si`` of ``models_sequences[mi]`` laid onto its simulation grid.

    The grid starts at the first measured time with the model's timestep and covers the last
    one; controls are sampled on it (zero-order hold or linear); each measured column gets its
    source (a sensordata index or a state index) and each measured time its interpolation row
    and weight on the grid; the column scale is ``sensor_weights / rms`` (``normalize``).

    Raises:
      KeyError: ``enabled_observations`` names no measured signal.
      ValueError: Fewer than 2 samples, no signal left, a bad weight, or a
        ``SignalType.CustomObs`` signal without a custom residual (``custom_residual``).
    """
    ms = models_sequences[mi]
    model = ms.model
    label, x0, ctrl_ts, meas, rms_ref = _recorded(models_sequences, mi, si, enabled_observations)
    dt = float(model.opt.timestep)
    t0 = float(meas.times[0])
    nstep = grid_length(t0, float(meas.times[-1]), dt)
    grid = t0 + dt * np.arange(nstep)
    control = _grid_controls(ms, si, ctrl_ts, grid, control_interpolation)
    x0 = x0.copy()
    x0[0] = t0
    src = _column_sources(model, meas, label, custom_residual)
    interp_i, interp_w = linear_weights(t0, dt, nstep, meas.times)
    scale = _column_scale(meas, sensor_weights, normalize, rms_ref, label)
    on_grid = bool(np.all(np.abs(interp_w) < 1e-9))
    inputs_ts, constants = ms.law_data(si)
    return PreparedSequence(
        mi,
        si,
        label,
        meas,
        x0,
        np.ascontiguousarray(control, dtype=np.float64),
        grid,
        np.asarray(src.sens_cols, dtype=np.int64),
        np.asarray(src.sens_src, dtype=np.int64),
        np.asarray(src.state_cols, dtype=np.int64),
        np.asarray(src.state_src, dtype=np.int64),
        interp_i,
        interp_w,
        scale,
        on_grid,
        on_grid and interp_i.size == nstep and bool(np.all(interp_i == np.arange(nstep))),
        src.all_sensors(model.nsensordata),
        src.labels,
        rms_ref,
        _grid_inputs(inputs_ts, grid),
        dict(constants),
        _command_rows(ctrl_ts, grid),
    )


def _grid_inputs(inputs: TimeSeries | None, grid: np.ndarray) -> dict[str, np.ndarray]:
    """``{name: (nstep,)}`` the force laws' recorded inputs held on the ``grid`` (zero-order
    hold: an input row acts until the next one)."""
    if inputs is None or not inputs.signal_mapping:
        return {}
    rows = zoh_indices(inputs.times, grid)
    data = inputs.data if inputs.data.ndim > 1 else inputs.data[:, None]
    return {
        name: np.ascontiguousarray(data[rows, int(cols[0])], dtype=np.float64)
        for name, (_, cols) in inputs.signal_mapping.items()
    }


def _command_rows(ctrl: TimeSeries | None, grid: np.ndarray) -> np.ndarray | None:
    """``(nstep,)`` whether a recorded command row starts at each grid step (the first step
    always); ``None`` without a control series."""
    if ctrl is None:
        return None
    rows = zoh_indices(ctrl.times, grid)
    out = np.ones(grid.size, dtype=bool)
    out[1:] = rows[1:] != rows[:-1]
    return out


class _Recorded(NamedTuple):
    """A recorded sequence with signal mappings, after ``enabled_observations``."""

    label: str
    x0: np.ndarray
    control: TimeSeries | None
    meas: TimeSeries
    rms_ref: TimeSeries | None  # what normalises it when not its own data (a window)


def _recorded(
    models_sequences: Sequence[ModelSequences],
    mi: int,
    si: int,
    enabled_observations: list[str] | None,
) -> _Recorded:
    """Sequence ``si`` of ``models_sequences[mi]``, its measured series mapped by signal
    names and restricted to ``enabled_observations``.

    Raises:
      KeyError: ``enabled_observations`` names no measured signal.
      ValueError: No signal left, or fewer than 2 samples.
    """
    ms = models_sequences[mi]
    model = ms.model
    name, x0, ctrl_ts, meas = ms.sequences()[si]
    label = f"{ms.name}/{name}"
    # what normalises it when not its own data (a window: its whole recording)
    rms_ref = ms.rms_reference[si] if ms.rms_reference is not None else None
    if meas.signal_mapping is None:
        meas = TimeSeries.from_names(meas.times, meas.data, model)
    if rms_ref is not None and rms_ref.signal_mapping is None:
        rms_ref = TimeSeries.from_names(rms_ref.times, rms_ref.data, model)
    if enabled_observations is not None:
        check_observation_names(models_sequences, model, enabled_observations)
        meas, rms_ref = _enabled_only(meas, rms_ref, enabled_observations, label)
    if meas.times.size < 2:
        raise ValueError(must_be(f"{label}: sensordata", "at least 2 samples", meas.times.size))
    return _Recorded(label, x0, ctrl_ts, meas, rms_ref)


def check_observation_names(
    models_sequences: Sequence[ModelSequences],
    model: mujoco.MjModel,
    enabled_observations: list[str],
) -> None:
    """Every name of ``enabled_observations`` is a signal measured in some sequence.

    Raises:
      KeyError: One names no measured signal.
    """
    known = {
        n
        for m in models_sequences
        for s in m.sensordata  # type: ignore[union-attr]
        for n in (
            s.names if s.signal_mapping else [model.sensor(k).name for k in range(model.nsensor)]
        )
    }
    unknown = sorted(set(enabled_observations) - known)
    if unknown:
        raise KeyError(
            f"enabled_observations names {unknown} match no measured signal; measured "
            f"signals: {sorted(known)}"
        )


def _enabled_only(
    meas: TimeSeries, rms_ref: TimeSeries | None, enabled_observations: list[str], label: str
) -> tuple[TimeSeries, TimeSeries | None]:
    """``meas`` (and its normalisation reference) restricted to the enabled signals.

    Raises:
      ValueError: No measured signal of the sequence is enabled.
    """
    keep = [n for n in enabled_observations if n in meas.names]
    if not keep:
        raise ValueError(
            f"{label}: enabled_observations {enabled_observations} "
            f"leave no measured signal; it has {meas.names}"
        )
    meas = meas.slice_by_name(keep)
    if rms_ref is not None:
        rms_ref = rms_ref.slice_by_name(keep)
    return meas, rms_ref


def _grid_controls(
    ms: ModelSequences,
    si: int,
    ctrl_ts: TimeSeries | None,
    grid: np.ndarray,
    control_interpolation: str,
) -> np.ndarray:
    """``(nstep, nu)`` recorded controls of sequence ``si`` sampled on the ``grid`` (zero-order
    hold or linear)."""
    if not ms.model.nu:
        return np.zeros((grid.size, 0))
    assert ctrl_ts is not None
    cols = ms.control_columns(si)
    if control_interpolation == "zoh":
        return cast(np.ndarray, ctrl_ts.data[zoh_indices(ctrl_ts.times, grid)][:, cols])
    return np.stack([np.interp(grid, ctrl_ts.times, ctrl_ts.data[:, c]) for c in cols], axis=1)


@dataclass
class _ColumnSources:
    """Where each measured column comes from: sensordata indices ``sens_src`` of the columns
    ``sens_cols``, state indices ``state_src`` of ``state_cols``; ``labels`` of every column."""

    sens_cols: list[int] = field(default_factory=list)
    sens_src: list[int] = field(default_factory=list)
    state_cols: list[int] = field(default_factory=list)
    state_src: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    def all_sensors(self, nsensordata: int) -> bool:
        """The columns are all ``nsensordata`` model sensor values, in model order."""
        return (
            not self.state_cols
            and len(self.sens_src) == nsensordata
            and list(self.sens_src) == list(range(nsensordata))
            and list(self.sens_cols) == list(range(nsensordata))
        )


def _column_sources(
    model: mujoco.MjModel, meas: TimeSeries, label: str, custom_residual: bool
) -> _ColumnSources:
    """The source of every measured column of ``meas``.

    Raises:
      ValueError: A ``SignalType.CustomObs`` signal without a custom residual.
    """
    slices = state_slices(model)
    out = _ColumnSources(labels=[""] * meas.data.shape[1])
    custom = []
    assert meas.signal_mapping is not None
    for sig, (stype, cols_) in meas.signal_mapping.items():
        for j, c in enumerate(cols_):
            out.labels[c] = sig if len(cols_) == 1 else f"{sig}[{j}]"
        if stype == SignalType.CustomObs:
            custom.append(sig)
            continue
        src = signal_source_indices(model, sig, stype)
        if stype == SignalType.MjSensor:
            out.sens_cols.extend(cols_)
            out.sens_src.extend(src)
        else:
            out.state_cols.extend(cols_)
            out.state_src.extend(slices[_STATE_TYPES[stype]].start + np.asarray(src))
    if custom and not custom_residual:
        raise ValueError(
            f"{label}: sensordata signals {custom} are SignalType.CustomObs, which the default "
            "residual cannot predict; pass modify_residual= to compute them"
        )
    return out


def _column_scale(
    meas: TimeSeries,
    sensor_weights: Mapping[str, Any],
    normalize: bool | str,
    rms_ref: TimeSeries | None,
    label: str,
) -> np.ndarray:
    """``(D,)`` scale of each measured column: the product of the weights matching its signal,
    divided by the RMS (``normalize``) of ``meas`` or of the reference ``rms_ref``.

    Raises:
      ValueError: A weight with neither 1 nor one value per column of its signal.
    """
    scale = np.ones(meas.data.shape[1])
    for pattern, w in sensor_weights.items():
        for sig in (n for n in meas.names if fnmatch.fnmatchcase(n, pattern)):
            cols, arr = meas.columns(sig), np.asarray(w, dtype=np.float64)
            if arr.size not in (1, cols.size):
                raise ValueError(
                    must_be(
                        f"sensor_weights[{pattern!r}]",
                        f"a scalar or {cols.size} values (one per column of {sig!r})",
                        w,
                    )
                )
            scale[cols] *= arr
    if normalize:
        rms = column_rms if normalize == "column" else signal_rms
        scale = scale / rms(meas if rms_ref is None else rms_ref, label)
    return scale
