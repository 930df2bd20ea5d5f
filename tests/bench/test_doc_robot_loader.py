"""tests/bench/doc_robot_loader.py: the hobby project's robot.yaml rules, on its own robot.yaml."""

from __future__ import annotations

import shutil
from pathlib import Path

import mujoco
import pytest
import yaml
from doc_robot_loader import as_pair, check_robot_yaml, load_doc_robot, silent_problems

FIXTURE = Path(__file__).parent / "fixtures" / "rotary_cartpole"


def _variant(tmp_path: Path, edit) -> Path:
    """A copy of the fixture whose robot.yaml (as a dict) went through ``edit``."""
    target = tmp_path / "robot"
    shutil.copytree(FIXTURE, target)
    raw = yaml.safe_load((target / "robot.yaml").read_text())
    edit(raw)
    (target / "robot.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return target


def _set_actuator(**kv):
    def edit(raw):
        raw["actuators"][0].update(kv)

    return edit


def test_the_documents_robot_yaml_loads_and_builds():
    robot, model = check_robot_yaml(FIXTURE)
    (act,) = robot.actuators
    assert act.joint == "motor_joint" and act.type == "motor"
    assert act.gear == (0.424182, 0.425031) and act.ctrl_range == (-0.592, 0.592)
    assert act.deadzone == (0.141291, 0.078015) and act.frictionloss == (0.057328, 0.053355)
    assert act.filter_tau == 0.005035 and act.has_motor_model
    assert robot.joints["motor_joint"].armature == 0.002773
    assert robot.joints["motor_joint"].damping is None
    assert robot.joints["pendulum_joint"].frictionloss == 1e-05

    assert model.nu == 1 and model.actuator(0).name == "motor_joint_motor"
    assert model.actuator_gear[0, 0] == act.gear_avg
    assert model.actuator_dyntype[0] == mujoco.mjtDyn.mjDYN_FILTER
    assert model.actuator_biastype[0] == mujoco.mjtBias.mjBIAS_NONE
    assert list(model.actuator_ctrlrange[0]) == [-0.592, 0.592]
    motor, pendulum = model.joint("motor_joint"), model.joint("pendulum_joint")
    # the URDF's motor damping 0.001 is replaced by 0: the motor model owns that joint
    assert model.dof_damping[motor.dofadr[0]] == 0.0
    assert model.dof_armature[motor.dofadr[0]] == 0.002773
    assert model.dof_damping[pendulum.dofadr[0]] == 0.000119
    assert model.dof_frictionloss[pendulum.dofadr[0]] == 1e-05
    assert (model.geom_contype == 0).all() and (model.geom_conaffinity == 0).all()
    assert silent_problems(robot, model) == []


def test_as_pair():
    assert as_pair(0.5) == (0.5, 0.5)
    assert as_pair([1, 2]) == (1.0, 2.0)
    assert as_pair((1, "2")) == (1.0, 2.0)
    with pytest.raises(TypeError):
        as_pair([1, 2, 3])
    with pytest.raises(ValueError):
        as_pair("strong")


def test_scalars_become_pairs_and_other_top_level_keys_are_ignored(tmp_path):
    def edit(raw):
        raw["actuators"][0].update(gear=0.42, damping=0.01)
        raw["hardware_realism"] = {"gearbox_backlash": 0.01}

    robot, model = check_robot_yaml(_variant(tmp_path, edit))
    assert robot.actuators[0].gear == (0.42, 0.42) and robot.actuators[0].damping == (0.01, 0.01)
    assert model.actuator_gear[0, 0] == 0.42


@pytest.mark.parametrize(
    ("edit", "error", "match"),
    [
        (_set_actuator(stribeck_vel=2.0), TypeError, "unexpected keyword"),
        (_set_actuator(gear=[0.4, 0.4, 0.4]), TypeError, None),
        (_set_actuator(deadzone="wide"), ValueError, None),
        (_set_actuator(filter_tau=[0.005, 0.006]), TypeError, "filter_tau"),
        (lambda raw: raw["joints"]["pendulum_joint"].update(stiffness=1.0), TypeError, "unexp"),
        (lambda raw: raw["joints"].update(pendulum_joint=None), TypeError, "mapping"),
        (lambda raw: raw.update(actuators=None), TypeError, "null"),
        (lambda raw: raw.update(joints=None), AttributeError, "mapping"),
        (lambda raw: raw.pop("urdf"), ValueError, "must specify 'urdf'"),
        (lambda raw: raw.update(urdf="other.urdf"), FileNotFoundError, "URDF not found"),
    ],
)
def test_what_the_loader_refuses(tmp_path, edit, error, match):
    with pytest.raises(error, match=match):
        load_doc_robot(_variant(tmp_path, edit))


@pytest.mark.parametrize(
    "edit",
    [
        _set_actuator(joint="arm_joint"),
        _set_actuator(type="servo", filter_tau=0.0),
    ],
)
def test_what_mujoco_refuses_after_the_loader(tmp_path, edit):
    directory = _variant(tmp_path, edit)
    load_doc_robot(directory)  # the loader itself accepts these
    with pytest.raises(ValueError):
        check_robot_yaml(directory)


def test_what_loads_but_is_not_honoured(tmp_path):
    def edit(raw):
        raw["actuators"][0]["ctrl_range"] = [0.592, -0.592]
        raw["joints"]["elbow_joint"] = {"damping": 0.1}
        raw["actuators"].append(dict(raw["actuators"][0], joint="pendulum_joint"))

    robot, model = check_robot_yaml(_variant(tmp_path, edit))
    assert not model.actuator_ctrllimited[0]
    problems = silent_problems(robot, model)
    assert len(problems) == 4, problems
    assert "unlimited" in problems[0] and "elbow_joint" in problems[2]
    assert "ctrl[0]" in problems[3]


def test_type_is_free_when_filtered_and_shapes_the_actuator(tmp_path):
    # filter_tau > 0: any type other than position/velocity becomes a plain motor
    _, model = check_robot_yaml(_variant(tmp_path, _set_actuator(type="servo")))
    assert model.actuator(0).name == "motor_joint_servo"
    assert model.actuator_biastype[0] == mujoco.mjtBias.mjBIAS_NONE
    pos = _variant(tmp_path / "p", _set_actuator(type="position", kp=3.0, kv=0.1))
    _, model = check_robot_yaml(pos)
    assert model.actuator_biastype[0] == mujoco.mjtBias.mjBIAS_AFFINE
    assert list(model.actuator_biasprm[0, :3]) == [0.0, -3.0, -0.1]


def test_a_missing_robot_yaml(tmp_path):
    with pytest.raises(FileNotFoundError, match="Robot config not found"):
        load_doc_robot(tmp_path)
