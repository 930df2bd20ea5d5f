"""``robot.yaml``: the identified robot in the robot-config schema hobby projects load.

A hobby robot project (the rotary pendulum of the source document ``001``) keeps its robot as
a URDF beside a ``robot.yaml`` that its simulator loads::

    urdf: robot.urdf
    actuators:
    - joint: motor_joint
      type: motor                    # motor | position | velocity
      gear: [0.424, 0.425]           # torque constant per unit ctrl [positive, negative]
      ctrl_range: [-0.592, 0.592]
      deadzone: [0.141, 0.078]       # smallest |ctrl| that drives [positive, negative]
      damping: [0.002, 0.015]        # viscous friction [positive, negative velocity]
      frictionloss: [0.057, 0.053]   # Coulomb friction [positive, negative velocity]
      filter_tau: 0.005              # first-order filter on the command (s)
      viscous_quadratic: 0.000285
      back_emf_gain: 0.0068
      kp: 0.0                        # position / velocity types
      kv: 0.0
    joints:
      motor_joint: {damping: 0.0, armature: 0.0028, frictionloss: 0.0}

:func:`robot_yaml` writes the identified model in exactly that schema (no other keys, so that
the project's loader, which refuses unknown keys, reads it), each value at full precision
with its unit in a comment:

* one actuator entry per actuator of a joint whose type the schema has (a ``motor``: fixed
  gain, no bias; a ``position`` or ``velocity`` servo: affine bias): ``gear`` the native
  gear, or the per-direction pair of the actuator's
  :class:`~mjsysid.sim.laws.motors.RobotYamlMotor` law with its ``deadzone``, ``damping``,
  ``frictionloss``, ``viscous_quadratic`` and ``back_emf_gain``; ``filter_tau`` the native
  filter's time constant; ``ctrl_range`` the native one;
* one ``joints`` entry per hinge and slide joint: its native ``damping``, ``armature`` and
  ``frictionloss``.

What the schema cannot hold (other actuator types, other force laws, signal transforms) is
named in the header comment; it is in ``identified.yaml``, the identified MJCF and
``params_x_hat.yaml``. Window starts and other initial states are never in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np

from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.laws.core import ForceLaw, law_values, laws_from_params
from mjsysid.sim.laws.motors import RobotYamlMotor

__all__ = ["robot_yaml"]

# The schema's fields with their units (a motor's gear: N·m per unit of command).
_UNITS = {
    "gear": "N·m per unit ctrl [positive, negative]",
    "ctrl_range": "ctrl",
    "deadzone": "ctrl [positive, negative]",
    "damping": "N·m·s/rad [positive, negative velocity]",
    "frictionloss": "N·m [positive, negative velocity]",
    "filter_tau": "s",
    "viscous_quadratic": "N·m·s²/rad²",
    "back_emf_gain": "N·m·s/rad",
    "kp": "N·m/rad",
    "kv": "N·m·s/rad",
}
_JOINT_UNITS = {"damping": "N·m·s/rad", "armature": "kg·m²", "frictionloss": "N·m"}
_FILTER, _FILTER_EXACT = int(mujoco.mjtDyn.mjDYN_FILTER), int(mujoco.mjtDyn.mjDYN_FILTEREXACT)
_HINGE, _SLIDE = int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)
_UNLIMITED = 1e10  # the ctrl_range written for an actuator without one (the schema has none)


def _num(x: float) -> str:
    """A number as YAML reads it back exactly (``repr`` of the double)."""
    v = float(x)
    if not np.isfinite(v):
        return ".inf" if v > 0 else ("-.inf" if v < 0 else ".nan")
    return repr(v)


def _pair(values: Any) -> str:
    return f"[{_num(values[0])}, {_num(values[-1])}]"


def _kind(model: mujoco.MjModel, i: int) -> tuple[str | None, dict[str, float]]:
    """The schema's type of actuator ``i`` and its ``kp``/``kv`` (``None``: no such type)."""
    gain, bias = int(model.actuator_gaintype[i]), int(model.actuator_biastype[i])
    if gain != int(mujoco.mjtGain.mjGAIN_FIXED):
        return None, {}
    if bias == int(mujoco.mjtBias.mjBIAS_NONE):
        return "motor", {}
    if bias != int(mujoco.mjtBias.mjBIAS_AFFINE):
        return None, {}
    g, b = float(model.actuator_gainprm[i, 0]), model.actuator_biasprm[i]
    if b[1] != 0 and np.isclose(-b[1], g):
        return "position", {"kp": g, "kv": float(-b[2])}
    if b[1] == 0 and np.isclose(-b[2], g):
        return "velocity", {"kp": g}
    return None, {}


