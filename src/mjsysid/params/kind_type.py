"""The :class:`Kind` record (how one quantity is read, written and bounded) and its helpers.

Shared by :mod:`mjsysid.params.kinds` and :mod:`mjsysid.params.actuator_kinds`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np


@dataclass(frozen=True)
class Kind:
    """How one kind of quantity is read, written and bounded.

    Attributes:
      element: Element type the target names (``"joint"``, ``"actuator"``, ...) or ``None``.
      read: ``read(model, id) -> nominal`` (1-D array).
      set_spec: ``set_spec(spec_element, value)``.
      set_model: ``set_model(model, id, value)``; exact equivalent of set_spec + compile.
      bounds: ``bounds(nominal) -> (lo, hi)`` defaults.
      unit: SI unit, for reports.
      fields: ``fields(model, id) -> [(field, flat indices, factor)]``: what ``set_model``
        writes, ``model.<field>.flat[index] = factor · value[0]`` (for batched writes, see
        :class:`mjsysid.params.apply.WritePlan`).
      lower: Physical lower limit of the quantity (``None``: a negative value has a meaning);
        see "Physical limits" in the module docstring.
      lower_reason: Why, for error messages.
      require: ``require(model, id, name)`` raises ``ValueError`` when the element cannot
        carry this kind (e.g. the wrong actuator type, or the feature is switched off).
    """

    element: str | None
    read: Callable[[mujoco.MjModel, int], np.ndarray] | None
    set_spec: Callable[[Any, np.ndarray], None] | None
    set_model: Callable[[mujoco.MjModel, int, np.ndarray], None] | None
    bounds: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    unit: str
    fields: Callable[[mujoco.MjModel, int], list[tuple[str, list[int], float]]] | None = None
    lower: float | None = None
    lower_reason: str = ""
    require: Callable[[mujoco.MjModel, int, str], None] | None = None


def flat_index(model: mujoco.MjModel, field: str, row: int, col: int = 0) -> int:
    """Flat index of ``model.<field>[row, col]`` (``row`` for a 1-D field)."""
    shape = getattr(model, field).shape
    return row if len(shape) == 1 else row * shape[1] + col


def nonneg_bounds(nominal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hi = np.maximum(10.0 * np.abs(nominal), 1.0)
    return np.zeros_like(nominal), hi


def positive_bounds(nominal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mag = np.maximum(np.abs(nominal), 1e-6)
    return 0.1 * mag, 10.0 * mag


def same_sign_bounds(nominal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """0.1x to 10x the nominal, on the nominal's side of 0 (a gear of -2 gets [-20, -0.2])."""
    lo, hi = positive_bounds(nominal)
    neg = nominal < 0
    return np.where(neg, -hi, lo), np.where(neg, -lo, hi)


def set_first(attr: str) -> Callable[[Any, np.ndarray], None]:
    def setter(obj: Any, value: np.ndarray) -> None:
        field = getattr(obj, attr)
        if isinstance(field, np.ndarray):
            field[0] = value[0]
        else:
            setattr(obj, attr, float(value[0]))

    return setter


Bounds = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
Require = Callable[[mujoco.MjModel, int, str], None]


def entry_kind(
    element: str,
    field: str,
    col: int | None,
    unit: str,
    bounds: Bounds,
    reason: str = "",
    require: Require | None = None,
    *,
    spec_attr: str | None = None,
    factor: float = 1.0,
) -> Kind:
    """A kind stored in one entry of a model field: ``model.<field>[i, col] = factor · value``
    (``model.<field>[i]`` when ``col`` is ``None``), and the spec element's attribute alike.

    Args:
      element: Element type of the target (``"joint"``, ``"actuator"``, ``"geom"``).
      field: Model field, e.g. ``"actuator_gainprm"``.
      col: Column of a 2-D field, ``None`` for a 1-D one.
      unit: SI unit of the value.
      bounds: Default bounds from the nominal.
      reason: Given: the quantity has the physical lower limit 0, and this says why.
      require: Raises when the element cannot carry the kind.
      spec_attr: Spec attribute (default: ``field`` without its ``"<element>_"`` prefix);
        entry ``col`` of it, or its first entry (or the scalar) when ``col`` is ``None``.
      factor: Model value per parameter value (``-1`` for a bias term ``-kv``).
    """
    attr = spec_attr or field.split("_", 1)[1]
    row = (lambda i: (i, col)) if col is not None else (lambda i: i)

    def read(m: mujoco.MjModel, i: int) -> np.ndarray:
        return np.array([factor * getattr(m, field)[row(i)]])

    def set_spec(obj: Any, v: np.ndarray) -> None:
        if col is None:
            set_first(attr)(obj, factor * v)
        else:
            getattr(obj, attr)[col] = factor * v[0]

    def set_model(m: mujoco.MjModel, i: int, v: np.ndarray) -> None:
        getattr(m, field)[row(i)] = factor * v[0]

    def fields(m: mujoco.MjModel, i: int) -> list[tuple[str, list[int], float]]:
        return [(field, [flat_index(m, field, i, col or 0)], factor)]

    lower = 0.0 if reason else None
    return Kind(element, read, set_spec, set_model, bounds, unit, fields, lower, reason, require)
