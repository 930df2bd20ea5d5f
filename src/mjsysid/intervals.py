"""Confidence intervals at a least-squares solution.

With ``n`` residuals and ``p`` parameters, the noise variance is ``σ² = ‖r‖²/(n − p)`` (or
given). The columns of ``J`` are scaled to unit norm first, ``J_s = J D`` with
``D = diag(1/‖J_:,i‖)``, so that which directions count as determined does not depend on the
parameters' units; with ``H_s = J_sᵀJ_s = V Λ Vᵀ`` the covariance is

    Σ = D H_s⁺ (J_sᵀ diag(σ²) J_s) H_s⁺ D,   H_s⁺ = V_r Λ_r⁻¹ V_rᵀ

over the identifiable eigen-directions (``λ > rtol·λ_max``). For a full-rank ``J`` that is
``(JᵀJ)⁻¹ (Jᵀ diag(σ²) J) (JᵀJ)⁻¹``: ``σ² (JᵀJ)⁻¹`` for one pooled variance, and with a
variance per signal the sandwich estimate that stays valid for the unweighted fit. A parameter
with a component in the remaining (null-space) directions, or without any effect (a zero
column), cannot be determined from the data and gets an infinite interval; all others keep
their finite ones. The half-width is ``t_{1−α/2, n−p}·√Σ_ii``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.stats

from mjsysid._errors import must_be


def calculate_intervals(
    residuals: npt.ArrayLike,
    J: npt.ArrayLike,
    alpha: float = 0.05,
    *,
    noise_variance: float | npt.ArrayLike | None = None,
    groups: npt.ArrayLike | None = None,
    rtol: float = 1e-10,
) -> tuple[np.ndarray, np.ndarray]:
    """Covariance and ``(1 − alpha)`` confidence half-widths at a least-squares solution.

    Args:
      residuals: ``(n,)`` residual at the solution.
      J: ``(n, p)`` Jacobian there.
      alpha: Significance level (0.05 gives 95 % intervals).
      noise_variance: Known residual variance: a scalar or ``(n,)`` per entry. Default: pooled
        estimate ``‖r‖²/(n − p)``, or per group with ``groups``.
      groups: ``(n,)`` labels (e.g. one per sensor): a separate variance is estimated for each
        group, ``σ_g² = ‖r_g‖² / (n_g − p·n_g/n)``.
      rtol: Eigenvalues of the column-scaled ``J_sᵀJ_s`` below ``rtol·λ_max`` count as
        unidentifiable directions.

    Returns:
      ``(covariance (p, p), half_widths (p,))``. Parameters touching an unidentifiable direction
      have an infinite variance and half-width, and NaN covariances with the others; the
      others keep finite values. ``half_widths = t·sqrt(diag(covariance))``.
    """
    r = np.asarray(residuals, dtype=np.float64).reshape(-1)
    Jm = np.asarray(J, dtype=np.float64)
    if Jm.ndim != 2 or Jm.shape[0] != r.size:
        raise ValueError(
            must_be(
                "J", f"shape ({r.size}, p) matching residuals", Jm, hint=f"got shape {Jm.shape}"
            )
        )
    if not 0 < alpha < 1:
        raise ValueError(must_be("alpha", "in (0, 1)", alpha))
    n, p = Jm.shape
    if n <= p:
        raise ValueError(must_be("residuals", f"more entries than parameters ({p})", n))
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(Jm))):
        raise ValueError("residuals and J must be finite")
    if noise_variance is not None:
        var = np.broadcast_to(np.asarray(noise_variance, dtype=np.float64), (n,))
    elif groups is not None:
        g = np.asarray(groups).reshape(-1)
        if g.size != n:
            raise ValueError(must_be("groups", f"{n} labels", g.size))
        var = np.empty(n)
        for label in np.unique(g):
            sel = g == label
            ng = int(sel.sum())
            var[sel] = float(r[sel] @ r[sel]) / max(ng - p * ng / n, 1.0)
    else:
        var = np.full(n, float(r @ r) / (n - p))
    if np.any(var <= 0):
        var = np.maximum(var, np.finfo(float).tiny)
    norms = np.linalg.norm(Jm, axis=0)
    d = 1.0 / np.where(norms > 0, norms, 1.0)  # a zero column stays zero: a null direction
    Js = Jm * d
    lam, V = np.linalg.eigh(Js.T @ Js)
    lam_max = max(float(lam.max()), 0.0)
    keep = lam > rtol * lam_max if lam_max > 0 else np.zeros(p, dtype=bool)
    H_pinv = (V[:, keep] / lam[keep]) @ V[:, keep].T
    # Sandwich covariance of the least-squares estimate: H⁺ (Jᵀ diag(σ²) J) H⁺; equals σ² H⁺
    # for a constant variance, and stays right when the variance differs between signals.
    cov = d[:, None] * (H_pinv @ (Js.T @ (var[:, None] * Js)) @ H_pinv) * d[None, :]
    null = V[:, ~keep]
    unident = np.linalg.norm(null, axis=1) > 1e-6 if null.size else np.zeros(p, dtype=bool)
    cov[unident, :] = np.nan
    cov[:, unident] = np.nan
    cov[unident, unident] = np.inf
    tval = float(scipy.stats.t.ppf(1.0 - alpha / 2.0, n - p))
    with np.errstate(invalid="ignore"):
        half = tval * np.sqrt(np.diag(cov))
    return cov, half


__all__ = ["calculate_intervals"]
