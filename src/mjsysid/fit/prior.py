"""MAP fits: the priors of the free parameters as extra residual rows.

A free entry ``θ_i`` with a Gaussian prior ``N(μ_i, σ_i²)`` (:attr:`Parameter.prior
<mjsysid.params.parameter.Parameter.prior>`) adds the row ``(θ_i − μ_i)/σ_i`` to the residual,
so that least squares minimises ``½‖r(θ)‖² + ½ Σ_i ((θ_i − μ_i)/σ_i)²``, the negative log
posterior for unit-variance data residuals (Tarantola, *Inverse Problem Theory*, SIAM 2005,
§3.2). The rows are linear in ``θ``: their Jacobian is ``diag(1/σ_i)`` on the prior entries,
which finite differences reproduce exactly. A parameter the data cannot determine (a zero
Jacobian column, or a combination of parameters only) is held by its prior: it stays at
``μ_i`` with the prior's standard deviation.

:func:`with_prior` wraps a residual function; :func:`~mjsysid.fit.optimize.optimize` does
it whenever a free parameter has a prior and records the rows in ``result.extras["prior"]``
(:meth:`PriorRows.to_dict`), which :func:`~mjsysid.fit.confidence.compute_confidence` reads:
the prior rows are unit-variance, not part of the noise estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from mjsysid.fit.jacobian import residual_array
from mjsysid.objective.levels import LevelBracket
from mjsysid.objective.protocols import (
    DescribedResidualFn,
    HeadRowsResidualFn,
    HorizonResidualFn,
    ResidualFn,
    ThresholdResidualFn,
)
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

__all__ = [
    "PriorHorizonResidual",
    "PriorResidual",
    "PriorRows",
    "append_prior_group",
    "prior_rows",
    "with_prior",
]


@dataclass(frozen=True, eq=False)
class PriorRows:
    """The prior rows of a MAP fit, one per free entry with a prior.

    Attributes:
      columns: ``(m,)`` index of each row's entry in the optimizer vector ``x``.
      mean, std: ``(m,)`` the prior's mean and standard deviation of that entry.
      names: ``m`` labels (``name`` or ``name[i]``, as ``parameter_names``).
    """

    columns: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    names: list[str]

    @property
    def size(self) -> int:
        return int(self.columns.size)

    def residual(self, X: np.ndarray) -> np.ndarray:
        """``(m, k)`` rows ``(X[c] − μ)/σ`` of ``k`` candidates ``X`` of shape ``(p, k)``."""
        return cast(np.ndarray, (X[self.columns] - self.mean[:, None]) / self.std[:, None])

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``result.extras["prior"]``, ``result.yaml``)."""
        return {
            "columns": [int(c) for c in self.columns],
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "names": list(self.names),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PriorRows:
        """The inverse of :meth:`to_dict`.

        Raises:
          ValueError: Missing keys or arrays of different lengths.
        """
        try:
            out = cls(
                np.asarray(data["columns"], dtype=np.intp).reshape(-1),
                np.asarray(data["mean"], dtype=np.float64).reshape(-1),
                np.asarray(data["std"], dtype=np.float64).reshape(-1),
                [str(n) for n in data["names"]],
            )
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                must_be("prior rows", "a mapping of columns, mean, std and names", data)
            ) from None
        if not (out.columns.size == out.mean.size == out.std.size == len(out.names)):
            raise ValueError(must_be("prior rows", "arrays of one length", data))
        return out


def prior_rows(params: ParameterDict) -> PriorRows | None:
    """The rows of the free parameters' priors, in vector order (``None`` when none has one)."""
    columns: list[int] = []
    mean: list[float] = []
    std: list[float] = []
    names: list[str] = []
    i = 0
    for p in params.non_frozen():
        if p.prior is not None:
            columns.extend(range(i, i + p.size))
            mean.extend(p.prior.mean.tolist())
            std.extend(p.prior.std.tolist())
            names.extend([p.name] if p.size == 1 else [f"{p.name}[{k}]" for k in range(p.size)])
        i += p.size
    if not columns:
        return None
    return PriorRows(np.asarray(columns, dtype=np.intp), np.asarray(mean), np.asarray(std), names)


