"""Horizon stages: ResidualFunction.head and optimize(horizons=...)."""

from __future__ import annotations

import io

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2, excitation, simulate
from mjsysid.fit.checkpoints import checkpoint_horizon, load_checkpoint
from mjsysid.fit.horizons import resolve_horizons


def arm_masses(spec, model):
    return ms.ParameterDict(
        [ms.body_inertia_param(spec, model, b, ms.InertiaType.Mass) for b in ("link1", "link2")]
    )


def _truth(x):
    def make(spec, model):
        d = arm_masses(spec, model)
        d.update_from_vector(x)
        return d

    return make


TRUTH = [1.3, 0.5]


@pytest.fixture
def arm2(make_problem):
    return make_problem(ARM2, _truth(TRUTH), nseq=2, n=300, qpos=[0.3, -0.2])


def test_head_is_the_leading_part_of_every_sequence(arm2):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    X = params.as_vector()[:, None] * np.array([[1.0, 1.1, 0.9]])
    full, off = rf(X, params), rf.block_offsets
    head = rf.head(0.3)
    part, off_h = head(X, params), head.block_offsets
    ncol = arm2.sequences.sensordata[0].data.shape[1]
    for b in range(2):
        rows = (off_h[b + 1] - off_h[b]) // ncol
        times = arm2.sequences.sensordata[b].times
        assert rows == np.count_nonzero(times <= times[0] + 0.3 * (times[-1] - times[0]))
        np.testing.assert_array_equal(
            part[off_h[b] : off_h[b + 1]], full[off[b] : off[b] + rows * ncol]
        )
    assert rf.head(1.0) is rf
    assert head.stats is rf.stats  # one set of counters for the function and its heads
    steps = rf.stats.steps
    head.clear_cache()  # (the last call's simulations would be reused)
    head(X, params)
    assert rf.stats.steps - steps == 3 * 2 * 90  # candidates x sequences x steps of the head
    # the head's details are those of the shortened sequences
    pred = head.predict(None, params)[0]
    assert pred.measured.times[-1] <= 0.3 * arm2.sequences.sensordata[0].times[-1] + 1e-12
    np.testing.assert_array_equal(rf(X, params), full)  # the function itself is unchanged


def test_head_reuses_the_whole_datas_simulations_of_the_same_points(arm2):
    """A head called at points the whole data was just simulated at runs no rollout: it cuts
    those simulations to its steps, and its residual is the one it simulates itself."""
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    X = params.as_vector()[:, None] * np.array([[1.0, 1.1, 0.9]])
    rf(X, params)
    head = rf.head(0.3)
    steps = rf.stats.steps
    reused = head(X, params)
    assert rf.stats.steps == steps  # no rollout
    head.clear_cache()  # forgets the whole data's too
    fresh = head(X, params)
    assert rf.stats.steps - steps == 3 * 2 * 90
    np.testing.assert_array_equal(reused, fresh)
    # a point the whole data has not simulated is simulated; so is a head of another structure
    head(X[:, :1] * 1.01, params)
    assert rf.stats.steps - steps == 4 * 2 * 90


def test_a_diverged_simulation_is_not_cut_for_a_head():
    """The whole data's simulation that diverged may not have in the head's steps."""
    from mjsysid.objective.candidates import DistinctColumns, SimBatch, SimulationCache

    cache = SimulationCache()
    good = SimBatch(np.zeros((1, 10, 3)), np.ones((1, 10, 2)), np.array([True]), np.zeros((1, 3)))
    bad = SimBatch(np.zeros((1, 10, 3)), np.ones((1, 10, 2)), np.array([False]), np.zeros((1, 3)))
    per_seq = [DistinctColumns(np.array([0, 1]), np.array([0, 1]), [b"a", b"b"])]
    both = SimBatch(*(np.concatenate([g, b]) for g, b in zip(good, bad, strict=True)))
    cache.keep(per_seq, {0: both}, {}, ("k",), copy=False)
    lead = cache.leading(("k",), [[b"a", b"b"]], [4])
    assert list(lead[0]) == [b"a"]
    assert lead[0][b"a"].sensordata.shape == (4, 2) and lead[0][b"a"].state.shape == (4, 3)
    assert cache.leading(("other",), [[b"a", b"b"]], [4]) == {}


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.5, True, "0.3", float("nan")])
def test_head_rejects_bad_fractions(arm2, fraction):
    rf = ms.build_residual_fn([arm2.sequences])
    with pytest.raises(ValueError, match=r"fraction must be a number in \(0, 1\], got"):
        rf.head(fraction)


