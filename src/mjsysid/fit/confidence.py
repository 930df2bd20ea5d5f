"""Confidence intervals of a finished fit, with what limits them.

:func:`compute_confidence` linearises the fitted model at the end point
(:func:`~mjsysid.fit.intervals.calculate_intervals`), pools one noise variance per measured
signal where the residual function says which rows belong to which signal, and marks values
that sit at a bound; :class:`Confidence` carries the result and says, in words, what limits it.

What limits an interval (issue #20; ``docs/intervals.md``): a value at a bound has a
bound-limited interval of its own and counts as free for the others' (which can only widen
them); residuals that are not white (:mod:`mjsysid.fit.whiteness`, Durbin-Watson) get a
Newey-West sandwich and the caveat that the model cannot reproduce the data; near-collinear
parameters (:mod:`mjsysid.fit.confidence`) get infinite intervals and a caveat naming their
combination, whatever the noise; Jacobian columns a rough (contact) cost spoils take a larger step
(:func:`~mjsysid.fit.jacobian.rough_columns`); ``method="bootstrap"`` resamples sequences or
windows (:mod:`mjsysid.fit.confidence`) for correlated residuals.

After a MAP fit (priors on parameters, :mod:`mjsysid.fit.prior`) the residual and the
Jacobian end with the prior rows (``result.prior``): the intervals include the
prior, and each parameter is said to be determined by the data, by its prior, or by both
(:func:`determined_by`).

Block bootstrap intervals: for residuals correlated in time, or a model that misses.

The linearised intervals (:func:`~mjsysid.fit.intervals.calculate_intervals`) assume
independent residuals. A model that misses some physics leaves residuals that are correlated
for seconds; a thousand samples then carry the information of a few, and those intervals are
too narrow (2 of 10 covering the truth for a Furuta pendulum under model mismatch). The block
bootstrap resamples whole blocks (sequences, or the windows of a multiple-shooting fit),
within which the correlation stays intact, with replacement: draw ``b`` gives block ``g`` the
weight ``c_g`` (how often it was drawn; a multinomial of ``G`` draws over ``G`` blocks) and
the fit is repeated briefly, from the solution, on the weighted residual
``√c_g · r_g(θ)``: ``steps`` Gauss-Newton steps

    δ = −argmin_δ ‖W^{1/2} (r + J δ)‖²     (minimum norm, column-scaled; W = diag(c))

clipped to the bounds (the first at the solution's ``J`` and ``r``, needing no simulation).
The ``α/2`` and ``1 − α/2`` quantiles of the ``θ_b`` are the percentile interval. Rows outside
every block (the prior rows of a MAP fit, label ``-1``) keep weight 1. Reference: Künsch,
"The jackknife and the bootstrap for general stationary observations", Ann. Statist. 17
(1989); Efron & Tibshirani, *An Introduction to the Bootstrap* (1993), §13 (percentile).
With few blocks (under ~10) the percentile intervals are themselves rough. A parameter that acts
on one block only (a window's initial state, :func:`local_columns`) is not seen to vary by
resampling blocks; :func:`~mjsysid.fit.confidence.compute_confidence` keeps its linearised
interval.

Near-collinear parameters: combinations the data determine while their members are not.

With the columns of ``J`` ``(n, p)`` scaled to unit norm, ``J_s = J D``, ``D = diag(1/‖J_:,i‖)``,
the Gram matrix ``G = J_sᵀJ_s`` holds the cosines between columns. Two parameters whose
columns have ``|G_ij| > cos_tol`` (0.9999) move the residual (almost) the same way: only
their sum (or difference, product, ratio) is determined, along the direction
``u = (e_i − sign(G_ij) e_j)/√2`` of eigenvalue ``1 − |G_ij|``. A group of more is found from
the eigenvalues of ``G``: a direction ``v_k`` with ``λ_k < eig_rtol·λ_max`` (1e-5) is one the
data barely see. Neither test depends on the noise: an exact fit (``σ² = 0``, noise-free
data) that stops anywhere along such a valley is as good as any other point of it, and its
zero-width intervals would claim a precision the data do not have (the optimizer's tolerance,
not the data, decides where it stops). The combinations are named by
:func:`mjsysid.fit.audit.name_direction`. Reference: Belsley, Kuh & Welsch, *Regression
Diagnostics* (1980), ch. 3 (collinearity from the scaled columns' condition indices).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import scipy.stats

from mjsysid.fit.audit import Combination, name_direction
from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.jacobian import (
    ROUGH_FACTORS,
    CountedResidual,
    residual_and_jacobian,
    rough_columns,
)
from mjsysid.fit.prior import PriorRows
from mjsysid.fit.result import OptimizeResult
from mjsysid.fit.whiteness import (
    Layout,
    Whiteness,
    hac_score_covariance,
    residual_series,
    whiteness,
)
from mjsysid.objective.protocols import DescribedResidualFn, ThresholdResidualFn
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be
from mjsysid.util.mujoco_log import quietly

__all__ = [
    "COS_TOL",
    "EIG_RTOL",
    "Bootstrap",
    "Collinear",
    "block_bootstrap",
    "block_labels",
    "local_columns",
    "near_collinear",
]

COS_TOL = 0.9999  # |cos| of two unit-scaled columns above this: a near-collinear pair
EIG_RTOL = 1e-5  # scaled eigenvalue below this fraction of the largest: a weak group
WEIGHT = 0.3  # a parameter belongs to a weak direction when its component is at least this


@dataclass(frozen=True)
class Collinear:
    """A near-collinear pair or group.

    Attributes:
      combination: What the data determine, named (:class:`~mjsysid.fit.audit.Combination`).
      members: Indices of its parameters (``|component| ≥ WEIGHT``).
      cosine: ``|cos|`` of the pair's columns (``None`` for a group found by eigenvalue).
      eigenvalue: ``λ/λ_max`` of the direction in the scaled ``J_sᵀJ_s`` (``1 − |cos|`` over
        the pair's own ``1 + |cos|`` for a pair).
    """

    combination: Combination
    members: tuple[int, ...]
    cosine: float | None
    eigenvalue: float

    def text(self) -> str:
        """The caveat, in words."""
        how = (
            f"their scaled Jacobian columns have |cos| = {self.cosine:.6f}"
            if self.cosine is not None
            else f"a scaled eigenvalue {self.eigenvalue:.1e} of the largest"
        )
        return (
            f"{self.combination.text} ({how}): their own intervals are not determined by "
            "these data (reported infinite), whatever the noise; fix or give a prior to one "
            "of them, or excite them differently"
        )


def near_collinear(
    J: np.ndarray,
    names: Sequence[str],
    x: np.ndarray,
    *,
    cos_tol: float = COS_TOL,
    eig_rtol: float = EIG_RTOL,
    weight: float = WEIGHT,
) -> list[Collinear]:
    """The near-collinear pairs and weak groups of a Jacobian (see the module docstring).

    Args:
      J: ``(n, p)`` Jacobian. names: ``p`` parameter names. x: ``(p,)`` their values.
      cos_tol: Pairs with ``|cos|`` above this.
      eig_rtol: Directions with a scaled eigenvalue below this fraction of the largest.
      weight: Smallest component of a member.

    Returns:
      Pairs first (largest ``|cos|`` first), then the groups not already named by a pair.
      Columns without any effect (zero) are left out: they are unidentifiable already.
    """
    J = np.asarray(J, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    norms = np.linalg.norm(J, axis=0)
    live = np.flatnonzero(norms > 0)
    if live.size < 2:
        return []
    Js = J[:, live] / norms[live]
    G = Js.T @ Js
    d = 1.0 / norms[live]
    sub_names = [str(names[int(i)]) for i in live]
    found = _pairs(G, d, x[live], sub_names, cos_tol, weight)
    seen = {c.members for c in found}
    for c in _groups(G, d, x[live], sub_names, eig_rtol, weight):
        if c.members not in seen and len(c.members) > 1:
            seen.add(c.members)
            found.append(c)
    return [
        Collinear(c.combination, tuple(int(live[i]) for i in c.members), c.cosine, c.eigenvalue)
        for c in found
    ]


def _pairs(
    G: np.ndarray, d: np.ndarray, x: np.ndarray, names: list[str], cos_tol: float, weight: float
) -> list[Collinear]:
    """The pairs with ``|G_ij| > cos_tol``, largest first."""
    iu, ju = np.triu_indices(G.shape[0], k=1)
    c = np.abs(G[iu, ju])
    out = []
    for k in np.argsort(-c):
        if not c[k] > cos_tol:
            break
        i, j = int(iu[k]), int(ju[k])
        u = np.zeros(G.shape[0])
        u[i], u[j] = 1.0, -np.sign(G[i, j])
        u /= np.sqrt(2.0)
        ratio = (1.0 - c[k]) / (1.0 + c[k])
        combo = name_direction(u, u * d, x, names, float(np.sqrt(ratio)), weight)
        out.append(Collinear(combo, (i, j), float(c[k]), float(ratio)))
    return out


def _groups(
    G: np.ndarray, d: np.ndarray, x: np.ndarray, names: list[str], eig_rtol: float, weight: float
) -> list[Collinear]:
    """The eigen-directions of ``G`` below ``eig_rtol·λ_max``, weakest first."""
    lam, V = np.linalg.eigh(G)
    lam_max = float(lam[-1])
    out = []
    for k in np.flatnonzero(lam < eig_rtol * lam_max):
        u = V[:, k] * (1.0 if V[np.argmax(np.abs(V[:, k])), k] >= 0 else -1.0)
        ratio = max(float(lam[k]), 0.0) / lam_max
        combo = name_direction(u, u * d, x, names, float(np.sqrt(ratio)), weight)
        members = tuple(sorted(int(i) for i in np.flatnonzero(np.abs(u) >= weight)))
        out.append(Collinear(combo, members, None, ratio))
    return out


@dataclass(frozen=True)
class Bootstrap:
    """Percentile intervals of a block bootstrap.

    Attributes:
      lower, upper: ``(p,)`` the ``α/2`` and ``1 − α/2`` quantiles of the refitted values.
      samples: ``(draws, p)`` the refitted values.
      blocks: How many blocks were resampled.
    """

    lower: np.ndarray
    upper: np.ndarray
    samples: np.ndarray
    blocks: int


@dataclass(frozen=True)
class _Problem:
    """What every draw refits: the residual, the solution and where it may move."""

    residual: Callable[[np.ndarray], np.ndarray] | None
    x: np.ndarray
    r: np.ndarray
    J: np.ndarray
    bounds: tuple[np.ndarray, np.ndarray]
    free: np.ndarray


def block_labels(residual_fn: Any, n: int) -> np.ndarray | None:
    """``(n,)`` block (sequence or window) of every residual row from the residual
    function's ``block_offsets``; ``-1`` for rows after the last block (prior rows).
    ``None`` when the residual function does not say."""
    if not isinstance(residual_fn, DescribedResidualFn):
        return None
    offsets = np.asarray(residual_fn.block_offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.size < 2 or offsets[-1] > n or offsets[0] != 0:
        return None
    labels = np.full(n, -1, dtype=np.int64)
    for g in range(offsets.size - 1):
        labels[offsets[g] : offsets[g + 1]] = g
    return labels


def block_bootstrap(
    residual: Callable[[np.ndarray], np.ndarray] | None,
    x: np.ndarray,
    r: np.ndarray,
    J: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    blocks: np.ndarray,
    *,
    draws: int = 200,
    seed: int = 0,
    alpha: float = 0.05,
    steps: int = 1,
    free: np.ndarray | None = None,
) -> Bootstrap:
    """Block-bootstrap percentile intervals (see the module docstring).

    Args:
      residual: Vectorised residual ``(p, k) -> (n, k)`` (``None``: ``steps`` must be 1).
      x: ``(p,)`` the solution. r: ``(n,)`` its residual. J: ``(n, p)`` its Jacobian.
      bounds: ``(lower, upper)``, each ``(p,)``.
      blocks: ``(n,)`` integer block of every row (``-1``: in every draw, weight 1).
      draws: Number of resamples, ``>= 2``. seed: Random seed.
      alpha: ``1 − alpha`` intervals. steps: Gauss-Newton steps per draw, ``>= 1``.
      free: ``(p,)`` bool, the entries the refits move (default all; others stay at ``x``).

    Returns:
      The :class:`Bootstrap`.

    Raises:
      ValueError: Fewer than 2 blocks, ``draws < 2``, ``steps < 1`` (or ``> 1`` without a
        residual), or ``blocks`` of the wrong shape.
    """
    labels = np.asarray(blocks)
    groups = _checked(labels, r.size, draws, steps, residual is not None)
    mask = np.ones(x.size, dtype=bool) if free is None else np.asarray(free, dtype=bool)
    problem = _Problem(residual, x, r, J, bounds, mask)
    index = np.searchsorted(groups, labels)
    rng = np.random.default_rng(seed)
    samples = np.empty((int(draws), x.size))
    for b in range(int(draws)):
        counts = rng.multinomial(groups.size, np.full(groups.size, 1.0 / groups.size))
        w = np.where(labels >= 0, counts[np.minimum(index, groups.size - 1)], 1.0)
        samples[b] = _refit(problem, np.sqrt(w), int(steps))
    q = np.quantile(samples, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    return Bootstrap(q[0], q[1], samples, int(groups.size))


def local_columns(J: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """``(p,)`` bool: the columns that act on the rows of one block only (a window's initial
    state). Resampling blocks cannot show their spread: a block drawn ``c`` times fits its
    own parameters as once, and one not drawn leaves them where they are."""
    labels = np.asarray(blocks)
    out = np.zeros(J.shape[1], dtype=bool)
    for i in range(J.shape[1]):
        seen = np.unique(labels[(J[:, i] != 0) & (labels >= 0)])
        out[i] = seen.size == 1
    return out


def _checked(labels: np.ndarray, n: int, draws: Any, steps: Any, refits: bool) -> np.ndarray:
    """The distinct blocks of checked arguments of :func:`block_bootstrap`."""
    if labels.shape != (n,) or labels.dtype.kind not in "iu":
        raise ValueError(must_be("blocks", f"({n},) integer labels", labels))
    groups = np.unique(labels[labels >= 0])
    if groups.size < 2:
        raise ValueError(
            must_be(
                "the bootstrap's blocks",
                "at least 2 (sequences or windows)",
                int(groups.size),
                hint="record more than one sequence, or cut the recording into windows "
                "(experiment file: shooting: {window: 2.0})",
            )
        )
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 2:
        raise ValueError(must_be("draws", "an integer >= 2", draws))
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(must_be("steps", "an integer >= 1", steps))
    if steps > 1 and not refits:
        raise ValueError(must_be("steps", "1 without a residual function to refit", steps))
    return groups


def _refit(problem: _Problem, sw: np.ndarray, steps: int) -> np.ndarray:
    """``steps`` Gauss-Newton steps on the weighted residual ``sw·r`` from the solution."""
    lo, hi = problem.bounds
    theta, r, J = problem.x.copy(), problem.r, problem.J
    for k in range(steps):
        if k:
            assert problem.residual is not None
            r, J = residual_and_jacobian(problem.residual, theta, problem.bounds)
        theta = np.clip(theta + _step(J, r, sw, problem.free), lo, hi)
    return cast(np.ndarray, theta)


def _step(J: np.ndarray, r: np.ndarray, sw: np.ndarray, free: np.ndarray) -> np.ndarray:
    """The minimum-norm Gauss-Newton step of the weighted problem, on column-scaled ``J``."""
    Jw = J[:, free] * sw[:, None]
    norms = np.linalg.norm(Jw, axis=0)
    d = 1.0 / np.where(norms > 0, norms, 1.0)
    ds = np.linalg.lstsq(Jw * d, -(sw * r), rcond=1e-10)[0]
    out = np.zeros(J.shape[1])
    out[free] = ds * d
    return out


Bounds = tuple[np.ndarray, np.ndarray]


@dataclass
class Confidence:
    """Per-parameter confidence information.

    Attributes:
      names: Label of each free entry. values: identified values.
      half_widths: ``(p,)`` half-widths of the ``1 − alpha`` intervals (inf if unidentifiable).
      covariance: ``(p, p)`` covariance (see :func:`calculate_intervals`).
      alpha: Significance level.
      converged: Whether the fit met a convergence test (``OptimizeResult.success``). The
        intervals linearise the model at the end point; at a point that is not a minimum they
        describe nothing useful.
      at_bound: ``(p,)`` ``-1`` / ``+1`` where the value sits at its lower / upper bound, else
        ``0`` (:func:`bound_sides`). Such a parameter was held at its bound for the others'
        intervals; its own is bound-limited and reported infinite.
      determined_by: After a MAP fit (``None`` without priors), per parameter: ``"data"``,
        ``"prior"``, ``"data and prior"``, or ``"none"`` (an infinite interval); see
        :func:`determined_by`.
      notes: Further caveats, in words (near-collinear parameters, rough Jacobian columns,
        the bootstrap), from :func:`compute_confidence`.
      interval: ``(p, 2)`` lower and upper ends where they are not ``value ± half_width``
        (a bootstrap's percentile intervals; ``half_widths`` is then the larger side).
      method: ``"linear"`` (linearised at the solution), ``"hac"`` (the linearised
        sandwich with a Newey-West estimate of the residuals' correlation in time) or
        ``"bootstrap"``.
      whiteness: How white the residual is (Durbin-Watson per signal,
        :class:`~mjsysid.fit.whiteness.Whiteness`); ``None`` when not computed.
      stop_reason: How the fit ended, in words, when it did not converge (``""`` otherwise).
    """

    names: list[str]
    values: np.ndarray
    half_widths: np.ndarray
    covariance: np.ndarray
    alpha: float
    converged: bool = True
    at_bound: np.ndarray | None = None
    determined_by: list[str] | None = None
    notes: list[str] = field(default_factory=list)
    interval: np.ndarray | None = None
    method: str = "linear"
    whiteness: Whiteness | None = None
    stop_reason: str = ""

    @property
    def identifiable(self) -> np.ndarray:
        """``(p,)`` bool: finite interval."""
        return cast(np.ndarray, np.isfinite(self.half_widths))

    def caveats(self) -> list[str]:
        """What limits these intervals, in words (empty when nothing does)."""
        out = []
        if not self.converged:
            why = f" ({self.stop_reason})" if self.stop_reason else ""
            out.append(
                f"the fit did not converge{why}: the intervals describe its end point, which "
                "is not a minimum"
            )
        out += self.whiteness_caveats()
        out += self._bound_caveats()
        for n, by in zip(self.names, self.determined_by or [], strict=False):
            if by == "prior":
                out.append(
                    f"{n} is determined by its prior, not by the data: its interval is the prior's"
                )
        return out + list(self.notes)

    def whiteness_caveats(self) -> list[str]:
        """The model-cannot-reproduce-the-data caveat, when the residual is not white."""
        w = self.whiteness
        if w is None or w.white:
            return []
        how = {
            "hac": "the intervals are a Newey-West (HAC) sandwich, widened for that "
            "correlation (never narrower than the linearised ones)",
            "bootstrap": "the intervals are a block bootstrap over sequences or windows",
            "linear": "these linearised intervals assume independent residuals and are too "
            "narrow (confidence: {method: auto} or hac widens them)",
        }.get(self.method, "")
        return [
            f"the model cannot reproduce the data: the residuals are not white "
            f"({w.text()}; their variance is {w.noise_ratio:.3g}x their sample-to-sample "
            f"noise), so {how}"
        ]

    def _bound_caveats(self, each: int = 3) -> list[str]:
        """One caveat per parameter at a bound, or one for all of them beyond ``each`` (a
        windowed fit can have dozens of window starts at their margins)."""
        side = np.zeros(len(self.names), int) if self.at_bound is None else self.at_bound
        pairs = zip(self.names, side, strict=True)
        held = [(n, "lower" if s < 0 else "upper") for n, s in pairs if s]
        if len(held) > each:
            named = ", ".join(n for n, _ in held[:each])
            return [
                f"{len(held)} parameters are at a bound ({named} and {len(held) - each} more; "
                "the table marks them): their intervals are bound-limited (not given), and the "
                "others' are computed with them free (which can only widen them)"
            ]
        return [
            f"{n} is at its {bound} bound: its interval is bound-limited (not given), and the "
            "others' are computed with it free (which can only widen them)"
            for n, bound in held
        ]

    def ends(self) -> np.ndarray:
        """``(p, 2)`` lower and upper end of every interval (``value ± half_width`` unless
        :attr:`interval` gives them)."""
        if self.interval is not None:
            return np.asarray(self.interval, dtype=np.float64)
        v, h = np.asarray(self.values), np.asarray(self.half_widths)
        return np.column_stack([v - h, v + h])

    def to_dict(self) -> dict[str, Any]:
        rows = []
        side = np.zeros(len(self.names), int) if self.at_bound is None else self.at_bound
        ends = self.ends()
        for k, (n, v, h, b) in enumerate(
            zip(self.names, self.values, self.half_widths, side, strict=True)
        ):
            finite = bool(np.isfinite(h))
            rows.append(
                {
                    "name": n,
                    "value": float(v),
                    "half_width": float(h) if finite else ".inf",
                    "lower": float(ends[k, 0]) if finite else "-.inf",
                    "upper": float(ends[k, 1]) if finite else ".inf",
                    "identifiable": finite,
                    "at_bound": {-1: "lower", 1: "upper"}.get(int(b), False),
                }
            )
        if self.determined_by is not None:
            for row, by in zip(rows, self.determined_by, strict=True):
                row["determined_by"] = by
        out: dict[str, Any] = {
            "alpha": self.alpha,
            "method": self.method,
            "converged": self.converged,
        }
        if self.stop_reason:
            out["stop_reason"] = self.stop_reason
        if self.whiteness is not None:
            out["whiteness"] = self.whiteness.to_dict()
        out.update(caveats=self.caveats(), parameters=rows)
        return out


BOUND_RTOL = 1e-6  # within this fraction of its range from a bound: at the bound


def bound_sides(
    x: np.ndarray, lo: np.ndarray, hi: np.ndarray, range_rtol: float = BOUND_RTOL
) -> np.ndarray:
    """``(p,)`` ``-1`` / ``+1`` where ``x`` is at its lower / upper bound, else ``0``.

    At a bound means within ``max(1e-9·max(1, |x|), range_rtol·(hi − lo))`` of it (the
    second where both bounds are finite): a fit that ends 2e-8 above a bound of a range of
    10 pressed against it (an optimizer stops a step short), and its interval, computed as if
    it were free, describes the wrong problem.
    """
    span = np.where(np.isfinite(hi - lo), hi - lo, 0.0)
    tol = np.maximum(1e-9 * np.maximum(1.0, np.abs(x)), range_rtol * span)
    return np.where(x <= lo + tol, -1, np.where(x >= hi - tol, 1, 0))


PRIOR_SHARE = 0.9  # posterior variance / prior variance above this: held by the prior
DATA_SHARE = 0.1  # ... below this: determined by the data


def determined_by(
    half_widths: np.ndarray, covariance: np.ndarray, rows: PriorRows | None
) -> list[str]:
    """What determined each parameter of a MAP fit: ``"data"``, ``"prior"``, ``"data and
    prior"`` or ``"none"`` (an infinite interval).

    A parameter with a prior compares its posterior variance ``Σ_ii`` with the prior's
    ``σ_i²``. The ratio ``Σ_ii/σ_i²`` is the prior's share of the information: for one
    parameter ``(1/σ_i²)/(1/σ_i² + I_data)``, ``I_data = Σ_k J_ki²/σ_k²`` the data's
    information (Gelman et al., *Bayesian Data Analysis*, 3rd ed., §2.5); a combination the
    data determine counts for the data. Above :data:`PRIOR_SHARE` the prior determined it,
    below :data:`DATA_SHARE` the data, in between both. A parameter without a prior and with
    a finite interval was determined by the data.
    """
    out = ["data" if np.isfinite(h) else "none" for h in half_widths]
    if rows is None:
        return out
    var = np.diag(covariance)
    for c, s in zip(rows.columns, rows.std, strict=True):
        if not np.isfinite(var[c]):
            continue
        share = float(var[c]) / float(s) ** 2
        out[c] = (
            "prior" if share > PRIOR_SHARE else "data" if share < DATA_SHARE else "data and prior"
        )
    return out


def _prior_of(opt_result: OptimizeResult) -> PriorRows | None:
    """The prior rows a MAP fit recorded in its result (``None``: no priors)."""
    return opt_result.prior


def _data_groups(residual_fn: Any, n_data: int, n_total: int) -> np.ndarray | None:
    """``(n_data,)`` signal labels of the data rows, when the residual function gives them
    (with or without the prior rows after them)."""
    groups = residual_fn.signal_groups() if isinstance(residual_fn, DescribedResidualFn) else None
    if groups is None:
        return None
    groups = np.asarray(groups)
    if groups.size == n_total:
        groups = groups[:n_data]
    return groups if groups.size == n_data else None


METHODS = ("auto", "linear", "hac", "bootstrap")


@dataclass(frozen=True)
class _Vectorised:
    """The fit's residual as ``(p, k) -> (n, k)`` over every row of ``opt_result.fun``: the
    residual function's rows, and the prior rows after them where it leaves them out;
    ``r0`` ``(n,)`` is its value at the fit's point."""

    fn: CountedResidual
    rows: PriorRows | None
    r0: np.ndarray

    def __call__(self, X: np.ndarray) -> np.ndarray:
        R = self.fn(X)
        return R if self.rows is None else np.concatenate([R, self.rows.residual(X)], axis=0)


def _vectorised(
    opt_result: OptimizeResult, residual_fn: Any, params: ParameterDict, rows: PriorRows | None
) -> _Vectorised | None:
    """The residual over all ``n`` rows, or ``None`` when ``residual_fn`` cannot give it (not
    callable, or another number of rows)."""
    if not callable(residual_fn):
        return None
    n, m = opt_result.fun.size, 0 if rows is None else rows.size
    fn = CountedResidual(residual_fn, params)
    x = opt_result.x[:, None]
    r0 = np.asarray(fn(x), dtype=np.float64)[:, 0]
    if r0.size == n:
        return _Vectorised(fn, None, r0)
    if not (m and r0.size == n - m):
        return None
    assert rows is not None
    return _Vectorised(fn, rows, np.concatenate([r0, rows.residual(x)[:, 0]]))


def _rough_checked(
    residual: _Vectorised, x: np.ndarray, J: np.ndarray, bounds: Bounds, names: list[str]
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """``J`` with a larger step for the columns a rough cost spoils, the notes saying so
    (:func:`~mjsysid.fit.jacobian.rough_columns`) and ``(p,)`` which columns were stable at
    no step (they took the largest)."""
    J2, factor = rough_columns(residual, x, residual.r0, J, bounds)
    larger = np.flatnonzero(factor > 1)
    unstable = factor >= max(ROUGH_FACTORS)
    if not larger.size:
        return J, [], unstable
    notes = [
        f"{larger.size} Jacobian column(s) used a larger finite-difference step, where the "
        f"default step's column was not stable: contact or friction makes the cost rough "
        f"({_listed(names, larger, factor)}); these intervals linearise the cost averaged "
        "over that step"
    ]
    if unstable.any():
        notes.append(
            f"{int(unstable.sum())} of them agreed at no step tried (up to "
            f"{max(ROUGH_FACTORS):g}x): the cost is step-like there at every scale and their "
            f"intervals are rough ({_listed(names, np.flatnonzero(unstable), None)})"
        )
    return J2, notes, unstable


def _listed(names: list[str], index: np.ndarray, factor: np.ndarray | None) -> str:
    """Up to six names (with their step factors), and how many more."""
    shown = [names[i] + ("" if factor is None else f" ({factor[i]:g}x)") for i in index[:6]]
    more = f" and {index.size - 6} more" if index.size > 6 else ""
    return ", ".join(shown) + more


def _collinear(J: np.ndarray, names: list[str], x: np.ndarray, skip: np.ndarray) -> list[Collinear]:
    """:func:`near_collinear` over the columns not in ``skip`` (those stable at no step: a
    step-like cost makes them look alike, all dominated by the same contact event)."""
    keep = np.flatnonzero(~skip)
    found = near_collinear(J[:, keep], [names[i] for i in keep], x[keep])
    return [dataclasses.replace(c, members=tuple(int(keep[i]) for i in c.members)) for c in found]


def _held_intervals(
    fun: np.ndarray,
    J: np.ndarray,
    alpha: float,
    groups: Any,
    m: int,
    fixed: np.ndarray,
    score_covariance: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(covariance, half_widths)`` with the ``fixed`` entries (at a bound) treated as
    free for the others' intervals (holding a parameter at a bound it sits at by accident
    of the data would narrow the others: it can only widen them this way); their own are
    bound-limited, infinite."""
    if score_covariance is not None:
        cov, half = calculate_intervals(fun, J, alpha, score_covariance=score_covariance)
    else:
        cov, half = calculate_intervals(fun, J, alpha, groups=groups, prior_rows=m)
    cov, half = cov.copy(), half.copy()
    idx = np.flatnonzero(fixed)
    _withhold(cov, half, idx.tolist())
    return cov, half


def _stop_reason(res: OptimizeResult) -> str:
    """``"<status>: <the message's first sentence>"`` of a fit that did not converge."""
    first = str(res.message).split(". ")[0].rstrip(".")
    return f"{res.status.value}: {first}" if first else res.status.value


HAC_MIN_DOF = 3.0  # the fewest effective degrees of freedom a HAC interval's t takes


def _hac_dof(
    hac: tuple[np.ndarray, np.ndarray], alpha: float, dof: float, effective: float
) -> tuple[np.ndarray, np.ndarray]:
    """HAC intervals with Student's ``t`` on the effective degrees of freedom, about one per
    kernel window (``T/L − p``, at least :data:`HAC_MIN_DOF`) instead of ``n − p``: with
    strongly correlated residuals a thousand rows carry a few samples' worth, and the
    normal quantile then
    undercovers (Kiefer & Vogelsang, Econometric Theory 21 (2005), fixed-b asymptotics)."""
    cov, half = hac
    t_n = float(scipy.stats.t.ppf(1.0 - alpha / 2.0, max(dof, 1.0)))
    t_eff = float(scipy.stats.t.ppf(1.0 - alpha / 2.0, max(effective, HAC_MIN_DOF)))
    k = max(t_eff / t_n, 1.0)
    return cov * k**2, half * k


def _widest(
    base: tuple[np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Per parameter the wider of two intervals: ``base``'s covariance rescaled so that its
    diagonal matches the wider half-width (``S Σ S``, positive semi-definite as ``Σ``)."""
    cov, half = base
    wide = np.maximum(half, other[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where((half > 0) & np.isfinite(half) & np.isfinite(wide), wide / half, 1.0)
    cov2 = cov * np.outer(ratio, ratio)
    inf = ~np.isfinite(wide)
    _withhold(cov2, wide, np.flatnonzero(inf & np.isfinite(half)).tolist())
    return cov2, wide


def _unresolved(found: list[Collinear], rows: PriorRows | None) -> list[Collinear]:
    """The combinations priors do not resolve: a prior on all members but one pins them all."""
    if rows is None:
        return found
    held = {int(c) for c in rows.columns}
    return [c for c in found if len(set(c.members) - held) > 1]


def _withhold(cov: np.ndarray, half: np.ndarray, members: list[int]) -> None:
    """Marks ``members`` not determined: infinite variance and interval, NaN covariances."""
    if members:
        cov[members, :] = np.nan
        cov[:, members] = np.nan
        cov[members, members] = np.inf
        half[members] = np.inf


def _bootstrapped(
    conf: Confidence, opt_result: OptimizeResult, problem: _BootstrapInput
) -> Confidence:
    """``conf`` with block-bootstrap percentile intervals (:mod:`mjsysid.fit.confidence`)
    where the linearised ones are finite (a direction the data do not see stays infinite:
    the refits would not move along it)."""
    if problem.blocks is None:
        raise ValueError(
            "compute_confidence(method='bootstrap') needs the residual rows' blocks: a "
            "residual function with block_offsets (build_residual_fn's), and params; got "
            "neither block_offsets nor blocks"
        )
    fixed = np.zeros(conf.values.size, bool) if conf.at_bound is None else conf.at_bound != 0
    boot = block_bootstrap(
        problem.residual,
        conf.values,
        opt_result.fun,
        problem.J,
        problem.bounds,
        problem.blocks,
        draws=problem.draws,
        seed=problem.seed,
        alpha=conf.alpha,
        steps=problem.steps if problem.residual is not None else 1,
        free=~fixed,
    )
    finite = np.isfinite(conf.half_widths)
    local = local_columns(problem.J, problem.blocks) & finite
    boot_ends = np.column_stack([boot.lower, boot.upper])
    ends = np.where(local[:, None], conf.ends(), boot_ends)
    ends[~finite] = [-np.inf, np.inf]
    half = np.where(finite, np.maximum(ends[:, 1] - conf.values, conf.values - ends[:, 0]), np.inf)
    cov = np.cov(boot.samples.T).reshape(conf.values.size, conf.values.size)
    cov[local, :], cov[:, local] = conf.covariance[local, :], conf.covariance[:, local]
    cov[~finite, :] = np.nan
    cov[:, ~finite] = np.nan
    cov[~finite, ~finite] = np.inf
    note = (
        f"bootstrap: {problem.draws} draws over {boot.blocks} blocks (sequences or windows) "
        "resampled with replacement; percentile intervals"
        + ("; with under 10 blocks they are themselves rough" if boot.blocks < 10 else "")
        + (
            f"; {int(local.sum())} parameter(s) seen by one block only (window starts) keep "
            "their linearised intervals"
            if local.any()
            else ""
        )
    )
    return dataclasses.replace(
        conf,
        half_widths=half,
        covariance=cov,
        interval=ends,
        method="bootstrap",
        notes=[*conf.notes, note],
    )


@dataclass(frozen=True)
class _BootstrapInput:
    """What :func:`_bootstrapped` resamples and refits."""

    residual: _Vectorised | None
    J: np.ndarray
    bounds: Bounds
    blocks: np.ndarray | None
    draws: int
    seed: int
    steps: int


@quietly
def compute_confidence(
    opt_result: OptimizeResult,
    residual_fn: Any = None,
    alpha: float = 0.05,
    params: ParameterDict | None = None,
    *,
    method: str = "auto",
    draws: int = 200,
    seed: int = 0,
    steps: int = 1,
    blocks: Any = None,
    rough: bool = True,
    levels: bool = True,
) -> Confidence:
    """Intervals at the solution; noise variance estimated per measured signal when known.

    ``params`` (the fitted parameters, for their bounds) marks the values at a bound (within
    :data:`BOUND_RTOL` of the range, :func:`bound_sides`): they count as free for the others'
    intervals (holding them would narrow those), and their own intervals are
    bound-limited (infinite, with a caveat). Near-collinear parameters
    (:func:`~mjsysid.fit.confidence.near_collinear`, from the column-scaled Jacobian, whatever
    the noise) get a caveat naming their combination and infinite intervals: not zero-width
    certainties. With a callable ``residual_fn`` and ``params`` each Jacobian column is
    checked against a larger step (:func:`~mjsysid.fit.jacobian.rough_columns`; ``rough``)
    and replaced where a rough (contact) cost makes it unstable. After a MAP fit
    (``result.prior``) the prior rows count with unit variance and
    :attr:`Confidence.determined_by` says what determined each parameter.

    Args:
      opt_result: The fit. residual_fn: Its residual function (``residual_fn(X, params)``).
      alpha: ``1 − alpha`` intervals. params: The fitted parameters (bounds, values).
      method: ``"auto"`` (default: ``"hac"`` when the residual is not white, by its
        Durbin-Watson figures, :mod:`~mjsysid.fit.whiteness`; else ``"linear"``),
        ``"linear"``, ``"hac"`` (Newey-West sandwich, never narrower than ``"linear"``) or
        ``"bootstrap"`` (block bootstrap over the sequences or windows,
        :func:`~mjsysid.fit.confidence.block_bootstrap`, for correlated residuals or a model
        that misses; needs ``params`` and the residual function's ``block_offsets`` or
        ``blocks``).
      draws, seed, steps: The bootstrap's resamples, random seed and Gauss-Newton steps per
        refit (1: at the solution's Jacobian, no simulation).
      blocks: ``(n,)`` integer block of every residual row (default: from ``residual_fn``).
      rough: Check the Jacobian columns against a larger step.
      levels: Widen the interval of every command threshold (a deadzone) to the range
        between the recorded command levels around it (:mod:`mjsysid.objective.levels`).

    Raises:
      ValueError: An unknown ``method``; a bootstrap without blocks or params.
    """
    if method not in METHODS:
        raise ValueError(must_be("method", f"one of {list(METHODS)}", method))
    fit = _FitInput.of(opt_result, residual_fn, params, rough or method == "bootstrap")
    conf, J = _linear(fit, alpha, rough, method)
    fn = residual_fn if levels else None
    flat = ~np.any(np.asarray(J) != 0, axis=0)  # entries with no effect where they are
    if method != "bootstrap":
        return _level_limited(conf, fn, params, flat)
    if fit.bounds is None:
        raise ValueError(
            "compute_confidence(method='bootstrap') needs params (the fitted parameters, "
            "for their bounds), got None"
        )
    n = opt_result.fun.size
    labels = block_labels(residual_fn, n) if blocks is None else np.asarray(blocks)
    boot = _BootstrapInput(fit.residual, J, fit.bounds, labels, draws, seed, steps)
    return _level_limited(_bootstrapped(conf, opt_result, boot), fn, params, flat)


def _level_limited(
    conf: Confidence, residual_fn: Any, params: ParameterDict | None, flat: np.ndarray
) -> Confidence:
    """``conf`` with the interval of every command threshold widened to the range between
    the recorded command levels around it (:mod:`mjsysid.objective.levels`: the data cannot
    tell the values in that range apart), and a caveat for each. The infinite interval of a
    threshold with no effect where it sits (``flat``: a zero Jacobian column, no recorded
    level in its edge) becomes that range; one at a bound, or infinite for another reason (a
    combination the data do not determine), stays as it is."""
    if params is None or not isinstance(residual_fn, ThresholdResidualFn):
        return conf
    brackets = [b for b in residual_fn.threshold_brackets(params) if b.name in conf.names]
    if not brackets:
        return conf
    ends, half = conf.ends().copy(), np.array(conf.half_widths, dtype=np.float64)
    side = np.zeros(len(conf.names), int) if conf.at_bound is None else conf.at_bound
    for b in brackets:
        i = conf.names.index(b.name)
        if np.isfinite(half[i]):
            ends[i] = min(ends[i, 0], b.below), max(ends[i, 1], b.above)
        elif flat[i] and not side[i]:  # no effect where it is: the data tell the range
            ends[i] = b.below, b.above
        else:
            continue
        half[i] = max(conf.values[i] - ends[i, 0], ends[i, 1] - conf.values[i])
    notes = [*conf.notes, *(b.text() for b in brackets)]
    return dataclasses.replace(conf, half_widths=half, interval=ends, notes=notes)


@dataclass(frozen=True)
class _FitInput:
    """What the intervals of a finished fit are computed from."""

    result: OptimizeResult
    rows: PriorRows | None
    groups: np.ndarray | None
    bounds: Bounds | None
    residual: _Vectorised | None
    layout: Layout

    @classmethod
    def of(
        cls,
        result: OptimizeResult,
        residual_fn: Any,
        params: ParameterDict | None,
        simulate: bool = True,
    ) -> _FitInput:
        """``simulate``: the residual is needed (the rough-column check, the bootstrap's
        refits); else it is not evaluated at all."""
        rows = _prior_of(result)
        n = result.fun.size
        n_data = n - (0 if rows is None else rows.size)
        groups = _data_groups(residual_fn, n_data, n)
        layout = residual_series(residual_fn, n_data)
        if params is None or params.size != result.x.size:
            return cls(result, rows, groups, None, None, layout)
        residual = _vectorised(result, residual_fn, params, rows) if simulate else None
        return cls(result, rows, groups, params.get_bounds(), residual, layout)


def _linear(
    fit: _FitInput, alpha: float, rough: bool, method: str = "linear"
) -> tuple[Confidence, np.ndarray]:
    """The linearised intervals (parameters at a bound free for the others', collinear
    groups withheld, rough columns re-stepped but never narrower than at the default step)
    and the Jacobian they used; with ``method`` ``"hac"`` (or ``"auto"`` and a residual that
    is not white) a Newey-West sandwich, never narrower than the linearised ones."""
    res, rows = fit.result, fit.rows
    x, names = res.x, list(res.parameter_names)
    J0 = np.asarray(res.jac, dtype=np.float64)
    J = J0
    notes: list[str] = []
    unstable = np.zeros(x.size, dtype=bool)
    if fit.residual is not None and rough and fit.bounds is not None:
        J, notes, unstable = _rough_checked(fit.residual, x, J0, fit.bounds, names)
    at_bound = None if fit.bounds is None else bound_sides(x, *fit.bounds)
    fixed = np.zeros(x.size, bool) if at_bound is None else at_bound != 0
    m = 0 if rows is None else rows.size
    cov, half = _held_intervals(res.fun, J, alpha, fit.groups, m, fixed)
    if J is not J0:  # a rough column's larger step must not narrow any interval
        cov, half = _widest((cov, half), _held_intervals(res.fun, J0, alpha, fit.groups, m, fixed))
    white = whiteness(res.fun[: res.fun.size - m], fit.layout, res.initial_cost)
    used = "linear"
    if method == "hac" or (method == "auto" and not white.white):
        S, lags = hac_score_covariance(res.fun[: res.fun.size - m], J[: J.shape[0] - m], fit.layout)
        if m:
            S = S + J[-m:].T @ J[-m:]  # prior rows: independent, unit variance
        hac = _hac_dof(_held_intervals(res.fun, J, alpha, fit.groups, m, fixed, S),
                       alpha, res.fun.size - x.size, white.samples / lags - x.size)  # fmt: skip
        cov, half = _widest((cov, half), hac)
        used = "hac"
        notes = [*notes, f"HAC: Newey-West sandwich, Bartlett kernel over {lags} time steps"]
    collinear = _unresolved(_collinear(J, names, x, unstable), rows)
    _withhold(cov, half, sorted({i for c in collinear for i in c.members if not fixed[i]}))
    conf = Confidence(
        names,
        x.copy(),
        half,
        cov,
        alpha,
        converged=bool(res.success),
        at_bound=at_bound,
        determined_by=None if rows is None else determined_by(half, cov, rows),
        notes=notes
        + [c.text() for c in collinear]
        + ([] if res.step_trial is None else [res.step_trial.text()]),
        method=used,
        whiteness=white,
        stop_reason="" if res.success else _stop_reason(res),
    )
    return conf, J
