"""Confidence intervals of a finished fit, with what limits them.

:func:`compute_confidence` linearises the fitted model at the end point
(:func:`~mjsysid.fit.intervals.calculate_intervals`), pools one noise variance per measured
signal where the residual function says which rows belong to which signal, and marks values
that sit at a bound; :class:`Confidence` carries the result and says, in words, what limits it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.optimize import OptimizeResult
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
    """

    names: list[str]
    values: np.ndarray
    half_widths: np.ndarray
    covariance: np.ndarray
    alpha: float
    converged: bool = True
    at_bound: np.ndarray | None = None

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


def compute_confidence(
    opt_result: OptimizeResult,
    residual_fn: Any = None,
    alpha: float = 0.05,
    params: ParameterDict | None = None,
) -> Confidence:
    """Intervals at the solution; noise variance estimated per measured signal when known.

    ``params`` (the fitted parameters, for their bounds) marks the values at a bound.
    """
    groups = residual_fn.signal_groups() if hasattr(residual_fn, "signal_groups") else None
    if groups is not None and groups.size != opt_result.fun.size:
        groups = None
    cov, half = calculate_intervals(opt_result.fun, opt_result.jac, alpha, groups=groups)
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
    )
