"""Checks of a fit's start: the free parameters, entry by entry, before any simulation."""

from __future__ import annotations

from typing import Any

import numpy as np

from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be


def _free_arrays(p: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(value, min_value, max_value)`` of a parameter as float arrays of its shape."""
    arrays = []
    for field_name in ("value", "min_value", "max_value"):
        arr = np.asarray(getattr(p, field_name))
        if arr.dtype.kind not in "iuf" or arr.shape != p.shape:
            raise ValueError(
                must_be(
                    f"initial_params: {p.name}.{field_name}",
                    f"a float array of shape {p.shape}",
                    arr,
                )
            )
        arrays.append(arr.astype(np.float64))
    return arrays[0], arrays[1], arrays[2]


def _check_entry(label: str, x: float, lo: float, hi: float) -> None:
    """One free entry: numeric bounds, ``lo < hi``, a finite start."""
    if np.isnan(lo) or np.isnan(hi):
        raise ValueError(
            f"initial_params: {label} must have bounds that are numbers (+-inf "
            f"allowed), got [{float(lo)!r}, {float(hi)!r}]; fix min_value/max_value"
        )
    if not lo < hi:
        fix = (
            "freeze it to keep it fixed (frozen: true in an experiment file, frozen=True in "
            "Python), or widen its bounds"
            if lo == hi
            else "fix the bounds"
        )
        raise ValueError(
            f"initial_params: {label} must have min_value < max_value to be "
            f"optimized, got [{float(lo)!r}, {float(hi)!r}]; {fix}"
        )
    if not np.isfinite(x):
        raise ValueError(
            f"initial_params: {label} must start at a finite value, got "
            f"{float(x)!r}; set its value (or call reset())"
        )


def _check_free_parameters(params: ParameterDict) -> None:
    """Checks what the optimizer will see of every non-frozen parameter, entry by entry.

    ``Parameter`` validates its bounds and nominal when it is created, but ``frozen``, the
    bound arrays and ``value`` can change afterwards (unfreezing a parameter whose bounds are
    equal, writing into ``p.min_value`` or ``p.value`` in place), and a backend handed such a
    point fails far from the cause (a MuJoCo ``FatalError`` for equal bounds, "converged"
    after 0 iterations, "x must be finite"). The error names the parameter, and the entry of
    a vector parameter. Checked for each entry: the bounds are numbers (``±inf`` allowed, not
    NaN), ``min_value < max_value``, the start is finite and within the bounds, and, for a
    kind with a physical lower limit (see :mod:`mjsysid.params.kinds`), ``min_value`` is not
    below it.
    """
    from mjsysid.params.kinds import KINDS  # local import: param_kinds builds on parameter

    for p in params.non_frozen():
        x, lo, hi = _free_arrays(p)

        def label(i: int, name: str = p.name, size: int = p.size) -> str:
            return name if size == 1 else f"{name}[{i}]"

        for i in range(p.size):
            _check_entry(label(i), x[i], lo[i], hi[i])
        kind_name = p.meta.get("kind")
        kind = KINDS.get(kind_name) if isinstance(kind_name, str) else None
        if kind is not None and kind.lower is not None:
            below = np.flatnonzero(lo < kind.lower)
            if below.size:
                i = int(below[0])
                raise ValueError(
                    f"initial_params: {label(i)} must have min_value >= {kind.lower!r} "
                    f"({kind_name}: {kind.lower_reason}), got {float(lo[i])!r}; a fit "
                    "must not reach values that are not physical, raise min_value"
                )


def check_start(params: ParameterDict, optimizer: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x0, lo, hi)``, each ``(p,)``, of a valid start (``ValueError``/``TypeError``
    naming the parameter otherwise; ``"mujoco"`` needs finite bounds)."""
    if not isinstance(params, ParameterDict):
        raise TypeError(must_be("initial_params", "a ParameterDict", type(params).__name__))
    if len(params) == 0:
        raise ValueError(must_be("initial_params", "a non-empty ParameterDict", "an empty one"))
    if params.size == 0:
        raise ValueError(
            f"initial_params must have at least one non-frozen parameter, got "
            f"{len(params)} parameters, all frozen: {params.keys()}"
        )
    _check_free_parameters(params)
    x0 = params.as_vector()
    lo, hi = params.get_bounds()
    names = params.get_non_frozen_parameter_names()
    out = np.flatnonzero((x0 < lo) | (x0 > hi))
    if out.size:
        i = out[0]
        raise ValueError(
            f"initial_params: {names[i]} must start within its bounds "
            f"[{float(lo[i])!r}, {float(hi[i])!r}], got "
            f"{float(x0[i])!r}; mjsysid does not clip silently, fix the value or the bounds"
        )
    if optimizer == "mujoco":
        inf = np.flatnonzero(~(np.isfinite(lo) & np.isfinite(hi)))
        if inf.size:
            raise ValueError(
                f"optimizer 'mujoco' needs finite bounds, got infinite bounds for "
                f"{[names[i] for i in inf]}; give them finite bounds or use optimizer='scipy'"
            )
    return x0, lo, hi
