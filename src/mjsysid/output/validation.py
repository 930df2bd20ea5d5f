"""Validation: how well a model predicts data, fitted or held out, and which model the data
support.

The metrics (:func:`fit_percent`, :func:`rms_error`) and the per-sequence, per-signal table
of a fit (:func:`validation_table`, :func:`validate`) live in :mod:`mjsysid.fit.validation`
(so that :func:`mjsysid.fit.optimize.optimize` computes it for ``holdout=``) and are
re-exported here; this module adds :func:`information_criteria` and the side-by-side
comparison of several identified models on the same data (:func:`compare_models`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mjsysid.fit.validation import SignalScore as SignalScore
from mjsysid.fit.validation import ValidationTable as ValidationTable
from mjsysid.fit.validation import fit_percent as fit_percent
from mjsysid.fit.validation import model_parameters as model_parameters
from mjsysid.fit.validation import rms_error as rms_error
from mjsysid.fit.validation import signal_scores as signal_scores
from mjsysid.fit.validation import validate as validate
from mjsysid.fit.validation import validation_table as validation_table
from mjsysid.objective.residual import ResidualFunction
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

__all__ = [
    "ModelScore",
    "SignalScore",
    "ValidationTable",
    "compare_models",
    "fit_percent",
    "format_comparison",
    "information_criteria",
    "model_parameters",
    "rms_error",
    "signal_scores",
    "validate",
    "validation_table",
    "verdict",
]


# -- metrics --------------------------------------------------------------------------------------
def information_criteria(ssr: float, n: int, k: int) -> tuple[float, float]:
    """``(AIC, BIC)`` of a least-squares fit with Gaussian residuals of unknown variance.

    ``AIC = n·ln(SSR/n) + 2k`` and ``BIC = n·ln(SSR/n) + k·ln n`` (the constant terms of
    the log-likelihood dropped: only differences between models on the same data mean
    anything; the lower, the better supported). Burnham & Anderson, *Model Selection and
    Multimodel Inference*, 2nd ed., 2002, sec. 2.2; Ljung 1999, sec. 16.4.

    Args:
      ssr: Sum of squared residuals (> 0). n: Number of residuals (> 0).
      k: Number of fitted parameters (>= 0).
    """
    if not (n > 0 and ssr > 0 and k >= 0):
        raise ValueError(must_be("(ssr, n, k)", "ssr > 0, n > 0 and k >= 0", (ssr, n, k)))
    base = n * math.log(ssr / n)
    return base + 2.0 * k, base + k * math.log(n)


# -- comparing models -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelScore:
    """One identified model on the comparison data.

    Attributes:
      label: Its name (a results folder). n: Residuals compared. k: Fitted parameters.
      ssr: Sum of squared (weighted, normalised: as the fit's objective) residuals.
      aic, bic: :func:`information_criteria`.
      signals: ``(sequence, signal, fit %, RMS)`` per signal.
    """

    label: str
    n: int
    k: int
    ssr: float
    aic: float
    bic: float
    signals: tuple[tuple[str, str, float, float], ...]

    def as_dict(self) -> dict[str, Any]:
        """The JSON/YAML form."""
        return {
            "label": self.label,
            "n": self.n,
            "k": self.k,
            "ssr": self.ssr,
            "aic": self.aic,
            "bic": self.bic,
            "signals": [
                {"sequence": s, "signal": g, "fit": _plain(f), "rms": _plain(r)}
                for s, g, f, r in self.signals
            ],
        }


def _plain(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def compare_models(
    candidates: Sequence[tuple[str, ParameterDict, ResidualFunction]],
) -> list[ModelScore]:
    """Scores identified models on the same data.

    Args:
      candidates: ``(label, identified params, residual function on the comparison data)``
        per model; the parameter count ``k`` is the number of free values of the params
        (without the fitted sequences' initial states: :func:`model_parameters`).
    """
    if len(candidates) < 2:
        raise ValueError(must_be("candidates", "two or more models", len(candidates)))
    out = []
    for label, fitted, rf in candidates:
        params = model_parameters(fitted)
        preds = rf.predict(None, params)
        r = np.concatenate([np.ravel(p.residual) for p in preds])
        r = r[np.isfinite(r)]
        ssr, n, k = float(r @ r), int(r.size), int(params.size)
        aic, bic = information_criteria(max(ssr, np.finfo(float).tiny), n, k)
        signals = tuple((s, g, f, e) for _, s, g, f, e in signal_scores(preds))
        out.append(ModelScore(label, n, k, ssr, aic, bic, signals))
    return out


def verdict(scores: Sequence[ModelScore]) -> str:
    """One sentence naming the model the data support (the lowest BIC; a difference under 2
    is "not worth more than a bare mention", Burnham & Anderson 2002, sec. 2.6, and Kass &
    Raftery 1995 for BIC)."""
    ranked = sorted(scores, key=lambda s: s.bic)
    best, second = ranked[0], ranked[1]
    gap = second.bic - best.bic
    by_aic = min(scores, key=lambda s: s.aic)
    text = f"The data support {best.label!r}: the lowest BIC, {gap:.1f} below {second.label!r}" + (
        " (a small difference: the data hardly tell them apart)." if gap < 2 else "."
    )
    if by_aic.label != best.label:
        text += f" AIC prefers {by_aic.label!r} (it penalises parameters less)."
    return text


def format_comparison(scores: Sequence[ModelScore]) -> str:
    """A text table: one model a line (n, k, SSR, AIC, BIC, mean fit), then per signal."""
    lines = [f"{'model':<28} {'n':>7} {'k':>4} {'SSR':>12} {'AIC':>12} {'BIC':>12}"]
    lines += [
        f"{s.label:<28} {s.n:7d} {s.k:4d} {s.ssr:12.5g} {s.aic:12.2f} {s.bic:12.2f}" for s in scores
    ]
    lines.append("")
    lines.append(
        f"{'sequence':<24} {'signal':<18}" + "".join(f" {s.label[:20]:>21}" for s in scores)
    )
    for j, (seq, sig, _, _) in enumerate(scores[0].signals):
        cells = "".join(
            f" {s.signals[j][2]:8.1f}% {s.signals[j][3]:11.4g}" if j < len(s.signals) else ""
            for s in scores
        )
        lines.append(f"{seq:<24} {sig:<18}{cells}")
    return "\n".join(lines)
