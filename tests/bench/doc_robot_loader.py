"""What the hobby project's robot.yaml loader requires, transcribed as a checker (own code).

Source: ``/work/shared/seeds/001_de73a2b16bdaa551.txt``, ``src/core/robot.py``
(``load_robot_config``, ``ActuatorConfig``, ``JointConfig``, ``_as_pair``) and
``src/runners/mujoco.py`` (``load_mujoco_model``). Use it to check that a robot.yaml written
by mjsysid (an export) would load in that project: ``check_robot_yaml(directory)`` returns the
parsed config and the MuJoCo model the project would build, or raises the exception class the
project would raise.

Rules, in the order the document applies them:

``load_robot_config(dir)``
  * ``dir/robot.yaml`` must exist (``FileNotFoundError``); it must parse to a mapping (the
    document calls ``raw.get``: anything else is an ``AttributeError``).
  * ``urdf``: a non-empty file name (``ValueError``), relative to ``dir``, and the file must
    exist (``FileNotFoundError``). Other top-level keys are ignored.
  * ``actuators`` (default ``[]``; ``null`` is a ``TypeError``): each entry a mapping whose
    keys are fields of ``ActuatorConfig`` (``ACTUATOR_FIELDS``); an unknown key is a
    ``TypeError`` (the document calls ``ActuatorConfig(**a)``). ``ctrl_range`` becomes
    ``tuple(value)`` (not checked further there); ``gear``, ``deadzone``, ``damping``,
    ``frictionloss`` go through ``_as_pair``: a list or tuple of length 2 gives
    ``(float, float)``, anything else ``(float(v), float(v))`` (so a 3-list is a
    ``TypeError``, a non-numeric string a ``ValueError``). The scalar fields (``kp``, ``kv``,
    ``filter_tau``, ``viscous_quadratic``, ``back_emf_gain``) are kept as written; they are
    compared with numbers later (``has_motor_model``, the model builder), so a non-number
    there is a ``TypeError``.
  * ``joints`` (default ``{}``; ``null`` is an ``AttributeError``): name -> mapping with keys
    among ``damping``, ``armature``, ``frictionloss`` (``TypeError`` otherwise, and for an
    empty entry, which YAML reads as ``null``).

``load_mujoco_model(robot)``
  * The URDF is loaded by MuJoCo (with ``<compiler meshdir balanceinertia="true">`` when its
    mesh file names have a directory part). No actuators and no joint overrides: that model.
  * Otherwise its MJCF is written out and edited: one actuator per entry, named
    ``{joint}_{type}``, ``gear`` = mean of the pair, ``ctrlrange`` = the first two items of
    ``ctrl_range`` (an ``IndexError`` with fewer). ``filter_tau > 0``: a ``<general
    dyntype="filter" dynprm=filter_tau gaintype="fixed">`` (``position``: affine bias
    ``0 −kp −kv``, gain kp; ``velocity``: affine bias ``0 0 −kp``, gain kp; any other type:
    bias none, i.e. a motor). ``filter_tau`` 0: an element named by ``type`` (``position``
    with ``kp`` and ``kv`` if > 0, ``velocity`` with ``kp``); a ``type`` that is not an MJCF
    actuator element fails in MuJoCo.
  * Joint overrides: an actuator with a motor model (asymmetric gear, any deadzone, damping,
    frictionloss, quadratic drag or back-EMF) gets damping 0 and frictionloss 0 on its joint;
    then each ``joints:`` value that is not ``None`` is written. Overrides for joints the URDF
    does not have are ignored. All geoms lose their contacts.
  * MuJoCo then compiles it: an actuator on an unknown joint, an unknown actuator element, a
    non-numeric value are ``ValueError`` there. A reversed or empty ``ctrl_range`` is not: with
    MuJoCo's ``autolimits`` the actuator silently becomes unlimited.

``silent_problems(robot, model)`` lists what loads without an error but does not do what the
file says (see its docstring).
"""

from __future__ import annotations

import dataclasses
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mujoco
import yaml

PAIR_FIELDS = ("gear", "deadzone", "damping", "frictionloss")
SCALAR_FIELDS = ("kp", "kv", "filter_tau", "viscous_quadratic", "back_emf_gain")
ACTUATOR_FIELDS = ("joint", "type", "ctrl_range", *PAIR_FIELDS, *SCALAR_FIELDS)
JOINT_FIELDS = ("damping", "armature", "frictionloss")


