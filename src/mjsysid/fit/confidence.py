"""Confidence intervals of a finished fit, with what limits them.

:func:`compute_confidence` linearises the fitted model at the end point
(:func:`~mjsysid.fit.intervals.calculate_intervals`), pools one noise variance per measured
signal where the residual function says which rows belong to which signal, and marks values
that sit at a bound; :class:`Confidence` carries the result and says, in words, what limits it.

What limits an interval (issue #20; ``docs/intervals.md``): a value at a bound is held there
and its own interval is bound-limited; near-collinear parameters
(:mod:`mjsysid.fit.collinear`) get infinite intervals and a caveat naming their combination,
whatever the noise; Jacobian columns a rough (contact) cost spoils take a larger step
(:func:`~mjsysid.fit.jacobian.rough_columns`); ``method="bootstrap"`` resamples sequences or
windows (:mod:`mjsysid.fit.bootstrap`) for correlated residuals.

After a MAP fit (priors on parameters, :mod:`mjsysid.fit.prior`) the residual and the
Jacobian end with the prior rows (``result.extras["prior"]``): the intervals include the
prior, and each parameter is said to be determined by the data, by its prior, or by both
(:func:`determined_by`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mjsysid.fit.bootstrap import block_bootstrap, block_labels, local_columns
from mjsysid.fit.collinear import Collinear, near_collinear
from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.jacobian import ROUGH_FACTORS, CountedResidual, rough_columns
from mjsysid.fit.optimize import OptimizeResult
from mjsysid.fit.prior import PriorRows
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

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
      method: ``"linear"`` (linearised at the solution) or ``"bootstrap"``.
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

    @property
    def identifiable(self) -> np.ndarray:
        """``(p,)`` bool: finite interval."""
        return np.isfinite(self.half_widths)

    def caveats(self) -> list[str]:
        """What limits these intervals, in words (empty when nothing does)."""
        out = []
        if not self.converged:
            out.append(
                "the fit did not converge: the intervals describe its end point, which is not "
                "a minimum"
            )
        out += self._bound_caveats()
        for n, by in zip(self.names, self.determined_by or [], strict=False):
            if by == "prior":
                out.append(
                    f"{n} is determined by its prior, not by the data: its interval is the prior's"
                )
        return out + list(self.notes)

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
                "others' are computed with them held there"
            ]
        return [
            f"{n} is at its {bound} bound: its interval is bound-limited (not given), and the "
            "others' are computed with it held there"
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
        return {
            "alpha": self.alpha,
            "method": self.method,
            "converged": self.converged,
            "caveats": self.caveats(),
            "parameters": rows,
        }


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
    data = (opt_result.extras or {}).get("prior")
    return None if data is None else PriorRows.from_dict(data)


def _data_groups(residual_fn: Any, n_data: int, n_total: int) -> np.ndarray | None:
    """``(n_data,)`` signal labels of the data rows, when the residual function gives them
    (with or without the prior rows after them)."""
    groups = residual_fn.signal_groups() if hasattr(residual_fn, "signal_groups") else None
    if groups is None:
        return None
    groups = np.asarray(groups)
    if groups.size == n_total:
        groups = groups[:n_data]
    return groups if groups.size == n_data else None


METHODS = ("linear", "bootstrap")


@dataclass(frozen=True)
class _Vectorised:
    """The fit's residual as ``(p, k) -> (n, k)`` over every row of ``opt_result.fun``: the
    residual function's rows, and the prior rows after them where it leaves them out."""

    fn: CountedResidual
    rows: PriorRows | None

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
    size = fn(opt_result.x[:, None]).shape[0]
    if size == n:
        return _Vectorised(fn, None)
    return _Vectorised(fn, rows) if m and size == n - m else None


