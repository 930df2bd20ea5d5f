"""Progress of counted work: the callback library functions take, and a text bar for it.

Library code never prints: a function whose work can be counted (rows of a file parsed,
videos of a report rendered) takes an optional ``progress`` callback, a :data:`Progress`,
and calls it as ``progress(done, total)``. The command line passes a :class:`ProgressBar`
that draws on stderr::

    reading 'run.csv' [############------------------]  40 %  400000/1000000

The bar redraws at most every ``interval`` seconds (and at the end), only when its stream is
a terminal or it is asked to (``enabled=True``), and never with ``quiet`` (``-q``). No
dependency: ``tqdm`` was weighed and is not clearly better here. The callback protocol stays
ours either way (library functions take ``progress(done, total)``, not a tqdm object); what a
bar adds over these 60 lines is rate and ETA, which a file read in seconds does not need,
against a new core dependency, its own line format (the tests pin ours) and its own rules for
non-terminals (it draws on a pipe unless told ``disable=None``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

Progress = Callable[[int, int], None]
"""``progress(done, total)``: ``done`` of ``total`` units of work finished (``0 <= done <=
total``); called from the thread doing the work, cheap enough for every few thousand units."""


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (``False`` when it cannot tell)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed or detached stream
        return False


@dataclass
class ProgressBar:
    """A :data:`Progress` drawing a one-line text bar on ``stream``.

    Attributes:
      stream: Where to draw (stderr on the command line).
      label: What is counted, e.g. ``"reading 'run.csv'"``.
      enabled: Draw at all; default: only when ``stream`` is a terminal.
      interval: Least time between redraws (s); the first and the last call always draw.
      width: Characters of the bar itself.
    """

    stream: TextIO
    label: str
    enabled: bool | None = None
    interval: float = 0.2
    width: int = 30
    _last: float = field(default=-1.0, repr=False)
    _drawn: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.enabled is None:
            self.enabled = is_terminal(self.stream)

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        final = done >= total
        if self._drawn and not final and now - self._last < self.interval:
            return
        self._last, self._drawn = now, True
        self.stream.write("\r" + self.line(done, total) + ("\n" if final else ""))
        self.stream.flush()
        if final:
            self.enabled = False  # (one finished line; later calls are ignored)

    def line(self, done: int, total: int) -> str:
        """The bar for ``done`` of ``total``, e.g. ``label [####------]  40 %  4/10``."""
        share = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
        filled = round(share * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        return f"{self.label} [{bar}] {100 * share:3.0f} %  {done}/{total}"

    def close(self) -> None:
        """Ends an unfinished bar's line (after an error or an early stop)."""
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False


def progress_bar(
    stream: TextIO, label: str, *, quiet: bool = False, enabled: bool | None = None
) -> ProgressBar | None:
    """A :class:`ProgressBar` on ``stream``, or ``None`` with ``quiet`` or where it would not
    draw (not a terminal and not ``enabled``), so that the work skips the calls."""
    if quiet:
        return None
    bar = ProgressBar(stream, label, enabled=enabled)
    return bar if bar.enabled else None


def clock_time(seconds: float) -> str:
    """``seconds`` as ``m:ss`` (``h:mm:ss`` from an hour on); ``"?"`` when not finite."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def iteration_line(
    n: int, max_iters: int, cost: float, elapsed: float, left: float, label: str = ""
) -> str:
    """One progress line of a fit, e.g.
    ``iter   3/100  cost 1.234568e-03  elapsed 0:02  ETA <= 1:05``.

    Args:
      n: Iterations done (the one just finished). max_iters: The iteration limit.
      cost: The cost after iteration ``n``. elapsed: Seconds since the fit started.
      left: Seconds the iterations up to ``max_iters`` would take at the pace so far: an
        upper bound (a fit usually converges before its limit), hence ``<=``.
      label: Prefix naming the stage (``"first 30 %  "``).
    """
    width = len(str(max_iters))
    return (
        f"{label}iter {n:{width + 1}d}/{max_iters}  cost {cost:.6e}  "
        f"elapsed {clock_time(elapsed)}  ETA <= {clock_time(left)}"
    )


@dataclass
class IterationClock:
    """The time of a fit's iterations: :meth:`line` says how far it is and how long the
    rest may take, at the mean pace of the iterations since the clock started."""

    started: float = field(default_factory=time.monotonic)
    _first: int | None = field(default=None, repr=False)

    def line(self, n: int, max_iters: int, cost: float, label: str = "") -> str:
        """:func:`iteration_line` for iteration ``n`` (the first one seen is counted as the
        first of this run: a resumed fit's pace is its own)."""
        elapsed = time.monotonic() - self.started
        if self._first is None:
            self._first = n - 1
        done = n - self._first
        left = elapsed / done * max(max_iters - n, 0) if done > 0 else float("nan")
        return iteration_line(n, max_iters, cost, elapsed, left, label)
