"""Model-based planning with predictive sampling, and a cart-pole test bench for it.

Why this lives in a system-identification toolbox: a planner's model is a belief about the
system. When the belief is wrong (here: the pole's mass) the plans it finds stop working on the
real system. This module lets you measure that: plan with one ``MjModel`` (the belief), act on
another (the "real" system), and count successes.

Predictive sampling (Howell et al., "Predictive Sampling: Real-time Behaviour Synthesis with
MuJoCo", arXiv:2212.00541) is the simplest sampling-based model-predictive controller:

1. The control over the next ``horizon`` seconds is a spline with ``num_knots`` knots at times
   ``t_j = j * horizon / (num_knots - 1)``, values ``U_j`` (one row of ``nu`` controls each).
   Between knots the control is interpolated linearly:
   ``u(t) = (1 - w) U_j + w U_{j+1}`` with ``w = (t - t_j) / (t_{j+1} - t_j)``;
   before the first knot and after the last one it is held constant. Because interpolation is
   linear in the knot values, evaluating a spline on a fixed time grid is one matrix product
   ``u = W @ U`` with ``W`` of shape ``(ntime, nknot)`` (:func:`linear_interpolation_matrix`).
2. At every replan the previous best spline (the *nominal*) is shifted to start at the current
   time (knots re-sampled from the old spline at ``t_j + elapsed``), then perturbed with
   Gaussian noise on the knot values: ``U_i = clip(U_nominal + sigma_i * N(0, I))``. The noise
   scales ``sigma`` are split across the samples (sample ``i`` uses
   ``noise_scales[(i - 1) % len(noise_scales)]``), so with the defaults a third of the
   candidates explore finely (0.5 N), a third moderately (2 N) and a third boldly (8 N).
   Candidate 0 is always the unperturbed nominal, so the planner never does worse (by its own
   model) than keeping its previous plan.
3. All candidates are rolled out from the measured state with the planner's model in **one**
   batched ``mujoco.rollout`` call (persistent thread pool, one reused ``MjData`` per thread);
   a :class:`TrajectoryCost` scores each predicted trajectory, and the cheapest spline becomes
   the new nominal. It is applied until the next replan.

Conventions: a *state* is MuJoCo's ``mjSTATE_PHYSICS`` vector (``qpos``, ``qvel``, ``act``,
plus history/plastic state where the model has any); for the bundled cart-pole it is
``(cart position [m], pole angle [rad], cart velocity [m/s], pole angular velocity [rad/s])``
with angle 0 upright. Controls are ``MjData.ctrl`` vectors (newtons for the cart-pole).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.resources
import logging
import math
import os
import time as _time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import mujoco
import mujoco.rollout
import numpy as np

from mjsysid.util.errors import must_be

__all__ = [
    "CARTPOLE_RAIL_LIMIT",
    "ControlSpline",
    "EpisodeCriterion",
    "EpisodeResult",
    "Evaluation",
    "PlannerOptions",
    "PredictiveSampling",
    "TrajectoryCost",
    "cartpole_cost",
    "cartpole_model",
    "cartpole_starts",
    "cartpole_success",
    "evaluate_planner",
    "linear_interpolation_matrix",
    "run_episode",
    "sample_knots",
    "shift_knots",
    "wrap_angle",
]

logger = logging.getLogger(__name__)

_PHYSICS = int(mujoco.mjtState.mjSTATE_PHYSICS)
_FULLPHYSICS = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
_TIME = int(mujoco.mjtState.mjSTATE_TIME)

#: Half-length of the bundled cart-pole's rails [m] (the ``slider`` joint range).
CARTPOLE_RAIL_LIMIT = 1.8
_CARTPOLE_RESOURCE = "examples/cartpole/cartpole.xml"
_CART_POS, _POLE_ANGLE, _CART_VEL, _POLE_ANGVEL = 0, 1, 2, 3


# --------------------------------------------------------------------------------------------
# Protocols and value types
# --------------------------------------------------------------------------------------------


class TrajectoryCost(Protocol):
    """Scores predicted trajectories; lower is better.

    Called as ``cost(states, controls)`` with ``states`` of shape ``(nsample, nstep, nstate)``
    (the physics state after each planning step) and ``controls`` of shape
    ``(nsample, nstep, nu)`` (the control applied during each step). Returns the total cost of
    each sample, shape ``(nsample,)``. Must not modify its inputs.
    """

    def __call__(self, states: np.ndarray, controls: np.ndarray, /) -> np.ndarray: ...


class EpisodeCriterion(Protocol):
    """Judges a finished episode: ``criterion(result) -> bool`` (``True`` means success)."""

    def __call__(self, result: EpisodeResult, /) -> bool: ...


@dataclass(frozen=True)
class PlannerOptions:
    """Settings of :class:`PredictiveSampling` (defaults follow Howell et al.'s cart-pole).

    Attributes:
        num_samples: Candidate splines per replan, the nominal included (at least 2).
        horizon: Planning horizon [s].
        num_knots: Spline knots spread evenly over the horizon (at least 2).
        noise_scales: Standard deviations of the knot noise [control units, N for the
            cart-pole], split evenly across the ``num_samples - 1`` perturbed candidates.
        replan_period: Time between replans [s] when driven by :func:`run_episode`.
        timestep: Planning timestep [s]; the planner's model copy integrates with it.
        seed: Seed of the noise generator (re-applied by :meth:`PredictiveSampling.reset`).
    """

    num_samples: int = 64
    horizon: float = 1.0
    num_knots: int = 4
    noise_scales: tuple[float, ...] = (0.5, 2.0, 8.0)
    replan_period: float = 0.04
    timestep: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("num_samples", "num_knots", "seed"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                raise TypeError(must_be(f"PlannerOptions.{name}", "an int", value))
        if self.num_samples < 2:
            raise ValueError(must_be("PlannerOptions.num_samples", "at least 2", self.num_samples))
        if self.num_knots < 2:
            raise ValueError(must_be("PlannerOptions.num_knots", "at least 2", self.num_knots))
        for name in ("horizon", "timestep", "replan_period"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(must_be(f"PlannerOptions.{name}", "a positive float", value))
        if self.timestep > self.horizon:
            raise ValueError(
                must_be("PlannerOptions.timestep", f"at most horizon={self.horizon}", self.timestep)
            )
        scales = np.asarray(self.noise_scales, dtype=float)
        if scales.ndim != 1 or scales.size == 0 or not np.all(np.isfinite(scales) & (scales >= 0)):
            raise ValueError(
                must_be(
                    "PlannerOptions.noise_scales",
                    "a non-empty sequence of finite non-negative floats",
                    self.noise_scales,
                )
            )
        object.__setattr__(self, "noise_scales", tuple(float(s) for s in scales))

    @property
    def nstep(self) -> int:
        """Planning steps per rollout, ``round(horizon / timestep)``."""
        return max(1, round(self.horizon / self.timestep))


@dataclass(frozen=True)
class ControlSpline:
    """A piecewise-linear control signal, held constant outside its knots.

    Attributes:
        times: Knot times, shape ``(nknot,)`` [s], strictly increasing.
        values: Knot values, shape ``(nknot, nu)`` [control units].
    """

    times: np.ndarray
    values: np.ndarray

    def __post_init__(self) -> None:
        times = np.array(self.times, dtype=float)
        values = np.array(self.values, dtype=float)
        if times.ndim != 1 or times.size < 2 or not np.all(np.diff(times) > 0):
            raise ValueError(must_be("times", "a strictly increasing 1-D array of >= 2", times))
        if values.ndim != 2 or values.shape[0] != times.size:
            raise ValueError(must_be("values", f"of shape ({times.size}, nu)", values))
        times.flags.writeable = False
        values.flags.writeable = False
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "values", values)

    def evaluate(self, query_times: np.ndarray) -> np.ndarray:
        """Controls at ``query_times`` (shape ``(ntime,)`` [s]), shape ``(ntime, nu)``."""
        return linear_interpolation_matrix(self.times, query_times) @ self.values

    def __call__(self, t: float) -> np.ndarray:
        """Control at time ``t`` [s], shape ``(nu,)``."""
        return self.evaluate(np.array([t]))[0]


@dataclass(frozen=True)
class EpisodeResult:
    """One closed-loop episode of :func:`run_episode`.

    Attributes:
        times: Simulation times, shape ``(nstep + 1,)`` [s], starting at 0.
        states: Real physics states at ``times``, shape ``(nstep + 1, nstate)``.
        controls: Control applied during each step, shape ``(nstep, nu)``.
        success: The episode criterion's verdict, or ``None`` when none was given.
        wall_time: Wall-clock duration of the episode [s].
    """

    times: np.ndarray
    states: np.ndarray
    controls: np.ndarray
    success: bool | None = None
    wall_time: float = 0.0

    def __post_init__(self) -> None:
        n = len(self.times)
        if self.states.shape[0] != n or self.controls.shape[0] != n - 1:
            raise ValueError(
                must_be(
                    "EpisodeResult arrays",
                    f"of lengths (n+1, n+1, n) with n+1={n}",
                    (self.times.shape, self.states.shape, self.controls.shape),
                )
            )


@dataclass(frozen=True)
class Evaluation:
    """Success statistics of a planner over several episodes (:func:`evaluate_planner`).

    Attributes:
        successes: Number of successful episodes.
        episodes: The episodes, in the order of the starts.
    """

    successes: int
    episodes: tuple[EpisodeResult, ...] = field(repr=False)

    @property
    def num_episodes(self) -> int:
        """Number of episodes run."""
        return len(self.episodes)

    @property
    def rate(self) -> float:
        """Success rate in [0, 1]."""
        return self.successes / self.num_episodes if self.episodes else float("nan")

    @property
    def wall_times(self) -> np.ndarray:
        """Wall-clock time of each episode, shape ``(num_episodes,)`` [s]."""
        return np.array([e.wall_time for e in self.episodes])


# --------------------------------------------------------------------------------------------
# Small pure functions
# --------------------------------------------------------------------------------------------


def linear_interpolation_matrix(knot_times: np.ndarray, query_times: np.ndarray) -> np.ndarray:
    """Weights ``W`` such that ``W @ knot_values`` interpolates linearly at ``query_times``.

    Args:
        knot_times: Shape ``(nknot,)`` [s], strictly increasing, ``nknot >= 2``.
        query_times: Shape ``(ntime,)`` [s]. Times outside the knots take the nearest end
            value (zero-order hold beyond the spline).

    Returns:
        ``W`` of shape ``(ntime, nknot)``; each row has at most two non-zeros summing to 1.
        With ``knot_values`` of shape ``(..., nknot, nu)``, ``W @ knot_values`` has shape
        ``(..., ntime, nu)``.
    """
    knots = np.asarray(knot_times, dtype=float)
    query = np.clip(np.asarray(query_times, dtype=float), knots[0], knots[-1])
    right = np.clip(np.searchsorted(knots, query, side="right"), 1, knots.size - 1)
    left = right - 1
    w = (query - knots[left]) / (knots[right] - knots[left])
    weights = np.zeros((query.size, knots.size))
    rows = np.arange(query.size)
    weights[rows, left] = 1.0 - w
    weights[rows, right] += w
    return weights


def shift_knots(knot_times: np.ndarray, knot_values: np.ndarray, elapsed: float) -> np.ndarray:
    """Re-samples a spline ``elapsed`` seconds later on the same relative knot times.

    Args:
        knot_times: Relative knot times, shape ``(nknot,)`` [s].
        knot_values: Shape ``(nknot, nu)``.
        elapsed: Time since the spline started [s] (>= 0); the tail beyond the last knot holds
            the last value.

    Returns:
        Values at ``knot_times + elapsed``, shape ``(nknot, nu)``.
    """
    times = np.asarray(knot_times, dtype=float)
    return linear_interpolation_matrix(times, times + elapsed) @ np.asarray(knot_values)


def sample_knots(
    nominal: np.ndarray,
    rng: np.random.Generator,
    noise_scales: Sequence[float],
    num_samples: int,
    low: np.ndarray,
    high: np.ndarray,
) -> np.ndarray:
    """Candidate knot values: the nominal plus Gaussian perturbations, clipped to bounds.

    Args:
        nominal: Knot values, shape ``(nknot, nu)``.
        rng: Noise source.
        noise_scales: Standard deviations; perturbed sample ``i >= 1`` uses
            ``noise_scales[(i - 1) % len(noise_scales)]``.
        num_samples: Number of candidates returned (nominal included).
        low, high: Control bounds, shape ``(nu,)`` (``-inf``/``inf`` where unlimited).

    Returns:
        Shape ``(num_samples, nknot, nu)``; row 0 is ``clip(nominal)``.
    """
    nominal = np.asarray(nominal, dtype=float)
    scales = np.asarray(noise_scales, dtype=float)
    per_sample = scales[np.arange(num_samples - 1) % scales.size]
    noise = rng.standard_normal((num_samples - 1, *nominal.shape))
    candidates = np.empty((num_samples, *nominal.shape))
    candidates[0] = nominal
    candidates[1:] = nominal + per_sample[:, None, None] * noise
    return np.clip(candidates, low, high)


def _component_indices(model: mujoco.MjModel, source: int, target: int) -> np.ndarray:
    """Indices of the ``target`` state components inside a ``source`` state vector.

    MuJoCo lays out a state vector as its components in increasing ``mjtState`` bit order, so
    the offsets follow from the component sizes.
    """
    indices, offset = [], 0
    bit = 1
    while bit <= source:
        if source & bit:
            size = mujoco.mj_stateSize(model, bit)
            if target & bit:
                indices.append(np.arange(offset, offset + size))
            offset += size
        bit <<= 1
    return np.concatenate(indices) if indices else np.zeros(0, dtype=int)


def _control_bounds(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    """Actuator control bounds, shapes ``(nu,)``; unlimited actuators get ``-inf``/``inf``."""
    limited = model.actuator_ctrllimited.astype(bool)
    low = np.where(limited, model.actuator_ctrlrange[:, 0], -np.inf)
    high = np.where(limited, model.actuator_ctrlrange[:, 1], np.inf)
    return low, high


def _physics_state(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    state = np.empty(mujoco.mj_stateSize(model, _PHYSICS))
    mujoco.mj_getState(model, data, state, _PHYSICS)
    return state


# --------------------------------------------------------------------------------------------
# The planner
# --------------------------------------------------------------------------------------------


class PredictiveSampling:
    """Predictive-sampling model-predictive controller (see the module docstring).

    Holds a private copy of the planner's model (its timestep set to
    ``options.timestep``), a persistent ``mujoco.rollout.Rollout`` thread pool with one
    ``MjData`` per thread, the nominal spline and the noise generator. Call :meth:`plan`
    with the measured state at each replan; call :meth:`close` (or use ``with``) to stop the
    thread pool.

    Args:
        model: The planner's belief about the system (not modified).
        cost: Scores candidate trajectories, see :class:`TrajectoryCost`.
        options: Planner settings.
        nthread: Rollout threads; ``None`` uses ``os.cpu_count()``, ``0`` rolls out on the
            calling thread.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        cost: TrajectoryCost,
        options: PlannerOptions | None = None,
        *,
        nthread: int | None = None,
    ) -> None:
        if not isinstance(model, mujoco.MjModel):
            hint = "compile it first: spec.compile()" if isinstance(model, mujoco.MjSpec) else ""
            raise TypeError(must_be("model", "a mujoco.MjModel", model, hint))
        if model.nu == 0:
            raise ValueError(must_be("model.nu", "at least 1 (the planner needs actuators)", 0))
        if not callable(cost):
            raise TypeError(must_be("cost", "a callable (states, controls) -> costs", cost))
        options = PlannerOptions() if options is None else options
        if not isinstance(options, PlannerOptions):
            raise TypeError(must_be("options", "a PlannerOptions", options))
        nthread = (os.cpu_count() or 1) if nthread is None else nthread
        if not isinstance(nthread, int) or nthread < 0:
            raise ValueError(must_be("nthread", "a non-negative int or None", nthread))

        self._options = options
        self._cost = cost
        self._model = copy.deepcopy(model)
        self._model.opt.timestep = options.timestep
        self._nthread = nthread
        self._datas = [mujoco.MjData(self._model) for _ in range(max(1, nthread))]
        self._rollout = mujoco.rollout.Rollout(nthread=nthread)

        nstep = options.nstep
        self._knot_times = np.linspace(0.0, options.horizon, options.num_knots)
        step_times = np.arange(nstep) * options.timestep
        self._weights = linear_interpolation_matrix(self._knot_times, step_times)
        self._low, self._high = _control_bounds(self._model)

        self._nstate = mujoco.mj_stateSize(self._model, _PHYSICS)
        nfull = mujoco.mj_stateSize(self._model, _FULLPHYSICS)
        self._physics_index = _component_indices(self._model, _FULLPHYSICS, _PHYSICS)
        self._time_index = _component_indices(self._model, _FULLPHYSICS, _TIME)
        template = np.empty(nfull)
        mujoco.mj_getState(self._model, self._datas[0], template, _FULLPHYSICS)
        self._initial = np.tile(template, (options.num_samples, 1))
        self._state_out = np.empty((options.num_samples, nstep, nfull))
        self._sensor_out = np.empty((options.num_samples, nstep, self._model.nsensordata))

        self._rng = np.random.default_rng(options.seed)
        self._nominal = np.zeros((options.num_knots, self._model.nu))
        self._nominal_time: float | None = None
        self._last_costs = np.full(options.num_samples, np.nan)
        self.reset()

    # -- properties -----------------------------------------------------------------------

    @property
    def model(self) -> mujoco.MjModel:
        """The planner's private model copy (timestep = ``options.timestep``)."""
        return self._model

    @property
    def options(self) -> PlannerOptions:
        """The planner settings."""
        return self._options

    @property
    def nstate(self) -> int:
        """Length of the physics state :meth:`plan` expects."""
        return self._nstate

    @property
    def nominal(self) -> ControlSpline:
        """The current nominal (best so far) spline, knot times absolute [s]."""
        start = 0.0 if self._nominal_time is None else self._nominal_time
        return ControlSpline(start + self._knot_times, self._nominal.copy())

    @property
    def last_costs(self) -> np.ndarray:
        """Costs of the candidates of the latest :meth:`plan`, shape ``(num_samples,)``."""
        return self._last_costs.copy()

    # -- life cycle -----------------------------------------------------------------------

    def reset(self, seed: int | Sequence[int] | None = None) -> None:
        """Forgets the nominal (back to zero control, clipped) and re-seeds the noise.

        Args:
            seed: Seed for the noise generator; ``None`` uses ``options.seed``.
        """
        self._rng = np.random.default_rng(self._options.seed if seed is None else seed)
        self._nominal = np.clip(np.zeros_like(self._nominal), self._low, self._high)
        self._nominal_time = None
        self._last_costs = np.full(self._options.num_samples, np.nan)

    def close(self) -> None:
        """Stops the rollout thread pool; the planner cannot plan afterwards."""
        self._rollout.close()

    def __enter__(self) -> PredictiveSampling:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- planning -------------------------------------------------------------------------

    def candidate_controls(self, knots: np.ndarray) -> np.ndarray:
        """Per-step controls of candidate knot values.

        Args:
            knots: Shape ``(nsample, nknot, nu)``.

        Returns:
            Shape ``(nsample, nstep, nu)``: the control applied during each planning step.
        """
        return self._weights @ knots

    def plan(self, state: np.ndarray, time: float = 0.0) -> ControlSpline:
        """One predictive-sampling iteration from a measured state.

        Args:
            state: Physics state (``mjSTATE_PHYSICS``), shape ``(nstate,)``.
            time: Current time [s]; the nominal is shifted by the time since the last plan.

        Returns:
            The new nominal spline, knots at ``time + linspace(0, horizon, num_knots)``.
        """
        state = np.asarray(state, dtype=float)
        if state.shape != (self._nstate,) or not np.all(np.isfinite(state)):
            raise ValueError(must_be("state", f"a finite array of shape ({self._nstate},)", state))
        if self._nominal_time is not None:
            elapsed = time - self._nominal_time
            if elapsed < 0:
                raise ValueError(
                    must_be("time", f"at least the previous plan's {self._nominal_time}", time),
                )
            self._nominal = shift_knots(self._knot_times, self._nominal, elapsed)

        opts = self._options
        knots = sample_knots(
            self._nominal, self._rng, opts.noise_scales, opts.num_samples, self._low, self._high
        )
        controls = self.candidate_controls(knots)
        self._initial[:, self._physics_index] = state
        self._initial[:, self._time_index] = time
        self._rollout.rollout(
            self._model,
            self._datas,
            self._initial,
            controls,
            state=self._state_out,
            sensordata=self._sensor_out,
        )
        states = self._state_out[..., self._physics_index]
        costs = np.asarray(self._cost(states, controls), dtype=float)
        if costs.shape != (opts.num_samples,):
            raise ValueError(must_be("cost(...)", f"of shape ({opts.num_samples},)", costs))
        costs = np.where(np.isfinite(costs), costs, np.inf)
        best = int(np.argmin(costs))
        if not np.isfinite(costs[best]):
            logger.warning("all %d candidate costs are non-finite; keeping the nominal", costs.size)
            best = 0
        self._last_costs = costs
        self._nominal = knots[best]
        self._nominal_time = float(time)
        return self.nominal


