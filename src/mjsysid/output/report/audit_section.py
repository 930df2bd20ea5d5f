"""The report's identifiability audit: :func:`mjsysid.fit.audit.audit_jacobian` on the fit's
final Jacobian, in words (singular values, determined parameters, named weak combinations
and advice)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mjsysid.fit.audit import Audit, audit_jacobian
from mjsysid.fit.status import MessageContext
from mjsysid.output.report.format import fmt, raise_limit
from mjsysid.util.limits import get_limit

STRUCTURAL_RTOL = 1e-3
"""Singular values below this share of the largest are structurally weak (the audit's)."""

MAX_LISTED = 24
"""Singular values listed one by one (more: the smallest and the largest ones)."""


def residual_noise(fun: Any, n_free: int) -> float:
    """The fit's residual noise level ``σ = sqrt(‖r‖² / (n − p))`` (residual units), as the
    intervals estimate it (``nan`` without residuals)."""
    r = np.asarray(fun, dtype=np.float64).reshape(-1)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return math.nan
    return float(math.sqrt(float(r @ r) / max(r.size - n_free, 1)))


def singular_values_in_words(s: np.ndarray, rtol: float = STRUCTURAL_RTOL) -> str:
    """E.g. ``"The 3 singular values of the range-scaled Jacobian span 12.1 to 0.0004
    (a ratio of 3.0e+04); 1 lies below 0.001 of the largest: a direction the data do not
    determine at all."``"""
    s = np.asarray(s, dtype=np.float64)
    if s.size == 0:
        return "The Jacobian has no columns."
    if s[0] <= 0:
        return "Every singular value is 0: the residual does not depend on any parameter."
    weak = int(np.sum(s < rtol * s[0]))
    ratio = "∞" if s[-1] <= 0 else f"{s[0] / s[-1]:.2g}"
    text = (
        f"The {s.size} singular value{'s' if s.size != 1 else ''} of the range-scaled "
        f"Jacobian span {fmt(float(s[0]), 3)} to {fmt(float(s[-1]), 3)} (a ratio of {ratio})"
    )
    if weak == 0:
        return text + (
            f"; none lies below {rtol:g} of the largest: no direction is structurally lost."
        )
    return text + (
        f"; {weak} lie{'s' if weak == 1 else ''} below {rtol:g} of the largest: "
        f"{'a direction' if weak == 1 else f'{weak} directions'} of the parameters the data "
        "do not determine at all."
    )


def _listed(s: np.ndarray) -> str:
    values = [fmt(float(v), 3) for v in s]
    if len(values) <= MAX_LISTED:
        return ", ".join(values)
    half = MAX_LISTED // 2
    return (
        ", ".join(values[:half])
        + f", … ({len(values) - MAX_LISTED} more) …, "
        + ", ".join(values[-half:])
    )


def _rows(audit: Audit) -> list[dict[str, Any]]:
    return [
        {
            "name": p.name,
            "value": fmt(p.value),
            "sensitivity": fmt(p.sensitivity, 3),
            "half_width": "∞" if math.isinf(p.half_width) else fmt(p.half_width, 3),
            "determined": p.determined,
        }
        for p in audit.parameters
    ]


def _usable_jacobian(opt_result: Any, names: Sequence[str]) -> np.ndarray | None:
    jac = getattr(opt_result, "jac", None)
    if jac is None or np.ndim(jac) != 2 or np.shape(jac)[1] != len(names):
        return None
    J = np.asarray(jac, dtype=np.float64)
    return J if J.shape[0] > J.shape[1] > 0 and np.all(np.isfinite(J)) else None


def audit_section(
    opt_result: Any,
    opt_params: Any,
    names: Sequence[str],
    alpha: float,
    context: MessageContext | None = None,
) -> dict[str, Any]:
    """The template's ``audit`` variable: ``reason`` (why there is none) or the audit.

    The audit (:func:`~mjsysid.fit.audit.audit_jacobian`) is of the final Jacobian at the
    solution, its columns scaled by the parameter ranges, at the fit's residual noise level
    (:func:`residual_noise`); over ``max_heatmap_parameters`` parameters it is left out (its
    SVD costs ``n·p²``).
    """
    J = _usable_jacobian(opt_result, names)
    if J is None:
        return {
            "reason": "No identifiability audit: the result has no finite final Jacobian with "
            "more residuals than parameters."
        }
    cap = get_limit("max_heatmap_parameters")
    if len(names) > cap:
        return {
            "reason": f"No identifiability audit: {len(names)} parameters exceed the limit "
            f"max_heatmap_parameters={cap} (raise it for the audit: "
            f"{raise_limit('max_heatmap_parameters', context)}; "
            + (context or MessageContext()).say(
                "mjsysid.fit.audit.audit_residual", "mjsysid audit on the experiment"
            )
            + " audits a point of your choice, the nominal by default)."
        }
    x = np.asarray(opt_result.x, dtype=np.float64).reshape(-1)
    lower, upper = opt_params.get_bounds()
    if np.size(lower) != len(names):
        lower, upper = np.full(len(names), -np.inf), np.full(len(names), np.inf)
    noise = residual_noise(opt_result.fun, len(names))
    audit = audit_jacobian(
        J, names, x, lower, upper, noise=noise if math.isfinite(noise) else 0.0, alpha=alpha
    )
    return {
        "reason": "",
        "summary": audit.summary(),
        "noise": fmt(audit.noise),
        "level": f"{100.0 * (1.0 - alpha):g} %",
        "singular_words": singular_values_in_words(audit.singular_values),
        "singular_values": _listed(audit.singular_values),
        "combinations": [{"text": c.text, "ratio": f"{c.ratio:.1e}"} for c in audit.combinations],
        "advice": list(audit.advice),
        "rows": _rows(audit),
        "n_undetermined": len(audit.parameters) - audit.n_determined,
    }
