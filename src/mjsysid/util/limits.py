"""Named limits on every size that drives work, checked before the work starts.

A glitched time stamp, a unit typo or a file whose header lies can ask for billions of
simulated steps or terabytes of memory; without a check the program hangs or dies with a
bare ``MemoryError``. Each size (rows of a recording, simulated steps, windows, parameters,
candidates, report figures) is derived first and compared with a limit from :data:`LIMITS`;
:func:`check_limit` refuses a size over its limit with a message naming the input, the number,
the limit and how to raise it.

The command line checks its own numbers the same way before loading anything: durations
(``max_duration_s``), rates (``max_rate_hz``), timeouts and watchdogs (``max_timeout_s``),
iterations and generations (``max_iterations``), population sizes (``max_candidates``) and
open-loop starts (``max_starts``); the steps or rows they imply are then checked against
``max_steps`` and ``max_rows``. :func:`check_count` adds the lower bound of a count.

A limit is raised (or lowered), in order of precedence:

* in code: ``with limits_set(max_rows=50_000_000): ...`` or :func:`set_limits`;
* in an experiment file: ``limits: {max_rows: 50000000}``;
* in the environment: ``MJSYSID_LIMITS="max_rows=5e7,max_windows=5000"``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

ENV_VAR = "MJSYSID_LIMITS"


@dataclass(frozen=True)
class Limit:
    """One named limit: its default and what it bounds."""

    name: str
    default: int
    meaning: str


LIMITS: dict[str, Limit] = {
    lim.name: lim
    for lim in (
        Limit("max_rows", 2_000_000, "rows (samples) of one recording file"),
        Limit("max_file_bytes", 2_000_000_000, "uncompressed bytes of one recording file"),
        Limit("max_steps", 20_000_000, "simulated physics steps of one sequence"),
        Limit("max_total_steps", 100_000_000, "simulated physics steps of all sequences"),
        Limit("max_windows", 2_000, "shooting windows of one fit"),
        Limit("max_parameters", 5_000, "fitted parameters (window initial states included)"),
        Limit("max_candidates", 100_000, "candidate parameter vectors of one call"),
        Limit("max_report_figures", 24, "per-window figures of a report"),
        Limit("max_report_signals", 100, "signal figures drawn in a report's Signals section"),
        Limit("max_heatmap_parameters", 300, "parameters drawn in the report's correlation map"),
        Limit("max_duration_s", 86_400, "seconds of a simulated, designed or captured run"),
        Limit("max_rate_hz", 100_000, "samples per second of a device or a simulated log"),
        Limit("max_timeout_s", 3_600, "seconds of a timeout or a watchdog"),
        Limit("max_iterations", 100_000, "iterations or generations of one search"),
        Limit("max_starts", 10_000, "open-loop starts per recording of an evaluation"),
    )
}

_overrides: dict[str, int] = {}


def _validated(name: str, value: Any, where: str) -> int:
    """``value`` as a positive int for limit ``name``, or a ValueError naming ``where``."""
    if name not in LIMITS:
        raise ValueError(
            f"{where}: unknown limit {name!r}; known limits: {', '.join(sorted(LIMITS))}"
        )
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not (value >= 1 and value == value and value != float("inf")):
        raise ValueError(
            f"{where}: limit {name} must be a positive finite number, got {str(value)[:40]!r}"
        )
    return int(value)


def _from_env() -> Mapping[str, int]:
    return _parsed_env(os.environ.get(ENV_VAR, ""))


@lru_cache(maxsize=8)
def _parsed_env(raw: str) -> Mapping[str, int]:
    """The limits an environment value sets (parsed once per value: limits are read on every
    residual call; a value that does not parse raises each time it is read)."""
    raw = raw.strip()
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, text = item.partition("=")
        try:
            number = float(text) if sep else float("nan")
        except ValueError:
            number = float("nan")
        out[name.strip()] = _validated(name.strip(), number, f"${ENV_VAR}")
    return MappingProxyType(out)


def get_limit(name: str) -> int:
    """The limit in force for ``name`` (code/experiment override, else environment, else
    default)."""
    if name not in LIMITS:
        raise KeyError(f"unknown limit {name!r}; known limits: {', '.join(sorted(LIMITS))}")
    if name in _overrides:
        return _overrides[name]
    return _from_env().get(name, LIMITS[name].default)


def set_limits(values: Mapping[str, Any], where: str = "limits") -> dict[str, int | None]:
    """Sets limits for this process; returns the previous overrides (``None``: none) so a
    caller can restore them.

    Raises:
      ValueError: An unknown name or a value that is not a positive finite number.
    """
    if not isinstance(values, Mapping):
        raise ValueError(
            f"{where} must be a mapping of limit names to numbers, got {type(values).__name__}"
        )
    checked = {str(k): _validated(str(k), v, where) for k, v in values.items()}
    previous = {k: _overrides.get(k) for k in checked}
    _overrides.update(checked)
    return previous


def restore_limits(previous: Mapping[str, int | None]) -> None:
    """Undoes :func:`set_limits` given what it returned."""
    for k, v in previous.items():
        if v is None:
            _overrides.pop(k, None)
        else:
            _overrides[k] = v


@contextmanager
def limits_set(**values: Any) -> Iterator[None]:
    """Limits raised (or lowered) within a ``with`` block."""
    previous = set_limits(values)
    try:
        yield
    finally:
        restore_limits(previous)


def how_to_raise(name: str) -> str:
    """The ways to raise limit ``name``, for an error message."""
    return (
        f"If this is intended, raise the limit: experiment key 'limits: {{{name}: N}}', "
        f"environment {ENV_VAR}='{name}=N' or mjsysid.util.limits.set_limits({{'{name}': N}})"
    )


def check_limit(name: str, value: float, what: str) -> None:
    """Refuses ``value`` over limit ``name`` before any work is done on it.

    Args:
      name: A key of :data:`LIMITS`.
      value: The derived size (rows, steps, windows, ...); may be a float (``inf``/``nan``
        count as over the limit).
      what: The input the size comes from and how, e.g. ``"'run.csv': rows"``.

    Raises:
      ValueError: ``value`` exceeds the limit; the message names ``what``, the number, the
        limit, what it bounds and how to raise it.
    """
    limit = get_limit(name)
    if value <= limit:  # False for nan
        return
    shown = f"{value:.4g}" if isinstance(value, float) else f"{value:,}"
    raise ValueError(
        f"{what}: {shown} exceeds the limit {name}={limit:,} ({LIMITS[name].meaning}); "
        f"probably a glitched time stamp, a unit typo or a corrupt file: check the input. "
        f"{how_to_raise(name)}"
    )


def check_count(name: str, value: int, what: str, minimum: int = 1) -> None:
    """Refuses a count (iterations, a population, starts) below ``minimum`` or over the
    limit ``name``.

    Raises:
      ValueError: ``what must be an integer >= minimum, got ...`` or the limit's message.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {value!r}")
    check_limit(name, value, what)


def check_positive(
    name: str, value: float, what: str, *, zero: bool = False, expected: str = ""
) -> None:
    """Refuses a duration, rate or timeout that is not a finite number > 0 (``>= 0`` with
    ``zero``) or that exceeds the limit ``name``.

    Raises:
      ValueError: ``what must be <expected, default 'a finite number > 0'>, got ...`` or the
        limit's message.
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and math.isfinite(value) and (value >= 0 if zero else value > 0)
    if not ok:
        expected = expected or f"a finite number {'>= 0' if zero else '> 0'}"
        raise ValueError(f"{what} must be {expected}, got {value!r}")
    check_limit(name, value, what)