def _rough_checked(
    residual: _Vectorised, x: np.ndarray, J: np.ndarray, bounds: Bounds, names: list[str]
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """``J`` with a larger step for the columns a rough cost spoils, the notes saying so
    (:func:`~mjsysid.fit.jacobian.rough_columns`) and ``(p,)`` which columns were stable at
    no step (they took the largest)."""
    J2, factor = rough_columns(residual, x, J, bounds)
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
    fun: np.ndarray, J: np.ndarray, alpha: float, groups: Any, m: int, fixed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(covariance, half_widths)`` with the ``fixed`` entries (at a bound) held there:
    their columns leave ``J`` before the others' covariance; their own are infinite."""
    p = J.shape[1]
    cov = np.full((p, p), np.nan)
    half = np.full(p, np.inf)
    np.fill_diagonal(cov, np.inf)
    free = np.flatnonzero(~fixed)
    if free.size:
        c, h = calculate_intervals(fun, J[:, free], alpha, groups=groups, prior_rows=m)
        cov[np.ix_(free, free)] = c
        half[free] = h
    return cov, half


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
    """``conf`` with block-bootstrap percentile intervals (:mod:`mjsysid.fit.bootstrap`)
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


def compute_confidence(
    opt_result: OptimizeResult,
    residual_fn: Any = None,
    alpha: float = 0.05,
    params: ParameterDict | None = None,
    *,
    method: str = "linear",
    draws: int = 200,
    seed: int = 0,
    steps: int = 1,
    blocks: Any = None,
    rough: bool = True,
) -> Confidence:
    """Intervals at the solution; noise variance estimated per measured signal when known.

    ``params`` (the fitted parameters, for their bounds) marks the values at a bound (within
    :data:`BOUND_RTOL` of the range, :func:`bound_sides`): they are held there, their columns
    removed from the Jacobian before the others' covariance, and their own intervals are
    bound-limited (infinite, with a caveat). Near-collinear parameters
    (:func:`~mjsysid.fit.collinear.near_collinear`, from the column-scaled Jacobian, whatever
    the noise) get a caveat naming their combination and infinite intervals: not zero-width
    certainties. With a callable ``residual_fn`` and ``params`` each Jacobian column is
    checked against a larger step (:func:`~mjsysid.fit.jacobian.rough_columns`; ``rough``)
    and replaced where a rough (contact) cost makes it unstable. After a MAP fit
    (``result.extras["prior"]``) the prior rows count with unit variance and
    :attr:`Confidence.determined_by` says what determined each parameter.

    Args:
      opt_result: The fit. residual_fn: Its residual function (``residual_fn(X, params)``).
      alpha: ``1 − alpha`` intervals. params: The fitted parameters (bounds, values).
      method: ``"linear"`` or ``"bootstrap"`` (block bootstrap over the sequences or windows,
        :func:`~mjsysid.fit.bootstrap.block_bootstrap`, for correlated residuals or a model
        that misses; needs ``params`` and the residual function's ``block_offsets`` or
        ``blocks``).
      draws, seed, steps: The bootstrap's resamples, random seed and Gauss-Newton steps per
        refit (1: at the solution's Jacobian, no simulation).
      blocks: ``(n,)`` integer block of every residual row (default: from ``residual_fn``).
      rough: Check the Jacobian columns against a larger step.

    Raises:
      ValueError: An unknown ``method``; a bootstrap without blocks or params.
    """
    if method not in METHODS:
        raise ValueError(must_be("method", f"one of {list(METHODS)}", method))
    fit = _FitInput.of(opt_result, residual_fn, params, rough or method == "bootstrap")
    conf, J = _linear(fit, alpha, rough)
    if method == "linear":
        return conf
    if fit.bounds is None:
        raise ValueError(
            "compute_confidence(method='bootstrap') needs params (the fitted parameters, "
            "for their bounds), got None"
        )
    n = opt_result.fun.size
    labels = block_labels(residual_fn, n) if blocks is None else np.asarray(blocks)
    return _bootstrapped(
        conf, opt_result, _BootstrapInput(fit.residual, J, fit.bounds, labels, draws, seed, steps)
    )


@dataclass(frozen=True)
class _FitInput:
    """What the intervals of a finished fit are computed from."""

    result: OptimizeResult
    rows: PriorRows | None
    groups: np.ndarray | None
    bounds: Bounds | None
    residual: _Vectorised | None

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
        groups = _data_groups(residual_fn, n - (0 if rows is None else rows.size), n)
        if params is None or params.size != result.x.size:
            return cls(result, rows, groups, None, None)
        residual = _vectorised(result, residual_fn, params, rows) if simulate else None
        return cls(result, rows, groups, params.get_bounds(), residual)


def _linear(fit: _FitInput, alpha: float, rough: bool) -> tuple[Confidence, np.ndarray]:
    """The linearised intervals (bounds held, collinear groups withheld, rough columns
    re-stepped) and the Jacobian they used."""
    res, rows = fit.result, fit.rows
    x, names = res.x, list(res.parameter_names)
    J = np.asarray(res.jac, dtype=np.float64)
    notes: list[str] = []
    unstable = np.zeros(x.size, dtype=bool)
    if fit.residual is not None and rough and fit.bounds is not None:
        J, notes, unstable = _rough_checked(fit.residual, x, J, fit.bounds, names)
    at_bound = None if fit.bounds is None else bound_sides(x, *fit.bounds)
    fixed = np.zeros(x.size, bool) if at_bound is None else at_bound != 0
    m = 0 if rows is None else rows.size
    cov, half = _held_intervals(res.fun, J, alpha, fit.groups, m, fixed)
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
        notes=notes + [c.text() for c in collinear],
    )
    return conf, J
