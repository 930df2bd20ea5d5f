"""Force laws v2: every library law batched over candidates equals the plain reference loop,
with recorded inputs, per-recording constants, internal states and command rows; the runtime a
user's simulator calls gives the same; each term does what its equation says."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.sim.laws.core import (
    ForceLaw,
    StepContext,
    force_law_params,
    law_class,
    law_from_config,
    law_values,
    laws_from_params,
)
from mjsysid.sim.laws.friction import JointFriction
from mjsysid.sim.laws.motors import RobotYamlMotor
from mjsysid.sim.laws.runtime import LawRuntime
from mjsysid.sim.laws.servos import CurrentServo, PositionServo
from mjsysid.sim.lockstep import LawData, LockstepRollout, reference_rollout
from mjsysid.sim.rollout import BatchRollout

SERVO = """
<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.005"/>
  <worldbody>
    <body name="load">
      <joint name="j" type="hinge" axis="0 1 0" armature="0.004" frictionloss="0.02"
             range="-2.5 2.5" limited="true"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.12" size="0.01" mass="1.13"/>
    </body>
  </worldbody>
  <actuator><motor name="u" joint="j" gear="0"/></actuator>
  <sensor><jointpos name="angle" joint="j"/></sensor>
</mujoco>
"""

FILTERED = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="arm">
      <joint name="j" type="hinge" axis="0 0 1" range="-1 1" limited="true" armature="0.003"/>
      <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.01" mass="0.05"/>
    </body>
  </worldbody>
  <actuator>
    <general name="m" joint="j" dyntype="filter" dynprm="0.005" gear="0.42"
             ctrlrange="-0.6 0.6" ctrllimited="true"/>
  </actuator>
  <sensor><jointpos name="angle" joint="j"/></sensor>
</mujoco>
"""

NSTEP, NCAND = 300, 3


def _inputs(nstep: int) -> dict[str, np.ndarray]:
    t = np.arange(nstep) * 0.005
    enable = (t < 0.9).astype(float)  # the torque goes off for the last part
    return {
        "goal_position": 0.8 * np.sin(2 * np.pi * 1.3 * t),
        "torque_enable": enable,
        "goal_current": 0.4 * np.sign(np.sin(2 * np.pi * 2.1 * t)),
        "input_volts": 12.0 + 0.3 * np.sin(7 * t),
    }


# (model, law, values of 3 candidates, constants)
CASES: dict[str, tuple[str, ForceLaw, list[dict[str, list[float]]], dict[str, float]]] = {
    "position_servo": (
        SERVO,
        PositionServo("servo", "j"),
        [
            {"kt": [1.4], "resistance": [2.5], "gain": [0.01]},
            {"kt": [1.2], "resistance": [3.0], "gain": [0.02]},
            {"kt": [1.6], "resistance": [2.0], "gain": [0.005]},
        ],
        {"kp": 32.0, "vin": 12.0},
    ),
    "position_servo_pd_short_volts": (
        SERVO,
        PositionServo("servo", "j", derivative=True, off="short", voltage_input="input_volts"),
        [
            {"kt": [1.4], "resistance": [2.5], "gain": [0.01], "gain_d": [0.001]},
            {"kt": [1.2], "resistance": [3.0], "gain": [0.02], "gain_d": [0.002]},
            {"kt": [1.6], "resistance": [2.0], "gain": [0.005], "gain_d": [0.0]},
        ],
        {"kp": 32.0, "kd": 4.0},
    ),
    "robot_yaml_motor_ramp": (
        FILTERED,
        RobotYamlMotor("motor", "j", actuator="m", width=0.008),
        [
            {
                "gear": [0.42, 0.40],
                "deadzone": [0.14, 0.08],
                "damping": [0.002, 0.01],
                "frictionloss": [0.05, 0.04],
                "viscous_quadratic": [3e-4],
                "back_emf_gain": [0.007],
            },
            {
                "gear": [0.30, 0.35],
                "deadzone": [0.10, 0.12],
                "damping": [0.004, 0.003],
                "frictionloss": [0.02, 0.06],
                "viscous_quadratic": [0.0],
                "back_emf_gain": [0.0],
            },
            {
                "gear": [0.50, 0.45],
                "deadzone": [0.20, 0.05],
                "damping": [0.0, 0.02],
                "frictionloss": [0.0, 0.0],
                "viscous_quadratic": [1e-3],
                "back_emf_gain": [0.02],
            },
        ],
        {},
    ),
    "current_servo": (
        SERVO,
        CurrentServo("cur", "j"),
        [
            {"kt": [1.4], "max_current": [0.3]},
            {"kt": [1.0], "max_current": [0.5]},
            {"kt": [2.0], "max_current": [0.1]},
        ],
        {},
    ),
}