# --------------------------------------------------------------------------------------------
# Closed loop
# --------------------------------------------------------------------------------------------


def run_episode(
    real_model: mujoco.MjModel,
    planner: PredictiveSampling,
    initial_state: np.ndarray,
    duration: float = 10.0,
    *,
    success: EpisodeCriterion | None = None,
    seed: int | Sequence[int] | None = None,
) -> EpisodeResult:
    """Closes the loop: the planner plans with its model, the real model is simulated.

    The real system steps at its own ``opt.timestep``. Whenever ``planner.options.
    replan_period`` has elapsed (and at time 0) the planner replans from the real physics
    state; in between the latest plan's spline is applied at each step. The planner is reset
    (``planner.reset(seed)``) first, so episodes are independent and reproducible.

    Args:
        real_model: The system acted on; same state and control sizes as the planner's model.
        planner: The controller.
        initial_state: Real physics state at time 0, shape ``(nstate,)``.
        duration: Episode length [s].
        success: Optional criterion stored in ``EpisodeResult.success``.
        seed: Passed to ``planner.reset``.

    Returns:
        The recorded episode.
    """
    initial_state = _check_episode(real_model, planner, initial_state, duration)
    start = _time.perf_counter()
    planner.reset(seed)
    loop = _closed_loop(real_model, planner, initial_state, duration)
    result = dataclasses.replace(loop, wall_time=_time.perf_counter() - start)
    if success is not None:
        result = dataclasses.replace(result, success=bool(success(result)))
    logger.debug("episode: %.1f s simulated in %.2f s wall", duration, result.wall_time)
    return result


