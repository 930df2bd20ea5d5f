"""Export what was identified: every value with its unit (``identified.yaml``), the robot
config hobby projects load (``robot.yaml``) and an identified URDF.

The identified MJCF (``<name>.xml``) is written by :func:`mjsysid.output.results.save_results`
from the modified spec; it holds every native value. This module adds:

- :func:`identified_config`: every identified parameter (force laws' included) with its unit,
  the joint and actuator values of the identified model by element name, and the
  signal-side transforms (control deadband/gain/offset, sensor delay/gain/bias) that have no
  place in a model file. Plain YAML types only; window starts are not in it.
- :func:`~mjsysid.output.robot_yaml.robot_yaml`: ``robot.yaml`` in the hobby schema.
- :func:`identified_urdf`: a copy of the source URDF whose ``<inertial>`` (mass, origin,
  inertia), ``<dynamics damping friction>`` and ``<limit lower upper effort>`` hold the
  identified model's values.
- :func:`export_files`: all of them, as the files of a results folder.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

from mjsysid.data.sequences import ModelSequences
from mjsysid.objective.initial_state import INITIAL_KINDS
from mjsysid.output.portable import PortableAssets
from mjsysid.output.robot_yaml import robot_yaml
from mjsysid.params.kinds import KINDS
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.mjcf_text import spec_xml
from mjsysid.util.results_files import IDENTIFIED_YAML, ROBOT_YAML

log = logging.getLogger(__name__)

UNITS = {
    "damping": "N·m·s/rad",
    "armature": "kg·m²",
    "frictionloss": "N·m",
    "stiffness": "N·m/rad",
    "range": "rad",
    "actuatorfrcrange": "N·m",
    "gear": "N·m/ctrl",
    "ctrlrange": "ctrl",
    "forcerange": "N·m",
    "delay": "s",
    "kp": "N·m/rad",
    "kv": "N·m·s/rad",
    "ki": "N·m/(rad·s)",
    "kd": "N·m·s/rad",
    "filter_tau": "s",
    "resistance": "Ω",
    "motorconst": "N·m/A",
    "timeconst": "s",
    "cogging": "[N·m, poles, rad]",
    "lugre": "[N·m/rad, N·m·s/rad, N·m, N·m, rad/s]",
    "deadband": "ctrl",
    "gain": "1",
    "offset": "ctrl",
    "bias": "sensor unit",
    "sensor_delay": "s",
}
_BODY_UNITS = {
    "body_mass": "kg",
    "body_mass_ipos": "[kg, m, m, m]",
    "body_inertia": "pseudo-inertia (kg, kg·m, kg·m²)",
}
_SLIDE_UNITS = "joint quantities of a slide joint are per metre (N, N·s/m, kg, m)"


def _f(x: Any) -> float:
    return float(x)


def _joint_values(model: mujoco.MjModel, j: int) -> dict[str, Any]:
    dof = int(model.jnt_dofadr[j])
    out: dict[str, Any] = {
        "damping": _f(model.dof_damping[dof]),
        "armature": _f(model.dof_armature[dof]),
        "frictionloss": _f(model.dof_frictionloss[dof]),
        "stiffness": _f(model.jnt_stiffness[j]),
    }
    if model.jnt_limited[j]:
        out["range"] = [_f(v) for v in model.jnt_range[j]]
    if model.jnt_actfrclimited[j]:
        out["actuatorfrcrange"] = [_f(v) for v in model.jnt_actfrcrange[j]]
    return out


def _dcmotor_values(model: mujoco.MjModel, i: int) -> dict[str, Any]:
    g, b, d = model.actuator_gainprm[i], model.actuator_biasprm[i], model.actuator_dynprm[i]
    out: dict[str, Any] = {"resistance": _f(g[0]), "motorconst": _f(g[1])}
    if d[0] > 0:
        out["timeconst"] = _f(d[0])
    if b[1] > 0:
        out["cogging"] = [_f(b[0]), _f(b[1]), _f(b[2])]
    if d[5] > 0:
        out["lugre"] = [_f(d[5]), _f(d[6]), _f(b[3]), _f(b[4]), _f(b[5])]
    if np.any(g[4:7]):
        out.update(kp=_f(g[4]), ki=_f(g[5]), kd=_f(g[6]))
    return out


def _type_values(model: mujoco.MjModel, i: int) -> dict[str, Any]:
    """The values that belong to the actuator's gain/bias/dynamics type."""
    gain, bias = int(model.actuator_gaintype[i]), int(model.actuator_biastype[i])
    dyn = int(model.actuator_dyntype[i])
    out: dict[str, Any] = {}
    if gain == mujoco.mjtGain.mjGAIN_DCMOTOR:
        return {"type": "dcmotor", **_dcmotor_values(model, i)}
    if gain == mujoco.mjtGain.mjGAIN_PID:
        g, b = model.actuator_gainprm[i], model.actuator_biasprm[i]
        return {"type": "pid", "kp": _f(-b[1]), "kv": _f(-b[2]), "ki": _f(g[0])}
    if gain == mujoco.mjtGain.mjGAIN_FIXED and bias == mujoco.mjtBias.mjBIAS_AFFINE:
        b = model.actuator_biasprm[i]
        if b[1] != 0:
            out["kp"] = _f(model.actuator_gainprm[i, 0])
        out["kv"] = _f(-b[2])
    if dyn in (mujoco.mjtDyn.mjDYN_FILTER, mujoco.mjtDyn.mjDYN_FILTEREXACT):
        out["filter_tau"] = _f(model.actuator_dynprm[i, 0])
    return out