class PriorResidual:
    """``residual_fn`` with the prior rows appended: ``(p, k) -> (n + m, k)``, ``(p,) ->
    (n + m,)``.

    It is a :class:`~mjsysid.objective.protocols.DescribedResidualFn`: what a fit asks of the
    wrapped function (``check_params``, ``last_divergence``, ``block_offsets``) is answered by
    it when it says (else a neutral answer); :meth:`signal_groups` gives the prior rows a
    group of their own and :meth:`describe_index` names them.
    """

    def __init__(self, residual_fn: ResidualFn, rows: PriorRows) -> None:
        self.inner = residual_fn
        self.rows = rows
        self.data_size: int | None = None  # the wrapped residual's n, from the first call

    def __call__(self, x: np.ndarray, params: ParameterDict) -> np.ndarray:
        X = np.asarray(x, dtype=np.float64)
        flat = X.ndim == 1
        X2 = X[:, None] if flat else X
        r = residual_array(self.inner(X2, params))
        if r.ndim == 1:
            r = r[:, None]
        self.data_size = int(r.shape[0])
        out = np.concatenate([r, self.rows.residual(X2)], axis=0)
        return out[:, 0] if flat else out

    # -- DescribedResidualFn: what the intervals and the reports read -----------------------
    @property
    def described(self) -> DescribedResidualFn | None:
        """The wrapped function, when it says where its entries come from."""
        return self.inner if isinstance(self.inner, DescribedResidualFn) else None

    @property
    def last_divergence(self) -> list[str]:
        inner = self.described
        return list(inner.last_divergence) if inner is not None else []

    @property
    def block_offsets(self) -> np.ndarray:
        """The wrapped function's blocks (one block without them); the prior rows after the
        last block belong to none."""
        inner = self.described
        if inner is not None:
            return np.asarray(inner.block_offsets)
        return np.array([0, self.data_size or 0], dtype=np.int64)

    def check_params(self, params: ParameterDict) -> None:
        inner = self.described
        if inner is not None:
            inner.check_params(params)

    def signal_groups(self) -> np.ndarray | None:
        """``(n + m,)`` labels: the wrapped function's (or one group for all data rows when it
        has none), then one more for the prior rows."""
        inner = self.described
        groups = inner.signal_groups() if inner is not None else None
        return append_prior_group(groups, self.data_size, self.rows.size)

    def threshold_brackets(self, params: ParameterDict) -> list[LevelBracket]:
        """The wrapped function's command thresholds (none when it has none to tell:
        :class:`~mjsysid.objective.protocols.ThresholdResidualFn`)."""
        inner = self.inner
        return (
            list(inner.threshold_brackets(params)) if isinstance(inner, ThresholdResidualFn) else []
        )

    def describe_index(self, i: int) -> str:
        n = self.data_size
        if n is not None and i >= n:
            return f"the prior on {self.rows.names[i - n]}"
        inner = self.described
        return inner.describe_index(i) if inner is not None else f"entry {i}"

    def __repr__(self) -> str:
        return f"PriorResidual({self.inner!r}, priors on {self.rows.names})"


class PriorHorizonResidual(PriorResidual):
    """A :class:`PriorResidual` of a residual that can be fitted on growing horizons
    (:class:`~mjsysid.objective.protocols.HorizonResidualFn`): every head keeps the prior
    rows."""

    def __init__(self, residual_fn: HorizonResidualFn, rows: PriorRows) -> None:
        super().__init__(residual_fn, rows)
        self.horizon_fn = residual_fn

    def supports_horizons(self, params: ParameterDict | None = None) -> bool:
        return bool(self.horizon_fn.supports_horizons(params))

    def horizon_samples(self, fraction: float, params: ParameterDict | None = None) -> list[int]:
        return list(self.horizon_fn.horizon_samples(fraction, params))

    def head(self, fraction: float) -> PriorHorizonResidual:
        """The head of the wrapped residual, with the same prior rows."""
        head = self.horizon_fn.head(fraction)
        return self if head is self.horizon_fn else PriorHorizonResidual(head, self.rows)

    def head_rows(self, fraction: float) -> np.ndarray | None:
        """The wrapped residual's rows of its head (when it tells:
        :class:`~mjsysid.objective.protocols.HeadRowsResidualFn`), then the prior rows."""
        inner = self.horizon_fn
        rows = inner.head_rows(fraction) if isinstance(inner, HeadRowsResidualFn) else None
        if rows is None or self.data_size is None:
            return None
        return np.concatenate([rows, self.data_size + np.arange(self.rows.size)])


def append_prior_group(groups: Any, n: int | None, m: int) -> np.ndarray | None:
    """``(n + m,)`` integer labels: ``groups`` (``(n,)``, any labels; ``None``: one group)
    renumbered ``0, 1, ...``, then one new label for the ``m`` prior rows. ``None`` when
    ``n`` is unknown or ``groups`` does not have ``n`` entries."""
    if n is None:
        return None
    if groups is None:
        data = np.zeros(n, dtype=np.intp)
    else:
        g = np.asarray(groups)
        if g.ndim != 1 or g.size != n:
            return None
        data = np.unique(g, return_inverse=True)[1].reshape(-1).astype(np.intp)
    label = int(data.max()) + 1 if n else 0
    return np.concatenate([data, np.full(m, label, dtype=np.intp)])


def with_prior(residual_fn: ResidualFn, params: ParameterDict) -> ResidualFn:
    """``residual_fn`` with the prior rows of ``params``' free parameters, or ``residual_fn``
    itself when none has a prior (or it is wrapped already, or ``params`` is not a
    :class:`ParameterDict`: the fit reports that)."""
    if not isinstance(params, ParameterDict):
        return residual_fn
    rows = prior_rows(params)
    if rows is None or isinstance(residual_fn, PriorResidual):
        return residual_fn
    if isinstance(residual_fn, HorizonResidualFn):
        return PriorHorizonResidual(residual_fn, rows)
    return PriorResidual(residual_fn, rows)
