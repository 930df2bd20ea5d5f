"""The compiled force-law loops (:mod:`mjsysid.sim.compiled`): the plain ``mj_step`` loop of
:func:`~mjsysid.sim.lockstep.reference_rollout` for every library law and option, on any
threads and candidate models; which laws get a kernel; how :class:`LawRollout` picks it.
(With a joint limit and friction loss: ``test_batch.py``, beside the batch lock step.)"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest
from test_force_laws import CASES as PENDULUM_CASES
from test_force_laws import PENDULUM, _controls, _x0
from test_laws import CASES as LAW_CASES
from test_laws import FRICTION_VALUES, FRICTIONS, NCAND, NSTEP, _inputs

import mjsysid as ms
from mjsysid.objective.residual import build_options
from mjsysid.sim.batch import LawRollout, law_engine_note
from mjsysid.sim.compiled import CompiledRollout
from mjsysid.sim.laws.core import force_law_params, state_start_key
from mjsysid.sim.laws.friction import JointFriction, ViscousFriction
from mjsysid.sim.laws.motors import RobotYamlMotor
from mjsysid.sim.laws.table import has_kernel
from mjsysid.sim.lockstep import LawData, LockstepRollout, reference_rollout
from mjsysid.sim.rollout import BatchRollout

pytest.importorskip("numba")

# laws whose maths has no tanh/exp/pow: the compiled loop gives NumPy's bits exactly;
# elsewhere libm and NumPy's vectorised functions may differ by an ulp
EXACT = {"viscous", "quadratic_drag", "position_servo", "position_servo_pd_short_volts",
         "current_servo"}  # fmt: skip


def _per_law(laws, values):
    return [
        {k: np.array([cand[k] for cand in values[i]]) for k in law.parameters}
        for i, law in enumerate(laws)
    ]


def _compare(state, sens, refs, exact: bool) -> None:
    for c, (ref_state, ref_sens) in enumerate(refs):
        if exact:
            np.testing.assert_array_equal(state[c], ref_state)
            np.testing.assert_array_equal(sens[c], ref_sens)
        else:
            np.testing.assert_allclose(state[c], ref_state, rtol=0, atol=1e-12)
            np.testing.assert_allclose(sens[c], ref_sens, rtol=0, atol=1e-12)


def _law_case(xml, laws, values, consts, threads, new_every=4):
    """``(compiled state, sensors, ok, [reference (state, sensors)])`` of NCAND candidates
    with recorded inputs, constants and a command row every ``new_every`` steps."""
    model = mujoco.MjModel.from_xml_string(xml)
    x0 = ms.create_initial_state(model, np.array([0.3]), np.array([0.0]))
    t = np.arange(NSTEP) * model.opt.timestep
    ctrl = np.repeat(0.5 * np.sin(2 * np.pi * 3.0 * t)[:, None], model.nu, axis=1)
    inputs = _inputs(NSTEP)
    new = np.zeros(NSTEP, dtype=bool)
    new[::new_every] = True
    per_law = _per_law(laws, values)
    needed = {k for law in laws for k in law.inputs}
    data = LawData(
        {k: np.repeat(inputs[k][None], NCAND, axis=0) for k in needed},
        {k: np.full(NCAND, v) for k, v in consts.items()},
        np.repeat(new[None], NCAND, axis=0),
    )
    with BatchRollout(threads) as runner:
        state, sens, ok = CompiledRollout(runner, laws).run(
            [model] * NCAND, np.repeat(x0[None], NCAND, axis=0),
            np.repeat(ctrl[None], NCAND, axis=0), per_law, data=data, align=False,
        )  # fmt: skip
    refs = []
    for c in range(NCAND):
        vals = [{k: v[c : c + 1] for k, v in law_vals.items()} for law_vals in per_law]
        needed_inputs = {k: inputs[k] for k in needed}
        refs.append(
            reference_rollout(
                model, x0, ctrl, laws, vals, inputs=needed_inputs, constants=consts, new_command=new
            )
        )
    return state, sens, ok, refs


@pytest.mark.parametrize("case", sorted(LAW_CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_servos_and_motors_are_the_reference_loop(case, threads):
    xml, law, values, consts = LAW_CASES[case]
    state, sens, ok, refs = _law_case(xml, [law], [values], consts, threads)
    assert ok.all()
    _compare(state, sens, refs, exact=case in EXACT)
    assert not np.allclose(refs[0][0], refs[1][0])  # the candidates really differ


@pytest.mark.parametrize("case", sorted(FRICTIONS))
def test_friction_after_a_servo_is_the_reference_loop(case):
    """The friction reads the servo's torque of the same step (its load terms) and, sticking
    or with the load's torque, the joint-space dynamics."""
    xml, servo, servo_values, _ = LAW_CASES["position_servo"]
    friction = FRICTIONS[case]
    fvals = [
        {k: list(np.multiply(FRICTION_VALUES[k], s)) for k in friction.parameters}
        for s in (1.0, 0.5, 2.0)
    ]
    consts = {"kp": 32.0, "vin": 12.0}
    state, sens, ok, refs = _law_case(xml, [servo, friction], [servo_values, fvals], consts, 2)
    assert ok.all()
    _compare(state, sens, refs, exact=False)


