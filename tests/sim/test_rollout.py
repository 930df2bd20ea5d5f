"""Rollouts: sysid_rollout and its clock check."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2, BOX, SERVO, excitation


def test_sysid_rollout_matches_step_loop():
    model = mujoco.MjModel.from_xml_string(ARM2)
    ctrl = excitation(50, 2, hold=5)
    x0 = ms.create_initial_state(model, qpos=[0.2, -0.1])
    traj = ms.sysid_rollout([model, model], None, np.stack([ctrl, 2 * ctrl]), x0, nthread=2)
    assert len(traj) == 2
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, x0, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    for k in range(50):
        data.ctrl[:] = ctrl[k]
        mujoco.mj_forward(model, data)
        # row k: state and sensors at the same instant t_k
        np.testing.assert_allclose(traj[0].sensordata[k], data.sensordata, atol=1e-12)
        np.testing.assert_allclose(traj[0].qpos()[k], data.qpos, atol=1e-12)
        assert traj[0].times[k] == pytest.approx(data.time)
        mujoco.mj_step(model, data)
    assert not np.allclose(traj[1].qpos(), traj[0].qpos())


def test_sysid_rollout_takes_control_time_series():
    """A control TimeSeries (or one per rollout) gives the same rollouts as its rows; one not
    sampled every model timestep is refused with the fix in the message."""
    model = mujoco.MjModel.from_xml_string(ARM2)
    dt = model.opt.timestep
    ctrl = excitation(50, 2, hold=5)
    t = 0.3 + dt * np.arange(50)
    x0 = ms.create_initial_state(model, qpos=[0.2, -0.1])
    ref = ms.sysid_rollout(model, None, np.stack([ctrl, 2 * ctrl]), x0)
    one = ms.TimeSeries.from_control_names(t, ctrl, model)
    two = ms.TimeSeries.from_control_names(t, 2 * ctrl, model)
    for got in (
        ms.sysid_rollout(model, None, [one, two], x0),
        [
            *ms.sysid_rollout(model, None, one, x0),
            *ms.sysid_rollout(model, None, (two,), x0),
        ],
    ):
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a.sensordata, b.sensordata)
    coarse = ms.TimeSeries.from_control_names(2 * dt * np.arange(50), ctrl, model)
    with pytest.raises(
        ValueError,
        match=r"control\[1\] must be a TimeSeries sampled every model timestep \(0.002 s\).*"
        r"Its steps are 0.004 to 0.004 s; resample it first: ts.resample\(target_dt=0.002\)",
    ):
        ms.sysid_rollout(model, None, [one, coarse], x0)
    with pytest.raises(ValueError, match=r"control must be TimeSeries of one length"):
        ms.sysid_rollout(model, None, [one, two.remove_from_beginning(0.01)], x0)


def test_sysid_rollout_reports_divergence():
    spec = mujoco.MjSpec.from_string(SERVO)
    ms.apply_pgain(spec, "servo", 1e14)
    model = spec.compile()
    x0 = ms.create_initial_state(model, qpos=[0.5])
    with pytest.raises(ms.RolloutDivergedError, match=r"rollout 0 diverged at step \d+"):
        ms.sysid_rollout(model, None, np.ones((200, 1)), x0)


def test_sysid_rollout_shape_errors():
    model = mujoco.MjModel.from_xml_string(ARM2)
    x0 = ms.create_initial_state(model)
    with pytest.raises(ValueError, match=r"control must be shape \(nbatch, nstep, 2\)"):
        ms.sysid_rollout(model, None, np.zeros((10, 3)), x0)
    with pytest.raises(ValueError, match="initial_states must be rows of length"):
        ms.sysid_rollout(model, None, np.zeros((10, 2)), x0[:3])
    with pytest.raises(ValueError, match="control must be finite"):
        ms.sysid_rollout(model, None, np.full((10, 2), np.nan), x0)


def test_clock_ok_flags_resets_and_non_finite_rollouts():
    from mjsysid.sim.rollout import clock_ok

    def check_clock(*args, **kw):
        return np.flatnonzero(~clock_ok(*args, **kw))

    nb, n, dt = 6, 300, 0.002
    t0 = np.array([0.0, 0.0, 0.0, -0.3, 0.0, 1.0])
    s = np.random.default_rng(0).normal(size=(nb, n, 5))
    s[:, :, 0] = t0[:, None] + dt * np.arange(1, n + 1)
    assert check_clock(s, t0, np.full(nb, dt)).size == 0
    s[1, 40, 3] = np.nan  # a non-finite state entry
    s[2, 150:, 0] = dt * np.arange(1, n - 150 + 1)  # reset to time 0 half-way
    s[3, 100:, 0] = dt * np.arange(1, n - 100 + 1)  # negative start: the reset jumps forward
    s[4, -1, 0] = np.inf
    assert check_clock(s, t0, np.full(nb, dt)).tolist() == [1, 2, 3, 4]
    # without the scan (MuJoCo's automatic reset on) only the clock is read
    assert check_clock(s, t0, np.full(nb, dt), scan=False).tolist() == [2, 3, 4]


# a model whose reset depends on the model: an equality (eq_active0) and a mocap body
LINKED = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="target" mocap="true" pos="0.3 0 0.5"/>
    <body name="box" pos="0 0 0.3">
      <freejoint/>
      <geom type="box" size=".05 .05 .05" mass="0.5"/>
    </body>
    <body name="arm" pos="0 0.5 0.5">
      <joint name="a" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <body pos="0.3 0 0">
        <joint name="b" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      </body>
    </body>
  </worldbody>
  <equality><joint joint1="a" joint2="b" polycoef="0 0.5 0 0 0" active="false"/></equality>
  <actuator><motor joint="a"/></actuator>
  <sensor>
    <framepos objtype="body" objname="box"/>
    <framepos objtype="xbody" objname="target"/>
    <jointpos joint="b"/>
    <jointvel joint="b"/>
  </sensor>
</mujoco>
"""