def _rollouts(model_xml: str, laws: list[ForceLaw], values: list[list[dict]], consts: dict):
    """``(batched state, [reference states])`` of NCAND candidates with the same inputs."""
    model = mujoco.MjModel.from_xml_string(model_xml)
    x0 = ms.create_initial_state(model, np.array([0.3]), np.array([0.0]))
    t = np.arange(NSTEP) * model.opt.timestep
    ctrl = np.repeat(0.5 * np.sin(2 * np.pi * 3.0 * t)[:, None], model.nu, axis=1)
    inputs = _inputs(NSTEP)
    new = np.zeros(NSTEP, dtype=bool)
    new[::4] = True  # a command row every 4 steps
    per_law = [
        {k: np.array([cand[k] for cand in values[i]]) for k in law.parameters}
        for i, law in enumerate(laws)
    ]
    needed = {k for law in laws for k in law.inputs}
    data = LawData(
        {k: np.repeat(inputs[k][None], NCAND, axis=0) for k in needed},
        {k: np.full(NCAND, v) for k, v in consts.items()},
        np.repeat(new[None], NCAND, axis=0),
    )
    with BatchRollout(2) as runner:
        lock = LockstepRollout(runner, laws, chunk_work=0.0)  # every thread a chunk
        state, _, ok = lock.run(
            [model] * NCAND, np.repeat(x0[None], NCAND, axis=0),
            np.repeat(ctrl[None], NCAND, axis=0), per_law, data=data, align=False,
        )  # fmt: skip
    assert ok.all()
    refs = []
    for c in range(NCAND):
        vals = [{k: v[c : c + 1] for k, v in law_vals.items()} for law_vals in per_law]
        ref, _ = reference_rollout(
            model, x0, ctrl, laws, vals,
            inputs={k: inputs[k] for k in needed}, constants=consts, new_command=new,
        )  # fmt: skip
        refs.append(ref)
    return state, refs


@pytest.mark.parametrize("case", sorted(CASES))
def test_batched_law_equals_the_reference_loop(case: str) -> None:
    xml, law, values, consts = CASES[case]
    state, refs = _rollouts(xml, [law], [values], consts)
    for c, ref in enumerate(refs):
        # numpy's vectorised tanh/exp may differ by an ulp between array lengths: 1e-12, not bits
        np.testing.assert_allclose(state[c], ref, rtol=0, atol=1e-12)
    assert not np.allclose(refs[0], refs[1])  # the candidates really differ


FRICTIONS = {
    "coulomb_viscous": JointFriction("f", "j", width=0.02),
    "stribeck_exponent": JointFriction("f", "j", width=0.02, stribeck=True, fit_exponent=True),
    "load": JointFriction("f", "j", width=0.02, load=True, load_quadratic=True, drag=True),
    "stick_load_external": JointFriction(
        "f", "j", stribeck=True, load=True, load_external=True, drag=True, stick=True
    ),
}
FRICTION_VALUES = {
    "coulomb": [0.05, 0.03],
    "viscous": [0.02, 0.04],
    "stribeck": [0.04, 0.02],
    "stribeck_velocity": [0.3],
    "stribeck_exponent": [1.5],
    "load": [0.05, 0.08],
    "load_quadratic": [0.01, 0.02],
    "load_external": [0.03, 0.06],
    "drag": [0.001, 0.003],
}