def _check_episode(
    real_model: mujoco.MjModel,
    planner: PredictiveSampling,
    initial_state: np.ndarray,
    duration: float,
) -> np.ndarray:
    """Checks :func:`run_episode`'s arguments; returns the initial state as a float array."""
    if not isinstance(real_model, mujoco.MjModel):
        raise TypeError(must_be("real_model", "a mujoco.MjModel", real_model))
    if not (math.isfinite(duration) and duration > 0):
        raise ValueError(must_be("duration", "a positive float [s]", duration))
    nstate = mujoco.mj_stateSize(real_model, _PHYSICS)
    if nstate != planner.nstate or real_model.nu != planner.model.nu:
        raise ValueError(
            must_be(
                "real_model",
                f"compatible with the planner's model (nstate={planner.nstate}, "
                f"nu={planner.model.nu})",
                (nstate, real_model.nu),
            )
        )
    initial_state = np.asarray(initial_state, dtype=float)
    if initial_state.shape != (nstate,):
        raise ValueError(must_be("initial_state", f"of shape ({nstate},)", initial_state))
    return initial_state


def _closed_loop(
    real_model: mujoco.MjModel,
    planner: PredictiveSampling,
    initial_state: np.ndarray,
    duration: float,
) -> EpisodeResult:
    """Steps the real model for ``duration`` [s], replanning every ``replan_period``.

    Returns:
        The episode, without a verdict and wall time.
    """
    data = mujoco.MjData(real_model)
    mujoco.mj_setState(real_model, data, initial_state, _PHYSICS)
    mujoco.mj_forward(real_model, data)
    nstep = max(1, round(duration / real_model.opt.timestep))
    period = planner.options.replan_period
    times = np.empty(nstep + 1)
    states = np.empty((nstep + 1, initial_state.size))
    controls = np.empty((nstep, real_model.nu))
    times[0], states[0] = data.time, initial_state

    spline: ControlSpline | None = None
    next_replan = data.time
    tol = 1e-9 * max(1.0, period)
    for k in range(nstep):
        if spline is None or data.time >= next_replan - tol:
            spline = planner.plan(states[k], data.time)
            next_replan += period
        controls[k] = spline(data.time)
        data.ctrl[:] = controls[k]
        mujoco.mj_step(real_model, data)
        times[k + 1] = data.time
        mujoco.mj_getState(real_model, data, states[k + 1], _PHYSICS)
    return EpisodeResult(times, states, controls)


