"""Validation of a fit: how well the starting and the identified model predict the fitted
and the held-out sequences, per sequence and signal (fit percentage and RMS error).

:func:`fit_percent` and :func:`rms_error` are the metrics, :func:`validation_table` the
table of a fit from residual functions, :func:`validate` from the sequences, and
:func:`holdout_table` what :func:`mjsysid.fit.optimize.optimize` computes for ``holdout=``.
Which of several identified models the data support (multi-step prediction, AIC/BIC on an
effective sample size, a verdict only beyond the scatter) is
:mod:`mjsysid.lab.prediction`'s (``mjsysid compare``, ``mjsysid evaluate``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.objective.initial_state import INITIAL_KINDS
from mjsysid.objective.predictions import SequencePrediction
from mjsysid.objective.residual import ResidualFunction, build_options, build_residual_fn
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

__all__ = [
    "SignalScore",
    "ValidationTable",
    "check_holdout",
    "fit_percent",
    "holdout_table",
    "model_parameters",
    "residual_fn_like",
    "rms_error",
    "signal_scores",
    "validate",
    "validation_table",
]


# -- metrics --------------------------------------------------------------------------------------
def _paired(measured: Any, predicted: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(y, ŷ)`` as ``(N, D)`` arrays without the rows where either is not finite."""
    y = np.asarray(measured, dtype=np.float64)
    yh = np.asarray(predicted, dtype=np.float64)
    if y.ndim == 1:
        y, yh = y[:, None], yh.reshape(-1, 1) if yh.ndim == 1 else yh
    if y.shape != yh.shape or y.ndim != 2:
        raise ValueError(must_be("predicted", f"an array of shape {y.shape}", yh.shape))
    keep = np.all(np.isfinite(y), axis=1) & np.all(np.isfinite(yh), axis=1)
    return y[keep], yh[keep]


def fit_percent(measured: Any, predicted: Any) -> float:
    """The fit percentage of a prediction, as MATLAB's ``compare`` reports it.

    ``fit = 100 · (1 − ‖y − ŷ‖ / ‖y − ȳ‖)`` with the Frobenius norm over the samples and
    columns and ``ȳ`` the mean of every column: 100 % is a perfect prediction, 0 % no better
    than the mean, negative worse than it (Ljung, *System Identification: Theory for the
    User*, 2nd ed., 1999, sec. 16.4; MATLAB ``compare``, NRMSE fit).

    Args:
      measured: ``(N,)`` or ``(N, D)`` measured values (rows with a non-finite value are
        left out, in both arrays).
      predicted: The same shape, the model's prediction.

    Returns:
      The fit in percent; ``100`` for a constant signal predicted exactly, ``nan`` for a
      constant signal predicted otherwise, or no finite rows.
    """
    y, yh = _paired(measured, predicted)
    if y.shape[0] == 0:
        return math.nan
    err = float(np.linalg.norm(y - yh))
    spread = float(np.linalg.norm(y - y.mean(axis=0)))
    if spread == 0.0:
        return 100.0 if err == 0.0 else math.nan
    return 100.0 * (1.0 - err / spread)


def rms_error(measured: Any, predicted: Any) -> float:
    """The root-mean-square error ``sqrt(mean((y − ŷ)²))`` over the samples and columns, in
    the signal's unit (non-finite rows left out; ``nan`` for none)."""
    y, yh = _paired(measured, predicted)
    if y.size == 0:
        return math.nan
    return float(np.sqrt(np.mean((y - yh) ** 2)))


# -- the table of one fit -------------------------------------------------------------------------
@dataclass(frozen=True)
class SignalScore:
    """The fit of one signal of one sequence, with the starting and the identified model.

    Attributes:
      model, sequence, signal: Where it comes from. held_out: Not fitted (a holdout).
      fit_start, fit_identified: :func:`fit_percent` (%).
      rms_start, rms_identified: :func:`rms_error` (the signal's unit).
    """

    model: str
    sequence: str
    signal: str
    held_out: bool
    fit_start: float
    fit_identified: float
    rms_start: float
    rms_identified: float

    def as_dict(self) -> dict[str, Any]:
        """The YAML form (``null`` for NaN)."""
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            out[k] = None if isinstance(v, float) and not math.isfinite(v) else v
        return out


