"""Signal types and how a signal name maps onto a MuJoCo model.

A measured signal is a named sensor, a joint's position or velocity (``<joint>_qpos``,
``<joint>_qvel``), an actuator's activation (``<actuator>_act``) or control, or a custom
observation. Canonical names: a sensor keeps its name, a joint state is ``"<joint>_qpos"`` /
``"<joint>_qvel"``, an activation ``"<actuator>_act"`` and a control ``"<actuator>_ctrl"``
(``mujoco.sysid``'s names; :func:`mapping_key` still finds a control keyed by the bare
actuator name, as earlier mjsysid versions wrote it, and the other way round).
:func:`resolve_signal_name` turns a plain name into its canonical name and
:class:`SignalType`; :func:`signal_source_indices` gives the entries of the model's
``sensordata``, ``qpos``, ``qvel``, ``act`` or ``ctrl`` it reads.
"""

from __future__ import annotations

import difflib
import enum
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import mujoco
import numpy as np

from mjsysid.util.errors import must_be

_LIST_LIMIT = 20
_log = logging.getLogger(__name__)


class SignalType(enum.Enum):
    """What a group of columns holds, and so where it comes from in a simulation."""

    MjSensor = "MjSensor"
    """Entries of ``MjData.sensordata`` of one named sensor."""
    CustomObs = "CustomObs"
    """A user-defined observation with no model source (computed in a custom residual)."""
    MjStateQPos = "MjStateQPos"
    """The ``qpos`` entries of one joint (free 7, ball 4, hinge/slide 1)."""
    MjStateQVel = "MjStateQVel"
    """The ``qvel`` (dof) entries of one joint (free 6, ball 3, hinge/slide 1)."""
    MjStateAct = "MjStateAct"
    """The activation (``act``) entries of one actuator with activation dynamics."""
    MjCtrl = "MjCtrl"
    """The ``ctrl`` entry of one actuator."""


