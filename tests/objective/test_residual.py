"""The batched residual function."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mjsysid as ms
from conftest import ARM2, SERVO, excitation, simulate


def arm_params(spec, model) -> ms.ParameterDict:
    d = ms.ParameterDict()
    for b in ("link1", "link2"):
        d.add(ms.body_inertia_param(spec, model, b, ms.InertiaType.Mass))
    d.add(ms.make_parameter("joint_damping", model, "j1"))
    return d


def truth_arm(spec, model):
    d = arm_params(spec, model)
    d.update_from_vector([1.3, 0.5, 0.12])
    return d


@pytest.fixture
def arm(make_problem):
    return make_problem(ARM2, truth_arm, nseq=2, n=400, qpos=[0.2, -0.3])


def test_zero_at_truth_and_shapes(arm):
    params = arm_params(arm.spec, arm.model)
    rf = ms.build_residual_fn([arm.sequences])
    r0 = rf(params.as_vector(), params)
    n = sum(s.data.size for s in arm.sequences.sensordata)
    assert r0.shape == (n,)
    assert 0.5 * r0 @ r0 > 1.0
    assert np.max(np.abs(rf(np.array([1.3, 0.5, 0.12]), params))) < 1e-9


def test_batched_equals_one_by_one(arm):
    params = arm_params(arm.spec, arm.model)
    rf = ms.build_residual_fn([arm.sequences])
    rng = np.random.default_rng(3)
    lo, hi = params.get_bounds()
    X = rng.uniform(np.maximum(lo, 0.3), np.minimum(hi, 2.0), size=(4, params.size)).T
    R = rf(X, params)
    for j in range(X.shape[1]):
        np.testing.assert_allclose(R[:, j], rf(X[:, j], params), rtol=0, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.2, 3.0), st.floats(0.1, 2.0), st.floats(0.0, 0.9)),
        min_size=1,
        max_size=5,
    )
)
def test_batched_equals_one_by_one_property(arm_problem_cached, columns):
    _, params, rf = arm_problem_cached
    X = np.array(columns, dtype=float).T
    R = rf(X, params)
    for j in range(X.shape[1]):
        np.testing.assert_allclose(R[:, j], rf(X[:, j], params), rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def arm_problem_cached():
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()
    ctrl = excitation(200, 2)
    x0 = ms.create_initial_state(model, qpos=[0.2, -0.3])
    sens, control = simulate(spec, truth_arm(spec, model), ctrl, x0)
    seq = ms.ModelSequences("arm", spec, "s", x0, control, sens)
    return seq, arm_params(spec, model), ms.build_residual_fn([seq])


def test_fast_path_equals_recompile(arm):
    params = arm_params(arm.spec, arm.model)
    fast = ms.build_residual_fn([arm.sequences])
    slow = ms.build_residual_fn([arm.sequences], fast_model_edits=False)
    x = np.array([1.1, 0.6, 0.2])
    np.testing.assert_allclose(fast(x, params), slow(x, params), rtol=0, atol=1e-10)
    assert fast.stats.compiles == 0 and fast.stats.model_edits == 1
    assert slow.stats.compiles == 1 and slow.stats.model_edits == 0


def test_one_model_per_candidate_and_one_batch(arm):
    params = arm_params(arm.spec, arm.model)
    rf = ms.build_residual_fn([arm.sequences], fast_model_edits=False)
    X = np.repeat(params.as_vector()[:, None], 4, axis=1) + np.diag([0.1, 0.1, 0.01, 0])[:3]
    rf(X, params)
    # 4 candidates -> 4 compiles (not 4 x 2 sequences), 8 rollouts
    assert rf.stats.compiles == 4 and rf.stats.rollouts == 8


def test_caller_params_untouched(arm):
    params = arm_params(arm.spec, arm.model)
    before = params.as_vector()
    rf = ms.build_residual_fn([arm.sequences])
    rf(np.array([1.5, 0.9, 0.3]), params)
    np.testing.assert_array_equal(params.as_vector(), before)


def test_signal_only_parameters_cost_no_rollout(arm):
    params = arm_params(arm.spec, arm.model)
    params.add(
        ms.make_parameter(
            "sensor_delay", None, "j*_pos", name="delay", min_value=-0.01, max_value=0.02
        )
    )
    transform = ms.SignalTransform().delay("j*_pos", params["delay"])
    rf = ms.build_residual_fn([arm.sequences], modify_residual=transform.apply)
    x = params.as_vector()
    X = np.repeat(x[:, None], 3, axis=1)
    X[3, 1] = 0.004
    X[3, 2] = 0.008  # three candidates differing only in the delay
    R = rf(X, params)
    assert rf.stats.simulated_candidates == 1 and rf.stats.rollouts == 2
    assert not np.allclose(R[:, 0], R[:, 1])


def test_last_trial_simulation_reused_by_the_next_jacobian(arm):
    """A finite-difference Jacobian after a single evaluation of x: the delay column reuses
    x's simulation (no rollout); the result equals that of a fresh residual function."""
    params = arm_params(arm.spec, arm.model)
    params.add(ms.make_parameter("sensor_delay", None, "j*_pos", name="delay", max_value=0.02))
    transform = ms.SignalTransform().delay("j*_pos", params["delay"])
    rf = ms.build_residual_fn([arm.sequences], modify_residual=transform.apply)
    x = np.array([1.2, 0.6, 0.1, 0.005])
    rf(x, params)
    X = x[:, None] + np.diag([1e-6, 1e-6, 1e-6, 1e-4])
    before = rf.stats.simulated_candidates
    R = rf(X, params)
    assert rf.stats.simulated_candidates - before == 3  # the three physics columns only
    fresh = ms.build_residual_fn([arm.sequences], modify_residual=transform.apply)
    np.testing.assert_array_equal(R, fresh(X, params))
    # values changed in place by the caller's modify_residual never reach the cache
    rf(x, params)
    again = rf(X, params)
    np.testing.assert_array_equal(again, R)
    # another parameter structure does not see the cached simulation
    other = params.copy()
    other["link1_mass"].frozen = True  # same values, another structure
    np.testing.assert_array_equal(rf(x[1:], other), fresh(x[1:], other))