@pytest.mark.parametrize("case", sorted(PENDULUM_CASES))
def test_pendulum_laws_on_candidate_models_are_the_reference_loop(case):
    """One model per rollout (different masses), two threads, aligned output."""
    law, truth, start = PENDULUM_CASES[case]
    spec = mujoco.MjSpec.from_string(PENDULUM)
    models = []
    for mass in (0.5, 0.7, 0.9):
        spec.geoms[0].mass = mass
        models.append(spec.compile())
    ctrl = _controls(400)
    x0s = np.stack([_x0(models[0], a) for a in (0.3, -0.5, 0.1)])
    vals = {k: np.stack([truth[k], start[k], truth[k]]) for k in truth}
    with BatchRollout(2) as runner:
        state, sens, ok = CompiledRollout(runner, [law]).run(
            models, x0s, np.stack([ctrl] * 3), [vals]
        )
    assert ok.all()
    for i in range(3):
        ref_state, ref_sens = reference_rollout(
            models[i], x0s[i], ctrl, [law], [{k: v[i : i + 1] for k, v in vals.items()}]
        )
        np.testing.assert_array_equal(state[i, 0], x0s[i])  # aligned: row 0 the start
        tol = 0 if case in EXACT else 1e-12
        np.testing.assert_allclose(state[i, 1:], ref_state[:-1], rtol=0, atol=tol)
        np.testing.assert_allclose(sens[i], ref_sens, rtol=0, atol=tol)  # sensors at t_k


def test_given_start_states_and_a_hard_deadzone_are_the_reference_loop():
    """The motor's held command started from given values (NaN: its own), a cut deadzone,
    the limit switch, and a command row every 10 steps."""
    xml, law, values, _ = LAW_CASES["robot_yaml_motor_ramp"]
    law = dataclasses.replace(law, width=0.0)
    values = [dict(v) for v in values]
    for v, held in zip(values, (0.2, np.nan, -0.1), strict=True):
        v[state_start_key("held")] = [held]
    model = mujoco.MjModel.from_xml_string(xml)
    per_law = [{k: np.array([cand[k] for cand in values]) for k in values[0]}]
    x0 = ms.create_initial_state(model, np.array([0.3]), np.array([0.0]))
    ctrl = np.repeat(0.5 * np.sin(np.arange(NSTEP) * 0.05)[:, None], model.nu, axis=1)
    new = np.zeros(NSTEP, dtype=bool)
    new[5::10] = True  # the first row starts late: the given start is held until then
    data = LawData({}, {}, np.repeat(new[None], NCAND, axis=0))
    with BatchRollout(2) as runner:
        state, sens, ok = CompiledRollout(runner, [law]).run(
            [model] * NCAND, np.repeat(x0[None], NCAND, axis=0),
            np.repeat(ctrl[None], NCAND, axis=0), per_law, data=data, align=False,
        )  # fmt: skip
    assert ok.all()
    refs = [
        reference_rollout(
            model,
            x0,
            ctrl,
            [law],
            [{k: v[c : c + 1] for k, v in per_law[0].items()}],
            new_command=new,
        )
        for c in range(NCAND)
    ]
    _compare(state, sens, refs, exact=True)
    assert not np.allclose(refs[0][0][:5], refs[1][0][:5])  # the given starts acted


