"""Force laws: lock-step rollout = reference loop, batched = one by one, recovery, runtime."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.data.excitation import multisine
from mjsysid.data.states import state_slices
from mjsysid.sim.laws.core import ForceLaw, force_law_params, law_from_config
from mjsysid.sim.laws.friction import (
    CoulombFriction,
    QuadraticDrag,
    StribeckFriction,
    ViscousFriction,
)
from mjsysid.sim.laws.motors import CommandTorque
from mjsysid.sim.laws.runtime import LawRuntime
from mjsysid.sim.lockstep import LockstepRollout, reference_rollout
from mjsysid.sim.rollout import BatchRollout

PENDULUM = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="link">
      <joint name="j" type="hinge" axis="0 1 0" damping="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="push" joint="j" gear="1"/>
    <motor name="cmd" joint="j" gear="0"/>
  </actuator>
  <sensor><jointpos name="angle" joint="j"/><jointvel name="speed" joint="j"/></sensor>
</mujoco>
"""

# (law, true values, start values)
CASES: dict[str, tuple[ForceLaw, dict[str, list[float]], dict[str, list[float]]]] = {
    "viscous": (
        ViscousFriction("visc", "j"),
        {"damping": [0.05, 0.03]},
        {"damping": [0.02, 0.02]},
    ),
    "coulomb": (
        CoulombFriction("coul", "j", width=0.05),
        {"friction": [0.04, 0.02]},
        {"friction": [0.01, 0.01]},
    ),
    "stribeck": (
        StribeckFriction("strb", "j", width=0.05),
        {"coulomb": [0.02], "static": [0.04], "stribeck_velocity": [0.5], "viscous": [0.02]},
        {"coulomb": [0.01], "static": [0.03], "stribeck_velocity": [0.7], "viscous": [0.01]},
    ),
    "quadratic_drag": (
        QuadraticDrag("drag", "j"),
        {"drag": [0.02, 0.01]},
        {"drag": [0.005, 0.005]},
    ),
    "command_torque": (
        CommandTorque("motor", "j", actuator="cmd", width=0.02, saturation=True),
        {
            "deadzone": [0.1, 0.15],
            "torque_constant": [0.5, 0.4],
            "back_emf": [0.02],
            "saturation": [0.3],
        },
        {
            "deadzone": [0.05, 0.05],
            "torque_constant": [0.4, 0.4],
            "back_emf": [0.01],
            "saturation": [0.4],
        },
    ),
}


def _controls(n: int) -> np.ndarray:
    ctrl = np.zeros((n, 2))
    ctrl[:, 0] = 0.1 * multisine(n, 1, 0.002, amplitude=1.0, f0=0.3, f1=3.0, seed=2)[:, 0]
    ctrl[:, 1] = 0.8 * multisine(n, 1, 0.002, amplitude=1.0, f0=0.2, f1=2.0, seed=3)[:, 0]
    return ctrl


def _x0(model: mujoco.MjModel, angle: float = 0.3) -> np.ndarray:
    x0 = ms.create_initial_state(model)
    x0[state_slices(model)["qpos"]] = angle
    return x0


