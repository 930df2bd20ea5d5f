"""A command threshold's profile over the recorded command levels, after the local fit.

A force-law parameter declared ``command_threshold`` (a driver's deadzone,
:class:`~mjsysid.sim.laws.core.LawParameter`) acts on the recorded commands only through which
recorded levels lie above it (:mod:`mjsysid.objective.levels`): the cost is a staircase in it,
flat between neighbouring levels. The local fit moves it only across the ramp of its edge, and
the other values (the gear and the Coulomb friction of that direction, ...) adapt to wherever
it stops: the fit ends in the basin of the start's level. On the source document's Furuta
capture from a far start it ended 2.5 times the true model's held-out error away, at a cost
ten times the one within reach (``bench/README.md``).

The profile looks at every level instead. For each threshold entry in turn:

1. every range ``(L_i, L_{i+1}]`` between neighbouring recorded levels (within the entry's
   bounds) is tried at its middle, the other values where they are: one batched call;
2. the ``keep`` ranges of lowest cost, and the entry's own, are each refitted: the other
   physical values, a few damped Gauss-Newton iterations of all of them in lockstep
   (:func:`refit_batch`);
3. the entry moves to the range whose refit ends lowest, when that is lower than its own
   range's by more than ``margin`` of the cost (the refits are short: closer differences are
   within what they leave unconverged), with the refitted values.

Entries are swept again while one moved (at most ``sweeps`` sweeps; an entry is profiled again
only after another one moved). Nuisance states (window starts) are held at their recorded
values during the profile: fitted per window, they absorb a misfit of the drive and would hide
it. This is a profile likelihood over a discrete parameter (Venzon & Moolgavkar, *Applied
Statistics* 37, 1988) with an approximate inner fit.

When an entry moved, the local fit runs again from the profile's point
(:func:`~mjsysid.fit.search.fit_with_search` does), and the lower end of the two fits is
kept: the profile never leaves a fit worse than it was.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

import numpy as np

from mjsysid.fit.jacobian import CountedResidual, column_costs, fd_steps
from mjsysid.fit.local import run_fit
from mjsysid.fit.options import FitOptions, ThresholdProfileOptions
from mjsysid.fit.result import OptimizeResult, RangeTrial, ThresholdProfile, ThresholdSweep
from mjsysid.fit.status import Status
from mjsysid.objective.initial_state import nuisance_mask
from mjsysid.objective.levels import LevelBracket
from mjsysid.objective.protocols import ResidualFn, ThresholdResidualFn
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.rollout import RolloutDivergedError

__all__ = [
    "level_ranges",
    "profile_thresholds",
    "refine_thresholds",
    "refit_batch",
    "threshold_entries",
]

logger = logging.getLogger(__name__)


def threshold_entries(
    residual_fn: ResidualFn, params: ParameterDict, names: list[str]
) -> list[tuple[int, LevelBracket]]:
    """``(position in x, bracket)`` of every free command-threshold entry ``residual_fn``
    knows of (none when it is no :class:`~mjsysid.objective.protocols.ThresholdResidualFn`).

    Args:
      names: The label of every entry of ``x`` (``"motor_deadzone[0]"``).
    """
    if not isinstance(residual_fn, ThresholdResidualFn):
        return []
    index = {n: i for i, n in enumerate(names)}
    return [(index[b.name], b) for b in residual_fn.threshold_brackets(params) if b.name in index]


def level_ranges(bracket: LevelBracket) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(values, below, above)``, each ``(k,)``: the ranges ``(below_i, above_i]`` between
    neighbouring recorded levels of ``bracket``'s direction within its bounds (the bounds
    close the first and the last; an infinite bound is replaced by the level beside it moved
    by the neighbouring gap, or by the level itself), and the middle of each, the value the
    profile tries. Empty when no recorded level lies within the bounds (nothing to choose)."""
    lo, hi = bracket.bounds
    levels = np.asarray(bracket.levels, dtype=np.float64)
    inner = levels[(levels > lo) & (levels < hi)]
    if inner.size == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    gap_lo = inner[1] - inner[0] if inner.size > 1 else abs(inner[0])
    gap_hi = inner[-1] - inner[-2] if inner.size > 1 else abs(inner[-1])
    first = lo if np.isfinite(lo) else inner[0] - gap_lo
    last = hi if np.isfinite(hi) else inner[-1] + gap_hi
    edges = np.concatenate([[first], inner, [last]])
    below, above = edges[:-1], edges[1:]
    return 0.5 * (below + above), below, above