def evaluate_planner(
    real_model: mujoco.MjModel,
    planner_model: mujoco.MjModel,
    starts: np.ndarray,
    *,
    cost: TrajectoryCost | None = None,
    options: PlannerOptions | None = None,
    duration: float = 10.0,
    success: EpisodeCriterion | None = None,
    nthread: int | None = None,
) -> Evaluation:
    """Runs one episode per start and counts successes.

    Episode ``i`` re-seeds the planner with ``(options.seed, i)``, so results are reproducible
    and independent of the episode order.

    Args:
        real_model: The system acted on.
        planner_model: The planner's belief.
        starts: Initial physics states, shape ``(nstart, nstate)``.
        cost: Trajectory cost; default :func:`cartpole_cost`.
        options: Planner settings; default ``PlannerOptions()``.
        duration: Episode length [s].
        success: Episode criterion; default :func:`cartpole_success`.
        nthread: Rollout threads (see :class:`PredictiveSampling`).

    Returns:
        The success count and the episodes.
    """
    starts = np.asarray(starts, dtype=float)
    if starts.ndim != 2:
        raise ValueError(must_be("starts", "a 2-D array (nstart, nstate)", starts))
    options = PlannerOptions() if options is None else options
    cost = cartpole_cost if cost is None else cost
    success = cartpole_success if success is None else success
    episodes = []
    with PredictiveSampling(planner_model, cost, options, nthread=nthread) as planner:
        for i, start in enumerate(starts):
            episode = run_episode(
                real_model, planner, start, duration, success=success, seed=(options.seed, i)
            )
            logger.info(
                "episode %d: success=%s (%.2f s wall)", i, episode.success, episode.wall_time
            )
            episodes.append(episode)
    return Evaluation(sum(bool(e.success) for e in episodes), tuple(episodes))


