"""The reader of an experiment file's mappings: :class:`_Node` (typed keys with their key
path, for precise error messages), :class:`ExperimentError` and the value helpers (numbers,
positive numbers, plain file names).
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from mjsysid.util.errors import short_repr


class ExperimentError(ValueError):
    """A mistake in an experiment file; the message starts with the key path."""


def _where(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)


def _type_name(value: Any) -> str:
    return type(value).__name__ if value is not None else "nothing"


def _is_float_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _Node:
    """A mapping with its key path, for precise error messages."""

    def __init__(self, data: Any, path: str, source: str) -> None:
        if not isinstance(data, dict):
            raise ExperimentError(
                f"{source}: {path or 'the file'} must be a mapping, got "
                f"{_type_name(data)} {short_repr(data)}"
            )
        self.data, self.path, self.source = data, path, source
        self.used: set[str] = set()

    def err(self, key: str | int, expected: str, got: Any) -> ExperimentError:
        return ExperimentError(
            f"{self.source}: {_where(self.path, key)} must be {expected}, got "
            f"{_type_name(got)} {short_repr(got)}"
        )

    def get(
        self,
        key: str,
        kind: type | tuple[type, ...],
        default: Any = None,
        *,
        required: bool = False,
        expected: str | None = None,
    ) -> Any:
        self.used.add(key)
        if key not in self.data:
            if required:
                raise ExperimentError(
                    f"{self.source}: {_where(self.path, key)} is required ({expected or 'missing'})"
                )
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = expected or " or ".join(k.__name__ for k in kinds)
            if float in kinds and isinstance(value, str) and _is_float_text(value):
                names += f" (YAML reads {value} as text: write it with a dot, e.g. 1.0e-3)"
            raise self.err(key, names, value)
        return value

    def child(self, key: str, required: bool = False) -> _Node | None:
        value = self.get(key, dict, None, required=required, expected="a mapping")
        return None if value is None else _Node(value, _where(self.path, key), self.source)

    def finish(self, allowed: Iterable[str] | None = None) -> None:
        """Unknown keys are an error: those not read so far, or not in ``allowed`` (to check
        before work that a misspelt key would mislead, e.g. ``timescale``)."""
        known = self.used if allowed is None else set(allowed)
        unknown = sorted(set(self.data) - known)
        if unknown:
            close = {k: m for k in unknown if (m := difflib.get_close_matches(k, known, 1))}
            hint = "".join(f"; did you mean {m[0]!r} for {k!r}?" for k, m in close.items())
            raise ExperimentError(
                f"{self.source}: {self.path or 'top level'} has unknown keys "
                f"{unknown}; allowed: {sorted(known)}{hint}"
            )


def _numbers(node: _Node, key: str, size: int | None = None) -> np.ndarray | None:
    raw = node.get(key, (int, float, list), None, expected="a number or a list of numbers")
    if raw is None:
        return None
    values = raw if isinstance(raw, list) else [raw]
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise node.err(f"{key}[{i}]" if isinstance(raw, list) else key, "a number", v)
        try:
            f = float(v)
        except ValueError:
            raise node.err(key, "numbers", raw) from None
        if math.isnan(f):
            raise node.err(key, "numbers (not NaN)", raw)
        out.append(f)
    arr = np.array(out)
    if size is not None and arr.size not in (1, size):
        raise node.err(key, f"1 or {size} numbers", raw)
    return arr


_FILE_NAME = "a plain file name (non-empty, without '/', '\\', '..' or NUL)"


def _check_file_name(source: str, key: str, value: str, default_from: str = "") -> None:
    """Rejects names that could leave the results folder once used as a file name."""
    bad = (
        not value
        or value.strip() in ("", ".")
        or any(c in value for c in ("/", "\\", "\0", os.sep))
        or ".." in value
    )
    if bad:
        origin = f" (taken from {default_from}; set {key}: explicitly)" if default_from else ""
        raise ExperimentError(
            f"{source}: {key} must be {_FILE_NAME}, got {_type_name(value)} "
            f"{short_repr(value)}{origin}"
        )


def _positive_number(node: _Node, key: str, default: float | None) -> float | None:
    value = node.get(key, float, default, expected="a number")
    if value is not None and not (math.isfinite(value) and value > 0):
        raise node.err(key, "a finite number > 0", value)
    return value
