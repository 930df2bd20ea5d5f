"""Confidence intervals of a finished fit, with what limits them.

:func:`compute_confidence` linearises the fitted model at the end point
(:func:`~mjsysid.fit.intervals.calculate_intervals`), pools one noise variance per measured
signal where the residual function says which rows belong to which signal, and marks values
that sit at a bound; :class:`Confidence` carries the result and says, in words, what limits it.

After a MAP fit (priors on parameters, :mod:`mjsysid.fit.prior`) the residual and the
Jacobian end with the prior rows (``result.extras["prior"]``): the intervals include the
prior, and each parameter is said to be determined by the data, by its prior, or by both
(:func:`determined_by`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.optimize import OptimizeResult
from mjsysid.fit.prior import PriorRows
from mjsysid.params.parameter import ParameterDict


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
        ``0`` (the interval of such a parameter ignores the bound and is not meaningful).
      determined_by: After a MAP fit (``None`` without priors), per parameter: ``"data"``,
        ``"prior"``, ``"data and prior"``, or ``"none"`` (an infinite interval); see
        :func:`determined_by`.
    """

    names: list[str]
    values: np.ndarray
    half_widths: np.ndarray
    covariance: np.ndarray
    alpha: float
    converged: bool = True
    at_bound: np.ndarray | None = None
    determined_by: list[str] | None = None

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
        side = np.zeros(len(self.names), int) if self.at_bound is None else self.at_bound
        for k, n in enumerate(self.names):
            if side[k]:
                bound = "lower" if side[k] < 0 else "upper"
                out.append(f"{n} is at its {bound} bound: its interval is not meaningful")
        for n, by in zip(self.names, self.determined_by or [], strict=False):
            if by == "prior":
                out.append(
                    f"{n} is determined by its prior, not by the data: its interval is the prior's"
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        rows = []
        side = np.zeros(len(self.names), int) if self.at_bound is None else self.at_bound
        for n, v, h, b in zip(self.names, self.values, self.half_widths, side, strict=True):
            finite = bool(np.isfinite(h))
            rows.append(
                {
                    "name": n,
                    "value": float(v),
                    "half_width": float(h) if finite else ".inf",
                    "lower": float(v - h) if finite else "-.inf",
                    "upper": float(v + h) if finite else ".inf",
                    "identifiable": finite,
                    "at_bound": {-1: "lower", 1: "upper"}.get(int(b), False),
                }
            )
        if self.determined_by is not None:
            for row, by in zip(rows, self.determined_by, strict=True):
                row["determined_by"] = by
        return {
            "alpha": self.alpha,
            "converged": self.converged,
            "caveats": self.caveats(),
            "parameters": rows,
        }


def bound_sides(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``(p,)`` ``-1`` / ``+1`` where ``x`` is at (within ``1e-9`` relative of) its lower /
    upper bound, else ``0``."""
    tol = 1e-9 * np.maximum(1.0, np.abs(x))
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


def compute_confidence(
    opt_result: OptimizeResult,
    residual_fn: Any = None,
    alpha: float = 0.05,
    params: ParameterDict | None = None,
) -> Confidence:
    """Intervals at the solution; noise variance estimated per measured signal when known.

    ``params`` (the fitted parameters, for their bounds) marks the values at a bound. After a
    MAP fit (``result.extras["prior"]``) the prior rows count with unit variance and
    :attr:`Confidence.determined_by` says what determined each parameter.
    """
    rows = _prior_of(opt_result)
    m = 0 if rows is None else rows.size
    n = opt_result.fun.size
    groups = _data_groups(residual_fn, n - m, n)
    cov, half = calculate_intervals(
        opt_result.fun, opt_result.jac, alpha, groups=groups, prior_rows=m
    )
    at_bound = None
    if params is not None and params.size == opt_result.x.size:
        lo, hi = params.get_bounds()
        at_bound = bound_sides(opt_result.x, lo, hi)
    return Confidence(
        list(opt_result.parameter_names),
        opt_result.x.copy(),
        half,
        cov,
        alpha,
        converged=bool(opt_result.success),
        at_bound=at_bound,
        determined_by=None if rows is None else determined_by(half, cov, rows),
    )
