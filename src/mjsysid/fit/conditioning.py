"""How well a fit is posed at its start: ``cond(JᵀJ)`` (``optimize(check_conditioning=True)``).

The Gauss-Newton model of every backend solves with ``H = JᵀJ``; its condition number
``κ(JᵀJ) = κ(J)² = (σ_max/σ_min)²`` (singular values of ``J``) says how many digits a step
can lose: about ``log10 κ`` of the 16 of double precision. Above :data:`CONDITION_WARN`
the start is reported with a logged warning, the advice of
``mujoco.sysid``'s check: scale the parameters (``x_scale='jac'``) or regularise.
"""

from __future__ import annotations

import logging

import numpy as np

from mjsysid.fit.jacobian import CountedResidual, ResidualFn, fd_jacobian
from mjsysid.params.parameter import ParameterDict

logger = logging.getLogger("mjsysid.fit.optimize")

CONDITION_WARN = 1e10  # cond(JᵀJ) above this is reported


def start_condition(
    residual_fn: ResidualFn,
    params: ParameterDict,
    x0: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    eps: float,
) -> float:
    """``cond(JᵀJ)`` at ``x0`` from one forward-difference Jacobian (``p + 1`` candidates),
    logged at WARNING when it exceeds :data:`CONDITION_WARN` (``inf`` for a singular one).

    Args:
      residual_fn: The fit's residual. params: Its parameters (not modified).
      x0: ``(p,)`` start. bounds: ``(lo, hi)``, each ``(p,)``. eps: Relative step.
    """
    fn = CountedResidual(residual_fn, params.copy())
    r0 = fn(x0)
    if not np.all(np.isfinite(r0)):
        return float("nan")  # the fit itself reports where
    J = fd_jacobian(fn, x0, r0, bounds, eps)
    sv = np.linalg.svd(J, compute_uv=False)  # descending, min(n, p) of them
    singular = J.shape[0] < J.shape[1] or sv[-1] == 0
    cond = float("inf") if singular else float((sv[0] / sv[-1]) ** 2)
    if not cond <= CONDITION_WARN:
        logger.warning(
            "cond(J^T J) ~ %.1e at the starting point; the problem may be ill-conditioned. "
            "Consider x_scale='jac' or regularizing (or freeze parameters the data do not "
            "determine).",
            cond,
        )
    return cond
