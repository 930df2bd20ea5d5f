"""The data behind each section of the report: small pure functions, each unit-tested.

Conventions and formulas:

* **At a bound.** Entry ``i`` is at its lower bound when ``x_i − lo_i ≤ rtol·s_i + atol`` with
  ``s_i = hi_i − lo_i`` for finite bounds (``max(|bound|, 1)`` otherwise); infinite bounds are
  never reached. The same on the upper side.
* **Correlation.** ``ρ_ij = Σ_ij / √(Σ_ii Σ_jj)`` from the parameter covariance ``Σ``; entries
  touching a parameter with an infinite, NaN or non-positive variance are undefined (NaN), the
  diagonal of the others is 1, and rounding is clipped to ``[−1, 1]``.
* **Conditioning.** ``κ = λ_max / λ_min`` of ``JᵀJ`` after scaling every Jacobian column to unit
  norm (``JᵀJ`` then holds the cosines between sensitivity directions, so κ does not depend on
  the parameters' units); a zero column or a singular matrix gives ``κ = ∞``. ``κ`` is the
  square of the condition number of the scaled ``J``: two parameters whose sensitivity
  directions have cosine ``c`` alone give ``κ = (1 + |c|)/(1 − |c|)``.
* **Unidentifiable directions.** Eigenvectors ``v`` of the scaled ``JᵀJ`` with
  ``λ ≤ rtol·λ_max``: moving the (scaled) parameters along ``v`` leaves the residual unchanged
  to first order, so the data cannot tell those combinations apart.
* **Remaining error of a signal.** ``NRMSE = RMS(y − ŷ) / RMS(y − ȳ)`` per measured column (the
  root of the unexplained fraction of the signal's variance; 0 is a perfect fit, 1 is no
  better than the mean; ``RMS(y)`` is used for a constant signal), and ``fit = 1 − NRMSE``
  (as in system-identification toolboxes' ``compare``).
* **Decimation for plots.** Min-max decimation: the samples are cut into buckets and every
  bucket keeps its first sample and the samples where each series is lowest and highest, so
  peaks survive (unlike plain striding).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mjsysid.fit.confidence import Confidence
from mjsysid.fit.result import OptimizeResult
from mjsysid.fit.status import Status
from mjsysid.objective.initial_state import INITIAL_KINDS
from mjsysid.output.report.units import parameter_unit
from mjsysid.util.errors import must_be


# -- parameters -----------------------------------------------------------------------------------
def at_bound_flags(
    values: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    *,
    rtol: float = 1e-6,
    atol: float = 1e-12,
) -> tuple[np.ndarray, np.ndarray]:
    """``(at_lower, at_upper)`` boolean arrays of shape ``(p,)`` (see the module docstring)."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    lo = np.broadcast_to(np.asarray(lower, dtype=np.float64), x.shape)
    hi = np.broadcast_to(np.asarray(upper, dtype=np.float64), x.shape)
    finite = np.isfinite(lo) & np.isfinite(hi)
    with np.errstate(invalid="ignore"):
        span = np.where(
            finite,
            hi - lo,
            np.maximum(
                np.maximum(
                    np.abs(np.where(np.isfinite(lo), lo, 0.0)),
                    np.abs(np.where(np.isfinite(hi), hi, 0.0)),
                ),
                1.0,
            ),
        )
        tol = rtol * span + atol
        at_lo = np.isfinite(lo) & (x - lo <= tol)
        at_hi = np.isfinite(hi) & (hi - x <= tol)
    return at_lo, at_hi


def _large_interval(
    hw: float, value: float, kind: str, bounds: tuple[float, float], large: float
) -> bool:
    """Whether half-width ``hw`` is large: above ``large·|value|`` (any non-zero one around
    0), or for an estimated initial state (kinds ``initial_*``, naturally near 0, where a
    relative width means nothing) above ``large`` times half its bound range."""
    if not (math.isfinite(hw) and hw > 0):
        return False
    lo, hi = bounds
    if kind.startswith("initial_") and math.isfinite(lo) and math.isfinite(hi) and hi > lo:
        return hw > large * 0.5 * (hi - lo)
    return value == 0 or hw > large * abs(value)


