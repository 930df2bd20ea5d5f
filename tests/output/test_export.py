"""Export of what was identified: identified.yaml, robot.yaml, the identified MJCF and URDF
(round trips)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest
import yaml

import mjsysid as ms
from conftest import simulate
from mjsysid.output.export import (
    export_files,
    identified_config,
    identified_urdf,
    recording_constants,
)

URDF = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base">
    <inertial><origin xyz="0 0 0"/><mass value="2.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
  </link>
  <link name="link1">
    <inertial><origin xyz="0.1 0 0" rpy="0 0 0"/><mass value="1.0"/>
      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.004" iyz="0" izz="0.004"/></inertial>
    <collision><origin xyz="0.1 0 0" rpy="0 1.5708 0"/>
      <geometry><cylinder radius="0.02" length="0.2"/></geometry></collision>
  </link>
  <link name="link2">
    <inertial><origin xyz="0.1 0 0" rpy="0.2 0 0"/><mass value="0.5"/>
      <inertia ixx="0.0015" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.003"/></inertial>
  </link>
  <link name="tool"/>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="link1"/><origin xyz="0 0 0.1"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="5" velocity="3"/><dynamics damping="0.1" friction="0.02"/>
  </joint>
  <joint name="j2" type="revolute">
    <parent link="link1"/><child link="link2"/><origin xyz="0.2 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="3" velocity="4"/><dynamics damping="0.05"/>
  </joint>
  <joint name="tool_fix" type="fixed">
    <parent link="link2"/><child link="tool"/><origin xyz="0.2 0 0"/>
  </joint>
</robot>
"""

MOTOR = """
<mujoco model="motor">
  <option timestep="0.002"/>
  <worldbody>
    <body name="rotor">
      <joint name="j" type="hinge" axis="0 0 1"/>
      <geom type="cylinder" size="0.05 0.02" mass="0.5"/>
    </body>
  </worldbody>
  <actuator>
    <dcmotor name="m" joint="j" motorconst="0.05" resistance="2" inductance="0 0.004"
             lugre="20 0.05 0.003 0.005 1" nsample="10" delay="0.004" interp="linear"/>
  </actuator>
  <sensor><jointpos name="q" joint="j"/><jointvel name="qd" joint="j"/></sensor>
</mujoco>
"""


def _sequences(spec: mujoco.MjSpec, name: str, truth: ms.ParameterDict) -> ms.ModelSequences:
    """Joint positions and velocities simulated with ``truth`` under random steps."""
    model = spec.compile()
    rng = np.random.default_rng(0)
    ctrl = np.repeat(rng.uniform(-2, 2, (8, model.nu)), 40, axis=0)
    x0 = ms.create_initial_state(model)
    joints = [model.joint(j).name for j in range(model.njnt)]
    names = [f"{j}_qpos" for j in joints] + [f"{j}_qvel" for j in joints]
    sens, control = simulate(spec, truth, ctrl, x0, names)
    return ms.ModelSequences(name, spec, "s0", x0, control, sens)


def _arm_params(spec: mujoco.MjSpec, model: mujoco.MjModel) -> ms.ParameterDict:
    return ms.ParameterDict(
        [
            ms.body_inertia_param(spec, model, "link2", ms.InertiaType.Mass),
            ms.make_parameter("joint_damping", model, "j1"),
            ms.make_parameter("joint_frictionloss", model, "j2", nominal=0.01),
            ms.make_parameter("control_deadband", model, "a1", nominal=0.01),
        ]
    )