def test_head_keeps_at_least_two_samples(arm2):
    rf = ms.build_residual_fn([arm2.sequences])
    with pytest.raises(ValueError, match=r"arm2/seq0: the first 0\.001 of the sequence must be at"):
        rf.head(0.001)


def test_head_rows_are_the_heads_residual(arm2, make_problem):
    """``head_rows`` names the entries of the whole residual that are the head's residual, bit
    for bit, at any point: on the simulation grid and between its instants; none where a
    modify_residual (a SignalTransform normalises a head by its own RMS) makes the head's."""
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    X = params.as_vector()[:, None] * np.array([[1.0, 1.1, 0.9]])
    rows = rf.head_rows(0.3)
    np.testing.assert_array_equal(rf.head(0.3)(X, params), rf(X, params)[rows])
    np.testing.assert_array_equal(rf.head_rows(1.0), np.arange(rf(X[:, 0], params).size))
    # measured times between the simulation's instants (interpolated), a sensor subset
    p = make_problem(ARM2, _truth(TRUTH), n=300, qpos=[0.3, -0.2])
    meas = p.sequences.sensordata[0]
    t = meas.times[:-1] + 0.37 * (meas.times[1] - meas.times[0])
    data = np.stack([np.interp(t, meas.times, c) for c in meas.data.T], axis=1)
    seq = ms.ModelSequences(
        "arm2", p.spec, "s", p.sequences.initial_state[0], p.sequences.control[0],
        ms.TimeSeries(t, data, meas.signal_mapping),
    )  # fmt: skip
    off = ms.build_residual_fn([seq], enabled_observations=["j1_pos", "tip_pos"])
    for fraction in (0.2, 0.45, 0.7):
        np.testing.assert_array_equal(
            off.head(fraction)(X, params), off(X, params)[off.head_rows(fraction)]
        )
    t_ = ms.SignalTransform().gain("*_vel", "gain")
    params.add(ms.Parameter("gain", 1.0, 0.5, 2.0))
    assert ms.build_residual_fn([arm2.sequences], modify_residual=t_.apply).head_rows(0.3) is None


def test_head_with_a_signal_transform(make_problem):
    p = make_problem(ARM2, _truth(TRUTH), n=300, qpos=[0.3, -0.2])
    params = arm_masses(p.spec, p.model)
    params.add(ms.Parameter("gain", 1.0, 0.5, 2.0))
    params.add(ms.Parameter("delay", 0.0, 0.0, 0.02))
    t = ms.SignalTransform().gain("*_vel", "gain").delay("*_pos", "delay")
    rf = ms.build_residual_fn([p.sequences], modify_residual=t.apply)
    r_full = rf(params.as_vector(), params)
    r_head = rf.head(0.5)(params.as_vector(), params)
    assert np.all(np.isfinite(r_head)) and r_head.size < 0.55 * r_full.size


def test_horizons_recover_the_truth_and_report_every_stage(arm2):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    out = io.StringIO()
    opt, res = ms.optimize(params, rf, horizons=(0.3, 1.0), verbose=True, output=out)
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-7)
    np.testing.assert_allclose(opt.as_vector(), res.x)
    stages = res.stages
    assert [s.horizon for s in stages] == [0.3, 1.0]
    assert res.nit == sum(s.nit for s in stages) and stages[0].nit > 0
    # + the whole data at the fit's start; the last stage evaluates its start's residual
    # with its Jacobian (one call, counted in its own stage: no evaluation counted twice)
    assert res.nfev == sum(s.nfev for s in stages) + 1
    # the result describes the whole data: cost, residual and Jacobian
    _, plain = ms.optimize(params, rf, max_iters=0)
    assert res.initial_cost == pytest.approx(plain.initial_cost, rel=1e-12)
    assert res.fun.shape == plain.fun.shape and res.jac.shape == plain.jac.shape
    assert res.cost == pytest.approx(0.5 * float(rf(res.x, params) @ rf(res.x, params)))
    assert "stage 1/2: the first 30 % of every sequence or window" in out.getvalue()
    assert "first 30 %  iter    1/200  cost" in out.getvalue()
    # a missing 1.0 is appended
    _, res2 = ms.optimize(params, rf, horizons=[0.3])
    assert [s.horizon for s in res2.stages] == [0.3, 1.0]
    np.testing.assert_allclose(res2.x, res.x)


