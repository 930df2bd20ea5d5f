"""Tests of mjsysid.planning: spline maths, the predictive-sampling planner, the cart-pole bench."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mjsysid.lab.planning import (
    CARTPOLE_RAIL_LIMIT,
    ControlSpline,
    EpisodeResult,
    PlannerOptions,
    PredictiveSampling,
    cartpole_cost,
    cartpole_model,
    cartpole_starts,
    cartpole_success,
    evaluate_planner,
    linear_interpolation_matrix,
    run_episode,
    sample_knots,
    shift_knots,
    wrap_angle,
)

# A small planner for tests that exercise the machinery, not the task.
SMALL = PlannerOptions(num_samples=8, horizon=0.1, num_knots=3, seed=3)


class RecordingCost:
    """A TrajectoryCost that remembers its inputs and delegates to the cart-pole cost."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, np.ndarray]] = []

    def __call__(self, states: np.ndarray, controls: np.ndarray, /) -> np.ndarray:
        self.calls.append((states.copy(), controls.copy()))
        return cartpole_cost(states, controls)


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return cartpole_model()


# --------------------------------------------------------------------------------------------
# Spline maths
# --------------------------------------------------------------------------------------------


def test_interpolation_matrix_hits_knots_midpoints_and_holds_ends() -> None:
    knots = np.array([0.0, 1.0, 3.0])
    w = linear_interpolation_matrix(knots, np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 5.0]))
    expected = np.array(
        [
            [1.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [0.5, 0.5, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.5, 0.5],
            [0.0, 0.0, 1.0],
            [0.0, 0.0, 1.0],
        ]
    )
    np.testing.assert_allclose(w, expected)


@settings(max_examples=50, deadline=None)
@given(
    gaps=st.lists(st.floats(0.01, 2.0), min_size=1, max_size=6),
    data=st.data(),
)
def test_interpolation_matrix_matches_np_interp(gaps: list[float], data: st.DataObject) -> None:
    knots = np.concatenate([[0.0], np.cumsum(gaps)])
    values = np.array(
        data.draw(st.lists(st.floats(-10, 10), min_size=knots.size, max_size=knots.size))
    )
    query = np.array(data.draw(st.lists(st.floats(-1.0, knots[-1] + 1.0), min_size=1)))
    w = linear_interpolation_matrix(knots, query)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    np.testing.assert_allclose(w @ values, np.interp(query, knots, values), atol=1e-9)


def test_interpolation_is_batched_over_samples() -> None:
    knots = np.linspace(0.0, 1.0, 4)
    values = np.random.default_rng(0).normal(size=(5, 4, 2))  # (nsample, nknot, nu)
    query = np.linspace(0.0, 1.0, 11)
    out = linear_interpolation_matrix(knots, query) @ values
    assert out.shape == (5, 11, 2)
    np.testing.assert_allclose(out[3, :, 1], np.interp(query, knots, values[3, :, 1]))


def test_shift_knots_moves_by_one_knot_and_holds_the_tail() -> None:
    knots = np.array([0.0, 0.5, 1.0])
    values = np.array([[1.0], [2.0], [4.0]])
    np.testing.assert_allclose(shift_knots(knots, values, 0.0), values)
    np.testing.assert_allclose(shift_knots(knots, values, 0.5), [[2.0], [4.0], [4.0]])
    np.testing.assert_allclose(shift_knots(knots, values, 0.25), [[1.5], [3.0], [4.0]])


def test_control_spline_evaluates_and_validates() -> None:
    spline = ControlSpline(np.array([1.0, 2.0]), np.array([[0.0, 10.0], [2.0, 20.0]]))
    np.testing.assert_allclose(spline(1.5), [1.0, 15.0])
    np.testing.assert_allclose(spline(7.0), [2.0, 20.0])
    with pytest.raises(ValueError, match="times must be a strictly increasing"):
        ControlSpline(np.array([1.0, 1.0]), np.zeros((2, 1)))
    with pytest.raises(ValueError, match=r"values must be of shape \(2, nu\)"):
        ControlSpline(np.array([1.0, 2.0]), np.zeros((3, 1)))


def test_sample_knots_keeps_nominal_splits_scales_and_clips() -> None:
    nominal = np.array([[0.0], [9.5], [-3.0]])
    low, high = np.array([-10.0]), np.array([10.0])
    rng = np.random.default_rng(1)
    knots = sample_knots(nominal, rng, (0.0, 50.0), 9, low, high)
    assert knots.shape == (9, 3, 1)
    np.testing.assert_array_equal(knots[0], nominal)
    # Samples 1, 3, 5, 7 use scale 0 (unperturbed); 2, 4, 6, 8 use the huge scale.
    for i in (1, 3, 5, 7):
        np.testing.assert_array_equal(knots[i], nominal)
    assert np.all(knots >= low) and np.all(knots <= high)
    assert np.any(np.abs(knots[2::2]) == 10.0), "the huge scale must hit the bounds"


def test_sample_knots_clips_an_out_of_range_nominal() -> None:
    knots = sample_knots(np.array([[30.0]]), np.random.default_rng(0), (1.0,), 2, -5.0, 5.0)
    assert knots[0, 0, 0] == 5.0


# --------------------------------------------------------------------------------------------
# Planner
# --------------------------------------------------------------------------------------------


def test_options_validate() -> None:
    with pytest.raises(ValueError, match="num_samples must be at least 2, got 1"):
        PlannerOptions(num_samples=1)
    with pytest.raises(ValueError, match="horizon must be a positive float"):
        PlannerOptions(horizon=-1.0)
    with pytest.raises(ValueError, match="noise_scales must be a non-empty sequence"):
        PlannerOptions(noise_scales=())
    with pytest.raises(TypeError, match="num_knots must be an int"):
        PlannerOptions(num_knots=2.5)  # type: ignore[arg-type]
    assert PlannerOptions().nstep == 100
    assert PlannerOptions(noise_scales=[1, 2]).noise_scales == (1.0, 2.0)  # type: ignore[arg-type]


def test_planner_rejects_a_spec_and_bad_states(model: mujoco.MjModel) -> None:
    spec = mujoco.MjSpec.from_string("<mujoco/>")
    with pytest.raises(TypeError, match=r"model must be a mujoco.MjModel.*spec.compile\(\)"):
        PredictiveSampling(spec, cartpole_cost)  # type: ignore[arg-type]
    with PredictiveSampling(model, cartpole_cost, SMALL, nthread=0) as planner:
        with pytest.raises(ValueError, match=r"state must be a finite array of shape \(4,\)"):
            planner.plan(np.zeros(3))
        planner.plan(np.zeros(4), 1.0)
        with pytest.raises(ValueError, match="time must be at least the previous plan"):
            planner.plan(np.zeros(4), 0.5)


def test_planner_uses_its_own_timestep_without_touching_the_model(model: mujoco.MjModel) -> None:
    options = PlannerOptions(num_samples=4, horizon=0.1, timestep=0.02)
    cost = RecordingCost()
    with PredictiveSampling(model, cost, options, nthread=0) as planner:
        assert planner.model.opt.timestep == 0.02
        assert model.opt.timestep == 0.01
        planner.plan(np.zeros(4))
    states, controls = cost.calls[0]
    assert states.shape == (4, 5, 4) and controls.shape == (4, 5, 1)


def test_candidates_are_clipped_to_ctrlrange(model: mujoco.MjModel) -> None:
    options = PlannerOptions(num_samples=16, horizon=0.1, noise_scales=(100.0,), seed=0)
    cost = RecordingCost()
    with PredictiveSampling(model, cost, options, nthread=0) as planner:
        spline = planner.plan(cartpole_starts(1)[0])
    _, controls = cost.calls[0]
    low, high = model.actuator_ctrlrange[0]
    assert controls.min() >= low and controls.max() <= high
    assert np.isclose(np.abs(controls).max(), high), "a scale of 100 N must saturate"
    assert np.all(np.abs(spline.values) <= high)


def test_nominal_is_always_a_candidate(model: mujoco.MjModel) -> None:
    cost = RecordingCost()
    with PredictiveSampling(model, cost, SMALL, nthread=0) as planner:
        state = cartpole_starts(1)[0]
        first = planner.plan(state, 0.0)
        _, controls = cost.calls[0]
        np.testing.assert_array_equal(controls[0], 0.0)  # the initial nominal: zero force
        second = planner.plan(state, 0.04)
        _, controls = cost.calls[1]
        # Candidate 0 is the previous best, its knots re-sampled 0.04 s later.
        knot_times = np.linspace(0.0, SMALL.horizon, SMALL.num_knots)
        shifted = ControlSpline(0.04 + knot_times, shift_knots(knot_times, first.values, 0.04))
        np.testing.assert_allclose(shifted.values, first.evaluate(0.04 + knot_times))
        step_times = 0.04 + np.arange(SMALL.nstep) * SMALL.timestep
        np.testing.assert_allclose(controls[0], shifted.evaluate(step_times), atol=1e-12)
        best = int(np.argmin(planner.last_costs))
        np.testing.assert_allclose(second.evaluate(step_times), controls[best], atol=1e-12)
        np.testing.assert_allclose(second.times, 0.04 + np.linspace(0.0, SMALL.horizon, 3))


def test_predicted_states_match_stepping_the_planner_model(model: mujoco.MjModel) -> None:
    cost = RecordingCost()
    state = np.array([0.3, 2.0, -0.5, 1.0])
    with PredictiveSampling(model, cost, SMALL, nthread=2) as planner:
        planner.plan(state, 0.0)
    states, controls = cost.calls[0]
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = state[:2], state[2:]
    for k in range(SMALL.nstep):
        data.ctrl[:] = controls[5, k]
        mujoco.mj_step(model, data)
        np.testing.assert_allclose(states[5, k], np.r_[data.qpos, data.qvel], atol=1e-12)


def test_planning_is_deterministic_and_thread_independent(model: mujoco.MjModel) -> None:
    state = cartpole_starts(1)[0]

    def three_plans(nthread: int, seed: int | None = None) -> np.ndarray:
        with PredictiveSampling(model, cartpole_cost, SMALL, nthread=nthread) as planner:
            planner.reset(seed)
            return np.stack([planner.plan(state, t).values for t in (0.0, 0.04, 0.08)])

    a = three_plans(0)
    np.testing.assert_array_equal(a, three_plans(0))
    np.testing.assert_array_equal(a, three_plans(2))
    np.testing.assert_array_equal(a, three_plans(0, seed=SMALL.seed))
    assert not np.array_equal(a, three_plans(0, seed=SMALL.seed + 1))


def test_episode_replans_on_schedule_and_records_shapes(model: mujoco.MjModel) -> None:
    cost = RecordingCost()
    with PredictiveSampling(model, cost, SMALL, nthread=0) as planner:
        result = run_episode(model, planner, cartpole_starts(1)[0], duration=0.2)
    assert len(cost.calls) == 5  # at 0, 0.04, 0.08, 0.12, 0.16 s
    assert result.times.shape == (21,) and result.states.shape == (21, 4)
    assert result.controls.shape == (20, 1)
    np.testing.assert_allclose(result.times, np.arange(21) * 0.01, atol=1e-12)
    assert result.success is None
    with pytest.raises(ValueError, match=r"initial_state must be of shape \(4,\)"):
        run_episode(model, planner, np.zeros(2), duration=0.1)


# --------------------------------------------------------------------------------------------
# Cart-pole bench
# --------------------------------------------------------------------------------------------


def test_cartpole_model_file_and_mass_override() -> None:
    nominal = cartpole_model()
    assert nominal.opt.timestep == 0.01
    pole = nominal.body("pole").id
    assert nominal.body_mass[pole] == pytest.approx(0.2)
    np.testing.assert_allclose(nominal.jnt_range[nominal.joint("slider").id], [-1.8, 1.8])
    assert CARTPOLE_RAIL_LIMIT == nominal.jnt_range[nominal.joint("slider").id][1]
    assert nominal.actuator("force").ctrllimited
    names = [nominal.sensor(i).name for i in range(nominal.nsensor)]
    assert names == ["cart_pos", "pole_angle", "cart_vel", "pole_angvel"]
    assert nominal.key("hanging").qpos[1] == pytest.approx(np.pi)

    heavy = cartpole_model(0.8)
    assert heavy.body_mass[pole] == pytest.approx(0.8)
    np.testing.assert_allclose(heavy.body_inertia[pole], 4.0 * nominal.body_inertia[pole])
    with pytest.raises(ValueError, match="pole_mass must be a positive float"):
        cartpole_model(-1.0)


def test_cartpole_cost_values() -> None:
    upright = np.zeros((1, 3, 4))
    hanging = np.zeros((1, 3, 4))
    hanging[..., 1] = np.pi
    u = np.zeros((1, 3, 1))
    np.testing.assert_allclose(cartpole_cost(upright, u), [0.0])
    np.testing.assert_allclose(cartpole_cost(hanging, u), [6.0])
    np.testing.assert_allclose(cartpole_cost(upright, u + 10.0), [3 * 1e-4 * 100.0])
    moved = upright.copy()
    moved[..., 0] = 1.0
    np.testing.assert_allclose(cartpole_cost(moved, u, centre=2.0), [6.0])


def test_cartpole_starts_are_hanging_and_deterministic() -> None:
    starts = cartpole_starts(10, seed=4)
    assert starts.shape == (10, 4)
    np.testing.assert_array_equal(starts, cartpole_starts(10, seed=4))
    assert np.all(np.abs(starts[:, 1] - np.pi) < 0.3)
    np.testing.assert_array_equal(starts[:, [0, 2, 3]], 0.0)
    assert np.std(starts[:, 1]) > 0


def _result(angles: np.ndarray, cart: np.ndarray | None = None) -> EpisodeResult:
    n = angles.size
    states = np.zeros((n, 4))
    states[:, 1] = angles
    if cart is not None:
        states[:, 0] = cart
    return EpisodeResult(np.arange(n) * 0.01, states, np.zeros((n - 1, 1)))


def test_cartpole_success_judges_the_last_window() -> None:
    n = 501  # 5 s
    assert cartpole_success(_result(np.zeros(n)))
    assert cartpole_success(_result(np.full(n, 4 * np.pi + 0.1)))  # full turns do not count
    late_fall = np.zeros(n)
    late_fall[-50] = 0.3
    assert not cartpole_success(_result(late_fall))
    early_swing = np.zeros(n)
    early_swing[:250] = np.pi
    assert cartpole_success(_result(early_swing))
    at_stop = np.zeros(n)
    at_stop[-10:] = CARTPOLE_RAIL_LIMIT
    assert not cartpole_success(_result(np.zeros(n), cart=at_stop))
    with pytest.raises(ValueError, match="window must be in"):
        cartpole_success(_result(np.zeros(101)), window=2.0)
    np.testing.assert_allclose(wrap_angle(np.array([np.pi + 0.1, -0.1])), [-np.pi + 0.1, -0.1])


def test_right_model_swings_up_and_balances() -> None:
    # Default planner, one start, 5 s: swing-up takes about 1-2 s, then 2 s are judged.
    model = cartpole_model()
    evaluation = evaluate_planner(model, model, cartpole_starts(1), duration=5.0, nthread=2)
    assert evaluation.successes == 1, "the planner with the exact model must swing up"
    episode = evaluation.episodes[0]
    assert abs(wrap_angle(episode.states[-1, 1])) < 0.2


@pytest.mark.slow
def test_lesson_table_wrong_pole_mass() -> None:
    """0.2 kg belief: balances a 0.2 or 0.4 kg pole, mostly fails with 0.8 kg (about 2 min)."""
    starts = cartpole_starts(10)
    belief = cartpole_model(0.2)
    counts = {
        mass: evaluate_planner(cartpole_model(mass), belief, starts, nthread=2).successes
        for mass in (0.2, 0.4, 0.8)
    }
    assert counts[0.2] >= 9 and counts[0.4] >= 8, counts
    assert counts[0.8] <= 3, counts
    right = evaluate_planner(cartpole_model(0.8), cartpole_model(0.8), starts, nthread=2)
    assert right.successes >= 9, "with the right model the heavy pole must balance"
