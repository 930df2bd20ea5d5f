"""Multiple shooting: recordings cut into windows, each simulated from its own start.

A long sequence of a sensitive system (a pendulum, a legged robot) drifts away from the
recording even with the right parameters. :func:`split_windows` cuts each recording into
shorter windows, each simulated from the state measured at its start; the physical parameters
are shared by all windows. Combined with
:func:`~mjsysid.objective.initial_state.initial_state_params` every window's start is
estimated too. Windows belong to the objective stage: activations at their starts come from a
nominal simulation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import mujoco
import numpy as np

from mjsysid.data.recording import initial_state_from_sensors
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import create_initial_state, state_slices
from mjsysid.data.timeseries import SignalType, TimeSeries, signal_source_indices
from mjsysid.objective.alignment import grid_length, zoh_indices
from mjsysid.sim.rollout import sysid_rollout
from mjsysid.util.errors import must_be


def _scalar_position_columns(model: mujoco.MjModel, meas: TimeSeries) -> dict[int, int]:
    """Data column holding the position of each hinge/slide joint ``{joint id: column}``,
    from ``jointpos`` sensors and ``<joint>_qpos`` state columns."""
    scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    by_qpos = {
        int(model.jnt_qposadr[j]): j for j in range(model.njnt) if model.jnt_type[j] in scalar
    }
    out: dict[int, int] = {}
    assert meas.signal_mapping is not None
    for name, (stype, cols) in meas.signal_mapping.items():
        if stype == SignalType.MjStateQPos:
            for adr, col in zip(signal_source_indices(model, name, stype), cols, strict=True):
                if int(adr) in by_qpos:
                    out[by_qpos[int(adr)]] = int(col)
        elif stype == SignalType.MjSensor:
            i = model.sensor(name).id
            if (
                int(model.sensor_type[i]) == int(mujoco.mjtSensor.mjSENS_JOINTPOS)
                and int(model.sensor_objid[i]) in by_qpos.values()
            ):
                out[int(model.sensor_objid[i])] = int(cols[0])
    return out


def local_slope(times: np.ndarray, values: np.ndarray, t: float, samples: int) -> float:
    """Derivative at ``t`` of the quadratic least-squares fit to the ``samples`` samples
    nearest to ``t`` (a Savitzky-Golay derivative: centred inside the series, one-sided at
    its ends; on a uniform grid and centred it is the slope of the linear fit).

    Args:
      times: ``(N,)`` increasing times (s). values: ``(N,)`` positions.
      t: Where (s). samples: Points in the fit (>= 3).
    """
    k = int(np.searchsorted(times, t))
    lo = min(max(k - samples // 2, 0), max(times.size - samples, 0))
    sel = slice(lo, lo + samples)
    tt = times[sel] - t
    coef = np.polynomial.polynomial.polyfit(tt, values[sel], 2 if tt.size >= 3 else 1)
    return float(coef[1])


def split_windows(
    models_sequences: ModelSequences,
    window: float,
    *,
    overlap: float = 0.0,
    min_samples: int = 5,
    velocity_samples: int = 7,
) -> ModelSequences:
    """Multiple shooting: cuts every sequence into windows of ``window`` seconds.

    Each window becomes a sequence ``"<name>#<k>"`` simulated from the state measured at its
    start (the first window keeps the sequence's own initial state). Joint positions come
    from ``jointpos`` sensors or ``<joint>_qpos`` columns, velocities from ``jointvel``
    sensors or ``<joint>_qvel`` columns; a hinge or slide joint whose velocity is not
    measured (an encoder-only recording) gets the derivative of a quadratic fitted to the
    ``velocity_samples`` position samples around the window start (:func:`local_slope`,
    which smooths encoder steps). Every window's residual is normalised by the RMS of its
    whole recording (``rms_reference``), so each sample weighs the same as without windows.
    Actuator activations (filter or integrator dynamics), which
    no sensor shows, come from a simulation of the whole sequence with the nominal model.
    Add :func:`initial_state_params` for the windows to estimate the starts as well
    (recommended with estimated velocities, and needed for activations when a parameter such
    as the filter's time constant is fitted). The starts are the raw measurements: sensor
    delays, gains or biases fitted by a SignalTransform do not correct them.

    Args:
      models_sequences: The recordings.
      window: Window length (s).
      overlap: Overlap between consecutive windows (s), ``0 <= overlap < window``.
      min_samples: A trailing window with fewer samples is merged into the previous one (which
        then runs to the end of the recording, so no sample is left out).
      velocity_samples: Samples in the fit that estimates an unmeasured velocity (>= 3).

    Raises:
      ValueError: Bad lengths, or a window start whose state cannot be read from the data (a
        joint without a measured position, or a free/ball joint without measured velocity).
    """
    _check_window_args(window, overlap, velocity_samples)
    ms = models_sequences
    model = ms.model
    out = _Windows()
    for si, (name, x0, ctrl, meas) in enumerate(ms.sequences()):
        # every window is normalised by its whole recording (or what that one used)
        ref = ms.rms_reference[si] if ms.rms_reference is not None else None
        ref = meas if ref is None else ref
        t = meas.times
        positions = _scalar_position_columns(model, meas)
        activation = _nominal_activation(ms, si) if model.na else None
        inputs, constants = ms.law_data(si)
        for k, (s, end) in enumerate(_window_spans(t, window, overlap, min_samples)):
            keep = (t >= s - 1e-12) & (t <= end + 1e-12)
            sub = TimeSeries(t[keep], meas.data[keep], meas.signal_mapping)
            if k == 0:
                start_state = x0.copy()
            else:
                start_state = _window_start(
                    model, meas, sub, positions, activation, velocity_samples, name
                )
            out.add(f"{name}#{k}", start_state, ctrl, sub, ref, inputs, constants)
    return out.sequences(ms)


def _check_window_args(window: float, overlap: float, velocity_samples: int) -> None:
    """The lengths of :func:`split_windows` are valid."""
    if not window > 0:
        raise ValueError(must_be("window", "> 0 seconds", window))
    if not 0 <= overlap < window:
        raise ValueError(must_be("overlap", f"in [0, window={window})", overlap))
    if not isinstance(velocity_samples, int | np.integer) or velocity_samples < 3:
        raise ValueError(must_be("velocity_samples", "an integer >= 3", velocity_samples))


@dataclass
class _Windows:
    """The windows made so far: names, initial states, controls, measurements, RMS refs,
    the force laws' recorded inputs and constants (their recording's)."""

    names: list[str] = field(default_factory=list)
    x0s: list[np.ndarray] = field(default_factory=list)
    ctrls: list[TimeSeries | None] = field(default_factory=list)
    senss: list[TimeSeries] = field(default_factory=list)
    refs: list[TimeSeries | None] = field(default_factory=list)
    inputs: list[TimeSeries | None] = field(default_factory=list)
    constants: list[dict[str, float]] = field(default_factory=list)

    def add(
        self,
        name: str,
        x0: np.ndarray,
        ctrl: TimeSeries | None,
        sens: TimeSeries,
        ref: TimeSeries | None,
        inputs: TimeSeries | None,
        constants: dict[str, float],
    ) -> None:
        self.names.append(name)
        self.x0s.append(x0)
        self.ctrls.append(ctrl)
        self.senss.append(sens)
        self.refs.append(ref)
        self.inputs.append(inputs)
        self.constants.append(constants)

    def sequences(self, ms: ModelSequences) -> ModelSequences:
        """The windows as the sequences of a copy of ``ms``."""
        return ModelSequences(
            ms.name, ms.spec, self.names, self.x0s, self.ctrls, self.senss, rms_reference=self.refs,
            inputs=self.inputs, constants=self.constants,
        )  # fmt: skip


def _window_spans(
    t: np.ndarray, window: float, overlap: float, min_samples: int
) -> list[tuple[float, float]]:
    """``(start, end)`` (s) of the windows over the sample times ``t``: ``window`` long,
    starting ``window - overlap`` apart; a trailing window with fewer than ``min_samples``
    samples is merged into the previous one (which then runs to the end)."""
    spans = [(t[0], t[0] + window)]
    while spans[-1][0] + window - overlap < t[-1]:
        start = spans[-1][0] + window - overlap
        spans.append((start, start + window))
    last = (t >= spans[-1][0] - 1e-12).sum()
    if len(spans) > 1 and last < min_samples:  # too short: the previous window takes it
        spans.pop()
        spans[-1] = (spans[-1][0], t[-1])
    return spans


def _window_start(
    model: mujoco.MjModel,
    meas: TimeSeries,
    sub: TimeSeries,
    positions: dict[int, int],
    activation: Callable[[float], np.ndarray] | None,
    velocity_samples: int,
    name: str,
) -> np.ndarray:
    """The initial state of the window ``sub`` of the recording ``meas``: measured positions
    and velocities, unmeasured hinge/slide velocities from :func:`local_slope` over the whole
    recording (``positions``: their columns), activations from ``activation(t)``.

    Raises:
      ValueError: A position or a free/ball joint velocity is not measured.
    """
    qpos, qvel = initial_state_from_sensors(model, sub, fill=np.nan)
    for j, col in positions.items():
        if np.isnan(qvel[model.jnt_dofadr[j]]):
            t0 = float(sub.times[0])
            qvel[model.jnt_dofadr[j]] = local_slope(
                meas.times, meas.data[:, col], t0, velocity_samples
            )
    _check_window_state(model, qpos, qvel, name)
    act = None if activation is None else activation(float(sub.times[0]))
    return create_initial_state(model, qpos, qvel, act, time=float(sub.times[0]))


def _nominal_activation(ms: ModelSequences, si: int) -> Callable[[float], np.ndarray]:
    """``activation(t)``: the actuator activations (filters, integrators) of sequence ``si``
    at time ``t``, from a simulation of the whole sequence with the nominal model (they are
    not measured; zero-order-hold controls on the simulation grid)."""
    model = ms.model
    _, x0, ctrl, meas = ms.sequences()[si]
    dt = float(model.opt.timestep)
    t0 = float(meas.times[0])
    grid = t0 + dt * np.arange(grid_length(t0, float(meas.times[-1]), dt))
    assert ctrl is not None  # an activation needs an actuator
    control = ctrl.data[zoh_indices(ctrl.times, grid)][:, ms.control_columns(si)]
    (traj,) = sysid_rollout(model, None, control, x0)
    acts = traj.state_array()[:, state_slices(model)["act"]]

    def activation(t: float) -> np.ndarray:
        k = int(np.clip(np.searchsorted(grid, t + 1e-9 * dt) - 1, 0, len(grid) - 1))
        return cast(np.ndarray, acts[k].copy())

    return activation


def _check_window_state(
    model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, name: str
) -> None:
    """Names the joints whose start position or velocity the data do not give."""

    def unknown(values: np.ndarray, adr: np.ndarray, width: dict[int, int]) -> list[str]:
        return [
            model.joint(j).name
            for j in range(model.njnt)
            if np.isnan(values[adr[j] : adr[j] + width[int(model.jnt_type[j])]]).any()
        ]

    no_pos = unknown(qpos, model.jnt_qposadr, _QPOS_WIDTH)
    no_vel = unknown(qvel, model.jnt_dofadr, _DOF_WIDTH)
    if no_pos:
        raise ValueError(
            f"split_windows: sequence {name!r} must measure the position of every joint to "
            f"start a window from the data, got none for {no_pos}; record jointpos sensors "
            "or <joint>_qpos columns"
        )
    if no_vel:
        raise ValueError(
            f"split_windows: sequence {name!r} must measure the velocity of its free and ball "
            f"joints (hinge and slide velocities are estimated from positions), got none for "
            f"{no_vel}; record their velocities or <joint>_qvel columns"
        )


_QPOS_WIDTH = {0: 7, 1: 4, 2: 1, 3: 1}  # mjtJoint: free, ball, slide, hinge
_DOF_WIDTH = {0: 6, 1: 3, 2: 1, 3: 1}
