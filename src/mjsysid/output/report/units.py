"""Units of what the report plots: signals (from the model's sensors and joints), controls
(from the actuators) and parameters (from their kinds).

A unit is a short SI string as the axis shows it: ``"rad"``, ``"m/s"``, ``"N·m"``; ``"1"``
for a dimensionless quantity (a quaternion, a count, a friction coefficient); ``""`` when it
cannot be known (a custom observation, a user sensor): the axis then says so instead of
guessing. A joint's quantities depend on its type: a hinge's position is in ``rad`` and its
generalised force in ``N·m``, a slide's in ``m`` and ``N``; free and ball joints mix both
(``"m, 1"``: positions then quaternion entries).
"""

from __future__ import annotations

from typing import Any

import mujoco

from mjsysid.data.signals import SignalType, find_signal, resolve_signal_name

_S = mujoco.mjtSensor
#: Sensors whose unit does not depend on what they are attached to.
_FIXED: dict[int, str] = {
    int(_S.mjSENS_TOUCH): "N",
    int(_S.mjSENS_ACCELEROMETER): "m/s²",
    int(_S.mjSENS_VELOCIMETER): "m/s",
    int(_S.mjSENS_GYRO): "rad/s",
    int(_S.mjSENS_FORCE): "N",
    int(_S.mjSENS_TORQUE): "N·m",
    int(_S.mjSENS_MAGNETOMETER): "T",
    int(_S.mjSENS_RANGEFINDER): "m",
    int(_S.mjSENS_BALLQUAT): "1",
    int(_S.mjSENS_BALLANGVEL): "rad/s",
    int(_S.mjSENS_FRAMEPOS): "m",
    int(_S.mjSENS_FRAMEQUAT): "1",
    int(_S.mjSENS_FRAMEXAXIS): "1",
    int(_S.mjSENS_FRAMEYAXIS): "1",
    int(_S.mjSENS_FRAMEZAXIS): "1",
    int(_S.mjSENS_FRAMELINVEL): "m/s",
    int(_S.mjSENS_FRAMEANGVEL): "rad/s",
    int(_S.mjSENS_FRAMELINACC): "m/s²",
    int(_S.mjSENS_FRAMEANGACC): "rad/s²",
    int(_S.mjSENS_SUBTREECOM): "m",
    int(_S.mjSENS_SUBTREELINVEL): "m/s",
    int(_S.mjSENS_SUBTREEANGMOM): "kg·m²/s",
    int(_S.mjSENS_GEOMDIST): "m",
    int(_S.mjSENS_GEOMNORMAL): "1",
    int(_S.mjSENS_GEOMFROMTO): "m",
    int(_S.mjSENS_CLOCK): "s",
    int(_S.mjSENS_E_POTENTIAL): "J",
    int(_S.mjSENS_E_KINETIC): "J",
    int(_S.mjSENS_CAMPROJECTION): "px",
    int(_S.mjSENS_INSIDESITE): "1",
}
#: Sensors of a joint (or tendon, or actuator transmission): ``(order, force?)``: the
#: joint's position unit to the power of time ``order`` (0 position, 1 velocity), or its
#: generalised force.
_JOINTWISE: dict[int, tuple[int, bool]] = {
    int(_S.mjSENS_JOINTPOS): (0, False),
    int(_S.mjSENS_JOINTVEL): (1, False),
    int(_S.mjSENS_JOINTLIMITPOS): (0, False),
    int(_S.mjSENS_JOINTLIMITVEL): (1, False),
    int(_S.mjSENS_JOINTLIMITFRC): (0, True),
    int(_S.mjSENS_JOINTACTFRC): (0, True),
}
_ACTUATORWISE: dict[int, tuple[int, bool]] = {
    int(_S.mjSENS_ACTUATORPOS): (0, False),
    int(_S.mjSENS_ACTUATORVEL): (1, False),
    int(_S.mjSENS_ACTUATORFRC): (0, True),
}
_TENDONWISE: dict[int, tuple[int, bool]] = {
    int(_S.mjSENS_TENDONPOS): (0, False),
    int(_S.mjSENS_TENDONVEL): (1, False),
    int(_S.mjSENS_TENDONLIMITPOS): (0, False),
    int(_S.mjSENS_TENDONLIMITVEL): (1, False),
    int(_S.mjSENS_TENDONLIMITFRC): (0, True),
    int(_S.mjSENS_TENDONACTFRC): (0, True),
}

_J = mujoco.mjtJoint
#: ``(position, velocity, force)`` units of a joint type.
_JOINT_UNITS: dict[int, tuple[str, str, str]] = {
    int(_J.mjJNT_HINGE): ("rad", "rad/s", "N·m"),
    int(_J.mjJNT_SLIDE): ("m", "m/s", "N"),
    int(_J.mjJNT_BALL): ("1", "rad/s", "N·m"),
    int(_J.mjJNT_FREE): ("m, 1", "m/s, rad/s", "N, N·m"),
}


def _joint(model: mujoco.MjModel, j: int, order: int, force: bool) -> str:
    units = _JOINT_UNITS.get(int(model.jnt_type[j]), ("", "", ""))
    return units[2] if force else units[order]


def _transmission(model: mujoco.MjModel, a: int, order: int, force: bool) -> str:
    """The unit of actuator ``a``'s length (``order`` 0), velocity (1) or force."""
    trn = int(model.actuator_trntype[a])
    target = int(model.actuator_trnid[a, 0])
    if trn in (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT)):
        return _joint(model, target, order, force)
    if trn == int(mujoco.mjtTrn.mjTRN_TENDON):
        return ("N" if force else ("m", "m/s")[order]) if target >= 0 else ""
    return ""


