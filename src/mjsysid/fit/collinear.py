"""Near-collinear parameters: combinations the data determine while their members are not.

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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mjsysid.fit.audit import Combination, name_direction

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


__all__ = ["COS_TOL", "EIG_RTOL", "Collinear", "near_collinear"]
