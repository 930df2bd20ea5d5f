"""Which cluster a fit's residual evaluations run on, as an experiment file or the command
line declares it (validated without importing Dask; :mod:`mjsysid.fit.distributed` uses it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mjsysid.util.errors import must_be

_EXECUTOR_KEYS = ("workers", "scheduler", "threads_per_worker", "timeout")


def executor_options(value: Any, where: str = "executor") -> dict[str, Any]:
    """The :func:`make_executor` keyword arguments an experiment file's ``executor:`` means.

    ``"tcp://host:8786"`` (a scheduler address), ``4`` (a local cluster of 4 workers) or a
    mapping ``{workers: 4, threads_per_worker: 1}`` / ``{scheduler: ..., timeout: 10}``.

    Raises:
      ValueError, TypeError: Anything else, naming ``where``.
    """
    if isinstance(value, str):
        value = {"scheduler": value}
    elif isinstance(value, int) and not isinstance(value, bool):
        value = {"workers": value}
    expected = "a scheduler address, a worker count, or {workers: N} / {scheduler: address}"
    if not isinstance(value, Mapping):
        raise TypeError(must_be(where, expected, value))
    unknown = sorted(set(value) - set(_EXECUTOR_KEYS))
    if unknown or ("workers" in value) == ("scheduler" in value):
        raise ValueError(must_be(where, expected + f" (keys among {list(_EXECUTOR_KEYS)})", value))
    workers = value.get("workers")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise ValueError(must_be(f"{where}.workers", "a positive integer", workers))
    scheduler = value.get("scheduler")
    if scheduler is not None and (not isinstance(scheduler, str) or "://" not in scheduler):
        raise ValueError(
            must_be(f"{where}.scheduler", "an address such as 'tcp://host:8786'", scheduler)
        )
    return dict(value)
