"""The lock step on MuJoCo's batch executor: the chunked lock step and the plain reference
loop, bit for bit, on one thread and on the pool, with every law feature."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from test_force_laws import CASES, PENDULUM
from test_laws import CASES as LAW_CASES
from test_laws import FRICTION_VALUES, FRICTIONS, NCAND, NSTEP, SERVO, _inputs
from test_lockstep import _batch_inputs

import mjsysid as ms
from mjsysid.sim.batch import (
    TRIALS,
    BatchLockstep,
    LawRollout,
    full_physics_columns,
    unconstrained,
)
from mjsysid.sim.laws.friction import ViscousFriction
from mjsysid.sim.lockstep import LawData, LockstepRollout, reference_rollout
from mjsysid.sim.rollout import BatchRollout

LIMITED = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="arm">
      <joint name="j" type="hinge" axis="0 1 0" range="-0.4 0.4" limited="true"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.3"/>
      <body name="tip" pos="0.2 0 0">
        <joint name="k" type="hinge" axis="0 1 0" frictionloss="0.01"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.2"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor name="m" joint="j"/><motor name="n" joint="k"/></actuator>
  <sensor><jointpos name="q" joint="j"/><jointvel name="v" joint="k"/></sensor>
</mujoco>
"""


def test_full_physics_columns_pick_the_state_out_of_a_batch_row():
    model = mujoco.MjModel.from_xml_string(SERVO)
    data = mujoco.MjData(model)
    data.qpos[:] = 0.3
    data.qvel[:] = -1.2
    data.time = 0.7
    row = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_INTEGRATION))
    mujoco.mj_getState(model, data, row, mujoco.mjtState.mjSTATE_INTEGRATION)
    full = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, data, full, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    np.testing.assert_array_equal(row[full_physics_columns(model)], full)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("threads", [1, 2, None])
def test_the_batch_lock_step_is_the_chunked_one_bit_for_bit(case, threads):
    law, truth, _ = CASES[case]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    n, nstep = 7, 80
    x0s, ctrl, vals = _batch_inputs(model, truth, n, nstep)
    with BatchRollout(2) as runner:
        chunked = LockstepRollout(runner, [law], chunk_work=0.0).run(
            [model] * n, x0s, ctrl, [vals], align=False
        )
        lock = BatchLockstep(runner, [law], threads=threads)
        out = lock.run([model] * n, x0s, ctrl, [vals], align=False)
        if threads is not None:
            assert lock.last_threads == threads
    assert out[2].all()
    for a, b in zip(chunked, out, strict=True):
        np.testing.assert_array_equal(a, b)