def test_a_diverged_simulation_is_flagged_and_the_others_are_not():
    law, truth, _ = PENDULUM_CASES["viscous"]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    ctrl = _controls(200)
    vals = {"damping": np.array([truth["damping"], [np.nan, np.nan], truth["damping"]])}
    x0s = np.stack([_x0(model)] * 3)
    with BatchRollout(2) as runner:
        engine = CompiledRollout(runner, [law])
        _, _, ok = engine.run([model] * 3, x0s, np.stack([ctrl] * 3), [vals])
    assert ok.tolist() == [True, False, True]


class _MyViscous(ViscousFriction):
    """A user's subclass: it may change the step, so it has no kernel."""


def test_which_laws_have_a_kernel():
    assert has_kernel(ViscousFriction("v", "j").bind(mujoco.MjModel.from_xml_string(PENDULUM)))
    assert has_kernel(RobotYamlMotor("m", "j", actuator="m"))
    assert not has_kernel(_MyViscous("v", "j"))
    assert has_kernel(FRICTIONS["stick_load_external"])  # reads the dynamics
    assert has_kernel(JointFriction("f", "j", load=True, load_external=True))


def test_the_law_rollout_runs_the_compiled_loops_when_it_can():
    law, truth, _ = PENDULUM_CASES["coulomb"]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    x0s, ctrl = np.stack([_x0(model)] * 2), np.stack([_controls(100)] * 2)
    vals = [{k: np.stack([v, v]) for k, v in truth.items()}]
    with BatchRollout(2) as runner:
        auto = LawRollout(runner, [law])
        assert auto.engine(model, 2, 100) == "compiled"
        assert LawRollout(runner, [law], compiled=False).engine(model, 2, 100) != "compiled"
        assert LawRollout(runner, [_MyViscous("v", "j")]).engine(model, 2, 100) != "compiled"
        with pytest.raises(ValueError, match=r"force laws \['v'\] have no compiled kernel"):
            LawRollout(runner, [_MyViscous("v", "j")], compiled=True)
        out = auto.run([model] * 2, x0s, ctrl, vals)
        ref = LockstepRollout(runner, [law]).run([model] * 2, x0s, ctrl, vals)
    for a, b in zip(out, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_a_residual_function_runs_its_laws_compiled_unless_told_not_to():
    """The same residuals from the compiled loops and from the lock step; the choice travels
    with the residual's options (held-out data, Dask workers)."""
    law, truth, start = PENDULUM_CASES["stribeck"]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    t = 0.002 * np.arange(300)
    ctrl = _controls(300)
    x0 = _x0(model)
    vals = [{k: np.asarray(v, float)[None] for k, v in truth.items()}]
    _, sens = reference_rollout(model, x0, ctrl, [law], vals)
    seqs = ms.ModelSequences(
        "p", mujoco.MjSpec.from_string(PENDULUM), ["s"], [x0],
        [ms.TimeSeries.from_control_names(t, ctrl, model)],
        [ms.TimeSeries.from_names(t, sens, model)],
    )  # fmt: skip
    params = ms.ParameterDict(force_law_params(law, {k: v[0] for k, v in start.items()}))
    x = params.as_vector()
    X = x[:, None] * np.array([1.0, 1.1, 0.9])[None]
    compiled = ms.build_residual_fn(seqs, force_laws=[law])
    numpy = ms.build_residual_fn(seqs, force_laws=[law], compiled_laws=False)
    np.testing.assert_allclose(compiled(X, params), numpy(X, params), rtol=0, atol=1e-10)
    assert build_options(numpy)["compiled_laws"] is False
    with pytest.raises(ValueError, match=r"force laws \['v'\] have no compiled kernel"):
        ms.build_residual_fn(seqs, force_laws=[_MyViscous("v", "j")], compiled_laws=True)


def test_a_fit_is_told_when_its_laws_will_not_run_compiled():
    assert law_engine_note([]) is None
    assert law_engine_note([ViscousFriction("v", "j"), RobotYamlMotor("m", "j")]) is None
    note = law_engine_note([ViscousFriction("v", "j"), _MyViscous("mine", "j")])
    assert note == (
        "force laws ['mine'] are not the library's own, so every law runs on the NumPy lock "
        "step (slower than the library's compiled laws on small batches)"
    )


def test_a_parameter_without_values_is_named_not_read_as_zero():
    law, truth, _ = PENDULUM_CASES["stribeck"]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    vals = {k: np.asarray(v, float)[None] for k, v in truth.items() if k != "static"}
    with BatchRollout(1) as runner, pytest.raises(KeyError, match="'strb': no values for its"):
        CompiledRollout(runner, [law]).run([model], _x0(model)[None], _controls(10)[None], [vals])


CONTACT = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1" friction="0.8"/>
    <body name="cart" pos="0 0 0.06">
      <joint name="lift" type="slide" axis="0 0 1"/>
      <joint name="slide" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.05 0.05 0.05" mass="0.4"/>
    </body>
  </worldbody>
  <actuator><motor name="push" joint="slide"/></actuator>
  <sensor><jointpos name="x" joint="slide"/><jointvel name="v" joint="slide"/></sensor>
</mujoco>
"""


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast", "RK4"])
def test_with_contacts_it_is_the_plain_loop_bit_for_bit(integrator):
    """A box dropped on a floor and pushed: contacts and their friction cone, a friction
    law reading the dynamics on top (split into ``mj_step1``/``mj_step2`` but for RK4)."""
    model = mujoco.MjModel.from_xml_string(
        CONTACT.replace('timestep="0.002"', f'timestep="0.002" integrator="{integrator}"')
    )
    laws = [
        JointFriction("fric", "slide", stick=True, load=True, load_external=True),
        ViscousFriction("visc", "slide"),
    ]
    n, nstep = 3, 400
    x0s = np.stack([ms.create_initial_state(model, np.array([z, 0.0])) for z in (0.0, 0.02, 0.05)])
    ctrl = np.repeat((1.5 * np.sin(np.arange(nstep) * 0.03))[None, :, None], n, axis=0)
    vals = [
        {k: np.full((n, 2), 0.05) for k in laws[0].parameters},
        {"damping": np.array([[0.1, 0.2], [0.0, 0.0], [0.3, 0.1]])},
    ]
    with BatchRollout(2) as runner:
        state, sens, ok = CompiledRollout(runner, laws).run(
            [model] * n, x0s, ctrl, vals, align=False
        )
    assert ok.all()
    for i in range(n):
        ref_state, ref_sens = reference_rollout(
            model, x0s[i], ctrl[i], laws, [{k: v[i : i + 1] for k, v in lv.items()} for lv in vals]
        )
        np.testing.assert_array_equal(state[i], ref_state)
        np.testing.assert_array_equal(sens[i], ref_sens)
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, state[0, -1], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    mujoco.mj_forward(model, data)
    assert data.ncon > 0  # the box rests on the floor