# --------------------------------------------------------------------------------------------
# The cart-pole task
# --------------------------------------------------------------------------------------------


def wrap_angle(angle: np.ndarray) -> np.ndarray:
    """Wraps angles [rad] to ``[-pi, pi)``."""
    return (np.asarray(angle) + np.pi) % (2.0 * np.pi) - np.pi


def cartpole_cost(
    states: np.ndarray,
    controls: np.ndarray,
    /,
    *,
    upright: float = 1.0,
    centre: float = 0.1,
    cart_velocity: float = 0.01,
    pole_velocity: float = 0.001,
    force: float = 1e-4,
) -> np.ndarray:
    """Running cost of the cart-pole swing-up, summed over the steps (a :class:`TrajectoryCost`).

    Per step: ``upright * (1 - cos θ) + centre * x² + cart_velocity * ẋ²
    + pole_velocity * θ̇² + force * u²`` with θ = 0 upright. ``1 - cos θ`` is 0 upright and 2
    hanging, smooth and periodic, so the planner is free to swing either way. Use
    ``functools.partial`` to change the weights.

    Args:
        states: Shape ``(nsample, nstep, 4)``: (x [m], θ [rad], ẋ [m/s], θ̇ [rad/s]).
        controls: Shape ``(nsample, nstep, 1)``, cart force [N].
        upright: Weight of ``1 - cos θ`` [1].
        centre: Weight of ``x²`` [1/m²].
        cart_velocity: Weight of ``ẋ²`` [s²/m²].
        pole_velocity: Weight of ``θ̇²`` [s²/rad²].
        force: Weight of ``u²`` [1/N²].

    Returns:
        Costs, shape ``(nsample,)``.
    """
    x, theta, xdot, thetadot = (states[..., i] for i in range(4))
    running = (
        upright * (1.0 - np.cos(theta))
        + centre * x**2
        + cart_velocity * xdot**2
        + pole_velocity * thetadot**2
        + force * np.sum(controls**2, axis=-1)
    )
    return running.sum(axis=-1)


