"""The "true" system of ``mjsysid simulate --set KIND:TARGET=VALUE``.

Every ``--set`` changes one of three things: a model parameter (``body_mass:pole=0.8``), what
the sensors report (``sensor_delay:*_pos=0.01``) or what the actuators receive
(``control_deadband:motor=0.14,0.08``). :func:`true_system` sorts them into a
:class:`TrueSystem`, checking each against the model before anything is simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np

from mjsysid.objective.control_transform import ControlTransform
from mjsysid.params.parameter import Parameter, ParameterDict
from mjsysid.util.errors import must_be

__all__ = ["SetValue", "TrueSystem", "parse_set", "true_system"]


@dataclass(frozen=True)
class SetValue:
    """One ``--set KIND:TARGET=V[,V...]``.

    Attributes:
        kind: Parameter kind, sensor effect or control effect (``body_mass``).
        target: Element name or pattern (``pole``, ``*_pos``).
        values: The values, shape ``(n,)``, finite.
        item: The argument as given, for error messages.
    """

    kind: str
    target: str
    values: np.ndarray
    item: str


@dataclass
class TrueSystem:
    """What the ``--set`` arguments change about the model.

    Attributes:
        truth: Model parameters with their true values.
        effects: Sensor effects ``(kind, target, values)`` for ``apply_sensor_effects``.
        commands: What the actuators receive, given the commands.
        command_values: The values of ``commands``' parameters (named by their ``--set``).
    """

    truth: ParameterDict = field(default_factory=ParameterDict)
    effects: list[tuple[str, str, np.ndarray]] = field(default_factory=list)
    commands: ControlTransform = field(default_factory=ControlTransform)
    command_values: ParameterDict = field(default_factory=ParameterDict)


def parse_set(items: Sequence[str]) -> list[SetValue]:
    """Every ``--set KIND:TARGET=V[,V...]``, split and its values checked finite."""
    out = []
    for item in items:
        try:
            left, value = item.split("=", 1)
            kind, target = left.split(":", 1)
            values = np.array([float(v) for v in value.split(",")])
        except ValueError:
            raise ValueError(
                f"--set must look like KIND:TARGET=VALUE (e.g. body_mass:pole=0.8, or "
                f"VALUE,VALUE,... for a parameter of several values), got {item!r}"
            ) from None
        if not np.all(np.isfinite(values)):
            raise ValueError(must_be(f"--set {item!r}: VALUE", "finite", values))
        out.append(SetValue(kind.strip(), target.strip(), values, item))
    return out


def _add_command_effect(system: TrueSystem, model: mujoco.MjModel, s: SetValue) -> None:
    """Adds ``--set control_*:PATTERN=V[,V]`` to the commands' transform (checked now)."""
    op = s.kind.split("_", 1)[1]
    sizes = (1,) if op == "offset" else (1, 2)
    if s.values.size not in sizes:
        expected = "one number" if op == "offset" else "one or two numbers (positive, negative)"
        raise ValueError(must_be(f"--set {s.item!r}: VALUE", expected, s.values))
    if op == "deadband" and np.any(s.values < 0):
        raise ValueError(must_be(f"--set {s.item!r}: VALUE", "a deadband >= 0", s.values))
    name = s.item  # the --set argument itself names it in any error
    inf = np.full(s.values.size, np.inf)
    system.command_values.add(Parameter(name, s.values, -inf, inf))
    one = getattr(ControlTransform(), op)(s.target, name)
    try:
        one.validate(model)
    except ValueError as e:
        raise ValueError(f"--set {s.item!r}: {str(e).split(': ', 1)[1]}") from None
    getattr(system.commands, op)(s.target, name)


def _model_parameter(spec: mujoco.MjSpec, model: mujoco.MjModel, s: SetValue) -> Parameter:
    """The unbounded parameter ``s`` sets, with its true value (errors without the prefix)."""
    from mjsysid.params.inertia import body_inertia_param
    from mjsysid.params.kinds import INERTIA_KINDS, KINDS, make_parameter

    if s.kind in INERTIA_KINDS:
        p = body_inertia_param(spec, model, s.target, INERTIA_KINDS[s.kind])
        p.min_value[:] = -np.inf
        p.max_value[:] = np.inf
    else:
        p = make_parameter(s.kind, model, s.target, min_value=-np.inf, max_value=np.inf)
        lower = KINDS[s.kind].lower
        if lower is not None and np.any(s.values < lower):
            raise ValueError(
                must_be(
                    "VALUE",
                    f">= {lower:g} ({KINDS[s.kind].lower_reason})",
                    s.values.tolist() if s.values.size > 1 else float(s.values[0]),
                )
            )
    if s.values.size != p.size:
        raise ValueError(
            must_be(
                "VALUE",
                "one number" if p.size == 1 else f"{p.size} comma-separated numbers",
                s.values,
            )
        )
    p.value = s.values
    return p


def true_system(sets: Sequence[SetValue], spec: mujoco.MjSpec, model: mujoco.MjModel) -> TrueSystem:
    """Sorts the ``--set`` values into parameters, sensor effects and control effects.

    Raises:
        ValueError: An unknown kind, a target the model lacks or a value out of range; the
            message starts with ``--set 'ITEM':``.
    """
    from mjsysid.params.kinds import ALL_KINDS, CONTROL_KINDS
    from mjsysid.sim.sensor_effects import SIGNAL_EFFECTS

    system = TrueSystem()
    for s in sets:
        if s.kind not in ALL_KINDS:
            raise ValueError(must_be(f"--set {s.item!r}: KIND", f"one of {ALL_KINDS}", s.kind))
        if s.kind in SIGNAL_EFFECTS:
            system.effects.append((s.kind, s.target, s.values))
        elif s.kind in CONTROL_KINDS:
            _add_command_effect(system, model, s)
        else:
            try:
                system.truth.add(_model_parameter(spec, model, s))
            except (KeyError, ValueError) as e:
                msg = e.args[0] if isinstance(e, KeyError) else str(e)
                raise ValueError(f"--set {s.item!r}: {msg}") from None
    return system
