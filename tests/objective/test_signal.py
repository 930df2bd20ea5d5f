"""Section-8 signal functions and SignalTransform."""

from __future__ import annotations

import copy
import fnmatch
import pickle

import mujoco
import numpy as np
import pytest

import mjsysid as ms
import mjsysid.data.recording
import mjsysid.objective.signal_transform
import mjsysid.output.results
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


def test_module_paths_of_the_api_specification():
    """The specification's low-level signal functions live in ``mjsysid.signal_modifier``, and
    ``calculate_intervals`` and ``sweep_parameter`` at the top level; the peer's private
    ``_src`` paths are :mod:`mjsysid.compat`'s, not the core's."""
    import importlib

    from mjsysid.fit.intervals import calculate_intervals
    from mjsysid.fit.jacobian import sweep_parameter

    assert ms.signal_modifier is sm
    assert calculate_intervals is ms.calculate_intervals
    assert sweep_parameter is ms.sweep_parameter
    with pytest.raises(ModuleNotFoundError, match=r"mjsysid\._src"):
        importlib.import_module("mjsysid._src")


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
    with pytest.raises(
        ValueError,
        match=r"apply_delay\('a', delay 0.05 s\) must read times inside the series span "
        r"\[0.0, 1.0\] s, got t=-0.05 s; pass times= inside the delay window",
    ):
        sm.apply_delay(ts, "a", ms.Parameter("d", 0.05, 0.0, 0.1))
    with pytest.raises(ValueError, match=r"apply_delay: times must be a non-empty 1-D array"):
        sm.apply_delay(ts, "a", 0.05, times=[[0.5]])
    with pytest.raises(ValueError, match=r"apply_delay: times must read times inside"):
        sm.apply_delay(ts, "a", 0.0, times=[0.5, 1.5])


def test_apply_delay_on_the_delay_window():
    """The documented use: the measured times cropped for the delay bounds. Signal ``a`` is
    read ``d`` earlier, the others at the same times; a delay of 0 changes nothing."""
    ts = ramp()
    for d in (0.03, -0.02, 0.0):
        times = sm.apply_delayed_ts_window(ts, ts, -0.02, 0.05).times
        out = sm.apply_delay(ts, "a", ms.Parameter("d", d, -0.02, 0.05), times=times)
        np.testing.assert_array_equal(out.times, times)
        a, b = ts.columns("a"), [c for c in range(ts.data.shape[1]) if c not in ts.columns("a")]
        for col in a:
            np.testing.assert_allclose(
                out.data[:, col], np.interp(times - d, ts.times, ts.data[:, col]), atol=1e-12
            )
        for col in b:
            np.testing.assert_allclose(
                out.data[:, col], np.interp(times, ts.times, ts.data[:, col]), atol=1e-12
            )
    same = sm.apply_delay(ts, "a", 0.0)
    np.testing.assert_array_equal(same.data, ts.data)


def test_weighted_diff_and_normalize():
    ts = ramp()
    pred = sm.apply_bias(ts, "a", np.array([1.0]))
    diff = sm.weighted_diff(pred, ts, None, {"a": 2.0})
    np.testing.assert_allclose(diff[:, 0], -2.0)
    np.testing.assert_allclose(diff[:, 1], 0.0)
    norm = sm.normalize_residual(diff, ts)
    # the column's RMS, sqrt(sum(x**2) / N) (mjsysid.compat has the peer's scale)
    scale = np.sqrt(np.mean(ts.data[:, 0] ** 2))
    np.testing.assert_allclose(norm[:, 0], -2.0 / scale)
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


@pytest.mark.parametrize("optimizer", ["lm", "mujoco", "scipy", "scipy_parallel_fd"])
def test_recover_delay_gain_bias(make_problem, optimizer):
    _, seq = _arm_with_measurement(make_problem, delay=0.012, gain=1.4, bias=0.2)
    params, transform = _transform_params()
    rf = ms.build_residual_fn([seq], modify_residual=transform.apply)
    opt, _res = ms.optimize(params, rf, optimizer=optimizer, max_iters=100)
    np.testing.assert_allclose(opt["delay"].value, 0.012, atol=2e-4)
    np.testing.assert_allclose(opt["gain"].value, 1.4, rtol=1e-4)
    np.testing.assert_allclose(opt["bias"].value, 0.2, atol=1e-4)
    # only signal parameters: one simulation for the whole fit, reused by every later call
    assert rf.stats.simulated_candidates == 1 < rf.stats.calls


