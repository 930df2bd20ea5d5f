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

__all__ = ["LevelBracket", "level_bracket", "threshold_brackets"]


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
    """

    name: str
    value: float
    below: float
    above: float
    direction: str

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
                below, above = level_bracket(
                    sides[j], float(p.value[j]), float(p.min_value[j]), float(p.max_value[j])
                )
                label = name if p.size == 1 else f"{name}[{j}]"
                direction = ("positive", "negative")[j]
                out.append(LevelBracket(label, float(p.value[j]), below, above, direction))
    return out