def test_an_early_stage_ends_when_it_slows_down(arm2):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    costs: list[float] = []
    _, res = ms.optimize(params, rf, horizons=(0.3, 1.0), callback=lambda it, x, c: costs.append(c))
    first = res.stages[0]
    early = costs[: first.nit]
    ratios = np.array(early[1:]) / np.array(early[:-1])
    # every step but the last cut the cost by 10 % or more; the last one ended the stage
    assert np.all(ratios[:-1] <= 0.9)
    assert first.status in ("gtol", "xtol", "slowed")
    assert (first.status == "slowed") == (ratios[-1] > 0.9)


@pytest.mark.parametrize(
    ("horizons", "exc", "match"),
    [
        ((1.0, 0.3), ValueError, "horizons must be strictly increasing fractions in"),
        ((0.0, 1.0), ValueError, "horizons must be strictly increasing fractions in"),
        ((0.3, 1.2), ValueError, "horizons must be strictly increasing fractions in"),
        ((), ValueError, "horizons must be strictly increasing fractions in"),
        ("0.3", TypeError, "horizons must be 'auto', None or a sequence of fractions in"),
        ("Auto", TypeError, "horizons must be 'auto', None or a sequence of fractions in"),
        (0.3, TypeError, "horizons must be 'auto', None or a sequence of fractions in"),
        ((True, 1.0), TypeError, "horizons must be a sequence of numbers in"),
    ],
)
def test_bad_horizons(arm2, horizons, exc, match):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    calls = rf.stats.calls
    with pytest.raises(exc, match=match):
        ms.optimize(params, rf, horizons=horizons)
    assert rf.stats.calls == calls  # nothing was simulated


def test_horizons_need_a_residual_with_head(arm2):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    with pytest.raises(TypeError, match=r"residual_fn must be a residual with a head\(fraction\)"):
        ms.optimize(params, lambda x, p: rf(x, p), horizons=(0.3, 1.0))
    _, res = ms.optimize(params, lambda x, p: rf(x, p), horizons=(1.0,))  # one stage: fine
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-7)


def test_auto_horizons_by_sequence_length_residual_and_backend(make_problem):
    def rf_of(n, **kw):
        p = make_problem(ARM2, _truth(TRUTH), n=n, qpos=[0.3, -0.2])
        return ms.build_residual_fn([p.sequences], **kw)

    long, mid, short = rf_of(300), rf_of(100), rf_of(40)
    # every sequence must keep >= 20 samples in a stage: 300 samples -> 30 (10 %), 90 (30 %)
    assert long.head_samples(0.1) == [30] and long.head_samples(0.3) == [90]
    assert mid.head_samples(0.1) == [10] and short.head_samples(0.3) == [12]
    assert resolve_horizons("auto", long) == (0.1, 0.3, 1.0)
    assert resolve_horizons("auto", long, "mujoco") == (0.1, 0.3, 1.0)
    assert resolve_horizons("auto", mid) == (0.3, 1.0)
    assert resolve_horizons("auto", short) == (1.0,)
    # one stage: scipy backends (no slow-iteration stop), a custom residual, any plain callable
    assert resolve_horizons("auto", long, "scipy") == (1.0,)
    assert resolve_horizons("auto", rf_of(300, modify_residual=lambda *a: a[0])) == (1.0,)
    assert resolve_horizons("auto", rf_of(300, custom_rollout=lambda *a: None)) == (1.0,)
    bias = ms.SignalTransform().bias("*_pos", "b")
    with_bias = rf_of(300, modify_residual=bias.apply)
    assert resolve_horizons("auto", with_bias) == (0.1, 0.3, 1.0)
    # stages save nothing when no free parameter changes the simulation (one rollout in all)
    p = make_problem(ARM2, n=300)
    params = arm_masses(p.spec, p.model)
    params.add(ms.Parameter("b", 0.0, -1.0, 1.0))
    assert resolve_horizons("auto", with_bias, "lm", params) == (0.1, 0.3, 1.0)
    params["link1_mass"].frozen = params["link2_mass"].frozen = True
    assert resolve_horizons("auto", with_bias, "lm", params) == (1.0,)
    assert resolve_horizons("auto", lambda x, p: x) == (1.0,)
    assert resolve_horizons(None, long) == (1.0,)
    assert resolve_horizons([0.5], long) == (0.5, 1.0)