def test_joint_states_and_multidim_sensors_as_observations(make_problem):
    names = ["j1_qpos", "j2_qvel", "tip_pos", "tip_gyro"]
    p = make_problem(ARM2, truth_arm, n=300, names=names, qpos=[0.2, -0.3])
    params = arm_params(p.spec, p.model)
    rf = ms.build_residual_fn([p.sequences])
    assert rf(params.as_vector(), params).shape == (300 * (1 + 1 + 3 + 3),)
    assert np.max(np.abs(rf(np.array([1.3, 0.5, 0.12]), params))) < 1e-9
    pred = rf.predict(None, params)[0]
    assert pred.predicted.names == names
    np.testing.assert_allclose(
        pred.measured.signal("tip_pos"), p.sequences.sensordata[0].signal("tip_pos")
    )


def test_irregular_measurement_times_interpolated(arm_spec):
    model = arm_spec.compile()
    ctrl = excitation(1000, 2)
    x0 = ms.create_initial_state(model, qpos=[0.1, 0.2])
    sens, control = simulate(arm_spec, None, ctrl, x0, ["j1_pos"])
    # keep every 7th sample: measured times off the simulation grid are interpolated exactly at
    # grid points and linearly in between
    sub = ms.TimeSeries.from_names(sens.times[::7], sens.data[::7], model, names=["j1_pos"])
    seq = ms.ModelSequences("arm", arm_spec, "s", x0, control, sub)
    rf = ms.build_residual_fn([seq], normalize=False)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", model, "j1")])
    assert np.max(np.abs(rf(params.as_vector(), params))) < 1e-12


