"""Counters of a residual function (for benchmarks and diagnostics)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ResidualStats:
    """Counters for benchmarks and diagnostics (cumulative since creation; shared with the
    function's :meth:`~mjsysid.objective.residual.ResidualFunction.head` views). ``steps``:
    simulation steps of all rollouts (a head's rollouts are shorter)."""

    calls: int = 0
    candidates: int = 0
    simulated_candidates: int = 0
    rollouts: int = 0
    steps: int = 0
    compiles: int = 0
    model_edits: int = 0
    time_build: float = 0.0
    time_rollout: float = 0.0
    time_total: float = 0.0