@dataclasses.dataclass
class DocActuator:
    """An actuator entry as the document holds it (defaults are the document's)."""

    joint: str = ""
    type: str = "motor"
    gear: tuple[float, float] = (1.0, 1.0)  # torque constant (pos, neg)
    ctrl_range: tuple[Any, ...] = (-1.0, 1.0)
    deadzone: tuple[float, float] = (0.0, 0.0)  # min |ctrl| for torque (pos, neg)
    damping: tuple[float, float] = (0.0, 0.0)  # N·m·s/rad (pos, neg)
    frictionloss: tuple[float, float] = (0.0, 0.0)  # N·m (pos, neg)
    kp: float = 0.0
    kv: float = 0.0
    filter_tau: float = 0.0  # s
    viscous_quadratic: float = 0.0  # N·m·s²/rad²
    back_emf_gain: float = 0.0  # N·m·s/rad

    @property
    def gear_avg(self) -> float:
        return (self.gear[0] + self.gear[1]) / 2.0

    @property
    def has_motor_model(self) -> bool:
        """The document's rule for "needs the runtime motor model" (``TypeError`` when a
        scalar field is not a number, as there)."""
        return (
            self.gear[0] != self.gear[1]
            or self.deadzone != (0.0, 0.0)
            or self.damping != (0.0, 0.0)
            or self.frictionloss != (0.0, 0.0)
            or self.viscous_quadratic > 0
            or self.back_emf_gain > 0
        )


@dataclasses.dataclass
class DocJoint:
    """A ``joints:`` override; ``None`` leaves the URDF's value."""

    damping: float | None = None
    armature: float | None = None
    frictionloss: float | None = None


@dataclasses.dataclass
class DocRobot:
    urdf_path: Path
    actuators: list[DocActuator]
    joints: dict[str, DocJoint]


def as_pair(value: Any) -> tuple[float, float]:
    """``[pos, neg]`` (a list or tuple of 2) -> ``(float, float)``; anything else ``v`` ->
    ``(float(v), float(v))``."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return float(value[0]), float(value[1])
    return float(value), float(value)


def _actuator(entry: Any) -> DocActuator:
    if not isinstance(entry, Mapping):
        raise TypeError(f"an actuator entry must be a mapping, got {type(entry).__name__}")
    unknown = [k for k in entry if k not in ACTUATOR_FIELDS]
    if unknown:
        raise TypeError(
            f"ActuatorConfig got unexpected keyword argument(s) {unknown}; "
            f"the document accepts {list(ACTUATOR_FIELDS)}"
        )
    kwargs = dict(entry)
    if "ctrl_range" in kwargs:
        kwargs["ctrl_range"] = tuple(kwargs["ctrl_range"])
    for key in PAIR_FIELDS:
        if key in kwargs:
            kwargs[key] = as_pair(kwargs[key])
    act = DocActuator(**kwargs)
    for key in SCALAR_FIELDS:
        value = getattr(act, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"actuator {act.joint!r}: {key} must be a number, got {value!r}")
    return act


def _joint(name: str, entry: Any) -> DocJoint:
    if not isinstance(entry, Mapping):
        raise TypeError(f"joints.{name}: JointConfig(**{entry!r}) needs a mapping")
    unknown = [k for k in entry if k not in JOINT_FIELDS]
    if unknown:
        raise TypeError(
            f"joints.{name}: JointConfig got unexpected keyword argument(s) {unknown}; "
            f"the document accepts {list(JOINT_FIELDS)}"
        )
    return DocJoint(**entry)


def load_doc_robot(robot_dir: str | Path) -> DocRobot:
    """The document's ``load_robot_config``: parse ``robot_dir/robot.yaml`` by its rules."""
    robot_dir = Path(robot_dir).resolve()
    yaml_path = robot_dir / "robot.yaml"
    if not yaml_path.exists():
        raise FileNotFoundError(f"Robot config not found: {yaml_path}")
    raw = yaml.safe_load(yaml_path.read_text())
    if not isinstance(raw, Mapping):
        raise AttributeError(f"robot.yaml must be a mapping (the loader calls .get): {yaml_path}")
    urdf_name = raw.get("urdf", "")
    if not urdf_name:
        raise ValueError(f"robot.yaml must specify 'urdf' filename: {yaml_path}")
    urdf_path = robot_dir / urdf_name
    if not urdf_path.exists():
        raise FileNotFoundError(f"URDF not found: {urdf_path}")
    entries = raw.get("actuators", [])
    if entries is None:
        raise TypeError("actuators: null is not iterable")
    actuators = [_actuator(a) for a in entries]
    joints_raw = raw.get("joints", {})
    if joints_raw is None or not isinstance(joints_raw, Mapping):
        raise AttributeError("joints must be a mapping (the loader calls .items())")
    joints = {name: _joint(name, j) for name, j in joints_raw.items()}
    return DocRobot(urdf_path=urdf_path, actuators=actuators, joints=joints)


