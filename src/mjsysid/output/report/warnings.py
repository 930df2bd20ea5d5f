"""The report's warnings in words: :func:`collect_warnings` and :class:`ReportWarning`.

Every kind of warning is one small function of a :class:`WarningInputs`; :data:`WARNING_KINDS`
lists them most important first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mjsysid.fit.status import DIAGNOSIS, REMEDIES, MessageContext, Status, reworded
from mjsysid.output.report.content import Direction, ParameterRow, ResidualCorrelation, SignalError


@dataclass(frozen=True)
class ReportWarning:
    """One warning in words. ``category``: ``optimizer``, ``bounds``, ``identifiability``,
    ``conditioning``, ``correlation``, ``signals``, ``confidence`` or ``data``."""

    category: str
    message: str
    details: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class WarningInputs:
    """What :func:`collect_warnings` looks at (its arguments, see there)."""

    rows: Sequence[ParameterRow]
    opt_result: Any = None
    condition: float = math.nan
    directions: Sequence[Direction] = ()
    correlations: Sequence[tuple[str, str, float]] = ()
    errors: Sequence[SignalError] = ()
    large_error: float = 0.2
    cond_threshold: float = 1e6
    notes: Sequence[str] = ()
    autocorrelation: Sequence[ResidualCorrelation] = ()
    rho_threshold: float = 0.5
    context: MessageContext = field(default_factory=MessageContext)
    interval_method: str = "linear"


def _names_list(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _rows_named(rows: Sequence[ParameterRow]) -> str:
    """The physical parameters by name, the initial states counted (their names are in the
    details and in the report's Initial states section, never in a headline)."""
    physical = [r.name for r in rows if not r.nuisance]
    states = len(rows) - len(physical)
    said = [_names_list(physical)] if physical else []
    if states:
        said.append(f"{states} initial state{'s' if states != 1 else ''}")
    return " and ".join(said)


def _optimizer(w: WarningInputs) -> list[ReportWarning]:
    res = w.opt_result
    if res is None:
        return []
    if not res.success:
        status = res.status
        text = reworded(res.message, status, w.context)
        return [
            ReportWarning(
                "optimizer", f"The optimizer did not report convergence (status {status!s}): {text}"
            )
        ]
    if DIAGNOSIS in str(getattr(res, "message", "")):  # converged, far above the noise (#30)
        return [ReportWarning("optimizer", reworded(res.message, res.status, w.context))]
    if res.status == Status.STALLED:
        return [
            ReportWarning(
                "optimizer",
                "The fit stopped where its steps stalled: no nearby point is clearly better."
                + REMEDIES[Status.STALLED](w.context),
            )
        ]
    return []


def _notes(w: WarningInputs) -> list[ReportWarning]:
    return [ReportWarning("confidence", n) for n in w.notes]


def _autocorrelation(w: WarningInputs) -> list[ReportWarning]:
    corr = sorted((c for c in w.autocorrelation if c.rho > w.rho_threshold), key=lambda c: -c.rho)
    if not corr:
        return []
    worst = corr[0]
    return [
        ReportWarning(
            "confidence",
            f"The residuals of {len(corr)} signal(s) are correlated in time (lag-1 "
            f"autocorrelation up to {worst.rho:.2f}, {worst.signal} in {worst.sequence}): "
            "dynamics the model does not have, a filtered sensor, or samples much faster "
            "than the noise changes. " + _correlated_intervals(w.interval_method, worst.inflation),
            [f"{c.sequence}: {c.signal}: ρ = {c.rho:.3f}" for c in corr[:20]],
        )
    ]


def _correlated_intervals(method: str, inflation: float) -> str:
    """What residuals correlated in time do to the intervals of ``method``."""
    if method == "hac":
        return (
            "The confidence intervals account for it: a Newey-West (HAC) sandwich over the "
            "correlated samples, never narrower than the linearised ones"
        )
    if method == "bootstrap":
        return (
            "The confidence intervals account for it: a block bootstrap resamples whole "
            "sequences or windows"
        )
    return (
        "The confidence intervals assume independent noise: they are too narrow, by about "
        f"×{inflation:.2g} (√((1+ρ)/(1−ρ))) for the worst signal (confidence: "
        "{method: auto} widens them)"
    )


def _bounds(w: WarningInputs) -> list[ReportWarning]:
    at = [r for r in w.rows if r.at_lower] + [r for r in w.rows if r.at_upper]
    if not at:
        return []
    details = [
        f"{r.name} = {r.identified:.6g} at its {'lower' if r.at_lower else 'upper'} "
        f"bound {r.lower if r.at_lower else r.upper:.6g}"
        for r in at
    ]
    return [
        ReportWarning(
            "bounds",
            f"{len(at)} parameter(s) ended at a bound "
            f"({_rows_named(at)}): the data pull them further, so the "
            "bound, the model structure or the data may be wrong; the interval of a parameter "
            "at a bound is not meaningful",
            details,
        )
    ]


def _identifiability(w: WarningInputs) -> list[ReportWarning]:
    unid = [r for r in w.rows if not r.identifiable and not r.frozen]
    if unid:
        return [
            ReportWarning(
                "identifiability",
                f"{len(unid)} parameter(s) are not identifiable from these data "
                f"({_rows_named(unid)}): their confidence interval is infinite. Excite them more "
                "(richer commands: "
                + w.context.say("mjsysid.excitation or mjsysid.fit.design", "mjsysid design")
                + "), measure more signals, or freeze them at trusted values, e.g. from CAD ("
                + w.context.say("Parameter(..., frozen=True)", "frozen: true with nominal:")
                + ")",
                [f"direction: {d.describe()} (λ/λmax = {d.ratio:.1e})" for d in w.directions],
            )
        ]
    if w.directions:
        return [
            ReportWarning(
                "identifiability",
                f"{len(w.directions)} parameter combination(s) are not determined by the data",
                [d.describe() for d in w.directions],
            )
        ]
    return []


def _conditioning(w: WarningInputs) -> list[ReportWarning]:
    c = w.condition
    if not (math.isinf(c) or (math.isfinite(c) and c > w.cond_threshold)):
        return []
    kappa = "infinite" if math.isinf(c) else f"{c:.3g}"
    return [
        ReportWarning(
            "conditioning",
            f"The Gauss-Newton matrix JᵀJ (columns scaled to unit norm) is "
            f"poorly conditioned: κ = {kappa} > {w.cond_threshold:.0e}. Some parameters have "
            "nearly the same effect on the signals; their estimates are correlated and "
            "sensitive to noise",
        )
    ]


def _correlation(w: WarningInputs) -> list[ReportWarning]:
    if not w.correlations:
        return []
    return [
        ReportWarning(
            "correlation",
            f"{len(w.correlations)} parameter pair(s) are strongly correlated "
            f"(|ρ| ≥ {min(abs(c[2]) for c in w.correlations):.2f})",
            [f"{a} ~ {b}: ρ = {c:+.3f}" for a, b, c in w.correlations[:20]],
        )
    ]


def _large_errors(w: WarningInputs) -> list[ReportWarning]:
    big = [e for e in w.errors if np.isfinite(e.identified) and e.flagged(w.large_error)]
    if not big:
        return []
    big = sorted(big, key=lambda e: -e.identified)
    return [
        ReportWarning(
            "signals",
            f"{len(big)} signal column(s) keep a large error after the fit (NRMSE > "
            f"{w.large_error:g}): the model cannot reproduce them with these parameters",
            [
                f"{e.sequence}: {e.column}: NRMSE {e.initial:.3g} → {e.identified:.3g}"
                for e in big[:30]
            ],
        )
    ]


def _diverged(w: WarningInputs) -> list[ReportWarning]:
    bad = [e for e in w.errors if not np.isfinite(e.identified)]
    if not bad:
        return []
    return [
        ReportWarning(
            "signals",
            f"{len(bad)} signal column(s) have no finite prediction (the simulation diverged)",
            [f"{e.sequence}: {e.column}" for e in bad[:30]],
        )
    ]


#: The kinds of warning, most important first; each gives zero or more warnings.
WARNING_KINDS: tuple[Callable[[WarningInputs], list[ReportWarning]], ...] = (
    _optimizer,
    _notes,
    _autocorrelation,
    _bounds,
    _identifiability,
    _conditioning,
    _correlation,
    _large_errors,
    _diverged,
)


def collect_warnings(
    rows: Sequence[ParameterRow],
    *,
    opt_result: Any = None,
    condition: float = math.nan,
    directions: Sequence[Direction] = (),
    correlations: Sequence[tuple[str, str, float]] = (),
    errors: Sequence[SignalError] = (),
    large_error: float = 0.2,
    cond_threshold: float = 1e6,
    notes: Sequence[str] = (),
    autocorrelation: Sequence[ResidualCorrelation] = (),
    rho_threshold: float = 0.5,
    context: MessageContext | None = None,
    interval_method: str = "linear",
) -> list[ReportWarning]:
    """Everything a user should look at, in words, most important first.

    Args:
      rows: From :func:`~mjsysid.output.report.content.parameter_rows`.
      opt_result: For the termination status (``success``, ``message``).
      condition: From :func:`~mjsysid.output.report.content.condition_number`.
      directions: From :func:`~mjsysid.output.report.content.unidentifiable_directions`.
      correlations: From :func:`~mjsysid.output.report.content.strong_correlations`.
      errors: From :func:`~mjsysid.output.report.content.signal_errors`.
      large_error: Flag signals whose identified NRMSE exceeds this.
      cond_threshold: Flag κ above this.
      notes: Extra messages (e.g. why intervals could not be computed).
      autocorrelation: From :func:`~mjsysid.output.report.content.residual_autocorrelation`.
      rho_threshold: Flag residuals whose lag-1 autocorrelation exceeds this.
      context: The reader's language and what can apply to the fit (remedies are named in
        its words, only those that can apply; default: both languages, every cause).
      interval_method: How the intervals were computed (``"linear"``, ``"hac"`` or
        ``"bootstrap"``: :attr:`~mjsysid.fit.confidence.Confidence.method`): correlated
        residuals make only linearised ones too narrow.
    """
    inputs = WarningInputs(
        rows,
        opt_result=opt_result,
        condition=condition,
        directions=directions,
        correlations=correlations,
        errors=errors,
        large_error=large_error,
        cond_threshold=cond_threshold,
        notes=notes,
        autocorrelation=autocorrelation,
        rho_threshold=rho_threshold,
        context=context or MessageContext(),
        interval_method=interval_method,
    )
    return [warning for kind in WARNING_KINDS for warning in kind(inputs)]
