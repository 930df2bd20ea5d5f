"""Drop-in (#16): signal and state mappings, control names, initial states."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid.compat as sysid


def _plain(mapping: dict) -> dict[str, tuple[str, list[int]]]:
    """``{name: (SignalType name, indices)}`` for comparing with the peer's values."""
    return {k: (v[0].name, np.asarray(v[1]).tolist()) for k, v in mapping.items()}


def test_state_mappings_for_free_ball_hinge_slide(joints_model: mujoco.MjModel) -> None:
    qpos, qvel, act, ctrl = sysid.TimeSeries.compute_all_state_mappings(joints_model)
    # Indices into [qpos | qvel | act] (no time entry), as the peer gives them; an unnamed
    # free joint is named after its body.
    assert _plain(qpos) == {
        "fb_qpos": ("MjStateQPos", [0, 1, 2, 3, 4, 5, 6]),
        "ball_qpos": ("MjStateQPos", [7, 8, 9, 10]),
        "hinge_qpos": ("MjStateQPos", [11]),
        "slide_qpos": ("MjStateQPos", [12]),
    }
    assert _plain(qvel) == {
        "fb_qvel": ("MjStateQVel", [13, 14, 15, 16, 17, 18]),
        "ball_qvel": ("MjStateQVel", [19, 20, 21]),
        "hinge_qvel": ("MjStateQVel", [22]),
        "slide_qvel": ("MjStateQVel", [23]),
    }
    assert _plain(act) == {"filt_act": ("MjStateAct", [24])}
    assert _plain(ctrl) == {
        "servo_ctrl": ("MjCtrl", [0]),
        "push_ctrl": ("MjCtrl", [1]),
        "filt_ctrl": ("MjCtrl", [2]),
    }


def test_sensor_and_control_mappings(joints_model: mujoco.MjModel) -> None:
    sensors = sysid.TimeSeries.compute_all_sensor_mapping(joints_model)
    assert _plain(sensors) == {
        "hpos": ("MjSensor", [0]),
        "svel": ("MjSensor", [1]),
        "fq": ("MjSensor", [2, 3, 4, 5]),
    }
    controls = sysid.TimeSeries.compute_all_control_mapping(joints_model)
    assert list(controls) == ["servo_ctrl", "push_ctrl", "filt_ctrl"]


def test_from_names_state_signals(joints_model: mujoco.MjModel) -> None:
    t = np.arange(3) * 0.01
    ts = sysid.TimeSeries.from_names(
        t, np.zeros((3, 2)), joints_model, ["hinge_qpos", "slide_qvel"]
    )
    assert _plain(ts.signal_mapping) == {
        "hinge_qpos": ("MjStateQPos", [0]),
        "slide_qvel": ("MjStateQVel", [1]),
    }
    ts = sysid.TimeSeries.from_names(t, np.zeros((3, 6)), joints_model)
    assert list(ts.signal_mapping) == ["hpos", "svel", "fq"]


def test_from_control_names_uses_the_peer_ctrl_names(joints_model: mujoco.MjModel) -> None:
    t = np.arange(3) * 0.01
    ts = sysid.TimeSeries.from_control_names(t, np.zeros((3, 3)), joints_model)
    assert _plain(ts.signal_mapping) == {
        "servo_ctrl": ("MjCtrl", [0]),
        "push_ctrl": ("MjCtrl", [1]),
        "filt_ctrl": ("MjCtrl", [2]),
    }
    for names in (["push"], ["push_ctrl"]):
        ts = sysid.TimeSeries.from_control_names(t, np.zeros((3, 1)), joints_model, names)
        assert list(ts.signal_mapping) == ["push_ctrl"]
    kind, idx = ts.get_indices("push_ctrl")
    assert kind is sysid.SignalType.MjCtrl and list(idx) == [0]


def test_control_signals_still_found_by_actuator_name(joints_model: mujoco.MjModel) -> None:
    t = np.arange(3) * 0.01
    data = np.column_stack([np.zeros(3), np.ones(3), 2 * np.ones(3)])
    ts = sysid.TimeSeries.from_control_names(t, data, joints_model)
    np.testing.assert_array_equal(ts.signal("push").ravel(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(ts.slice_by_name(["filt"]).data.ravel(), [2.0, 2.0, 2.0])


def test_create_initial_state_full_vectors(joints_model: mujoco.MjModel) -> None:
    qpos = np.arange(joints_model.nq, dtype=float)
    state = sysid.create_initial_state(joints_model, qpos)
    assert state.shape == (26,)
    np.testing.assert_array_equal(state, [0.0, *range(13), *([0.0] * 12)])


def test_create_initial_state_by_names(joints_model: mujoco.MjModel) -> None:
    m = joints_model
    state = sysid.create_initial_state(
        m, np.array([0.3, 0.7]), qpos_names=["hinge_qpos", "slide_qpos"]
    )
    # Unnamed joints keep qpos0 (free [0 0 0 1 0 0 0], ball [1 0 0 0]).
    expected = [0.0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0.3, 0.7, *([0.0] * 12)]
    np.testing.assert_array_equal(state, expected)
    state = sysid.create_initial_state(
        m,
        np.zeros(m.nq),
        qvel=np.array([2.0]),
        qvel_names=["slide_qvel"],
        act=np.array([0.4]),
        act_names=["filt_act"],
    )
    np.testing.assert_array_equal(state, [*([0.0] * 24), 2.0, 0.4])


def test_create_initial_state_names_of_multi_entry_joints(joints_model: mujoco.MjModel) -> None:
    # The peer fails here ("Expected qpos to have shape 1, got 4"); a ball joint's name
    # takes its 4 entries.
    quat = np.array([0.0, 1.0, 0.0, 0.0])
    state = sysid.create_initial_state(joints_model, quat, qpos_names=["ball_qpos"])
    np.testing.assert_array_equal(state[8:12], quat)


def test_create_initial_state_wrong_length_says_length(joints_model: mujoco.MjModel) -> None:
    with pytest.raises(ValueError, match=r"qpos must be .*13.*got"):
        sysid.create_initial_state(joints_model, np.zeros(3))
    with pytest.raises(ValueError, match=r"Length|length"):
        sysid.create_initial_state(joints_model, np.zeros(2), qpos_names=["hinge_qpos"])