def test_transform_without_parameters_matches_default_residual(make_problem):
    p, seq = _arm_with_measurement(make_problem)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", p.model, "j1")])
    plain = ms.build_residual_fn([seq])
    transformed = ms.build_residual_fn([seq], modify_residual=ms.SignalTransform().apply)
    x = np.array([0.2])
    np.testing.assert_allclose(plain(x, params), transformed(x, params), atol=1e-12)


@pytest.mark.parametrize("normalize", [False, "column", "signal"])
def test_transform_normalize_matches_default_residual(make_problem, normalize):
    """SignalTransform(normalize=...) scales like build_residual_fn(normalize=...); the
    residual function's own setting is refused with a modify_residual (it was ignored)."""
    p, seq = _arm_with_measurement(make_problem)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", p.model, "j1")])
    plain = ms.build_residual_fn([seq], normalize=normalize)
    transform = ms.SignalTransform(normalize=normalize)
    transformed = ms.build_residual_fn([seq], modify_residual=transform.apply)
    x = np.array([0.2])
    np.testing.assert_allclose(plain(x, params), transformed(x, params), rtol=1e-12, atol=1e-12)
    if normalize != "signal":
        with pytest.raises(
            ValueError,
            match=r"normalize must be the default with a modify_residual .* "
            r"SignalTransform\(normalize=...\)",
        ):
            ms.build_residual_fn([seq], normalize=normalize, modify_residual=transform.apply)
    with pytest.raises(ValueError, match="SignalTransform: normalize must be True, False"):
        ms.SignalTransform(normalize="rms")


def test_all_zero_signal_with_an_unnormalised_transform(make_problem):
    """An all-zero measured signal cannot be RMS-normalised: refused at build for a
    normalising transform, accepted by SignalTransform(normalize=False) (it was refused too)."""
    _, seq = _arm_with_measurement(make_problem)
    meas = seq.sensordata[0]
    data = np.array(meas.data)
    data[:, meas.columns("j2_vel")] = 0.0
    zero = ms.ModelSequences(
        "arm", seq.spec, "s", seq.initial_state[0], seq.control[0],
        ms.TimeSeries(meas.times, data, meas.signal_mapping),
    )  # fmt: skip
    with pytest.raises(ValueError, match="measured signal 'j2_vel' must not be all zeros"):
        ms.build_residual_fn([zero], modify_residual=ms.SignalTransform().apply)
    rf = ms.build_residual_fn([zero], modify_residual=ms.SignalTransform(normalize=False).apply)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", seq.model, "j1")])
    assert np.all(np.isfinite(rf(params.as_vector(), params)))


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


def test_transform_rule_mistakes_fail_early(make_problem):
    """A vector delay parameter (entry 0 was silently used) and malformed weights are
    reported before any simulation."""
    _, seq = _arm_with_measurement(make_problem)
    vec = ms.ParameterDict([ms.Parameter("v", [0.0] * 3, [0.0] * 3, [0.1] * 3)])
    t = ms.SignalTransform().delay("j*_pos", "v")
    rf = ms.build_residual_fn([seq], modify_residual=t.apply)
    with pytest.raises(
        ValueError, match=r"delay\('j\*_pos', 'v'\): the parameter must be one value .*got '3"
    ):
        ms.optimize(vec, rf)
    with pytest.raises(TypeError, match=r"SignalTransform\.delay: param must be a Parameter or a"):
        ms.SignalTransform().delay("*", "")
    with pytest.raises(TypeError, match="set_sensor_weights: weights must be a mapping"):
        ms.SignalTransform().set_sensor_weights([("j1_pos", 2.0)])
    with pytest.raises(TypeError, match="set_sensor_weights: pattern must be a non-empty str"):
        ms.SignalTransform().set_sensor_weights({3: 2.0})
    with pytest.raises(ValueError, match=r"set_sensor_weights\['j1_pos'\] must be finite numb"):
        ms.SignalTransform().set_sensor_weights({"j1_pos": "x"})
    with pytest.raises(ValueError, match=r"set_sensor_weights\['j1_pos'\] must be finite numb"):
        ms.SignalTransform().set_sensor_weights({"j1_pos": -1.0})


