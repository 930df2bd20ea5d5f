"""Evaluating models on three separate axes: one-step, open-loop, downstream.

A model can be judged by three different questions, and the answers need not agree:

1. **One-step error** (fidelity): from every recorded state, simulate one sample period
   under the recorded command and compare with the next recorded state.
2. **Open-loop error against horizon** (action-conditioned accuracy): from many recorded
   states along the recordings, simulate ``h`` seconds under the recorded commands without
   correction and compare with the recorded state ``h`` later, for horizons from 0.1 s to
   the whole recording. Small one-step errors can compound into large open-loop ones.
3. **Downstream success** (utility, optional): a closed-loop task given as a Python callable
   ``task(model) -> DownstreamResult``, e.g. :func:`planner_task` (the cart-pole swing-up
   planner of :mod:`mjsysid.lab.planning` using the model as its belief).

Errors. A state is the joints' positions and velocities (``qpos``, ``qvel``) read from the
recordings' ``jointpos``/``jointvel`` sensors or ``<joint>_qpos``/``<joint>_qvel`` columns
(hinge and slide velocities that are not measured are central differences of the
positions). For component ``c`` at horizon ``h`` the error is the RMS over the starts,
``e_c(h) = sqrt(mean_i (x̂_ic(h) - x_ic(h))²)``; the *normalised* error of a horizon is
``E(h) = sqrt(mean_c (e_c(h) / s_c)²)`` with ``s_c`` the standard deviation of component
``c`` over the recordings, so ``E = 1`` is an error as large as the signal's own spread.
Controls are held (zero-order hold) on the simulation grid ``t_0 + k·dt``; recorded samples
must lie on that grid. All starts of a recording are simulated in one batched rollout
(:class:`~mjsysid.sim.rollout.BatchRollout`), read at every horizon. A rollout that diverges
has an infinite error from the step it diverged on.

Limits: activations (filter or integrator actuators) are not measured and not supported;
free and ball joints' quaternions are compared componentwise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import create_initial_state, state_slices
from mjsysid.data.timeseries import SignalType, TimeSeries, signal_source_indices
from mjsysid.lab.planning import (
    EpisodeCriterion,
    PlannerOptions,
    PredictiveSampling,
    TrajectoryCost,
    cartpole_cost,
    cartpole_success,
    run_episode,
)
from mjsysid.objective.alignment import zoh_indices
from mjsysid.sim.rollout import BatchRollout
from mjsysid.util.errors import must_be

__all__ = [
    "DEFAULT_HORIZONS",
    "DownstreamResult",
    "DownstreamTask",
    "EvaluationReport",
    "HorizonErrors",
    "ModelEvaluation",
    "StateRecording",
    "evaluate_model",
    "evaluate_models",
    "first_bad_step",
    "grid_steps",
    "horizon_errors",
    "horizon_grid",
    "normalised_error",
    "planner_task",
    "recordings_from_sequences",
    "rms_over_starts",
    "signal_scales",
    "start_indices",
    "state_components",
]

logger = logging.getLogger(__name__)

#: Open-loop horizons [s] tried by default (those longer than the longest recording are
#: dropped, and the whole recording is added).
DEFAULT_HORIZONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0)
_GRID_TOL = 1e-6  # of dt: how far a sample may lie off the simulation grid

Progress = Callable[[str], None]


# --------------------------------------------------------------------------------------------
# Recorded states
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateRecording:
    """A recording as states and held controls on the simulation grid.

    Attributes:
        name: The recording's name.
        t0: Time of the first sample [s]; the grid is ``t0 + k·dt``.
        dt: Simulation timestep [s].
        control: Controls held on the grid, shape ``(ngrid, nu)``; row ``k`` acts during
            step ``k``.
        sample_steps: Grid step of each recorded sample, shape ``(nsample,)``, increasing.
        states: Recorded ``(qpos, qvel)`` at the samples, shape ``(nsample, nq + nv)``.
    """

    name: str
    t0: float
    dt: float
    control: np.ndarray
    sample_steps: np.ndarray
    states: np.ndarray

    @property
    def duration(self) -> float:
        """Time from the first to the last sample [s]."""
        return float(self.sample_steps[-1] - self.sample_steps[0]) * self.dt

    @property
    def sample_period(self) -> int:
        """The usual spacing of the samples, in grid steps (at least 1)."""
        gaps = np.diff(self.sample_steps)
        return max(1, int(np.median(gaps))) if gaps.size else 1

    @classmethod
    def from_states(
        cls,
        name: str,
        times: np.ndarray,
        states: np.ndarray,
        control: np.ndarray,
        dt: float,
    ) -> StateRecording:
        """A recording from states and controls sampled every ``dt`` (a simulated truth).

        Args:
            name: Its name.
            times: Sample times, shape ``(n,)`` [s], ``dt`` apart.
            states: ``(qpos, qvel)`` at ``times``, shape ``(n, nq + nv)``.
            control: Control during each step, shape ``(n, nu)``.
            dt: The simulation timestep [s].
        """
        times = np.asarray(times, dtype=float)
        steps = grid_steps(times, float(times[0]), dt, name)
        return cls(name, float(times[0]), dt, np.asarray(control, float), steps, np.asarray(states))


def grid_steps(times: np.ndarray, t0: float, dt: float, name: str) -> np.ndarray:
    """The grid step ``k`` of each time ``t0 + k·dt``; the times must lie on the grid."""
    k = np.rint((times - t0) / dt)
    off = np.abs(times - t0 - k * dt)
    if np.any(off > _GRID_TOL * dt + 1e-12):
        raise ValueError(
            must_be(
                f"recording {name!r}: sample times",
                f"on the simulation grid t0 + k*{dt:g} s",
                f"{off.max():.3g} s off",
                hint="resample the recording to a multiple of the model timestep",
            )
        )
    return k.astype(int)


def _measured_states(model: mujoco.MjModel, sens: TimeSeries) -> np.ndarray:
    """``(qpos, qvel)`` at every sample, shape ``(n, nq + nv)``, NaN where not measured."""
    n = sens.data.shape[0]
    qpos, qvel = np.full((n, model.nq), np.nan), np.full((n, model.nv), np.nan)
    assert sens.signal_mapping is not None
    scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    for name, (stype, cols) in sens.signal_mapping.items():
        if stype == SignalType.MjStateQPos:
            qpos[:, signal_source_indices(model, name, stype)] = sens.data[:, cols]
        elif stype == SignalType.MjStateQVel:
            qvel[:, signal_source_indices(model, name, stype)] = sens.data[:, cols]
        elif stype == SignalType.MjSensor:
            i = model.sensor(name).id
            j = int(model.sensor_objid[i])
            if int(model.sensor_objtype[i]) != int(mujoco.mjtObj.mjOBJ_JOINT):
                continue
            if int(model.jnt_type[j]) not in scalar:
                continue
            if int(model.sensor_type[i]) == int(mujoco.mjtSensor.mjSENS_JOINTPOS):
                qpos[:, model.jnt_qposadr[j]] = sens.data[:, cols[0]]
            elif int(model.sensor_type[i]) == int(mujoco.mjtSensor.mjSENS_JOINTVEL):
                qvel[:, model.jnt_dofadr[j]] = sens.data[:, cols[0]]
    _fill_velocities(model, sens.times, qpos, qvel)
    return np.hstack([qpos, qvel])


def _fill_velocities(
    model: mujoco.MjModel, times: np.ndarray, qpos: np.ndarray, qvel: np.ndarray
) -> None:
    """Unmeasured hinge/slide velocities as central differences of their positions."""
    for j in range(model.njnt):
        if int(model.jnt_type[j]) not in (2, 3):  # slide, hinge
            continue
        dof, adr = model.jnt_dofadr[j], model.jnt_qposadr[j]
        if np.isnan(qvel[:, dof]).all() and not np.isnan(qpos[:, adr]).any() and times.size > 1:
            qvel[:, dof] = np.gradient(qpos[:, adr], times)


def recordings_from_sequences(ms: ModelSequences) -> list[StateRecording]:
    """The sequences of ``ms`` as :class:`StateRecording` (states read from their sensors).

    Raises:
        ValueError: A joint's position or velocity is not measured, the model has
            activations, or samples lie off the simulation grid.
    """
    model = ms.model
    if model.na:
        raise ValueError(
            must_be("the model", "without actuator activations (na = 0)", f"na = {model.na}")
        )
    dt = float(model.opt.timestep)
    out = []
    for si, (name, _x0, ctrl, meas) in enumerate(ms.sequences()):
        states = _measured_states(model, meas)
        missing = np.isnan(states).any(axis=0)
        if missing.any():
            raise ValueError(
                f"recording {name!r} must measure every joint position and velocity to evaluate "
                f"open-loop predictions, got none for state entries {np.flatnonzero(missing)} "
                "(qpos then qvel); record jointpos/jointvel sensors or <joint>_qpos columns"
            )
        t0 = float(meas.times[0])
        steps = grid_steps(meas.times, t0, dt, name)
        grid = t0 + dt * np.arange(steps[-1] + 1)
        assert ctrl is not None
        control = ctrl.data[zoh_indices(ctrl.times, grid)][:, ms.control_columns(si)]
        out.append(StateRecording(name, t0, dt, control, steps, states))
    return out


# --------------------------------------------------------------------------------------------
# Pure numerical pieces
# --------------------------------------------------------------------------------------------


def first_bad_step(times: np.ndarray, t0: np.ndarray, dt: float) -> np.ndarray:
    """The first step at which each rollout's clock is wrong (MuJoCo reset it on divergence).

    Args:
        times: Time after each step, shape ``(nbatch, nstep)`` [s].
        t0: Start times, shape ``(nbatch,)`` [s].
        dt: Timestep [s].

    Returns:
        Shape ``(nbatch,)``: the 1-based horizon (in steps) from which predictions are invalid,
        ``nstep + 1`` for rollouts that never diverged.
    """
    nstep = times.shape[1]
    expected = t0[:, None] + dt * np.arange(1, nstep + 1)
    bad = ~np.isfinite(times) | (np.abs(times - expected) > 1e-6 * dt + 1e-9 * np.abs(expected))
    return np.where(bad.any(axis=1), bad.argmax(axis=1) + 1, nstep + 1)


def horizon_errors(
    predicted: np.ndarray,
    valid_until: np.ndarray,
    start_steps: np.ndarray,
    horizon_steps: np.ndarray,
    recording: StateRecording,
) -> np.ndarray:
    """Prediction errors of every start at every horizon.

    Args:
        predicted: States after each step, shape ``(nstart, nstep, ncomp)``.
        valid_until: First invalid horizon of each rollout (:func:`first_bad_step`).
        start_steps: Grid step of each start, shape ``(nstart,)``.
        horizon_steps: Horizons in steps, shape ``(nh,)``, each ``<= nstep``.
        recording: Where the measured states are.

    Returns:
        ``x̂ - x``, shape ``(nstart, nh, ncomp)``: NaN where no sample lies at the start plus
        the horizon, ``inf`` where the rollout had diverged.
    """
    last = int(recording.sample_steps[-1])
    sample_at = np.full(last + 1, -1)
    sample_at[recording.sample_steps] = np.arange(recording.sample_steps.size)
    target = start_steps[:, None] + horizon_steps[None, :]
    inside = target <= last
    j = np.where(inside, sample_at[np.minimum(target, last)], -1)
    rows = np.arange(predicted.shape[0])[:, None]
    err = predicted[rows, horizon_steps[None, :] - 1] - recording.states[j]
    err[j < 0] = np.nan
    diverged = (horizon_steps[None, :] >= valid_until[:, None]) & (j >= 0)
    err[diverged] = np.inf
    return np.asarray(err)


def rms_over_starts(errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RMS of the errors over the starts that have a sample there.

    Args:
        errors: Shape ``(nstart, nh, ncomp)`` (NaN: no sample; ``inf``: diverged).

    Returns:
        ``(rms, count)``: shape ``(nh, ncomp)`` (NaN where no start counts) and ``(nh,)``.
    """
    have = ~np.isnan(errors)
    count = have.all(axis=2).sum(axis=0)
    sq = np.where(have, errors, 0.0) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        rms = np.sqrt(sq.sum(axis=0) / have.sum(axis=0))
    return rms, count