# delayed actuator and sensor: MuJoCo's history buffers are part of the full-physics state
DELAYED = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="arm">
      <joint name="a" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.2"/>
    </body>
  </worldbody>
  <actuator><motor joint="a" delay="0.01" nsample="6"/></actuator>
  <sensor><jointpos joint="a" delay="0.004" nsample="3"/><jointvel joint="a"/></sensor>
</mujoco>
"""


def _candidates(xml: str, n: int) -> list[mujoco.MjModel]:
    """``n`` models of ``xml`` with other masses (and, with an equality, one active)."""
    base = mujoco.MjModel.from_xml_string(xml)
    models = []
    for i in range(n):
        m = base.__copy__()
        m.body_mass[1:] *= 1.0 + 0.1 * i
        if m.neq and i % 2:
            m.eq_active0[:] = 1
        if m.nmocap and i % 2:
            m.body_pos[m.body_mocapid >= 0] += 0.1
        mujoco.mj_setConst(m, mujoco.MjData(m))
        models.append(m)
    return models


@pytest.mark.parametrize(
    "xml", [ARM2, BOX, LINKED, DELAYED], ids=["arm", "contacts", "reset", "history"]
)
@pytest.mark.parametrize(("nthread", "n"), [(1, 5), (2, 5), (2, 16)])
def test_sensor_only_rollouts_equal_the_recorded_ones(xml, nthread, n):
    """``record_states=False`` (mujoco.batch.Batch, sensors only; ``n`` of its 16 simulations)
    gives the bits of the recorded rollout (mujoco.rollout), call after call on the kept
    batch, and flags the same divergences: a reset by MuJoCo, and one without the automatic
    reset."""
    from mjsysid.sim.rollout import BatchRollout

    models = _candidates(xml, n)
    m0 = models[0]
    x0 = np.repeat(ms.create_initial_state(m0)[None], n, axis=0)
    x0[:, 0] = 0.25  # start time
    rng = np.random.default_rng(1)
    ctrl = rng.normal(size=(n, 120, m0.nu))
    with BatchRollout(nthread) as runner, BatchRollout(nthread) as fresh:
        for call in range(3):
            if call == 1:  # a diverging candidate: MuJoCo resets it (huge accelerations)
                models[2].opt.gravity[:] = [1e12, 1e12, -1e12]
            if call == 2:  # the same, without the automatic reset: the batch stops it
                for m in models:
                    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_AUTORESET
            state, sens, ok = runner.run(models, x0, ctrl, align=False)
            none, sens_only, ok_only = runner.run(
                models, x0, ctrl, align=False, record_states=False
            )
            _, sens_fresh, _ = fresh.run(models, x0, ctrl, align=False, record_states=False)
            assert none is None and state.shape[:2] == sens.shape[:2]
            expected = [i for i in range(n) if not (call and i == 2)]
            assert np.flatnonzero(ok).tolist() == expected
            assert np.flatnonzero(ok_only).tolist() == expected
            np.testing.assert_array_equal(sens_only[ok], sens[ok])
            np.testing.assert_array_equal(sens_fresh[ok], sens[ok])


def test_sensor_only_rollouts_record_states_for_a_negative_start_time():
    """The clock check of a start at a negative time needs every step: the states are
    recorded all the same."""
    from mjsysid.sim.rollout import BatchRollout

    models = _candidates(ARM2, 2)
    x0 = np.repeat(ms.create_initial_state(models[0])[None], 2, axis=0)
    x0[1, 0] = -0.1
    ctrl = np.zeros((2, 100, models[0].nu))
    with BatchRollout(2) as runner:
        state, sens, ok = runner.run(models, x0, ctrl, align=False, record_states=False)
        assert state is not None and ok.all()
        x0[1, 0] = 0.0
        state, sens2, ok = runner.run(models, x0, ctrl, align=False, record_states=False)
        assert state is None and ok.all()
        np.testing.assert_array_equal(sens2, sens)
