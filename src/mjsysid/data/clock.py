"""A recording's clock: rate changes, gaps, jitter, and how far a retime would move rows.

A host that stamps rows as it receives them gives a clock with three kinds of defect, which
call for different fixes:

* **jitter**: steps spread around one period (:func:`~mjsysid.data.timing.jitter_stats`);
  if the device sampled regularly, :func:`~mjsysid.data.timing.retime` snaps the rows onto
  a grid;
* **rate changes**: the loop runs at one period for a while, then at another (a servo log
  whose loop takes 20.5 ms while the torque is on and 15.2 ms after). One grid cannot fit
  both: a retime moves rows by many periods (hundreds of ms on such a log). Found here by
  binary segmentation of the steps (:func:`clock_segments`);
* **gaps**: single steps longer than ``1.5`` periods of their segment (dropped samples,
  pauses); the simulation runs through them, a retime leaves their slots empty.

Segmentation. With ``y_i = log(min(dt_i, 3 m))`` (``m``: the median step; the clip keeps gaps
from posing as rate changes), the split point of a segment is the maximiser of the CUSUM
statistic ``|S_k - (k/n) S_n|`` (``S_k``: the partial sums of ``y``; Page 1954, the binary
segmentation of Scott & Knott 1974). A split is kept when both parts have at least
``min_steps`` steps and their mean ``y`` differ by more than ``log(1 + min_change)`` and by
more than 5 standard errors (a jittering clock of one rate is not split); the parts are
split again in turn. Means, not medians: a clock alternating between two steps has one rate.

A retime is safe only if it moves every row by less than a fraction of a period
(:data:`RETIME_MAX_MOVE`); :func:`retime_plan` says how far it would move them and refuses it
on a clock with rate changes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from mjsysid.data.timing import JITTER_TOLERANCE, jitter_stats, retime
from mjsysid.util.errors import must_be

__all__ = [
    "MIN_RATE_CHANGE",
    "MIN_SEGMENT_STEPS",
    "RETIME_MAX_MOVE",
    "ClockGap",
    "ClockReport",
    "ClockSegment",
    "RetimePlan",
    "clock_messages",
    "clock_report",
    "clock_segments",
    "retime_plan",
]

MIN_SEGMENT_STEPS = 20
"""A rate must hold this many steps to count as a segment of its own."""

MIN_RATE_CHANGE = 0.1
"""Median steps of neighbouring segments must differ by more than this fraction."""

RETIME_MAX_MOVE = 0.9
"""A retime may move a row by at most this fraction of the median period; beyond, it is not
suggested (and applying it warns)."""

_GAP = 1.5  # a step this many segment periods long is a gap
_SIGNIFICANCE = 5.0  # a split's mean difference must exceed this many standard errors
_CLIP = 3.0  # steps clipped at this many global medians before segmentation


@dataclass(frozen=True)
class ClockSegment:
    """Rows ``first``..``last`` (0-based, inclusive) stamped at a median step ``period`` (s)."""

    first: int
    last: int
    period: float

    def describe(self) -> str:
        """``rows 0-96 at 20.5 ms``."""
        return f"rows {self.first}-{self.last} at {self.period * 1e3:.3g} ms"


@dataclass(frozen=True)
class ClockGap:
    """A step from row ``row`` to ``row + 1`` starting at ``time`` (s), ``length`` s long,
    ``periods`` periods of its segment."""

    row: int
    time: float
    length: float
    periods: float

    def describe(self) -> str:
        """``row 112 at 2.31 s: 35.7 ms (1.74 periods)``."""
        return (
            f"row {self.row} at {self.time:.4g} s: {self.length * 1e3:.3g} ms "
            f"({self.periods:.3g} periods)"
        )


@dataclass(frozen=True)
class ClockReport:
    """The clock of one recording.

    Attributes:
      segments: Stretches of one rate, in order (one when the rate never changes).
      gaps: Steps longer than 1.5 periods of their segment.
      period: The median step (s) over all rows.
    """

    segments: tuple[ClockSegment, ...]
    gaps: tuple[ClockGap, ...]
    period: float

    @property
    def rate_changes(self) -> bool:
        """Whether the rate changes within the recording."""
        return len(self.segments) > 1

    def describe_segments(self) -> str:
        """``rows 0-96 at 20.5 ms, rows 97-353 at 15.2 ms``."""
        return ", ".join(s.describe() for s in self.segments)

    def describe_gaps(self, limit: int = 5) -> str:
        """The first ``limit`` gaps, and how many more."""
        text = "; ".join(g.describe() for g in self.gaps[:limit])
        more = len(self.gaps) - limit
        return text + (f"; and {more} more" if more > 0 else "")


def _split(y: np.ndarray, dt: np.ndarray, lo: int, hi: int, min_steps: int, min_change: float):
    """The kept split points of steps ``lo:hi`` (recursive binary segmentation)."""
    n = hi - lo
    if n < 2 * min_steps:
        return []
    part = y[lo:hi]
    s = np.cumsum(part)
    k = np.arange(1, n + 1)
    stat = np.abs(s - k / n * s[-1])[min_steps - 1 : n - min_steps]
    cut = lo + min_steps + int(np.argmax(stat))
    left, right = y[lo:cut], y[cut:hi]
    diff = abs(float(left.mean() - right.mean()))
    noise = float(np.sqrt(left.var() / left.size + right.var() / right.size))
    if diff <= np.log1p(min_change) or diff <= _SIGNIFICANCE * noise:
        return []
    return [
        *_split(y, dt, lo, cut, min_steps, min_change),
        cut,
        *_split(y, dt, cut, hi, min_steps, min_change),
    ]


def clock_segments(
    times: np.ndarray,
    *,
    min_steps: int = MIN_SEGMENT_STEPS,
    min_change: float = MIN_RATE_CHANGE,
) -> tuple[ClockSegment, ...]:
    """Stretches of one sampling rate in ``times (N,)`` (s, increasing; see the module
    docstring for the method). Step ``i`` (from row ``i`` to ``i+1``) belongs to the segment
    holding row ``i``; a segment's last row is the next one's first row minus one."""
    t = np.asarray(times, dtype=np.float64)
    dt = np.diff(t)
    if dt.size == 0:
        raise ValueError(must_be("times", "at least 2 samples", t.size))
    if not np.all(dt > 0):
        raise ValueError(must_be("times", "strictly increasing", t))
    m = float(np.median(dt))
    y = np.log(np.minimum(dt, _CLIP * m))
    cuts = [0, *_split(y, dt, 0, dt.size, min_steps, min_change), dt.size]
    out = []
    for a, b in itertools.pairwise(cuts):
        last = b if b == dt.size else b - 1
        out.append(ClockSegment(a, last, float(np.median(dt[a:b]))))
    return tuple(out)


def clock_report(times: np.ndarray) -> ClockReport:
    """Segments, gaps and period of ``times (N,)`` (s, increasing, ``N >= 2``)."""
    t = np.asarray(times, dtype=np.float64)
    segments = clock_segments(t)
    dt = np.diff(t)
    gaps = []
    for seg in segments:
        stop = min(seg.last, dt.size - 1) + 1
        for i in range(seg.first, stop):
            if dt[i] > _GAP * seg.period:
                gaps.append(ClockGap(i, float(t[i]), float(dt[i]), float(dt[i] / seg.period)))
    return ClockReport(segments, tuple(gaps), float(np.median(dt)))


@dataclass(frozen=True)
class RetimePlan:
    """What ``retime`` would do to a recording's stamps.

    Attributes:
      period: The grid period (s).
      times: ``(N,)`` the retimed stamps (s); ``None`` when no grid gives every row a slot.
      max_move: The largest ``|new - old|`` (s) over the rows (``inf`` without ``times``).
      row: The row moved most.
      refused: Why the retime must not be suggested (empty when it may).
    """

    period: float
    times: np.ndarray | None
    max_move: float
    row: int
    refused: str

    def describe_move(self) -> str:
        """``moves row 180 by 392 ms (25.8 periods)``."""
        if self.times is None:
            return "gives two rows one slot"
        return (
            f"moves row {self.row} by {self.max_move * 1e3:.3g} ms "
            f"({self.max_move / self.period:.3g} periods)"
        )


def retime_move(old: np.ndarray, new: np.ndarray) -> tuple[float, int]:
    """``(largest |new - old| (s), its row)`` of two ``(N,)`` stamp arrays."""
    move = np.abs(np.asarray(new, dtype=np.float64) - np.asarray(old, dtype=np.float64))
    row = int(np.argmax(move))
    return float(move[row]), row


def retime_plan(
    times: np.ndarray,
    dt: float | None = None,
    *,
    report: ClockReport | None = None,
    max_move: float = RETIME_MAX_MOVE,
) -> RetimePlan:
    """How :func:`~mjsysid.data.timing.retime` would move ``times (N,)`` (s), and whether
    that is safe: refused on a clock with rate changes (one grid cannot fit two rates) and
    when any row would move by more than ``max_move`` median periods."""
    t = np.asarray(times, dtype=np.float64)
    report = clock_report(t) if report is None else report
    period = report.period if dt is None else float(dt)
    try:
        new = retime(t, dt)
    except ValueError as e:
        return RetimePlan(period, None, float("inf"), 0, f"retime is impossible: {e}")
    if dt is None and new.size > 1:
        period = float((new[-1] - new[0]) / max(1.0, round((t[-1] - t[0]) / period)))
    move, row = retime_move(t, new)
    plan = RetimePlan(period, new, move, row, "")
    if report.rate_changes:
        reason = (
            f"the rate changes within the recording ({report.describe_segments()}): one grid "
            f"cannot hold both; retime {plan.describe_move()}"
        )
        return RetimePlan(period, new, move, row, reason)
    if move > max_move * report.period:
        reason = f"retime {plan.describe_move()}, more than {max_move:g} of a period"
        return RetimePlan(period, new, move, row, reason)
    return plan


def clock_messages(
    times: np.ndarray, where: str, tolerance: float = JITTER_TOLERANCE
) -> tuple[list[str], list[str]]:
    """``(warnings, notes)`` about the clock of ``times (N,)`` (s): jitter is a warning; rate
    changes (the rows stay at their stamps, which is right for stamps taken at sampling) and
    gaps on an otherwise regular clock are notes. The warnings name the fixes;
    a retime is mentioned only where :func:`retime_plan` allows one, and only as something
    ``mjsysid check`` verifies with a quick fit before it offers it."""
    t = np.asarray(times, dtype=np.float64)
    report = clock_report(t)
    gaps = f"; gaps: {report.describe_gaps()}" if report.gaps else ""
    if report.rate_changes:
        return [], [
            f"{where}: the clock changes rate: {report.describe_segments()}{gaps}. The rows "
            "stay at their stamps (the simulation follows them); do not retime or resample "
            "this recording onto one grid: it would move rows by whole periods. If the "
            "stamps are receive times, use the device's own clock column (time: <column>)"
        ]
    stats = jitter_stats(t, tolerance) if t.size > 2 else None
    if stats is None or not stats.jittery:
        note = f"{where}: the clock has gaps: {report.describe_gaps()}" if report.gaps else ""
        return [], [note] if note else []
    plan = retime_plan(t, report=report)
    ms = 1e3
    retiming = (
        f"not retime ({plan.refused})"
        if plan.refused
        else f"retime: {plan.period:.6g} {plan.describe_move()}; mjsysid check tries it with a "
        "quick fit and suggests it only if the fit improves"
    )
    return [
        f"{where}: the time stamps jitter: median step {stats.median * ms:.4g} ms, spread "
        f"{stats.spread * ms:.3g} ms ({100 * stats.spread / stats.median:.3g} % of the step, "
        f"tolerance {100 * stats.tolerance:.3g} %), std {stats.std * ms:.3g} ms, max deviation "
        f"{stats.max_deviation * ms:.3g} ms, {stats.n_irregular} of {stats.n_steps} steps "
        f"irregular{gaps}. Fix: use the device's own clock column (time: <column>); "
        f"{retiming}; if the samples really are irregular, resample: {stats.median:.6g} "
        "(interpolate onto a grid); or raise jitter_tolerance if the stamps are the true "
        "sample times"
    ], []
