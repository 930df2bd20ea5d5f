"""Signal mappings of a whole model: every sensor, every state entry, every control.

These are the mappings ``mujoco.sysid`` builds for a rollout (``TimeSeries.compute_all_*``):

* sensors: ``{sensor: (MjSensor, sensor_adr + arange(sensor_dim))}``, indices into
  ``sensordata``;
* states: indices into the stacked vector ``[qpos | qvel | act]`` (no time entry): a joint's
  ``"<joint>_qpos"`` (free 7, ball 4, hinge/slide 1 entries) and ``"<joint>_qvel"`` (6/3/1,
  offset by ``nq``), an actuator's activation ``"<actuator>_act"`` (offset by ``nq + nv``);
* controls: ``"<actuator>_ctrl"``: ``[actuator id]``, indices into ``ctrl``.

A free joint is keyed by its **body**'s name (also when the joint has a name of its own), as
``mujoco.sysid`` does; a body without a name falls back to the joint's name. Unnamed sensors,
joints and actuators have no key and are left out (their entries are simply not mapped).
"""

from __future__ import annotations

import mujoco
import numpy as np

from mjsysid.data.signals import (
    _QPOS_WIDTH,
    _QVEL_WIDTH,
    SignalType,
    _find,
    _names,
    _preview,
    _SignalKeyError,
    _unknown,
)
from mjsysid.data.timeseries_files import SignalMapping

__all__ = [
    "compute_all_control_mapping",
    "compute_all_sensor_mapping",
    "compute_all_state_mappings",
    "state_entries",
]

_FREE = int(mujoco.mjtJoint.mjJNT_FREE)


def _block(start: int, width: int) -> np.ndarray:
    idx = np.arange(start, start + width, dtype=np.intp)
    idx.flags.writeable = False
    return idx


def joint_key_names(model: mujoco.MjModel) -> list[str]:
    """The name each joint's state is keyed by (``""`` for none), in joint order.

    The joint's name, except for a free joint: its body's name (the joint's name when the
    body has none).
    """
    joints = _names(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt)
    bodies = _names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody)
    out = []
    for j, jname in enumerate(joints):
        body = bodies[int(model.jnt_bodyid[j])]
        out.append((body or jname) if int(model.jnt_type[j]) == _FREE else jname)
    return out


def _add(out: SignalMapping, key: str, kind: SignalType, idx: np.ndarray) -> None:
    if key in out:
        raise ValueError(
            f"state names must be unique, got {key!r} twice (a free joint is keyed by its "
            "body's name: rename the body or the other joint)"
        )
    out[key] = (kind, idx)


def compute_all_state_mappings(
    model: mujoco.MjModel,
) -> tuple[SignalMapping, SignalMapping, SignalMapping, SignalMapping]:
    """``(qpos, qvel, act, ctrl)`` mappings of every named joint and actuator of ``model``.

    qpos/qvel/act indices point into ``[qpos | qvel | act]`` (length ``nq + nv + na``); ctrl
    indices into ``ctrl`` (see the module docstring for the names).
    """
    qpos: SignalMapping = {}
    qvel: SignalMapping = {}
    for j, base in enumerate(joint_key_names(model)):
        if not base:
            continue
        jtype = int(model.jnt_type[j])
        adr, dof = int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])
        _add(qpos, f"{base}_qpos", SignalType.MjStateQPos, _block(adr, _QPOS_WIDTH[jtype]))
        _add(
            qvel, f"{base}_qvel", SignalType.MjStateQVel, _block(model.nq + dof, _QVEL_WIDTH[jtype])
        )
    act: SignalMapping = {}
    for a, name in enumerate(_names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)):
        if name and int(model.actuator_actadr[a]) >= 0:
            start = model.nq + model.nv + int(model.actuator_actadr[a])
            act[f"{name}_act"] = (
                SignalType.MjStateAct,
                _block(start, int(model.actuator_actnum[a])),
            )
    return qpos, qvel, act, compute_all_control_mapping(model)


def compute_all_sensor_mapping(model: mujoco.MjModel) -> SignalMapping:
    """``{sensor: (MjSensor, indices into sensordata)}`` of every named sensor, model order."""
    out: SignalMapping = {}
    for i, name in enumerate(_names(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)):
        if name:
            idx = _block(int(model.sensor_adr[i]), int(model.sensor_dim[i]))
            out[name] = (SignalType.MjSensor, idx)
    return out


def compute_all_control_mapping(model: mujoco.MjModel) -> SignalMapping:
    """``{"<actuator>_ctrl": (MjCtrl, [actuator id])}`` of every named actuator."""
    out: SignalMapping = {}
    for i, name in enumerate(_names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)):
        if name:
            out[f"{name}_ctrl"] = (SignalType.MjCtrl, _block(i, 1))
    return out


def _free_joint_by_body(model: mujoco.MjModel, name: str, suffix: str) -> int:
    """Id of the free joint keyed ``name`` (``"<body>"`` or ``"<body><suffix>"``), else -1."""
    base = name[: -len(suffix)] if name.endswith(suffix) else name
    for j, key in enumerate(joint_key_names(model)):
        if key == base and int(model.jnt_type[j]) == _FREE:
            return j
    return -1


def state_entries(model: mujoco.MjModel, name: str, kind: SignalType) -> tuple[int, int]:
    """``(start, width)`` of a named state inside ``qpos``, ``qvel`` or ``act``.

    Args:
      model: Compiled model.
      name: For ``MjStateQPos``/``MjStateQVel``: a joint name, ``"<joint>_qpos"`` /
        ``"<joint>_qvel"``, or for a free joint its body's name (with or without the suffix,
        the key of :func:`compute_all_state_mappings`). For ``MjStateAct``: an actuator name
        or ``"<actuator>_act"``.
      kind: ``MjStateQPos``, ``MjStateQVel`` or ``MjStateAct``.

    Raises:
      KeyError: Unknown name (the message lists the known keys).
      ValueError: ``MjStateAct`` for an actuator without activation state.
    """
    if kind is SignalType.MjStateAct:
        _, aid = _find(model, name, kind)
        return int(model.actuator_actadr[aid]), int(model.actuator_actnum[aid])
    suffix = "_qpos" if kind is SignalType.MjStateQPos else "_qvel"
    try:
        _, jid = _find(model, name, kind)
    except _SignalKeyError:
        jid = _free_joint_by_body(model, name, suffix) if isinstance(name, str) else -1
        if jid < 0:
            keys = [k + suffix for k in joint_key_names(model) if k]
            raise _unknown("state", name, keys, f"(known: {_preview(keys)})") from None
    jtype = int(model.jnt_type[jid])
    if kind is SignalType.MjStateQPos:
        return int(model.jnt_qposadr[jid]), _QPOS_WIDTH[jtype]
    return int(model.jnt_dofadr[jid]), _QVEL_WIDTH[jtype]
