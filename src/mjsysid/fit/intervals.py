"""Confidence intervals at a least-squares solution.

With ``n`` residuals and ``p`` parameters, the noise variance is ``σ² = ‖r‖²/(n − p)`` (or
given). The columns of ``J`` are scaled to unit norm first, ``J_s = J D`` with
``D = diag(1/‖J_:,i‖)``, so that which directions count as determined does not depend on the
parameters' units; with ``H_s = J_sᵀJ_s = V Λ Vᵀ`` the covariance is

    Σ = D H_s⁺ (J_sᵀ diag(σ²) J_s) H_s⁺ D,   H_s⁺ = V_r Λ_r⁻¹ V_rᵀ

over the identifiable eigen-directions (``λ > c``, ``c = rtol·λ_max``). For a full-rank ``J`` that
is ``(JᵀJ)⁻¹ (Jᵀ diag(σ²) J) (JᵀJ)⁻¹``: ``σ² (JᵀJ)⁻¹`` for one pooled variance, and with a variance
per signal the sandwich estimate that stays valid for the unweighted fit. A parameter with a real
component in the remaining (null-space) directions, or without any effect (a zero column), cannot be
determined from the data and gets an infinite interval; all others keep their finite ones.
The half-width is ``t_{1−α/2, n−p}·√Σ_ii``.

A component is real when it would matter: ``‖V_null,i‖² > c·(H_s⁺)_ii`` (the variance it would
add, were the null directions' eigenvalue ``c``, exceeds the parameter's own) and
``‖V_null,i‖ > v_zero``. A direction near the cut is known only as well as the Jacobian: its
eigenvector's components on parameters that have nothing to do with it are the
finite-difference noise of its columns (~1e-6 for window-start velocities and a filter state
that cancel), which the bare ``‖V_null,i‖ > 1e-6`` test of ``mujoco.sysid`` counted, making
every interval of a multiple-shooting fit infinite because of one degenerate window start.

An exact fit (``r = 0``, noise-free data) estimates ``σ² = 0`` and gets zero-width intervals
for its identifiable parameters: the data determine them exactly. No noise floor is invented;
a known noise level is passed as ``noise_variance``.

A MAP fit (:mod:`mjsysid.fit.prior`) ends its residual with ``m`` prior rows
``(θ_i − μ_i)/σ_i``, whose variance is 1 by construction: with ``prior_rows=m`` they enter
``J`` (and so ``H``) with unit variance and stay out of the noise estimate, which uses the
``n_d = n − m`` data rows and ``n_d − p_eff`` degrees of freedom, ``p_eff = tr(H⁺ J_dᵀJ_d)``
the parameters the data determine (``p`` without priors; a parameter held by its prior
alone counts 0). A parameter without effect on the data then gets its prior's interval,
``t·σ_i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import scipy.stats

from mjsysid.util.errors import first_bad_index, must_be


def calculate_intervals(
    residuals_star: npt.ArrayLike | Sequence[npt.ArrayLike],
    J: npt.ArrayLike,
    alpha: float = 0.05,
    lambda_zero_thresh: float | None = None,
    v_zero_thresh: float | None = None,
    *,
    noise_variance: float | npt.ArrayLike | None = None,
    groups: npt.ArrayLike | None = None,
    rtol: float = 1e-10,
    prior_rows: int = 0,
    score_covariance: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Covariance and ``(1 − alpha)`` confidence half-widths at a least-squares solution.

    The arguments are ``mujoco.sysid``'s (the residual and the two thresholds); the keywords
    after them are mjsysid's.

    Args:
      residuals_star: ``(n,)`` residual at the solution, or a list of arrays (one per
        sequence, as ``mujoco.sysid``'s residual functions return), concatenated.
      J: ``(n, p)`` Jacobian there, ``p >= 1`` and ``n > p``.
      alpha: Significance level in ``(0, 1)`` (0.05 gives 95 % intervals).
      lambda_zero_thresh: Also count eigenvalues of the column-scaled ``J_sᵀJ_s`` (whose
        trace is ``p``) below this absolute value as unidentifiable directions (``None``:
        only ``rtol`` decides). ``mujoco.sysid``'s default 1e-15 changes nothing next to
        ``rtol``.
      v_zero_thresh: A parameter is unidentifiable when its components in the unidentifiable
        directions have a norm above this (``None``: 1e-6) and matter (module docstring).
      noise_variance: Known residual variance, ``> 0``: a scalar or ``(n,)`` per entry.
        Default: pooled estimate ``‖r‖²/(n − p)``, or per group with ``groups``.
      groups: ``(n,)`` labels (e.g. one per sensor): a separate variance is estimated for each
        group, ``σ_g² = ‖r_g‖² / (n_g − p·n_g/n)``. Not together with ``noise_variance``
        (which gives the variances that ``groups`` would estimate).
      rtol: Eigenvalues of the column-scaled ``J_sᵀJ_s`` below ``rtol·λ_max`` count as
        unidentifiable directions; in ``[0, 1)``.
      prior_rows: The last ``prior_rows`` entries of the residual (and rows of ``J``) are
        the prior rows of a MAP fit, of unit variance (see the module docstring);
        ``noise_variance`` and ``groups`` then describe the ``n − prior_rows`` data rows.
      score_covariance: ``(p, p)`` covariance ``S`` of ``Jᵀr`` when the residuals are not
        independent (a Newey-West estimate, :func:`mjsysid.fit.whiteness.hac_score_covariance`):
        the covariance is then the sandwich ``H⁺ S H⁺`` (``noise_variance``, ``groups``
        and ``prior_rows`` are not used: ``S`` holds every row's part, prior rows too).

    Returns:
      ``(covariance (p, p), half_widths (p,))``. Parameters touching an unidentifiable direction
      have an infinite variance and half-width, and NaN covariances with the others; the
      others keep finite values. ``half_widths = t·sqrt(diag(covariance))``. An exact fit
      (a zero residual, or a zero residual in one group) estimates a zero noise variance and
      so gives zero-width intervals: what noise-free data determine exactly. Nothing is
      invented in its place; pass ``noise_variance`` when the noise level is known otherwise.

    Raises:
      TypeError: An argument of the wrong type (``alpha="0.05"``).
      ValueError: Wrong shapes, non-finite residuals or Jacobian, ``n <= p``, ``alpha`` or
        ``rtol`` out of range, a ``noise_variance`` that is not finite and ``> 0``, or both
        ``noise_variance`` and ``groups``.
    """
    r, Jm = _checked_problem(_stacked(residuals_star), J)
    a = _number("alpha", alpha, "a number in (0, 1)")
    if not 0 < a < 1:
        raise ValueError(must_be("alpha", "in (0, 1)", alpha))
    cutoffs = _cutoffs(rtol, lambda_zero_thresh, v_zero_thresh)
    m = _prior_count(prior_rows, r.size)
    if score_covariance is not None:
        S = _float_array("score_covariance", score_covariance)
        p = Jm.shape[1]
        if S.shape != (p, p) or not np.all(np.isfinite(S)):
            raise ValueError(must_be("score_covariance", f"a finite ({p}, {p}) array", S))
        cov = _covariance(Jm, np.zeros(r.size), cutoffs, S)
        tval = float(scipy.stats.t.ppf(1.0 - a / 2.0, r.size - p))
        return cov, tval * np.sqrt(np.diag(cov))
    return _intervals(r, Jm, a, cutoffs, m, _Noise(noise_variance, groups))