def urdf_model(urdf_path: Path) -> mujoco.MjModel:
    """MuJoCo's own import of the URDF, as the document's loader does it (meshes from beside
    the file, ``meshdir`` and ``balanceinertia`` when mesh names have a directory part)."""
    tree = ET.parse(urdf_path)
    root = tree.getroot()
    assets: dict[str, bytes] = {}
    meshdir = None
    for mesh in root.iter("mesh"):
        filename = mesh.get("filename", "")
        parent = str(Path(filename).parent)
        if parent and parent != "." and meshdir is None:
            meshdir = parent
        source = urdf_path.parent / filename
        if source.exists():
            assets[Path(filename).name] = source.read_bytes()
    if meshdir:
        ext = ET.SubElement(root, "mujoco")
        ET.SubElement(ext, "compiler", attrib={"meshdir": meshdir, "balanceinertia": "true"})
    return mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"), assets)


def _actuator_element(parent: ET.Element, act: DocActuator) -> None:
    attrib = {
        "name": f"{act.joint}_{act.type}",
        "joint": act.joint,
        "gear": str(act.gear_avg),
        "ctrlrange": f"{act.ctrl_range[0]} {act.ctrl_range[1]}",
    }
    if act.filter_tau > 0:
        attrib.update(dyntype="filter", dynprm=str(act.filter_tau), gaintype="fixed")
        if act.type == "position":
            attrib.update(biastype="affine", gainprm=str(act.kp), biasprm=f"0 -{act.kp} -{act.kv}")
        elif act.type == "velocity":
            attrib.update(biastype="affine", gainprm=str(act.kp), biasprm=f"0 0 -{act.kp}")
        else:
            attrib["biastype"] = "none"
        ET.SubElement(parent, "general", attrib=attrib)
        return
    if act.type == "position":
        attrib["kp"] = str(act.kp)
        if act.kv > 0:
            attrib["kv"] = str(act.kv)
    elif act.type == "velocity":
        attrib["kp"] = str(act.kp)
    ET.SubElement(parent, act.type, attrib=attrib)


def doc_model(robot: DocRobot) -> mujoco.MjModel:
    """The MuJoCo model the document's ``load_mujoco_model`` builds from ``robot``."""
    model = urdf_model(robot.urdf_path)
    if not robot.actuators and not robot.joints:
        return model
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "saved.xml"
        mujoco.mj_saveLastXML(str(saved), model)
        root = ET.fromstring(saved.read_text())
    if robot.actuators:
        act_parent = ET.SubElement(root, "actuator")
        for act in robot.actuators:
            _actuator_element(act_parent, act)
    damping: dict[str, float] = {}
    frictionloss: dict[str, float] = {}
    armature: dict[str, float] = {}
    for act in robot.actuators:
        if act.has_motor_model:
            damping[act.joint] = 0.0
            frictionloss[act.joint] = 0.0
    for name, j in robot.joints.items():
        if j.damping is not None:
            damping[name] = j.damping
        if j.armature is not None:
            armature[name] = j.armature
        if j.frictionloss is not None:
            frictionloss[name] = j.frictionloss
    for body in root.iter("body"):
        for jnt in body.findall("joint"):
            name = jnt.get("name")
            for table, attr in ((damping, "damping"), (armature, "armature")):
                if name in table:
                    jnt.set(attr, str(table[name]))
            if name in frictionloss:
                jnt.set("frictionloss", str(frictionloss[name]))
    for geom in root.iter("geom"):
        geom.set("contype", "0")
        geom.set("conaffinity", "0")
    return mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))


def silent_problems(robot: DocRobot, model: mujoco.MjModel) -> list[str]:
    """What the document loads without complaint but does not honour:

    * a ``ctrl_range`` with lower >= upper (MuJoCo then leaves the actuator unlimited);
    * a ``joints:`` override for a joint the URDF does not have (ignored);
    * more than one actuator with a motor model (the document's runner feeds ``ctrl[0]`` to
      every motor model);
    * a motor model on an actuator of type position or velocity (the runner adds the motor
      model's torques to a servo's own).
    """
    problems = []
    for i, act in enumerate(robot.actuators):
        lo, hi = act.ctrl_range[0], act.ctrl_range[1]
        if float(lo) >= float(hi) or not model.actuator_ctrllimited[i]:
            problems.append(f"actuator {act.joint!r}: ctrl_range {lo}..{hi} leaves it unlimited")
        if act.has_motor_model and act.type in ("position", "velocity"):
            problems.append(f"actuator {act.joint!r}: motor model on a {act.type} actuator")
    joints = {model.joint(j).name for j in range(model.njnt)}
    problems += [f"joints.{n}: no such joint in the URDF" for n in robot.joints if n not in joints]
    if sum(a.has_motor_model for a in robot.actuators) > 1:
        problems.append("more than one motor model: the runner feeds ctrl[0] to all of them")
    return problems


def check_robot_yaml(robot_dir: str | Path) -> tuple[DocRobot, mujoco.MjModel]:
    """Load ``robot_dir`` as the document would: the config and the compiled model."""
    robot = load_doc_robot(robot_dir)
    return robot, doc_model(robot)