def cartpole_success(
    result: EpisodeResult,
    *,
    window: float = 2.0,
    angle_tolerance: float = 0.2,
    rail_limit: float = CARTPOLE_RAIL_LIMIT,
    rail_margin: float = 0.05,
) -> bool:
    """Whether the pole was balanced at the end of a cart-pole episode.

    Success: over the last ``window`` seconds the pole stays within ``angle_tolerance`` of
    upright (angle wrapped, so full turns do not count against it) and the cart stays
    inside its rails, i.e. ``|x| < rail_limit - rail_margin`` (the margin keeps a cart resting
    against the end stop, whose soft limit lets it sink in slightly, from counting as inside).

    Args:
        result: An episode on the cart-pole (state ``(x, θ, ẋ, θ̇)``).
        window: Judged final interval [s]; at most the episode's duration.
        angle_tolerance: Allowed |θ| [rad].
        rail_limit: Half-length of the rails [m].
        rail_margin: Clearance from the end stops [m].
    """
    duration = result.times[-1] - result.times[0]
    if not (0 < window <= duration + 1e-9):
        raise ValueError(must_be("window", f"in (0, {duration:g}] (the episode duration)", window))
    judged = result.times >= result.times[-1] - window - 1e-9
    angle_ok = np.abs(wrap_angle(result.states[judged, _POLE_ANGLE])) < angle_tolerance
    cart_ok = np.abs(result.states[judged, _CART_POS]) < rail_limit - rail_margin
    return bool(np.all(angle_ok) and np.all(cart_ok))