def test_candidate_models_and_aligned_output():
    """One model per rollout (different masses), aligned like the built-in rollout."""
    spec = mujoco.MjSpec.from_string(PENDULUM)
    models = []
    for mass in (0.5, 0.7, 0.9):
        spec.geoms[0].mass = mass
        models.append(spec.compile())
    law, truth, _ = CASES["viscous"]
    x0s, ctrl, vals = _batch_inputs(models[0], truth, 3, 50)
    with BatchRollout(2) as runner:
        ref = LockstepRollout(runner, [law]).run(models, x0s, ctrl, [vals])
        out = BatchLockstep(runner, [law], threads=2).run(models, x0s, ctrl, [vals])
    for a, b in zip(ref, out, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(out[0][0], out[0][1])
    np.testing.assert_array_equal(out[0][:, 0], x0s)  # row 0: the initial state


def _compiled(runner, laws):
    pytest.importorskip("numba")
    from mjsysid.sim.compiled import CompiledRollout

    return CompiledRollout(runner, laws)


PLAIN_LOOP_ENGINES = {
    "batch 1 thread": lambda runner, laws: BatchLockstep(runner, laws, threads=1),
    "batch 2 threads": lambda runner, laws: BatchLockstep(runner, laws, threads=2),
    "compiled": _compiled,
}


@pytest.mark.parametrize("engine", sorted(PLAIN_LOOP_ENGINES))
def test_with_constraints_it_is_the_plain_loop_bit_for_bit(engine):
    """A joint limit and friction loss (the solver's warm start carries over, as in
    ``mj_step``): the batch lock step and the compiled loops."""
    model = mujoco.MjModel.from_xml_string(LIMITED)
    law = ViscousFriction("visc", "k")
    n, nstep = 3, 300
    rng = np.random.default_rng(1)
    x0s = np.stack([ms.create_initial_state(model, rng.uniform(-0.3, 0.3, 2)) for _ in range(n)])
    ctrl = 0.6 * np.sin(np.arange(nstep)[None, :, None] * np.array([0.02, 0.05]))
    ctrl = np.repeat(ctrl, n, axis=0) * rng.uniform(0.5, 1.5, (n, 1, 1))
    vals = {"damping": rng.uniform(0.01, 0.05, (n, 2))}
    with BatchRollout(2) as runner:
        state, sens, ok = PLAIN_LOOP_ENGINES[engine](runner, [law]).run(
            [model] * n, x0s, ctrl, [vals], align=False
        )
    assert ok.all()
    for i in range(n):
        ref_state, ref_sens = reference_rollout(
            model, x0s[i], ctrl[i], [law], [{"damping": vals["damping"][i : i + 1]}]
        )
        np.testing.assert_array_equal(state[i], ref_state)
        np.testing.assert_array_equal(sens[i], ref_sens)
    limit = model.jnt_range[0, 1]
    assert np.abs(state[:, :, 1]).max() > 0.95 * limit  # the limit was reached


def _law_rollouts(laws, values, consts, threads, xml=SERVO):
    """test_laws' batched rollouts (inputs, constants, command rows) on the batch engine."""
    model = mujoco.MjModel.from_xml_string(xml)
    x0 = ms.create_initial_state(model, np.array([0.3]), np.array([0.0]))
    ctrl = np.zeros((NSTEP, model.nu))
    inputs = _inputs(NSTEP)
    new = np.zeros(NSTEP, dtype=bool)
    new[::4] = True
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
        state, _, ok = BatchLockstep(runner, laws, threads=threads).run(
            [model] * NCAND, np.repeat(x0[None], NCAND, axis=0),
            np.repeat(ctrl[None], NCAND, axis=0), per_law, data=data, align=False,
        )  # fmt: skip
    assert ok.all()
    for c in range(NCAND):
        vals = [{k: v[c : c + 1] for k, v in law_vals.items()} for law_vals in per_law]
        ref, _ = reference_rollout(
            model, x0, ctrl, laws, vals,
            inputs={k: inputs[k] for k in needed}, constants=consts, new_command=new,
        )  # fmt: skip
        # numpy's vectorised tanh/exp may differ by an ulp between array lengths
        np.testing.assert_allclose(state[c], ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", sorted(LAW_CASES))
def test_servos_with_inputs_constants_and_states_equal_the_reference(case):
    xml, law, values, consts = LAW_CASES[case]
    _law_rollouts([law], [values], consts, threads=2, xml=xml)


@pytest.mark.parametrize("case", sorted(FRICTIONS))
def test_friction_reading_the_dynamics_after_a_servo_equals_the_reference(case):
    servo, servo_values = LAW_CASES["position_servo"][1], LAW_CASES["position_servo"][2]
    friction = FRICTIONS[case]
    fvals = [
        {k: list(np.multiply(FRICTION_VALUES[k], s)) for k in friction.parameters}
        for s in (1.0, 0.5, 2.0)
    ]
    _law_rollouts([servo, friction], [servo_values, fvals], {"kp": 32.0, "vin": 12.0}, 1)


def test_threads_must_be_one_or_the_runners():
    with BatchRollout(2) as runner, pytest.raises(ValueError, match="threads must be None, 1 or 2"):
        BatchLockstep(runner, [], threads=3)


FLOOR = """
<mujoco><worldbody><geom name="floor" type="plane" size="1 1 0.1"/>
<body pos="0 0 0.2"><freejoint/><geom size="0.05"/></body></worldbody></mujoco>
"""


def test_which_models_cannot_activate_a_constraint():
    assert unconstrained(mujoco.MjModel.from_xml_string(PENDULUM))
    assert not unconstrained(mujoco.MjModel.from_xml_string(LIMITED))  # limit, friction loss
    assert not unconstrained(mujoco.MjModel.from_xml_string(SERVO))
    floor = mujoco.MjModel.from_xml_string(FLOOR)
    assert not unconstrained(floor)  # a ball on a floor
    floor.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    assert unconstrained(floor)


def test_the_law_rollout_times_both_engines_then_keeps_the_faster():
    law, truth, _ = CASES["coulomb"]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    x0s, ctrl, vals = _batch_inputs(model, truth, 5, 60)
    with BatchRollout(2) as runner:
        rollout = LawRollout(runner, [law], compiled=False)  # the lock steps alone
        chosen, outs = [], []
        for _ in range(TRIALS + 2):
            chosen.append(rollout.engine(model, 5, 60))
            outs.append(rollout.run([model] * 5, x0s, ctrl, [vals]))
        limited = mujoco.MjModel.from_xml_string(LIMITED)
        assert rollout.engine(limited, 5, 60) == "chunked"  # constraints: never the timing's
    assert chosen[:TRIALS] == ["chunked", "batch"] * (TRIALS // 2)
    assert chosen[TRIALS] == chosen[TRIALS + 1]
    for out in outs[1:]:
        for a, b in zip(outs[0], out, strict=True):
            np.testing.assert_array_equal(a, b)
