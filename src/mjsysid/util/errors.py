"""Small helpers that build uniform error messages.

Every message follows ``"{what} must be {expected}, got {received!r}"`` so that a user can
see at a glance which argument is wrong, what was expected and what arrived.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import mujoco
import numpy as np


def short_repr(value: Any, limit: int = 80) -> str:
    """A bounded ``repr`` of ``value`` (arrays show shape and a few entries).

    The work is bounded too, not only the output: lists, tuples, sets and dicts are walked
    with a budget of characters, so a value built from nested YAML aliases (which ``repr``
    would expand to gigabytes) costs at most about ``limit`` steps.
    """
    parts: list[str] = []
    _bounded_repr(value, parts, _Budget(limit + 1))
    text = "".join(parts)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Budget:
    """Characters still to be produced by :func:`_bounded_repr`."""

    def __init__(self, chars: int) -> None:
        self.chars = chars

    def take(self, parts: list[str], text: str) -> bool:
        """Appends ``text`` (cut to the budget); ``False`` once the budget is spent."""
        if self.chars <= 0:
            return False
        parts.append(text[: self.chars])
        self.chars -= len(text)
        return self.chars > 0


_BRACKETS: dict[type, tuple[str, str]] = {list: ("[", "]"), tuple: ("(", ")"), set: ("{", "}")}


def _bounded_repr(value: Any, parts: list[str], budget: _Budget) -> bool:
    """Appends a ``repr`` of ``value`` to ``parts`` within ``budget``; ``False`` when spent."""
    if isinstance(value, np.ndarray):
        if value.size > 1000:  # array2string summarises, but not an object array's items
            return budget.take(parts, f"array(shape={value.shape}, dtype={value.dtype})")
        body = np.array2string(value, threshold=6, edgeitems=2, precision=6)
        return budget.take(parts, f"array(shape={value.shape}, {body})")
    if isinstance(value, dict):
        items: Any = value.items()
        opening, closing = "{", "}"
    elif type(value) in _BRACKETS and (value or not isinstance(value, set)):
        items = value
        opening, closing = _BRACKETS[type(value)]
    else:
        text = repr(value) if not isinstance(value, str) else repr(value[: budget.chars + 2])
        return budget.take(parts, text)
    if not budget.take(parts, opening):
        return False
    for k, item in enumerate(items):
        if k and not budget.take(parts, ", "):
            return False
        if isinstance(value, dict):
            if not (_bounded_repr(item[0], parts, budget) and budget.take(parts, ": ")):
                return False
            item = item[1]
        if not _bounded_repr(item, parts, budget):
            return False
    if isinstance(value, tuple) and len(value) == 1 and not budget.take(parts, ","):
        return False
    return budget.take(parts, closing)


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


def first_outside(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> int | None:
    """Index of the first entry of ``values`` outside ``[lo, hi]`` (all ``(p,)``), or ``None``."""
    out = np.flatnonzero((values < lo) | (values > hi))
    return int(out[0]) if out.size else None


def element_ids_key(model: mujoco.MjModel) -> tuple[int, int]:
    """Identifies a model's structure and names (equal for copies), for caching the element
    ids a modifier looks up by name (not :func:`mjsysid.sim.model_key.model_key`, the key of
    the simulation caches, which leaves names out)."""
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


def yaml_number(text: str) -> str:
    """How to write the number ``text`` so that YAML reads a number, not text (PyYAML wants
    a dot and a signed exponent: ``1.0e+9``, ``1.0e-3``): here, Python's own spelling of it,
    given as ``1.0e+9`` when it has an exponent."""
    spelt = repr(float(text))
    if "e" not in spelt:
        return spelt
    mantissa, exponent = spelt.split("e")
    mantissa = mantissa if "." in mantissa else mantissa + ".0"
    return f"{mantissa}e{exponent if exponent[0] in '+-' else '+' + exponent}"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'motor'?"`` when ``known`` holds a name close to ``name`` (a
    misspelt target or pattern; ``difflib``'s ratio >= 0.6, case ignored), else ``""``."""
    names = [k for k in known if k]
    lowered = {k.lower(): k for k in names}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1)
    return f"; did you mean {lowered[close[0]]!r}?" if close else ""