def test_auto_horizons_leave_room_for_sensor_delays(make_problem):
    """A head must be longer than the delay window: a SignalTransform reads the prediction
    at t - delay, and a 60 ms head holds no sample that every delay up to 0.1 s can read."""
    p = make_problem(ARM2, _truth(TRUTH), n=300, qpos=[0.3, -0.2])
    params = arm_masses(p.spec, p.model)
    params.add(ms.Parameter("delay", 0.0, 0.0, 0.1))
    t = ms.SignalTransform().delay("*_pos", "delay")
    rf = ms.build_residual_fn([p.sequences], modify_residual=t.apply)
    assert rf.head_samples(0.1) == [30] and rf.head_samples(0.1, (0.0, 0.1)) == [0]
    assert rf.head_samples(0.3, (0.0, 0.1)) == [40]  # 90 samples, the first 50 unreadable
    assert resolve_horizons("auto", rf, "lm", params) == (0.3, 1.0)
    with pytest.raises(ValueError, match=r"the delay window .* leaves 0 samples"):
        ms.optimize(params, rf, horizons=(0.1, 1.0))  # asked for: reported, not dropped
    _, res = ms.optimize(params, rf)
    assert [s.horizon for s in res.stages] == [0.3, 1.0]
    np.testing.assert_allclose(res.x[:2], TRUTH, rtol=1e-6)


def test_optimize_fits_in_stages_by_default(arm2):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    _, auto = ms.optimize(params, rf)
    _, one = ms.optimize(params, rf, horizons=None)
    assert [s.horizon for s in auto.stages] == [0.1, 0.3, 1.0]
    assert not one.stages
    np.testing.assert_allclose(auto.x, TRUTH, rtol=1e-7)
    np.testing.assert_allclose(one.x, TRUTH, rtol=1e-7)


def _late_gear_params(spec, model):
    d = arm_masses(spec, model)
    d.add(ms.make_parameter("actuator_gear", model, "m1"))
    return d


def _late_gear_problem(masses=TRUTH):
    """m1 pushes only in the second half: its gear has no effect on the first 30 %."""
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()
    ctrl = excitation(300, 2, seed=3)
    ctrl[:150, 0] = 0.0
    truth = _late_gear_params(spec, model)
    truth.update_from_vector([*masses, 1.4])
    x0 = ms.create_initial_state(model, qpos=[0.3, -0.2])
    sens, control = simulate(spec, truth, ctrl, x0)
    return spec, model, ms.ModelSequences("arm2", spec, "s", x0, control, sens)


def test_a_stage_that_hardly_sees_the_misfit_is_skipped():
    _, model, seq = _late_gear_problem(masses=[1.0, 0.7])  # the model's own masses
    params = ms.ParameterDict([ms.make_parameter("actuator_gear", model, "m1")])
    rf = ms.build_residual_fn([seq])
    head = rf.head(0.3)
    x = params.as_vector()
    assert 0.5 * float(head(x, params) @ head(x, params)) < 1e-3 * 0.5 * float(
        rf(x, params) @ rf(x, params)
    )
    _, res = ms.optimize(params, rf, horizons=(0.3, 1.0))
    first = res.stages[0]
    assert (first.horizon, first.status, first.nit) == (0.3, "skipped", 0)
    np.testing.assert_allclose(res.x, [1.4], rtol=1e-6)


def test_a_parameter_excited_only_later_is_fitted_and_a_dead_one_named():
    spec, model, seq = _late_gear_problem()
    params = _late_gear_params(spec, model)
    rf = ms.build_residual_fn([seq])
    head = rf.head(0.3)
    x = params.as_vector()
    J = ms.fd_jacobian(lambda X: head(X, params), x, head(x, params), params.get_bounds())
    assert np.any(J[:, :2]) and not np.any(J[:, 2])  # the gear: no effect on the head
    _, res = ms.optimize(params, rf, horizons=(0.3, 1.0))
    assert res.stages[0].nit > 0
    np.testing.assert_allclose(res.x, [*TRUTH, 1.4], rtol=1e-6)
    params.add(ms.Parameter("unused", 1.0, 0.0, 2.0, modifier=lambda s, p: None))
    seen: list[float] = []
    with pytest.raises(ValueError, match=r"parameters \['unused'\] have no effect on the residual"):
        ms.optimize(params, rf, horizons=(0.3, 1.0), callback=lambda it, x, c: seen.append(c))
    assert seen  # named at the start of the fit on the whole data, after the head's fit