def test_multidimensional_sensor_gain_per_axis(make_problem):
    _, seq = _arm_with_measurement(make_problem)
    d = ms.ParameterDict([ms.Parameter("g3", [1.0, 1.0, 1.0], [0.5] * 3, [2.0] * 3)])
    t = ms.SignalTransform().gain("tip_gyro", d["g3"])
    rf = ms.build_residual_fn([seq], modify_residual=t.apply)
    assert np.all(np.isfinite(rf(d.as_vector(), d)))


# -- the fast SignalTransform.apply against the section-8 functions --------------------------
# (kind, pattern, parameter, target): declared on a SignalTransform and replayed by _reference.
_SPEC = [
    ("delay", "j*_pos", "d_pos", "predicted"),
    ("delay", "tip_*", "d_tip", "predicted"),
    ("delay", "tip_gyro", "d_gyro", "predicted"),  # overrides d_tip for the gyro
    ("gain", "tip_gyro", "g3", "predicted"),  # one gain per axis
    ("gain", "j1_vel", "g_meas", "measured"),
    ("gain", "*_pos", "g1", "predicted"),  # j1_pos, j2_pos and the 3-D tip_pos
    ("bias", "*_vel", "b", "predicted"),
    ("bias", "tip_pos", "b3", "measured"),
    ("bias", "tip_gyro", "b3g", "predicted"),
]


def _spec_params(rng: np.random.Generator) -> ms.ParameterDict:
    d = ms.ParameterDict()
    d.add(ms.Parameter("d_pos", 0.0, -0.01, 0.03))
    d.add(ms.Parameter("d_tip", 0.0, 0.0, 0.02))
    d.add(ms.Parameter("d_gyro", 0.0, -0.005, 0.01))
    d.add(ms.Parameter("g3", [1.0] * 3, [0.5] * 3, [2.0] * 3))
    d.add(ms.Parameter("g_meas", 1.0, 0.5, 2.0))
    d.add(ms.Parameter("g1", 1.0, 0.5, 2.0))
    d.add(ms.Parameter("b", 0.0, -1.0, 1.0))
    d.add(ms.Parameter("b3", [0.0] * 3, [-1.0] * 3, [1.0] * 3))
    d.add(ms.Parameter("b3g", [0.0] * 3, [-1.0] * 3, [1.0] * 3))
    _randomize(d, rng)
    return d


def _randomize(params: ms.ParameterDict, rng: np.random.Generator) -> None:
    for name in params:
        p = params[name]
        p.value = rng.uniform(p.min_value, p.max_value)


def _transform(spec, weights=None, enabled=None) -> ms.SignalTransform:
    t = ms.SignalTransform()
    for kind, pattern, param, target in spec:
        if kind == "delay":
            t.delay(pattern, param)
        else:
            getattr(t, kind)(pattern, param, target=target)
    if weights:
        t.set_sensor_weights(weights)
    if enabled is not None:
        t.enable_sensors(enabled)
    return t


def _reference(spec, params, pred, meas, sensor_weights=None, weights=None, enabled=None):
    """SignalTransform.apply spelled out with the section-8 functions, one step at a time."""
    names = meas.names
    if enabled is not None:
        keep = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in enabled)]
        meas, pred, names = meas.slice_by_name(keep), pred.slice_by_name(keep), keep

    def match(pattern):
        return [n for n in names if fnmatch.fnmatchcase(n, pattern)]

    delay_params = [p for kind, _, p, _ in spec if kind == "delay"]
    lo = min([0.0] + [float(params[p].min_value[0]) for p in delay_params])
    hi = max([0.0] + [float(params[p].max_value[0]) for p in delay_params])
    meas = sm.apply_delayed_ts_window(meas, pred, lo, hi)
    rms = sm.signal_rms(meas, "SignalTransform")
    delays = {}
    for kind, pattern, p, _ in spec:
        for n in match(pattern) if kind == "delay" else []:
            delays[n] = float(params[p].value[0])
    pred = sm.apply_resample_and_delay(pred, meas.times, 0.0, delays)
    for wanted, fn in (("gain", sm.apply_gain), ("bias", sm.apply_bias)):
        for kind, pattern, p, target in spec:
            for n in match(pattern) if kind == wanted else []:
                if target == "predicted":
                    pred = fn(pred, n, params[p])
                else:
                    meas = fn(meas, n, params[p])
    w = np.ones(meas.dim)
    for table in (weights or {}, sensor_weights or {}):
        for pattern, value in table.items():
            for n in match(pattern):
                w[meas.columns(n)] *= np.asarray(value, dtype=np.float64)
    return (meas.data - pred.data) * (w / rms), pred, meas


