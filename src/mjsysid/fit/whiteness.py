"""Is the residual of a fit white? Durbin-Watson per signal, and a Newey-West (HAC) sandwich.

The linearised intervals assume independent residuals. A model that cannot reproduce the
data (missing physics, a simulation that drifts away over a long recording) leaves
residuals that stay correlated for many samples; a thousand samples then carry the
information of a few and those intervals are far too narrow.

**Durbin-Watson.** For one signal's residual series ``e_1 … e_T`` (time order)

    d = Σ_{t≥2} (e_t − e_{t−1})² / Σ_t e_t²,

``d ≈ 2(1 − ρ₁)`` with ``ρ₁`` the lag-1 autocorrelation: 2 for white noise, near 0 for a
residual dominated by a smooth misfit. ``Σ(Δe)²/2`` estimates the variance of the white
(sample-to-sample) part only (von Neumann), so ``2/d`` is the residual's variance over
that noise floor: :func:`noise_ratio`. Reference: Durbin & Watson, Biometrika 37 (1950);
von Neumann, Ann. Math. Statist. 12 (1941).

**HAC covariance.** With the scores ``g_t = Σ_c J_{t,c} r_{t,c}`` (``(p,)``, the rows of
one time step of one block summed), the Newey-West estimate of ``Var(Jᵀr)`` with a
Bartlett kernel of bandwidth ``L`` is, up to edge terms,

    S = Σ_blocks (1/L) Σ_t B_t B_tᵀ,   B_t = Σ_{s=t}^{t+L−1} g_s

(the Bartlett kernel is the autocorrelation of a box of width ``L``), scaled by
``T/(T − L + 1)`` for the windows lost at the end of a block; ``L = 1`` is White's
heteroscedasticity-consistent estimate. The covariance of the estimate is the sandwich
``H⁺ S H⁺``, ``H = JᵀJ`` (:func:`mjsysid.fit.intervals.calculate_intervals` with
``score_covariance``). ``L`` is Andrews' AR(1) plug-in for the Bartlett kernel,
``L = 1.1447 (α T)^{1/3}``, ``α = 4ρ²/((1 − ρ)²(1 + ρ)²)``, at most ``T/2``. References:
Newey & West, Econometrica 55 (1987); Andrews, Econometrica 59 (1991), §6.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mjsysid.objective.protocols import DescribedResidualFn
from mjsysid.util.errors import must_be

__all__ = [
    "DW_WHITE",
    "FAR_ABOVE_NOISE",
    "Whiteness",
    "durbin_watson",
    "hac_score_covariance",
    "residual_series",
    "whiteness",
]

DW_WHITE = 1.5  # Durbin-Watson below this (ρ₁ > 0.25): the residual is not white
FAR_ABOVE_NOISE = 10.0  # residual variance over the noise floor above this: far above it
_MAX_PERIOD = 4096  # columns of one time step looked for in a block's signal labels


@dataclass(frozen=True)
class Series:
    """The residual rows of one signal column of one block, in time order.

    Attributes:
      block: The block (sequence or window) index. label: The signal label (``-1``: unknown).
      rows: ``(T,)`` row indices into the residual.
    """

    block: int
    label: int
    rows: np.ndarray


@dataclass(frozen=True)
class Layout:
    """How the residual rows are laid out in time: per block, ``(T, P)`` row indices
    (``T`` time steps of ``P`` columns), and every column's signal label."""

    blocks: list[np.ndarray]
    labels: list[np.ndarray]
    names: dict[int, str] = field(default_factory=dict)

    def series(self) -> list[Series]:
        out = []
        for b, (rows, labels) in enumerate(zip(self.blocks, self.labels, strict=True)):
            out += [Series(b, int(labels[c]), rows[:, c]) for c in range(rows.shape[1])]
        return out


