"""Native actuator kinds (delay, damping, armature, dcmotor constants, pid gains): recovery
from synthetic data, the exact fast path, and refusals."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.params.kinds import KINDS

MOTOR = """
<mujoco model="dcmotor">
  <option timestep="0.002"/>
  <worldbody>
    <body name="rotor">
      <joint name="j" type="hinge" axis="0 0 1" damping="0.001"/>
      <geom type="cylinder" size="0.05 0.02" mass="0.5"/>
    </body>
  </worldbody>
  <actuator>
    <dcmotor name="m" joint="j" motorconst="0.05" resistance="2" inductance="0 0.004"
             cogging="0.004 4 0.3" lugre="20 0.05 0.003 0.005 1" damping="0.0005"
             armature="0.0002"/>
  </actuator>
  <sensor>
    <jointpos name="q" joint="j"/>
    <jointvel name="qd" joint="j"/>
  </sensor>
</mujoco>
"""

SERVO = """
<mujoco model="servo">
  <option timestep="0.002"/>
  <worldbody>
    <body name="link">
      <joint name="j" type="hinge" axis="0 1 0" damping="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.4"/>
    </body>
  </worldbody>
  <actuator>
    <dcmotor name="dc" joint="j" motorconst="0.05" resistance="2" input="pos"
             controller="0.8 0.5 0.05 0 0 0"/>
    <pid name="pid" joint="j" input="pos" kp="0.6" kv="0.04" ki="0.3" nsample="20" delay="0.01"
         interp="linear"/>
  </actuator>
  <sensor>
    <jointpos name="q" joint="j"/>
    <jointvel name="qd" joint="j"/>
  </sensor>