def _assert_same(got, want):
    (r, pred, meas), (r_ref, pred_ref, meas_ref) = got, want
    assert r.shape == r_ref.shape
    np.testing.assert_allclose(r, r_ref, rtol=0, atol=1e-12)
    for a, b in ((pred, pred_ref), (meas, meas_ref)):
        assert a.names == b.names
        for n in a.names:
            np.testing.assert_array_equal(a.columns(n), b.columns(n))
        np.testing.assert_array_equal(a.times, b.times)
        np.testing.assert_allclose(a.data, b.data, rtol=0, atol=1e-12)


def _random_prediction(meas, rng, jitter=False):
    """A random prediction on the measured grid, or on a non-uniform grid with the same ends."""
    t = np.array(meas.times)
    if jitter:
        t[1:-1] += rng.uniform(-0.3, 0.3, t.size - 2) * np.min(np.diff(t))
    data = meas.data + 0.1 * rng.standard_normal(meas.data.shape)
    return ms.TimeSeries.trusted(t, data, meas.signal_mapping)


@pytest.mark.parametrize("jitter", [False, True], ids=["same-grid", "non-uniform-grid"])
@pytest.mark.parametrize(
    "enabled", [None, ["tip_gyro", "j*_pos", "j2_vel"]], ids=["all", "enabled"]
)
def test_fast_apply_matches_section8_reference(make_problem, jitter, enabled):
    _, seq = _arm_with_measurement(make_problem, delay=0.01, gain=1.3, bias=0.1)
    meas = seq.sensordata[0]
    rng = np.random.default_rng(7)
    weights = {"tip_*": [1.0, 2.0, 0.5], "j1_pos": 3.0}
    sensor_weights = {"j2_vel": 0.25}
    t = _transform(_SPEC, weights, enabled)
    params = _spec_params(rng)
    for k in range(12):
        pred = _random_prediction(meas, rng, jitter)
        if k % 3 == 1:
            _randomize(params, rng)
        elif k % 3 == 2:  # repeated and shared delay values, and an exact zero
            params["d_tip"].value = params["d_gyro"].value
            params["d_pos"].value = [0.0]
        got = t.apply(params, pred, meas, None, sensor_weights=sensor_weights)
        want = _reference(_SPEC, params, pred, meas, sensor_weights, weights, enabled)
        _assert_same(got, want)


def test_fast_apply_matches_reference_in_batched_residual(make_problem, monkeypatch):
    # delayed reads with (N, 1) weights (what large problems get) instead of full-width ones
    monkeypatch.setattr(mjsysid.objective.signal_transform, "FULL_WIDTH", 0)
    p, seq = _arm_with_measurement(make_problem, delay=0.01, gain=1.3, bias=0.1)
    rng = np.random.default_rng(3)
    params = _spec_params(rng)
    params.add(ms.make_parameter("joint_damping", p.model, "j1"))
    t = _transform(_SPEC, {"tip_pos": 2.0})

    def reference(params, pred, meas, model, return_pred_all=False, state=None, **kw):
        return _reference(_SPEC, params, pred, meas, kw.get("sensor_weights"), {"tip_pos": 2.0})

    fast = ms.build_residual_fn([seq], modify_residual=t.apply, sensor_weights={"j1_vel": 0.5})
    slow = ms.build_residual_fn([seq], modify_residual=reference, sensor_weights={"j1_vel": 0.5})
    lo = np.concatenate([params[n].min_value for n in params])
    hi = np.concatenate([params[n].max_value for n in params])
    X = rng.uniform(lo[:, None], np.minimum(hi, 10.0)[:, None], (lo.size, 20))
    X[:, 1:10] = X[:, :1]  # candidates sharing the delays
    X[-1, 10:] = X[-1, 10]  # and one rollout for many signal-only candidates
    np.testing.assert_allclose(fast(X, params), slow(X, params), rtol=0, atol=1e-12)