@pytest.mark.parametrize("case", sorted(FRICTIONS))
def test_friction_after_a_servo_equals_the_reference_loop(case: str) -> None:
    servo = CASES["position_servo"][1]
    friction = FRICTIONS[case]
    scale = [1.0, 0.5, 2.0]
    fvals = [
        {k: list(np.multiply(FRICTION_VALUES[k], s)) for k in friction.parameters} for s in scale
    ]
    state, refs = _rollouts(
        SERVO, [servo, friction], [CASES["position_servo"][2], fvals], {"kp": 32.0, "vin": 12.0}
    )
    for c, ref in enumerate(refs):
        np.testing.assert_allclose(state[c], ref, rtol=0, atol=1e-12)


def _ctx(v: float, tau: float = 0.0, ctrl: float = 0.0) -> StepContext:
    return StepContext(
        q=np.zeros((1, 1)), v=np.array([[v]]), act=np.zeros((1, 0)), ctrl=np.array([[ctrl]]),
        force=np.array([[tau]]), time=np.zeros(1), dt=0.005, new_command=np.array([True]),
    )  # fmt: skip


def test_friction_terms_follow_their_equations() -> None:
    model = mujoco.MjModel.from_xml_string(SERVO)
    law = JointFriction("f", "j", stribeck=True, load=True).bind(model)
    vals = {k: np.array([FRICTION_VALUES[k]]) for k in law.parameters}
    # moving forward at 0.3 rad/s with 1 N·m transmitted: the positive-direction values
    ctx = _ctx(0.3, tau=1.0)
    ctx.values = vals
    law.step(ctx)
    level = 0.05 + 0.04 * np.exp(-1.0) + 0.05 * 1.0
    expected = 1.0 - (level + 0.02 * 0.3)
    assert ctx.force[0, 0] == pytest.approx(expected, rel=1e-12)
    # backwards: the negative-direction values, the opposite sign
    ctx = _ctx(-0.3, tau=1.0)
    ctx.values = vals
    law.step(ctx)
    level = 0.03 + 0.02 * np.exp(-1.0) + 0.08 * 1.0
    assert ctx.force[0, 0] == pytest.approx(1.0 + level + 0.04 * 0.3, rel=1e-12)


def test_servo_torque_follows_the_dc_motor_law() -> None:
    model = mujoco.MjModel.from_xml_string(SERVO)
    servo = PositionServo("s", "j").bind(model)
    ctx = _ctx(0.5)
    ctx.q = np.array([[0.1]])
    ctx.values = {
        "kt": np.array([[1.4]]),
        "resistance": np.array([[2.5]]),
        "gain": np.array([[0.01]]),
    }
    ctx.inputs = {"goal_position": np.array([0.6]), "torque_enable": np.array([1.0])}
    ctx.constants = {"kp": np.array([32.0]), "vin": np.array([12.0])}
    servo.step(ctx)
    duty = min(0.01 * 32 * 0.5, 1.0)
    assert ctx.force[0, 0] == pytest.approx(1.4 * (duty * 12 - 1.4 * 0.5) / 2.5, rel=1e-12)
    ctx.force[:] = 0
    ctx.inputs = {"goal_position": np.array([30.0]), "torque_enable": np.array([1.0])}
    servo.step(ctx)  # saturated at full duty
    assert ctx.force[0, 0] == pytest.approx(1.4 * (12 - 1.4 * 0.5) / 2.5, rel=1e-12)
    ctx.force[:] = 0
    ctx.inputs = {"goal_position": np.array([30.0]), "torque_enable": np.array([0.0])}
    servo.step(ctx)  # torque off: the motor is disconnected
    assert ctx.force[0, 0] == 0.0


