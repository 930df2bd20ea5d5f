"""What the recorded command levels tell about a threshold on the command.

A law parameter declared ``command_threshold`` (:class:`~mjsysid.sim.laws.core.LawParameter`:
a deadzone, entry 0 for commands ``u >= 0`` and entry 1 for ``u < 0``) acts on the recorded
commands only through which of them lie above it. Commands are often discrete (integer PWM,
``u = n/255``; a random-hold excitation holds a few dozen levels): a threshold ``d`` drives
every level ``|u| >= d`` and none below, so every ``d`` in ``(L_below, L_above]``, with
``L_below`` the largest recorded level below ``d`` and ``L_above`` the smallest at or above it,
simulates the recording alike. The data determine ``d`` to that range and no better, whatever
a linearised interval says (the fitted law may ramp the edge over a few levels to give the
optimizer a slope, which makes such an interval look narrow).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.laws.core import ForceLaw, parameter_name
from mjsysid.sim.laws.joint import ActuatedLaw

__all__ = [
    "COARSE_GAP",
    "LevelBracket",
    "coarse_level_notes",
    "level_bracket",
    "threshold_brackets",
]


@dataclass(frozen=True)
class LevelBracket:
    """The range a command threshold's entry is determined to by the recorded levels.

    Attributes:
      name: The entry (``"motor_deadzone[0]"``).
      value: Its value.
      below, above: The recorded levels around it (command units): every value in
        ``(below, above]`` simulates the recordings alike. ``below`` is the parameter's lower
        bound when no recorded level lies below the value, ``above`` its upper bound when
        none lies at or above it.
      direction: ``"positive"`` (commands ``u >= 0``) or ``"negative"`` (``|u|`` of ``u < 0``).
      levels: Every recorded magnitude of that direction, sorted.
      bounds: The entry's bounds ``(lower, upper)``.
    """

    name: str
    value: float
    below: float
    above: float
    direction: str
    levels: tuple[float, ...] = ()
    bounds: tuple[float, float] = (0.0, np.inf)

    def text(self) -> str:
        """The caveat, in words."""
        return (
            f"{self.name} = {self.value:.6g} is a threshold on the recorded commands: every "
            f"value in ({self.below:.6g}, {self.above:.6g}] (the {self.direction} command "
            "levels the recordings hold around it) drives them alike, so the data determine it "
            "to that range and its interval is widened to it; commands at levels in between "
            "would tell those values apart"
        )


def level_bracket(
    levels: np.ndarray, value: float, lower: float, upper: float
) -> tuple[float, float]:
    """``(L_below, L_above)``: the largest of ``levels`` below ``value`` (``lower`` if none) and
    the smallest at or above it (``upper`` if none).

    Args:
      levels: ``(k,)`` distinct recorded command magnitudes of one direction.
      value: The threshold. lower, upper: The parameter's bounds.
    """
    below = levels[levels < value]
    above = levels[levels >= value]
    return (
        float(below.max()) if below.size else float(lower),
        float(above.min()) if above.size else float(upper),
    )


def threshold_brackets(
    laws: Iterable[ForceLaw], controls: Sequence[np.ndarray], params: ParameterDict
) -> list[LevelBracket]:
    """The :class:`LevelBracket` of every free entry of every ``command_threshold`` parameter.

    Args:
      laws: The force laws, bound to the model (their ``ctrl_index``).
      controls: Per recording, ``(nstep, nu)`` its recorded controls.
      params: The parameters (values and bounds).
    """
    out = []
    for law in laws:
        if not isinstance(law, ActuatedLaw):
            continue
        for key, spec in law.parameters.items():
            name = parameter_name(law, key)
            if not spec.command_threshold or name not in params or params[name].frozen:
                continue
            p = params[name]
            u = np.concatenate([np.asarray(c)[:, law.ctrl_index] for c in controls])
            sides = (np.unique(u[u >= 0]), np.unique(-u[u < 0]))
            for j in range(min(p.size, 2)):
                lo, hi = float(p.min_value[j]), float(p.max_value[j])
                below, above = level_bracket(sides[j], float(p.value[j]), lo, hi)
                out.append(
                    LevelBracket(
                        name if p.size == 1 else f"{name}[{j}]",
                        float(p.value[j]),
                        below,
                        above,
                        ("positive", "negative")[j],
                        tuple(sides[j].tolist()),
                        (lo, hi),
                    )
                )
    return out


COARSE_GAP = 0.02
"""A threshold's recorded levels are coarse when a range between neighbours (within the
parameter's bounds) spans more than this fraction of the bounds (integer PWM in a random-hold
excitation: 2-8 %; a chirp through every level: 1.3 %)."""


def coarse_level_notes(
    laws: Iterable[ForceLaw], controls: Sequence[np.ndarray], params: ParameterDict
) -> list[str]:
    """Before a fit: a note for each free threshold entry whose recorded levels are coarse
    (:data:`COARSE_GAP`), with the widest range between them and the fix.

    Args:
      laws: The force laws, bound to the model. controls: Per recording, ``(nstep, nu)``.
      params: The parameters (bounds).
    """
    out = []
    for b in threshold_brackets(laws, controls, params):
        lo, hi = b.bounds
        if not np.isfinite(hi - lo) or hi <= lo:
            continue
        edges = np.array([lo, *(v for v in b.levels if lo < v < hi), hi])
        k = int(np.argmax(np.diff(edges)))
        if edges[k + 1] - edges[k] <= COARSE_GAP * (hi - lo):
            continue
        out.append(
            f"{b.name} is a threshold on the recorded commands: a fit determines it only to the "
            f"range between the two {b.direction} command levels around it, and the recordings "
            f"hold {edges.size - 2} such levels within its bounds [{lo:.4g}, {hi:.4g}], the "
            f"widest range without one ({edges[k]:.4g}, {edges[k + 1]:.4g}]; commands at more "
            "levels (a chirp, a slow ramp) narrow those ranges"
        )
    return out