def normalised_error(rms: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``sqrt(mean_c (rms_c / s_c)²)`` over the last axis (components).

    Args:
        rms: Shape ``(..., ncomp)``.
        scale: Each component's spread ``s_c``, shape ``(ncomp,)``, positive.
    """
    return np.sqrt(np.mean((rms / scale) ** 2, axis=-1))


def signal_scales(recordings: Sequence[StateRecording]) -> np.ndarray:
    """Standard deviation of each state component over all recordings (1 where constant)."""
    stacked = np.vstack([r.states for r in recordings])
    s = stacked.std(axis=0)
    return np.where(s > 1e-12 * np.maximum(1.0, np.abs(stacked).max(axis=0)), s, 1.0)


def horizon_grid(horizons: Sequence[float], recordings: Sequence[StateRecording]) -> np.ndarray:
    """Horizons in grid steps: multiples of the sample period, up to the longest recording
    (whose whole length is always the last horizon), distinct and increasing."""
    dt, period = recordings[0].dt, max(r.sample_period for r in recordings)
    longest = max(int(r.sample_steps[-1] - r.sample_steps[0]) for r in recordings)
    steps = [max(period, period * round(h / dt / period)) for h in horizons if h > 0]
    steps = [s for s in steps if s < longest] + [longest]
    return np.array(sorted(set(steps)), dtype=int)


def start_indices(recording: StateRecording, nstart: int) -> np.ndarray:
    """``nstart`` sample indices spread evenly over the recording, the first one included."""
    n = recording.sample_steps.size - 1  # the last sample has no future
    return np.unique(np.linspace(0, max(n - 1, 0), min(nstart, max(n, 1))).round().astype(int))


# --------------------------------------------------------------------------------------------
# Rollouts
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HorizonErrors:
    """Errors of one model against horizon.

    Attributes:
        horizons: Horizons [s], shape ``(nh,)``.
        rms: RMS error of each state component, shape ``(nh, ncomp)`` (qpos then qvel).
        normalised: Normalised error (module docstring), shape ``(nh,)``.
        starts: Starts that count at each horizon, shape ``(nh,)``.
    """

    horizons: np.ndarray
    rms: np.ndarray
    normalised: np.ndarray
    starts: np.ndarray


def _rollout_errors(
    runner: BatchRollout,
    model: mujoco.MjModel,
    recording: StateRecording,
    starts: np.ndarray,
    horizon_steps: np.ndarray,
) -> np.ndarray:
    """Errors ``(nstart, nh, ncomp)`` of ``model`` from the samples ``starts`` of
    ``recording``: one batched rollout to the longest horizon (controls past the end of the
    recording hold its last value; no sample is compared there)."""
    nq = model.nq
    nstep = int(horizon_steps.max())
    start_steps = recording.sample_steps[starts]
    x0 = np.stack(
        [
            create_initial_state(
                model,
                recording.states[i, :nq],
                recording.states[i, nq:],
                time=recording.t0 + recording.dt * recording.sample_steps[i],
            )
            for i in starts
        ]
    )
    rows = np.minimum(start_steps[:, None] + np.arange(nstep)[None, :], len(recording.control) - 1)
    control = recording.control[rows]
    raw, _sens, _ok = runner.run([model] * len(starts), x0, control, align=False)
    sl = state_slices(model)
    predicted = np.concatenate([raw[..., sl["qpos"]], raw[..., sl["qvel"]]], axis=-1)
    valid = first_bad_step(raw[..., 0], x0[:, 0], recording.dt)
    with np.errstate(invalid="ignore", over="ignore"):
        return horizon_errors(predicted, valid, start_steps, horizon_steps, recording)


def _errors_over(
    runner: BatchRollout,
    model: mujoco.MjModel,
    recordings: Sequence[StateRecording],
    horizon_steps: np.ndarray,
    nstart: int | None,
    scale: np.ndarray,
) -> HorizonErrors:
    """:class:`HorizonErrors` over all recordings (``nstart=None``: every sample starts)."""
    blocks = []
    for rec in recordings:
        n = rec.sample_steps.size
        starts = np.arange(n - 1) if nstart is None else start_indices(rec, nstart)
        blocks.append(_rollout_errors(runner, model, rec, starts, horizon_steps))
    rms, count = rms_over_starts(np.concatenate(blocks, axis=0))
    return HorizonErrors(horizon_steps * recordings[0].dt, rms, normalised_error(rms, scale), count)


# --------------------------------------------------------------------------------------------
# Downstream tasks
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DownstreamResult:
    """The outcome of a closed-loop task: ``successes`` out of ``trials``."""

    successes: int
    trials: int

    @property
    def rate(self) -> float:
        """Success rate in [0, 1] (NaN without trials)."""
        return self.successes / self.trials if self.trials else float("nan")


class DownstreamTask(Protocol):
    """A closed-loop task that uses a model: ``task(model) -> DownstreamResult``."""

    def __call__(self, model: mujoco.MjModel, /) -> DownstreamResult: ...


@dataclass(frozen=True)
class _PlannerTask:
    """:func:`planner_task`'s callable (see there)."""

    real_model: mujoco.MjModel
    starts: np.ndarray
    duration: float
    cost: TrajectoryCost
    options: PlannerOptions
    success: EpisodeCriterion
    progress: Progress | None
    nthread: int | None

    def __call__(self, model: mujoco.MjModel, /) -> DownstreamResult:
        wins = 0
        with PredictiveSampling(model, self.cost, self.options, nthread=self.nthread) as planner:
            for i, start in enumerate(self.starts):
                episode = run_episode(
                    self.real_model,
                    planner,
                    start,
                    self.duration,
                    success=self.success,
                    seed=(self.options.seed, i),
                )
                wins += bool(episode.success)
                if self.progress is not None:
                    verdict = "success" if episode.success else "failure"
                    self.progress(
                        f"      episode {i + 1}/{len(self.starts)}: {verdict} "
                        f"({episode.wall_time:.1f} s)"
                    )
        return DownstreamResult(wins, len(self.starts))


def planner_task(
    real_model: mujoco.MjModel,
    starts: np.ndarray,
    *,
    duration: float = 10.0,
    cost: TrajectoryCost | None = None,
    options: PlannerOptions | None = None,
    success: EpisodeCriterion | None = None,
    progress: Progress | None = None,
    nthread: int | None = None,
) -> DownstreamTask:
    """A downstream task: the predictive-sampling planner, believing the model it is given,
    acts on ``real_model`` from each start; its result counts the successful episodes.

    Same episodes as :func:`~mjsysid.lab.planning.evaluate_planner` (episode ``i`` seeds the
    planner with ``(options.seed, i)``); defaults are the cart-pole swing-up's.

    Args:
        real_model: The system acted on.
        starts: Initial physics states, shape ``(nstart, nstate)``.
        duration: Episode length [s].
        cost: Trajectory cost (default :func:`~mjsysid.lab.planning.cartpole_cost`).
        options: Planner settings.
        success: Episode criterion (default :func:`~mjsysid.lab.planning.cartpole_success`).
        progress: Called with one line per finished episode.
        nthread: Rollout threads of the planner.
    """
    starts = np.asarray(starts, dtype=float)
    if starts.ndim != 2:
        raise ValueError(must_be("starts", "a 2-D array (nstart, nstate)", starts))
    return _PlannerTask(
        real_model,
        starts,
        duration,
        cartpole_cost if cost is None else cost,
        PlannerOptions() if options is None else options,
        cartpole_success if success is None else success,
        progress,
        nthread,
    )


# --------------------------------------------------------------------------------------------
# The evaluation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelEvaluation:
    """One model on the three axes.

    Attributes:
        name: The model's label.
        one_step: Errors over one sample period from every recorded state (one horizon).
        open_loop: Errors against horizon from :attr:`EvaluationReport.starts` starts.
        downstream: The closed-loop task's result (``None`` without a task).
    """

    name: str
    one_step: HorizonErrors
    open_loop: HorizonErrors
    downstream: DownstreamResult | None = None

    @property
    def one_step_error(self) -> float:
        """The normalised one-step error."""
        return float(self.one_step.normalised[0])

    @property
    def growth(self) -> float:
        """Normalised open-loop error over the whole recording divided by the one-step
        error: how much the errors compound (``inf`` when the one-step error is 0)."""
        final, first = float(self.open_loop.normalised[-1]), self.one_step_error
        if first == 0.0:
            return 0.0 if final == 0.0 else float("inf")
        return final / first


@dataclass(frozen=True)
class EvaluationReport:
    """Every model's evaluation on the same recordings.

    Attributes:
        models: One evaluation per model, in the order given.
        components: Names of the state components (``<joint>_qpos...``, ``..._qvel...``).
        scales: Standard deviation of each component over the recordings (normalisation).
        recordings: The recordings' names.
        starts: Open-loop starts per recording (requested).
    """

    models: tuple[ModelEvaluation, ...]
    components: tuple[str, ...]
    scales: np.ndarray
    recordings: tuple[str, ...]
    starts: int = 0

    def model(self, name: str) -> ModelEvaluation:
        """The evaluation of the model labelled ``name``."""
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(f"no model {name!r}; the models are {[m.name for m in self.models]}")


def state_components(model: mujoco.MjModel) -> tuple[str, ...]:
    """Names of the ``(qpos, qvel)`` entries: ``<joint>_qpos`` (``...[i]`` for wide joints)."""
    names: list[str] = []
    for field_name, width in (
        ("qpos", {0: 7, 1: 4, 2: 1, 3: 1}),
        ("qvel", {0: 6, 1: 3, 2: 1, 3: 1}),
    ):
        for j in range(model.njnt):
            w = width[int(model.jnt_type[j])]
            base = f"{model.joint(j).name or f'joint{j}'}_{field_name}"
            names += [base] if w == 1 else [f"{base}[{i}]" for i in range(w)]
    return tuple(names)


def evaluate_model(
    name: str,
    model: mujoco.MjModel,
    recordings: Sequence[StateRecording],
    *,
    horizons: Sequence[float] = DEFAULT_HORIZONS,
    starts: int = 20,
    scale: np.ndarray | None = None,
    downstream: DownstreamTask | None = None,
    runner: BatchRollout | None = None,
) -> ModelEvaluation:
    """Evaluates one model on the recordings (see the module docstring for the errors).

    Args:
        name: Its label.
        model: The model; the recordings' state sizes.
        recordings: Recorded states and controls on the model's grid.
        horizons: Open-loop horizons [s] (rounded to the sample period; the whole recording
            is added).
        starts: Open-loop starts per recording, spread evenly along it.
        scale: Normalisation of each component (default :func:`signal_scales`).
        downstream: The closed-loop task (optional).
        runner: Batched rollouts to reuse (default: a new one).
    """
    _check_model(name, model, recordings)
    scale = signal_scales(recordings) if scale is None else scale
    owned = runner is None
    runner = BatchRollout() if runner is None else runner
    try:
        period = np.array([max(r.sample_period for r in recordings)])
        one = _errors_over(runner, model, recordings, period, None, scale)
        steps = horizon_grid(horizons, recordings)
        open_loop = _errors_over(runner, model, recordings, steps, starts, scale)
    finally:
        if owned:
            runner.close()
    result = None if downstream is None else downstream(model)
    return ModelEvaluation(name, one, open_loop, result)


def _check_model(name: str, model: mujoco.MjModel, recordings: Sequence[StateRecording]) -> None:
    if not isinstance(model, mujoco.MjModel):
        raise TypeError(must_be(f"model {name!r}", "a mujoco.MjModel", model))
    if not recordings:
        raise ValueError(must_be("recordings", "a non-empty sequence of StateRecording", []))
    rec = recordings[0]
    if rec.states.shape[1] != model.nq + model.nv or rec.control.shape[1] != model.nu:
        raise ValueError(
            must_be(
                f"model {name!r}",
                f"of the recordings' sizes (nq + nv = {rec.states.shape[1]}, "
                f"nu = {rec.control.shape[1]})",
                f"nq + nv = {model.nq + model.nv}, nu = {model.nu}",
            )
        )
    if abs(float(model.opt.timestep) - rec.dt) > 1e-12:
        raise ValueError(
            must_be(
                f"model {name!r}: timestep", f"the recordings' {rec.dt:g} s", model.opt.timestep
            )
        )


def evaluate_models(
    models: Mapping[str, mujoco.MjModel],
    recordings: Sequence[StateRecording] | ModelSequences,
    *,
    horizons: Sequence[float] = DEFAULT_HORIZONS,
    starts: int = 20,
    downstream: DownstreamTask | None = None,
    progress: Progress | None = None,
) -> EvaluationReport:
    """Evaluates several models (nominal, identified, a truth) on the same recordings.

    Args:
        models: ``{label: model}``, in the order of the table.
        recordings: :class:`StateRecording` or a :class:`ModelSequences` (read with
            :func:`recordings_from_sequences`).
        horizons: Open-loop horizons [s].
        starts: Open-loop starts per recording.
        downstream: A closed-loop task run with every model (optional).
        progress: Called with a line as each model starts.

    Returns:
        The report (:mod:`mjsysid.lab.evaluate_report` writes it as a table, JSON, HTML).
    """
    if isinstance(recordings, ModelSequences):
        recordings = recordings_from_sequences(recordings)
    if not models:
        raise ValueError(must_be("models", "a non-empty {label: MjModel} mapping", models))
    if not isinstance(starts, int) or starts < 1:
        raise ValueError(must_be("starts", "a positive int", starts))
    scale = signal_scales(recordings)
    out = []
    with BatchRollout() as runner:
        for name, model in models.items():
            if progress is not None:
                task = " and the downstream task" if downstream is not None else ""
                progress(f"    evaluating {name!r}: one-step, open-loop{task} ...")
            out.append(
                evaluate_model(
                    name,
                    model,
                    recordings,
                    horizons=horizons,
                    starts=starts,
                    scale=scale,
                    downstream=downstream,
                    runner=runner,
                )
            )
    first = next(iter(models.values()))
    return EvaluationReport(
        tuple(out), state_components(first), scale, tuple(r.name for r in recordings), starts
    )
