"""Finite differences on the batched residual, and the counting wrapper every backend sees.

The Jacobian ``J = ∂r/∂θ`` is computed by forward finite differences with step
``h_i = ε·max(1, |θ_i|)`` (pointing inwards at an upper bound), all ``p`` perturbed
candidates in **one** batched residual call (:func:`fd_jacobian`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from mjsysid.objective.protocols import DescribedResidualFn, ResidualFn
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

# the fit logs under one name, as before the split into modules
logger = logging.getLogger("mjsysid.fit.optimize")


def residual_array(out: Any) -> np.ndarray:
    """What a residual function returned, as one float array.

    An array stays as it is; a list or tuple of arrays (one per sequence, each ``(n_i,)`` or
    ``(n_i, k)``) is concatenated along the first axis.
    """
    if isinstance(out, list | tuple):
        parts = [np.asarray(part, dtype=np.float64) for part in out]
        if not parts:
            raise ValueError(must_be("residual_fn output", "at least one residual array", out))
        if len({part.ndim for part in parts}) != 1:
            raise ValueError(
                must_be(
                    "residual_fn output",
                    "residual arrays of one dimensionality ((n_i,) or (n_i, k) each)",
                    [part.shape for part in parts],
                )
            )
        return np.concatenate(parts, axis=0)
    return np.asarray(out, dtype=np.float64)


def column_costs(R: np.ndarray) -> np.ndarray:
    """``(k,)`` costs ``½‖r_j‖²`` of the ``(n, k)`` residual columns; ``+inf`` where a column
    is not finite (a diverged candidate; an overflow counts as one, without a warning)."""
    R = np.asarray(R, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        c = 0.5 * np.sum(R * R, axis=0)
    return cast(np.ndarray, np.where(np.isfinite(c), c, np.inf))


class CountedResidual:
    """Wraps the residual: counts candidates and answers a single point from the last
    small batch (the trial steps) even after a larger call (a Jacobian) came in between."""

    _CACHED = 8  # batches up to this many candidates are remembered

    def __init__(self, residual_fn: ResidualFn, params: ParameterDict) -> None:
        self.residual_fn, self.params = residual_fn, params
        self.nfev = 0
        self.size: int | None = None  # residual length, from the first call
        # the last single evaluation (key 1) and the last batch of 2 to _CACHED (key 2):
        # the column of each point (by its bytes) and the residuals
        self._kept: dict[int, tuple[dict[bytes, int], np.ndarray]] = {}

    def __call__(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        flat = X.ndim == 1
        X2 = X[:, None] if flat else X
        if X2.shape[1] == 1:
            known = self.kept(X2)
            if known is not None:
                r = known[:, None]
                return cast(np.ndarray, r[:, 0] if flat else r)
        r = residual_array(self.residual_fn(X2, self.params))
        if r.ndim == 1:
            r = r[:, None]
        self._check(r, X2.shape[1])
        self.nfev += X2.shape[1]
        k = X2.shape[1]
        if k <= self._CACHED:
            columns = {X2[:, j].tobytes(): j for j in range(k)}
            self._kept[min(k, 2)] = (columns, r.copy())
        return r[:, 0] if flat else r

    def kept(self, x: np.ndarray) -> np.ndarray | None:
        """A copy of the ``(n,)`` residual at the point ``x`` when it is kept (from the last
        single evaluation or batch), else ``None``; nothing is evaluated or counted."""
        point = np.asarray(x, dtype=np.float64).reshape(-1, 1).tobytes()
        for columns, Rk in self._kept.values():
            j = columns.get(point)
            if j is not None:
                return cast(np.ndarray, Rk[:, j].copy())
        return None

    def remember(self, x: np.ndarray, r: np.ndarray) -> None:
        """Keeps ``r``, the residual at ``x`` evaluated elsewhere (another counter of the same
        function), as the last single evaluation: asked for again, it is not evaluated."""
        x2 = np.asarray(x, dtype=np.float64).reshape(-1, 1)
        self._kept[1] = ({x2.tobytes(): 0}, np.asarray(r, dtype=np.float64).reshape(-1, 1).copy())

    def _check(self, r: np.ndarray, k: int) -> None:
        """The residual of ``k`` candidates must be ``(n, k)``, ``n >= 1`` the same each call."""
        if r.ndim != 2 or r.shape[1] != k or r.shape[0] == 0:
            raise ValueError(
                must_be(
                    "residual_fn output",
                    f"shape (n, {k}) with n >= 1 for x of shape (p, {k})",
                    r,
                    f"got shape {r.shape}",
                )
            )
        if self.size is None:
            self.size = r.shape[0]
        elif r.shape[0] != self.size:
            raise ValueError(
                must_be(
                    "residual_fn output",
                    f"{self.size} residuals, as at the first call (the length must not depend "
                    "on the parameter values)",
                    f"{r.shape[0]} residuals",
                )
            )


def fd_steps(x: np.ndarray, hi: np.ndarray, eps: float) -> np.ndarray:
    """``h_i = ±ε·max(1, |x_i|)``, negative where the forward step would leave ``hi``."""
    h = eps * np.maximum(1.0, np.abs(x))
    return cast(np.ndarray, np.where(x + h > hi, -h, h))


def fd_jacobian(
    residual: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    r: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    eps: float = 1.5e-8,
) -> np.ndarray:
    """Forward-difference Jacobian, all columns in one batched call.

    ``J[:, i] = (r(x + h_i e_i) − r(x)) / h_i`` with ``h_i = ±ε·max(1, |x_i|)``, negative when
    the forward step would leave the upper bound. A column whose perturbed simulation is not
    finite is retried with the opposite step.

    Args:
      residual: Vectorised residual, ``(p, k) -> (n, k)``.
      x: ``(p,)`` point. r: ``(n,)`` residual at ``x``.
      bounds: ``(lower, upper)``, each ``(p,)``.
      eps: Relative step.

    Returns:
      ``(n, p)`` Jacobian (non-finite columns after the retry are set to 0 and logged).
    """
    h = fd_steps(x, bounds[1], eps)
    return _differences(residual, x, r, residual(x[:, None] + np.diag(h)), h, bounds)


def residual_and_jacobian(
    residual: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    eps: float = 1.5e-8,
) -> tuple[np.ndarray, np.ndarray]:
    """The residual at ``x`` and its :func:`fd_jacobian`, all ``p + 1`` candidates in **one**
    batched call (the point is column 0): where both are wanted at a point whose residual is
    not known yet, the point's simulation runs beside the perturbed ones instead of alone
    before them. The same values as ``residual(x)`` then :func:`fd_jacobian` (every
    candidate is simulated on its own).

    Args: as :func:`fd_jacobian`, without ``r``.

    Returns:
      ``r (n,)`` and ``J (n, p)``; ``J`` is all NaN where ``r`` is not finite (no retry: the
      caller reports the point).
    """
    h = fd_steps(x, bounds[1], eps)
    X = np.empty((x.size, x.size + 1))
    X[:, 0] = x
    X[:, 1:] = x[:, None] + np.diag(h)
    R = residual(X)
    r = R[:, 0].copy()  # (a view would keep all of R alive: the residual is often (k, n).T)
    if not np.all(np.isfinite(r)):
        return r, np.full((r.size, x.size), np.nan)
    return r, _differences(residual, x, r, R[:, 1:], h, bounds)


def _differences(
    residual: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    r: np.ndarray,
    R: np.ndarray,
    h: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """``(R − r)/h`` column by column (``R (n, p)``: the residuals at ``x + h_i e_i``), with
    :func:`fd_jacobian`'s retry of the columns that are not finite."""
    lo, hi = bounds
    J = np.subtract(R, r[:, None], dtype=np.float64)
    J /= h[None, :]
    with np.errstate(over="ignore", invalid="ignore"):  # a column with inf or NaN sums to one
        bad = np.flatnonzero(~np.isfinite(J.sum(axis=0)))
    if bad.size:  # (or overflows: those are confirmed entry by entry)
        bad = bad[~np.all(np.isfinite(J[:, bad]), axis=0)]
    if bad.size:
        h2 = -h[bad]
        X2 = np.repeat(x[:, None], bad.size, axis=1)
        X2[bad, np.arange(bad.size)] += h2
        X2 = np.clip(X2, lo[:, None], hi[:, None])
        J[:, bad] = (residual(X2) - r[:, None]) / h2[None, :]
        still = bad[~np.all(np.isfinite(J[:, bad]), axis=0)]
        if still.size:
            logger.warning(
                "Jacobian columns %s are not finite (simulation diverged on both sides); using 0",
                still.tolist(),
            )
            J[:, still] = 0.0
    return cast(np.ndarray, J)


