"""Drop-in (#16): SystemTrajectory, sysid_rollout and measured data made by the peer."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjsysid.compat as sysid

#: Passes once WP2's TimeSeries lands (``get_indices``, ``"<actuator>_ctrl"`` names); then
#: remove the marks.
DT = 0.01
#: jointpos "hpos" of the pendulum from qpos 0.1 under ctrl 0.5, one row per step, the first
#: row at the initial state (the peer gives these values, stamped one step late).
HPOS = [0.1, 0.10884680659660215, 0.12382565772727319, 0.1428090570225696, 0.16415213437403986]


def _control(model: mujoco.MjModel, n: int = 6) -> sysid.TimeSeries:
    return sysid.TimeSeries.from_control_names(np.arange(n) * DT, np.full((n, 1), 0.5), model)


def _rollout(model: mujoco.MjModel) -> sysid.SystemTrajectory:
    x0 = sysid.create_initial_state(model, np.array([0.1]))
    trajs = sysid.sysid_rollout(
        model, mujoco.MjData(model), control_signal=_control(model), initial_states=x0
    )
    assert len(trajs) == 1
    return trajs[0]


def _measured(model: mujoco.MjModel, times: np.ndarray) -> sysid.TimeSeries:
    return sysid.TimeSeries.from_names(times, np.zeros((times.size, 3)), model)


def test_rollout_keyword_and_timeseries_fields(pendulum: mujoco.MjModel) -> None:
    tr = _rollout(pendulum)
    assert isinstance(tr.control, sysid.TimeSeries)
    assert isinstance(tr.sensordata, sysid.TimeSeries)
    assert isinstance(tr.state, sysid.TimeSeries)
    assert list(tr.sensordata.signal_mapping) == ["hpos", "hvel", "af"]
    assert list(tr.control.signal_mapping) == ["servo_ctrl"]
    np.testing.assert_array_equal(tr.initial_state, [0.0, 0.1, 0.0])
    assert tr.sensordim == 3


def test_rollout_sensor_rows_are_stamped_at_their_own_instant(pendulum: mujoco.MjModel) -> None:
    # The peer stamps row k with times[k] + dt (the state after the step); mjsysid keeps the
    # instant the sensors were read: row 0 is the initial state at t=0.
    tr = _rollout(pendulum)
    n = len(tr.sensordata.times)
    np.testing.assert_allclose(tr.sensordata.times, tr.control.times[:n])
    np.testing.assert_allclose(tr.sensordata.times[:5], np.arange(5) * DT, atol=1e-12)
    hpos = tr.sensordata.data[:, tr.sensordata.get_indices("hpos")[1]].ravel()
    np.testing.assert_allclose(hpos[:5], HPOS, rtol=1e-12)


def test_state_mapping_picks_the_right_columns(pendulum: mujoco.MjModel) -> None:
    # The peer's state mapping points one column early (its state rows start with time).
    tr = _rollout(pendulum)
    qpos = tr.state.data[:, tr.state.get_indices("hinge_qpos")[1]].ravel()
    hpos = tr.sensordata.data[:, tr.sensordata.get_indices("hpos")[1]].ravel()
    np.testing.assert_allclose(tr.state.times, tr.sensordata.times)
    np.testing.assert_allclose(qpos, hpos, rtol=1e-12)


def test_constructor_positional_and_check_compatible(pendulum: mujoco.MjModel) -> None:
    t = np.arange(5) * DT
    x0 = sysid.create_initial_state(pendulum, np.array([0.1]))
    tr = sysid.SystemTrajectory(pendulum, _control(pendulum, 5), _measured(pendulum, t), x0, None)
    assert tr.state is None
    assert tr.check_compatible() is None
    short = sysid.TimeSeries.from_names(t, np.zeros((5, 2)), pendulum, ["hpos", "hvel"])
    bad = sysid.SystemTrajectory(pendulum, _control(pendulum, 5), short, x0, None)
    with pytest.raises(ValueError, match=r"(?s)2.*3"):
        bad.check_compatible()
    with pytest.warns(UserWarning, match="sensor"):
        bad.check_compatible(allow_missing_sensors=True)


def test_split_into_chunks(pendulum: mujoco.MjModel) -> None:
    tr = _rollout(pendulum)
    chunks = tr.split(2)
    assert len(chunks) == len(tr.control.times) // 2
    assert [len(c.control.times) for c in chunks] == [2] * len(chunks)
    np.testing.assert_allclose(chunks[1].control.times, [0.02, 0.03])
    np.testing.assert_allclose(chunks[1].initial_state[:2], [0.02, HPOS[2]], rtol=1e-12)
    t = np.arange(5) * DT
    x0 = sysid.create_initial_state(pendulum, np.array([0.1]))
    no_state = sysid.SystemTrajectory(
        pendulum, _control(pendulum, 5), _measured(pendulum, t), x0, None
    )
    with pytest.raises(ValueError, match="state"):
        no_state.split(2)


def test_get_sensordata_slice_by_sensor_kind(pendulum: mujoco.MjModel) -> None:
    tr = _rollout(pendulum)
    pos = tr.get_sensordata_slice()  # "joint_pos" by default
    assert pos.shape == (len(tr.sensordata.times), 1)
    np.testing.assert_allclose(pos[:5, 0], HPOS, rtol=1e-12)
    assert tr.get_sensordata_slice("joint_vel").shape == pos.shape
    with pytest.raises(ValueError, match="joint_torque"):  # the peer: IndexError
        tr.get_sensordata_slice("joint_torque")


def test_replace_returns_a_copy(pendulum: mujoco.MjModel) -> None:
    tr = _rollout(pendulum)
    other = tr.replace(initial_state=np.zeros(3))
    assert isinstance(other, sysid.SystemTrajectory) and other is not tr
    np.testing.assert_array_equal(other.initial_state, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(tr.initial_state, [0.0, 0.1, 0.0])
    assert other.sensordata is tr.sensordata


def test_save_and_load_keep_the_signal_mapping(pendulum: mujoco.MjModel, tmp_path: Path) -> None:
    tr = _rollout(pendulum)
    path = tmp_path / "traj.npz"
    assert tr.save_to_disk(path) is None
    with np.load(path, allow_pickle=False) as z:  # no pickle inside
        assert len(z.files) > 0
    back = sysid.SystemTrajectory.load_from_disk(path, pendulum)
    assert list(back.sensordata.signal_mapping) == ["hpos", "hvel", "af"]
    assert list(back.control.signal_mapping) == ["servo_ctrl"]
    np.testing.assert_array_equal(back.sensordata.data, tr.sensordata.data)
    np.testing.assert_array_equal(back.initial_state, tr.initial_state)
    np.testing.assert_array_equal(back.state.data, tr.state.data)


def test_render_exists() -> None:
    # Rendering needs an OpenGL context; only the method's presence is checked here.
    assert callable(sysid.SystemTrajectory.render)


# --------------------------------------------------------- data made the peer's way


def _peer_made(kind: str, model: mujoco.MjModel) -> tuple[sysid.TimeSeries, sysid.TimeSeries]:
    """Control and sensor series laid out as the peer's rollout stamps them."""
    n = 5
    ctrl = _control(model, n)
    if kind == "shifted":  # same row count, every sensor time one step later
        return ctrl, _measured(model, np.arange(n) * DT + DT)
    if kind == "one_fewer":  # the peer drops the last control row and shifts the rest
        return ctrl, _measured(model, np.arange(1, n) * DT)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["shifted", "one_fewer"])