</mujoco>
"""

# kind, model, actuator, truth factor (x nominal) or offset for the phase, relative tolerance
CASES = [
    ("dcmotor_resistance", MOTOR, "m", 1.3, 1e-5),
    ("dcmotor_motorconst", MOTOR, "m", 0.8, 1e-5),
    ("dcmotor_timeconst", MOTOR, "m", 1.5, 1e-4),
    ("dcmotor_cogging_amplitude", MOTOR, "m", 1.4, 1e-4),
    ("dcmotor_cogging_phase", MOTOR, "m", 1.5, 1e-4),
    ("dcmotor_lugre_stiffness", MOTOR, "m", 1.3, 1e-3),
    ("dcmotor_lugre_damping", MOTOR, "m", 1.4, 1e-3),
    ("dcmotor_lugre_coulomb", MOTOR, "m", 1.3, 1e-3),
    ("dcmotor_lugre_static", MOTOR, "m", 1.2, 1e-3),
    ("dcmotor_lugre_stribeck", MOTOR, "m", 1.3, 1e-3),
    ("actuator_damping", MOTOR, "m", 1.6, 1e-4),
    ("actuator_armature", MOTOR, "m", 1.5, 1e-4),
    ("dcmotor_kp", SERVO, "dc", 1.3, 1e-5),
    ("dcmotor_ki", SERVO, "dc", 1.4, 1e-4),
    ("dcmotor_kd", SERVO, "dc", 1.5, 1e-5),
    ("pid_kp", SERVO, "pid", 1.3, 1e-5),
    ("pid_kv", SERVO, "pid", 1.4, 1e-5),
    ("pid_ki", SERVO, "pid", 1.4, 1e-4),
    ("actuator_delay", SERVO, "pid", 1.3, 1e-4),
]
NEW_KINDS = sorted(
    k
    for k in KINDS
    if k.startswith(("dcmotor_", "pid_"))
    or k in ("actuator_delay", "actuator_damping", "actuator_armature")
)


def _controls(model: mujoco.MjModel, n: int, seed: int = 0) -> np.ndarray:
    """Random steps (volts, or rad for a servo's setpoint), held 40 steps, shape (n, nu).

    Every actuator here has one input (``input="pos"`` for the servos): the control series
    map one control per actuator.
    """
    rng = np.random.default_rng(seed)
    return np.repeat(rng.uniform(-3, 3, (-(-n // 40), model.nu)), 40, axis=0)[:n]


def _sequences(xml: str, truth: ms.ParameterDict, n: int = 600) -> ms.ModelSequences:
    spec = mujoco.MjSpec.from_string(xml)
    model = spec.compile()
    ctrl = _controls(model, n)
    x0 = ms.create_initial_state(model)
    true_model = ms.apply_param_modifiers(truth, spec)
    traj = ms.sysid_rollout(true_model, None, ctrl, x0)[0]
    sens = ms.TimeSeries.from_names(traj.times, traj.sensordata, model)
    control = ms.TimeSeries.from_control_names(traj.times, ctrl, model)
    return ms.ModelSequences(model.names.split(b"\x00")[0].decode(), spec, "s0", x0, control, sens)


def _param(kind: str, xml: str, target: str) -> tuple[mujoco.MjSpec, ms.ParameterDict]:
    spec = mujoco.MjSpec.from_string(xml)
    model = spec.compile()
    return spec, ms.ParameterDict([ms.make_parameter(kind, model, target)])


def test_every_new_kind_has_a_recovery_case():
    assert sorted(c[0] for c in CASES) == NEW_KINDS


@pytest.mark.parametrize(
    ("kind", "xml", "target", "factor", "rtol"), CASES, ids=[c[0] for c in CASES]
)
def test_recover(kind, xml, target, factor, rtol):
    _spec, truth = _param(kind, xml, target)
    p = next(iter(truth.values()))
    nominal = float(p.nominal[0])
    true_value = nominal + 0.4 if kind.endswith("phase") else nominal * factor
    truth.update_from_vector([true_value])
    seq = _sequences(xml, truth)
    _spec, start = _param(kind, xml, target)
    _opt, res = ms.optimize(start, ms.build_residual_fn([seq]), max_iters=80)
    np.testing.assert_allclose(res.x, [true_value], rtol=rtol)
    assert res.cost < 1e-8 * max(res.initial_cost, 1.0)


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_fast_path_equals_recompile(kind):
    xml, target, _f, _r = next((c[1], c[2], c[3], c[4]) for c in CASES if c[0] == kind)
    spec, params = _param(kind, xml, target)
    p = next(iter(params.values()))
    p.value = p.nominal * 1.37 + (0.1 if kind.endswith("phase") else 0.0)
    slow = ms.apply_param_modifiers_spec(params, spec.copy()).compile()
    fast = spec.compile()
    p.model_modifier(fast, p)
    for field in (
        "actuator_gainprm",
        "actuator_biasprm",
        "actuator_dynprm",
        "actuator_delay",
        "actuator_damping",
        "actuator_armature",
        "dof_damping",
        "dof_armature",
    ):
        np.testing.assert_array_equal(getattr(fast, field), getattr(slow, field), err_msg=field)
    written = ms.apply_param_modifiers(params, spec)
    for field in ("actuator_gainprm", "actuator_biasprm", "actuator_dynprm", "actuator_delay"):
        np.testing.assert_array_equal(getattr(written, field), getattr(slow, field))


def test_kind_round_trips_through_a_parameter_file(tmp_path):
    spec, params = _param("dcmotor_resistance", MOTOR, "m")
    params["m_resistance"].value = [2.5]
    params.save_to_disk(tmp_path / "p.yaml")
    loaded = ms.ParameterDict.load_from_disk(tmp_path / "p.yaml")
    model = ms.apply_param_modifiers(loaded, spec)
    assert model.actuator_gainprm[0, 0] == 2.5


@pytest.mark.parametrize(
    ("kind", "xml", "target", "match"),
    [
        ("dcmotor_resistance", SERVO, "pid", "must be a <dcmotor> actuator"),
        ("pid_kp", MOTOR, "m", "must be a <pid> actuator"),
        ("dcmotor_kp", MOTOR, "m", "must have a controller input"),
        ("actuator_delay", MOTOR, "m", "must have a control history"),
        ("dcmotor_timeconst", SERVO, "dc", "must have inductance switched on"),
        ("dcmotor_lugre_stiffness", SERVO, "dc", "must have lugre switched on"),
        ("dcmotor_cogging_phase", SERVO, "dc", "must have cogging"),
    ],
)
def test_refuses_the_wrong_actuator(kind, xml, target, match):
    model = mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(ValueError, match=match):
        ms.make_parameter(kind, model, target)


def test_physical_lower_limits():
    model = mujoco.MjModel.from_xml_string(MOTOR)
    with pytest.raises(ValueError, match=r"min_value must be >= 0.0 for dcmotor_resistance"):
        ms.make_parameter("dcmotor_resistance", model, "m", min_value=-1.0)
    p = ms.make_parameter("dcmotor_resistance", model, "m")
    assert p.min_value[0] > 0 and p.max_value[0] == pytest.approx(20.0)
    phase = ms.make_parameter("dcmotor_cogging_phase", model, "m", min_value=-10.0)
    assert phase.min_value[0] == -10.0


def test_lower_limits_of_the_native_kinds():
    limited = {k for k in NEW_KINDS if KINDS[k].lower is not None}
    assert limited == set(NEW_KINDS) - {"dcmotor_cogging_phase"}
    assert all(KINDS[k].lower == 0.0 for k in limited)
    assert all(KINDS[k].unit for k in NEW_KINDS)