def test_runtime_reproduces_the_lockstep_rollout() -> None:
    xml, law, values, consts = CASES["position_servo_pd_short_volts"]
    friction = FRICTIONS["stick_load_external"]  # reads the joint-space dynamics too
    fvals = [{k: FRICTION_VALUES[k] for k in friction.parameters}] * NCAND
    state, _ = _rollouts(xml, [law, friction], [values, fvals], consts)
    params = ms.ParameterDict(
        force_law_params(law, values[0]) + force_law_params(friction, fvals[0])
    )
    runtime = LawRuntime.from_params(params, constants=consts)
    assert set(runtime.inputs) == {"goal_position", "torque_enable", "input_volts"}
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    data.qpos[0] = 0.3
    inputs = _inputs(NSTEP)
    for k in range(NSTEP):
        data.ctrl[:] = 0.0
        runtime.apply(
            model, data, {n: inputs[n][k] for n in runtime.inputs}, new_command=k % 4 == 0
        )
        mujoco.mj_step(model, data)
    assert data.qpos[0] == pytest.approx(state[0, -1, 1], abs=1e-12)
    with pytest.raises(KeyError, match="missing \\['input_volts'\\]"):
        runtime.apply(model, data, {"goal_position": 0.0, "torque_enable": 1.0})
    with pytest.raises(KeyError, match="constants \\['kd', 'kp'\\]"):
        LawRuntime.from_params(params)


