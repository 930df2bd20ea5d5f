"""Input nonlinearities: what an actuator makes of its command, fitted like any parameter.

A motor driver often does not pass the command through unchanged: a small command does not
overcome the driver's threshold, and the two directions need not be equally strong (the
hobby H-bridge whose motor needs 14 % duty forwards and 8 % backwards before it turns).
MuJoCo's actuators cannot express that, so :class:`ControlTransform` applies it to the
recorded controls of every candidate before the rollout (the model is not changed). For a
command ``u`` of a matched actuator:

* ``deadband(pattern, d)``, ``d = (d₊, d₋) ≥ 0`` (one value: both):
  ``u − d₊`` for ``u > d₊``, ``u + d₋`` for ``u < −d₋``, else ``0``. Continuous in ``u``
  and ``d`` (a band that swallowed the command entirely would leave ``d`` without a gradient
  on recorded commands; this one is fitted like any other parameter).
* ``gain(pattern, g)``, ``g = (g₊, g₋)`` (one value: both): ``g₊·u`` for ``u ≥ 0``,
  ``g₋·u`` for ``u < 0``.
* ``offset(pattern, c)``: ``u + c``.

The band models a driver whose output loses ``d`` (a voltage drop, a minimum duty cycle
that only starts the motor); one that passes ``u`` unchanged above a threshold is the jump
form, which gradient-based fits cannot identify. MuJoCo then clamps the transformed command to
the actuator's ``ctrlrange`` (when ``ctrllimited``): a gain or offset that only moves clamped
commands changes nothing and is not identified.

``deadband`` and ``gain`` also take ``direction="positive"`` or ``"negative"``: one value,
for that side only (the other side's commands pass unchanged), so the two sides can be
separate parameters, as in an experiment file. Operations run in the order they were
declared, each on the result of the previous ones.
Patterns are ``fnmatch`` patterns over actuator names. The parameters are named, like a
:class:`~mjsysid.objective.signal_transform.SignalTransform`'s: the values used are those of the
candidate being evaluated. Use it with
``build_residual_fn(..., control_transform=transform)``. The identified values are in the
saved parameter files; the saved MJCF cannot hold them (apply the same transform in the
controller, or compensate the command).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import mujoco
import numpy as np

from mjsysid.params.parameter import Parameter, ParameterDict
from mjsysid.util.errors import did_you_mean, must_be

_SIZES = {"deadband": (1, 2), "gain": (1, 2), "offset": (1,)}
_DIRECTIONS = ("both", "positive", "negative")


@dataclass(frozen=True)
class _Op:
    kind: str
    pattern: str
    param: str
    direction: str = "both"


class ControlTransform:
    """Deadbands, direction-dependent gains and offsets on the commands (module docstring)."""

    def __init__(self) -> None:
        self._ops: list[_Op] = []

    def deadband(
        self, pattern: str, param: Parameter | str, direction: str = "both"
    ) -> ControlTransform:
        """Commands of the matched actuators inside ``(−d₋, d₊)`` do nothing, the others lose
        ``d``; ``param`` holds ``d`` (one value) or ``(d₊, d₋)``, all ``>= 0``."""
        return self._add("deadband", pattern, param, direction)

    def gain(
        self, pattern: str, param: Parameter | str, direction: str = "both"
    ) -> ControlTransform:
        """Scales the commands, by ``g₊`` when positive and ``g₋`` when negative (one value:
        both)."""
        return self._add("gain", pattern, param, direction)

    def offset(self, pattern: str, param: Parameter | str) -> ControlTransform:
        """Adds the parameter's value to the commands."""
        return self._add("offset", pattern, param, "both")

    def _add(
        self, kind: str, pattern: str, param: Parameter | str, direction: str
    ) -> ControlTransform:
        if not isinstance(pattern, str) or not pattern:
            raise TypeError(
                must_be(f"ControlTransform.{kind}: pattern", "a non-empty str", pattern)
            )
        name = param.name if isinstance(param, Parameter) else param
        if not isinstance(name, str) or not name:
            raise TypeError(
                must_be(f"ControlTransform.{kind}: param", "a Parameter or a parameter name", param)
            )
        if direction not in _DIRECTIONS:
            raise ValueError(
                must_be(f"ControlTransform.{kind}: direction", f"one of {_DIRECTIONS}", direction)
            )
        self._ops.append(_Op(kind, pattern, name, direction))
        return self

    @property
    def parameter_names(self) -> list[str]:
        """Names of the parameters the transform reads."""
        return list(dict.fromkeys(op.param for op in self._ops))

    def columns(self, model: mujoco.MjModel, pattern: str) -> np.ndarray:
        """Actuator indices (control columns) whose names match ``pattern``."""
        names = [model.actuator(i).name for i in range(model.nu)]
        return np.array([i for i, n in enumerate(names) if fnmatch.fnmatchcase(n, pattern)], int)

    def validate(self, model: mujoco.MjModel, params: ParameterDict | None = None) -> None:
        """Every pattern matches an actuator of ``model``; with ``params``, every parameter
        exists with a valid size (and a deadband is never negative within its bounds)."""
        names = [model.actuator(i).name for i in range(model.nu)]
        for op in self._ops:
            where = f"ControlTransform.{op.kind}({op.pattern!r}, {op.param!r})"
            if not self.columns(model, op.pattern).size:
                raise ValueError(
                    f"{where}: the pattern must match at least one actuator, got none; "
                    f"actuators: {names}{did_you_mean(op.pattern, names)}"
                )
            if params is None:
                continue
            if op.param not in params:
                raise KeyError(f"{where}: no parameter named {op.param!r}")
            p = params[op.param]
            allowed = _SIZES[op.kind] if op.direction == "both" else (1,)
            if p.size not in allowed:
                expected = "one value" if allowed == (1,) else "one or two values"
                raise ValueError(must_be(f"{where}: the parameter", expected, p.value))
            if op.kind == "deadband" and np.any(p.min_value < 0):
                raise ValueError(
                    must_be(f"{where}: the parameter's min_value", "0 or more", p.min_value)
                )

    def apply(
        self, params: ParameterDict, control: np.ndarray, model: mujoco.MjModel
    ) -> np.ndarray:
        """The transformed commands, a new ``(N, nu)`` array (``control`` is not changed)."""
        u = np.array(control, dtype=np.float64)
        for op in self._ops:
            cols = self.columns(model, op.pattern)
            v = params[op.param].value
            x = u[:, cols]
            if op.kind == "offset":
                u[:, cols] = x + v[0]
                continue
            pos = v[0] if op.direction != "negative" else None
            neg = v[-1] if op.direction != "positive" else None
            if op.kind == "gain":
                x = x * np.where(x >= 0.0, 1.0 if pos is None else pos, 1.0 if neg is None else neg)
            else:
                if pos is not None:  # x > d₊ loses d₊, [0, d₊] does nothing
                    x = np.where(x > pos, x - pos, np.where(x >= 0.0, 0.0, x))
                if neg is not None:  # x < −d₋ gains d₋, [−d₋, 0) does nothing
                    x = np.where(x < -neg, x + neg, np.where(x < 0.0, 0.0, x))
            u[:, cols] = x
        return u


__all__ = ["ControlTransform"]
