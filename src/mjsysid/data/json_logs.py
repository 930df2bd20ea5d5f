"""Recordings stored as JSON: a list of samples, each an object of named values, and the
recording's settings beside it.

This is how many hobby and research rigs log a servo or a motor (one object per sample, as a
Python script appends dictionaries), e.g. the servo logs of Rhoban's BAM project::

    {"mass": 1.13, "length": 0.12, "kp": 32, "vin": 12.0, "motor": "sts3250",
     "entries": [{"timestamp": 0.0137, "position": 0.0015, "goal_position": 0.0,
                  "torque_enable": true, ...}, ...]}

:func:`read_json_log` turns such a file into

* columns: every key of the samples, one value per sample (numbers; ``true``/``false`` as
  1/0; a list of numbers as a vector column ``(N, d)``; a nested object flattened as
  ``"outer.inner"``), read like the columns of a ``.csv`` or ``.npz`` recording
  (:func:`mjsysid.data.recording.load_recording`);
* settings: the numbers (and booleans) at the top level of the object, the recording's
  per-recording constants (a firmware gain, a supply voltage, a load mass), which force laws
  read (:attr:`mjsysid.sim.laws.core.ForceLaw.constants`). Text values (a motor's name) are
  not settings.

The samples are the top-level list itself, or the one list of objects in the top-level object
(several: the message names them). Every sample must have the same keys.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mjsysid.util.errors import must_be
from mjsysid.util.limits import check_limit

__all__ = ["JsonLog", "read_json_log"]


@dataclass(frozen=True)
class JsonLog:
    """A JSON recording, read.

    Attributes:
      columns: ``{name: (N,) or (N, d)}`` float64 columns, one row per sample.
      settings: ``{name: number}`` the top-level numbers (booleans as 1/0).
      samples_key: The key the samples were under (``None``: the file is the list).
    """

    columns: dict[str, np.ndarray]
    settings: dict[str, float]
    samples_key: str | None


def _number(value: Any, where: str) -> float | list[float]:
    """A sample's value as a number (``bool`` as 1/0, ``null`` as NaN) or a list of them."""
    if value is None:
        return math.nan
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    ):
        return [float(v) for v in value]
    raise ValueError(must_be(where, "a number, true/false, null or a list of numbers", value))


def _what(value: Any) -> str:
    """What a JSON value is, in words (never its text: a file may hold anything)."""
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    if isinstance(value, str):
        return f"text of {len(value)} characters"
    return f"{type(value).__name__} {value!r}"


def _flatten(sample: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for key, value in sample.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            _flatten(value, f"{name}.", out)
        else:
            out[name] = value


def _samples(raw: Any, where: str) -> tuple[list[Any], str | None]:
    """The list of samples and the key it is under."""
    if isinstance(raw, list):
        return raw, None
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a JSON object or a list of samples, got {_what(raw)}")
    lists = [k for k, v in raw.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
    if len(lists) != 1:
        found = f"{len(lists)} such lists {lists}" if lists else "none"
        raise ValueError(
            f"{where}: the samples must be the one list of objects in the file, got {found}"
        )
    return raw[lists[0]], lists[0]


def read_json_log(path: str | Path) -> JsonLog:
    """Reads a JSON recording (module docstring).

    Raises:
      FileNotFoundError: No such file.
      ValueError: Not JSON (the position named), nested too deeply, no samples or several
        lists of them, a sample that is not an object, a value that is not a number, samples
        with different keys or vector lengths (the sample and the key named), or more rows
        or bytes than the limits ``max_rows`` / ``max_file_bytes`` allow.
    """
    path = Path(path)
    where = f"recording {str(path)!r}"
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    check_limit("max_file_bytes", path.stat().st_size, f"{where}: bytes")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{where} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
        ) from None
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply to be a recording") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{where} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    samples, key = _samples(raw, where)
    check_limit("max_rows", len(samples), f"{where}: samples")
    rows: list[dict[str, Any]] = []
    for i, sample in enumerate(samples):
        if not isinstance(sample, dict):
            raise ValueError(f"{where}: sample {i} must be an object, got {_what(sample)}")
        flat: dict[str, Any] = {}
        _flatten(sample, "", flat)
        rows.append(flat)
    names = list(rows[0]) if rows else []
    columns: dict[str, np.ndarray] = {}
    for name in names:
        values = []
        for i, row in enumerate(rows):
            if name not in row:
                raise ValueError(f"{where}: sample {i} has no {name!r} (sample 0 has it)")
            values.append(_number(row[name], f"{where}: sample {i}: {name!r}"))
        try:
            columns[name] = np.asarray(values, dtype=np.float64)
        except ValueError:
            raise ValueError(
                f"{where}: {name!r} must have the same length in every sample"
            ) from None
    for i, row in enumerate(rows):
        extra = sorted(set(row) - set(names))
        if extra:
            raise ValueError(f"{where}: sample {i} has keys sample 0 does not have: {extra}")
    settings = {}
    if isinstance(raw, dict):
        settings = {
            k: float(v)
            for k, v in raw.items()
            if isinstance(v, bool | int | float) and math.isfinite(float(v))
        }
    return JsonLog(columns, settings, key)