def refit_batch(
    residual: Callable[[np.ndarray], np.ndarray],
    X: np.ndarray,
    rows: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    iterations: int,
    eps: float = 1.5e-8,
) -> tuple[np.ndarray, np.ndarray]:
    """``k`` least-squares problems refitted in lockstep: the ``rows`` of each column of ``X``
    move, the other entries stay.

    Each iteration is Levenberg-Marquardt with Marquardt's scaling (Marquardt, *J. SIAM* 11,
    1963; Nocedal & Wright, *Numerical Optimization*, 2nd ed., §10.3) for every column ``l``
    at once: the forward-difference Jacobian ``J_l`` of its ``m`` rows (steps
    ``h = ±eps·max(1, |x|)``, inwards at an upper bound), all ``k·m`` columns in one call; the
    step ``δ_l = −(J_lᵀJ_l + μ_l diag(J_lᵀJ_l))⁻¹ J_lᵀ r_l`` cut to the bounds; the ``k``
    trial points in one call. A trial that lowers its cost is taken and ``μ_l`` divided by 3,
    else ``μ_l`` is multiplied by 4 (start ``1e-2``). Non-finite residuals count as an
    infinite cost.

    Args:
      residual: ``(p, j) -> (n, j)``, the residual of ``j`` candidates.
      X: ``(p, k)`` the start of every problem.
      rows: ``(m,)`` the entries that move.
      bounds: ``(lo, hi)``, each ``(p,)``.
      iterations: Iterations (each two residual calls).
      eps: Relative finite-difference step.

    Returns:
      ``(costs (k,), X (p, k))`` at the end.
    """
    lo, hi = bounds
    X = np.array(X, dtype=np.float64)
    k, m = X.shape[1], rows.size
    R = residual(X)
    c = column_costs(R)
    if m == 0:
        return c, X
    mu = np.full(k, 1e-2)
    for _ in range(iterations):
        live = np.flatnonzero(np.isfinite(c))
        if live.size == 0:
            break
        xr = X[rows][:, live]  # (m, j)
        h = fd_steps(xr, hi[rows, None], eps)
        XJ = np.repeat(X[:, live], m, axis=1)  # problem-major: column j*m + i
        XJ[rows, :] += (np.eye(m)[:, None, :] * h.T[None, :, :]).reshape(m, -1)
        RJ = residual(XJ)
        T = X[:, live].copy()
        for j, col in enumerate(live):
            J = (RJ[:, j * m : (j + 1) * m] - R[:, col : col + 1]) / h[None, :, j]
            J[~np.isfinite(J)] = 0.0
            A = J.T @ J
            d = np.diag(A).copy()
            d[d <= 0.0] = 1.0
            try:
                step = -np.linalg.solve(A + mu[col] * np.diag(d), J.T @ R[:, col])
            except np.linalg.LinAlgError:
                step = np.zeros(m)
            T[rows, j] = np.clip(X[rows, col] + step, lo[rows], hi[rows])
        RT = residual(T)
        ct = column_costs(RT)
        ok = ct < c[live]
        taken = live[ok]
        X[:, taken], R[:, taken], c[taken] = T[:, ok], RT[:, ok], ct[ok]
        mu[live] = np.where(ok, mu[live] / 3.0, mu[live] * 4.0)
    return c, X