def relative_change(initial: npt.ArrayLike, final: npt.ArrayLike) -> np.ndarray:
    """``(final − initial) / |initial|``; NaN where ``initial`` is 0 (undefined)."""
    a = np.asarray(initial, dtype=np.float64)
    b = np.asarray(final, dtype=np.float64)
    out = np.full(np.broadcast_shapes(a.shape, b.shape), np.nan)
    nz = np.broadcast_to(a != 0, out.shape)
    out[nz] = (np.broadcast_to(b, out.shape)[nz] - np.broadcast_to(a, out.shape)[nz]) / np.abs(
        np.broadcast_to(a, out.shape)[nz]
    )
    return out


@dataclass(frozen=True)
class ParameterRow:
    """One scalar entry of the parameter table.

    Attributes:
      group: The parameter's name (array parameters have one row per entry).
      name: The entry's label (``name`` or ``name[i]``, as in ``parameter_names``).
      kind: ``meta["kind"]`` when known, else ``""``.
      nominal, initial, identified, lower, upper: Values (SI units of the quantity).
      half_width: Confidence half-width (inf: unidentifiable; NaN: not computed); the
        larger side where ``ends`` are given.
      rel_change: ``(identified − initial)/|initial|`` (NaN if ``initial`` is 0).
      at_lower, at_upper, frozen, identifiable, large_interval: Flags.
      determined_by: After a MAP fit, what determined the value: ``"data"``, ``"prior"``,
        ``"data and prior"`` or ``"none"`` (:attr:`Confidence.determined_by
        <mjsysid.fit.confidence.Confidence.determined_by>`); ``""`` without priors.
      ends: ``(lower, upper)`` of an interval that is not ``identified ± half_width`` (a
        bootstrap's percentiles, :attr:`Confidence.interval
        <mjsysid.fit.confidence.Confidence.interval>`); ``None``: symmetric.
      unit: SI unit of the values (:func:`~mjsysid.output.report.units.parameter_unit`).
      verdict: What the data determine, the one verdict the table and the audit show
        (:func:`with_verdicts`): ``"determined"``, ``"only jointly"``, ``"not determined"``,
        ``"frozen"``, or ``""`` (neither intervals nor an audit).
      why: The verdict's reason in words (``""`` for ``"determined"``).
      sensitivity: The audit's relative sensitivity (NaN without an audit).
    """

    group: str
    name: str
    kind: str
    nominal: float
    initial: float
    identified: float
    lower: float
    upper: float
    half_width: float
    rel_change: float
    at_lower: bool
    at_upper: bool
    frozen: bool
    identifiable: bool
    large_interval: bool
    determined_by: str = ""
    ends: tuple[float, float] | None = None
    unit: str = ""
    verdict: str = ""
    why: str = ""
    sensitivity: float = math.nan

    @property
    def nuisance(self) -> bool:
        """An estimated initial state of a sequence or shooting window (kinds
        :data:`~mjsysid.objective.initial_state.INITIAL_KINDS`): needed by the fit, not part
        of the answer; the report shows these apart."""
        return self.kind in INITIAL_KINDS

    @property
    def ci_low(self) -> float:
        return self.identified - self.half_width if self.ends is None else self.ends[0]

    @property
    def ci_high(self) -> float:
        return self.identified + self.half_width if self.ends is None else self.ends[1]

    @property
    def flags(self) -> list[str]:
        """Short flag words shown in the table."""
        out = []
        if self.frozen:
            out.append("frozen")
        if self.at_lower:
            out.append("at lower bound")
        if self.at_upper:
            out.append("at upper bound")
        if not self.frozen and not self.identifiable:
            out.append("unidentifiable")
        elif self.verdict == "not determined":
            out.append("not determined")
        elif self.large_interval:
            out.append("large interval")
        if self.verdict == "only jointly":
            out.append("weak combination")
        if self.determined_by == "prior":
            out.append("set by prior")
        elif self.determined_by == "data and prior":
            out.append("prior and data")
        return out