def test_a_head_that_excites_nothing_costs_only_its_own_evaluations():
    """The arm hangs still under noise for its first 40 %: the head stage finds a zero
    gradient at once, and no whole-data Jacobian is spent on its zero columns."""
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()
    truth = arm_masses(spec, model)
    truth.update_from_vector(TRUTH)
    ctrl = excitation(500, 2, seed=3)
    ctrl[:200] = 0.0
    x0 = ms.create_initial_state(model, qpos=[np.pi / 2, 0.0])  # hanging: at rest
    sens, control = simulate(spec, truth, ctrl, x0, noise=0.01, seed=5)
    rf = ms.build_residual_fn([ms.ModelSequences("arm2", spec, "s", x0, control, sens)])
    params = arm_masses(spec, model)
    head = rf.head(0.3)
    before = rf.stats.steps
    head(params.as_vector(), params)
    head_steps = rf.stats.steps - before
    spent, fits = {}, {}
    for horizons in ((0.3, 1.0), None):
        rf.clear_cache()
        before = rf.stats.steps
        fits[horizons] = ms.optimize(params, rf, horizons=horizons)[1]
        spent[horizons] = rf.stats.steps - before
    staged, one = fits[(0.3, 1.0)], fits[None]
    first = staged.stages[0]
    assert first.status == "gtol" and first.nit == 0
    np.testing.assert_allclose(staged.x, one.x, rtol=1e-9)  # the same fit on the whole data
    # the head's Jacobian (2 columns); its start is the whole data's simulation, cut
    assert spent[(0.3, 1.0)] - spent[None] == 2 * head_steps


def test_checkpoint_names_the_stage_and_resume_continues_there(arm2, tmp_path):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    ckpt = tmp_path / "fit.npz"

    def stop_at_one(it, x, cost):
        if it == 1:
            raise KeyboardInterrupt

    _, cut = ms.optimize(params, rf, horizons=(0.3, 1.0), checkpoint=ckpt, callback=stop_at_one)
    assert cut.status == "interrupted" and cut.nit == 1
    assert [s.horizon for s in cut.stages] == [0.3, 1.0]
    assert cut.fun.shape == rf(cut.x, params).shape  # the result is on the whole data
    # Ctrl-C means stop now: one residual on the whole data, no Jacobian (p more rollouts)
    assert cut.jac.shape == (cut.fun.size, cut.x.size) and np.isnan(cut.jac).all()
    assert cut.stages[-1].nfev == 1
    assert checkpoint_horizon(ckpt) == 0.3
    np.testing.assert_allclose(load_checkpoint(ckpt, params)[0], cut.x)
    _, resumed = ms.optimize(params, rf, horizons=(0.3, 1.0), checkpoint=ckpt, resume=True)
    assert [s.horizon for s in resumed.stages] == [0.3, 1.0]
    np.testing.assert_allclose(resumed.x, TRUTH, rtol=1e-7)
    assert checkpoint_horizon(ckpt) == 1.0
    # written in the last stage: no early stage is run again
    _, again = ms.optimize(params, rf, horizons=(0.3, 1.0), checkpoint=ckpt, resume=True)
    assert not again.stages
    np.testing.assert_allclose(again.x, TRUTH, rtol=1e-7)


def test_max_iters_counts_every_stage(arm2):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    _, res = ms.optimize(params, rf, horizons=(0.3, 1.0), max_iters=2)
    assert res.nit <= 2 and res.status == "max_iters"
    assert "max_iters=2" in res.message


@pytest.mark.parametrize("optimizer", ["lm", "mujoco", "scipy", "scipy_parallel_fd"])
def test_horizons_with_every_backend(arm2, optimizer):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    _, res = ms.optimize(params, rf, optimizer=optimizer, horizons=(0.3, 1.0))
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-6)
    first, last = res.stages
    assert first.nit > 1 and first.cost < 1e-3 * first.initial_cost  # real progress
    assert last.nit <= 2  # the whole data only confirms