def profile_thresholds(
    residual_fn: ResidualFn,
    params: ParameterDict,
    x: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    names: list[str],
    options: ThresholdProfileOptions,
    eps: float = 1.5e-8,
) -> tuple[np.ndarray, ThresholdProfile]:
    """The profile of every command-threshold entry (see the module docstring).

    Args:
      residual_fn: The fit's residual (a
        :class:`~mjsysid.objective.protocols.ThresholdResidualFn` names the entries).
      params: The parameters (structure, nominal values of the nuisance states).
      x: ``(p,)`` the fit's solution.
      bounds: ``(lo, hi)``, each ``(p,)``.
      names: The label of every entry of ``x``.
      options: How many ranges are refitted, for how many iterations, how many sweeps.
      eps: Relative finite-difference step of the refits.

    Returns:
      ``(x, profile)``: the profile's point (the nuisance states at their recorded values,
      the start of the local fit that follows) and what it did. ``profile.sweeps`` is empty
      when there is no threshold entry.
    """
    entries = threshold_entries(residual_fn, params, names)
    return _profile(residual_fn, params, x, bounds, entries, options, eps)


def _profile(
    residual_fn: ResidualFn,
    params: ParameterDict,
    x: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    entries: list[tuple[int, LevelBracket]],
    options: ThresholdProfileOptions,
    eps: float,
) -> tuple[np.ndarray, ThresholdProfile]:
    """:func:`profile_thresholds` of the ``entries`` found already."""
    t0 = time.perf_counter()
    out = ThresholdProfile()
    if not entries:
        return x, out
    lo, hi = bounds
    nuisance = nuisance_mask(params)
    point = np.array(x, dtype=np.float64)
    point[nuisance] = np.clip(params.as_nominal_vector()[nuisance], lo[nuisance], hi[nuisance])
    held = nuisance.copy()
    for i, _ in entries:
        held[i] = True
    rows = np.flatnonzero(~held)
    fn = CountedResidual(residual_fn, params)
    stale = {i for i, _ in entries}  # profiled again only after another entry moved
    for _ in range(options.sweeps):
        if not stale:
            break
        for i, bracket in entries:
            if i not in stale:
                continue
            stale.discard(i)
            point, sweep = _profile_entry(fn, point, i, bracket, rows, bounds, options, eps)
            out.sweeps.append(sweep)
            if sweep.moved:
                stale |= {j for j, _ in entries if j != i}
    out.evaluations, out.wall_time = fn.nfev, time.perf_counter() - t0
    return point, out


def _profile_entry(
    fn: CountedResidual,
    point: np.ndarray,
    i: int,
    bracket: LevelBracket,
    rows: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    options: ThresholdProfileOptions,
    eps: float,
) -> tuple[np.ndarray, ThresholdSweep]:
    """Entry ``i`` profiled from ``point``: the new point and the sweep's record (no range
    to choose from: the point as it is)."""
    values, below, above = level_ranges(bracket)
    if values.size < 2:
        return point, ThresholdSweep(bracket.name, (), float(point[i]), False)
    X = np.repeat(point[:, None], values.size, axis=1)
    X[i] = values
    scan = column_costs(fn(X))
    own = int(np.clip(np.searchsorted(above, point[i], side="left"), 0, values.size - 1))
    order = [int(j) for j in np.argsort(scan, kind="stable")[: options.keep]]
    if own not in order:
        order.append(own)
    start = X[:, order]
    start[:, order.index(own)] = point  # its own range at its own value
    refit, ends = refit_batch(fn, start, rows, bounds, options.iterations, eps)
    mine = refit[order.index(own)]
    best = int(np.argmin(refit))
    moved = order[best] != own and refit[best] < (1.0 - options.margin) * mine
    chosen = best if moved else order.index(own)
    trials = tuple(
        RangeTrial(
            float(values[j]),
            float(below[j]),
            float(above[j]),
            float(scan[j]),
            float(refit[order.index(j)]) if j in order else None,
            j == own,
        )
        for j in range(values.size)
    )
    new = ends[:, chosen].copy()
    logger.info(
        "threshold profile: %s %s (own range %.4g..%.4g refitted to cost %.6g, best %.4g..%.4g "
        "to %.6g)",
        bracket.name,
        f"moved to {new[i]:.6g}" if moved else "stays",
        below[own],
        above[own],
        mine,
        below[order[best]],
        above[order[best]],
        refit[best],
    )
    return new, ThresholdSweep(bracket.name, trials, float(new[i]), bool(moved))


