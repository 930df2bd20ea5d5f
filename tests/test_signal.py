"""Section-8 signal functions and SignalTransform."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2
from mjsysid import signal_modifier as sm


def ramp(n=101, dt=0.01, cols=("a", "b")) -> ms.TimeSeries:
    t = np.arange(n) * dt
    data = np.stack([t * (i + 1) + 1.0 for i in range(len(cols))], axis=1)
    return ms.TimeSeries.from_custom_map(t, data, list(cols))


def test_reachable_under_signal_modifier_namespace():
    for name in (
        "get_sensor_indices",
        "apply_gain",
        "apply_bias",
        "apply_delay",
        "apply_delayed_ts_window",
        "apply_resample_and_delay",
        "weighted_diff",
        "normalize_residual",
    ):
        assert callable(getattr(ms.signal_modifier, name))


def test_get_sensor_indices():
    model = mujoco.MjModel.from_xml_string(ARM2)
    np.testing.assert_array_equal(sm.get_sensor_indices(model, "tip_pos"), [4, 5, 6])
    with pytest.raises(KeyError, match="no sensor named 'tip'; known sensors"):
        sm.get_sensor_indices(model, "tip")


def test_gain_and_bias():
    ts = ramp()
    g = sm.apply_gain(ts, "a", ms.Parameter("g", 2.0, 0.0, 5.0))
    np.testing.assert_allclose(g.signal("a"), 2 * ts.signal("a"))
    np.testing.assert_allclose(g.signal("b"), ts.signal("b"))
    b = sm.apply_bias(ts, "b", np.array([0.5]))
    np.testing.assert_allclose(b.signal("b"), ts.signal("b") + 0.5)
    with pytest.raises(ValueError, match="gain value for 'a' must be 1 or 1 entries"):
        sm.apply_gain(ts, "a", np.array([1.0, 2.0]))


def test_delay_shifts_signal_right():
    ts = ramp()
    d = sm.apply_delayed_ts_window(ts, ts, 0.0, 0.05)
    assert d.times[0] == pytest.approx(0.05)
    delayed = sm.apply_resample_and_delay(ts, d.times, 0.0, {"a": 0.05})
    # a delayed sensor reports at t the value at t - 0.05
    np.testing.assert_allclose(delayed.signal("a")[:, 0], d.times - 0.05 + 1.0, atol=1e-12)
    np.testing.assert_allclose(delayed.signal("b")[:, 0], 2 * d.times + 1.0, atol=1e-12)


def test_window_has_the_right_sign():
    ts = ramp()
    # positive delays need prediction *before* t: drop early samples, keep the end
    w = sm.apply_delayed_ts_window(ts, ts, -0.02, 0.03)
    assert w.times[0] == pytest.approx(0.03) and w.times[-1] == pytest.approx(1.0 - 0.02)
    # every sample reads the prediction strictly inside its span for any delay in range
    for d in (-0.02, 0.0, 0.03):
        q = w.times - d
        assert q.min() >= ts.times[0] - 1e-12 and q.max() <= ts.times[-1] + 1e-12
    with pytest.raises(ValueError, match="leaves 0 samples"):
        sm.apply_delayed_ts_window(ts, ts, -0.6, 0.6)


def test_apply_delay_refuses_extrapolation():
    ts = ramp()
    with pytest.raises(ValueError, match=r"must read times inside the series span"):
        sm.apply_delay(ts, "a", ms.Parameter("d", 0.05, 0.0, 0.1))


def test_weighted_diff_and_normalize():
    ts = ramp()
    pred = sm.apply_bias(ts, "a", np.array([1.0]))
    diff = sm.weighted_diff(pred, ts, None, {"a": 2.0})
    np.testing.assert_allclose(diff[:, 0], -2.0)
    np.testing.assert_allclose(diff[:, 1], 0.0)
    norm = sm.normalize_residual(diff, ts)
    np.testing.assert_allclose(norm[:, 0], -2.0 / np.sqrt(np.mean(ts.data[:, 0] ** 2)))
    with pytest.raises(ValueError, match="measured column 1 must not be all zeros"):
        sm.normalize_residual(diff, np.stack([np.ones(101), np.zeros(101)], axis=1))


def test_weighted_diff_on_plain_arrays_uses_model_layout():
    model = mujoco.MjModel.from_xml_string(ARM2)
    meas = np.ones((5, model.nsensordata))
    w = sm.weighted_diff(np.zeros_like(meas), meas, model, {"tip_pos": 3.0})
    np.testing.assert_allclose(w[0], [1, 1, 1, 1, 3, 3, 3, 1, 1, 1])
    with pytest.raises(ValueError, match="needs column names"):
        sm.weighted_diff(np.zeros((5, 2)), np.ones((5, 2)), model, {"tip_pos": 3.0})


# -- SignalTransform end to end -------------------------------------------------------------
def _arm_with_measurement(make_problem, delay=0.0, gain=1.0, bias=0.0):
    p = make_problem(ARM2, None, n=600, qpos=[0.3, -0.2], scale=2.0)
    meas = p.sequences.sensordata[0]
    t = meas.times
    data = np.array(meas.data)
    for name in ("j1_pos", "j2_pos"):
        c = meas.columns(name)
        data[:, c] = np.stack([np.interp(t - delay, t, meas.data[:, k]) for k in c], axis=1)
    for name in ("tip_gyro",):
        data[:, meas.columns(name)] = gain * meas.signal(name)
    for name in ("j1_vel", "j2_vel"):
        data[:, meas.columns(name)] += bias
    new = ms.TimeSeries(t, data, meas.signal_mapping)
    seq = ms.ModelSequences(
        "arm", p.spec, "s", p.sequences.initial_state[0], p.sequences.control[0], new
    )
    return p, seq


def _transform_params():
    d = ms.ParameterDict()
    d.add(ms.Parameter("delay", 0.0, -0.01, 0.03))
    d.add(ms.Parameter("gain", 1.0, 0.5, 2.0))
    d.add(ms.Parameter("bias", 0.0, -1.0, 1.0))
    t = ms.SignalTransform()
    t.delay("j*_pos", d["delay"]).gain("tip_gyro", d["gain"]).bias("*_vel", d["bias"])
    return d, t


@pytest.mark.parametrize("optimizer", ["mujoco", "scipy", "scipy_parallel_fd"])
def test_recover_delay_gain_bias(make_problem, optimizer):
    _, seq = _arm_with_measurement(make_problem, delay=0.012, gain=1.4, bias=0.2)
    params, transform = _transform_params()
    rf = ms.build_residual_fn([seq], modify_residual=transform.apply)
    opt, _res = ms.optimize(params, rf, optimizer=optimizer, max_iters=100)
    np.testing.assert_allclose(opt["delay"].value, 0.012, atol=2e-4)
    np.testing.assert_allclose(opt["gain"].value, 1.4, rtol=1e-4)
    np.testing.assert_allclose(opt["bias"].value, 0.2, atol=1e-4)
    assert (
        rf.stats.simulated_candidates == rf.stats.calls
    )  # never more than one simulation per call


def test_transform_without_parameters_matches_default_residual(make_problem):
    p, seq = _arm_with_measurement(make_problem)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", p.model, "j1")])
    plain = ms.build_residual_fn([seq])
    transformed = ms.build_residual_fn([seq], modify_residual=ms.SignalTransform().apply)
    x = np.array([0.2])
    np.testing.assert_allclose(plain(x, params), transformed(x, params), atol=1e-12)


def test_measured_gain_target(make_problem):
    _, seq = _arm_with_measurement(make_problem, gain=0.5)
    d = ms.ParameterDict([ms.Parameter("g", 1.0, 0.5, 4.0)])
    t = ms.SignalTransform().gain("tip_gyro", "g", target="measured")
    rf = ms.build_residual_fn([seq], modify_residual=t.apply)
    opt, _ = ms.optimize(d, rf)
    np.testing.assert_allclose(opt["g"].value, 2.0, rtol=1e-5)


def test_enable_sensors_and_weights(make_problem):
    _, seq = _arm_with_measurement(make_problem)
    d, t = _transform_params()
    t.enable_sensors(["j*_pos", "*_vel", "tip_gyro"]).set_sensor_weights({"j1_pos": 2.0})
    rf = ms.build_residual_fn([seq], modify_residual=t.apply)
    r = rf(d.as_vector(), d)
    window = np.sum(
        (seq.sensordata[0].times >= 0.03 - 1e-12)
        & (seq.sensordata[0].times <= 1.198 - 0.01 + 1e-12)
    )
    assert r.size == window * (2 + 2 + 3)


def test_pattern_matching_nothing_fails_at_build(make_problem):
    _, seq = _arm_with_measurement(make_problem)
    d = ms.ParameterDict([ms.Parameter("delay", 0.0, 0.0, 0.1)])
    t = ms.SignalTransform().delay("*_torque", d["delay"])
    with pytest.raises(
        ValueError, match=r"delay\('\*_torque', 'delay'\): the pattern must match at least one"
    ):
        ms.build_residual_fn([seq], modify_residual=t.apply)
    with pytest.raises(ValueError, match="target must be 'predicted' or 'measured'"):
        ms.SignalTransform().gain("*", d["delay"], target="both")


def test_multidimensional_sensor_gain_per_axis(make_problem):
    _, seq = _arm_with_measurement(make_problem)
    d = ms.ParameterDict([ms.Parameter("g3", [1.0, 1.0, 1.0], [0.5] * 3, [2.0] * 3)])
    t = ms.SignalTransform().gain("tip_gyro", d["g3"])
    rf = ms.build_residual_fn([seq], modify_residual=t.apply)
    assert np.all(np.isfinite(rf(d.as_vector(), d)))