def test_weights_and_enabled_observations(arm):
    params = arm_params(arm.spec, arm.model)
    x = np.array([1.2, 0.6, 0.1])
    base = ms.build_residual_fn([arm.sequences])
    weighted = ms.build_residual_fn([arm.sequences], sensor_weights={"j1_pos": 3.0})
    r, rw = base(x, params), weighted(x, params)
    assert 0.5 * rw @ rw > 0.5 * r @ r
    only = ms.build_residual_fn([arm.sequences], enabled_observations=["j1_pos", "tip_pos"])
    assert only(x, params).size == 2 * 400 * 4
    # patterns, as in SignalTransform weights; several matching keys multiply
    pattern = {"*_pos": 2.0, "j1_*": 3.0}
    exact = {"j1_pos": 6.0, "j2_pos": 2.0, "tip_pos": 2.0, "j1_vel": 3.0}
    np.testing.assert_array_equal(
        ms.build_residual_fn([arm.sequences], sensor_weights=pattern)(x, params),
        ms.build_residual_fn([arm.sequences], sensor_weights=exact)(x, params),
    )


def test_unknown_names_fail_at_build(arm):
    with pytest.raises(
        KeyError, match=r"sensor_weights names \['j9_pos'\] match no measured signal"
    ):
        ms.build_residual_fn([arm.sequences], sensor_weights={"j9_pos": 1.0})
    with pytest.raises(KeyError, match=r"enabled_observations names \['nope'\] match no measured"):
        ms.build_residual_fn([arm.sequences], enabled_observations=["nope"])
    with pytest.raises(ValueError, match=r"sensor_weights\['j1_pos'\] must be finite and >= 0"):
        ms.build_residual_fn([arm.sequences], sensor_weights={"j1_pos": -1.0})
    with pytest.raises(ValueError, match="control_interpolation must be 'zoh' or 'linear'"):
        ms.build_residual_fn([arm.sequences], control_interpolation="cubic")


def test_zero_measured_column_is_an_error(arm_spec):
    model = arm_spec.compile()
    x0 = ms.create_initial_state(model)
    times = np.arange(100) * model.opt.timestep
    sens = ms.TimeSeries.from_names(times, np.zeros((100, 1)), model, names=["j1_pos"])
    ctrl = ms.TimeSeries.from_control_names(times, np.zeros((100, 2)), model)
    seq = ms.ModelSequences("arm", arm_spec, "rest", x0, ctrl, sens)
    with pytest.raises(
        ValueError, match=r"arm/rest: measured signal 'j1_pos' must not be all zeros"
    ):
        ms.build_residual_fn([seq])
    ms.build_residual_fn([seq], normalize=False)  # explicit choice: allowed


def test_bad_x(arm):
    params = arm_params(arm.spec, arm.model)
    rf = ms.build_residual_fn([arm.sequences])
    with pytest.raises(ValueError, match=r"residual_fn: x must be shape \(3,\) or \(3, k\)"):
        rf(np.zeros(4), params)
    with pytest.raises(ValueError, match="x must be finite"):
        rf(np.array([1.0, np.nan, 0.1]), params)


@pytest.mark.parametrize("autoreset", [True, False])
def test_diverging_candidate_gives_nan_column(make_problem, autoreset):
    """MuJoCo resets a diverging simulation (caught by the clock) or, with its automatic
    reset disabled, lets NaN into the state (caught by the finiteness scan)."""
    xml = (
        SERVO
        if autoreset
        else SERVO.replace("<option ", '<option><flag autoreset="disable"/></option><option ')
    )
    p = make_problem(xml, None, n=300)
    params = ms.ParameterDict(
        [ms.make_parameter("actuator_kp", p.model, "servo", min_value=0.1, max_value=1e14)]
    )
    rf = ms.build_residual_fn([p.sequences])
    R = rf(np.array([[2.0, 1e14]]), params)
    assert np.all(np.isfinite(R[:, 0])) and np.all(np.isnan(R[:, 1]))
    assert rf.last_divergence and "servo" in rf.last_divergence[0].split("/")[0]