def cartpole_model(pole_mass: float | None = None) -> mujoco.MjModel:
    """The bundled cart-pole, optionally with a different pole mass.

    Args:
        pole_mass: Pole mass [kg]; ``None`` keeps the file's 0.2 kg. The pole's rotational
            inertia is scaled by the same factor (same geometry, different density).

    Returns:
        The compiled model (timestep 0.01 s).
    """
    xml = (importlib.resources.files("mjsysid") / _CARTPOLE_RESOURCE).read_text()
    spec = mujoco.MjSpec.from_string(xml)
    if pole_mass is not None:
        if not (isinstance(pole_mass, (int, float)) and math.isfinite(pole_mass) and pole_mass > 0):
            raise ValueError(must_be("pole_mass", "a positive float [kg]", pole_mass))
        body = spec.body("pole")
        ratio = pole_mass / body.mass
        body.mass = float(pole_mass)
        body.inertia = np.asarray(body.inertia) * ratio
    return spec.compile()


def cartpole_starts(
    num_starts: int = 10, *, seed: int = 0, angle_noise: float = 0.05
) -> np.ndarray:
    """Hanging cart-pole starts with small deterministic perturbations of the pole angle.

    Args:
        num_starts: Number of starts.
        seed: Seed of the perturbations.
        angle_noise: Standard deviation of the pole-angle perturbation [rad].

    Returns:
        Physics states ``(x, θ, ẋ, θ̇)``, shape ``(num_starts, 4)``, with ``θ ≈ π``.
    """
    if not isinstance(num_starts, int) or num_starts < 1:
        raise ValueError(must_be("num_starts", "a positive int", num_starts))
    model = cartpole_model()
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("hanging").id)
    hanging = _physics_state(model, data)
    starts = np.tile(hanging, (num_starts, 1))
    rng = np.random.default_rng(seed)
    starts[:, _POLE_ANGLE] += angle_noise * rng.standard_normal(num_starts)
    return starts