def test_a_too_short_head_fails_before_any_simulation(arm2):
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    with pytest.raises(ValueError, match=r"the first 0\.001 of the sequence must be at least 2"):
        ms.optimize(params, rf, horizons=(0.001, 1.0))
    assert rf.stats.calls == 0


def test_horizons_with_two_models_of_different_lengths_and_custom_callbacks(make_problem):
    """Two ModelSequences (other structures, 300 and 200 samples), then the same data through a
    custom residual and a custom rollout: every stage and the result stay consistent."""
    a = make_problem(ARM2, _truth(TRUTH), n=300, qpos=[0.3, -0.2])
    payload = ARM2.replace(
        '<site name="tip2" pos="0.3 0 0"/>',
        '<site name="tip2" pos="0.3 0 0"/><body name="payload" pos="0.3 0 0">'
        '<geom type="sphere" size="0.04" mass="0.3"/></body>',
    )
    b = make_problem(payload, _truth(TRUTH), n=200, qpos=[0.1, 0.2])
    b.sequences.name = "arm_payload"
    params = arm_masses(a.spec, a.model)
    rf = ms.build_residual_fn([a.sequences, b.sequences])
    head = rf.head(0.5)
    assert np.diff(head.block_offsets).tolist() == [150 * 10, 100 * 10]
    _, res = ms.optimize(params, rf, horizons=(0.5, 1.0))
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-7)
    assert res.fun.size == (300 + 200) * 10

    lengths: list[int] = []

    def residual(params, pred, meas, model, return_pred_all=False, state=None, **kw):
        lengths.append(meas.times.size)
        return (meas.data - pred.get(meas.times, method="zoh")[1]) / 0.1, pred, meas

    def rollout(models, datas, control, initial_states, param_dicts):
        return ms.sysid_rollout(models, datas, control, initial_states)

    custom = ms.build_residual_fn([a.sequences], modify_residual=residual, custom_rollout=rollout)
    rollout_only = ms.build_residual_fn([a.sequences], custom_rollout=rollout)
    assert custom.head_rows(0.5) is None and rollout_only.head_rows(0.5) is None  # custom code
    _, res = ms.optimize(params, custom, horizons=(0.5, 1.0))
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-6)
    assert min(lengths) == 150 and max(lengths) == 300  # the custom residual saw both stages


def test_head_of_measurements_between_simulation_instants(make_problem):
    """Measured times off the simulation grid (interpolated predictions), a sensor subset
    and a weight: the head's residual is still the leading part of the whole one."""
    p = make_problem(ARM2, _truth(TRUTH), n=300, qpos=[0.3, -0.2])
    meas = p.sequences.sensordata[0]
    t = meas.times[:-1] + 0.37 * (meas.times[1] - meas.times[0])
    data = np.stack([np.interp(t, meas.times, c) for c in meas.data.T], axis=1)
    rec = ms.TimeSeries(t, data, meas.signal_mapping)
    seq = ms.ModelSequences(
        "arm2", p.spec, "s", p.sequences.initial_state[0], p.sequences.control[0], rec
    )
    params = arm_masses(p.spec, p.model)
    rf = ms.build_residual_fn(
        [seq], enabled_observations=["j1_pos", "tip_pos"], sensor_weights={"tip_pos": 3.0}
    )
    X = params.as_vector()[:, None] * np.array([[1.0, 1.2]])
    full, part = rf(X, params), rf.head(0.4)(X, params)
    n = np.count_nonzero(t <= t[0] + 0.4 * (t[-1] - t[0]))
    assert part.shape == (n * 4, 2)  # j1_pos + tip_pos (3) columns
    np.testing.assert_array_equal(part, full[: n * 4])


def test_a_parameter_without_effect_on_an_early_stage_is_held_there_and_released_later():
    """Issue #31: a parameter the first part of the data does not excite (a Stribeck
    velocity in the first 10 %) waits for the stage that excites it, for every backend."""
    spec, model, seq = _late_gear_problem()
    rf = ms.build_residual_fn([seq])
    for optimizer in ("lm", "mujoco"):
        params = _late_gear_params(spec, model)
        names = params.get_non_frozen_parameter_names()
        _, res = ms.optimize(params, rf, optimizer=optimizer, horizons=(0.3, 1.0))
        first, last = res.stages
        assert first.held == [names[2]] and last.held == []
        assert first.summary()["held"] == [names[2]]
        np.testing.assert_allclose(res.x, [*TRUTH, 1.4], rtol=1e-5)
    # and with the default stages
    _, res = ms.optimize(_late_gear_params(spec, model), rf)
    assert [st.horizon for st in res.stages][-1] == 1.0
    np.testing.assert_allclose(res.x, [*TRUTH, 1.4], rtol=1e-5)


