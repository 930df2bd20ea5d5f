"""Parameters of force laws, declared like any kind (``meta.kind == "law:<law>"``).

A law's parameters have no model modifier: their values per candidate go to the law (see
:mod:`mjsysid.sim.lockstep`). Their ``meta`` holds the law's :meth:`config`, so a saved
parameter file alone rebuilds the laws (:func:`laws_from_params`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from mjsysid.params.parameter import KindBinding, Parameter, ParameterDict, register_kind
from mjsysid.sim.force_laws import LAWS, ForceLaw, law_from_config


def parameter_name(law: ForceLaw, key: str) -> str:
    """The full name of parameter ``key`` of ``law``: ``f"{law.name}_{key}"``."""
    return f"{law.name}_{key}"


def force_law_params(
    law: ForceLaw,
    nominal: Mapping[str, npt.ArrayLike],
    *,
    min_value: Mapping[str, npt.ArrayLike] | None = None,
    max_value: Mapping[str, npt.ArrayLike] | None = None,
    frozen: Iterable[str] = (),
) -> list[Parameter]:
    """The parameters of ``law``, one per entry of ``law.parameters``.

    Args:
      law: The force law.
      nominal: ``{parameter: value}`` (a scalar is repeated to the parameter's size).
      min_value, max_value: Bounds by parameter (default ``0`` and ``+inf``: friction,
        damping, drag and gains are non-negative).
      frozen: Parameters kept fixed.

    Raises:
      KeyError: A nominal is missing, or a key names no parameter of the law.
    """
    sizes = dict(law.parameters)
    unknown = sorted(set(nominal) - set(sizes))
    missing = sorted(set(sizes) - set(nominal))
    if unknown or missing:
        raise KeyError(
            f"force law {law.name!r}: nominal values needed for {sorted(sizes)}; "
            f"missing {missing}, unknown {unknown}"
        )
    lo, hi, fixed = dict(min_value or {}), dict(max_value or {}), set(frozen)
    config = law.config()
    out = []
    for key, n in sizes.items():
        meta = {"kind": f"law:{config['law']}", "target": law.name, "field": key, "law": config}
        out.append(
            Parameter(
                parameter_name(law, key),
                np.broadcast_to(np.asarray(nominal[key], float), (n,)).copy(),
                np.broadcast_to(np.asarray(lo.get(key, 0.0), float), (n,)).copy(),
                np.broadcast_to(np.asarray(hi.get(key, np.inf), float), (n,)).copy(),
                frozen=key in fixed,
                meta=meta,
            )
        )
    return out


def is_law_param(p: Parameter) -> bool:
    """Whether ``p`` is a force law's parameter."""
    kind = p.meta.get("kind")
    return isinstance(kind, str) and kind.startswith("law:")


def laws_from_params(params: ParameterDict) -> list[ForceLaw]:
    """The laws described by the law parameters of ``params``, in first-seen order."""
    laws: dict[str, ForceLaw] = {}
    for p in params.values():
        if is_law_param(p) and p.meta["target"] not in laws:
            laws[p.meta["target"]] = law_from_config(p.meta["law"])
    return list(laws.values())


def law_values(law: ForceLaw, params: ParameterDict) -> dict[str, np.ndarray]:
    """``{parameter: (1, size)}`` current values of ``law``'s parameters in ``params``."""
    return {k: params[parameter_name(law, k)].value[None] for k in law.parameters}


def _bind(p: Parameter) -> None:
    p.modifier = None
    p.model_modifier = None


for _law in LAWS:
    register_kind(f"law:{_law}", KindBinding("force law", _bind))