def _by_name(confidence: Confidence | None) -> tuple[dict[str, float], dict[str, int]]:
    """``{name: half-width}`` and ``{name: at-bound side}`` of the intervals (the sides only
    when they carry them, so that the report says what ``confidence.yaml`` says)."""
    if confidence is None:
        return {}, {}
    hw = {n: float(h) for n, h in zip(confidence.names, confidence.half_widths, strict=True)}
    at = confidence.at_bound
    sides = {} if at is None else {n: int(b) for n, b in zip(confidence.names, at, strict=True)}
    return hw, sides


def _determined_by_name(confidence: Confidence) -> dict[str, str]:
    """``{name: what determined it}`` after a MAP fit (empty without priors)."""
    by = confidence.determined_by
    return {} if by is None else dict(zip(confidence.names, by, strict=True))


def _ends_by_name(confidence: Confidence) -> dict[str, tuple[float, float]]:
    """``{name: (lower, upper)}`` of the finite intervals that are not ``value ± half-width``
    (:attr:`Confidence.interval <mjsysid.fit.confidence.Confidence.interval>`; empty without)."""
    ends = confidence.interval
    if ends is None:
        return {}
    ends = np.asarray(ends, dtype=np.float64).reshape(-1, 2)
    return {
        n: (float(lo), float(hi))
        for n, (lo, hi) in zip(confidence.names, ends, strict=True)
        if np.isfinite(lo) and np.isfinite(hi)
    }


def parameter_rows(
    initial_params: Any,
    opt_params: Any,
    confidence: Confidence | None = None,
    *,
    large_interval: float = 0.5,
    bound_rtol: float = 1e-6,
    models: dict[str, Any] | None = None,
) -> list[ParameterRow]:
    """Rows of the parameter table, one per scalar entry, frozen parameters included.

    Args:
      initial_params, opt_params: ``ParameterDict`` before and after the fit.
      confidence: A :class:`~mjsysid.output.results.Confidence` (``names``, ``half_widths``), or
        ``None`` when intervals are not available (half-widths NaN, nothing flagged).
      large_interval: Flag intervals with ``half_width > large_interval·|identified|`` (and
        any finite non-zero half-width around 0; an initial state's against half its bound
        range, see :func:`_large_interval`).
      bound_rtol: Relative tolerance of :func:`at_bound_flags`.
      models: The compiled models by name: their joints give the units of initial states.
    """
    hw_by_name, side_by_name = _by_name(confidence)
    ends_by_name: dict[str, tuple[float, float]] = {}
    by_name: dict[str, str] = {}
    if confidence is not None:
        ends_by_name, by_name = _ends_by_name(confidence), _determined_by_name(confidence)
    rows: list[ParameterRow] = []
    for name, p in opt_params.items():
        init = initial_params[name].value if name in initial_params else p.nominal
        labels = [name] if p.size == 1 else [f"{name}[{i}]" for i in range(p.size)]
        at_lo, at_hi = at_bound_flags(p.value, p.min_value, p.max_value, rtol=bound_rtol)
        change = relative_change(init, p.value)
        kind = str(p.meta.get("kind", "")) if isinstance(p.meta, dict) else ""
        unit = parameter_unit(p.meta, _model_of(p.meta, models or {}))
        for i, label in enumerate(labels):
            hw = math.nan if p.frozen else hw_by_name.get(label, math.nan)
            ident = not (
                math.isinf(hw)
                or (confidence is not None and math.isnan(hw) and label in hw_by_name)
            )
            val = float(p.value[i])
            span = (float(p.min_value[i]), float(p.max_value[i]))
            large = _large_interval(hw, val, kind, span, large_interval)
            rows.append(
                ParameterRow(
                    group=name,
                    name=label,
                    kind=kind,
                    nominal=float(p.nominal[i]),
                    initial=float(init[i]),
                    identified=val,
                    lower=float(p.min_value[i]),
                    upper=float(p.max_value[i]),
                    half_width=hw,
                    rel_change=float(change[i]),
                    # (as confidence.yaml says, when the intervals carry the sides)
                    at_lower=side_by_name.get(label, -1 if at_lo[i] else 0) == -1 and not p.frozen,
                    at_upper=side_by_name.get(label, 1 if at_hi[i] else 0) == 1 and not p.frozen,
                    frozen=bool(p.frozen),
                    identifiable=ident or p.frozen,
                    large_interval=large,
                    determined_by="" if p.frozen else str(by_name.get(label, "")),
                    ends=None if p.frozen or math.isinf(hw) else ends_by_name.get(label),
                    unit=unit,
                )
            )
    return rows