@dataclass(frozen=True)
class _Noise:
    """What :func:`calculate_intervals` was told about the data rows' noise."""

    variance: float | npt.ArrayLike | None
    groups: npt.ArrayLike | None


def _intervals(
    r: np.ndarray, Jm: np.ndarray, alpha: float, cutoffs: _Cutoffs, m: int, noise: _Noise
) -> tuple[np.ndarray, np.ndarray]:
    """``(covariance, half_widths)`` of checked arguments; the last ``m`` rows are priors."""
    n, p = Jm.shape
    dof = float(n - p) if m == 0 else _data_dof(Jm, m, cutoffs)
    var_data = _variance(r[: n - m], dof, noise.variance, noise.groups)
    var = np.concatenate([var_data, np.ones(m)]) if m else var_data
    cov = _covariance(Jm, var, cutoffs)
    tval = float(scipy.stats.t.ppf(1.0 - alpha / 2.0, dof))
    return cov, tval * np.sqrt(np.diag(cov))


def _checked_problem(residuals: npt.ArrayLike, J: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``(r (n,), J (n, p))`` as finite float arrays with ``n > p >= 1``."""
    r = _float_array("residuals", residuals)
    if r.ndim != 1:
        raise ValueError(must_be("residuals", "a 1-D array of shape (n,)", r))
    Jm = _float_array("J", J)
    if Jm.ndim != 2 or Jm.shape[0] != r.size:
        raise ValueError(
            must_be(
                "J", f"shape ({r.size}, p) matching residuals", Jm, hint=f"got shape {Jm.shape}"
            )
        )
    n, p = Jm.shape
    if p == 0:
        raise ValueError(
            f"J must have at least one column (one per parameter), got shape {Jm.shape}"
        )
    if n <= p:
        raise ValueError(must_be("residuals", f"more entries than parameters ({p})", n))
    for name, arr in (("residuals", r), ("J", Jm)):
        bad = ~np.isfinite(arr)
        if np.any(bad):
            at = np.unravel_index(first_bad_index(bad), arr.shape)
            index = ", ".join(str(int(k)) for k in at)
            raise ValueError(f"{name} must be finite, got {float(arr[at])!r} at {name}[{index}]")
    return r, Jm


def _prior_count(prior_rows: Any, n: int) -> int:
    """The checked number of prior rows: an integer in ``[0, n)``."""
    if isinstance(prior_rows, bool | np.bool_) or not isinstance(prior_rows, int | np.integer):
        raise TypeError(must_be("prior_rows", "an integer >= 0", prior_rows))
    if not 0 <= prior_rows < n:
        raise ValueError(must_be("prior_rows", f"in [0, {n}) (some rows must be data)", prior_rows))
    return int(prior_rows)


def _data_dof(Jm: np.ndarray, m: int, cutoffs: _Cutoffs) -> float:
    """Degrees of freedom of the data rows of a MAP fit: ``n_d − tr(H⁺ J_dᵀJ_d)``, at least 1.

    The trace is that of the data rows' hat matrix ``J_d H⁺ J_dᵀ``: the effective number of
    parameters the data determine (Hastie, Tibshirani & Friedman, *The Elements of Statistical
    Learning*, 2nd ed., §7.6). It is invariant to the column scaling, so computed on ``J_s``.
    """
    Js = _scaled(Jm)[0]
    H_pinv = _pinv(Js.T @ Js, cutoffs).pinv
    Jd = Js[: Js.shape[0] - m]
    p_eff = float(np.sum(H_pinv * (Jd.T @ Jd)))
    return max(float(Jd.shape[0]) - p_eff, 1.0)


def _scaled(Jm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(J_s, d)``: ``J`` with unit-norm columns, ``J_s = J diag(d)`` (a zero column stays
    zero: a null direction)."""
    norms = np.linalg.norm(Jm, axis=0)
    d = 1.0 / np.where(norms > 0, norms, 1.0)
    return Jm * d, d


@dataclass(frozen=True)
class _Eigen:
    """The eigen-decomposition of ``H_s`` split at the cut: ``H_s⁺`` over the kept
    directions, the eigenvectors ``V`` (columns), which are ``keep`` and the ``cut``."""

    pinv: np.ndarray
    V: np.ndarray
    keep: np.ndarray
    cut: float


def _pinv(Hs: np.ndarray, cutoffs: _Cutoffs) -> _Eigen:
    """The pseudo-inverse of ``H_s`` over its identifiable eigen-directions (``λ`` above
    ``max(rtol·λ_max, λ_zero)``)."""
    p = Hs.shape[0]
    lam, V = np.linalg.eigh(Hs)
    lam_max = max(float(lam.max()), 0.0)
    cut = max(cutoffs.rtol * lam_max, cutoffs.lambda_zero)
    keep = lam > cut if lam_max > 0 else np.zeros(p, dtype=bool)
    return _Eigen((V[:, keep] / lam[keep]) @ V[:, keep].T, V, keep, cut)


def _variance(
    r: np.ndarray,
    dof: float,
    noise_variance: float | npt.ArrayLike | None,
    groups: npt.ArrayLike | None,
) -> np.ndarray:
    """``(n,)`` noise variance per residual: known, per group, or pooled ``‖r‖²/dof``
    (``dof = n − p`` without priors)."""
    n = r.size
    if noise_variance is not None and groups is not None:
        raise ValueError(
            "calculate_intervals takes noise_variance or groups, not both: groups estimate a "
            "variance per group, noise_variance gives known ones; got both"
        )
    if noise_variance is not None:
        return _known_variance(noise_variance, n)
    if groups is not None:
        return _group_variance(r, groups, dof)
    return np.full(n, float(r @ r) / dof)


_V_ZERO = 1e-6  # a parameter with a null-space component above this is unidentifiable


@dataclass(frozen=True)
class _Cutoffs:
    """When a direction or a parameter counts as unidentifiable: eigenvalues below
    ``max(rtol·λ_max, lambda_zero)``; null-space components of norm above ``v_zero``."""

    rtol: float
    lambda_zero: float
    v_zero: float


def _stacked(residuals: Any) -> Any:
    """A list or tuple of residual arrays (one per sequence) as one ``(n,)`` array."""
    if isinstance(residuals, list | tuple) and any(np.ndim(part) >= 1 for part in residuals):
        try:
            return np.concatenate([np.asarray(part).reshape(-1) for part in residuals])
        except (TypeError, ValueError):
            return residuals  # reported by _checked_problem
    return residuals


def _cutoffs(rtol: Any, lambda_zero_thresh: Any, v_zero_thresh: Any) -> _Cutoffs:
    """The checked thresholds of :func:`calculate_intervals`."""
    tol = _number("rtol", rtol, "a number in [0, 1)")
    if not 0 <= tol < 1:
        raise ValueError(must_be("rtol", "in [0, 1)", rtol))
    return _Cutoffs(
        tol,
        _threshold("lambda_zero_thresh", lambda_zero_thresh, 0.0),
        _threshold("v_zero_thresh", v_zero_thresh, _V_ZERO),
    )


def _threshold(name: str, value: Any, default: float) -> float:
    if value is None:
        return default
    t = _number(name, value, "a number >= 0 or None")
    if not (np.isfinite(t) and t >= 0):
        raise ValueError(must_be(name, "a finite number >= 0 or None", value))
    return t


def _covariance(
    Jm: np.ndarray, var: np.ndarray, cutoffs: _Cutoffs, S: np.ndarray | None = None
) -> np.ndarray:
    """``(p, p)`` sandwich covariance over the identifiable directions (see the module
    docstring; with ``S``, the covariance of ``Jᵀr``, ``H⁺ S H⁺``); a parameter touching a
    null direction gets ``inf`` variance, NaN elsewhere."""
    Js, d = _scaled(Jm)
    eig = _pinv(Js.T @ Js, cutoffs)
    H_pinv = eig.pinv
    if S is not None:
        Ss = S * np.outer(d, d)  # Var(J_sᵀr)
        inner = d[:, None] * H_pinv
        cov = inner @ Ss @ inner.T
        cov = 0.5 * (cov + cov.T)
        np.fill_diagonal(cov, np.maximum(np.diag(cov), 0.0))
        return _mark_unidentifiable(cov, eig, cutoffs)
    # Sandwich covariance of the least-squares estimate: H⁺ (Jᵀ diag(σ²) J) H⁺; equals σ² H⁺
    # for a constant variance, and stays right when the variance differs between signals.
    # As B Bᵀ with B = D H⁺ J_sᵀ diag(σ), so that its diagonal is a sum of squares (>= 0 to
    # the last bit, exactly 0 for an exact fit) and the covariance exactly symmetric.
    B = (d[:, None] * H_pinv) @ (Js.T * np.sqrt(var)[None, :])
    cov = B @ B.T
    diag = np.einsum("ij,ij->i", B, B)
    np.fill_diagonal(cov, diag)
    return _mark_unidentifiable(cov, eig, cutoffs)


def _mark_unidentifiable(cov: np.ndarray, eig: _Eigen, cutoffs: _Cutoffs) -> np.ndarray:
    """``cov`` with ``inf`` variance and NaN covariances for the unidentifiable parameters."""
    unident = _unidentifiable(eig, cutoffs)
    cov[unident, :] = np.nan
    cov[:, unident] = np.nan
    cov[unident, unident] = np.inf
    return np.asarray(cov)


def _unidentifiable(eig: _Eigen, cutoffs: _Cutoffs) -> np.ndarray:
    """``(p,)`` bool: the parameters with a real component in the null directions.

    A direction just below the cut (``λ ≈ c = max(rtol·λ_max, λ_zero)``) is known only as well
    as the Jacobian: its eigenvector's components on the other parameters are the
    finite-difference noise of its columns regressed on theirs, ~1e-6 and more, not physics.
    So a component counts when it is above ``v_zero`` *and* it would matter: the variance it
    adds were the direction's eigenvalue the cut, ``‖V_null,i‖²/c``, exceeds the variance the
    identifiable directions give, ``(H_s⁺)_ii``. A parameter whose component is noise keeps
    its finite interval; one tied to the null direction (a large component, or a column
    without effect) is unidentifiable. With ``c = 0`` any component above ``v_zero`` counts.
    """
    null = eig.V[:, ~eig.keep]
    if not null.size:
        return np.zeros(eig.V.shape[0], dtype=bool)
    share = np.einsum("ij,ij->i", null, null)
    return cast(
        np.ndarray, (np.sqrt(share) > cutoffs.v_zero) & (share > eig.cut * np.diag(eig.pinv))
    )


def _number(name: str, value: Any, expected: str) -> float:
    """``value`` as a float if it is a real number (not a bool, a string or an array)."""
    if isinstance(value, bool | np.bool_) or not isinstance(
        value, int | float | np.integer | np.floating
    ):
        raise TypeError(must_be(name, expected, value))
    return float(value)


def _float_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array; strings, booleans and other non-numbers are errors."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(must_be(name, "an array of numbers", value)) from None
    if raw.dtype.kind not in "iuf":
        raise TypeError(must_be(name, "an array of numbers", value))
    return raw.astype(np.float64)


def _known_variance(noise_variance: Any, n: int) -> np.ndarray:
    """A given noise variance, scalar or ``(n,)``, checked finite and ``> 0``, as ``(n,)``."""
    var = _float_array("noise_variance", noise_variance)
    if var.shape not in ((), (1,), (n,)):
        raise ValueError(must_be("noise_variance", f"a scalar or an array of shape ({n},)", var))
    bad = ~(np.isfinite(var) & (var > 0))
    if np.any(bad):
        i = first_bad_index(bad)
        where = f"It is at entry {i}. " if var.ndim else ""
        raise ValueError(
            must_be(
                "noise_variance",
                "finite and > 0",
                float(var.reshape(-1)[i]),
                hint=f"{where}For an exact, noise-free fit leave noise_variance out: the "
                "estimated variance is then 0 and the intervals have zero width",
            )
        )
    return np.broadcast_to(var.reshape(-1) if var.ndim else var, (n,)).astype(np.float64)


def _group_variance(r: np.ndarray, groups: Any, dof: float) -> np.ndarray:
    """Per-group variance estimate ``‖r_g‖² / (n_g·dof/n)`` spread to ``(n,)`` (with
    ``dof = n − p``: ``‖r_g‖² / (n_g − p·n_g/n)``)."""
    n = r.size
    try:
        g = np.asarray(groups)
    except (TypeError, ValueError):
        raise ValueError(must_be("groups", f"{n} labels", groups)) from None
    if g.ndim != 1:
        raise ValueError(must_be("groups", f"a 1-D array of {n} labels", g))
    if g.size != n:
        raise ValueError(must_be("groups", f"{n} labels", g.size))
    if g.dtype.kind == "f" and np.any(np.isnan(g)):
        raise ValueError(must_be("groups", "labels without NaN", g))
    try:
        labels, inverse = np.unique(g, return_inverse=True)
    except TypeError:
        raise TypeError(must_be("groups", "labels of one comparable type", g)) from None
    counts = np.bincount(inverse, minlength=labels.size).astype(np.float64)
    sums = np.bincount(inverse, weights=r * r, minlength=labels.size)
    # n_g·dof/n > 0 for every group because dof > 0: the estimate is always defined.
    per_group = sums / (counts * dof / n)
    return per_group[inverse]


__all__ = ["calculate_intervals"]
