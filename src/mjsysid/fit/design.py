"""D-optimal excitation design at the nominal model.

An excitation ``u(t; z)`` with free parameters ``z`` (per actuator amplitude, frequency band
and phases of a multisine; or amplitude and hold time of a PRBS) is chosen to maximise

    Φ(z) = log det( (J(z) D)ᵀ (J(z) D) ) / σ²     (D-optimality)

with ``J(z)`` the finite-difference Jacobian of the sensor outputs with respect to the
parameters at their nominal values (one batched
:func:`~mjsysid.fit.jacobian.residual_and_jacobian` call for a whole generation of
candidates), ``D`` the parameter ranges
(:func:`~mjsysid.fit.audit.parameter_scales`) and ``σ`` the sensor noise. Maximising
``det(JᵀJ)`` minimises the volume of the confidence ellipsoid (Pukelsheim, *Optimal Design of
Experiments*, 1993, ch. 6). Controls stay inside ``ctrlrange`` by construction; joint-range
and velocity limits are checked in simulation of the nominal model and a violating candidate
scores ``−1e9·(1 + violation)``: below every candidate within the limits. The search is
CMA-ES (``cmaes``, when installed) or random search, keeping the best candidate seen.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import mujoco
import numpy as np

from mjsysid.data.excitation import multisine, prbs
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import TimeSeries
from mjsysid.fit.audit import parameter_scales
from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.jacobian import residual_and_jacobian
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.residual import ResidualFunction, build_residual_fn
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.laws.core import ForceLaw
from mjsysid.sim.rollout import sysid_rollout
from mjsysid.util.errors import must_be
from mjsysid.util.mujoco_log import quietly

logger = logging.getLogger(__name__)

__all__ = ["DESIGN_SIGNALS", "Design", "DesignProblem", "design_excitation", "evaluate"]

DESIGN_SIGNALS = ("multisine", "prbs")
_NCOMP = 8  # multisine components per actuator
_PENALTY = 1e9  # a violating candidate ranks below every one within the limits
MIN_POPSIZE = 4
"""Fewest candidates per generation: CMA-ES adapts from the better half of a generation,
and one parent gives it no rank-μ update (``cmaes`` divides by zero below 4)."""


@dataclass
class DesignProblem:
    """What the design is for: the model, its parameters, the start state and the limits.

    Attributes:
      spec: The model spec (never modified). params: Parameters at their nominal values.
      initial_state: ``(nstate,)`` full-physics start state.
      duration: Seconds. amplitude: ``(nu,)`` peak deviation from ``center`` (default: half
        the ``ctrlrange``, or 1 for an unlimited actuator).
      center: ``(nu,)`` the command's mean (default: the middle of ``ctrlrange``, or 0).
      max_velocity: ``|qvel|`` limit (rad/s or m/s) on every joint, ``None``: none.
      noise: Sensor noise std (sensor units), the ``σ`` of the intervals.
      force_laws: The experiment's force laws (:func:`~mjsysid.build_residual_fn`'s), which
        every candidate is simulated with, so that their parameters are designed for too.
      control_transform: The experiment's control transform (a deadband, a gain), likewise.
    """

    spec: mujoco.MjSpec
    params: ParameterDict
    initial_state: np.ndarray
    duration: float
    amplitude: np.ndarray | None = None
    center: np.ndarray | None = None
    max_velocity: float | None = None
    noise: float = 0.01
    force_laws: Sequence[ForceLaw] = ()
    control_transform: ControlTransform | None = None
    model: mujoco.MjModel = field(init=False)

    def __post_init__(self) -> None:
        self.model = self.spec.compile()
        m = self.model
        if not (math.isfinite(self.duration) and self.duration > 0):
            raise ValueError(must_be("duration", "> 0 seconds", self.duration))
        if m.nu == 0:
            raise ValueError(must_be("model", "a model with actuators (nothing to excite)", 0))
        limited = m.actuator_ctrllimited.astype(bool)
        lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
        if self.center is None:
            self.center = np.where(limited, 0.5 * (lo + hi), 0.0)
        if self.amplitude is None:
            self.amplitude = np.where(limited, 0.5 * (hi - lo), 1.0)
        self.center = np.broadcast_to(np.asarray(self.center, float), (m.nu,)).copy()
        self.amplitude = np.broadcast_to(np.asarray(self.amplitude, float), (m.nu,)).copy()

    @property
    def n(self) -> int:
        """Control steps."""
        return int(max(2, round(self.duration / self.model.opt.timestep)))


@dataclass(frozen=True)
class Design:
    """A designed excitation and how it compares.

    Attributes:
      signal: ``"multisine"`` or ``"prbs"``. control: ``(n, nu)``. times: ``(n,)`` seconds.
      logdet: ``Φ`` of the design. violation: Its limit violation (0: none).
      baselines: ``{"prbs": Φ, "multisine": Φ}`` of the plain signals.
      baseline_violations: Their violations.
      half_widths: ``{"design" | "prbs" | "multisine": (p,)}`` predicted 95 % half-widths.
      names: Parameter names. evaluations: Candidates simulated.
    """

    signal: str
    control: np.ndarray
    times: np.ndarray
    logdet: float
    violation: float
    baselines: dict[str, float]
    baseline_violations: dict[str, float]
    half_widths: dict[str, np.ndarray]
    names: list[str]
    evaluations: int

    def lines(self) -> list[str]:
        """The comparison as text lines."""
        out = [f"design ({self.signal}): log det {self.logdet:.4g}, violation {self.violation:.3g}"]
        for k, v in self.baselines.items():
            out.append(f"plain {k}: log det {v:.4g}, violation {self.baseline_violations[k]:.3g}")
        out.append(f"{'parameter':<28} " + " ".join(f"{k + ' ±':>12}" for k in self.half_widths))
        for i, name in enumerate(self.names):
            out.append(
                f"{name:<28} " + " ".join(f"{h[i]:>12.4g}" for h in self.half_widths.values())
            )
        return out


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return cast(np.ndarray, 1.0 / (1.0 + np.exp(-z)))


def _unit_multisine(z: np.ndarray, n: int, nu: int, dt: float) -> np.ndarray:
    """``z = [amp (nu), log f0, log(f1/f0 − 1), log g, phases (nu·ncomp)]`` -> ``(n, nu)``.

    Each channel is the peak-normalised sum ``s`` of ``ncomp`` sines, shaped by
    ``tanh(g·s)/tanh(g)`` (``g → 0``: the plain multisine; large ``g``: a square wave with
    the multisine's zero crossings, the power of a PRBS), times its amplitude in ``(0, 1]``.
    """
    amp = 0.05 + 0.95 * _sigmoid(z[:nu])
    gain = float(np.clip(math.exp(z[nu + 2]), 1e-3, 50.0))
    nyq = 0.5 / dt
    f0 = float(np.clip(math.exp(z[nu]), 0.02, 0.5 * nyq))
    f1 = float(np.clip(f0 * (1.0 + math.exp(z[nu + 1])), 1.01 * f0, nyq))
    phases = z[nu + 3 :].reshape(nu, _NCOMP)
    t = np.arange(n) * dt
    freqs = np.geomspace(f0, f1, _NCOMP)
    out = np.empty((n, nu))
    for j in range(nu):
        s = np.sin(2 * np.pi * freqs[None, :] * t[:, None] + phases[j][None, :]).sum(axis=1)
        s = s / max(float(np.max(np.abs(s))), 1e-12)
        out[:, j] = amp[j] * np.tanh(gain * s) / math.tanh(gain)
    return out


def _unit_prbs(z: np.ndarray, n: int, nu: int, dt: float) -> np.ndarray:
    """``z = [amp (nu), log hold-time (nu), seed]`` -> ``(n, nu)`` in [-1, 1]."""
    amp = 0.05 + 0.95 * _sigmoid(z[:nu])
    out = np.empty((n, nu))
    for j in range(nu):
        hold = int(np.clip(round(math.exp(z[nu + j]) / dt), 1, n))
        seed = int(abs(z[2 * nu]) * 1000) + j
        out[:, j] = amp[j] * prbs(n, 1, dt, hold=hold, seed=seed)[:, 0]
    return out


def _start(signal: str, nu: int, dt: float) -> np.ndarray:
    """The plain signal's ``z`` (full amplitude, the default band or hold)."""
    full = np.full(nu, 4.0)
    if signal == "multisine":
        k = np.arange(1, _NCOMP + 1)
        phases = np.tile(-np.pi * k * (k - 1) / _NCOMP, nu)
        f1 = min(5.0, 0.25 / dt)
        return np.concatenate(
            [full, [math.log(0.1), math.log(f1 / 0.1 - 1.0), math.log(1e-3)], phases]
        )
    return np.concatenate([full, np.full(nu, math.log(max(0.05, dt))), [0.0]])


def _controls(problem: DesignProblem, signal: str, z: np.ndarray) -> np.ndarray:
    m = problem.model
    unit = (_unit_multisine if signal == "multisine" else _unit_prbs)(
        z, problem.n, m.nu, m.opt.timestep
    )
    assert problem.center is not None and problem.amplitude is not None
    return cast(np.ndarray, problem.center + problem.amplitude * unit)


def violation(problem: DesignProblem, state: np.ndarray, control: np.ndarray) -> float:
    """Sum of relative limit excesses: ctrlrange, limited joint ranges, ``max_velocity``."""
    m = problem.model
    total = 0.0
    lim = m.actuator_ctrllimited.astype(bool)
    if np.any(lim):
        lo, hi = m.actuator_ctrlrange[lim, 0], m.actuator_ctrlrange[lim, 1]
        c = control[:, lim]
        total += float(np.sum(np.maximum(c - hi, 0) + np.maximum(lo - c, 0)))
    qpos = state[:, 1 : 1 + m.nq]  # the full-physics state starts with time
    qvel = state[:, 1 + m.nq : 1 + m.nq + m.nv]
    for j in range(m.njnt):
        if int(m.jnt_type[j]) not in (
            int(mujoco.mjtJoint.mjJNT_HINGE),
            int(mujoco.mjtJoint.mjJNT_SLIDE),
        ):
            continue
        q = qpos[:, m.jnt_qposadr[j]]
        if m.jnt_limited[j]:
            lo, hi = m.jnt_range[j]
            total += float(np.max(np.maximum(q - hi, 0) + np.maximum(lo - q, 0)))
        if problem.max_velocity is not None:
            v = np.abs(qvel[:, m.jnt_dofadr[j]])
            total += float(np.max(np.maximum(v - problem.max_velocity, 0)))
    return total


def evaluate(
    problem: DesignProblem, controls: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """``(Φ (K,), violations (K,), Jacobians [(n_k, p)])`` of ``K`` candidate controls.

    All candidates are one :class:`ModelSequences` (the nominal simulation is their
    "measurement"), so the Jacobian of all of them is one batched FD call.
    """
    m = problem.model
    K = len(controls)
    x0 = np.asarray(problem.initial_state, dtype=np.float64)
    params = problem.params
    times, sens, states = nominal_run(problem, controls, x0)
    viol = np.array([violation(problem, st, c) for st, c in zip(states, controls, strict=True)])
    ctrl: list[TimeSeries | None] = [TimeSeries.from_control_names(times, c, m) for c in controls]
    seqs = ModelSequences("design", problem.spec, [f"c{k}" for k in range(K)], [x0] * K, ctrl, sens)
    rf = _residual_fn(problem, seqs)
    x = params.as_vector()
    lo, hi = params.get_bounds()

    def residual(X: np.ndarray) -> np.ndarray:
        return np.asarray(rf(X, params), dtype=np.float64)

    _, J = residual_and_jacobian(residual, x, (lo, hi), eps=1e-6)
    scales = parameter_scales(x, lo, hi) / problem.noise
    blocks = np.split(J, K, axis=0)
    phi = np.array([_logdet(b * scales) for b in blocks])
    return phi, viol, blocks


def _residual_fn(problem: DesignProblem, seqs: ModelSequences) -> ResidualFunction:
    """The candidates' residual function: unnormalised, with the problem's force laws and
    control transform."""
    return build_residual_fn(
        [seqs],
        normalize=False,
        force_laws=list(problem.force_laws),
        control_transform=problem.control_transform,
    )


def nominal_run(
    problem: DesignProblem, controls: Sequence[np.ndarray], x0: np.ndarray
) -> tuple[np.ndarray, list[TimeSeries], list[np.ndarray]]:
    """``(times (n,), sensors, states (n, nstate) each)`` of the nominal model under each
    candidate's controls: MuJoCo's rollout, or with force laws or a control transform the
    residual function's own simulation of them (its prediction at the nominal)."""
    m = problem.model
    if not problem.force_laws and problem.control_transform is None:
        trajs = sysid_rollout(m, None, np.stack(controls), x0)
        times = np.asarray(trajs[0].times)
        sens = [TimeSeries.from_names(times, np.asarray(t.sensordata), m) for t in trajs]
        return times, sens, [np.asarray(t.state) for t in trajs]
    times = x0[0] + np.arange(problem.n) * m.opt.timestep
    blank = TimeSeries.from_names(times, np.zeros((problem.n, m.nsensordata)), m)
    ctrl: list[TimeSeries | None] = [TimeSeries.from_control_names(times, c, m) for c in controls]
    names = [f"c{k}" for k in range(len(controls))]
    seqs = ModelSequences(
        "design", problem.spec, names, [x0] * len(controls), ctrl, [blank] * len(controls)
    )
    preds = _residual_fn(problem, seqs).predict(None, problem.params)
    return times, [p.predicted_at_measured for p in preds], [p.state for p in preds]


def _logdet(Js: np.ndarray) -> float:
    sign, val = np.linalg.slogdet(Js.T @ Js)
    return float(val) if sign > 0 else -math.inf


def _score(phi: np.ndarray, viol: np.ndarray) -> np.ndarray:
    return np.where(viol > 0, -_PENALTY * (1 + viol), phi)


@dataclass
class _Best:
    """The best candidate seen so far."""

    z: np.ndarray
    score: float = -math.inf
    evaluations: int = 0


def _search(
    problem: DesignProblem,
    signal: str,
    generations: int,
    popsize: int,
    seed: int,
) -> _Best:
    """CMA-ES (``cmaes``) from the plain signal, random search without it."""
    z0 = _start(signal, problem.model.nu, problem.model.opt.timestep)
    best = _Best(z0)
    try:
        from cmaes import CMA
    except ImportError:
        CMA = None
    rng = np.random.default_rng(seed)
    opt = CMA(mean=z0, sigma=0.8, population_size=popsize, seed=seed) if CMA else None
    for _ in range(generations):
        zs = (
            [opt.ask() for _ in range(popsize)]
            if opt is not None
            else [best.z + 0.8 * rng.standard_normal(z0.size) for _ in range(popsize)]
        )
        if best.evaluations == 0:
            zs[0] = z0
        phi, viol, _ = evaluate(problem, [_controls(problem, signal, z) for z in zs])
        score = _score(phi, viol)
        best.evaluations += len(zs)
        k = int(np.argmax(score))
        if score[k] > best.score:
            best.z, best.score = np.asarray(zs[k]), float(score[k])
        if opt is not None:
            opt.tell([(z, -s if np.isfinite(s) else 1e12) for z, s in zip(zs, score, strict=True)])
    return best


def _half_widths(J: np.ndarray, noise: float) -> np.ndarray:
    if J.shape[0] <= J.shape[1]:
        return np.full(J.shape[1], math.inf)
    return calculate_intervals(np.zeros(J.shape[0]), J, noise_variance=noise**2)[1]


@quietly
def design_excitation(
    problem: DesignProblem,
    signal: str = "multisine",
    *,
    generations: int = 10,
    popsize: int = 8,
    seed: int = 0,
) -> Design:
    """Designs a D-optimal excitation of ``signal``'s family (see the module docstring).

    Args:
      problem: The :class:`DesignProblem`.
      signal: ``"multisine"`` (amplitudes, band and phases free) or ``"prbs"`` (amplitudes,
        hold times and the sequence free).
      generations, popsize: Search budget: ``generations·popsize`` candidates, each one
        ``p + 1`` rollouts of ``duration`` (``popsize`` >= :data:`MIN_POPSIZE`).
      seed: Random seed of the search.

    Returns:
      The :class:`Design` with the plain PRBS and multisine of the same duration and
      amplitude for comparison.
    """
    if signal not in DESIGN_SIGNALS:
        raise ValueError(must_be("signal", f"one of {list(DESIGN_SIGNALS)}", signal))
    if isinstance(popsize, bool) or not isinstance(popsize, int) or popsize < MIN_POPSIZE:
        raise ValueError(
            must_be(
                "popsize",
                f"an integer >= {MIN_POPSIZE} (CMA-ES adapts from the better half of each "
                "generation: at least 2 parents)",
                popsize,
            )
        )
    best = _search(problem, signal, generations, popsize, seed)
    m = problem.model
    dt, n, nu = m.opt.timestep, problem.n, m.nu
    assert problem.center is not None and problem.amplitude is not None
    plain = {
        "prbs": problem.center + problem.amplitude * prbs(n, nu, dt, hold=max(1, round(0.05 / dt))),
        "multisine": problem.center
        + problem.amplitude * multisine(n, nu, dt, f1=min(5.0, 0.25 / dt)),
    }
    control = _controls(problem, signal, best.z)
    phi, viol, jacs = evaluate(problem, [control, plain["prbs"], plain["multisine"]])
    half = {
        k: _half_widths(J, problem.noise)
        for k, J in zip(("design", "prbs", "multisine"), jacs, strict=True)
    }
    logger.info("designed %s: log det %.4g after %d candidates", signal, phi[0], best.evaluations)
    return Design(
        signal,
        control,
        np.arange(n) * dt,
        float(phi[0]),
        float(viol[0]),
        {"prbs": float(phi[1]), "multisine": float(phi[2])},
        {"prbs": float(viol[1]), "multisine": float(viol[2])},
        half,
        problem.params.get_non_frozen_parameter_names(),
        best.evaluations,
    )
