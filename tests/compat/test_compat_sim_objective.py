"""Drop-in (#16, #26): the rest of sim/objective/output behaviour peer code meets through
``import mjsysid.compat as sysid``; the peer's functional residual API runs end to end, and
mjsysid's own objects (array reads of a rollout) work behind the compat door.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjsysid
import mjsysid.compat as sysid
from mjsysid import signal_modifier as sm
from mjsysid.sim.trajectory import TrajectorySeries

DT = 0.01


def _control(model: mujoco.MjModel, n: int = 6) -> sysid.TimeSeries:
    return sysid.TimeSeries.from_control_names(np.arange(n) * DT, np.full((n, 1), 0.5), model)


def _rollout(model: mujoco.MjModel, n: int = 6) -> sysid.SystemTrajectory:
    x0 = sysid.create_initial_state(model, np.array([0.1]))
    (tr,) = sysid.sysid_rollout(model, None, _control(model, n), x0)
    return tr


# ------------------------------------------------------------------ SystemTrajectory


def test_rollout_series_still_read_as_arrays(pendulum: mujoco.MjModel) -> None:
    tr = _rollout(pendulum)
    assert isinstance(tr.sensordata, TrajectorySeries)
    np.testing.assert_array_equal(tr.times, tr.sensordata.times)
    assert tr.sensordata.shape == (6, 3) and tr.sensordata[0, 0] == pytest.approx(0.1)
    np.testing.assert_array_equal(np.asarray(tr.sensordata), tr.sensordata.data)
    np.testing.assert_array_equal(tr.sensordata + 1.0, tr.sensordata.data + 1.0)
    np.testing.assert_array_equal(tr.qpos()[:, 0], tr.sensordata.data[:, 0])
    np.testing.assert_array_equal(tr.state[:, 0], tr.times)  # state rows start with time
    np.testing.assert_array_equal(tr.initial_state, tr.state.data[0])


def test_trajectory_from_arrays_and_the_constructor_wants_series(
    pendulum: mujoco.MjModel,
) -> None:
    tr = _rollout(pendulum)
    arr = sysid.SystemTrajectory.from_arrays(
        pendulum, tr.times, tr.control.data, tr.sensordata.data, tr.state.data
    )
    np.testing.assert_array_equal(arr.sensordata.data, tr.sensordata.data)
    np.testing.assert_array_equal(arr.times, tr.times)
    np.testing.assert_array_equal(arr.initial_state, tr.state.data[0])
    np.testing.assert_array_equal(arr.qvel(), tr.qvel())
    with pytest.raises(TypeError, match=r"control must be a TimeSeries.*from_arrays"):
        sysid.SystemTrajectory(
            pendulum, tr.times, tr.control.data, tr.sensordata.data, tr.state.data
        )


def test_qpos_of_a_measured_trajectory_says_state_is_missing(pendulum: mujoco.MjModel) -> None:
    tr = _rollout(pendulum)
    measured = sysid.SystemTrajectory(pendulum, tr.control, tr.sensordata, tr.initial_state, None)
    with pytest.raises(ValueError, match="missing state"):
        measured.qpos()


def test_unknown_sensor_kind(pendulum: mujoco.MjModel) -> None:
    with pytest.raises(ValueError, match=r"sensor must be one of \['joint_pos'"):
        _rollout(pendulum).get_sensordata_slice("joint_speed")


def test_state_mapping_names_and_columns(joints_model: mujoco.MjModel) -> None:
    from mjsysid.sim.trajectory import state_signal_mapping

    m = state_signal_mapping(joints_model)
    cols = {k: v[1].tolist() for k, v in m.items()}
    # [time | qpos: fb 0-6, ball 7-10, hinge 11, slide 12 | qvel: fb 13.., ... | act]
    assert cols["fb_qpos"] == list(range(1, 8)) and cols["ball_qpos"] == [8, 9, 10, 11]
    assert cols["hinge_qpos"] == [12] and cols["fb_qvel"] == list(range(14, 20))
    assert cols["filt_act"] == [25]  # 1 + nq 13 + nv 11


def test_peer_array_helpers(pendulum: mujoco.MjModel) -> None:
    from mjsysid.compat._src import trajectory

    ctrl, times = trajectory.timeseries2array([_control(pendulum), _control(pendulum)])
    assert ctrl.shape == (2, 5, 1) and times.shape == (2, 5)  # the last row dropped
    x0 = sysid.create_initial_state(pendulum, np.array([0.1]))
    assert trajectory.sequence2array([x0, x0]).shape == (2, 3)
    state, sens = mujoco.rollout.rollout(pendulum, mujoco.MjData(pendulum), x0, ctrl[0])
    (tr,) = trajectory.arrays2traj([pendulum], x0[None], ctrl[:1], times[:1], state, sens)
    np.testing.assert_array_equal(tr.sensordata.times, times[0])  # not shifted by dt
    np.testing.assert_allclose(tr.state.data[1:, 0], times[0, 1:], atol=1e-12)
    np.testing.assert_allclose(
        tr.sensordata.data[:, 0], _rollout(pendulum).sensordata.data[:5, 0], rtol=1e-12
    )


def test_src_holds_the_peers_module_names_as_real_modules() -> None:
    import importlib
    import sys

    names = ["io", "model_modifier", "optimize", "parameter", "plotting", "residual",
             "signal_modifier", "signal_transform", "timeseries", "trajectory"]  # fmt: skip
    for name in names:
        module = importlib.import_module(f"mjsysid.compat._src.{name}")
        assert module.__spec__.name == f"mjsysid.compat._src.{name}"  # no alias finder
        assert sys.modules[module.__name__] is module
    from mjsysid.compat._src import residual, trajectory

    assert residual.sysid_rollout is trajectory.sysid_rollout is sysid.sysid_rollout
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("mjsysid._src")  # the peer's paths live under compat only


# ------------------------------------------------------------------ ModelSequences


def test_model_sequences_allow_missing_sensors_both_ways(
    pendulum_spec: mujoco.MjSpec, pendulum: mujoco.MjModel
) -> None:
    t = np.arange(5) * DT
    sens = sysid.TimeSeries.from_names(t, np.zeros((5, 1)), pendulum, ["hpos"])
    x0 = sysid.create_initial_state(pendulum, np.array([0.1]))
    a = sysid.ModelSequences("p", pendulum_spec, "s", x0, _control(pendulum, 5), sens, True)
    b = sysid.ModelSequences(
        "p", pendulum_spec, "s", x0, _control(pendulum, 5), sens, allow_missing_sensors=True
    )
    assert a.allow_missing_sensors and b.allow_missing_sensors and a.rms_reference is None
    assert isinstance(a, mjsysid.ModelSequences)
    with pytest.raises(TypeError, match=r"rms_reference must be a list.*mjsysid\.compat"):
        mjsysid.ModelSequences("p", pendulum_spec, "s", x0, _control(pendulum, 5), sens, True)


def test_peer_stamp_warning_is_a_user_warning() -> None:
    assert issubclass(mjsysid.PeerTimestampWarning, UserWarning)


def test_split_windows_of_a_recording_raise_no_peer_warning(
    pendulum_spec: mujoco.MjSpec, pendulum: mujoco.MjModel
) -> None:
    tr = _rollout(pendulum, 40)
    seq = sysid.ModelSequences("p", pendulum_spec, "s", tr.initial_state, tr.control, tr.sensordata)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mjsysid.split_windows(seq, 0.1)  # a compat ModelSequences in the core


# ------------------------------------------------------------------ signal functions


def test_signal_functions_take_one_spelling_of_each_keyword() -> None:
    s = sysid.SignalType.MjSensor
    t = np.array([0.0, 0.1, 0.2, 0.3])
    ts = sysid.TimeSeries(t, np.column_stack([t, t]), {"a": (s, [0]), "b": (s, [1])})
    g = sm.apply_gain(ts, sensor_name="a", gain=np.array([2.0]))
    np.testing.assert_allclose(g.data[:, 0], 2 * t)
    w = sm.weighted_diff(predicted_data=ts, measured_data=g, sensor_weights={"a": 2.0})
    np.testing.assert_allclose(w[:, 0], 2 * t)
    with pytest.raises(TypeError, match="unexpected keyword argument 'name'"):
        sm.apply_gain(ts, name="a", gain=1.0)


def test_top_level_delay_holds_the_mjsysid_one_refuses() -> None:
    s = sysid.SignalType.MjSensor
    t = np.array([0.0, 0.1, 0.2])
    ts = sysid.TimeSeries(t, t[:, None], {"a": (s, [0])})
    np.testing.assert_allclose(sysid.apply_delay(ts, "a", np.array([-0.05])).data[:, 0],
                               [0.05, 0.15, 0.2])  # fmt: skip
    with pytest.raises(ValueError, match="inside the series span"):
        sm.apply_delay(ts, "a", np.array([0.05]))


def test_time_window_outside_raises() -> None:
    ts = sysid.TimeSeries(np.array([0.0, 0.1]), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="apply_time_window"):
        sm.apply_time_window(ts, 0.3, 0.4)


def test_normalize_residual_computes_the_peers_numbers() -> None:
    m = np.array([[3.0, 1.0], [4.0, 1.0]])  # column norms 5 and sqrt(2)
    r = np.ones((2, 2))
    np.testing.assert_allclose(sysid.normalize_residual(r, m), r / [5 / np.sqrt(2), 1.0])
    # mjsysid's own divides by the column's RMS, sqrt(sum m^2 / N)
    np.testing.assert_allclose(mjsysid.normalize_residual(r, m), r / [5 / np.sqrt(2), 1.0])
    m3 = np.array([[1.0], [1.0], [1.0]])
    np.testing.assert_allclose(sysid.normalize_residual(np.ones((3, 1)), m3), np.sqrt(2 / 3))
    np.testing.assert_allclose(mjsysid.normalize_residual(np.ones((3, 1)), m3), 1.0)


# ------------------------------------------------------------------ residual API


def _problem(
    spec: mujoco.MjSpec, model: mujoco.MjModel
) -> tuple[sysid.SystemTrajectory, sysid.ModelSequences, sysid.ParameterDict]:
    tr = _rollout(model, 30)
    seq = sysid.ModelSequences("p", spec, "s", tr.initial_state, tr.control, tr.sensordata)

    def damping(s: mujoco.MjSpec, p: sysid.Parameter) -> None:
        joint = s.joint("hinge")
        d = np.array(joint.damping, dtype=np.float64)
        d[0] = float(p.value[0])
        joint.damping = d

    params = sysid.ParameterDict([sysid.Parameter("d", 0.1, 0.0, 1.0, modifier=damping)])
    return tr, seq, params


def test_residual_is_zero_at_the_truth_and_matches_build_residual_fn(
    pendulum_spec: mujoco.MjSpec, pendulum: mujoco.MjModel
) -> None:
    _, seq, params = _problem(pendulum_spec, pendulum)
    res, preds, meas = sysid.residual(np.array([0.3]), params, [seq], n_threads=1)
    assert len(res) == len(preds) == len(meas) == 1
    fn = sysid.build_residual_fn(
        models_sequences=[seq], n_threads=1, return_pred_all=True, resample_true=False
    )
    got, got_preds, got_meas = fn(np.array([0.3]), params)
    np.testing.assert_allclose(got[0], res[0])
    assert len(got_preds) == len(got_meas) == 1
    batch, _, _ = fn(np.array([[0.3, 0.1]]), params)  # a batch: (n, k) blocks
    np.testing.assert_allclose(batch[0][:, 0], res[0].ravel())
    with pytest.raises(TypeError, match="build_residual_fn keywords"):
        sysid.build_residual_fn(models_sequences=[seq], signal_transform=None)
    res0, _, _ = sysid.residual(np.array([0.1]), params, [seq], n_threads=1)
    assert np.max(np.abs(res0[0])) < 1e-9
    fn.close()


def test_model_residual_against_measured_trajectories(
    pendulum_spec: mujoco.MjSpec, pendulum: mujoco.MjModel
) -> None:
    tr, _, params = _problem(pendulum_spec, pendulum)
    measured = tr.replace(state=None)

    def build(p: sysid.ParameterDict) -> mujoco.MjModel:
        return sysid.apply_param_modifiers(p, pendulum_spec)

    res, preds, meas = sysid.model_residual(np.array([0.1]), params, build, measured)
    assert np.max(np.abs(res[0])) < 1e-12 and res[0].shape == (30, 3)
    np.testing.assert_allclose(preds[0].data, meas[0].data, atol=1e-12)
    res, _, _ = sysid.model_residual(np.array([0.5]), params, build, [measured])
    assert np.max(np.abs(res[0])) > 1e-6 and params["d"].value[0] == 0.5  # updated in place
    with pytest.raises(TypeError, match="build_residual_fn"):
        sysid.model_residual(np.array([0.1]), params, build, measured, modify_residual=print)


def test_construct_ts_from_defaults_takes_states_and_sensors(pendulum: mujoco.MjModel) -> None:
    tr = _rollout(pendulum)
    t = tr.times
    meas = sysid.TimeSeries.from_names(
        t, np.zeros((t.size, 2)), pendulum, ["af", ("hinge_qpos", sysid.SignalType.MjStateQPos)]
    )
    m, p = sysid.construct_ts_from_defaults(tr.state, tr.sensordata, meas)
    assert list(p.signal_mapping) == ["af", "hinge_qpos"]
    np.testing.assert_array_equal(p.data[:, 1], tr.qpos()[:, 0])
    np.testing.assert_array_equal(p.data[:, 0], tr.sensordata.data[:, 2])
    m, p = sysid.construct_ts_from_defaults(
        tr.state, tr.sensordata, meas, [("af", sysid.SignalType.MjSensor)]
    )
    assert list(m.signal_mapping) == list(p.signal_mapping) == ["af"]


def test_enable_sensors_keyword(pendulum: mujoco.MjModel) -> None:
    st = sysid.SignalTransform()
    assert st.enable_sensors(sensor_names=["hpos"]) is st
    assert st.enable_sensors(["hpos"]) is st
    with pytest.raises(TypeError, match="unexpected keyword argument 'names'"):
        st.enable_sensors(names=["hpos"])


# ------------------------------------------------------------------ output


def test_render_rollout_light_pos_is_checked_before_rendering(pendulum: mujoco.MjModel) -> None:
    tr = _rollout(pendulum)
    with pytest.raises(ValueError, match="light_pos must be None or 3 finite"):
        sysid.render_rollout(pendulum, None, tr.state.data, 30, -1, 64, 48, [0.0, 1.0])


def test_default_report_needs_a_folder() -> None:
    with pytest.raises(ValueError, match="save_path is required when generate_videos=True"):
        sysid.default_report([], None, None, print, None)


def test_saved_mappings_use_the_peers_type_codes(pendulum: mujoco.MjModel, tmp_path: Path) -> None:
    tr = _rollout(pendulum)
    tr.save_to_disk(tmp_path / "t.npz")
    with np.load(tmp_path / "t.npz", allow_pickle=False) as z:
        assert json.loads(str(z["sensordata_mapping"]))["hpos"] == [0, [0]]  # MjSensor = 0
        assert json.loads(str(z["state_mapping"]))["hinge_qpos"] == [2, [1]]  # MjStateQPos
    back = sysid.SystemTrajectory.load_from_disk(tmp_path / "t.npz", pendulum)
    assert back.state is not None and list(back.state.signal_mapping) == [
        "hinge_qpos",
        "hinge_qvel",
    ]
