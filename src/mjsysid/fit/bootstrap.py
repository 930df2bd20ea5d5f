"""Block bootstrap intervals: for residuals correlated in time, or a model that misses.

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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mjsysid.fit.jacobian import fd_jacobian
from mjsysid.util.errors import must_be

__all__ = ["Bootstrap", "block_bootstrap", "block_labels", "local_columns"]


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
    offsets = getattr(residual_fn, "block_offsets", None)
    if offsets is None:
        return None
    offsets = np.asarray(offsets, dtype=np.int64)
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
            r = np.asarray(problem.residual(theta[:, None]), dtype=np.float64)[:, 0]
            J = fd_jacobian(problem.residual, theta, r, problem.bounds)
        theta = np.clip(theta + _step(J, r, sw, problem.free), lo, hi)
    return theta


def _step(J: np.ndarray, r: np.ndarray, sw: np.ndarray, free: np.ndarray) -> np.ndarray:
    """The minimum-norm Gauss-Newton step of the weighted problem, on column-scaled ``J``."""
    Jw = J[:, free] * sw[:, None]
    norms = np.linalg.norm(Jw, axis=0)
    d = 1.0 / np.where(norms > 0, norms, 1.0)
    ds = np.linalg.lstsq(Jw * d, -(sw * r), rcond=1e-10)[0]
    out = np.zeros(J.shape[1])
    out[free] = ds * d
    return out