ROUGH_FACTORS = (100.0, 1e4)  # larger steps tried for a column that is not stable
ROUGH_RTOL = 0.2  # two steps' columns agree when they differ by less than this (relative)


def _agree(a: np.ndarray, b: np.ndarray, rtol: float, atol: np.ndarray) -> np.ndarray:
    """``(p,)`` bool: columns of ``a`` and ``b`` differ by less than ``rtol`` of the larger,
    or by less than ``atol`` (``(p,)``, the round-off floor of the smaller step)."""
    diff = np.linalg.norm(a - b, axis=0)
    big = np.maximum(np.linalg.norm(a, axis=0), np.linalg.norm(b, axis=0))
    return cast(np.ndarray, (diff <= rtol * big) | (diff <= atol))


def rough_columns(
    residual: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    r: np.ndarray,
    J: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    eps: float = 1.5e-8,
    factors: tuple[float, ...] = ROUGH_FACTORS,
    rtol: float = ROUGH_RTOL,
) -> tuple[np.ndarray, np.ndarray]:
    """The Jacobian with a larger step for each column the default step does not get right.

    A smooth residual's column is the same at the step ``h`` and at ``100·h``; where contacts
    or dry friction make the cost step-like, a tiny step sees the jumps (a column that grows
    like ``1/h``: norms 1.3e6, 2.0e4 and 2.7e3 at ``h`` = 1.5e-8, 1e-6 and 1e-4 for a Go1 on
    its floor) and its intervals come out absurdly narrow. So each column of ``J`` (made at
    the relative step ``eps``) is compared with the column at ``factors[0]·eps``: where they
    agree within ``rtol`` (relative norm of the difference) ``J``'s column is kept; where not,
    the larger step's column is compared with the next larger one's, and so on; a column that
    agrees with none takes the largest step's (the cost averaged over the widest step).

    Args:
      residual: Vectorised residual, ``(p, k) -> (n, k)``.
      x: ``(p,)`` point. r: ``(n,)`` residual at ``x``. J: ``(n, p)`` Jacobian there at
        the step ``eps``.
      bounds: ``(lower, upper)``, each ``(p,)``.
      eps: The relative step ``J`` was made with. factors: Larger steps, increasing.
      rtol: Agreement tolerance.

    Returns:
      ``(J' (n, p), factor (p,))``: the Jacobian and, per column, the step factor it took
      (1 where ``J``'s column was stable; the largest factor where no step was).
    """
    lo, hi = bounds
    r0 = np.asarray(r, dtype=np.float64).reshape(-1)
    out = np.array(J, dtype=np.float64, copy=True)
    used = np.ones(x.size)
    todo = np.arange(x.size)
    prev = out.copy()
    # a difference of residuals within round-off: ~100 ulp of ‖r‖ over the step
    floor = 1e2 * np.finfo(np.float64).eps * float(np.linalg.norm(r0))
    h_prev = np.abs(fd_steps(x, hi, eps))
    for f in factors:
        if not todo.size:
            break
        h = fd_steps(x, hi, eps * f)[todo]
        X = np.repeat(x[:, None], todo.size, axis=1)
        X[todo, np.arange(todo.size)] += h
        X = np.clip(X, lo[:, None], hi[:, None])
        h = X[todo, np.arange(todo.size)] - x[todo]
        with np.errstate(divide="ignore", invalid="ignore"):
            col = (np.asarray(residual(X), dtype=np.float64) - r0[:, None]) / h[None, :]
        ok = np.all(np.isfinite(col), axis=0) & (h != 0)
        if not np.all(ok):
            todo, h, h_prev = todo[ok], h[ok], h_prev[ok]
            col, prev = col[:, ok], prev[:, ok]
        stable = _agree(prev, col, rtol, floor / h_prev)
        # a column that agrees keeps the smaller step's (already in out); the others move on
        out[:, todo] = np.where(stable[None, :], out[:, todo], col)
        used[todo[~stable]] = f
        todo, prev, h_prev = todo[~stable], col[:, ~stable], np.abs(h[~stable])
    return out, used