def test_plan_cache_never_serves_a_stale_plan(make_problem):
    _, seq = _arm_with_measurement(make_problem)
    meas = seq.sensordata[0]
    rng = np.random.default_rng(11)
    other = ms.TimeSeries(meas.times, 1.5 * meas.data + 0.1, meas.signal_mapping)
    spec = [
        ("delay", "j*_pos", "delay", "predicted"),
        ("gain", "tip_gyro", "gain", "predicted"),
        ("bias", "*_vel", "bias", "measured"),
    ]

    def bounded(lo, hi):
        d = ms.ParameterDict()
        d.add(ms.Parameter("delay", 0.0, lo, hi))
        d.add(ms.Parameter("gain", 1.2, 0.5, 2.0))
        d.add(ms.Parameter("bias", 0.1, -1.0, 1.0))
        return d

    narrow, wide = bounded(-0.01, 0.03), bounded(0.0, 0.08)
    narrow["delay"].value = wide["delay"].value = [0.005]
    t = _transform(spec)
    pred = _random_prediction(meas, rng)
    sizes = set()
    # the same transform, alternating recordings and delay bounds
    for rec in (meas, other, meas, other):
        for params in (narrow, wide, narrow):
            got = t.apply(params, pred, rec, None)
            _assert_same(got, _reference(spec, params, pred, rec))
            sizes.add(got[0].shape[0])
    assert len(sizes) == 2  # the wide bounds crop more samples
    # recordings built and dropped: a new one may reuse the id of a dead one
    for k in range(6):
        rec = ms.TimeSeries(meas.times, (1.0 + k) * meas.data, meas.signal_mapping)
        _assert_same(t.apply(narrow, pred, rec, None), _reference(spec, narrow, pred, rec))
        del rec
    # another prediction grid with the same size and ends
    jittered = _random_prediction(meas, rng, jitter=True)
    for p_ts in (jittered, pred, jittered):
        _assert_same(t.apply(narrow, p_ts, meas, None), _reference(spec, narrow, p_ts, meas))
    # other sensor weights, then weights and a selection declared after use
    for sw in ({"j1_pos": 2.0}, {"j1_pos": 3.0}, None):
        got = t.apply(narrow, pred, meas, None, sensor_weights=sw)
        _assert_same(got, _reference(spec, narrow, pred, meas, sw))
    t.set_sensor_weights({"tip_gyro": 4.0})
    _assert_same(
        t.apply(narrow, pred, meas, None),
        _reference(spec, narrow, pred, meas, weights={"tip_gyro": 4.0}),
    )
    t.enable_sensors(["j*"])
    want = _reference(spec, narrow, pred, meas, weights={"tip_gyro": 4.0}, enabled=["j*"])
    _assert_same(t.apply(narrow, pred, meas, None), want)
    # copies start with an empty cache and give the same results
    for clone in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        _assert_same(clone.apply(narrow, pred, meas, None), want)
    # the cache stays bounded
    recs = [ms.TimeSeries(meas.times, meas.data + k, meas.signal_mapping) for k in range(70)]
    for rec in recs:
        t.apply(narrow, pred, rec, None)
    assert len(t._plans) <= mjsysid.objective.signal_transform._MAX_PLANS


def test_fast_apply_reports_errors_like_section8(make_problem):
    _, seq = _arm_with_measurement(make_problem)
    meas = seq.sensordata[0]
    pred = _random_prediction(meas, np.random.default_rng(0))
    d = ms.ParameterDict()
    d.add(ms.Parameter("delay", 0.0, -0.01, 0.03))
    d.add(ms.Parameter("g2", [1.0, 1.0], [0.5] * 2, [2.0] * 2))
    t = ms.SignalTransform().delay("j*_pos", "delay")
    t.apply(d, pred, meas, None)  # builds the plan
    d["delay"].value = [0.5]  # outside its bounds: reads beyond the prediction
    with pytest.raises(ValueError, match=r"apply_resample_and_delay \(delay 0\.5 s\) must read"):
        t.apply(d, pred, meas, None)
    d["delay"].value = [0.0]
    t.gain("tip_gyro", "g2")
    with pytest.raises(ValueError, match="gain value for 'tip_gyro' must be 1 or 3 entries"):
        t.apply(d, pred, meas, None)
    flat = np.array(meas.data)
    flat[:, meas.columns("tip_pos")] = 0.0
    rec = ms.TimeSeries(meas.times, flat, meas.signal_mapping)
    with pytest.raises(ValueError, match="SignalTransform: measured signal 'tip_pos' must not"):
        ms.SignalTransform().apply(d, pred, rec, None)