def _actuator_values(model: mujoco.MjModel, i: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "gear": _f(model.actuator_gear[i, 0]),
        "damping": _f(model.actuator_damping[i]),
        "armature": _f(model.actuator_armature[i]),
    }
    if model.actuator_history[i, 0] > 0:
        out["delay"] = _f(model.actuator_delay[i])
    if model.actuator_ctrllimited[i]:
        out["ctrlrange"] = [_f(v) for v in model.actuator_ctrlrange[i]]
    if model.actuator_forcelimited[i]:
        out["forcerange"] = [_f(v) for v in model.actuator_forcerange[i]]
    out.update(_type_values(model, i))
    return out


def _signal_values(params: ParameterDict, prefix: str) -> dict[str, dict[str, float]]:
    """``{target: {quantity: value}}`` of the parameters whose kind starts with ``prefix``."""
    out: dict[str, dict[str, float]] = {}
    for p in params.values():
        kind, target = p.meta.get("kind"), p.meta.get("target")
        if isinstance(kind, str) and kind.startswith(prefix) and isinstance(target, str):
            quantity = kind[len(prefix) :]
            key = "sensor_delay" if kind == "sensor_delay" else quantity
            out.setdefault(target, {})[key] = _f(p.value[0])
    return out


def identified_config(
    params: ParameterDict,
    model: mujoco.MjModel | None = None,
    constants: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """Every identified value with its unit, as a plain dictionary (``identified.yaml``).

    Args:
      params: The identified parameters (``opt_params``).
      model: The identified compiled model (``apply_param_modifiers``); without it only the
        identified parameters are listed (``identified``) with the signal transforms.
      constants: The force laws' per-recording constants of the fitted recordings, by
        recording (:func:`recording_constants`): the settings the identified values hold for
        (a servo's ``servo_gain`` is per unit of its firmware's ``kp``); under
        ``"constants"`` when there are any.

    Returns:
      ``{"identified": {name: {kind, target, value, unit}}, "joints": {name: {...}},
      "actuators": {name: {...}}, "control": {actuator: {deadband, gain, offset}},
      "sensors": {pattern: {sensor_delay, gain, bias}}, "units": {quantity: unit}}``; every
      value a float or a list of floats. Joint values are those of the joint's first dof;
      actuator values are MuJoCo's native ones (``gear[0]``, ``delay``, the dcmotor's
      ``resistance``/``motorconst``/``timeconst``/``cogging``/``lugre``/controller gains,
      a pid's ``kp``/``kv``/``ki``, a servo's ``kp``/``kv``, a filter's ``filter_tau``).
    """
    identified: dict[str, Any] = {}
    for p in params.values():
        kind = p.meta.get("kind")
        if kind in INITIAL_KINDS:
            continue  # window starts: states of the recordings, not of the robot
        kind_def = KINDS.get(kind) if isinstance(kind, str) else None
        value = [_f(v) for v in p.value]
        unit = p.meta.get("unit")  # a force law's parameter declares its own
        if not isinstance(unit, str):
            unit = kind_def.unit if kind_def is not None else _BODY_UNITS.get(str(kind), "")
        identified[p.name] = {
            "kind": kind,
            "target": p.meta.get("target"),
            "value": value[0] if len(value) == 1 else value,
            "unit": unit,
        }
    out: dict[str, Any] = {"identified": identified}
    if model is not None:
        out["joints"] = {
            model.joint(j).name: _joint_values(model, j)
            for j in range(model.njnt)
            if model.joint(j).name and model.jnt_type[j] in (2, 3)  # slide, hinge
        }
        out["actuators"] = {
            model.actuator(i).name: _actuator_values(model, i)
            for i in range(model.nactuator)
            if model.actuator(i).name
        }
    out["control"] = _signal_values(params, "control_")
    out["sensors"] = _signal_values(params, "sensor_")
    if constants:
        out["constants"] = {rec: {k: _f(v) for k, v in c.items()} for rec, c in constants.items()}
    out["units"] = dict(UNITS, note=_SLIDE_UNITS)
    return out


def recording_constants(ms: ModelSequences) -> dict[str, dict[str, float]]:
    """``{recording: {name: value}}``: the force laws' per-recording constants of ``ms``
    (the windows of one recording, ``"<recording>#<k>"``, share their recording's)."""
    out: dict[str, dict[str, float]] = {}
    for i, (name, *_) in enumerate(ms.sequences()):
        _, values = ms.law_data(i)
        if values:
            out.setdefault(name.rsplit("#", 1)[0], {k: float(v) for k, v in values.items()})
    return out


def _fmt(values: Sequence[float] | np.ndarray) -> str:
    return " ".join(repr(float(v)) for v in values)


def _full_inertia(model: mujoco.MjModel, b: int) -> np.ndarray:
    """(3, 3) inertia about the body's COM in the body frame: ``R diag(I) Rᵀ``, ``R`` from
    ``body_iquat``."""
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, model.body_iquat[b])
    r = rot.reshape(3, 3)
    return r @ np.diag(model.body_inertia[b]) @ r.T


