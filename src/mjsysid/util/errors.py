"""Small helpers that build uniform error messages.

Every message follows ``"{what} must be {expected}, got {received!r}"`` so that a user can
see at a glance which argument is wrong, what was expected and what arrived.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np


def short_repr(value: Any, limit: int = 80) -> str:
    """A bounded ``repr`` of ``value`` (arrays show shape and a few entries)."""
    if isinstance(value, np.ndarray):
        body = np.array2string(value, threshold=6, edgeitems=2, precision=6)
        text = f"array(shape={value.shape}, {body})"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def must_be(what: str, expected: str, received: Any, hint: str = "") -> str:
    """Formats ``"{what} must be {expected}, got {received}"`` plus an optional hint."""
    msg = f"{what} must be {expected}, got {short_repr(received)}"
    return f"{msg}. {hint}" if hint else msg


def finite_real(value: object) -> bool:
    """A finite real number: Python or NumPy int or float, not a bool, a string or an array."""
    return (
        isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool | np.bool_)
        and bool(np.isfinite(value))
    )


def first_bad_index(mask: np.ndarray) -> int:
    """Flat index of the first ``True`` entry of ``mask`` (which must have one)."""
    return int(np.flatnonzero(np.asarray(mask).ravel())[0])


def model_key(model: mujoco.MjModel) -> tuple[int, int]:
    """Identifies a model's structure and names (equal for copies), for caching element ids."""
    return int(model.signature), hash(model.names)


def require_model(model: Any, what: str = "model") -> mujoco.MjModel:
    """``model`` if it is a compiled ``MjModel``; else a ``TypeError`` naming the likely fix."""
    if not isinstance(model, mujoco.MjModel):
        raise TypeError(
            must_be(
                what,
                "a compiled mujoco.MjModel",
                type(model).__name__,
                "did you pass an MjSpec? call spec.compile() first",
            )
        )
    return model