class SignalNameError(KeyError, ValueError):
    """A signal name the model or the series does not have.

    Both a ``KeyError`` (a name not found) and a ``ValueError`` (``mujoco.sysid`` raises that
    one), so handlers written for either catch it; its message prints as written
    (``KeyError`` alone would quote it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def preview_names(names: Sequence[str]) -> str:
    shown = list(names[:_LIST_LIMIT])
    more = len(names) - len(shown)
    return f"{shown}" + (f" (and {more} more)" if more > 0 else "")


def check_model(model: Any) -> None:
    if isinstance(model, mujoco.MjModel):
        return
    hint = "call spec.compile() first" if isinstance(model, mujoco.MjSpec) else ""
    raise TypeError(must_be("model", "a compiled mujoco.MjModel", model, hint))


def object_names(model: mujoco.MjModel, obj: mujoco.mjtObj, count: int) -> list[str]:
    return [mujoco.mj_id2name(model, obj, i) or "" for i in range(count)]


def _id(model: mujoco.MjModel, obj: mujoco.mjtObj, name: str) -> int:
    return int(mujoco.mj_name2id(model, obj, name)) if name else -1


QPOS_WIDTH = {
    int(mujoco.mjtJoint.mjJNT_FREE): 7,
    int(mujoco.mjtJoint.mjJNT_BALL): 4,
    int(mujoco.mjtJoint.mjJNT_SLIDE): 1,
    int(mujoco.mjtJoint.mjJNT_HINGE): 1,
}
QVEL_WIDTH = {
    int(mujoco.mjtJoint.mjJNT_FREE): 6,
    int(mujoco.mjtJoint.mjJNT_BALL): 3,
    int(mujoco.mjtJoint.mjJNT_SLIDE): 1,
    int(mujoco.mjtJoint.mjJNT_HINGE): 1,
}
_SUFFIX = {
    SignalType.MjStateQPos: "_qpos",
    SignalType.MjStateQVel: "_qvel",
    SignalType.MjStateAct: "_act",
    SignalType.MjCtrl: "_ctrl",
}


def _state_names(model: mujoco.MjModel) -> list[str]:
    """Canonical names of the joint and activation states (``<joint>_qpos`` ...)."""
    out: list[str] = []
    for j in object_names(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt):
        if j:
            out += [f"{j}_qpos", f"{j}_qvel"]
    for a, name in enumerate(object_names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)):
        if name and model.actuator_actadr[a] >= 0:
            out.append(f"{name}_act")
    return out


def unknown_signal(what: str, name: str, candidates: list[str], listing: str) -> SignalNameError:
    close = difflib.get_close_matches(name, [c for c in candidates if c], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return SignalNameError(f"unknown {what} {name!r} {listing}{hint}")


def _check_has_act(model: mujoco.MjModel, aid: int) -> None:
    if model.actuator_actadr[aid] < 0:
        aname = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, aid)
        with_act = [a for a in _state_names(model) if a.endswith("_act")]
        raise ValueError(
            f"actuator {aname!r} must have an activation state for MjStateAct, got none "
            f'(set dyntype, e.g. dyntype="filter", in the MJCF; activation states: '
            f"{preview_names(with_act)})"
        )


def find_signal(model: mujoco.MjModel, name: str, kind: SignalType) -> tuple[str, int]:
    """Canonical name and object id (sensor/joint/actuator) of ``name`` as a ``kind`` signal."""
    if not isinstance(name, str):
        raise TypeError(must_be("signal name", "a string", name))
    if kind is SignalType.MjSensor:
        sid = _id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
        if sid < 0:
            sensors = object_names(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)
            raise unknown_signal(
                "sensor", name, sensors, f"(model sensors: {preview_names(sensors)})"
            )
        return name, sid
    if kind in (SignalType.MjStateQPos, SignalType.MjStateQVel):
        suffix = _SUFFIX[kind]
        jid = _id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if jid < 0 and name.endswith(suffix):
            jid = _id(model, mujoco.mjtObj.mjOBJ_JOINT, name[: -len(suffix)])
        if jid < 0:
            joints = [j for j in object_names(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt) if j]
            cands = joints + [j + suffix for j in joints]
            raise unknown_signal(
                "joint",
                name,
                cands,
                f"for {kind.name} (pass a joint name or '<joint>{suffix}'; model joints: "
                f"{preview_names(joints)})",
            )
        return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, jid) + suffix, jid
    if kind in (SignalType.MjStateAct, SignalType.MjCtrl):
        suffix = _SUFFIX[kind]
        aid = _id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
        if aid < 0 and name.endswith(suffix):
            aid = _id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name[: -len(suffix)])
        actuators = [a for a in object_names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu) if a]
        if aid < 0:
            raise unknown_signal(
                "actuator",
                name,
                actuators + [a + suffix for a in actuators],
                f"for {kind.name} (model actuators: {preview_names(actuators)})",
            )
        aname = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, aid)
        if kind is SignalType.MjStateAct:
            _check_has_act(model, aid)
        return aname + suffix, aid
    if kind is SignalType.CustomObs:
        raise ValueError(
            f"signal {name!r} is CustomObs, which has no source in the model; build custom "
            "observations with TimeSeries.from_custom_map or an explicit signal_mapping"
        )
    raise TypeError(must_be("signal type", "a SignalType", kind))


def signal_width(model: mujoco.MjModel, kind: SignalType, oid: int) -> int:
    if kind is SignalType.MjSensor:
        return int(model.sensor_dim[oid])
    if kind is SignalType.MjStateQPos:
        return QPOS_WIDTH[int(model.jnt_type[oid])]
    if kind is SignalType.MjStateQVel:
        return QVEL_WIDTH[int(model.jnt_type[oid])]
    if kind is SignalType.MjStateAct:
        return int(model.actuator_actnum[oid])
    return 1  # MjCtrl


def resolve_plain_name(model: mujoco.MjModel, name: str) -> tuple[str, SignalType, int]:
    """Canonical name, type and object id of a plain signal name (see resolve_signal_name)."""
    if not isinstance(name, str):
        raise TypeError(must_be("signal name", "a string", name))
    sid = _id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
    if sid >= 0:
        if name.endswith(("_qpos", "_qvel", "_act", "_ctrl")):
            _log.debug("signal %r resolved to the sensor of that name, not a state", name)
        return name, SignalType.MjSensor, sid
    for kind in _SUFFIX:
        suffix = _SUFFIX[kind]
        if name.endswith(suffix) and len(name) > len(suffix):
            base = name[: -len(suffix)]
            if kind in (SignalType.MjStateAct, SignalType.MjCtrl):
                oid = _id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, base)
                if oid >= 0:
                    if kind is SignalType.MjStateAct:
                        _check_has_act(model, oid)
                    return name, kind, oid
            else:
                oid = _id(model, mujoco.mjtObj.mjOBJ_JOINT, base)
                if oid >= 0:
                    return name, kind, oid
    sensors = object_names(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)
    states = _state_names(model)
    hint = ""
    if _id(model, mujoco.mjtObj.mjOBJ_JOINT, name) >= 0:
        hint = f"; {name!r} is a joint: use '{name}_qpos' or '{name}_qvel'"
    elif _id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name) >= 0:
        hint = (
            f"; {name!r} is an actuator: pass ({name!r}, SignalType.MjCtrl) for its control"
            f" or '{name}_act' for its activation"
        )
    raise unknown_signal(
        "signal",
        name,
        sensors + states,
        f"(not a sensor or a state of the model{hint}; sensors: {preview_names(sensors)}; "
        f"joint/activation states: {preview_names(states)})",
    )


def resolve_signal_name(model: mujoco.MjModel, name: str) -> tuple[str, SignalType]:
    """Resolves a plain signal name to its canonical name and :class:`SignalType`.

    Rules, in order: a sensor name is an ``MjSensor`` (a sensor wins over a joint state of the
    same spelling, e.g. a sensor named ``"hinge_qpos"``; pass ``("hinge_qpos",
    SignalType.MjStateQPos)`` for the state); ``"<joint>_qpos"`` / ``"<joint>_qvel"`` is that
    joint's state; ``"<actuator>_act"`` is that actuator's activation; ``"<actuator>_ctrl"``
    is that actuator's control (``MjCtrl``).

    Raises:
      KeyError: Unknown name; the message lists the sensors and joint states and suggests the
        closest name.
      ValueError: ``"<actuator>_act"`` for an actuator without activation state.
    """
    check_model(model)
    canonical, kind, _ = resolve_plain_name(model, name)
    return canonical, kind


def signal_source_indices(model: mujoco.MjModel, name: str, signal_type: SignalType) -> np.ndarray:
    """Indices of a signal in the model array it is read from in a simulation.

    Args:
      model: Compiled model.
      name: Signal name: a sensor name; a joint name or ``"<joint>_qpos"``/``"<joint>_qvel"``;
        an actuator name or ``"<actuator>_act"``/``"<actuator>_ctrl"``.
      signal_type: Which array: ``MjSensor`` -> ``sensordata`` (``sensor_adr + arange(dim)``),
        ``MjStateQPos`` -> ``qpos`` (free 7, ball 4, hinge/slide 1), ``MjStateQVel`` ->
        ``qvel`` (6/3/1), ``MjStateAct`` -> ``act`` (``actuator_actadr + arange(actnum)``),
        ``MjCtrl`` -> ``ctrl`` (``[actuator id]``).

    Returns:
      Int array ``(width,)``.

    Raises:
      KeyError: Unknown name (with the closest match).
      ValueError: ``CustomObs`` (no model source), or ``MjStateAct`` for an actuator without
        activation state.
    """
    check_model(model)
    if not isinstance(signal_type, SignalType):
        raise TypeError(must_be("signal_type", "a SignalType", signal_type))
    _, oid = find_signal(model, name, signal_type)
    width = signal_width(model, signal_type, oid)
    if signal_type is SignalType.MjSensor:
        start = int(model.sensor_adr[oid])
    elif signal_type is SignalType.MjStateQPos:
        start = int(model.jnt_qposadr[oid])
    elif signal_type is SignalType.MjStateQVel:
        start = int(model.jnt_dofadr[oid])
    elif signal_type is SignalType.MjStateAct:
        start = int(model.actuator_actadr[oid])
    else:
        start = oid
    return np.arange(start, start + width, dtype=np.intp)


# The integer values of mujoco.sysid's SignalType (its files store them), by member.
_PEER_CODES = {kind: code for code, kind in enumerate(SignalType)}


def signal_type_code(kind: SignalType) -> int:
    """The integer ``mujoco.sysid`` stores for ``kind`` (MjSensor 0, CustomObs 1, ..., MjCtrl 5)."""
    return _PEER_CODES[kind]


def signal_type_from_json(value: Any) -> SignalType | None:
    """The :class:`SignalType` of a stored type: the peer's integer code or a member name.

    Returns ``None`` for anything else.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        members = list(SignalType)
        return members[value] if 0 <= value < len(members) else None
    if isinstance(value, str):
        return SignalType.__members__.get(value)
    return None


def mapping_key(mapping: Mapping[str, tuple[SignalType, Any]], name: Any) -> str | None:
    """The key under which signal ``name`` sits in ``mapping``, or ``None``.

    The alias table: a control is keyed ``"<actuator>_ctrl"`` (as in ``mujoco.sysid``) and
    was keyed by the actuator name in earlier mjsysid versions; either spelling finds an
    ``MjCtrl`` entry under the other.
    """
    if not isinstance(name, str):
        return None
    if name in mapping:
        return name
    suffix = _SUFFIX[SignalType.MjCtrl]
    alias = name[: -len(suffix)] if name.endswith(suffix) else name + suffix
    entry = mapping.get(alias)
    if entry is not None and entry[0] is SignalType.MjCtrl:
        return alias
    return None
