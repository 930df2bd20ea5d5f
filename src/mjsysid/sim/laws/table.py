"""The library laws as flat tables: what the compiled step (:mod:`mjsysid.sim.laws.compiled`)
reads instead of law objects.

A compiled loop cannot call a law's Python :meth:`~mjsysid.sim.laws.core.ForceLaw.step`;
it runs the library's own kernel of each law kind, chosen by a code, with the law's bound
indices, options and values packed into arrays:

* ``ints`` ``(nlaw, NINT)``: the kind's code, the joint's dof and ``qpos`` index, the
  actuator's index, the options as bit flags, where the law's state and values start, and
  the columns of its recorded inputs and constants;
* ``reals`` ``(nlaw, NREAL)``: the sign smoothing width and the joint's range and gear sign
  (:class:`~mjsysid.sim.laws.motors.RobotYamlMotor`);
* ``values`` ``(nbatch, nvalue)``: every law's parameters for every rollout, two entries a
  parameter (entry 0 and the last entry: a pair's positive and negative direction, or the one
  value twice), in the order of its kind's :data:`SLOTS`; a parameter an option leaves out
  holds 0.

Only the library's own classes have kernels (a subclass may change :meth:`step`); every
other law runs on the lock steps (:mod:`mjsysid.sim.lockstep`). A library law whose
parameters or states are not the ones its kernel reads has none either, so a kernel can
never read a value that is not there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np

from mjsysid.sim.laws.core import ForceLaw, state_start_key
from mjsysid.sim.laws.friction import (
    CoulombFriction,
    JointFriction,
    QuadraticDrag,
    StribeckFriction,
    ViscousFriction,
)
from mjsysid.sim.laws.joint import ActuatedLaw, JointLaw
from mjsysid.sim.laws.motors import CommandTorque, RobotYamlMotor
from mjsysid.sim.laws.servos import CurrentServo, PositionServo

__all__ = ["NINT", "NREAL", "SLOTS", "LawTable", "has_kernel"]

# law kinds (the compiled step dispatches on them)
VISCOUS, COULOMB, STRIBECK, QUADRATIC_DRAG, JOINT_FRICTION = 0, 1, 2, 3, 4
COMMAND_TORQUE, ROBOT_YAML_MOTOR, POSITION_SERVO, CURRENT_SERVO = 5, 6, 7, 8

# ints columns
CODE, DOF, QPOS, CTRL, FLAGS, STATE, VALUE = 0, 1, 2, 3, 4, 5, 6
INPUT = 7  # 3 columns: the law's recorded inputs in its own order (-1: none)
CONSTANT = 10  # 3 columns: its constants in its own order (-1: none)
NINT = 13
# reals columns
WIDTH, LOW, HIGH, GEAR_SIGN = 0, 1, 2, 3
NREAL = 4

# option flags
F_COULOMB, F_VISCOUS, F_STRIBECK, F_FIT_EXPONENT = 1, 2, 4, 8
F_LOAD, F_LOAD_QUADRATIC, F_DRAG, F_LOAD_EXTERNAL, F_STICK = 16, 32, 64, 128, 256
F_DEADZONE, F_BACK_EMF, F_SATURATION = 1, 2, 4
F_LIMIT_SWITCH, F_LIMITED = 1, 2
F_DERIVATIVE, F_SHORT, F_ENABLE, F_VOLTAGE_INPUT = 1, 2, 4, 8

_CODES: dict[type, int] = {
    ViscousFriction: VISCOUS,
    CoulombFriction: COULOMB,
    StribeckFriction: STRIBECK,
    QuadraticDrag: QUADRATIC_DRAG,
    JointFriction: JOINT_FRICTION,
    CommandTorque: COMMAND_TORQUE,
    RobotYamlMotor: ROBOT_YAML_MOTOR,
    PositionServo: POSITION_SERVO,
    CurrentServo: CURRENT_SERVO,
}

#: The parameters each kind's kernel reads, in its order (two value entries each).
# fmt: off
SLOTS: dict[int, tuple[str, ...]] = {
    VISCOUS: ("damping",),
    COULOMB: ("friction",),
    STRIBECK: ("coulomb", "static", "stribeck_velocity", "viscous"),
    QUADRATIC_DRAG: ("drag",),
    JOINT_FRICTION: (
        "coulomb", "viscous", "stribeck", "stribeck_velocity", "stribeck_exponent", "load",
        "load_quadratic", "drag", "load_external",
    ),
    COMMAND_TORQUE: ("deadzone", "torque_constant", "back_emf", "saturation"),
    ROBOT_YAML_MOTOR: (
        "gear", "deadzone", "damping", "frictionloss", "viscous_quadratic", "back_emf_gain",
    ),
    POSITION_SERVO: ("kt", "resistance", "gain", "gain_d"),
    CURRENT_SERVO: ("kt", "max_current"),
}
# fmt: on
_STATES: dict[int, dict[str, int]] = {ROBOT_YAML_MOTOR: {"held": 1}}


def has_kernel(law: ForceLaw) -> bool:
    """Whether the compiled step runs ``law``: a library class itself (not a subclass), with
    only parameters and states its kernel reads (and the joint-space dynamics only where the
    kernel reads them)."""
    code = _CODES.get(type(law))
    if code is None or (law.dynamics and code != JOINT_FRICTION):
        return False
    return set(law.parameters) <= set(SLOTS[code]) and dict(law.states) == _STATES.get(code, {})


# fmt: off
_OPTION_FLAGS: dict[type, dict[str, int]] = {
    JointFriction: {
        "coulomb": F_COULOMB, "viscous": F_VISCOUS, "stribeck": F_STRIBECK,
        "fit_exponent": F_FIT_EXPONENT, "load": F_LOAD, "load_quadratic": F_LOAD_QUADRATIC,
        "drag": F_DRAG, "load_external": F_LOAD_EXTERNAL, "stick": F_STICK,
    },
    CommandTorque: {"deadzone": F_DEADZONE, "back_emf": F_BACK_EMF, "saturation": F_SATURATION},
    RobotYamlMotor: {"limit_switch": F_LIMIT_SWITCH, "limited": F_LIMITED},
    PositionServo: {"derivative": F_DERIVATIVE},
}
# fmt: on


def _flags(law: ForceLaw) -> int:
    """The options of ``law`` as its kind's bit flags."""
    names = _OPTION_FLAGS.get(type(law), {})
    flags = sum(bit for name, bit in names.items() if getattr(law, name))
    if isinstance(law, PositionServo | CurrentServo) and law.enable_input:
        flags |= F_ENABLE
    if isinstance(law, PositionServo):
        flags |= F_SHORT if law.off == "short" else 0
        flags |= F_VOLTAGE_INPUT if law.voltage_input else 0
    return flags