def signal_scores(preds: Sequence[SequencePrediction]) -> list[tuple[str, str, str, float, float]]:
    """``(model, sequence, signal, fit %, RMS)`` for every signal of every prediction (the
    measured series the residual compared and the prediction at those times; a signal of
    several columns, a quaternion, is scored over all of them)."""
    out = []
    for p in preds:
        meas, pred = p.measured_used, p.predicted_at_measured
        if pred.data.shape != meas.data.shape:
            continue  # a custom residual: no column-by-column prediction
        mapping: dict[str, Any] = dict(meas.signal_mapping or {}) or {
            f"column {j}": (None, [j]) for j in range(meas.data.shape[1])
        }
        for name, (_, cols) in mapping.items():
            c = [int(i) for i in cols]
            y, yh = meas.data[:, c], pred.data[:, c]
            out.append((p.model_name, p.sequence_name, name, fit_percent(y, yh), rms_error(y, yh)))
    return out


@dataclass(frozen=True)
class ValidationTable:
    """Fit percentages and RMS errors per sequence and signal (see :func:`validation_table`).

    Attributes:
      rows: One :class:`SignalScore` per signal of every sequence, fitted ones first.
      held_out_start, held_out_identified: The predictions of the held-out sequences (for
        plots; not saved).
    """

    rows: tuple[SignalScore, ...]
    held_out_start: tuple[SequencePrediction, ...] = field(default=(), repr=False)
    held_out_identified: tuple[SequencePrediction, ...] = field(default=(), repr=False)

    def as_dict(self) -> dict[str, Any]:
        """``validation.yaml``'s content: ``{"fitted": [...], "held_out": [...]}``."""
        return {
            "metrics": {
                "fit": "100·(1 − ‖y − ŷ‖ / ‖y − mean(y)‖), percent (MATLAB compare)",
                "rms": "sqrt(mean((y − ŷ)²)), the signal's unit",
            },
            "fitted": [r.as_dict() for r in self.rows if not r.held_out],
            "held_out": [r.as_dict() for r in self.rows if r.held_out],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ValidationTable:
        """The table :meth:`as_dict` wrote (without predictions)."""
        rows = []
        for key in ("fitted", "held_out"):
            for r in data.get(key) or []:
                values: dict[str, Any] = {k: (math.nan if v is None else v) for k, v in r.items()}
                rows.append(SignalScore(**values))
        return cls(tuple(rows))

    def format(self) -> str:
        """A text table, one signal a line, fitted and held-out sequences apart."""
        head = (
            f"{'sequence':<24} {'signal':<18} {'fit start':>10} {'fit ident.':>10} "
            f"{'RMS start':>11} {'RMS ident.':>11}"
        )
        lines = []
        for held, title in ((False, "fitted sequences"), (True, "held-out sequences")):
            rows = [r for r in self.rows if r.held_out is held]
            if not rows:
                continue
            lines += [f"{title}:", head]
            lines += [
                f"{r.sequence:<24} {r.signal:<18} {r.fit_start:9.1f}% {r.fit_identified:9.1f}% "
                f"{r.rms_start:11.4g} {r.rms_identified:11.4g}"
                for r in rows
            ]
        return "\n".join(lines)


def model_parameters(params: ParameterDict) -> ParameterDict:
    """``params`` without the initial states of the fitted sequences or shooting windows
    (kinds ``initial_qpos``, ``initial_qvel``, ``initial_act``): what other data are
    simulated with, each sequence from its own measured start."""
    return ParameterDict(
        p.copy() for p in params.values() if p.meta.get("kind") not in INITIAL_KINDS
    )


def _scored(
    rf: ResidualFunction, start: ParameterDict, fitted: ParameterDict, held_out: bool
) -> tuple[list[SignalScore], list[SequencePrediction], list[SequencePrediction]]:
    if held_out:
        start, fitted = model_parameters(start), model_parameters(fitted)
    p0, p1 = rf.predict(None, start), rf.predict(None, fitted)
    rows = [
        SignalScore(m, s, sig, held_out, f0, f1, r0, r1)
        for (m, s, sig, f0, r0), (_, _, _, f1, r1) in zip(
            signal_scores(p0), signal_scores(p1), strict=True
        )
    ]
    return rows, p0, p1


def validation_table(
    params_start: ParameterDict,
    params_fit: ParameterDict,
    fitted: ResidualFunction | None = None,
    held_out: ResidualFunction | None = None,
) -> ValidationTable:
    """Simulates the fitted and the held-out sequences with the starting and the identified
    parameters and scores every signal (:func:`fit_percent`, :func:`rms_error`).

    Args:
      params_start, params_fit: The parameters before and after the fit.
      fitted: The residual function of the fit (``None``: no rows of fitted sequences).
      held_out: A residual function of the held-out sequences, built like the fit's
        (simulated with :func:`model_parameters`: from their own measured starts).
    """
    for what, p in (("params_start", params_start), ("params_fit", params_fit)):
        if not isinstance(p, ParameterDict):
            raise TypeError(must_be(what, "a ParameterDict", type(p).__name__))
    rows: list[SignalScore] = []
    p0: list[SequencePrediction] = []
    p1: list[SequencePrediction] = []
    if fitted is not None:
        rows += _scored(fitted, params_start, params_fit, False)[0]
    if held_out is not None:
        more, p0, p1 = _scored(held_out, params_start, params_fit, True)
        rows += more
    return ValidationTable(tuple(rows), tuple(p0), tuple(p1))


def _ms_list(value: Any, name: str) -> list[ModelSequences]:
    items = [value] if isinstance(value, ModelSequences) else list(value or [])
    if not all(isinstance(m, ModelSequences) for m in items):
        raise TypeError(must_be(name, "a ModelSequences or a list of them", type(value).__name__))
    return items


def validate(
    params_start: ParameterDict,
    params_fit: ParameterDict,
    models_sequences: Sequence[ModelSequences] | ModelSequences | None,
    holdout: Sequence[ModelSequences] | ModelSequences | None = None,
    **residual_options: Any,
) -> ValidationTable:
    """The validation table of a fit done in Python.

    Args:
      params_start, params_fit: The parameters before and after :func:`mjsysid.optimize`.
      models_sequences: The fitted data (``None``: only the held-out rows).
      holdout: Data not fitted, simulated with both parameter sets.
      **residual_options: Keywords of :func:`~mjsysid.objective.residual.build_residual_fn`,
        as the fit's residual was built (``sensor_weights``, ``modify_residual``, ...).

    Example::

        table = validate(params, opt_params, [train], holdout=[test])
        print(table.format())
    """
    rfs = []
    try:
        fit_list, hold_list = (
            _ms_list(models_sequences, "models_sequences"),
            _ms_list(holdout, "holdout"),
        )
        fit_rf = build_residual_fn(fit_list, **residual_options) if fit_list else None
        hold_rf = build_residual_fn(hold_list, **residual_options) if hold_list else None
        rfs = [r for r in (fit_rf, hold_rf) if r is not None]
        return validation_table(params_start, params_fit, fit_rf, hold_rf)
    finally:
        for r in rfs:
            r.close()


# -- the holdout of optimize ----------------------------------------------------------------------
def residual_fn_like(rf: ResidualFunction, models_sequences: Sequence[ModelSequences]) -> Any:
    """A residual function of other sequences built with ``rf``'s options (signal
    transform, weights, observations, normalisation, control interpolation and transform,
    force laws, custom rollout and model builder): how the held-out data are compared."""
    return build_residual_fn(list(models_sequences), **build_options(rf))


def check_holdout(holdout: Any) -> None:
    """TypeError unless ``holdout`` is ``None``, a ``ModelSequences``, a non-empty list of
    them or a ``ResidualFunction`` (checked before a fit, not after it)."""
    if holdout is None or isinstance(holdout, ModelSequences | ResidualFunction):
        return
    ok = isinstance(holdout, list | tuple) and holdout
    if not (ok and all(isinstance(m, ModelSequences) for m in holdout)):
        raise TypeError(
            must_be(
                "holdout",
                "a ModelSequences, a non-empty list of them or a ResidualFunction",
                type(holdout).__name__ if not isinstance(holdout, list | tuple) else holdout,
            )
        )


def holdout_table(
    params_start: ParameterDict, params_fit: ParameterDict, residual_fn: Any, holdout: Any
) -> ValidationTable:
    """The validation table of :func:`~mjsysid.fit.optimize.optimize`'s ``holdout=``.

    Args:
      params_start, params_fit: The parameters before and after the fit.
      residual_fn: The fit's residual: a :class:`~mjsysid.objective.residual.ResidualFunction`
        also scores the fitted sequences and its options build the held-out one; any other
        callable gives only the held-out rows (compared with the default options).
      holdout: A :class:`ModelSequences` or a list of them (built with
        :func:`~mjsysid.objective.residual.build_residual_fn`'s options like the fit's), or
        a ``ResidualFunction`` of the held-out data built by the caller.

    Raises:
      TypeError: ``holdout`` is none of these.
    """
    fitted = residual_fn if isinstance(residual_fn, ResidualFunction) else None
    check_holdout(holdout)
    if isinstance(holdout, ResidualFunction):
        return validation_table(params_start, params_fit, fitted, holdout)
    items = _ms_list(holdout, "holdout")
    hold_rf = residual_fn_like(fitted, items) if fitted is not None else build_residual_fn(items)
    try:
        return validation_table(params_start, params_fit, fitted, hold_rf)
    finally:
        hold_rf.close()
