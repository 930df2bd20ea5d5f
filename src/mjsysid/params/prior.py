"""A Gaussian prior on a parameter: what is known before the data (a CAD value, a datasheet).

A :class:`Prior` holds a mean and a standard deviation per entry of its parameter. A fit
with priors is a maximum a-posteriori (MAP) fit: it minimises

    ½‖r(θ)‖² + ½ Σ_i ((θ_i − μ_i)/σ_i)²

that is, the residual gains one row ``(θ_i − μ_i)/σ_i`` per entry with a prior
(:mod:`mjsysid.fit.prior`). For a Gaussian noise of unit variance on the data rows this is
the posterior mode; the intervals then include the prior (Tarantola, *Inverse Problem Theory*,
SIAM 2005, §3.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from mjsysid.util.errors import must_be

__all__ = ["Prior", "as_prior"]

_KEYS = ("mean", "std")


def _vector(what: str, value: Any, size: int) -> np.ndarray:
    """``value`` (a number, or ``size`` numbers) as a read-only ``(size,)`` float array."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raw = np.asarray(None)
    if (
        raw.dtype.kind not in "iuf"
        or isinstance(value, bool | np.bool_)
        or (isinstance(value, list | tuple) and any(isinstance(v, bool) for v in value))
    ):
        raise ValueError(must_be(what, "a number or a list of numbers", value))
    arr = raw.astype(np.float64).reshape(-1)
    if raw.ndim > 1 or arr.size not in (1, size):
        raise ValueError(must_be(what, f"a number or {size} numbers (one per entry)", value))
    out = np.broadcast_to(arr, (size,)).copy()
    out.setflags(write=False)
    return cast(np.ndarray, out)


@dataclass(frozen=True, eq=False)
class Prior:
    """A Gaussian prior ``N(mean, std²)`` on each entry of a parameter.

    Attributes:
      mean: ``(size,)`` prior means, finite (in the parameter's SI units).
      std: ``(size,)`` prior standard deviations, finite and ``> 0`` (same units).

    Build one with :func:`as_prior`, which checks the values; both arrays are read-only.
    """

    mean: np.ndarray
    std: np.ndarray

    @property
    def size(self) -> int:
        return int(self.mean.size)

    def to_dict(self) -> dict[str, list[float]]:
        """``{"mean": [...], "std": [...]}`` (plain lists, as saved in a parameter file)."""
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Prior)
            and np.array_equal(self.mean, other.mean)
            and np.array_equal(self.std, other.std)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Prior(mean={self.mean.tolist()}, std={self.std.tolist()})"


def as_prior(value: Any, size: int, where: str, nominal: np.ndarray | None = None) -> Prior | None:
    """``value`` as a checked :class:`Prior` for a parameter of ``size`` entries.

    Args:
      value: ``None`` (no prior), a :class:`Prior`, a mapping ``{"mean": ..., "std": ...}``
        (``mean`` may be left out when ``nominal`` is given: the prior is then centred on the
        nominal value) or a pair ``(mean, std)``. Each of ``mean`` and ``std`` is a number
        (the same for every entry) or ``size`` numbers.
      size: Entries of the parameter.
      where: Start of the error messages (``"parameter 'b'"``).
      nominal: ``(size,)`` the parameter's nominal value, the default mean.

    Raises:
      ValueError: A wrong structure, an unknown key, a non-finite mean, a ``std`` that is not
        finite and ``> 0``, or a size that is neither 1 nor ``size``.
    """
    if value is None:
        return None
    if isinstance(value, Prior):
        mean, std = value.mean, value.std
    elif isinstance(value, Mapping):
        unknown = sorted(set(value) - set(_KEYS), key=str)
        if unknown:
            raise ValueError(f"{where}: prior has unknown keys {unknown}; allowed: {list(_KEYS)}")
        if "std" not in value:
            raise ValueError(f"{where}: prior needs a 'std' (the prior's standard deviation)")
        if "mean" not in value and nominal is None:
            raise ValueError(f"{where}: prior needs a 'mean' (the value expected before the data)")
        mean, std = value.get("mean", nominal), value["std"]
    elif isinstance(value, tuple | list) and len(value) == 2:
        mean, std = value
    else:
        raise ValueError(
            must_be(
                f"{where}: prior", "a Prior, a mapping {mean, std} or a pair (mean, std)", value
            )
        )
    m = _vector(f"{where}: prior.mean", mean, size)
    s = _vector(f"{where}: prior.std", std, size)
    if not np.all(np.isfinite(m)):
        raise ValueError(must_be(f"{where}: prior.mean", "finite", m.tolist()))
    bad = ~(np.isfinite(s) & (s > 0))
    if np.any(bad):
        raise ValueError(
            must_be(
                f"{where}: prior.std",
                "finite and > 0",
                s.tolist(),
                "a parameter known exactly is frozen at that value instead",
            )
        )
    return Prior(m, s)