def test_peer_stamped_measurements_are_flagged_with_the_fix(
    kind: str, pendulum_spec: mujoco.MjSpec, pendulum: mujoco.MjModel
) -> None:
    ctrl, sens = _peer_made(kind, pendulum)
    x0 = sysid.create_initial_state(pendulum, np.array([0.1]))
    # The warning is required; whether construction then goes on or stops (a ValueError, e.g.
    # for a span the control does not cover) is up to the implementation.
    with pytest.warns(UserWarning, match=r"(?i)timestep"):
        try:
            sysid.ModelSequences("pend", pendulum_spec, "seq", x0, ctrl, sens)
        except ValueError:
            pass
    with pytest.warns(UserWarning, match=r"(?i)timestep"):
        try:
            sysid.SystemTrajectory(pendulum, ctrl, sens, x0, None)
        except ValueError:
            pass


def test_sensors_starting_one_step_after_the_initial_state_are_flagged(
    pendulum_spec: mujoco.MjSpec, pendulum: mujoco.MjModel
) -> None:
    x0 = sysid.create_initial_state(pendulum, np.array([0.1]))  # time 0
    sens = _measured(pendulum, np.arange(1, 6) * DT)  # 0.01 .. 0.05
    ctrl = _control(pendulum, 7)  # 0 .. 0.06: covers the sensors, not shifted like them
    with pytest.warns(UserWarning, match=r"(?i)timestep"):
        sysid.ModelSequences("pend", pendulum_spec, "seq", x0, ctrl, sens)


def test_correctly_stamped_measurements_raise_no_warning(
    pendulum_spec: mujoco.MjSpec, pendulum: mujoco.MjModel
) -> None:
    # pytest turns warnings into errors here (filterwarnings = error).
    ctrl = _control(pendulum, 5)
    sens = _measured(pendulum, np.arange(5) * DT)
    x0 = sysid.create_initial_state(pendulum, np.array([0.1]))
    sysid.ModelSequences("pend", pendulum_spec, "seq", x0, ctrl, sens)