def _counting_quadratic():
    """A residual with curvature, ``r = [x0², x0·x1, x1 − 1]``, that counts its candidates."""
    seen = []

    def r(X):
        X = np.asarray(X, dtype=np.float64)
        seen.append(X.shape[1])
        return np.stack([X[0] ** 2, X[0] * X[1], X[1] - 1.0])

    return r, seen


def _cache(reuse_steps):
    from mjsysid.fit.jacobian import CountedResidual, JacobianCache

    r, seen = _counting_quadratic()
    fn = CountedResidual(lambda X, params: r(X), None)
    bounds = (np.full(2, -10.0), np.full(2, 10.0))
    return JacobianCache(fn, bounds, 1.5e-8, reuse_steps), r, seen


def test_a_jacobian_serves_within_a_few_fd_steps_of_its_point_and_never_drifts():
    cache, r, seen = _cache(4.0)
    x = np.array([2.0, 3.0])
    h = 1.5e-8 * np.maximum(1.0, np.abs(x))  # the forward steps at x
    J = cache(x, r(x[:, None])[:, 0])
    assert cache.njev == 1
    near = x + 3.0 * h  # within 4 steps of x in every entry: the same Jacobian, no rollout
    calls = len(seen)
    assert cache(near, r(near[:, None])[:, 0]) is J
    assert len(seen) == calls + 1 and cache.njev == 1  # (the one call is the test's own r)
    farther = x + np.array([3.0, 5.0]) * h  # one entry beyond 4 steps: computed afresh
    J2 = cache(farther, r(farther[:, None])[:, 0])
    assert cache.njev == 2 and J2 is not J
    # three steps of 3h each: every one near the previous point, the last 6h from the kept
    # one (the point of J2 is kept, not moved along): computed again
    kept = farther
    for k in (1, 2):
        y = kept + 3.0 * k * h
        cache(y, r(y[:, None])[:, 0])
    assert cache.njev == 3
    # a reused Jacobian errs by no more than a few times a fresh one's truncation error
    exact = np.array([[2 * near[0], 0.0], [near[1], near[0]], [0.0, 1.0]])
    fresh = _cache(0.0)[0](near, r(near[:, None])[:, 0])
    err_fresh = np.abs(fresh - exact).max()
    assert np.abs(J - exact).max() <= 8.0 * max(err_fresh, 1.5e-8 * 4)


def test_reuse_steps_zero_computes_every_new_point():
    cache, r, _ = _cache(0.0)
    x = np.array([2.0, 3.0])
    cache(x, r(x[:, None])[:, 0])
    y = x + 1e-12
    cache(y, r(y[:, None])[:, 0])
    assert cache.njev == 2


def test_the_final_stage_reuses_its_start_jacobian_when_it_ends_next_to_it(arm2, monkeypatch):
    """The last stage starts at the early stages' solution; an LM step of round-off ends
    next to it. The result's Jacobian is then the start's: p full-length rollouts fewer
    than with the reuse off, the same solution, and equal to a fresh Jacobian at the
    solution to finite-difference accuracy."""
    import mjsysid.fit.horizons as horizons

    params = arm_masses(arm2.spec, arm2.model)
    runs, default = {}, horizons.REUSE_STEPS
    for reuse in (default, 0.0):
        monkeypatch.setattr(horizons, "REUSE_STEPS", reuse)
        rf = ms.build_residual_fn([arm2.sequences])
        opt, res = ms.optimize(params, rf)
        runs[reuse] = (opt, res, rf.stats.steps, rf)
    (opt, res, steps, rf), (_, res0, steps0, _) = runs[default], runs[0.0]
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-7)
    np.testing.assert_array_equal(res.x, res0.x)
    assert steps0 - steps == 2 * 2 * 300  # p = 2 candidates x 2 sequences x 300 steps
    # the reused Jacobian differs from a fresh one at the solution no more than a fresh one
    # differs from itself with half the step (the finite differences' own error)
    r_hat, bounds = rf(res.x, opt), opt.get_bounds()
    fresh = ms.fd_jacobian(lambda X: rf(X, opt), res.x, r_hat, bounds)
    half = ms.fd_jacobian(lambda X: rf(X, opt), res.x, r_hat, bounds, eps=0.75e-8)
    scale = np.abs(fresh).max(axis=0)
    reused_err = np.abs(res.jac - fresh).max(axis=0) / scale
    own_err = np.abs(half - fresh).max(axis=0) / scale
    assert np.all(reused_err <= 2.0 * own_err) and reused_err.max() < 1e-6
    np.testing.assert_array_equal(res0.jac, fresh)  # with the reuse off: the fresh one


