"""Identifiability audit: what a Jacobian says about which parameters the data determine.

With ``n`` residuals and ``p`` parameters, ``J = ∂r/∂θ`` ``(n, p)`` is scaled by the
parameter ranges, ``J_s = J D`` with ``D = diag(u_i − l_i)`` (``max(|θ_i|, 1)`` where a bound
is infinite), so that a unit step along a column is a move across the whole range. Its thin
SVD ``J_s = U S Vᵀ`` gives

* the singular values ``s_1 ≥ … ≥ s_p`` and the condition number ``κ = s_1/s_p``;
* the weak directions: right singular vectors ``v_k`` with ``s_k < rtol·s_1`` (structurally
  undetermined) or whose expected 95 % half-width along ``v_k``, ``t·σ/s_k``, exceeds half the
  range (practically undetermined at the noise level ``σ``);
* the expected intervals: the covariance at the noise level, from
  :func:`~mjsysid.fit.intervals.calculate_intervals` with ``noise_variance = σ²``.

A weak direction's physical step is ``δθ = D v``. When its large entries have equal magnitude
in ``θ`` the data see only a sum or a difference of the parameters (opposite signs: ``a + b``
is determined, same signs: ``a − b``); when they have equal magnitude in ``log θ`` (the
columns scaled by the values, ``J diag(θ)``) only a product or a ratio (opposite signs in
``δ log θ``: ``a·b``; same signs: ``a/b``). Reference: Raue et al., "Structural and practical
identifiability analysis", Bioinformatics 25 (2009); Ljung, System Identification, §13.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import numpy.typing as npt
import scipy.stats

from mjsysid.fit.intervals import calculate_intervals
from mjsysid.objective.initial_state import nuisance_mask
from mjsysid.util.errors import must_be
from mjsysid.util.mujoco_log import quietly

__all__ = [
    "Audit",
    "Combination",
    "ParameterAudit",
    "audit_jacobian",
    "audit_residual",
    "name_direction",
    "noise_from_residual",
    "parameter_scales",
]


@dataclass(frozen=True)
class ParameterAudit:
    """One parameter's line of the audit.

    Attributes:
      name: Parameter name. value: Its value at the audit point.
      sensitivity: Relative sensitivity ``‖J_:,i‖·|θ_i|/√n``: the RMS change of the residual
        for a 100 % change of the parameter (residual units).
      half_width: Expected ``(1 − α)`` half-width at the noise level (``inf``: undetermined).
      scale: The range ``u − l`` (or ``max(|θ|, 1)``) the determined test compares with.
      determined: Whether the data determine it (finite interval narrower than the range and
        no large component in a weak direction).
    """

    name: str
    value: float
    sensitivity: float
    half_width: float
    scale: float
    determined: bool


@dataclass(frozen=True)
class Combination:
    """A weak direction, named.

    Attributes:
      ratio: ``s_k/s_1``. kind: ``"sum"``, ``"difference"``, ``"product"``, ``"ratio"`` or
        ``"weighted"``. names: Its parameters (component ``≥ weight``), largest first.
      weights: Their components of the weak direction in unit-norm column coordinates.
      text: In words.
    """

    ratio: float
    kind: str
    names: list[str]
    weights: list[float]
    text: str


_SHOWN_VALUES = 12  # singular values listed when the initial states are summed up


@dataclass(frozen=True)
class Audit:
    """The audit of one Jacobian (see the module docstring).

    Attributes:
      singular_values: ``(p,)`` of the range-scaled Jacobian, largest first.
      condition: ``s_1/s_p`` (``inf`` with a zero singular value).
      parameters: One :class:`ParameterAudit` per column.
      combinations: The weak directions, named.
      advice: Sentences: what to freeze, tie or excite more.
      noise: The residual noise level ``σ`` used (residual units).
      nuisance: The names of the initial states among the parameters (window starts of
        multiple shooting): :meth:`lines` sums them up instead of listing them.
    """

    singular_values: np.ndarray
    condition: float
    parameters: list[ParameterAudit]
    combinations: list[Combination]
    advice: list[str] = field(default_factory=list)
    noise: float = 0.0
    nuisance: frozenset[str] = frozenset()

    @property
    def n_determined(self) -> int:
        """How many parameters are determined."""
        return sum(p.determined for p in self.parameters)

    def summary(self) -> str:
        """``'12 of 14 parameters determined (condition number 3.2e+04)'``."""
        return (
            f"{self.n_determined} of {len(self.parameters)} parameters determined "
            f"(condition number {self.condition:.3g})"
        )

    def lines(self, every: bool = False) -> list[str]:
        """The whole audit as text lines (the command line prints them).

        With initial states among the parameters (:attr:`nuisance`) and not ``every``: the
        physics in full, the initial states summed up (how many are determined, how many
        weak combinations they form among themselves): the window starts of multiple
        shooting outnumber the physics and trade position against velocity within their
        windows, which tells nothing about the physics."""
        hidden = set() if every else set(self.nuisance)
        shown = [p for p in self.parameters if p.name not in hidden]
        combos = [c for c in self.combinations if not set(c.names) <= hidden]
        if hidden:
            starts = len(self.parameters) - len(shown)
            starts_determined = sum(p.determined for p in self.parameters if p.name in hidden)
            head = (
                f"{sum(p.determined for p in shown)} of {len(shown)} physical parameters "
                f"determined, and {starts_determined} of {starts} initial states (condition "
                f"number {self.condition:.3g})"
            )
        else:
            head = self.summary()
        out = [head, f"noise level (residual units): {self.noise:.3g}"]
        values = [f"{s:.3g}" for s in self.singular_values]
        if hidden and len(values) > _SHOWN_VALUES:
            values = [
                *values[: _SHOWN_VALUES - 1],
                f"... {values[-1]} (the smallest; {len(values)} in all)",
            ]
        out.append("singular values (range-scaled): " + " ".join(values))
        out.append(f"{'parameter':<28} {'value':>11} {'rel. sens.':>11} {'95% ±':>11}  status")
        for p in shown:
            status = "determined" if p.determined else "NOT determined"
            out.append(
                f"{p.name:<28} {p.value:>11.4g} {p.sensitivity:>11.3g} {p.half_width:>11.3g}"
                f"  {status}"
            )
        out += [f"weak: {c.text}" for c in combos]
        if hidden:
            out.append(
                f"initial states: {starts} left out of the table "
                f"and {len(self.combinations) - len(combos)} weak combinations among them "
                "alone (a window's start position and velocity traded off within the window: "
                "nothing about the physics); mjsysid audit --all lists them"
            )
            out += [f"advice: {a}" for a in _advice(shown, combos)]
        else:
            out += [f"advice: {a}" for a in self.advice]
        return out


def parameter_scales(
    values: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike
) -> np.ndarray:
    """``(p,)`` column scales: ``u − l`` where both bounds are finite and apart, else
    ``max(|θ|, 1)``."""
    x, lo, hi = (np.asarray(a, dtype=np.float64) for a in (values, lower, upper))
    span = hi - lo
    ok = np.isfinite(span) & (span > 0)
    return np.where(ok, np.where(ok, span, 1.0), np.maximum(np.abs(x), 1.0))


def noise_from_residual(residual: npt.ArrayLike, n_columns: int = 1) -> float:
    """Robust white-noise level of a residual, ``(n,)`` in rows of ``n_columns``.

    The residual is reshaped to ``(n/n_columns, n_columns)`` (time × channel) and each column
    differenced twice: a smooth model error cancels, white noise of std ``σ`` gives
    ``std(Δ²e) = √6·σ``. Estimated with the median absolute deviation,
    ``σ ≈ 1.4826·median|Δ²e|/√6`` (pooled over columns).
    """
    r = np.asarray(residual, dtype=np.float64).reshape(-1)
    if n_columns < 1 or r.size % n_columns or r.size // n_columns < 4:
        raise ValueError(must_be("residual", f"at least 4 rows of {n_columns} columns", r.size))
    d2 = np.diff(r.reshape(-1, n_columns), n=2, axis=0)
    return float(1.4826 * np.median(np.abs(d2)) / math.sqrt(6.0))


def _weak(s: np.ndarray, noise: float, tval: float, rtol: float) -> np.ndarray:
    """Indices of the weak singular directions (structural or at the noise level)."""
    s1 = float(s[0]) if s.size else 0.0
    structural = s <= rtol * s1
    with np.errstate(divide="ignore"):
        practical = (tval * noise / np.where(s > 0, s, 0.0)) > 0.5 if noise > 0 else structural
    return np.flatnonzero(structural | practical)


def _name(u: np.ndarray, step: np.ndarray, x: np.ndarray, weight: float) -> tuple[str, list[int]]:
    """``(kind, members)`` of a weak direction: ``u`` in unit-norm column coordinates (its
    members are the components ``≥ weight``), ``step`` the physical step ``δθ``.

    Two members with ``|δθ_a| = |δθ_b|`` (within 10 %) are a sum (opposite signs) or a
    difference; with ``|δθ_a/θ_a| = |δθ_b/θ_b|`` a product (opposite signs) or a ratio.
    """
    members = [int(i) for i in np.argsort(-np.abs(u)) if abs(u[i]) >= weight]
    if len(members) < 2:
        return "single", members or [int(np.argmax(np.abs(u)))]
    if len(members) > 2:
        return "weighted", members
    d = step[members]
    if not np.all(d != 0):
        return "weighted", members
    spread_lin = 1.0 - np.min(np.abs(d)) / np.max(np.abs(d))
    spread_log = 1.0
    if np.all(x[members] != 0):
        dl = d / x[members]
        spread_log = 1.0 - np.min(np.abs(dl)) / np.max(np.abs(dl))
    if min(spread_lin, spread_log) >= 0.1:
        return "weighted", members
    if spread_log < spread_lin:
        return ("product" if dl[0] * dl[1] < 0 else "ratio"), members
    return ("sum" if d[0] * d[1] < 0 else "difference"), members


def _describe(kind: str, names: list[str], v: list[float]) -> str:
    """The combination in words."""
    if kind == "single":
        return f"{names[0]}: (almost) no effect on the residual"
    a, b = names[0], names[1] if len(names) > 1 else ""
    if kind == "sum":
        return f"{a} and {b}: only their sum is determined"
    if kind == "difference":
        return f"{a} and {b}: only their difference is determined"
    if kind == "product":
        return f"{a} x {b}: only their product is determined"
    if kind == "ratio":
        return f"{a} / {b}: only their ratio is determined"
    terms = " ".join(
        f"{'+' if w >= 0 else '-'} {abs(w):.2f}*{n}" for n, w in zip(names, v, strict=True)
    )
    return f"{', '.join(names)}: undetermined along {terms.lstrip('+ ')} (unit-scaled columns)"


def _unit_directions(
    Vt: np.ndarray, weak: np.ndarray, J: np.ndarray, scales: np.ndarray
) -> np.ndarray:
    """``(len(weak), p)`` the weak directions in unit-norm column coordinates.

    A range-scaled direction ``v`` is the physical step ``δθ = D v``; with ``N = diag(‖J_:,i‖)``
    it is ``u = N δθ/‖N δθ‖`` for the unit-norm columns ``J N⁻¹``: the same null space, with
    components that do not depend on the units or ranges (parallel columns give ``±1/√2``).
    """
    norms = np.linalg.norm(J, axis=0)
    norms = np.maximum(norms, 1e-12 * max(float(norms.max(initial=0.0)), 1e-300))
    U = Vt[weak] * scales * norms
    U = U / np.maximum(np.linalg.norm(U, axis=1, keepdims=True), 1e-300)
    return cast(
        np.ndarray,
        U * np.where(U[np.arange(len(U)), np.argmax(np.abs(U), axis=1)] >= 0, 1.0, -1.0)[:, None],
    )


def _combinations(
    U: np.ndarray,
    Vt: np.ndarray,
    s: np.ndarray,
    weak: np.ndarray,
    scales: np.ndarray,
    x: np.ndarray,
    names: Sequence[str],
    weight: float,
) -> list[Combination]:
    s1 = float(s[0]) if s.size and s[0] > 0 else 1.0
    return [
        name_direction(U[row], Vt[k] * scales, x, names, float(s[k]) / s1, weight)
        for row, k in enumerate(weak)
    ]


def name_direction(
    u: np.ndarray,
    step: np.ndarray,
    x: np.ndarray,
    names: Sequence[str],
    ratio: float,
    weight: float = 0.3,
) -> Combination:
    """A weak direction as a named :class:`Combination` (a sum, difference, product, ratio
    or weighted combination; see the module docstring).

    Args:
      u: ``(p,)`` the direction in unit-norm column coordinates (members: ``|u_i| ≥ weight``).
      step: ``(p,)`` the physical step ``δθ`` along it. x: ``(p,)`` the parameter values.
      names: ``p`` parameter names. ratio: Its ``s_k/s_1`` (kept as given).
      weight: Smallest component of a member.
    """
    kind, members = _name(u, step, x, weight)
    nm = [names[i] for i in members]
    w = [float(u[i]) for i in members]
    return Combination(float(ratio), kind, nm, w, _describe(kind, nm, w))


def _tie_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """Name pairs that differ only by left/right (``l``/``r``, ``left``/``right``)."""
    pairs = []
    for a in names:
        for old, new in (("left", "right"), ("_l_", "_r_"), ("l_", "r_"), ("_l", "_r")):
            if old in a and a.replace(old, new, 1) in names:
                pairs.append((a, a.replace(old, new, 1)))
                break
    return pairs


def _advice(params: list[ParameterAudit], combos: list[Combination]) -> list[str]:
    """Freeze the parameters without effect; tie left/right pairs; excite the weak ones."""
    out = []
    in_combo = {n for c in combos if c.kind != "single" for n in c.names}
    for c in combos:
        if c.kind == "single":
            out.append(
                f"freeze {c.names[0]} (fix it at its nominal value) or excite what it acts on "
                "(its joint or actuator) more"
            )
        elif c.kind in ("sum", "difference", "product", "ratio"):
            out.append(
                f"freeze one of {c.names[0]} and {c.names[1]} (the data determine only their "
                f"{c.kind}), or add an experiment that separates them"
            )
        else:
            out.append(f"freeze all but one of {', '.join(c.names)}, or excite them differently")
    undet = [p.name for p in params if not p.determined and p.name not in in_combo]
    singles = {c.names[0] for c in combos if c.kind == "single"}
    for name in undet:
        if name not in singles:
            out.append(
                f"{name}: its interval is wider than its range; excite it more "
                "(larger or broader commands on its joint or actuator) or freeze it"
            )
    names = [p.name for p in params]
    for a, b in _tie_pairs(names):
        if a in in_combo or b in in_combo:
            out.append(f"tie {a} and {b} (left/right) into one parameter")
    return out


def audit_jacobian(
    jac: npt.ArrayLike,
    names: Sequence[str],
    values: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    *,
    noise: float = 0.0,
    alpha: float = 0.05,
    rtol: float = 1e-3,
    weight: float = 0.3,
) -> Audit:
    """Audits the identifiability of ``p`` parameters from their Jacobian.

    Args:
      jac: ``(n, p)`` Jacobian of the residual, ``n > p``.
      names: ``p`` parameter names. values: ``(p,)`` the audit point.
      lower, upper: ``(p,)`` bounds (the column scales, :func:`parameter_scales`).
      noise: Residual noise std ``σ`` (residual units, ``≥ 0``; 0: structural audit only,
        the intervals are then 0 for the determined parameters).
      alpha: ``1 − alpha`` intervals (0.05: 95 %).
      rtol: Singular values below ``rtol·s_1`` are structurally weak.
      weight: A parameter belongs to a weak direction when its component is at least this.

    Returns:
      The :class:`Audit`.
    """
    J = np.asarray(jac, dtype=np.float64)
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if J.ndim != 2 or J.shape[1] != len(names) or x.size != len(names):
        raise ValueError(
            must_be(
                "jac",
                f"shape (n, {len(names)}) with one value per name",
                J,
                hint=f"got shape {J.shape}",
            )
        )
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(must_be("noise", "finite and >= 0", noise))
    n, p = J.shape
    scales = parameter_scales(x, lower, upper)
    s, Vt = np.linalg.svd(J * scales, full_matrices=False)[1:]
    cond = float(s[0] / s[-1]) if s[-1] > 0 else math.inf
    tval = float(scipy.stats.t.ppf(1 - alpha / 2, max(n - p, 1)))
    weak = _weak(s, noise, tval, rtol)
    U = _unit_directions(Vt, weak, J, scales)
    combos = _combinations(U, Vt, s, weak, scales, x, names, weight)
    params = _parameter_rows(J, names, x, scales, _half_widths(J, noise, alpha), U, weight)
    return Audit(s, cond, params, combos, _advice(params, combos), float(noise))


def _parameter_rows(
    J: np.ndarray,
    names: Sequence[str],
    x: np.ndarray,
    scales: np.ndarray,
    half: np.ndarray,
    U: np.ndarray,
    weight: float,
) -> list[ParameterAudit]:
    """One :class:`ParameterAudit` per column: determined when its interval is finite and
    narrower than its range and it has no component ``≥ weight`` in a weak direction."""
    in_weak = np.zeros(len(names), dtype=bool)
    for u in U:
        in_weak |= np.abs(u) >= weight
    sens = np.linalg.norm(J, axis=0) * np.abs(x) / math.sqrt(J.shape[0])
    return [
        ParameterAudit(
            names[i],
            float(x[i]),
            float(sens[i]),
            float(half[i]),
            float(scales[i]),
            bool(np.isfinite(half[i]) and 2 * half[i] < scales[i] and not in_weak[i]),
        )
        for i in range(len(names))
    ]


def _half_widths(J: np.ndarray, noise: float, alpha: float) -> np.ndarray:
    """Expected half-widths at the noise level (0 for ``noise == 0``, inf where undetermined)."""
    n, p = J.shape
    if n <= p or not np.all(np.isfinite(J)):
        return np.full(p, math.inf)
    if np.any(np.linalg.norm(J, axis=0) == 0):
        zero = np.linalg.norm(J, axis=0) == 0
        out = np.full(p, math.inf)
        if np.any(~zero):
            out[~zero] = _half_widths(J[:, ~zero], noise, alpha)
        return out
    var = noise**2 if noise > 0 else 1.0
    _, half = calculate_intervals(np.zeros(n), J, alpha, noise_variance=var, rtol=1e-10)
    return half if noise > 0 else np.where(np.isfinite(half), 0.0, math.inf)


@quietly
def audit_residual(
    residual_fn: object,
    params: object,
    *,
    noise: float | None = None,
    n_columns: int = 1,
    alpha: float = 0.05,
    rtol: float = 1e-3,
    eps: float = 1e-6,
) -> Audit:
    """Audits a residual function at ``params``' current values (one batched call: the residual
    and its FD Jacobian).

    Args:
      residual_fn: ``residual_fn(x, params)``, batched (:func:`mjsysid.build_residual_fn`).
      params: The :class:`~mjsysid.params.parameter.ParameterDict` (its current values are
        the audit point).
      noise: Residual noise std (residual units); ``None``: estimated from the residual at
        the point (:func:`noise_from_residual` with ``n_columns``).
      n_columns: Channels per time row of the residual (for the noise estimate).
      alpha, rtol: As in :func:`audit_jacobian`. eps: Relative FD step.

    Raises:
      ValueError: The residual is not finite at the point (the entry is named).
    """
    from mjsysid.fit.jacobian import describe_nonfinite, residual_and_jacobian, residual_array

    x = params.as_vector()  # type: ignore[attr-defined]
    lo, hi = params.get_bounds()  # type: ignore[attr-defined]

    def residual(X: np.ndarray) -> np.ndarray:
        return residual_array(residual_fn(X, params))  # type: ignore[operator]

    r0, J = residual_and_jacobian(residual, x, (lo, hi), eps=eps)
    if not np.all(np.isfinite(r0)):
        raise ValueError(
            f"audit_residual: the residual must be finite at the parameters' values, got a "
            f"non-finite value at {describe_nonfinite(residual_fn, r0)}; check the data and "
            f"the parameter values"
        )
    if noise is None:
        cols = n_columns if r0.size % max(n_columns, 1) == 0 else 1
        noise = noise_from_residual(r0, cols)
    names = params.get_non_frozen_parameter_names()  # type: ignore[attr-defined]
    audit = audit_jacobian(J, names, x, lo, hi, noise=noise, alpha=alpha, rtol=rtol)
    starts = nuisance_mask(params)  # type: ignore[arg-type]
    return dataclasses.replace(
        audit, nuisance=frozenset(n for n, is_start in zip(names, starts, strict=True) if is_start)
    )
