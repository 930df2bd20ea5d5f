"""Horizon stages: fitting on growing parts of the data, e.g. the first 10 %, 30 %, then all.

A short horizon costs less per evaluation and its cost landscape has fewer local minima (a
trajectory drifts less), so an early stage brings the fit near the solution cheaply
(see ``horizons`` of :func:`mjsysid.fit.optimize.optimize`).

One stage of a fit: a backend run on one horizon of the data, from one start point.

An early stage (``last=False``) also ends after an iteration that cut its cost by less than
``1 − STAGE_SLOW`` (status ``"slowed"``); its ``"lm"`` stop is taken on a Broyden-updated
Jacobian without a finite-difference one to confirm it (``LMOptions.confirm_stop``: the next
stage computes its own at that point); it is skipped (status ``"skipped"``, nothing but
its residual at the start evaluated) when its cost there is below its ``skip_below``; only
the last stage computes the residual and Jacobian at its solution.

A stage that needs both its start's residual and Jacobian evaluates them in one call
(:func:`~mjsysid.fit.jacobian.residual_and_jacobian`). After an early stage that fitted its
data exactly, the whole data's residual at its end comes with the whole data's Jacobian: the
next head takes its start from their rows and the last stage's start reuses it
(:func:`_whole_at`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from mjsysid.fit.backends import BACKENDS, BackendCall, BackendResult
from mjsysid.fit.checkpoints import History, fit_fingerprint, write_checkpoint
from mjsysid.fit.jacobian import (
    REUSE_STEPS,
    CountedResidual,
    JacobianCache,
    describe_nonfinite,
    fd_jacobian,
    residual_and_jacobian,
    serves,
)
from mjsysid.fit.lm import (
    LMOptions,
    decrease_along,
    gauss_newton_step,
    step_in_standard_errors,
)
from mjsysid.fit.options import FitOptions, check_horizons
from mjsysid.fit.result import StageSummary, TwoStarts
from mjsysid.fit.status import CONVERGED, TRIAL_FRACTIONS, Status, StepTrial, honest_status
from mjsysid.fit.whiteness import ROUNDOFF
from mjsysid.objective.initial_state import nuisance_mask
from mjsysid.objective.protocols import (
    HeadRowsResidualFn,
    HorizonResidualFn,
    ResidualFn,
    ThresholdResidualFn,
)
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be
from mjsysid.util.progress import IterationClock

logger = logging.getLogger("mjsysid.fit.optimize")

FTOL_ITERS = 3  # the ftol test: the relative cost decrease over this many iterations
STAGE_SLOW = 0.9  # an early horizon stage ends after a step that cut its cost by < 10 %


@dataclass(frozen=True)
class StageSettings:
    """The validated options of one :func:`~mjsysid.fit.optimize.optimize` call and what it
    knows of the problem, shared by its horizon stages.

    Attributes:
      options: The fit's options. lm_options: Those of the ``"lm"`` backend.
      names: Label of every free entry. bounds: ``(lo, hi)``, each ``(p,)``.
      out: Stream for progress lines. ckpt: Checkpoint path, or ``None``.
      clock: The time since the fit started, for the iteration lines' elapsed time and ETA.
    """

    options: FitOptions
    lm_options: LMOptions
    names: list[str]
    bounds: tuple[np.ndarray, np.ndarray]
    out: TextIO
    ckpt: Path | None
    clock: IterationClock = field(default_factory=IterationClock)


@dataclass
class Stage:
    """What one horizon stage ended with (``r`` and ``J`` only for the last stage)."""

    horizon: float
    x: np.ndarray
    cost0: float
    cost: float
    status: Status
    nit: int
    nfev: int
    njev: int
    nsecant: int
    history_obj: list[float]
    history_x: list[np.ndarray]
    r: np.ndarray | None = None
    J: np.ndarray | None = None
    step: tuple[str, float] | None = None  # the largest Gauss-Newton step left, in std. errors
    trial: StepTrial | None = None  # that step tried, where it did not deliver (the stop stands)
    held: list[str] = field(default_factory=list)  # parameters held in this stage (no effect)
    alive: np.ndarray | None = None  # (p,) entries with an effect at the stage's start
    two_starts: TwoStarts | None = None  # run from two points: which end was kept

    def summary(self) -> StageSummary:
        """The stage's record in the result (costs on this stage's data)."""
        return StageSummary(
            self.horizon, self.status, self.nit, self.nfev, self.cost0, self.cost,
            [float(c) for c in self.history_obj], list(self.held), self.two_starts,
        )  # fmt: skip


@dataclass(frozen=True)
class StagePlan:
    """Where a stage sits in the fit: its ``horizon``, whether it is the ``last``, the
    iterations before it (``start_iter``), the parameter-effect check (``"error"``, ``"warn"``
    or ``None``), the cost below which it is skipped (``skip_below``) and, for a stage
    resumed from a checkpoint written in it, its iterations before the interruption
    (``earlier``, prepended to its history); for the last stage after shorter ones, the fit's
    start point and the whole data's residual there (``fallback``: the stage is run from
    there too when the shorter stages ended where the whole data fit worse, and the better
    end kept), its cost (``start_cost``: the yardstick of round-off at an exact fit, where
    this stage may start already at round-off) and the ``(p,)`` entries that had an effect
    at an earlier stage's start (``alive``: one without effect here is switched off by
    another value, not a modelling mistake, and is held); the stage's residual at its start
    when the fit already has it (``start_r``: the whole data's, kept by the fit's counter, or
    rows of it) and a Jacobian of this stage's data computed near its start (``start_J``:
    ``(x, J)``, used when the start is within :data:`~mjsysid.fit.jacobian.REUSE_STEPS`
    finite-difference steps of ``x``)."""

    horizon: float
    last: bool
    start_iter: int
    check_effect: str | None
    skip_below: float | None = None
    earlier: History | None = None
    fallback: tuple[np.ndarray, np.ndarray] | None = None
    alive: np.ndarray | None = None
    start_r: np.ndarray | None = None
    start_J: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def start_cost(self) -> float | None:
        return None if self.fallback is None else 0.5 * float(self.fallback[1] @ self.fallback[1])


class _Converged(Exception):
    """Raised from the iteration recorder to end a stage early: ``reason`` ``"ftol"`` (a cost
    plateau) or ``"slowed"`` (an early horizon stage gaining less than 10 % per iteration)."""

    def __init__(self, iteration: int, reason: Status) -> None:
        super().__init__(iteration, reason)
        self.iteration, self.reason = iteration, reason


@dataclass
class _Recorder:
    """The state a stage keeps across iterations: history, best point, the ftol count.

    Called by the backend after every accepted iteration; writes the checkpoint, prints the
    progress line, calls the user's callback, and raises :class:`_Converged` to end the stage.
    """

    s: StageSettings
    plan: StagePlan
    best_x: np.ndarray
    best_cost: float
    history_obj: list[float] = field(default_factory=list)
    history_x: list[np.ndarray] = field(default_factory=list)
    done: int = 0  # iterations completed (for an interrupted fit)
    own: int = 0  # iterations of this run (a resumed stage's history holds earlier ones)

    @property
    def _steps(self) -> bool:  # iterations follow accepted steps (not scipy's calls)
        return self.s.options.optimizer in ("lm", "mujoco")

    def __call__(self, it: int, x: np.ndarray, cost: float) -> None:
        self.done = it
        self.own += 1
        previous = self.history_obj[-1]
        self.history_obj.append(cost)
        self.history_x.append(x.copy())
        if cost <= self.best_cost:
            self.best_x, self.best_cost = x.copy(), cost
        self._report(it, x, cost)
        if self._plateau():
            raise _Converged(it, Status.FTOL)
        if self._steps and not self.plan.last and cost > STAGE_SLOW * previous:
            raise _Converged(it, Status.SLOWED)

    def _plateau(self) -> bool:
        """The ftol test: the cost fell by at most ``ftol`` of its value over the last
        :data:`FTOL_ITERS` iterations, ``c_{k−3} − c_k ≤ ftol·c_{k−3}``."""
        ftol = self.s.options.ftol
        if not self._steps or ftol <= 0 or self.own < FTOL_ITERS:
            return False
        before, now = self.history_obj[-1 - FTOL_ITERS], self.history_obj[-1]
        return bool(np.isfinite(before) and before > 0 and before - now <= ftol * before)

    def _report(self, it: int, x: np.ndarray, cost: float) -> None:
        s, plan = self.s, self.plan
        n = plan.start_iter + it
        if s.ckpt is not None:
            history = History(self.history_obj, self.history_x)
            write_checkpoint(
                s.ckpt, self.best_x, self.best_cost, n, s.names, plan.horizon, history,
                fit_fingerprint(s.options),
            )  # fmt: skip
        if s.options.verbose:
            label = "" if plan.horizon == 1.0 else f"first {100.0 * plan.horizon:g} %  "
            print(s.clock.line(n, s.options.max_iters, cost, label), file=s.out, flush=True)
        if s.options.callback is not None:
            s.options.callback(n, x, cost)


def _start_residual(fn: CountedResidual, residual_fn: Any, x0: np.ndarray) -> np.ndarray:
    r0 = fn(x0)
    _check_start_residual(r0, residual_fn)
    return r0


def _check_start_residual(r0: np.ndarray, residual_fn: Any) -> None:
    if not np.all(np.isfinite(r0)):
        raise ValueError(
            f"the residual must be finite at the start point, got a non-finite value at "
            f"{describe_nonfinite(residual_fn, r0)}; check the data and the initial parameters"
        )


def _pin_unmovable(
    J0: np.ndarray,
    params: ParameterDict,
    x0: np.ndarray,
    s: StageSettings,
    residual_fn: Any,
    alive: np.ndarray | None = None,
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """The stage's bounds with the entries that have no effect at the start for a reason
    that is no modelling mistake (not :func:`_check_effect`'s error) pinned at their values,
    with a warning each, and the ``(p,)`` mask of those entries:

    * initial states (a joint at rest held by friction that sticks forgets a small initial
      velocity within its first step): held at their recorded values, as a recording
      without shooting holds them; pinned so that they cannot drift where a later point
      gives them a slight effect;
    * command thresholds (a deadzone) with no recorded level within their edge: no
      gradient moves them, so they keep their start value, and their interval is the range
      between the recorded levels around it (:mod:`mjsysid.objective.levels`);
    * entries that had an effect at an earlier stage's start (``alive``) and have none
      here: another value switched them off (a Stribeck velocity once the Stribeck
      friction went to zero); they keep their values.
    """
    dead = ~np.any(J0 != 0.0, axis=0)
    if not dead.any():
        return s.bounds, dead
    starts = nuisance_mask(params) & dead
    thresholds = np.zeros_like(dead)
    if isinstance(residual_fn, ThresholdResidualFn):
        named = {b.name for b in residual_fn.threshold_brackets(params)}
        thresholds = np.array([n in named for n in s.names], dtype=bool) & dead
    off = dead & ~starts & ~thresholds & (np.zeros_like(dead) if alive is None else alive)
    for mask, text in (
        (
            starts,
            "the initial states {names} have no effect on the residual at the start point (a "
            "joint at rest that sticks forgets a small initial velocity within its first "
            "step): held at their recorded values",
        ),
        (
            thresholds,
            "the command thresholds {names} have no effect at the start point: no recorded "
            "command level lies within their edge, so no gradient moves them; they keep their "
            "start values {values}, and their intervals are the ranges between the recorded "
            "levels around them (commands at more levels, or a start near a recorded level, "
            "let the fit move them)",
        ),
        (
            off,
            "{names} had an effect where the fit started but have none here: other values "
            "switch them off (a Stribeck velocity once the Stribeck friction is zero); they "
            "keep their values {values}, and their intervals are infinite",
        ),
    ):
        if mask.any():
            index = np.flatnonzero(mask)
            names = [s.names[i] for i in index]
            values = [float(f"{v:.6g}") for v in x0[index]]
            logger.warning(text.format(names=names, values=values))
    still = starts | thresholds | off
    if not still.any():
        return s.bounds, still
    lo, hi = s.bounds[0].copy(), s.bounds[1].copy()
    lo[still] = hi[still] = x0[still]
    return (lo, hi), still


def _check_effect(
    J0: np.ndarray, names: list[str], mode: str | None, skip: np.ndarray | None = None
) -> None:
    """Parameters with a zero Jacobian column (but the ``skip`` ones): an error
    (``"error"``) or a warning."""
    if mode is None:
        return
    dead_mask = ~np.any(J0 != 0.0, axis=0)
    if skip is not None:
        dead_mask &= ~skip
    dead = np.flatnonzero(dead_mask)
    if dead.size:
        msg = (
            f"parameters {[names[i] for i in dead.tolist()]} have no effect on the "
            "residual at the start point (zero Jacobian column): check their modifiers and "
            "that the data excite them (a centre-of-mass entry along a hinge axis never moves "
            "anything), freeze them, or fit anyway with allow_no_effect=True (a warning "
            "instead of this error; their intervals are then infinite)"
        )
        if mode == "error":
            raise ValueError(msg)
        logger.warning(msg)


def _held(J0: np.ndarray, names: list[str], horizon: float) -> list[str]:
    """The parameters an early stage holds: those without effect on its part of the data
    (a zero Jacobian column: a Stribeck velocity the first 10 % never excite). The backends
    leave such an entry where it is (no gradient moves it); it is released, and checked
    for an effect, in the stage that excites it (at the latest the whole data's)."""
    dead = [names[i] for i in np.flatnonzero(~np.any(J0 != 0.0, axis=0))]
    if dead:
        logger.info(
            "parameters %s have no effect on the first %g %% of the data: held there until a "
            "stage that excites them",
            dead,
            100.0 * horizon,
        )
    return dead


def _run_backend(call: BackendCall, rec: _Recorder) -> BackendResult:
    """The backend's result, or the best point so far when the recorder ended the stage or
    the user interrupted it."""
    if call.max_iters == 0:
        return BackendResult(call.x0, Status.MAX_ITERS, 0)
    try:
        return BACKENDS[call.options.optimizer](call)
    except _Converged as stop:
        return BackendResult(rec.best_x, stop.reason, stop.iteration)
    except KeyboardInterrupt:
        logger.warning("optimisation interrupted; returning the best parameters found so far")
        return BackendResult(rec.best_x, Status.INTERRUPTED, rec.done)


def fit_stage(
    residual_fn: ResidualFn,
    params: ParameterDict,
    x0: np.ndarray,
    s: StageSettings,
    plan: StagePlan,
) -> Stage:
    """Runs the backend on ``residual_fn`` from ``x0`` (see the module docstring).

    The last stage after shorter ones is run a second time from the fit's start
    (``plan.fallback``) when the shorter stages ended where the whole data fit worse than
    there, and the lower of the two ends is kept: the shorter stages may have found a better
    basin (their point fits the part they saw) or been misled by it (the rest of the data
    holds what they could not see: a motor switched off, a fast chirp); only the whole data
    tells; such a staged fit never ends above the one-stage fit from the same start."""
    fn = CountedResidual(residual_fn, params)
    eps = float(s.options.eps)
    J0 = plan.start_J
    if J0 is not None and not serves(J0[0], x0, s.bounds[1], eps):
        J0 = None
    if plan.start_r is not None:
        fn.remember(x0, plan.start_r)
    if plan.start_r is None and J0 is None and plan.skip_below is None:
        r0, J = residual_and_jacobian(fn, x0, s.bounds, eps)  # both wanted: one call
        _check_start_residual(r0, residual_fn)
        fn.remember(x0, r0)  # (a stage that ends where it began asks again)
        J0 = (x0, J)
    else:
        r0 = _start_residual(fn, residual_fn, x0)
    cost0 = 0.5 * float(r0 @ r0)
    if plan.skip_below is not None and cost0 < plan.skip_below:
        return Stage(
            plan.horizon, x0, cost0, cost0, Status.SKIPPED, 0, fn.nfev, 0, 0, [cost0], [x0]
        )
    run = _run_from(fn, residual_fn, params, x0, r0, s, plan, J0)
    start_cost = plan.start_cost
    if plan.fallback is None or start_cost is None or not start_cost < cost0:
        return run.finish()  # (one run: the shorter stages ended no worse than the start)
    if run.stage.status == Status.INTERRUPTED:
        return run.finish()  # (Ctrl-C: stop now)
    logger.warning(
        "the shorter horizon stages ended where the whole data fit worse (cost %.6g) than the "
        "fit's start (cost %.6g): the last stage is run from the start too, and the lower end "
        "kept",
        cost0,
        start_cost,
    )
    if s.options.verbose:
        print("stage again from the fit's start: the whole data", file=s.out, flush=True)
    x1, r1 = plan.fallback
    other = _run_from(
        CountedResidual(residual_fn, params), residual_fn, params, x1.copy(), r1, s, plan
    )
    best, worse = (other, run) if other.stage.cost < run.stage.cost else (run, other)
    stage = best.finish()  # (the other end's residual and Jacobian are not needed)
    stage.two_starts = TwoStarts("start" if best is other else "stages", worse.stage.cost)
    logger.info("the last stage: %s", stage.two_starts.text())
    stage.nfev += worse.fn.nfev
    stage.njev += 1 + worse.jacobian.njev + worse.njev
    return stage


@dataclass
class _Run:
    """One backend run of a stage, before the last stage's residual and Jacobian at its end
    (:meth:`finish`)."""

    stage: Stage
    fn: CountedResidual
    jacobian: JacobianCache
    rec: _Recorder
    njev: int  # the backend's own Jacobians

    def finish(self) -> Stage:
        """The stage, with the last stage's residual and Jacobian at its solution and every
        evaluation counted."""
        if self.rec.plan.last:
            _finish_last(self.stage, self.fn, self.jacobian, self.rec)
        self.stage.nfev, self.stage.njev = self.fn.nfev, 1 + self.jacobian.njev + self.njev
        return self.stage


def _run_from(
    fn: CountedResidual,
    residual_fn: ResidualFn,
    params: ParameterDict,
    x0: np.ndarray,
    r0: np.ndarray,
    s: StageSettings,
    plan: StagePlan,
    start_J: tuple[np.ndarray, np.ndarray] | None = None,
) -> _Run:
    """One backend run from ``x0`` (residual ``r0``), with its start's checks; its Jacobian
    there is ``start_J`` (``(x, J)``: computed at ``x``, which serves ``x0``) or computed."""
    eps = float(s.options.eps)
    cost0 = 0.5 * float(r0 @ r0)
    x_J, J0 = start_J if start_J is not None else (x0, fd_jacobian(fn, x0, r0, s.bounds, eps))
    alive = np.any(J0 != 0.0, axis=0)
    bounds, still = s.bounds, np.zeros(x0.size, dtype=bool)
    if plan.last:
        bounds, still = _pin_unmovable(J0, params, x0, s, residual_fn, plan.alive)
    _check_effect(J0, s.names, plan.check_effect, skip=still)
    held = (
        [s.names[i] for i in np.flatnonzero(still)]
        if plan.last
        else _held(J0, s.names, plan.horizon)
    )
    seed = _seeded(plan.earlier, x0, cost0)
    rec = _Recorder(s, plan, x0.copy(), cost0, seed.objective, seed.candidates)
    jacobian = JacobianCache(fn, bounds, eps, REUSE_STEPS)
    jacobian.seed(x_J, J0)  # (the distance to a reused Jacobian is to its own point)
    remaining = max(s.options.max_iters - plan.start_iter, 0)
    # an early stage's stop needs no confirmation: the next stage's Jacobian judges its end
    lm_options = s.lm_options if plan.last else replace(s.lm_options, confirm_stop=False)
    call = BackendCall(fn, jacobian, x0, r0, J0, bounds, s.options, lm_options, remaining, rec)
    res = _run_backend(call, rec)
    stage = Stage(
        plan.horizon, res.x, cost0, rec.best_cost, res.status, res.nit, 0, 0, res.nsecant,
        rec.history_obj, rec.history_x, held=held, alive=alive,
    )  # fmt: skip
    return _Run(stage, fn, jacobian, rec, res.njev)


def _seeded(earlier: History | None, x0: np.ndarray, cost0: float) -> History:
    """A stage's history at its start: ``[cost0]``, after the checkpoint's history of the
    same stage when it resumes one (its last entry is the start itself when it is
    ``cost0``, as for the ``"lm"`` backend, whose accepted costs only fall)."""
    if earlier is None:
        return History([cost0], [x0.copy()])
    obj, cand = list(earlier.objective), [c.copy() for c in earlier.candidates]
    if not np.isclose(obj[-1], cost0, rtol=1e-9, atol=0.0):
        obj.append(cost0)
        cand.append(x0.copy())
    return History(obj, cand)


def _finish_last(
    stage: Stage, fn: CountedResidual, jacobian: JacobianCache, rec: _Recorder
) -> None:
    """The last stage's residual, cost and Jacobian at its solution (an interrupted stage's
    Jacobian is not computed: all NaN)."""
    x_hat = stage.x
    r_hat = fn(x_hat)
    if not np.all(np.isfinite(r_hat)):  # cannot happen for accepted steps; be explicit
        x_hat, r_hat = rec.best_x, fn(rec.best_x)
    stage.x, stage.r = x_hat, r_hat
    stage.cost = 0.5 * float(r_hat @ r_hat)
    if stage.status == Status.INTERRUPTED:  # Ctrl-C means stop now: no p more rollouts
        stage.J = np.full((r_hat.size, x_hat.size), np.nan)
        return
    stage.J = jacobian(x_hat, r_hat)
    _judge_stop(stage, jacobian.bounds, rec.plan.start_cost, rec.s.names, fn)


def _judge_stop(
    stage: Stage,
    bounds: tuple[np.ndarray, np.ndarray],
    start_cost: float | None = None,
    names: list[str] | None = None,
    residual: CountedResidual | None = None,
) -> None:
    """Renames an xtol/ftol/gtol stop that is no minimum ``"small_step"`` (see
    :func:`~mjsysid.fit.status.honest_status`: a clear predicted decrease, or a
    Gauss-Newton step over 0.3 standard errors) and logs the predicted decrease.

    With ``residual``, the linearised model's word is checked first: its step is tried
    (:func:`_try_step`), and a stop where that step does not deliver keeps its status, with
    the trial in ``stage.trial`` (the cost is not quadratic at that scale: a rough or
    strongly curved cost, where the model's step says nothing about a minimum)."""
    if stage.status not in (Status.XTOL, Status.FTOL, Status.GTOL):
        return
    assert stage.J is not None and stage.r is not None
    step = gauss_newton_step(stage.J, stage.r, stage.x, bounds)
    predicted = decrease_along(stage.J, stage.r, step)
    cost0 = max(stage.cost0, start_cost or 0.0)
    se = step_in_standard_errors(stage.J, stage.r, stage.x, bounds)
    worst = int(np.argmax(se)) if se.size else 0
    k = float(se[worst]) if se.size else 0.0
    if names is not None and se.size:
        stage.step = (names[worst], k)
    judged = honest_status(stage.status, stage.cost, predicted, cost0, k)
    if judged is stage.status:
        return
    trial = None if residual is None else _try_step(residual, stage, step, bounds, k)
    if trial is not None and not trial.confirmed:
        logger.info(
            "the fit stopped on %s at cost %.6g; the linearised model's step does not lower "
            "the cost: the stop stands (see the fit's message)",
            stage.status.value,
            stage.cost,
        )
        stage.trial = trial
        return
    logger.warning(
        "the fit stopped on %s at cost %.6g, but the linearised model still predicts a "
        "decrease of %.3g (%.1f %% of the cost) and a step of %.3g standard errors: not "
        "converged (status small_step): the fit's message says what to try",
        stage.status.value,
        stage.cost,
        predicted,
        100.0 * predicted / stage.cost if stage.cost > 0 else float("inf"),
        k,
    )
    stage.status = judged


def _try_step(
    residual: CountedResidual,
    stage: Stage,
    step: np.ndarray | None,
    bounds: tuple[np.ndarray, np.ndarray],
    step_se: float,
) -> StepTrial | None:
    """``step``, the Gauss-Newton step of ``stage``'s end (cut to the box), at the fractions
    :data:`~mjsysid.fit.status.TRIAL_FRACTIONS`, on the residual (one batched call) and on
    the linearised model (``None``: no step to try)."""
    assert stage.J is not None and stage.r is not None
    if step is None or not np.any(step):
        return None
    f = np.array(TRIAL_FRACTIONS)
    X = np.clip(
        stage.x[:, None] + step[:, None] * f[None, :], bounds[0][:, None], bounds[1][:, None]
    )
    R = residual(X)
    with np.errstate(over="ignore", invalid="ignore"):
        actual = 0.5 * np.sum(R * R, axis=0)
    actual = np.where(np.isfinite(actual), actual, np.inf)
    model = stage.r[:, None] + (stage.J @ step)[:, None] * f[None, :]
    predicted = 0.5 * np.sum(model * model, axis=0)
    return StepTrial(
        stage.cost,
        TRIAL_FRACTIONS,
        tuple(map(float, predicted)),
        tuple(map(float, actual)),
        step_se,
    )


# horizons="auto": the early stages, each used only if every sequence keeps this many samples
AUTO_HORIZONS = (0.1, 0.3)
_AUTO_MIN_SAMPLES = 20
# An early stage whose data holds less than this share of the whole data's cost at its start
# is skipped: it barely sees the misfit (a push whose first part is the box at rest), so
# fitting it can only lead the fit astray.
UNINFORMATIVE = 1e-3


def resolve_horizons(
    horizons: Sequence[float] | str | None,
    residual_fn: Any,
    optimizer: str = "lm",
    params: ParameterDict | None = None,
) -> tuple[float, ...]:
    """The horizon stages :func:`optimize` runs: increasing fractions ending with 1.0.

    ``None``: one stage. A sequence: validated, 1.0 appended when missing. ``"auto"``: the
    fractions of :data:`AUTO_HORIZONS` at which every sequence keeps at least 20 measured
    samples (:meth:`~mjsysid.objective.protocols.HorizonResidualFn.horizon_samples`), then
    1.0, when the fit can use them: ``residual_fn`` is a
    :class:`~mjsysid.objective.protocols.HorizonResidualFn` whose ``supports_horizons(params)``
    says so (custom code never receives shortened series unasked), the backend is ``"lm"``
    or ``"mujoco"`` (an early stage ends on a slow iteration, which the scipy backends do
    not report); otherwise one stage.

    Raises:
      TypeError: ``horizons`` is not ``"auto"``, ``None`` or a sequence of numbers, or stages
        are asked of a residual without ``head``.
      ValueError: The fractions are not strictly increasing in ``(0, 1]``.
    """
    checked = check_horizons(horizons)
    if checked is None:
        return (1.0,)
    if isinstance(checked, str):
        return _auto_horizons(residual_fn, optimizer, params)
    hs = list(checked)
    if hs[-1] < 1.0:
        hs.append(1.0)
    if len(hs) > 1 and not isinstance(residual_fn, HorizonResidualFn):
        raise TypeError(
            must_be(
                "residual_fn",
                "a residual with a head(fraction) method (build_residual_fn makes one) when "
                "horizons are given",
                type(residual_fn).__name__,
            )
        )
    return tuple(hs)


def _auto_horizons(
    residual_fn: Any, optimizer: str, params: ParameterDict | None
) -> tuple[float, ...]:
    if (
        optimizer not in ("lm", "mujoco")
        or not isinstance(residual_fn, HorizonResidualFn)
        or not residual_fn.supports_horizons(params)
    ):
        return (1.0,)
    early = [
        h for h in AUTO_HORIZONS if min(residual_fn.horizon_samples(h, params)) >= _AUTO_MIN_SAMPLES
    ]
    return (*early, 1.0)


@dataclass
class StagedFit:
    """What :func:`run_stages` did: every stage (``stages[-1]`` on the whole data), the
    horizon the fit ended in (an early one if interrupted there), the whole data's
    residual counter (``None`` for one stage) and its cost at the start."""

    stages: list[Stage] = field(default_factory=list)
    stopped_in: float = 1.0
    full: CountedResidual | None = None
    initial_cost: float = float("nan")


def run_stages(
    residual_fn: ResidualFn,
    params: ParameterDict,
    x0: np.ndarray,
    s: StageSettings,
    horizons: Sequence[float],
    start_iter: int,
    earlier: History | None = None,
) -> StagedFit:
    """Fits stage after stage, each from where the previous one ended (the first after
    the ``earlier`` iterations of a checkpoint written in it).

    An early stage is skipped when its data hold less than :data:`UNINFORMATIVE` of the
    whole data's cost at its start; an interrupted early stage is followed by the residual
    and Jacobian on the whole data at its point (no fit).
    """
    # every head is made (and a too-short sequence reported) before anything is simulated
    heads = (
        [residual_fn.head(h) for h in horizons[:-1]]
        if isinstance(residual_fn, HorizonResidualFn)
        else []
    )
    fns: list[ResidualFn] = [*heads, residual_fn]
    fit = StagedFit(full=CountedResidual(residual_fn, params) if len(horizons) > 1 else None)
    start = None
    if fit.full is not None:  # the result's initial cost, the first stage's yardstick
        start = (x0.copy(), fit.full(x0))
        fit.initial_cost = 0.5 * float(start[1] @ start[1])
    x, it0 = x0, start_iter
    alive = np.zeros(x0.size, dtype=bool)  # entries with an effect at an earlier stage's start
    allow = s.options.allow_no_effect
    whole_J: tuple[np.ndarray, np.ndarray] | None = None  # see _whole_at
    for k, h in enumerate(horizons):
        last = k == len(horizons) - 1
        # parameters without effect are looked for on the whole data: on a head a
        # parameter may have none yet (the part of the data that excites it comes later)
        seed = earlier if k == 0 else None
        if last:
            plan = StagePlan(
                h, last, it0, "warn" if allow else "error", earlier=seed, fallback=start,
                alive=alive, start_r=fit.full.kept(x) if fit.full is not None else None,
                start_J=whole_J,
            )  # fmt: skip
        else:
            assert fit.full is not None
            exact = k > 0 and _exact(fit.stages[-1])
            r_here, J, rows = _whole_at(fit.full, residual_fn, h, x, s, exact)
            skip = UNINFORMATIVE * 0.5 * float(r_here @ r_here)
            plan = StagePlan(h, last, it0, None, skip, earlier=seed)
            if J is not None and rows is not None:  # the head's start: rows of the whole's
                whole_J = (x.copy(), J)
                plan = replace(plan, start_r=r_here[rows], start_J=(whole_J[0], J[rows]))
        if s.options.verbose and len(horizons) > 1:
            part = (
                "the whole data" if last else f"the first {100 * h:g} % of every sequence or window"
            )
            print(f"stage {k + 1}/{len(horizons)}: {part}", file=s.out, flush=True)
        stage = fit_stage(fns[k], params, x, s, plan)
        fit.stages.append(stage)
        if stage.alive is not None:
            alive |= stage.alive
        x, it0 = stage.x, 0 if last else it0 + stage.nit
        if stage.status == Status.INTERRUPTED and not last:
            fit.stopped_in = h
            fit.stages.append(_evaluate_whole(residual_fn, params, x, s))
            break
    return fit


def _exact(stage: Stage) -> bool:
    """An early stage that fitted its data exactly: converged at :data:`ROUNDOFF` of its start
    cost (noise-free data, a right model) with every parameter free (none held for lack of
    effect, which a later stage could move far)."""
    return stage.status in CONVERGED and stage.cost <= ROUNDOFF * stage.cost0 and not stage.held


def _whole_at(
    full: CountedResidual,
    residual_fn: ResidualFn,
    h: float,
    x: np.ndarray,
    s: StageSettings,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The whole data's residual at ``x``, where the early stage of horizon ``h`` starts:
    its skip test (and the result's start cost, the last stage's fallback).

    After an ``exact`` stage, when the head's residual is rows of the whole's
    (:class:`~mjsysid.objective.protocols.HeadRowsResidualFn`), the whole data's Jacobian is
    computed too, in the same call: the head takes its residual and Jacobian at ``x`` from
    their rows (no simulation of its own), and the later stages of an exact fit start within
    a few finite-difference steps of ``x``, where that Jacobian serves the last stage's
    start. Where a later stage moves far after all, it cost the whole data's Jacobian in
    place of the head's.

    Returns:
      ``r (n,)``; the whole data's ``(n, p)`` Jacobian at ``x`` and the head's rows, when
      computed (else ``None``, ``None``).
    """
    rows = (
        residual_fn.head_rows(h) if exact and isinstance(residual_fn, HeadRowsResidualFn) else None
    )
    if rows is None:
        return full(x), None, None  # (remembered when a stage ends where it began)
    r, J = residual_and_jacobian(full, x, s.bounds, float(s.options.eps))
    full.remember(x, r)
    if not np.all(np.isfinite(r)):
        return r, None, None
    return r, J, rows


def _evaluate_whole(
    residual_fn: ResidualFn, params: ParameterDict, x: np.ndarray, s: StageSettings
) -> Stage:
    """The whole data's residual at ``x``, no fit and no Jacobian (all NaN): the end of a fit
    interrupted in an early stage, reached in one evaluation."""
    fn = CountedResidual(residual_fn, params)
    r = fn(x)
    cost = 0.5 * float(r @ r)
    return Stage(
        1.0, x, cost, cost, Status.INTERRUPTED, 0, fn.nfev, 0, 0, [cost], [x.copy()],
        r=r, J=np.full((r.size, x.size), np.nan),
    )  # fmt: skip