def _actuator_lines(
    model: mujoco.MjModel, i: int, law: RobotYamlMotor | None, values: Mapping[str, np.ndarray]
) -> list[str] | None:
    kind, gains = _kind(model, i)
    joint_id = int(model.actuator_trnid[i, 0])
    if kind is None or int(model.actuator_trntype[i]) != int(mujoco.mjtTrn.mjTRN_JOINT):
        return None
    fields: list[tuple[str, str]] = [("joint", model.joint(joint_id).name), ("type", kind)]
    gear = values["gear"][0] if law is not None else [model.actuator_gear[i, 0]] * 2
    fields.append(("gear", _pair(gear)))
    lo, hi = (
        model.actuator_ctrlrange[i] if model.actuator_ctrllimited[i] else (-_UNLIMITED, _UNLIMITED)
    )
    fields.append(("ctrl_range", _pair([lo, hi])))
    if law is not None:
        for key in ("deadzone", "damping", "frictionloss"):
            fields.append((key, _pair(values[key][0])))
    if int(model.actuator_dyntype[i]) in (_FILTER, _FILTER_EXACT):
        fields.append(("filter_tau", _num(model.actuator_dynprm[i, 0])))
    if law is not None:
        for key in ("viscous_quadratic", "back_emf_gain"):
            fields.append((key, _num(values[key][0, 0])))
    fields += [(k, _num(v)) for k, v in gains.items()]
    lines = []
    for n, (key, text) in enumerate(fields):
        unit = f"  # {_UNITS[key]}" if key in _UNITS else ""
        lines.append(f"{'- ' if n == 0 else '  '}{key}: {text}{unit}")
    if not model.actuator_ctrllimited[i]:
        lines[3] += " (unlimited in the identified model)"
    return lines


def robot_yaml(params: ParameterDict, model: mujoco.MjModel, robot_file: str) -> str:
    """The text of ``robot.yaml`` for the identified ``model`` (module docstring).

    Args:
      params: The identified parameters (their force laws' values are read from them).
      model: The identified compiled model.
      robot_file: What ``urdf:`` names: the identified URDF, or the identified MJCF (both
        load in MuJoCo), beside ``robot.yaml``.
    """
    laws = laws_from_params(params)
    motors: dict[str, RobotYamlMotor] = {
        law.actuator: law for law in laws if isinstance(law, RobotYamlMotor)
    }
    others: list[ForceLaw] = [law for law in laws if not isinstance(law, RobotYamlMotor)]
    skipped: list[str] = []
    actuators: list[str] = []
    for i in range(model.nu):
        name = model.actuator(i).name
        law = motors.get(name)
        values = law_values(law, params) if law is not None else {}
        lines = _actuator_lines(model, i, law, values)
        if lines is None:
            skipped.append(f"actuator {name or i!r}")
        else:
            actuators += lines
    joints: list[str] = []
    for j in range(model.njnt):
        if int(model.jnt_type[j]) not in (_HINGE, _SLIDE):
            continue
        dof = int(model.jnt_dofadr[j])
        joints.append(f"  {model.joint(j).name}:")
        for key, value in (
            ("damping", model.dof_damping[dof]),
            ("armature", model.dof_armature[dof]),
            ("frictionloss", model.dof_frictionloss[dof]),
        ):
            joints.append(f"    {key}: {_num(value)}  # {_JOINT_UNITS[key]}")
    skipped += [f"force law {law.name!r}" for law in others]
    ramps = [f"{law.name!r} ({law.width!r})" for law in motors.values() if law.width > 0]
    header = [
        "# The identified robot (mjsysid), in the robot.yaml schema: a URDF (or MJCF) beside",
        "# actuators and joint overrides; units in the comments (a slide joint's are per metre).",
    ]
    if skipped:
        header.append(
            "# Not expressible in this schema (see identified.yaml, the identified MJCF and "
            "params_x_hat.yaml): " + ", ".join(skipped)
        )
    if ramps:
        header.append(
            "# The deadzone's edge was fitted as a ramp of this width in ctrl (this schema's "
            "simulator cuts at the deadzone): " + ", ".join(ramps)
        )
    body = [f"urdf: {robot_file}", "actuators:" + ("" if actuators else " []"), *actuators]
    body += ["joints:" + ("" if joints else " {}"), *joints]
    return "\n".join(header + body) + "\n"
