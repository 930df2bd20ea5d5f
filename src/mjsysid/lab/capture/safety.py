"""Safety during a capture: soft and hard limits on named fields, and the reset phase."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mjsysid.lab.capture.device import Limit, Reset


def hard_violation(limits: Sequence[Limit], values: Mapping[str, float]) -> str | None:
    """A message for the first field outside its hard range, or ``None``."""
    for lim in limits:
        if lim.hard is None:
            continue
        v = values[lim.field]
        if not lim.hard[0] <= v <= lim.hard[1]:
            return (
                f"hard limit: {lim.field} = {v:.6g} is outside [{lim.hard[0]:g}, {lim.hard[1]:g}]"
            )
    return None


def soft_override(
    limits: Sequence[Limit], values: Mapping[str, float], command: float, stop_value: float
) -> tuple[float, bool]:
    """``(command, overridden)``: outside a soft range, a command pushing the field further
    out (``direction * (command - stop_value)`` of the outward sign) becomes ``stop_value``."""
    for lim in limits:
        if lim.soft is None:
            continue
        v, push = values[lim.field], lim.direction * (command - stop_value)
        if (v > lim.soft[1] and push > 0) or (v < lim.soft[0] and push < 0):
            return stop_value, True
    return command, False


@dataclass
class ResetPhase:
    """Drives ``reset.field`` to its target, then waits until the device is still.

    The command is ``clip(gain * (target - x), ±max_command)`` while ``|target - x|`` exceeds
    the tolerance, else ``stop_value``; the phase is done when ``x`` is within tolerance and
    every ``still`` field varied less than ``within`` over the last ``still_for`` seconds.
    """

    reset: Reset
    stop_value: float
    history: deque[tuple[float, tuple[float, ...]]] = field(default_factory=deque)

    def command(self, t: float, values: Mapping[str, float]) -> float | None:
        """The command for the sample at device time ``t`` (s), or ``None`` when done."""
        r = self.reset
        error = r.target - values[r.field]
        self.history.append((t, tuple(values[f] for f in r.still)))
        while self.history and self.history[0][0] < t - r.still_for:
            self.history.popleft()
        if abs(error) > r.tolerance:
            self.history.clear()
            return self.stop_value + max(-r.max_command, min(r.max_command, r.gain * error))
        span = self.history[-1][0] - self.history[0][0] if self.history else 0.0
        if span >= r.still_for * 0.999 and self._still():
            return None
        return self.stop_value

    def _still(self) -> bool:
        columns = list(zip(*(v for _, v in self.history), strict=True))
        return all(max(c) - min(c) <= self.reset.within for c in columns)