def _model_of(meta: Any, models: dict[str, Any]) -> Any:
    """The model an initial-state parameter belongs to (its target is ``"model/sequence"``),
    else the only model; ``None`` when unknown."""
    target = str(meta.get("target", "")) if isinstance(meta, dict) else ""
    model = models.get(target.split("/")[0])
    if model is None and len(models) == 1:
        model = next(iter(models.values()))
    return model


def _verdict(r: ParameterRow, scale: float, weak: str, audited: bool | None) -> tuple[str, str]:
    """``(verdict, why)`` of one row (see :func:`with_verdicts`)."""
    hw = r.half_width
    if r.frozen:
        return "frozen", "held at its value, not fitted"
    if math.isinf(hw):
        why = "infinite interval: the data do not constrain it"
        if r.at_lower or r.at_upper:
            why = "held at its bound: the data push it past the bound (interval infinite)"
        return "not determined", why + (f"; {weak}" if weak else "")
    if math.isfinite(hw):
        if 2.0 * hw >= scale:
            return "not determined", (
                f"its interval ({_g3(2.0 * hw)} wide) is wider than its range ({_g3(scale)})"
            )
        if weak:
            return "only jointly", f"in a weak combination: {weak}"
        return "determined", ""
    if audited is None:  # neither intervals nor an audit
        return "", ""
    if audited:
        return "determined", ""
    return "not determined", weak or "the audit's expected interval is wider than its range"


def with_verdicts(rows: Sequence[ParameterRow], audit: Any = None) -> list[ParameterRow]:
    """The rows with one verdict each on what the data determine, read from the row's own
    interval, so that the table and the audit agree.

    * ``frozen``: not fitted.
    * ``not determined``: an infinite interval, or one wider than the parameter's range
      (the audit's scale, :func:`~mjsysid.fit.audit.parameter_scales`: ``upper − lower``,
      ``max(|value|, 1)`` with an infinite bound).
    * ``only jointly``: a finite, narrower interval, but the parameter is a member of a weak
      combination of the audit (:attr:`Audit.combinations <mjsysid.fit.audit.Audit>`): the
      data determine it together with others (the ``why`` names the combination).
    * ``determined``: otherwise. Without intervals the audit's own verdict is used.

    Args:
      rows: From :func:`parameter_rows`.
      audit: The :class:`~mjsysid.fit.audit.Audit` of the fit's final Jacobian (or ``None``).
    """
    from mjsysid.fit.audit import parameter_scales

    weak: dict[str, str] = {}
    by_name: dict[str, Any] = {}
    if audit is not None:
        for c in audit.combinations:
            for n in c.names:
                weak.setdefault(n, c.text)
        by_name = {p.name: p for p in audit.parameters}
    out = []
    for r in rows:
        a = by_name.get(r.name)
        scale = (
            float(a.scale)
            if a is not None
            else float(parameter_scales([r.identified], [r.lower], [r.upper])[0])
        )
        verdict, why = _verdict(r, scale, weak.get(r.name, ""), None if a is None else a.determined)
        sens = math.nan if a is None else float(a.sensitivity)
        out.append(dataclasses.replace(r, verdict=verdict, why=why, sensitivity=sens))
    return out


def _g3(v: float) -> str:
    """``v`` with 3 significant digits."""
    return f"{v:.3g}"