def _fused_parents(robot: ET.Element, bodies: set[str]) -> set[str]:
    """Moving links (bodies of the model) that MuJoCo merged a massive fixed-joint child into
    (its inertial is the sum); a child fixed to the world is static and counts for nothing."""
    massive = {
        link.get("name")
        for link in robot.iter("link")
        if (m := link.find("inertial/mass")) is not None and float(m.get("value", "0")) > 0
    }
    out = set()
    for joint in robot.iter("joint"):
        parent, child = joint.find("parent"), joint.find("child")
        if parent is None or child is None:
            continue
        name = child.get("link")
        if joint.get("type") == "fixed" and name not in bodies and name in massive:
            out.add(str(parent.get("link")))
    return out & bodies


def _set_inertial(link: ET.Element, model: mujoco.MjModel, b: int) -> None:
    inertial = link.find("inertial")
    if inertial is None:
        inertial = ET.SubElement(link, "inertial")
    for tag in ("origin", "mass", "inertia"):
        if inertial.find(tag) is None:
            ET.SubElement(inertial, tag)
    origin, mass, inertia = (inertial.find(t) for t in ("origin", "mass", "inertia"))
    assert origin is not None and mass is not None and inertia is not None
    origin.attrib = {"xyz": _fmt(model.body_ipos[b]), "rpy": "0.0 0.0 0.0"}
    mass.attrib = {"value": repr(float(model.body_mass[b]))}
    i = _full_inertia(model, b)
    keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    rows = (0, 0, 0, 1, 1, 2)
    cols = (0, 1, 2, 1, 2, 2)
    inertia.attrib = {k: repr(float(i[r, c])) for k, r, c in zip(keys, rows, cols, strict=True)}


def _set_joint(joint: ET.Element, model: mujoco.MjModel, j: int) -> None:
    dof = int(model.jnt_dofadr[j])
    dynamics = joint.find("dynamics")
    if dynamics is None:
        dynamics = ET.SubElement(joint, "dynamics")
    dynamics.set("damping", repr(float(model.dof_damping[dof])))
    dynamics.set("friction", repr(float(model.dof_frictionloss[dof])))
    limit = joint.find("limit")
    if limit is None:
        return  # a continuous joint without a limit element stays so
    if model.jnt_limited[j] and joint.get("type") != "continuous":
        limit.set("lower", repr(float(model.jnt_range[j, 0])))
        limit.set("upper", repr(float(model.jnt_range[j, 1])))
    if model.jnt_actfrclimited[j]:
        limit.set("effort", repr(float(model.jnt_actfrcrange[j, 1])))