def refine_thresholds(
    initial_params: ParameterDict,
    residual_fn: ResidualFn,
    fitted: tuple[ParameterDict, OptimizeResult],
    options: FitOptions,
) -> tuple[ParameterDict, OptimizeResult]:
    """The fit ``fitted`` after the profile of its command thresholds: when an entry moved,
    the local fit from the profile's point (``options`` without the outer stages and the
    checkpoint), and the lower end of the two. The profile is in
    ``result.threshold_profile`` either way; nothing happens without
    ``options.threshold_profile``, without a threshold entry, or after an interrupted fit.

    Args:
      initial_params: The fit's parameters (structure and bounds).
      residual_fn: The fit's residual.
      fitted: ``(opt_params, result)`` of the fit.
      options: The fit's options.
    """
    opt_params, result = fitted
    settings = options.threshold_profile
    if settings is None or result.status == Status.INTERRUPTED:
        return fitted
    entries = threshold_entries(residual_fn, opt_params, list(result.parameter_names))
    if not entries:
        return fitted
    bounds = initial_params.get_bounds()
    say = _printer(options)
    named = ", ".join(b.name for _, b in entries)
    say(f"threshold profile: {named} over the ranges between recorded levels")
    try:
        x, profile = _profile(
            residual_fn, opt_params, result.x, bounds, entries, settings, float(options.eps)
        )
    except KeyboardInterrupt:
        logger.warning("threshold profile interrupted: the fit before it is the result")
        return fitted
    profile.fit_cost = float(result.cost)
    if not profile.moved:
        return opt_params, _with(result, profile, result, profile.evaluations)
    say(f"{profile.text()} Fitting again from there:")
    start = initial_params.copy()
    start.update_from_vector(x)
    local = options.replace(
        global_search=None,
        starts=None,
        checkpoint=None,
        resume=False,
        check_conditioning=False,
        allow_no_effect=True,
        threshold_profile=None,
    )
    t0 = time.perf_counter()
    try:
        again_params, again = run_fit(start, residual_fn, local)
    except (ValueError, RolloutDivergedError) as e:
        logger.warning("threshold profile: the fit from its point failed (%s); the first fit "
                       "is the result", e)  # fmt: skip
        profile.kept, profile.refit_wall_time = "fit", time.perf_counter() - t0
        return opt_params, _with(result, profile, result, profile.evaluations)
    profile.refit_wall_time = time.perf_counter() - t0
    profile.refit_cost = float(again.cost)
    extra = profile.evaluations + again.nfev
    if again.cost < result.cost:
        profile.kept = "refit"
        logger.info("%s", profile.text())
        merged = _with(again, profile, result, extra)
        return again_params, dataclasses.replace(
            merged,
            initial_cost=result.initial_cost,
            global_search=result.global_search,
            multistart=result.multistart,
            nit=result.nit + again.nit,
        )
    profile.kept = "fit"
    logger.info("%s", profile.text())
    return opt_params, _with(result, profile, result, extra)


def _printer(options: FitOptions) -> Callable[[str], None]:
    """Prints a line to ``options.output`` (stdout by default) when ``options.verbose``."""

    def say(text: str) -> None:
        if options.verbose:
            print(text, file=options.stream, flush=True)

    return say


def _with(
    result: OptimizeResult, profile: ThresholdProfile, first: OptimizeResult, extra: int
) -> OptimizeResult:
    """``result`` with the profile, its evaluations and time counted from ``first``'s."""
    return dataclasses.replace(
        result,
        nfev=first.nfev + extra,
        wall_time=first.wall_time + profile.wall_time + profile.refit_wall_time,
        message=f"{result.message} {profile.text()}",
        threshold_profile=profile,
    )