def test_multiple_model_sequences_stack(make_problem):
    a = make_problem(ARM2, truth_arm, n=200, qpos=[0.1, 0.1])
    payload_xml = ARM2.replace(
        '<site name="tip2" pos="0.3 0 0"/>',
        '<site name="tip2" pos="0.3 0 0"/><body name="payload" pos="0.3 0 0">'
        '<geom type="sphere" size="0.04" mass="0.3"/></body>',
    )
    b = make_problem(payload_xml, truth_arm, n=200, qpos=[0.1, 0.1])
    b.sequences.name = "arm_payload"
    params = arm_params(a.spec, a.model)
    rf = ms.build_residual_fn([a.sequences, b.sequences])
    r = rf(np.array([1.3, 0.5, 0.12]), params)
    assert r.size == 2 * 200 * 10 and np.max(np.abs(r)) < 1e-9
    assert rf.sequence_labels == ["arm2/seq0", "arm_payload/seq0"]


def test_custom_rollout_and_build_model(arm):
    params = arm_params(arm.spec, arm.model)
    seen = {}

    def build(p, spec):
        seen["spec_is_copy"] = spec is not arm.spec
        return ms.apply_param_modifiers(p, spec)

    def rollout(models, datas, control, initial_states, param_dicts):
        seen["n"] = len(models)
        return ms.sysid_rollout(models, datas, control, initial_states)

    rf = ms.build_residual_fn([arm.sequences], custom_rollout=rollout, build_model=build)
    ref = ms.build_residual_fn([arm.sequences])
    x = np.array([1.1, 0.6, 0.2])
    np.testing.assert_allclose(rf(x, params), ref(x, params), atol=1e-10)
    assert seen == {"spec_is_copy": True, "n": 2}


def test_modify_residual_tier(arm):
    params = arm_params(arm.spec, arm.model)

    def only_position(
        params, predicted, measured, model, return_pred_all, state=None, sensor_weights=None
    ):
        assert isinstance(state, ms.TimeSeries) and state.data.shape[0] == predicted.data.shape[0]
        pred = ms.signal_modifier.apply_resample_and_delay(predicted, measured.times)
        pos = measured.columns("j1_pos")
        return measured.data[:, pos] - pred.data[:, pos], pred, measured

    rf = ms.build_residual_fn([arm.sequences], modify_residual=only_position)
    r = rf(np.array([1.3, 0.5, 0.12]), params)
    assert r.size == 2 * 400 and np.max(np.abs(r)) < 1e-9