# -- covariance and Jacobian ----------------------------------------------------------------------
def correlation_from_covariance(covariance: npt.ArrayLike) -> np.ndarray:
    """``(p, p)`` correlation matrix; NaN rows/columns for undefined variances."""
    cov = np.asarray(covariance, dtype=np.float64)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(must_be("covariance", "a square (p, p) matrix", cov))
    var = np.diag(cov).copy()
    ok = np.isfinite(var) & (var > 0)
    sd = np.where(ok, np.sqrt(np.where(ok, var, 1.0)), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / np.outer(sd, sd)
    corr[~ok, :] = np.nan
    corr[:, ~ok] = np.nan
    corr[~np.isfinite(corr)] = np.nan
    corr = np.clip(corr, -1.0, 1.0)
    idx = np.flatnonzero(ok)
    corr[idx, idx] = 1.0
    return corr


def _unit_columns(jac: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    J = np.asarray(jac, dtype=np.float64)
    if J.ndim != 2:
        raise ValueError(must_be("jac", "a 2-D (n, p) matrix", J))
    norms = np.linalg.norm(J, axis=0)
    safe = np.where(norms > 0, norms, 1.0)
    return J / safe, norms


def gram_spectrum(jac: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``(λ, V)``: the eigenvalues ``(p,)`` (ascending) and eigenvectors ``(p, p)`` of
    ``JᵀJ`` with unit-norm columns, computed once for :func:`condition_number` and
    :func:`unidentifiable_directions` (an ``O(p³)`` step on a large windowed fit)."""
    Js, _ = _unit_columns(jac)
    lam, V = np.linalg.eigh(Js.T @ Js)
    return lam, V


def condition_number(
    jac: npt.ArrayLike, *, spectrum: tuple[np.ndarray, np.ndarray] | None = None
) -> float:
    """κ of ``JᵀJ`` with unit-norm columns (see the module docstring); NaN without entries.
    ``spectrum``: :func:`gram_spectrum` of ``jac`` when already computed."""
    Js, norms = _unit_columns(jac)
    if Js.size == 0 or not np.all(np.isfinite(Js)):
        return math.nan
    if np.any(norms == 0):
        return math.inf
    lam = np.linalg.eigvalsh(Js.T @ Js) if spectrum is None else spectrum[0]
    lam_max = float(lam.max())
    lam_min = float(lam.min())
    if lam_max <= 0:
        return math.inf
    if lam_min <= lam_max * 1e-15:
        return math.inf
    return lam_max / lam_min


@dataclass(frozen=True)
class Direction:
    """A combination of parameters the data do not determine.

    Attributes:
      ratio: ``λ / λ_max`` of the scaled ``JᵀJ`` (0 for an exact null direction).
      names: Parameters with the largest components, largest first.
      weights: Their components of the unit eigenvector.
      meaning: The combination in words, from the identifiability audit
        (:func:`mjsysid.fit.audit.audit_jacobian`: "a and b: only their sum is determined";
        empty when it does not name one).
    """

    ratio: float
    names: list[str]
    weights: list[float]
    meaning: str = ""

    def describe(self) -> str:
        terms = " ".join(
            f"{'+' if w >= 0 else '−'} {abs(w):.2f}·{n}"
            for n, w in zip(self.names, self.weights, strict=True)
        ).lstrip("+ ")
        return f"{terms} ({self.meaning})" if self.meaning else terms


def unidentifiable_directions(
    jac: npt.ArrayLike,
    names: Sequence[str],
    *,
    rtol: float = 1e-10,
    max_terms: int = 4,
    spectrum: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[Direction]:
    """Eigen-directions of the column-scaled ``JᵀJ`` with ``λ ≤ rtol·λ_max`` (``spectrum``:
    :func:`gram_spectrum` of ``jac`` when already computed)."""
    Js, _ = _unit_columns(jac)
    p = Js.shape[1]
    if len(names) != p:
        raise ValueError(must_be("names", f"{p} labels (one per Jacobian column)", len(names)))
    if Js.size == 0 or not np.all(np.isfinite(Js)):
        return []
    lam, V = np.linalg.eigh(Js.T @ Js) if spectrum is None else spectrum
    lam_max = max(float(lam.max()), 0.0)
    out = []
    for k in np.flatnonzero(lam <= rtol * lam_max) if lam_max > 0 else range(p):
        v = V[:, k]
        v = v * (1.0 if v[np.argmax(np.abs(v))] >= 0 else -1.0)
        ranked = np.argsort(-np.abs(v))[:max_terms]
        order = [int(i) for i in ranked if abs(v[i]) >= 0.05] or [int(ranked[0])]
        out.append(
            Direction(
                float(max(lam[k], 0.0) / lam_max) if lam_max > 0 else 0.0,
                [names[i] for i in order],
                [float(v[i]) for i in order],
            )
        )
    return out


def strong_correlations(
    corr: np.ndarray, names: Sequence[str], threshold: float = 0.95
) -> list[tuple[str, str, float]]:
    """Pairs with ``|ρ| ≥ threshold`` (NaN ignored), strongest first."""
    c = np.asarray(corr, dtype=np.float64)
    iu = np.triu_indices(c.shape[0], k=1)
    vals = c[iu]
    with np.errstate(invalid="ignore"):
        keep = np.flatnonzero(np.abs(vals) >= threshold)
    keep = keep[np.argsort(-np.abs(vals[keep]))]
    return [(names[iu[0][k]], names[iu[1][k]], float(vals[k])) for k in keep]


# -- signals --------------------------------------------------------------------------------------
def nrmse(measured: npt.ArrayLike, predicted: npt.ArrayLike) -> np.ndarray:
    """Per-column ``RMS(y − ŷ)/RMS(y − ȳ)`` of ``(N, D)`` arrays -> ``(D,)`` (module docstring).

    NaN where the prediction is not finite; a column that is constant and exactly predicted
    gives 0.
    """
    y = np.atleast_2d(np.asarray(measured, dtype=np.float64).T).T
    yh = np.atleast_2d(np.asarray(predicted, dtype=np.float64).T).T
    if y.shape != yh.shape:
        raise ValueError(
            must_be("predicted", f"shape {y.shape} like measured", yh, hint=f"got shape {yh.shape}")
        )
    with np.errstate(invalid="ignore"):
        err = np.sqrt(np.mean((y - yh) ** 2, axis=0))
    spread = np.sqrt(np.mean((y - y.mean(axis=0)) ** 2, axis=0))
    scale = np.asarray(
        np.where(
            spread > 1e-12 * np.maximum(np.abs(y).max(axis=0), 1e-300),
            spread,
            np.sqrt(np.mean(y**2, axis=0)),
        )
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(
            scale > 0, err / np.where(scale > 0, scale, 1.0), np.where(err == 0, 0.0, np.inf)
        )
    out[~np.all(np.isfinite(yh), axis=0)] = np.nan
    return out


def column_labels(ts: Any) -> list[str]:
    """A label per data column: ``signal`` or ``signal[j]``; ``column j`` without a mapping."""
    labels = [f"column {j}" for j in range(ts.data.shape[1])]
    if ts.signal_mapping is not None:
        for name, (_, cols) in ts.signal_mapping.items():
            for j, c in enumerate(cols):
                labels[int(c)] = name if len(cols) == 1 else f"{name}[{j}]"
    return labels


def column_signals(ts: Any) -> list[str]:
    """The signal name of every data column (``column j`` without a mapping)."""
    out = [f"column {j}" for j in range(ts.data.shape[1])]
    if ts.signal_mapping is not None:
        for name, (_, cols) in ts.signal_mapping.items():
            for c in cols:
                out[int(c)] = name
    return out


@dataclass(frozen=True)
class SignalError:
    """Remaining error of one measured column of one sequence.

    Attributes:
      sequence: ``"model/sequence"``. signal: signal name. column: column label.
      initial, identified: NRMSE before and after the fit (NaN when unknown).
      noise_only: The measured column is white noise (lag-1 autocorrelation below
        :data:`WHITE_RHO`): nothing moved there, no model can reproduce it, and a large NRMSE
        says nothing about the fit.
      windows: The number of shooting windows joined into this whole-recording error (0: one
        simulated sequence).
    """

    sequence: str
    signal: str
    column: str
    initial: float
    identified: float
    noise_only: bool = False
    windows: int = 0

    @property
    def fit_percent(self) -> float:
        return 100.0 * (1.0 - self.identified)

    def flagged(self, large_error: float) -> bool:
        """Whether the report flags this signal, the one rule of the fit table and the
        warnings: no finite prediction, or an NRMSE above ``large_error`` on a signal that
        is not pure noise (:attr:`noise_only`)."""
        if not math.isfinite(self.identified):
            return True
        return self.identified > large_error and not self.noise_only


#: A measured column whose lag-1 autocorrelation is below this is taken for pure sensor noise
#: (a sampled physical signal is smooth: its autocorrelation at one sample is close to 1).
WHITE_RHO = 0.5


def _white_columns(data: np.ndarray) -> np.ndarray:
    """``(m,)`` whether each column of ``data`` ``(N, m)`` is white: ``ρ₁ = Σ e_k e_{k+1} /
    Σ e_k² < WHITE_RHO`` with ``e`` the column less its mean (NaN rows left out)."""
    x = np.asarray(data, dtype=np.float64)
    x = x[np.all(np.isfinite(x), axis=1)]
    if x.shape[0] < 3:
        return np.zeros(x.shape[1], bool)
    e = x - x.mean(axis=0)
    den = np.einsum("ij,ij->j", e, e)
    num = np.einsum("ij,ij->j", e[1:], e[:-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0)
    return rho < WHITE_RHO


def signal_errors(
    initial_predictions: Sequence[Any] | None, identified_predictions: Sequence[Any]
) -> list[SignalError]:
    """NRMSE per sequence and measured column (``SequencePrediction`` lists, same order).

    Sequences whose compared prediction does not match the measured series column by column
    (a custom residual) are left out.
    """
    out = []
    inits = (
        list(initial_predictions)
        if initial_predictions is not None
        else [None] * len(identified_predictions)
    )
    for ini, fin in zip(inits, identified_predictions, strict=True):
        label = f"{fin.model_name}/{fin.sequence_name}"
        meas = fin.measured_used
        if fin.predicted_at_measured.data.shape != meas.data.shape:
            continue
        e1 = _safe_nrmse(meas.data, fin.predicted_at_measured.data)
        e0 = (
            _safe_nrmse(ini.measured_used.data, ini.predicted_at_measured.data)
            if ini is not None
            else np.full(e1.shape, np.nan)
        )
        if e0.shape != e1.shape:
            e0 = np.full(e1.shape, np.nan)
        sigs, labs = column_signals(meas), column_labels(meas)
        white = _white_columns(meas.data)
        for j in range(e1.size):
            out.append(
                SignalError(label, sigs[j], labs[j], float(e0[j]), float(e1[j]), bool(white[j]))
            )
    return out


@dataclass(frozen=True)
class ResidualCorrelation:
    """Lag-1 autocorrelation of the identified residual of one signal of one sequence.

    ``rho = Σ_k e_k·e_{k+1} / Σ_k e_k²`` over the signal's columns (``e`` with its mean
    removed). Least-squares intervals assume independent residuals; with an AR(1)-like
    correlation ``ρ`` the effective number of samples is ``n(1 − ρ)/(1 + ρ)`` and the true
    intervals are wider by :attr:`inflation` ``= √((1 + ρ)/(1 − ρ))``.
    """

    sequence: str
    signal: str
    rho: float

    @property
    def inflation(self) -> float:
        r = min(max(self.rho, 0.0), 1.0 - 1e-12)
        return math.sqrt((1.0 + r) / (1.0 - r))


def residual_autocorrelation(
    identified_predictions: Sequence[Any], exact: float = 1e-9
) -> list[ResidualCorrelation]:
    """:class:`ResidualCorrelation` of every measured signal (``SequencePrediction`` list).

    Signals with fewer than 10 samples, and exact fits (residual RMS below ``exact`` times
    the signal's RMS, where the residual is rounding noise), are left out, as are sequences
    whose compared prediction does not match the measured series column by column.
    """
    out = []
    for fin in identified_predictions:
        meas = fin.measured_used
        y, yh = np.asarray(meas.data), np.asarray(fin.predicted_at_measured.data)
        if y.shape != yh.shape or y.shape[0] < 10:
            continue
        sigs = column_signals(meas)
        for name in dict.fromkeys(sigs):
            cols = [j for j, s in enumerate(sigs) if s == name]
            e = y[:, cols] - yh[:, cols]
            if not np.all(np.isfinite(e)):
                continue
            e = e - e.mean(axis=0)
            energy = float(np.sum(e * e))
            if energy <= (exact**2) * float(np.sum(y[:, cols] ** 2)) or energy == 0.0:
                continue
            rho = float(np.sum(e[1:] * e[:-1])) / energy
            out.append(ResidualCorrelation(f"{fin.model_name}/{fin.sequence_name}", name, rho))
    return out


def _safe_nrmse(y: np.ndarray, yh: np.ndarray) -> np.ndarray:
    if y.shape != yh.shape:
        return np.full(y.shape[1] if y.ndim == 2 else 1, np.nan)
    return nrmse(y, yh)


# -- optimisation trace ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StageTrace:
    """The cost per iteration of an early horizon stage, on that stage's part of the data."""

    label: str  # "first 10 %"
    iterations: np.ndarray  # counted across stages
    cost: np.ndarray


@dataclass(frozen=True)
class Trace:
    """Cost and parameter values per iteration of the fit on the whole data (``iterations``
    starts at the start point: 0, or after the early horizon stages in ``early``)."""

    iterations: np.ndarray
    cost: np.ndarray
    candidates: np.ndarray  # (niter, p), may have 0 rows
    early: tuple[StageTrace, ...] = ()


def optimisation_trace(opt_result: OptimizeResult) -> Trace | None:
    """From ``opt_result.history`` and ``opt_result.stages``; ``None`` without a history.
    Early stages that ran (not skipped) become :class:`StageTrace` entries."""
    obj = np.asarray(opt_result.history.objective, dtype=np.float64).reshape(-1)
    if obj.size == 0:
        return None
    cand_list = opt_result.history.candidate
    p = np.asarray(opt_result.x).size
    cand = np.zeros((0, p))
    if len(cand_list):
        stacked = np.asarray(
            np.stack([np.asarray(c, dtype=np.float64).reshape(-1) for c in cand_list])
        )
        if stacked.shape[1] == p:
            cand = stacked
    early, offset = [], 0
    for st in opt_result.stages[:-1]:
        cost = np.asarray(st.objective, dtype=np.float64).reshape(-1)
        if st.status != Status.SKIPPED and cost.size:
            label = f"first {100.0 * st.horizon:g} %"
            early.append(StageTrace(label, offset + np.arange(cost.size), cost))
        offset += st.nit
    return Trace(offset + np.arange(obj.size), obj, cand, tuple(early))


# -- plotting helpers -----------------------------------------------------------------------------
def decimate_indices(values: npt.ArrayLike, max_points: int) -> np.ndarray:
    """Sorted sample indices that keep at most about ``max_points`` samples, peaks included.

    Args:
      values: ``(n,)`` or ``(n, k)`` series sharing one time axis (NaN allowed).
      max_points: Target number of samples (at least 4).

    Returns:
      ``(m,)`` increasing indices with ``m ≤ max(max_points, 4)``; the first and last sample are
      always kept, and all samples when ``n ≤ max_points``.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    n = v.shape[0]
    max_points = max(int(max_points), 4)
    if n <= max_points:
        return np.arange(n)
    k = v.shape[1]
    per_bucket = 1 + 2 * k
    nb = max((max_points - 2) // per_bucket, 1)
    edges = np.linspace(0, n, nb + 1).astype(np.int64)
    keep = [np.array([0, n - 1])]
    filled = np.where(np.isfinite(v), v, 0.0)
    for b in range(nb):
        a, e = int(edges[b]), int(edges[b + 1])
        if e <= a:
            continue
        seg = filled[a:e]
        keep.append(np.array([a]))
        keep.append(a + np.argmin(seg, axis=0))
        keep.append(a + np.argmax(seg, axis=0))
    return np.unique(np.concatenate(keep))