def test_batched_transform_equals_one_call_per_candidate(make_problem):
    """The residual function's batched SignalTransform path against apply() per candidate:
    two delays, a per-column gain on a 3-D sensor, a gain on the measurement and a bias."""
    _, seq = _arm_with_measurement(make_problem, delay=0.012, gain=1.4, bias=0.2)
    spec_model = seq.spec.compile()
    d = ms.ParameterDict()
    d.add(ms.body_inertia_param(seq.spec, spec_model, "link1", ms.InertiaType.Mass))
    d.add(ms.Parameter("delay", 0.0, -0.01, 0.03))
    d.add(ms.Parameter("delay2", 0.004, -0.01, 0.03))
    d.add(ms.Parameter("gyro_gain", [1.0, 1.0, 1.0], [0.5] * 3, [2.0] * 3))
    d.add(ms.Parameter("meas_gain", 1.0, 0.5, 2.0))
    d.add(ms.Parameter("bias", 0.0, -1.0, 1.0))
    t = ms.SignalTransform()
    t.delay("j1_pos", d["delay"]).delay("j2_pos", d["delay2"])
    t.gain("tip_gyro", d["gyro_gain"]).gain("j*_vel", d["meas_gain"], target="measured")
    t.bias("*_vel", d["bias"])
    fast = ms.build_residual_fn([seq], modify_residual=t.apply)
    slow = ms.build_residual_fn(  # not the bound method: the generic one-call-per-candidate path
        [seq], modify_residual=lambda *a, **k: t.apply(*a, **k)
    )
    x = d.as_vector()
    rng = np.random.default_rng(5)
    X = np.clip(
        x[:, None] + np.diag(rng.uniform(0.001, 0.01, x.size)),
        *(b[:, None] for b in d.get_bounds()),
    )
    X = np.concatenate([x[:, None], X, X[:, 2:3]], axis=1)  # a repeated column too
    R = fast(X, d)
    np.testing.assert_array_equal(R, slow(X, d))
    assert fast.stats.simulated_candidates == 2  # x and its mass column: the rest are signals
    np.testing.assert_array_equal(fast(x, d), R[:, 0])


def test_batched_transform_on_interleaved_columns(make_problem):
    """Signals interleaved in the recording (j1_pos, j1_vel, j2_pos, j2_vel): the gain and bias
    columns are strided slices; the batched path still equals apply() per candidate."""
    p = make_problem(ARM2, None, n=300, qpos=[0.3, -0.2])
    meas = p.sequences.sensordata[0]
    order = ["j1_pos", "j1_vel", "j2_pos", "j2_vel"]
    data = np.concatenate([meas.signal(n).reshape(len(meas.times), -1) for n in order], axis=1)
    rec = ms.TimeSeries.from_names(meas.times, data, p.model, names=order)
    seq = ms.ModelSequences(
        "arm", p.spec, "s", p.sequences.initial_state[0], p.sequences.control[0], rec
    )
    d = ms.ParameterDict()
    d.add(ms.body_inertia_param(seq.spec, p.model, "link1", ms.InertiaType.Mass))
    d.add(ms.Parameter("delay", 0.004, -0.01, 0.03))
    d.add(ms.Parameter("vel_gain", 1.1, 0.5, 2.0))
    d.add(ms.Parameter("pos_bias", 0.05, -1.0, 1.0))
    t = ms.SignalTransform().delay("*_pos", d["delay"]).gain("*_vel", d["vel_gain"])
    t.bias("*_pos", d["pos_bias"])
    from mjsysid.objective.signal_transform import as_index as _index

    assert _index(rec.columns("j1_vel").tolist() + rec.columns("j2_vel").tolist()) == slice(1, 4, 2)
    fast = ms.build_residual_fn([seq], modify_residual=t.apply)
    slow = ms.build_residual_fn([seq], modify_residual=lambda *a, **k: t.apply(*a, **k))
    x = d.as_vector()
    X = x[:, None] * (1.0 + 0.01 * np.vstack([np.zeros(4), np.eye(4)]).T)
    np.testing.assert_array_equal(fast(X, d), slow(X, d))