def test_predictions_written_by_callers_never_reach_the_simulation_cache(arm):
    """The simulations of a small call are kept for the next; a custom modify_residual and
    predict's caller receive arrays they may write into, which must not be the kept ones."""
    params = arm_params(arm.spec, arm.model)
    x = np.array([1.2, 0.6, 0.1])

    def scribbler(params, predicted, measured, model, return_pred_all, state=None, **kw):
        r = measured.data - predicted.data  # on the simulation grid here
        predicted.data[...] = 0.0
        state.data[...] = 0.0
        return r, predicted, measured

    rf = ms.build_residual_fn([arm.sequences], modify_residual=scribbler)
    first = rf(x, params).copy()
    np.testing.assert_array_equal(rf(x, params), first)  # the second call reuses the first's

    want = ms.build_residual_fn([arm.sequences])(x, params)
    rf = ms.build_residual_fn([arm.sequences])
    for pred in rf.predict(x, params):  # simulates x and keeps the simulation
        pred.predicted.data[...] = 0.0
        pred.state[...] = 0.0
    np.testing.assert_array_equal(rf(x, params), want)  # from the kept simulation
    np.testing.assert_array_equal(rf.predict(x, params)[0].residual, want[: want.size // 2])


def test_a_kept_simulation_without_states_never_serves_a_prediction(arm):
    """A call of the built-in residual records no states (nobody reads them) and keeps its
    simulations; predict, which returns the states, simulates again rather than take them,
    and then its simulation (with states) serves the next residual call."""
    params = arm_params(arm.spec, arm.model)
    x = np.array([1.2, 0.6, 0.1])
    want = ms.build_residual_fn([arm.sequences]).predict(x, params)
    rf = ms.build_residual_fn([arm.sequences])
    r = rf(x, params)
    runs = rf.stats.rollouts
    got = rf.predict(x, params)
    assert rf.stats.rollouts > runs
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a.state, b.state)
        np.testing.assert_array_equal(a.residual, b.residual)
    runs = rf.stats.rollouts
    np.testing.assert_array_equal(rf(x, params), r)
    assert rf.stats.rollouts == runs  # predict's simulation, kept


def test_control_zoh_versus_linear(arm_spec):
    model = arm_spec.compile()
    x0 = ms.create_initial_state(model)
    t_ctrl = np.array([0.0, 0.1, 0.2])
    ctrl = ms.TimeSeries.from_control_names(t_ctrl, np.array([[0.0, 0], [1.0, 0], [2.0, 0]]), model)
    times = np.arange(101) * model.opt.timestep
    sens = ms.TimeSeries.from_names(times, np.ones((101, 1)), model, names=["j1_pos"])
    seq = ms.ModelSequences("arm", arm_spec, "s", x0, ctrl, sens)
    zoh = ms.build_residual_fn([seq], normalize=False)
    lin = ms.build_residual_fn([seq], normalize=False, control_interpolation="linear")
    params = ms.ParameterDict([ms.make_parameter("joint_damping", model, "j1")])
    pz, pl = zoh.predict(None, params)[0], lin.predict(None, params)[0]
    assert pz.control[49, 0] == 0.0 and pz.control[50, 0] == 1.0
    assert pl.control[25, 0] == pytest.approx(0.5)


def test_persistent_pool_reused(arm):
    params = arm_params(arm.spec, arm.model)
    rf = ms.build_residual_fn([arm.sequences], nthread=2)
    runner = rf._runner
    rf(params.as_vector(), params)
    datas = runner.datas_for(arm.model)
    rf(params.as_vector() * 1.01, params)
    assert runner.datas_for(arm.model) is datas and rf._runner is runner
    rf.close()


def test_describe_index(arm):
    rf = ms.build_residual_fn([arm.sequences])
    assert rf.describe_index(0) == "arm2/seq0, signal 'j1_pos' at t=0 s"
    assert rf.describe_index(10 + 10 * 400).startswith("arm2/seq1, signal")
    assert mujoco is not None


def test_column_normalisation_option(arm):
    params = arm_params(arm.spec, arm.model)
    x = np.array([1.2, 0.6, 0.1])
    by_signal = ms.build_residual_fn([arm.sequences])
    by_column = ms.build_residual_fn([arm.sequences], normalize="column")
    meas = arm.sequences.sensordata[0]
    diff = meas.data - by_signal.predict(x, params)[0].predicted_at_measured.data
    rs, rc = by_signal(x, params), by_column(x, params)
    n = meas.data.size
    np.testing.assert_allclose(
        rs[:n].reshape(meas.data.shape), diff / ms.signal_modifier.signal_rms(meas)
    )
    np.testing.assert_allclose(
        rc[:n].reshape(meas.data.shape), diff / ms.signal_modifier.column_rms(meas)
    )
    # tip_pos: y is always zero for a planar arm, so it keeps the signal's RMS
    col = meas.columns("tip_pos")
    scale = ms.signal_modifier.column_rms(meas)[col]
    assert scale[1] == ms.signal_modifier.signal_rms(meas)[col][1] and scale[0] != scale[1]
    with pytest.raises(ValueError, match="normalize must be True, False, 'signal' or 'column'"):
        ms.build_residual_fn([arm.sequences], normalize="rows")


def test_work_copy_follows_changed_bounds_and_frozen_values(arm):
    params = arm_params(arm.spec, arm.model)
    params.add(ms.Parameter("delay", 0.0, -0.002, 0.004))
    t = ms.SignalTransform().delay("j*_pos", "delay")
    rf = ms.build_residual_fn([arm.sequences], modify_residual=t.apply)
    n_before = rf(params.as_vector(), params).size
    params["delay"].max_value[:] = 0.02  # a wider delay window drops more samples
    assert rf(params.as_vector(), params).size < n_before


def test_transform_blocks_written_in_place_equal_a_fresh_evaluation(arm):
    """After the first call the transform's blocks are written straight into the output;
    a window that changes size between calls falls back to separate blocks. Either way every
    column equals a fresh function's one-column evaluation, bit for bit."""
    params = arm_params(arm.spec, arm.model)
    params.add(ms.Parameter("delay", 0.001, -0.002, 0.004))
    params.add(ms.Parameter("gain", 1.1, 0.5, 2.0))
    t = ms.SignalTransform().delay("j*_pos", "delay").gain("j*_vel", "gain")
    rf = ms.build_residual_fn([arm.sequences], modify_residual=t.apply)
    x = params.as_vector()
    X = np.repeat(x[:, None], 5, axis=1)
    X[[0, 3, 4], [1, 2, 3]] *= 1.01  # a mass, the delay, the gain; column 4 repeats column 0

    def fresh(xj):
        return ms.build_residual_fn([arm.sequences], modify_residual=t.apply)(xj, params)

    for widen in (False, False, True, True):
        if widen:
            params["delay"].max_value[:] = 0.02  # shorter window: other block sizes
        R = rf(X, params)
        for j in range(X.shape[1]):
            np.testing.assert_array_equal(R[:, j], fresh(X[:, j]))


def test_reused_candidate_models_stay_exact_across_calls(make_problem):
    def params_of(spec, model):
        d = ms.ParameterDict()
        d.add(ms.body_inertia_param(spec, model, "link1", ms.InertiaType.Mass))
        d.add(ms.body_inertia_param(spec, model, "link2", ms.InertiaType.MassIpos))
        d.add(ms.make_parameter("joint_damping", model, "j1"))
        d.add(ms.make_parameter("joint_armature", model, "j2"))
        return d

    p = make_problem(ARM2, None, n=150, qpos=[0.3, -0.2])
    params = params_of(p.spec, p.model)
    fast = ms.build_residual_fn([p.sequences])
    slow = ms.build_residual_fn([p.sequences], fast_model_edits=False)
    rng = np.random.default_rng(7)
    lo, hi = params.get_bounds()
    x = params.as_vector()
    for k in (1, 4, 2, 6, 1):  # batches of different sizes reuse the pooled models
        X = np.clip(
            x[:, None] + 0.05 * rng.standard_normal((x.size, k)) * np.abs(x[:, None]),
            lo[:, None],
            hi[:, None],
        )
        X[:, 1:] = X[:, :1]
        for j in range(1, k):  # finite-difference-like columns: one entry changed each
            X[j % x.size, j] *= 1.01
        np.testing.assert_allclose(fast(X, params), slow(X, params), rtol=0, atol=1e-10)
    assert fast.stats.compiles == 0 and slow.stats.model_edits == 0


def test_distinct_columns_matches_numpy_unique():
    from mjsysid.objective.candidates import distinct_columns as _distinct_columns

    rng = np.random.default_rng(3)
    base = rng.normal(size=(4, 5))
    A = base[:, [0, 1, 0, 2, 3, 1, 4, 4]]
    first, inverse, keys = _distinct_columns(A)
    np.testing.assert_array_equal(A[:, first][:, inverse], A)
    assert keys == [A[:, j].tobytes() for j in first]
    assert first.tolist() == [0, 1, 3, 4, 6]  # order of first appearance
    ref = np.unique(A.T, axis=0)
    assert first.size == ref.shape[0]
    # all distinct: the identity (the residual's copy-free assembly path)
    first, inverse, _ = _distinct_columns(base)
    assert first.tolist() == inverse.tolist() == list(range(5))
    # no rows (no simulation-changing parameters): every column is the same
    first, inverse, _ = _distinct_columns(np.zeros((0, 3)))
    assert first.tolist() == [0] and inverse.tolist() == [0, 0, 0]


def test_other_parameters_leave_nothing_behind_in_reused_models(arm):
    """A fit of (masses, damping) then one of the masses alone on the same residual function:
    the second must see the model's own damping, not the first fit's last value."""
    rf = ms.build_residual_fn([arm.sequences])
    both = arm_params(arm.spec, arm.model)
    masses = ms.ParameterDict([both["link1_mass"].copy(), both["link2_mass"].copy()])
    X = np.array([[1.3, 1.2], [0.5, 0.6], [5.0, 7.0]])  # huge dampings
    rf(X, both)
    got = rf(X[:2], masses)
    fresh = ms.build_residual_fn([arm.sequences])(X[:2], masses)
    np.testing.assert_array_equal(got, fresh)


# -- found by a randomized comparison of batched calls with fresh one-column evaluations ------
@pytest.mark.parametrize("fast", [False, True])
def test_a_parameter_frozen_or_dropped_later_leaves_no_value_behind(arm, fast):
    """The compile path kept a value an earlier call wrote into its private working spec
    after that parameter was frozen (or removed): the residual was off by up to 8."""
    params = ms.ParameterDict(
        [ms.make_parameter("joint_damping", arm.model, j) for j in ("j1", "j2")]
    )
    rf = ms.build_residual_fn([arm.sequences], fast_model_edits=fast)
    rf(np.array([3.0, 0.05]), params)
    frozen = params.copy()
    frozen["j1_damping"].frozen = True
    only_j2 = ms.ParameterDict([params["j2_damping"]])
    for later in (frozen, only_j2):
        fresh = ms.build_residual_fn([arm.sequences], fast_model_edits=fast)
        np.testing.assert_array_equal(rf([0.07], later), fresh([0.07], later))


def test_divergence_kept_from_the_last_call_is_reported(arm):
    params = ms.ParameterDict([ms.make_parameter("actuator_gear", arm.model, "m1")])
    rf = ms.build_residual_fn([arm.sequences])
    rf([1e9], params)  # diverges; kept for the next call
    R = rf(np.array([[1e9, 1.0]]), params)
    assert np.isnan(R[:, 0]).all() and np.isfinite(R[:, 1]).all()
    assert rf.last_divergence == [
        f"{label}: simulation diverged for candidate 0" for label in ("arm2/seq0", "arm2/seq1")
    ]


def test_two_parameters_on_one_quantity_are_refused(arm):
    """Which one would win depended on which value changed last."""
    params = ms.ParameterDict(
        [
            ms.body_inertia_param(
                arm.spec, arm.model, "link2", ms.InertiaType.Mass, param_name="mA"
            ),
            ms.body_inertia_param(
                arm.spec, arm.model, "link2", ms.InertiaType.MassIpos, param_name="mB"
            ),
        ]
    )
    rf = ms.build_residual_fn([arm.sequences])
    with pytest.raises(
        ValueError,
        match=r"parameters 'mA' and 'mB' both set the body inertial of 'link2': keep one free",
    ):
        rf(params.as_vector(), params)
    params["mB"].frozen = True
    rf(params.as_vector(), params)


def test_a_change_of_meta_alone_is_a_new_structure(arm):
    """Two initial-state parameters alike but for the sequence their meta names."""
    windows = arm.sequences
    make = [
        ms.initial_state_params(windows, sequences=[s], qvel=False, joints=["j1"])
        for s in windows.sequence_name
    ]
    a, b = (ms.ParameterDict([ms.Parameter("q", 0.25, 0.0, 0.5, meta=m[next(iter(m))].meta)])
            for m in make)  # fmt: skip
    rf = ms.build_residual_fn([windows])
    rf(a.as_vector(), a)
    fresh = ms.build_residual_fn([windows])
    np.testing.assert_array_equal(rf(b.as_vector(), b), fresh(b.as_vector(), b))


def test_predict_takes_x_then_params(make_problem):
    p = make_problem(ARM2, truth_arm, n=100)
    params = arm_params(p.spec, p.model)
    rf = ms.build_residual_fn([p.sequences])
    x = params.as_vector() * 1.01
    moved = rf.predict(x, params)[0].residual
    assert not np.array_equal(rf.predict(None, params)[0].residual, moved)
    np.testing.assert_array_equal(moved, rf(x, params)[: moved.size])
    with pytest.raises(
        TypeError, match=r"x must be a parameter vector or None \(call predict\(None, params\)\)"
    ):
        rf.predict(params, x)
    with pytest.raises(TypeError, match="params must be a ParameterDict"):
        rf.predict(x)
