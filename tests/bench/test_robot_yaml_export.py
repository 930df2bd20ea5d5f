"""robot.yaml written by mjsysid in the source document's own schema: its loader (transcribed
in doc_robot_loader.py) accepts it, builds the same MuJoCo model, and the document's motor
model fed the file's values behaves exactly as the identified one."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import yaml
from bench_import import load_bench_module
from doc_robot_loader import check_robot_yaml, silent_problems
from test_robot_yaml_motor import law_nominal

import mjsysid as ms
from mjsysid.output.export import export_files, identified_config
from mjsysid.output.robot_yaml import robot_yaml

fd = load_bench_module("bench/truth/furuta_doc.py", "bench_truth_furuta_doc")

# A value of every field off the document's defaults, at full double precision.
IDENTIFIED = fd.params_with(
    actuator_gear_pos=0.4241827711, actuator_gear_neg=0.4250313319, ctrl_limit=0.5921234567,
    motor_deadzone_pos=0.1412911111, motor_deadzone_neg=0.0780151234,
    motor_damping_pos=0.0020271234, motor_damping_neg=0.0146651234,
    motor_frictionloss_pos=0.0573281234, motor_frictionloss_neg=0.0533551234,
    actuator_filter_tau=0.0050351234, viscous_quadratic=0.0002851234,
    back_emf_gain=0.0067581234, motor_armature=0.0027731234, pendulum_damping=0.0001191234,
    pendulum_frictionloss=1.01234e-05,
)  # fmt: skip


def _export(tmp_path: Path) -> tuple[Path, ms.ParameterDict]:
    model = fd.build_model(IDENTIFIED)
    law = ms.RobotYamlMotor(
        "motor", "motor_joint", directional=True, actuator=model.actuator(0).name
    )
    params = ms.ParameterDict(ms.force_law_params(law, law_nominal(IDENTIFIED)))
    spec = mujoco.MjSpec.from_string(fd.build_mjcf(IDENTIFIED))
    spec.option.timestep = fd.DT_PHYSICS
    files = export_files(params, {"robot": spec})
    folder = tmp_path / "robot"
    folder.mkdir()
    for name in ("robot.yaml", "robot.robot.xml"):
        (folder / name).write_bytes(files[name])
    return folder, params


def _doc_params(folder: Path) -> dict[str, float]:
    """The document's parameters as its loader reads them from ``folder``."""
    robot, _ = check_robot_yaml(folder)
    (act,) = robot.actuators
    motor, pendulum = robot.joints["motor_joint"], robot.joints["pendulum_joint"]
    return fd.params_with(
        IDENTIFIED,
        actuator_gear_pos=act.gear[0], actuator_gear_neg=act.gear[1],
        ctrl_limit=act.ctrl_range[1], motor_deadzone_pos=act.deadzone[0],
        motor_deadzone_neg=act.deadzone[1], motor_damping_pos=act.damping[0],
        motor_damping_neg=act.damping[1], motor_frictionloss_pos=act.frictionloss[0],
        motor_frictionloss_neg=act.frictionloss[1], actuator_filter_tau=act.filter_tau,
        viscous_quadratic=act.viscous_quadratic, back_emf_gain=act.back_emf_gain,
        motor_armature=motor.armature, pendulum_damping=pendulum.damping,
        pendulum_frictionloss=pendulum.frictionloss,
    )  # fmt: skip


def test_the_documents_loader_reads_every_identified_value_exactly(tmp_path):
    folder, _ = _export(tmp_path)
    robot, model = check_robot_yaml(folder)
    assert silent_problems(robot, model) == []
    assert _doc_params(folder) == IDENTIFIED  # bit for bit
    identified = fd.build_model(IDENTIFIED)
    for field in ("actuator_gear", "actuator_dynprm", "actuator_ctrlrange", "dof_armature",
                  "dof_damping", "dof_frictionloss"):  # fmt: skip
        np.testing.assert_array_equal(getattr(model, field), getattr(identified, field))
    text = (folder / "robot.yaml").read_text()
    assert "# N·m per unit ctrl [positive, negative]" in text and "# kg·m²" in text
    assert set(yaml.safe_load(text)) == {"urdf", "actuators", "joints"}


def test_the_documents_simulator_fed_the_file_behaves_as_the_identified_model(tmp_path):
    folder, _ = _export(tmp_path)
    commands = fd.commands_for("prbs", 120, seed=5)
    ours = fd.simulate(IDENTIFIED, commands, seed=5)
    theirs = fd.simulate(_doc_params(folder), commands, seed=5)
    for key in ("true_motor_angle", "true_pendulum_angle", "act"):
        np.testing.assert_array_equal(theirs[key], ours[key])


def test_what_the_schema_cannot_hold_is_named_and_window_starts_are_never_in_it(tmp_path):
    model = fd.build_model(IDENTIFIED)
    friction = ms.JointFriction("pend", "pendulum_joint", directional=False)
    law = ms.RobotYamlMotor("motor", "motor_joint", actuator=model.actuator(0).name)
    params = ms.ParameterDict(
        ms.force_law_params(law, law_nominal(IDENTIFIED))
        + ms.force_law_params(friction, {"coulomb": 0.01, "viscous": 0.001})
        + [
            ms.Parameter(
                "run/w0/motor_joint_qpos0",
                0.1,
                -1.0,
                1.0,
                meta={"kind": "initial_qpos", "target": "run/w0"},
            )
        ]
    )
    text = robot_yaml(params, model, "robot.xml")
    assert "Not expressible in this schema" in text and "force law 'pend'" in text
    assert "qpos" not in text and "w0" not in text
    assert "w0" not in yaml.safe_dump(identified_config(params, model))
