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