def test_an_early_stage_stops_without_a_confirming_jacobian(arm2, monkeypatch):
    """An early stage's stop is taken on the Broyden update: no finite-difference Jacobian of
    the head at the point it ends (the whole data's stage computes its own there)."""
    params = arm_masses(arm2.spec, arm2.model)
    rf = ms.build_residual_fn([arm2.sequences])
    calls: list[tuple[bool, int]] = []
    original = type(rf).__call__

    def recording(self, x, p):
        calls.append((self is rf, 1 if np.ndim(x) == 1 else np.shape(x)[1]))
        return original(self, x, p)

    monkeypatch.setattr(type(rf), "__call__", recording)
    _, res = ms.optimize(params, rf, horizons=(0.3, 1.0))
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-7)
    assert res.stages[0].status in ("gtol", "xtol") and res.stages[0].nit > 1
    head = [k for whole, k in calls if not whole]
    assert head[-1] == 1  # the trial step that ended the stage, not a Jacobian (k = 2)
    assert 2 in head  # (the stage did use finite-difference Jacobians before)


def test_after_an_exact_stage_the_whole_datas_jacobian_serves_the_next_stages(arm2, monkeypatch):
    """Noise-free data: the first stage fits its part exactly. The whole data's residual at its
    end is evaluated with the whole data's Jacobian (one call): the next head takes its start
    residual and Jacobian from their rows (no simulation: p x sequences x 150 head steps
    fewer), and the last stage, which starts next to that point, only evaluates its start
    residual. The same solution as without the rows; the result's Jacobian equals a fresh
    one at the solution to finite-difference accuracy."""
    from mjsysid.objective.residual import ResidualFunction

    params = arm_masses(arm2.spec, arm2.model)
    runs = {}
    for rows in (True, False):
        if not rows:
            monkeypatch.setattr(ResidualFunction, "head_rows", lambda self, fraction: None)
        rf = ms.build_residual_fn([arm2.sequences])
        opt, res = ms.optimize(params, rf, horizons=(0.2, 0.5, 1.0))
        runs[rows] = (opt, res, rf.stats.steps, rf)
    (opt, res, steps, rf), (_, plain, plain_steps, _) = runs[True], runs[False]
    first, middle, last = res.stages
    assert first.status == "gtol" and first.cost <= 1e-12 * first.initial_cost  # exact
    np.testing.assert_array_equal(res.x, plain.x)
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-12)
    assert plain_steps - steps == 2 * 2 * 150  # the head's Jacobian at its start
    assert middle.nit == 1 and middle.nfev == 1  # its trial step only
    assert last.nfev == 1 and plain.stages[2].nfev == 3  # (without: its start's r and J)
    r_hat, bounds = rf(res.x, opt), opt.get_bounds()
    fresh = ms.fd_jacobian(lambda X: rf(X, opt), res.x, r_hat, bounds)
    np.testing.assert_allclose(res.jac, fresh, rtol=1e-5, atol=1e-6 * np.abs(fresh).max())
    # data with noise are never fitted exactly: no whole-data Jacobian at a stage's end
    from mjsysid.fit.horizons import Stage, _exact
    from mjsysid.fit.status import Status

    def stage(status, cost, held=()):
        return Stage(0.1, np.zeros(2), 1.0, cost, status, 3, 0, 0, 0, [], [], held=list(held))

    assert _exact(stage(Status.GTOL, 1e-13)) and _exact(stage(Status.XTOL, 0.0))
    assert not _exact(stage(Status.GTOL, 1e-6))  # a noise floor
    assert not _exact(stage(Status.SLOWED, 1e-13)) and not _exact(stage(Status.SKIPPED, 1e-13))
    assert not _exact(stage(Status.GTOL, 1e-13, held=["link2_mass"]))  # may move far later