def _period(labels: np.ndarray) -> int:
    """The number of columns of one time step: the smallest period of ``labels``."""
    n = labels.size
    for p in range(1, min(n, _MAX_PERIOD) + 1):
        if n % p or (p < n and labels[p] != labels[0]):
            continue  # (cheap tests first: the full comparison is O(n))
        if np.array_equal(labels.reshape(-1, p), np.tile(labels[:p], (n // p, 1))):
            return p
    return 1


def residual_series(residual_fn: Any, n: int) -> Layout:
    """The time layout of an ``(n,)`` residual: blocks from ``block_offsets`` and columns
    from ``signal_groups`` of a :class:`~mjsysid.objective.protocols.DescribedResidualFn`
    (rows after the last block, the prior rows of a MAP fit, are left out). Without them,
    the whole residual is one series."""
    if not isinstance(residual_fn, DescribedResidualFn):
        return Layout([np.arange(n)[:, None]], [np.array([-1])])
    offsets = np.asarray(residual_fn.block_offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.size < 2 or offsets[0] != 0 or offsets[-1] > n:
        return Layout([np.arange(n)[:, None]], [np.array([-1])])
    groups = residual_fn.signal_groups()
    g = None if groups is None else np.asarray(groups)
    if g is not None and g.size < offsets[-1]:
        g = None
    blocks, labels = [], []
    for b0, b1 in itertools.pairwise(offsets):
        if b1 <= b0:
            continue
        lab = g[b0:b1] if g is not None else np.full(b1 - b0, -1)
        p = _period(lab) if g is not None else 1
        blocks.append(np.arange(b0, b1).reshape(-1, p))
        labels.append(lab[:p].astype(np.int64))
    return Layout(blocks, labels, _signal_names(residual_fn, offsets, g))


def _signal_names(residual_fn: Any, offsets: np.ndarray, g: np.ndarray | None) -> dict[int, str]:
    """``{label: name}`` from the residual function's description of the label's first row
    (``describe_index`` names the signal after ``signal``)."""
    if g is None:
        return {}
    labels, first = np.unique(g[: offsets[-1]], return_index=True)
    return {
        int(label): _named(str(residual_fn.describe_index(int(i)))) or str(label)
        for label, i in zip(labels, first, strict=True)
    }


def _named(text: str) -> str:
    """The word after ``signal`` in ``describe_index``'s text (``""`` when absent)."""
    words = text.replace(",", " ").replace("'", " ").split()
    for a, b in itertools.pairwise(words):
        if a == "signal":
            return b
    return ""


def durbin_watson(e: np.ndarray) -> float:
    """``Σ(Δe)² / Σe²`` of one series (module docstring); NaN for under 3 samples or a
    zero series."""
    e = np.asarray(e, dtype=np.float64).reshape(-1)
    den = float(e @ e)
    if e.size < 3 or not den > 0:
        return float("nan")
    d = np.diff(e)
    return float(d @ d) / den


@dataclass(frozen=True)
class Whiteness:
    """How white a fit's residual is.

    Attributes:
      durbin_watson: ``{signal: d}`` (rows of every block pooled: ``Σ(Δe)²/Σe²`` summed
        over the signal's series); 2 for white noise, near 0 for a smooth misfit.
      pooled: ``d`` of all series together.
      samples: Time steps of every block together.
      judged: ``False`` for an exact fit, whose residual is round-off (nothing to judge:
        it counts as white).
    """

    durbin_watson: dict[str, float]
    pooled: float
    samples: int
    judged: bool = True

    @property
    def white(self) -> bool:
        """Whether every signal's ``d`` is at least :data:`DW_WHITE` (NaN: not judged)."""
        return not self.judged or not any(d < DW_WHITE for d in self.durbin_watson.values())

    @property
    def noise_ratio(self) -> float:
        """The residual's variance over its white part, ``2/d`` pooled (1 for white noise)."""
        return noise_ratio(self.pooled)

    def worst(self, k: int = 3) -> list[tuple[str, float]]:
        """The ``k`` signals with the smallest ``d`` below :data:`DW_WHITE`."""
        bad = [(s, d) for s, d in self.durbin_watson.items() if d < DW_WHITE]
        return sorted(bad, key=lambda sd: sd[1])[:k]

    def text(self) -> str:
        """The worst signals' figures, in words."""
        shown = ", ".join(f"{s} {d:.2g}" for s, d in self.worst())
        return f"Durbin-Watson {shown} (2 is white)" if shown else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "durbin_watson": {s: float(d) for s, d in self.durbin_watson.items()},
            "pooled_durbin_watson": float(self.pooled),
            "white": bool(self.white),
            "noise_ratio": float(self.noise_ratio),
            "judged": bool(self.judged),
        }


def noise_ratio(d: float) -> float:
    """``2/d``: a residual's variance over its sample-to-sample (white) part."""
    return 2.0 / d if d > 0 else float("inf")


ROUNDOFF = 1e-12  # a cost below this share of the start's: an exact fit (noise-free data)


def whiteness(r: np.ndarray, layout: Layout, start_cost: float | None = None) -> Whiteness:
    """:class:`Whiteness` of residual ``r`` laid out as ``layout`` (:func:`residual_series`);
    not judged when ``½‖r‖²`` is below :data:`ROUNDOFF` of ``start_cost`` (an exact fit)."""
    r = np.asarray(r, dtype=np.float64)
    num: dict[int, float] = {}
    den: dict[int, float] = {}
    for s in layout.series():
        e = r[s.rows]
        d = np.diff(e)
        num[s.label] = num.get(s.label, 0.0) + float(d @ d)
        den[s.label] = den.get(s.label, 0.0) + float(e @ e)
    steps = sum(b.shape[0] for b in layout.blocks)
    per = {
        layout.names.get(k, "residual" if k < 0 else str(k)): (
            num[k] / den[k] if den[k] > 0 else float("nan")
        )
        for k in num
    }
    total_den = sum(den.values())
    pooled = sum(num.values()) / total_den if total_den > 0 else float("nan")
    exact = start_cost is not None and 0.5 * total_den <= ROUNDOFF * max(start_cost, 0.0)
    return Whiteness(per, pooled, steps, judged=not exact and total_den > 0)


def bandwidth(rho: float, T: int) -> int:
    """Andrews' AR(1) plug-in bandwidth of the Bartlett kernel for ``T`` steps (module
    docstring), in ``[1, T/2]``."""
    if not np.isfinite(rho) or T < 4:
        return 1
    rho = float(np.clip(rho, -0.999, 0.999))
    a = 4.0 * rho**2 / ((1.0 - rho) ** 2 * (1.0 + rho) ** 2)
    return int(np.clip(np.ceil(1.1447 * (a * T) ** (1.0 / 3.0)), 1, max(T // 2, 1)))


def hac_score_covariance(
    r: np.ndarray, J: np.ndarray, layout: Layout, lags: int | None = None
) -> tuple[np.ndarray, int]:
    """``(S, L)``: the Newey-West covariance ``(p, p)`` of ``Jᵀr`` (module docstring) and the
    bandwidth used (``lags``, or Andrews' plug-in from the pooled lag-1 autocorrelation of
    the block scores).

    Args:
      r: ``(n,)`` residual. J: ``(n, p)`` Jacobian. layout: From :func:`residual_series`.
      lags: Bandwidth ``L >= 1`` (default: the plug-in).
    """
    r = np.asarray(r, dtype=np.float64)
    J = np.asarray(J, dtype=np.float64)
    if r.ndim != 1 or J.shape[0] != r.size:
        raise ValueError(must_be("J", f"({r.size}, p) for a residual of {r.size} rows", J.shape))
    scores = [
        (J[rows.reshape(-1)] * r[rows.reshape(-1), None]).reshape(*rows.shape, -1).sum(axis=1)
        for rows in layout.blocks
    ]
    if lags is None:  # the most correlated signal's ρ₁: the widest bandwidth any needs
        dw = [d for d in whiteness(r, layout).durbin_watson.values() if np.isfinite(d)]
        rho = 1.0 - min(dw) / 2.0 if dw else 0.0
        lags = bandwidth(rho, max(s.shape[0] for s in scores))
    if isinstance(lags, bool) or not isinstance(lags, int | np.integer) or lags < 1:
        raise ValueError(must_be("lags", "an integer >= 1", lags))
    p = J.shape[1]
    S = np.zeros((p, p))
    for G in scores:
        T = G.shape[0]
        L = min(int(lags), max(T, 1))
        C = np.vstack([np.zeros((1, p)), np.cumsum(G, axis=0)])
        B = C[L:] - C[:-L]  # (T − L + 1, p) window sums
        S += (B.T @ B) * (T / (B.shape[0] * L))
    return S, int(lags)