def test_runtime_rollout_is_apply_then_mj_step_at_every_step() -> None:
    """Two starts in one call, command rows every 4 steps, inputs, constants and a friction
    that reads the dynamics: the loop a user would write, to 1e-12."""
    xml, law, values, consts = CASES["position_servo_pd_short_volts"]
    friction = FRICTIONS["stick_load_external"]
    params = ms.ParameterDict(
        force_law_params(law, values[0])
        + force_law_params(friction, {k: FRICTION_VALUES[k] for k in friction.parameters})
    )
    runtime = LawRuntime.from_params(params, constants=consts)
    model = mujoco.MjModel.from_xml_string(xml)
    inputs = {n: _inputs(NSTEP)[n] for n in runtime.inputs}
    new = np.arange(NSTEP) % 4 == 0
    ctrl = np.zeros((NSTEP, model.nu))
    x0 = np.stack([ms.create_initial_state(model, np.array([q])) for q in (0.3, -0.2)])
    state, sens = runtime.rollout(model, x0, ctrl, inputs, new_command=new)
    assert state.shape == (2, NSTEP, x0.shape[1]) and sens.shape == (2, NSTEP, model.nsensordata)
    for b in range(2):
        data = mujoco.MjData(model)
        mujoco.mj_setState(model, data, x0[b], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        runtime.reset()
        for k in range(NSTEP):
            data.ctrl[:] = ctrl[k]
            runtime.apply(model, data, {n: v[k] for n, v in inputs.items()}, new_command=new[k])
            mujoco.mj_step(model, data)
            np.testing.assert_allclose(sens[b, k], data.sensordata, rtol=0, atol=1e-12)
        np.testing.assert_allclose(state[b, -1, 1], data.qpos[0], rtol=0, atol=1e-12)
    one, _ = runtime.rollout(model, x0[1], ctrl, inputs, new_command=new)  # one start
    np.testing.assert_allclose(one[0], state[1], rtol=0, atol=1e-12)
    with pytest.raises(KeyError, match=r"missing \['input_volts'\]"):
        runtime.rollout(
            model, x0, ctrl, {"goal_position": 0.0 * new, "torque_enable": 1.0 + 0 * new}
        )
    with pytest.raises(ValueError, match=r"initial_state and control must be as many rollouts"):
        runtime.rollout(model, x0, np.zeros((3, NSTEP, 1)), inputs)
    with pytest.raises(ValueError, match=r"control must be \(nstep, 1\) or \(nbatch, nstep, 1\)"):
        runtime.rollout(model, x0, np.zeros(NSTEP), inputs)
    with pytest.raises(ValueError, match=r"inputs\['goal_position'\] must be \(300,\)"):
        runtime.rollout(model, x0, ctrl, {**inputs, "goal_position": np.zeros(5)})


def test_configs_round_trip_and_name_what_is_wrong() -> None:
    for law in [CASES[c][1] for c in CASES] + list(FRICTIONS.values()):
        assert law_from_config(law.config()) == law
    motor = RobotYamlMotor("m", "j", actuator="m", limit_switch=False)
    assert law_from_config(motor.config()) == motor
    with pytest.raises(KeyError, match="unknown force law 'nope'"):
        law_class("nope")
    with pytest.raises(ImportError, match="cannot import module 'no_such_module'"):
        law_class("no_such_module:Law")
    with pytest.raises(ImportError, match="has no 'Missing'"):
        law_class("mjsysid.sim.laws.friction:Missing")
    with pytest.raises(ValueError, match="off must be one of"):
        PositionServo("s", "j", off="brake")
    params = ms.ParameterDict(force_law_params(motor, {k: [0.1] for k in motor.parameters}))
    assert laws_from_params(ms.ParameterDict.from_dict(params.to_dict())) == [motor]
    assert params["m_gear"].meta["unit"] == "N·m"
    assert law_values(motor, params)["gear"].shape == (1, 2)


def test_a_sequence_without_the_laws_inputs_is_refused_naming_it() -> None:
    spec = mujoco.MjSpec.from_string(SERVO)
    model = spec.compile()
    t = np.arange(50) * 0.005
    ctrl = ms.TimeSeries.from_control_names(t, np.zeros((50, 1)), model)
    sens = ms.TimeSeries.from_names(t, np.zeros((50, 1)), model)
    x0 = ms.create_initial_state(model, np.zeros(1), np.zeros(1))
    goal = ms.TimeSeries.from_custom_map(t, np.zeros((50, 1)), [("goal_position", 1)])
    seq = ms.ModelSequences("s", spec, "run", x0, ctrl, sens, inputs=goal, constants={"kp": 32.0})
    law = PositionServo("servo", "j")
    with pytest.raises(
        ValueError, match=r"s/run: inputs must be the recorded inputs .*missing \['torque_enable'\]"
    ):
        ms.build_residual_fn([seq], force_laws=[law])
    seq2 = ms.ModelSequences("s", spec, "run", x0, ctrl, sens, inputs=goal)
    with pytest.raises(ValueError, match=r"missing \['torque_enable'\]"):
        ms.build_residual_fn([seq2], force_laws=[law])


FREE = SERVO.replace('frictionloss="0.02"', "")


@pytest.mark.parametrize("timestep", [0.005, 0.01, 0.02])
def test_implicit_friction_sticks_and_slips_at_log_timesteps(timestep: float) -> None:
    """A pendulum let go at 0.3 rad (gravity torque 0.197 N·m): a dry friction budget above it
    holds it still exactly, from the first step, at every timestep real logs use; below it,
    it slides down and stops, never reversing; an explicit hard Coulomb of the same level
    chatters instead of holding."""
    model = mujoco.MjModel.from_xml_string(FREE.replace('"0.005"', f'"{timestep}"'))
    x0 = ms.create_initial_state(model, np.array([0.3]), np.array([0.0]))
    ctrl = np.zeros((100, 1))

    def run(law: ForceLaw, level: float) -> np.ndarray:
        vals = [{k: np.array([[level, level]] if k == "coulomb" else [[0.0, 0.0]])
                 for k in law.parameters}]  # fmt: skip
        states, _ = reference_rollout(model, x0, ctrl, [law], vals)
        return states

    stick = JointFriction("f", "j", viscous=False, stick=True)
    held = run(stick, 0.25)
    assert np.all(held[:, 2] == 0.0) and np.all(held[:, 1] == 0.3)
    slid = run(stick, 0.15)
    assert slid[-1, 1] < 0.25 and np.all(slid[:, 2] <= 1e-12)  # down, never back up
    assert abs(slid[-1, 2]) < 1e-12  # and stuck again (to round-off) under the budget
    explicit = run(JointFriction("f", "j", viscous=False), 0.25)
    assert np.any(explicit[:, 2] != 0.0)  # the explicit law chatters around rest


def test_the_deadzone_ramp_moves_the_cut_between_command_levels() -> None:
    """width 0 is the file's cut; a ramp of width w scales the commands within w/2 of the
    deadzone linearly, so the held command changes with d between command levels."""
    law = RobotYamlMotor("m", "j", actuator="m")
    ramp = RobotYamlMotor("m", "j", actuator="m", width=0.008)
    vals = {"gear": np.array([[0.4, 0.4]]), "deadzone": np.array([[0.14, 0.08]])}
    u = np.array([0.139, 0.141, -0.079, -0.081])
    batch = {k: np.repeat(v, 4, 0) for k, v in vals.items()}
    np.testing.assert_array_equal(law.transform(u, batch), [0.0, 0.141, 0.0, -0.081])
    out = ramp.transform(u, batch)
    np.testing.assert_allclose(out, [0.139 * 0.375, 0.141 * 0.625, -0.079 * 0.375, -0.081 * 0.625])
    assert law_from_config(ramp.config()) == ramp


def test_clamp_is_np_clip() -> None:
    """The laws' clip (two ufuncs, no np.clip dispatch) gives np.clip's values, NaN kept, with
    scalar or per-row bounds."""
    from mjsysid.sim.laws.core import clamp

    x = np.array([-3.0, -0.5, 0.0, 0.7, 2.0, np.nan, np.inf, -np.inf])
    np.testing.assert_array_equal(clamp(x, -1.0, 1.0), np.clip(x, -1.0, 1.0))
    limit = np.linspace(0.1, 2.0, x.size)
    np.testing.assert_array_equal(clamp(x, -limit, limit), np.clip(x, -limit, limit))


def test_the_motor_holds_its_command_between_rows_in_a_new_array() -> None:
    """Between command rows the motor law keeps the held command without transforming the
    row's command again, and hands back its own array (never a view of the state it read)."""
    spec = mujoco.MjSpec.from_string(CASES["robot_yaml_motor_ramp"][0])
    model = spec.compile()
    law = RobotYamlMotor("motor", "j", actuator="m", width=0.008, limit_switch=False).bind(model)
    vals = {
        "gear": np.array([[0.4, 0.3], [0.5, 0.2]]),
        "deadzone": np.array([[0.1, 0.1], [0.1, 0.1]]),
        "damping": np.zeros((2, 2)),
        "frictionloss": np.zeros((2, 2)),
        "viscous_quadratic": np.zeros((2, 1)),
        "back_emf_gain": np.zeros((2, 1)),
    }
    held = np.array([[0.25], [-0.5]])

    def step(new: list[bool]) -> np.ndarray:
        ctx = StepContext(
            q=np.zeros((2, model.nq)), v=np.zeros((2, model.nv)), act=np.zeros((2, model.na)),
            ctrl=np.full((2, model.nu), 0.6), force=np.zeros((2, model.nv)), time=np.zeros(2),
            dt=0.002, new_command=np.array(new), values=vals, state={"held": held},
        )  # fmt: skip
        out = law.step(ctx)["held"]
        assert not np.shares_memory(out, held)
        return out[:, 0]

    np.testing.assert_array_equal(step([False, False]), [0.25, -0.5])
    mean = np.array([0.35, 0.35])
    np.testing.assert_allclose(step([True, False]), [0.6 * 0.4 / mean[0], -0.5])


def test_a_directional_magnitude_is_splits_bit_for_bit() -> None:
    """The friction family reads a pair's entry for a direction ±1 by one selection; the
    values equal |split(direction, k⁺, k⁻)| bit for bit (merged laws' (batch, ndof) too)."""
    from mjsysid.sim.laws.friction import _magnitude
    from mjsysid.sim.laws.joint import split

    rng = np.random.default_rng(4)
    for shape in ((7, 2), (7, 2, 3)):
        vals = {"k": rng.uniform(0.0, 3.0, shape) * (rng.random(shape) > 0.2)}
        d = np.where(rng.random((7, *shape[2:])) > 0.5, 1.0, -1.0)
        expected = np.abs(split(d, vals["k"][:, 0], vals["k"][:, -1]))
        np.testing.assert_array_equal(_magnitude(d > 0, vals, "k"), expected)