def _batch(values: dict[str, list[float]], n: int) -> dict[str, np.ndarray]:
    return {k: np.repeat(np.asarray(v, float)[None], n, axis=0) for k, v in values.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lockstep_equals_the_reference_loop_and_batches_match(case):
    law, truth, start = CASES[case]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    ctrl = _controls(400)
    x0s = np.stack([_x0(model, 0.3), _x0(model, -0.5)])
    runner = BatchRollout(2)
    lock = LockstepRollout(runner, [law])
    vals = [{k: np.stack([truth[k], start[k]]) for k in truth}]
    state, sens, ok = lock.run([model, model], x0s, np.stack([ctrl, ctrl]), vals, align=False)
    assert ok.all()
    for i, v in enumerate((truth, start)):
        ref_state, ref_sens = reference_rollout(model, x0s[i], ctrl, [law], [_batch(v, 1)])
        np.testing.assert_allclose(state[i], ref_state, rtol=0, atol=1e-12)
        np.testing.assert_allclose(sens[i], ref_sens, rtol=0, atol=1e-12)
        alone, alone_sens, _ = lock.run([model], x0s[i : i + 1], ctrl[None], [_batch(v, 1)])
        np.testing.assert_allclose(alone[0, 1:], state[i, :-1], rtol=0, atol=1e-12)
        np.testing.assert_allclose(alone_sens[0], sens[i], rtol=0, atol=1e-12)
    assert np.abs(state[0] - state[1]).max() > 1e-4  # the values act
    runner.close()


TWO_JOINTS = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="a"><joint name="j1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5"/>
      <body name="b" pos="0.2 0 0"><joint name="j2" type="slide" axis="1 0 0"/>
        <geom type="sphere" size="0.03" mass="0.2"/></body></body>
  </worldbody>
  <actuator><motor name="c1" joint="j1" gear="0"/><motor name="c2" joint="j2" gear="0"/></actuator>
  <sensor><jointpos name="q1" joint="j1"/><jointpos name="q2" joint="j2"/></sensor>
</mujoco>
"""


def test_laws_of_one_kind_on_several_joints_are_merged_exactly():
    """Laws of one kind on distinct joints run as one vectorised law; the result is still
    the reference loop's."""
    model = mujoco.MjModel.from_xml_string(TWO_JOINTS)
    laws = [
        CommandTorque("m1", "j1", actuator="c1", width=0.02),
        CommandTorque("m2", "j2", actuator="c2", width=0.02),
        CoulombFriction("f1", "j1", width=0.05),
        CoulombFriction("f2", "j2", width=0.05),
        ViscousFriction("v1", "j1"),
    ]
    vals = [
        {"deadzone": [0.1, 0.1], "torque_constant": [0.5, 0.4], "back_emf": [0.02]},
        {"deadzone": [0.05, 0.2], "torque_constant": [2.0, 1.5], "back_emf": [0.1]},
        {"friction": [0.02, 0.03]},
        {"friction": [0.1, 0.05]},
        {"damping": [0.01, 0.02]},
    ]
    ctrl = np.stack([_controls(300)[:, 1], 0.5 * _controls(300)[:, 0] * 10], axis=1)
    x0 = ms.create_initial_state(model)
    lock = LockstepRollout(BatchRollout(1), laws)
    state, sens, ok = lock.run(
        [model], x0[None], ctrl[None], [_batch(v, 1) for v in vals], align=False
    )
    ref_state, ref_sens = reference_rollout(model, x0, ctrl, laws, [_batch(v, 1) for v in vals])
    assert ok.all() and np.abs(ref_state[:, 2]).max() > 1e-3
    np.testing.assert_allclose(state[0], ref_state, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sens[0], ref_sens, rtol=0, atol=1e-12)


def _recording(law: ForceLaw, truth: dict[str, list[float]], n: int = 600) -> ms.ModelSequences:
    spec = mujoco.MjSpec.from_string(PENDULUM)
    model = spec.compile()
    ctrl = _controls(n)
    x0 = _x0(model)
    _, sens = reference_rollout(model, x0, ctrl, [law], [_batch(truth, 1)])
    t = 0.002 * np.arange(n)
    return ms.ModelSequences(
        "pend",
        spec,
        "run",
        x0,
        ms.TimeSeries.from_control_names(t, ctrl, model),
        ms.TimeSeries.from_names(t, sens, model),
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_law_parameters_are_recovered(case):
    law, truth, start = CASES[case]
    seq = _recording(law, truth)
    params = ms.ParameterDict(force_law_params(law, start, max_value={"stribeck_velocity": 5}))
    rf = ms.build_residual_fn([seq], force_laws=[law])
    opt, _ = ms.optimize(params, rf)
    want = np.concatenate([truth[k] for k in law.parameters])
    np.testing.assert_allclose(opt.as_vector(), want, rtol=1e-4, atol=1e-6)
    assert rf.stats.compiles == 0


def test_batched_residual_equals_one_by_one():
    law, truth, start = CASES["command_torque"]
    seq = _recording(law, truth, 300)
    params = ms.ParameterDict(force_law_params(law, start))
    x = params.as_vector()
    X = x[:, None] + 0.01 * np.eye(x.size, x.size + 1, 1)
    rf = ms.build_residual_fn([seq], force_laws=[law])
    R = rf(X, params)
    alone = ms.build_residual_fn([seq], force_laws=[law])
    for j in range(X.shape[1]):
        np.testing.assert_allclose(R[:, j], alone(X[:, j], params), rtol=0, atol=1e-12)
    assert np.all(np.any(R[:, 1:] != R[:, :1], axis=0))  # every parameter acts


def test_exported_model_and_runtime_reproduce_the_fitted_prediction(tmp_path):
    """The export round trip: the saved model plus :class:`LawRuntime` in a plain
    ``mj_step`` loop give the fitted prediction to 1e-9: the law's values are saved in full,
    and so is a fitted *model* parameter in the MJCF (whose writer alone keeps 6 digits)."""
    law, truth, start = CASES["stribeck"]
    seq = _recording(law, truth, 400)
    params = ms.ParameterDict(force_law_params(law, start, max_value={"stribeck_velocity": 5}))
    params.add(ms.make_parameter("joint_damping", seq.model, "j", nominal=0.0123456789))
    rf = ms.build_residual_fn([seq], force_laws=[law])
    opt, res = ms.optimize(params, rf, max_iters=3)
    (pred,) = rf.predict(opt.as_vector(), opt)
    ms.save_results(tmp_path, seq, params, opt, res, rf)
    runtime = LawRuntime.from_results(tmp_path)
    model = mujoco.MjModel.from_xml_path(str(tmp_path / "pend.xml"))
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, seq.initial_state[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    control = seq.control[0].data
    sensors = []
    for k in range(control.shape[0]):
        data.ctrl[:] = control[k]
        runtime.apply(model, data)
        mujoco.mj_step(model, data)
        sensors.append(data.sensordata.copy())
    np.testing.assert_allclose(np.array(sensors), pred.predicted.data, rtol=0, atol=1e-9)


def test_config_round_trip_and_mistakes():
    for law, _, _ in CASES.values():
        assert law_from_config(law.config()) == law
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    with pytest.raises(KeyError, match="no joint 'nope'"):
        ViscousFriction("v", "nope").bind(model)
    with pytest.raises(KeyError, match="unknown force law 'magic'"):
        law_from_config({"law": "magic"})
    law, truth, _ = CASES["viscous"]
    seq = _recording(law, truth, 50)
    rf = ms.build_residual_fn([seq], force_laws=[law])
    with pytest.raises(KeyError, match="needs parameter 'visc_damping'"):
        rf(np.zeros(1), ms.ParameterDict([ms.Parameter("other", 0.1, 0.0, 1.0)]))
    with pytest.raises(KeyError, match=r"missing \['damping'\]"):
        force_law_params(law, {})