def identified_urdf(
    urdf: str,
    model: mujoco.MjModel,
    assets: PortableAssets | None = None,
    urdf_file: str | Path | None = None,
) -> str:
    """A copy of the URDF text ``urdf`` holding the identified ``model``'s values.

    Each link that is a body of ``model`` (same name) gets ``<inertial>`` = the body's mass,
    COM (``origin xyz``, ``rpy`` 0) and full inertia tensor about the COM in the link frame;
    each joint of ``model`` gets ``<dynamics damping friction>`` (``dof_damping``,
    ``dof_frictionloss``) and, where it has a ``<limit>``, ``lower``/``upper`` (``jnt_range``)
    and ``effort`` (``jnt_actfrcrange``). ``velocity`` has no MuJoCo counterpart and is kept.
    Links MuJoCo fused away (the root, massless fixed children) keep their text; a link that
    received a massive fixed child keeps its inertial too (the model holds only the sum),
    with a log warning. Armature has no URDF field: see :func:`robot_config`.
    With ``assets`` and ``urdf_file`` (where ``urdf`` was read from), the ``<mesh
    filename>`` files are renamed as :meth:`PortableAssets.urdf` says (else kept as written).

    Raises:
      ValueError: ``urdf`` is not a URDF (no ``<robot>`` root) or not XML.
    """
    try:
        parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))  # keep comments
        robot = ET.fromstring(urdf, parser=parser)
    except ET.ParseError as e:
        raise ValueError(f"urdf must be URDF text (XML), got a parse error: {e}") from None
    if robot.tag != "robot":
        raise ValueError(f"urdf must have a <robot> root element, got <{robot.tag}>")
    bodies = {model.body(b).name: b for b in range(1, model.nbody)}
    joints = {model.joint(j).name: j for j in range(model.njnt)}
    fused = _fused_parents(robot, set(bodies))
    for link in robot.iter("link"):
        name = link.get("name", "")
        if name in fused:
            log.warning("URDF link %r keeps its inertial: a fixed child was fused into it", name)
        elif name in bodies:
            _set_inertial(link, model, bodies[name])
    for joint in robot.iter("joint"):
        name = joint.get("name", "")
        if name in joints and joint.get("type") != "fixed":
            _set_joint(joint, model, joints[name])
    if assets is not None and urdf_file is not None:
        assets.urdf(robot, Path(urdf_file))
    ET.indent(robot)
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"


def bare_mjcf(spec: mujoco.MjSpec) -> str:
    """The MJCF text of ``spec`` without its actuators (and the sensors of actuators): the
    robot description ``robot.yaml`` adds its actuators to, as it does to a URDF."""
    bare = spec.copy()
    for sensor in list(bare.sensors):
        if sensor.objtype == mujoco.mjtObj.mjOBJ_ACTUATOR:
            bare.delete(sensor)
    for actuator in list(bare.actuators):
        bare.delete(actuator)
    return spec_xml(bare)


def export_files(
    params: ParameterDict,
    specs: Mapping[str, mujoco.MjSpec],
    model_files: Mapping[str, str | Path] | None = None,
    assets: PortableAssets | None = None,
    constants: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
) -> dict[str, bytes]:
    """The export files of a results folder, by file name.

    Args:
      params: The identified parameters.
      specs: The identified spec of every fitted model, by ``ModelSequences.name``.
      model_files: The source file of each model, by name (optional); a ``.urdf`` one gives
        ``<name>.urdf`` (:func:`identified_urdf`).
      assets: How the URDF's mesh files are named (``specs`` are expected to name theirs
        already, :meth:`PortableAssets.spec`); it collects the copies to write.
      constants: Each model's :func:`recording_constants`, by name (optional).

    Returns:
      ``{file name: bytes}``: ``identified.yaml`` and ``robot.yaml`` (``<name>.identified.yaml``
      and ``<name>.robot.yaml`` each when several models were fitted); ``<name>.urdf`` for a
      URDF model, else ``<name>.robot.xml``, the identified MJCF without actuators, which
      ``robot.yaml`` names as its robot description.
    """
    files: dict[str, bytes] = {}
    sources = dict(model_files or {})
    for name, spec in specs.items():
        model = spec.compile()
        prefix = "" if len(specs) == 1 else f"{name}."
        config = identified_config(params, model, (constants or {}).get(name))
        text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
        files[prefix + IDENTIFIED_YAML] = text.encode("utf-8")
        source = sources.get(name)
        if source is not None and Path(source).suffix.lower() == ".urdf":
            urdf = Path(source).read_text(encoding="utf-8")
            robot_file = f"{name}.urdf"
            files[robot_file] = identified_urdf(urdf, model, assets, source).encode("utf-8")
        else:
            robot_file = f"{name}.robot.xml"
            files[robot_file] = bare_mjcf(spec).encode("utf-8")
        files[prefix + ROBOT_YAML] = robot_yaml(params, model, robot_file).encode("utf-8")
    return files