def sensor_unit(model: mujoco.MjModel, sensor: int) -> str:
    """The unit of sensor ``sensor`` (its id), ``""`` when unknown (a user or plugin
    sensor, or a tendon spanning joints of both kinds)."""
    stype = int(model.sensor_type[sensor])
    if stype in _FIXED:
        return _FIXED[stype]
    obj = int(model.sensor_objid[sensor])
    if stype in _JOINTWISE:
        return _joint(model, obj, *_JOINTWISE[stype])
    if stype in _ACTUATORWISE:
        return _transmission(model, obj, *_ACTUATORWISE[stype])
    if stype in _TENDONWISE:
        order, force = _TENDONWISE[stype]
        return "N" if force else ("m", "m/s")[order]
    return ""


def control_unit(model: mujoco.MjModel, actuator: int) -> str:
    """What actuator ``actuator``'s control is measured in: a DC motor's voltage (``V``), a
    position servo's target (the joint's position unit), a velocity servo's target, a
    command with no force of its own (``gear`` 0: read by force laws) ``"1"``, otherwise
    the force it scales: ``"N·m"`` when one unit of control is 1 N·m, ``"×0.05 N·m"`` when
    it is 0.05 N·m (gain times gear); ``""`` when unknown."""
    a = actuator
    gain, bias = int(model.actuator_gaintype[a]), int(model.actuator_biastype[a])
    if gain == int(mujoco.mjtGain.mjGAIN_DCMOTOR):
        return "V"
    gear = float(model.actuator_gear[a, 0])
    if gear == 0.0:
        return "1"
    if gain != int(mujoco.mjtGain.mjGAIN_FIXED):
        return ""
    g = float(model.actuator_gainprm[a, 0])
    b1, b2 = float(model.actuator_biasprm[a, 1]), float(model.actuator_biasprm[a, 2])
    if bias == int(mujoco.mjtBias.mjBIAS_AFFINE) and g != 0 and b1 == -g:
        return _transmission(model, a, 0, False)  # position servo: ctrl is a target
    if bias == int(mujoco.mjtBias.mjBIAS_AFFINE) and g != 0 and b1 == 0 and b2 == -g:
        return _transmission(model, a, 1, False)  # velocity servo
    force = _transmission(model, a, 0, True)
    scale = g * gear
    if not force or scale == 0:
        return ""
    return force if scale == 1.0 else f"×{scale:.4g} {force}"


def signal_unit(model: mujoco.MjModel | None, name: str, signal_type: Any) -> str:
    """The unit of the measured signal ``name`` of type ``signal_type`` (a
    :class:`~mjsysid.data.signals.SignalType`); ``""`` when it cannot be known (no model, a
    custom observation, a name the model does not have)."""
    if model is None or not isinstance(signal_type, SignalType):
        return ""
    if signal_type is SignalType.CustomObs:
        return ""
    try:
        _, oid = find_signal(model, name, signal_type)
    except (KeyError, ValueError):
        return ""
    if signal_type is SignalType.MjSensor:
        return sensor_unit(model, oid)
    if signal_type is SignalType.MjStateQPos:
        return _joint(model, oid, 0, False)
    if signal_type is SignalType.MjStateQVel:
        return _joint(model, oid, 1, False)
    if signal_type is SignalType.MjCtrl:
        return control_unit(model, oid)
    return ""  # an activation: its unit is the actuator's own


def named_signal_unit(model: mujoco.MjModel | None, name: str) -> str:
    """The unit of the signal called ``name`` in ``model`` (a sensor, ``<joint>_qpos``, ...:
    :func:`~mjsysid.data.signals.resolve_signal_name`); ``""`` when unknown."""
    if model is None:
        return ""
    try:
        canonical, stype = resolve_signal_name(model, name)
    except (KeyError, ValueError):
        return ""
    return signal_unit(model, canonical, stype)


def column_units(ts: Any, model: mujoco.MjModel | None) -> list[str]:
    """The unit of every data column of a series with a ``signal_mapping`` (``""`` where
    unknown: no mapping, no model, a custom observation)."""
    out = [""] * int(ts.data.shape[1])
    mapping = getattr(ts, "signal_mapping", None)
    if mapping is None:
        return out
    for name, (stype, cols) in mapping.items():
        unit = signal_unit(model, name, stype)
        for c in cols:
            out[int(c)] = unit
    return out


def axis_title(what: str, unit: str) -> str:
    """``"what [unit]"``, or ``"what (unit unknown)"`` when ``unit`` is ``""``."""
    return f"{what} [{unit}]" if unit else f"{what} (unit unknown)"


def parameter_unit(meta: Any, model: mujoco.MjModel | None = None) -> str:
    """The SI unit of a parameter with ``meta`` (:attr:`Parameter.meta
    <mjsysid.params.parameter.Parameter.meta>`): its own ``unit`` (a force law's), else its
    kind's (:data:`mjsysid.params.kinds.KINDS`, the body kinds; an initial state's is its
    joint's in ``model``); ``""`` when unknown."""
    from mjsysid.params.kinds import KINDS

    if not isinstance(meta, dict):
        return ""
    if isinstance(meta.get("unit"), str):
        return str(meta["unit"])
    kind = str(meta.get("kind", meta.get("inertia_kind", "")))
    if kind in ("initial_qpos", "initial_qvel") and model is not None:
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, str(meta.get("joint", "")))
        return _joint(model, j, int(kind == "initial_qvel"), False) if j >= 0 else ""
    return KINDS[kind].unit if kind in KINDS else _OTHER_KINDS.get(kind, "")


#: Units of the body kinds (outside :data:`~mjsysid.params.kinds.KINDS`).
_OTHER_KINDS = {
    "body_mass": "kg",
    "body_mass_ipos": "kg, m",
    "body_pseudo_inertia": "1 (log-Cholesky)",
}