@dataclasses.dataclass(frozen=True)
class LawTable:
    """Bound library laws and their data, packed for the compiled step (module docstring).

    Attributes:
      ints: ``(nlaw, NINT)`` int64. reals: ``(nlaw, NREAL)``.
      values: ``(nbatch, nvalue)`` the laws' parameters per rollout.
      state_start: ``(nbatch, nstate)`` given initial internal states (NaN: the law's own).
      inputs: ``(nbatch, nstep, ninput)`` the recorded inputs on the simulation grid.
      constants: ``(nbatch, nconstant)`` the per-recording constants.
      new_command: ``(nbatch, nstep)`` uint8, whether a command row starts at each step.
    """

    ints: np.ndarray
    reals: np.ndarray
    values: np.ndarray
    state_start: np.ndarray
    inputs: np.ndarray
    constants: np.ndarray
    new_command: np.ndarray

    @classmethod
    def pack(
        cls,
        laws: Sequence[ForceLaw],
        values: Sequence[Mapping[str, np.ndarray]],
        inputs: Mapping[str, np.ndarray],
        constants: Mapping[str, np.ndarray],
        new_command: np.ndarray | None,
        nbatch: int,
        nstep: int,
    ) -> LawTable:
        """Packs bound laws (each :func:`has_kernel`) and their data.

        Args:
          laws: The bound laws, in the order they run.
          values: Per law, ``{parameter: (nbatch, size)}`` (and given initial states).

        Raises:
          KeyError: A law's parameter without values (named).
          inputs: ``{name: (nbatch, nstep)}`` (or broadcastable) recorded inputs.
          constants: ``{name: (nbatch,)}`` (or broadcastable) constants.
          new_command: ``(nbatch, nstep)`` bool, or ``None`` (a row at every step).
          nbatch, nstep: The run's sizes.
        """
        input_names = sorted({n for law in laws for n in law.inputs})
        constant_names = sorted({n for law in laws for n in law.constants})
        ints = np.full((len(laws), NINT), -1, dtype=np.int64)
        reals = np.zeros((len(laws), NREAL))
        codes = [_CODES[type(law)] for law in laws]
        table = np.zeros((nbatch, 2 * sum(len(SLOTS[c]) for c in codes)))
        starts: list[np.ndarray] = []
        column = 0
        for i, (law, code, vals) in enumerate(zip(laws, codes, values, strict=True)):
            joint = cast(JointLaw, law)
            declared = law.parameters  # (a property that builds its dict: read once)
            ints[i, CODE], ints[i, FLAGS] = code, _flags(law)
            ints[i, DOF], ints[i, QPOS] = joint.dof, joint.qpos
            ints[i, CTRL] = joint.ctrl_index if isinstance(joint, ActuatedLaw) else -1
            ints[i, VALUE] = column
            for name in SLOTS[code]:
                if name in declared:
                    if name not in vals:
                        raise KeyError(
                            f"force law {law.name!r}: no values for its parameter {name!r}"
                        )
                    table[:, column : column + 2] = np.asarray(vals[name], float)[:, [0, -1]]
                column += 2
            for name, size in law.states.items():
                ints[i, STATE] = sum(s.shape[1] for s in starts)
                given = vals.get(state_start_key(name))
                start = np.full((nbatch, size), np.nan)
                if given is not None:
                    start[:] = np.asarray(given, float).reshape(nbatch, size)
                starts.append(start)
            for j, name in enumerate(law.inputs):
                ints[i, INPUT + j] = input_names.index(name)
            for j, name in enumerate(law.constants):
                ints[i, CONSTANT + j] = constant_names.index(name)
            reals[i, WIDTH] = joint.width
            if isinstance(law, RobotYamlMotor):
                reals[i, LOW:] = law.low, law.high, law.gear_sign
        new = np.ones((nbatch, nstep), bool) if new_command is None else new_command
        return cls(
            ints,
            reals,
            table,
            np.hstack(starts) if starts else np.zeros((nbatch, 0)),
            _stack([inputs[n] for n in input_names], (nbatch, nstep)),
            _stack([constants[n] for n in constant_names], (nbatch,)),
            np.ascontiguousarray(np.broadcast_to(new, (nbatch, nstep)), dtype=np.uint8),
        )


def _stack(arrays: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """``arrays``, each broadcast to ``shape``, stacked on a new last axis (float64, C order;
    size 0 without arrays)."""
    if not arrays:
        return np.zeros((*shape, 0))
    stacked = np.stack([np.broadcast_to(np.asarray(a, float), shape) for a in arrays], axis=-1)
    return np.ascontiguousarray(stacked)
