"""The report's identifiability audit: :func:`mjsysid.fit.audit.audit_jacobian` on the fit's
final Jacobian, in words (singular values, determined parameters, named weak combinations
and advice)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mjsysid.fit.audit import Audit, audit_jacobian
from mjsysid.fit.result import OptimizeResult
from mjsysid.fit.status import MessageContext
from mjsysid.output.report.content import ParameterRow
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
    """E.g. ``"The 3 singular values of the range-scaled Jacobian span 12.1 to 0.0004; 1
    lies below 0.001 of the largest: a direction the data do not determine at all."``

    (Their ratio is a condition number; the report gives one, κ in the summary, and does not
    repeat another here.)"""
    s = np.asarray(s, dtype=np.float64)
    if s.size == 0:
        return "The Jacobian has no columns."
    if s[0] <= 0:
        return "Every singular value is 0: the residual does not depend on any parameter."
    weak = int(np.sum(s < rtol * s[0]))
    text = (
        f"The {s.size} singular value{'s' if s.size != 1 else ''} of the range-scaled "
        f"Jacobian span {fmt(float(s[0]), 3)} to {fmt(float(s[-1]), 3)}"
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


def _usable_jacobian(opt_result: OptimizeResult, names: Sequence[str]) -> np.ndarray | None:
    jac = opt_result.jac
    if np.ndim(jac) != 2 or np.shape(jac)[1] != len(names):
        return None
    J = np.asarray(jac, dtype=np.float64)
    return J if J.shape[0] > J.shape[1] > 0 and np.all(np.isfinite(J)) else None


def fit_audit(
    opt_result: Any,
    opt_params: Any,
    names: Sequence[str],
    alpha: float,
    context: MessageContext | None = None,
) -> tuple[Audit | None, str]:
    """``(audit, "")`` of the fit, or ``(None, why there is none)``.

    The audit (:func:`~mjsysid.fit.audit.audit_jacobian`) is of the final Jacobian at the
    solution, its columns scaled by the parameter ranges, at the fit's residual noise level
    (:func:`residual_noise`); over ``max_heatmap_parameters`` parameters it is left out (its
    SVD costs ``n·p²``). It is computed once per report: the parameter table's verdicts
    (:func:`~mjsysid.output.report.content.with_verdicts`) and this section read it.
    """
    J = _usable_jacobian(opt_result, names)
    if J is None:
        return None, (
            "No identifiability audit: the result has no finite final Jacobian with "
            "more residuals than parameters."
        )
    cap = get_limit("max_heatmap_parameters")
    if len(names) > cap:
        return None, (
            f"No identifiability audit: {len(names)} parameters exceed the limit "
            f"max_heatmap_parameters={cap} (raise it for the audit: "
            f"{raise_limit('max_heatmap_parameters', context)}; "
            + (context or MessageContext()).say(
                "mjsysid.fit.audit.audit_residual", "mjsysid audit on the experiment"
            )
            + " audits a point of your choice, the nominal by default)."
        )
    x = np.asarray(opt_result.x, dtype=np.float64).reshape(-1)
    lower, upper = opt_params.get_bounds()
    if np.size(lower) != len(names):
        lower, upper = np.full(len(names), -np.inf), np.full(len(names), np.inf)
    noise = residual_noise(opt_result.fun, len(names))
    audit = audit_jacobian(
        J, names, x, lower, upper, noise=noise if math.isfinite(noise) else 0.0, alpha=alpha
    )
    return audit, ""


def verdict_counts(rows: Sequence[ParameterRow]) -> str:
    """``"3 of 4 parameters determined, 1 only jointly"``: the table's verdicts counted
    (frozen rows left out)."""
    fitted = [r for r in rows if not r.frozen and r.verdict]
    if not fitted:
        return ""
    count = {v: sum(1 for r in fitted if r.verdict == v) for v in VERDICT_ORDER}
    text = f"{count['determined']} of {len(fitted)} parameters determined"
    extra = [f"{count[v]} {v}" for v in VERDICT_ORDER[1:] if count[v]]
    return text + (f", {', '.join(extra)}" if extra else "")


#: The verdicts of :func:`~mjsysid.output.report.content.with_verdicts`, best first.
VERDICT_ORDER = ("determined", "only jointly", "not determined")


def _involves(text: str, names: set[str]) -> bool:
    return any(n in text for n in names)


def audit_section(
    audit: Audit | None, reason: str, rows: Sequence[ParameterRow], alpha: float
) -> dict[str, Any]:
    """The template's ``audit`` variable: ``reason`` (why there is none) or the audit in
    words, its weak combinations and advice split into those that involve a physical
    parameter (shown) and those among initial states only (``nuisance_*``, collapsed)."""
    counts = {
        "summary": verdict_counts([r for r in rows if not r.nuisance]),
        "nuisance_summary": verdict_counts([r for r in rows if r.nuisance]),
    }
    if audit is None:  # the verdicts (from the intervals) are still counted
        none: dict[str, Any] = {"combinations": [], "advice": []}
        return {"reason": reason, **counts, **none, "nuisance_combinations": []}
    physical = {r.name for r in rows if not r.nuisance}
    combos = [{"text": c.text, "ratio": f"{c.ratio:.1e}"} for c in audit.combinations]
    main = [c for c, a in zip(combos, audit.combinations, strict=True) if physical & set(a.names)]
    rest = [c for c in combos if c not in main]
    advice = [a for a in audit.advice if _involves(a, physical)]
    return {
        "reason": "",
        **counts,
        "noise": fmt(audit.noise),
        "level": f"{100.0 * (1.0 - alpha):g} %",
        "singular_words": singular_values_in_words(audit.singular_values),
        "singular_values": _listed(audit.singular_values),
        "combinations": main,
        "advice": advice,
        "nuisance_combinations": rest,
        "nuisance_advice": [a for a in audit.advice if a not in advice],
    }