@pytest.fixture
def urdf_fit(tmp_path):
    """A fit on a URDF arm with two motors added; the results folder and the truth."""
    path = tmp_path / "arm.urdf"
    path.write_text(URDF)
    spec = mujoco.MjSpec.from_file(str(path))
    for j in ("j1", "j2"):
        act = spec.add_actuator(name=f"a{j[1]}", target=j, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.gear[0] = 2.0
    model = spec.compile()
    truth = _arm_params(spec, model)
    truth.update_from_vector([0.8, 0.3, 0.04, 0.01])
    seq = _sequences(spec, "arm", truth)
    params = _arm_params(spec, model)
    params["a1_deadband"].frozen = True
    rf = ms.build_residual_fn([seq])
    opt, res = ms.optimize(params, rf, max_iters=60)
    np.testing.assert_allclose(res.x, [0.8, 0.3, 0.04], rtol=1e-4)
    folder = ms.save_results(
        tmp_path / "out", [seq], params, opt, res, rf, model_files={"arm": path}
    )
    return folder, opt, ms.apply_param_modifiers(opt, spec)


def test_identified_yaml_holds_the_identified_values(urdf_fit):
    folder, _opt, _model = urdf_fit
    config = yaml.safe_load((folder / "identified.yaml").read_text(encoding="utf-8"))
    assert config["joints"]["j1"]["damping"] == pytest.approx(0.3, rel=1e-4)
    assert config["joints"]["j2"]["frictionloss"] == pytest.approx(0.04, rel=1e-4)
    assert config["joints"]["j1"]["actuatorfrcrange"] == [-5.0, 5.0]
    assert config["actuators"]["a1"]["gear"] == 2.0
    assert config["control"] == {"a1": {"deadband": 0.01}}
    assert config["identified"]["link2_mass"]["value"] == pytest.approx(0.8, rel=1e-4)
    assert config["identified"]["j1_damping"]["unit"] == "N·m·s/rad"
    assert config["identified"]["link2_mass"]["unit"] == "kg"
    assert config["units"]["damping"] == "N·m·s/rad"


def test_identified_urdf_loads_with_the_identified_values(urdf_fit):
    folder, _opt, model = urdf_fit
    exported = mujoco.MjSpec.from_file(str(folder / "arm.urdf")).compile()
    for b in ("link1", "link2"):
        i, k = model.body(b).id, exported.body(b).id
        assert exported.body_mass[k] == pytest.approx(model.body_mass[i], rel=1e-12)
        np.testing.assert_allclose(exported.body_ipos[k], model.body_ipos[i], atol=1e-12)
        full = []
        for m, idx in ((model, i), (exported, k)):
            r = np.zeros(9)
            mujoco.mju_quat2Mat(r, m.body_iquat[idx])
            r = r.reshape(3, 3)
            full.append(r @ np.diag(m.body_inertia[idx]) @ r.T)
        np.testing.assert_allclose(full[1], full[0], atol=1e-12)
    np.testing.assert_allclose(exported.dof_damping, model.dof_damping, rtol=1e-12)
    np.testing.assert_allclose(exported.dof_frictionloss, model.dof_frictionloss, rtol=1e-12)
    np.testing.assert_allclose(exported.jnt_range, model.jnt_range)
    np.testing.assert_allclose(exported.jnt_actfrcrange, model.jnt_actfrcrange)
    assert exported.body_mass[exported.body("link2").id] == pytest.approx(0.8, rel=1e-4)
    j2 = ET.fromstring((folder / "arm.urdf").read_text()).find("joint[@name='j2']/limit")
    assert j2 is not None and j2.get("velocity") == "4"  # no MuJoCo counterpart: kept


def test_identified_mjcf_holds_the_native_values(tmp_path):
    spec = mujoco.MjSpec.from_string(MOTOR)
    model = spec.compile()
    params = ms.ParameterDict(
        [
            ms.make_parameter(k, model, "m")
            for k in ("dcmotor_resistance", "actuator_delay", "dcmotor_lugre_coulomb")
        ]
    )
    params.update_from_vector([2.6, 0.006, 0.004])
    seq = _sequences(spec, "motor", params)
    identified = ms.apply_param_modifiers_spec(params, seq.spec.copy())
    files = export_files(params, {seq.name: identified})
    config = yaml.safe_load(files["identified.yaml"])
    m = config["actuators"]["m"]
    assert m["type"] == "dcmotor" and m["resistance"] == 2.6 and m["delay"] == 0.006
    assert m["lugre"][2] == 0.004 and m["motorconst"] == 0.05 and m["timeconst"] == 0.004
    assert "motor.urdf" not in files  # an MJCF model gets no URDF
    robot = yaml.safe_load(files["robot.yaml"])  # a dcmotor has no place in that schema
    assert robot["urdf"] == "motor.robot.xml" and robot["actuators"] == []
    assert mujoco.MjModel.from_xml_string(files["motor.robot.xml"].decode()).nu == 0
    assert "Not expressible in this schema (see identified.yaml" in files["robot.yaml"].decode()
    xml = ms.apply_param_modifiers_spec(params, spec.copy())
    xml.compile()
    reloaded = mujoco.MjModel.from_xml_string(xml.to_xml())
    assert reloaded.actuator_gainprm[0, 0] == 2.6
    assert reloaded.actuator_delay[0] == 0.006
    assert reloaded.actuator_biasprm[0, 3] == 0.004


def test_identified_config_without_a_model_lists_the_parameters():
    model = mujoco.MjModel.from_xml_string(MOTOR)
    params = ms.ParameterDict([ms.make_parameter("sensor_delay", model, "q*")])
    config = identified_config(params)
    assert config["sensors"] == {"q*": {"sensor_delay": 0.0}}
    assert "joints" not in config and config["identified"]["q*_delay"]["unit"] == "s"


def test_the_recordings_constants_are_kept_by_recording_not_by_window():
    """identified.yaml names the settings the values hold for (a servo's firmware gain): one
    entry per recording, its windows (``<recording>#<k>``) sharing it; none without any."""
    model = mujoco.MjModel.from_xml_string(MOTOR)
    spec = mujoco.MjSpec.from_string(MOTOR)
    t = np.arange(20) * model.opt.timestep
    ctrl = ms.TimeSeries.from_control_names(t, np.zeros((20, model.nu)), model)
    sens = ms.TimeSeries.from_names(t, np.zeros((20, model.nsensordata)), model)
    x0 = ms.create_initial_state(model)
    runs = ms.ModelSequences(
        "m", spec, ["a", "b"], [x0, x0], [ctrl, ctrl], [sens, sens],
        constants=[{"kp": 32}, {"kp": 16}],
    )  # fmt: skip
    assert recording_constants(runs) == {"a": {"kp": 32.0}, "b": {"kp": 16.0}}
    windows = ms.split_windows(runs, 5 * model.opt.timestep)
    assert len(windows.sequence_name) > 2 and recording_constants(windows) == {
        "a": {"kp": 32.0},
        "b": {"kp": 16.0},
    }
    params = ms.ParameterDict([ms.make_parameter("sensor_delay", model, "q*")])
    config = identified_config(params, model, recording_constants(runs))
    assert config["constants"] == {"a": {"kp": 32.0}, "b": {"kp": 16.0}}
    plain = ms.ModelSequences("m", spec, "a", x0, ctrl, sens)
    assert recording_constants(plain) == {} and "constants" not in identified_config(params)


def test_identified_urdf_refuses_other_text():
    model = mujoco.MjModel.from_xml_string(MOTOR)
    with pytest.raises(ValueError, match="urdf must have a <robot> root element, got <mujoco>"):
        identified_urdf(MOTOR, model)
    with pytest.raises(ValueError, match="urdf must be URDF text"):
        identified_urdf("<robot", model)


def test_a_link_with_a_fused_massive_child_keeps_its_inertial(caplog):
    urdf = URDF.replace(
        '<link name="tool"/>',
        '<link name="tool"><!-- a gripper -->'
        '<inertial><mass value="0.2"/><inertia ixx="1e-4" ixy="0" ixz="0" '
        'iyy="1e-4" iyz="0" izz="1e-4"/></inertial></link>',
    )
    model = mujoco.MjSpec.from_string(urdf).compile()
    with caplog.at_level("WARNING", logger="mjsysid.output.export"):
        out = ET.fromstring(identified_urdf(urdf, model))
    assert "'link2' keeps its inertial: a fixed child was fused into it" in caplog.text
    mass = out.find("link[@name='link2']/inertial/mass")
    assert mass is not None and mass.get("value") == "0.5"  # not the fused sum 0.7
    assert "a gripper" in identified_urdf(urdf, model)  # comments survive


def test_a_massive_link_fixed_to_the_world_is_not_warned_about(caplog):
    urdf = URDF.replace('<link name="base">', '<link name="world"/><link name="base">').replace(
        '<joint name="j1"',
        '<joint name="base_fix" type="fixed"><parent link="world"/><child link="base"/>'
        '</joint><joint name="j1"',
    )
    model = mujoco.MjSpec.from_string(urdf).compile()
    assert "base" not in [model.body(b).name for b in range(model.nbody)]  # fused into the world
    with caplog.at_level("WARNING", logger="mjsysid.output.export"):
        identified_urdf(urdf, model)
    assert "keeps its inertial" not in caplog.text  # static: nothing of it is identified