# A Jacobian computed within this many finite-difference steps of a point serves there too
# (see JacobianCache): a final stage that starts at an early stage's solution and moves by
# a few steps of round-off then ends without p more rollouts.
REUSE_STEPS = 4.0


class JacobianCache:
    """The finite-difference Jacobian at the last point asked for, and how many were made.

    Backends ask for the Jacobian at a point more than once (the convergence test, the
    result); each distinct point costs one :func:`fd_jacobian` (``p`` evaluations). A point
    within ``reuse_steps`` finite-difference steps of the kept one in every entry
    (``|x_i − x_kept,i| <= reuse_steps·|h_i|``) gets the kept Jacobian: a forward difference
    already errs by ``h_i/2·∂²r/∂x_i²`` (truncation), and a shift of ``k`` steps changes the
    Jacobian by about ``k·h·∂²r/∂x²``, at most ``2k`` times that error. The distance is
    always to the point the Jacobian was computed at, so small steps never drift from it.
    """

    def __init__(
        self,
        fn: CountedResidual,
        bounds: tuple[np.ndarray, np.ndarray],
        eps: float,
        reuse_steps: float = REUSE_STEPS,
    ) -> None:
        self.fn, self.bounds, self.eps, self.reuse_steps = fn, bounds, eps, reuse_steps
        self.njev = 0
        self._x: np.ndarray | None = None  # the kept Jacobian's point
        self._J: np.ndarray | None = None

    def seed(self, x: np.ndarray, J: np.ndarray) -> None:
        """Remembers ``J`` at ``x`` (the start's, counted by the caller)."""
        self._x, self._J = np.array(x, dtype=np.float64).reshape(-1), J

    def __call__(self, x: np.ndarray, r: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        if self._J is None or not self._serves(x):
            J = fd_jacobian(self.fn, x, np.asarray(r).reshape(-1), self.bounds, self.eps)
            self.seed(x, J)
            self.njev += 1
        assert self._J is not None
        return self._J

    def _serves(self, x: np.ndarray) -> bool:
        assert self._x is not None
        return serves(self._x, x, self.bounds[1], self.eps, self.reuse_steps)


def serves(
    x_kept: np.ndarray, x: np.ndarray, hi: np.ndarray, eps: float, reuse_steps: float = REUSE_STEPS
) -> bool:
    """A Jacobian computed at ``x_kept`` serves at ``x`` (:class:`JacobianCache`'s rule): the
    same point, or within ``reuse_steps`` finite-difference steps of it in every entry,
    ``|x_i − x_kept,i| <= reuse_steps·|h_i(x_kept)|`` (``hi``: the upper bounds)."""
    if np.array_equal(x, x_kept):
        return True
    h = np.abs(fd_steps(x_kept, hi, eps))
    return bool(np.all(np.abs(x - x_kept) <= reuse_steps * h))


def describe_nonfinite(residual_fn: Any, r: np.ndarray) -> str:
    i = int(np.flatnonzero(~np.isfinite(r))[0])
    if not isinstance(residual_fn, DescribedResidualFn):
        return f"entry {i}"
    where, extra = residual_fn.describe_index(i), residual_fn.last_divergence
    return f"{where}" + (f" ({'; '.join(extra[:3])})" if extra else "")


def sweep_parameter(
    params: ParameterDict,
    name: str,
    values: npt.ArrayLike,
    residual_fn: ResidualFn,
) -> np.ndarray:
    """Cost ``½‖r‖²`` as one parameter entry varies, all values in one batched call.

    Args:
      params: Current values of every parameter (not modified).
      name: A scalar parameter's name, or ``"name[i]"`` for entry ``i`` of an array parameter.
      values: ``(m,)`` values to try (need not respect the bounds).
      residual_fn: The residual function.

    Returns:
      ``(m,)`` costs.
    """
    labels = params.get_non_frozen_parameter_names()
    if name not in labels:
        raise KeyError(
            f"sweep_parameter: {name!r} must be one of the free parameter entries {labels}"
        )
    vals = np.asarray(values, dtype=np.float64).reshape(-1)
    if vals.size == 0 or not np.all(np.isfinite(vals)):
        raise ValueError(must_be("sweep_parameter: values", "a non-empty finite array", vals))
    X = np.repeat(params.as_vector()[:, None], vals.size, axis=1)
    X[labels.index(name)] = vals
    R = residual_array(residual_fn(X, params))
    return cast(np.ndarray, 0.5 * np.sum(R**2, axis=0))
