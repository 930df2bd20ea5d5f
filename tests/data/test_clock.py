"""A recording's clock: rate changes and gaps named, a retime bounded (mjsysid.data.clock)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mjsysid.data.clock import (
    RETIME_MAX_MOVE,
    clock_messages,
    clock_report,
    clock_segments,
    retime_plan,
)


def _steps(*parts: tuple[int, float], seed: int = 0, jitter: float = 0.02) -> np.ndarray:
    """Times of ``(count, period)`` stretches, each step jittered by ``jitter`` of its period."""
    rng = np.random.default_rng(seed)
    dt = np.concatenate([p * (1 + jitter * rng.standard_normal(n)) for n, p in parts])
    return np.concatenate([[0.0], np.cumsum(dt)])


def _host(n: int, period: float, jitter: float, seed: int = 0) -> np.ndarray:
    """A regular clock read by a host: each stamp off by ``jitter`` periods (std)."""
    noise = np.random.default_rng(seed).normal(0.0, jitter * period, n)
    return np.arange(n) * period + noise


def test_two_rates_and_a_gap_are_named():
    t = _steps((300, 0.0053), (400, 0.0035), jitter=0.0)
    t[500:] += 0.05  # a 50 ms pause in the second stretch
    report = clock_report(t)
    assert report.describe_segments() == "rows 0-299 at 5.3 ms, rows 300-700 at 3.5 ms"
    (gap,) = report.gaps
    assert gap.row == 499 and gap.length == pytest.approx(0.0535, abs=1e-3)
    assert report.describe_gaps().startswith("row 499 at ")
    warnings, notes = clock_messages(t, "rec")
    assert warnings == [] and notes[0].startswith("rec: the clock changes rate: rows 0-299")
    assert "do not retime" in notes[0]


def test_one_jittering_rate_is_one_segment():
    assert len(clock_segments(_steps((800, 0.02), jitter=0.15))) == 1
    alternating = np.concatenate([[0.0], np.cumsum(np.tile([0.024, 0.016], 200))])
    assert len(clock_segments(alternating)) == 1  # two steps in turn: one rate
    assert len(clock_segments(_steps((100, 0.02), (100, 0.021)))) == 1  # 5 %: not a change


def test_retime_is_refused_beyond_a_fraction_of_a_period():
    host = _host(300, 0.02, 0.05)
    ok = retime_plan(host)
    assert ok.refused == "" and ok.max_move < RETIME_MAX_MOVE * 0.02
    late = host.copy()
    late[100:160] += 0.03 * np.sin(np.linspace(0.0, np.pi, 60))  # 30 ms late, then back
    plan = retime_plan(late)
    assert plan.max_move > RETIME_MAX_MOVE * 0.02 and "more than 0.9 of a period" in plan.refused
    two = retime_plan(_steps((200, 0.0205), (250, 0.0152)))
    assert two.refused.startswith("the rate changes within the recording (rows 0-199 at 20.5")
    assert two.max_move > 0.1  # what it would have done: whole periods


def test_the_jitter_warning_mentions_a_retime_only_where_it_is_safe():
    (safe,) = clock_messages(_host(300, 0.02, 0.05), "rec")[0]
    assert (
        re.search(r"retime: 0\.0(199|200)\d* moves row", safe)
        and "mjsysid check tries it with a quick fit" in safe
    )
    late = _host(300, 0.02, 0.05)
    late[100:160] += 0.03 * np.sin(np.linspace(0.0, np.pi, 60))
    (unsafe,) = clock_messages(late, "rec")[0]
    assert "not retime (retime moves row" in unsafe
