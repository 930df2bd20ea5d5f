"""mjsysid's RobotYamlMotor law against the independent truth of the source document's motor
model (bench/truth/furuta_doc.py, written from the document without mjsysid): the same plant,
the same PWM, the same states, period by period."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from bench_import import load_bench_module

import mjsysid as ms
from mjsysid.data.states import state_slices
from mjsysid.sim.laws.core import force_law_params, law_values
from mjsysid.sim.laws.motors import RobotYamlMotor
from mjsysid.sim.lockstep import LawData, LockstepRollout
from mjsysid.sim.rollout import BatchRollout

fd = load_bench_module("bench/truth/furuta_doc.py", "bench_truth_furuta_doc")


def law_nominal(p: dict[str, float]) -> dict[str, list[float]]:
    """The law's parameters from the truth's parameter names."""
    return {
        "gear": [p["actuator_gear_pos"], p["actuator_gear_neg"]],
        "deadzone": [p["motor_deadzone_pos"], p["motor_deadzone_neg"]],
        "damping": [p["motor_damping_pos"], p["motor_damping_neg"]],
        "frictionloss": [p["motor_frictionloss_pos"], p["motor_frictionloss_neg"]],
        "viscous_quadratic": [p["viscous_quadratic"]],
        "back_emf_gain": [p["back_emf_gain"]],
    }


def physics_grid(truth: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(control (nstep, 1), new_command (nstep,))`` on the physics grid: period ``k``'s
    action (row ``k + 1`` of the truth) held for its ``SUBSTEPS`` steps."""
    action = truth["action"][1:]
    control = np.repeat(action, fd.SUBSTEPS)[:, None]
    new = np.zeros(control.shape[0], dtype=bool)
    new[:: fd.SUBSTEPS] = True
    return control, new


SLAM = np.r_[np.full(40, 255), np.full(30, -200), np.full(40, 240)].astype(np.int64)


@pytest.mark.parametrize("kind", ["prbs", "chirp", "slam"])
def test_the_documents_motor_model_reproduces_the_independent_truth(kind: str) -> None:
    """``slam``: full commands into the travel limits without the capture's safety shaping,
    so that the limit switch cuts the command."""
    p = dict(fd.TRUE_PARAMS)
    if kind == "slam":
        truth = fd.simulate(p, SLAM, seed=3, safety_limit_deg=None)
        assert truth["limit_cut"].sum() >= 5
    else:
        truth = fd.simulate(p, fd.commands_for(kind, 150, seed=3), seed=3)
    model = fd.build_model(p)
    law = RobotYamlMotor("motor", "motor_joint", directional=True, actuator=model.actuator(0).name)
    params = ms.ParameterDict(force_law_params(law, law_nominal(p)))
    control, new = physics_grid(truth)
    x0 = ms.create_initial_state(model, np.zeros(model.nq), np.zeros(model.nv))
    with BatchRollout(1) as runner:
        lock = LockstepRollout(runner, [law])
        state, _, ok = lock.run(
            [model], x0[None], control[None], [law_values(law, params)],
            data=LawData(new_command=new[None]), align=False,
        )  # fmt: skip
    assert ok.all()
    sl = state_slices(model)
    motor, pendulum = model.joint("motor_joint"), model.joint("pendulum_joint")
    # (align=False: row k is the state after step k; ticks 1..N end steps 9, 19, ...)
    q = state[0, fd.SUBSTEPS - 1 :: fd.SUBSTEPS, sl["qpos"]]
    v = state[0, fd.SUBSTEPS - 1 :: fd.SUBSTEPS, sl["qvel"]]
    np.testing.assert_allclose(q[:, motor.qposadr[0]], truth["true_motor_angle"][1:], atol=1e-12)
    np.testing.assert_allclose(
        q[:, pendulum.qposadr[0]], truth["true_pendulum_angle"][1:], atol=1e-12
    )
    np.testing.assert_allclose(v[:, motor.dofadr[0]], truth["true_motor_vel"][1:], atol=1e-10)
    act = state[0, fd.SUBSTEPS - 1 :: fd.SUBSTEPS, sl["act"]][:, 0]
    np.testing.assert_allclose(act, truth["act"][1:], atol=1e-12)


def test_gear_writes_the_mean_into_the_native_actuator() -> None:
    p = dict(fd.TRUE_PARAMS)
    model = fd.build_model(p)
    spec = mujoco.MjSpec.from_string(fd.build_mjcf(p))
    law = RobotYamlMotor("motor", "motor_joint", actuator=model.actuator(0).name)
    params = ms.ParameterDict(force_law_params(law, law_nominal(p)))
    params["motor_gear"].value = np.array([0.3, 0.5])
    identified = ms.apply_param_modifiers(params, spec)
    assert identified.actuator_gear[0, 0] == pytest.approx(0.4)
    copy = mujoco.MjModel.from_xml_string(fd.build_mjcf(p))
    params["motor_gear"].model_modifier(copy, params["motor_gear"])  # the exact fast path
    assert copy.actuator_gear[0, 0] == identified.actuator_gear[0, 0]
    # a parameter file alone gets its native write back
    back = ms.ParameterDict.from_dict(params.to_dict())
    assert ms.apply_param_modifiers(back, spec).actuator_gear[0, 0] == pytest.approx(0.4)
