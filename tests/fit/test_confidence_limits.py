"""What limits an interval: parameters at a bound (free for the others' intervals),
degenerate nuisance blocks, near-collinear parameters, rough Jacobian columns
(compute_confidence, calculate_intervals)."""

from __future__ import annotations

import numpy as np
import pytest

import mjsysid as ms
from conftest import linear_result
from mjsysid.fit.confidence import bound_sides, compute_confidence, near_collinear
from mjsysid.fit.jacobian import fd_jacobian, rough_columns

_result = linear_result


def _params(names, x, lo, hi) -> ms.ParameterDict:
    return ms.ParameterDict(
        [ms.Parameter(n, v, a, b) for n, v, a, b in zip(names, x, lo, hi, strict=True)]
    )


# -- 1. active bounds widen, never narrow, the others ------------------------------------------
def test_a_value_a_step_short_of_its_bound_counts_as_at_it():
    lo, hi = np.array([0.0, 0.0]), np.array([10.0, 10.0])
    # 2.1e-8 above the bound of a range of 10 (the UR5e shoulder mass): at the bound
    assert bound_sides(np.array([2.1e-8, 5.0]), lo, hi).tolist() == [-1, 0]
    assert bound_sides(np.array([1e-3, 10.0 - 1e-6]), lo, hi).tolist() == [0, 1]
    # an infinite range leaves only the absolute tolerance
    inf = np.array([np.inf, np.inf])
    assert bound_sides(np.array([2.1e-8, 1e-10]), lo, inf).tolist() == [0, -1]


def test_a_parameter_at_its_bound_widens_never_narrows_the_others():
    """Issue #31: a parameter held at a bound far from its truth narrowed two others'
    intervals, which then missed; it now counts as free for them."""
    rng = np.random.default_rng(0)
    J = rng.standard_normal((80, 3))
    J[:, 2] += 0.8 * J[:, 0]  # correlated with the first: holding it would narrow the first's
    r = 0.01 * rng.standard_normal(80)
    names = ["a", "b", "mass"]
    x = np.array([1.0, 2.0, 2.1e-8])
    conf = compute_confidence(
        _result(x, r, J, names), None, params=_params(names, x, [0, 0, 0], [10, 10, 10])
    )
    assert conf.at_bound.tolist() == [0, 0, -1]
    assert np.isinf(conf.half_widths[2])
    _, held = ms.calculate_intervals(r, J[:, :2])
    _, free = ms.calculate_intervals(r, J)
    np.testing.assert_allclose(conf.half_widths[:2], free[:2])
    assert conf.half_widths[0] > 1.2 * held[0]  # wider than holding it would give
    assert np.all(conf.half_widths[:2] >= held)
    assert (
        "mass is at its lower bound: its interval is bound-limited (not given), and the "
        "others' are computed with it free (which can only widen them)"
    ) in conf.caveats()
    assert conf.to_dict()["parameters"][2]["upper"] == ".inf"


# -- 2. a degenerate nuisance block leaves the physics alone ----------------------------------
def _windowed_jacobian(noise: float, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """3 physics columns over 6 windows of 60 rows, and per window a start velocity and a
    filter state; in window 3 the two cancel (the filter constant at its bound), up to the
    finite-difference noise ``noise`` (relative)."""
    rng = np.random.default_rng(seed)
    rows, windows = 60, 6
    t = np.linspace(0, 1, rows)
    physics = rng.standard_normal((rows * windows, 3))
    physics[:, 1] = physics[:, 0] + 0.03 * rng.standard_normal(rows * windows)  # |cos| 0.9995
    blocks = []
    names = ["kv", "tau", "gain"]
    for w in range(windows):
        block = np.zeros((rows * windows, 2))
        block[w * rows : (w + 1) * rows, 0] = np.exp(-3 * t)
        block[w * rows : (w + 1) * rows, 1] = np.exp(-8 * t) * (1 + t)
        if w == 3:
            col = -0.7 * block[:, 0]
            block[:, 1] = col + noise * np.linalg.norm(col) * rng.standard_normal(col.size)
        blocks.append(block)
        names += [f"run#{w}/qvel0", f"run#{w}/act0"]
    return np.column_stack([physics, *blocks]), names


def test_a_degenerate_window_start_leaves_the_physics_finite():
    J, names = _windowed_jacobian(noise=5e-7)
    r = 0.01 * np.random.default_rng(1).standard_normal(J.shape[0])
    # the cause: the null direction just under the cut carries noise components on the
    # physics columns above the 1e-6 a bare component test counts
    Js = J / np.linalg.norm(J, axis=0)
    lam, V = np.linalg.eigh(Js.T @ Js)
    assert lam[0] < 1e-10 * lam[-1] < lam[1]
    assert np.abs(V[:3, 0]).max() > 1e-6
    _, half = ms.calculate_intervals(r, J)
    infinite = [n for n, h in zip(names, half, strict=True) if np.isinf(h)]
    assert infinite == ["run#3/qvel0", "run#3/act0"]


def test_a_real_null_component_still_makes_a_parameter_infinite():
    J, _ = _windowed_jacobian(noise=0.0)
    J[:, 2] = J[:, 0] + J[:, 1]  # gain = kv + tau: a real physics null direction
    _, half = ms.calculate_intervals(np.zeros(J.shape[0]) + 1e-3, J)
    assert np.isinf(half[:3]).all() and np.isfinite(half[3:9]).all()


# -- 3. near-collinear parameters ---------------------------------------------------------------
def _collinear_problem():
    rng = np.random.default_rng(2)
    j = rng.standard_normal(200)
    other = rng.standard_normal(200)
    # the shoulder mass on the pan axis and the pan armature: |cos| = 0.999985
    k = j + 0.0055 * (other - (other @ j) / (j @ j) * j) / np.linalg.norm(other) * np.linalg.norm(j)
    J = np.column_stack([j, k, rng.standard_normal(200)])
    return J, ["shoulder_mass", "pan_armature", "elbow_damping"]


def test_near_collinear_columns_are_named_from_the_scaled_jacobian():
    J, names = _collinear_problem()
    found = near_collinear(J, names, np.array([1.0, 0.3, 0.1]))
    assert len(found) == 1
    assert found[0].members == (0, 1)
    assert found[0].cosine == pytest.approx(0.999985, abs=2e-6)
    # same-sign columns of equal norm: a step +δ in one and −δ in the other is not seen
    assert found[0].combination.kind == "sum"
    assert found[0].combination.text == (
        "shoulder_mass and pan_armature: only their sum is determined"
    )


def test_an_exact_fit_does_not_give_collinear_parameters_zero_width():
    J, names = _collinear_problem()
    x = np.array([1.0, 0.3, 0.1])
    conf = compute_confidence(_result(x, np.zeros(200), J, names), None)
    _, plain = ms.calculate_intervals(np.zeros(200), J)
    assert plain.tolist() == [0.0, 0.0, 0.0]  # what the issue saw: zero-width certainty
    assert np.isinf(conf.half_widths[:2]).all() and conf.half_widths[2] == 0.0
    (text,) = conf.notes
    assert text.startswith("shoulder_mass and pan_armature: only their sum is determined")
    assert "(their scaled Jacobian columns have |cos| = 0.99998" in text
    assert "their own intervals are not determined by these data (reported infinite)" in text
    assert text in conf.caveats()


def test_a_weak_group_of_three_is_named_by_its_eigenvalue():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 300))
    c = a + b + 1e-3 * rng.standard_normal(300)
    found = near_collinear(np.column_stack([a, b, c]), ["a", "b", "c"], np.ones(3))
    assert len(found) == 1 and found[0].cosine is None and found[0].members == (0, 1, 2)
    assert "a scaled eigenvalue" in found[0].text()


# -- 4. rough (contact) columns -----------------------------------------------------------------
T = np.linspace(0.1, 1.0, 50)


def _rough_residual(X: np.ndarray) -> np.ndarray:
    """``t·θ0 + t²·g(θ1)``, ``g`` a slope 1 with a ripple of period 1e-7 and slope amplitude
    1.9: a tiny step sees the ripple, a 100x larger one averages it out."""
    t = T[:, None]
    g = X[1] + 3e-8 * np.sin(2 * np.pi * X[1] / 1e-7)
    return t * X[0] + t**2 * g - 0.5 * t


def test_a_rough_column_takes_the_larger_step():
    x = np.array([0.2, 0.3])
    r0 = _rough_residual(x[:, None])[:, 0]
    J0 = fd_jacobian(_rough_residual, x, r0, (np.full(2, -1.0), np.full(2, 1.0)))
    smooth = T**2
    assert np.linalg.norm(J0[:, 1] - smooth) > 0.5 * np.linalg.norm(smooth)  # spoilt
    J, factor = rough_columns(_rough_residual, x, r0, J0, (np.full(2, -1.0), np.full(2, 1.0)))
    assert factor.tolist() == [1.0, 100.0]
    np.testing.assert_array_equal(J[:, 0], J0[:, 0])  # a stable column is left as it was
    assert np.linalg.norm(J[:, 1] - smooth) < 0.1 * np.linalg.norm(smooth)


def test_compute_confidence_says_which_columns_took_the_larger_step():
    x = np.array([0.2, 0.3])
    bounds = (np.full(2, -1.0), np.full(2, 1.0))
    r0 = _rough_residual(x[:, None])[:, 0]
    J0 = fd_jacobian(_rough_residual, x, r0, bounds)
    names = ["damping", "friction"]

    def residual_fn(X, params):
        return _rough_residual(X)

    res = _result(x, r0 + 1e-3 * np.cos(np.arange(50)), J0, names)
    conf = compute_confidence(
        res, residual_fn, params=_params(names, x, [-1, -1], [1, 1]), method="linear"
    )
    (note,) = conf.notes
    assert note.startswith(
        "1 Jacobian column(s) used a larger finite-difference step, where the default step's "
        "column was not stable: contact or friction makes the cost rough (friction (100x))"
    )
    plain = compute_confidence(
        res, residual_fn, params=_params(names, x, [-1, -1], [1, 1]), rough=False, method="linear"
    )
    assert plain.notes == []
    # issue #31: the larger step never makes an interval narrower than the default step's
    assert np.all(conf.half_widths >= plain.half_widths)
    J_big = rough_columns(_rough_residual, x, r0, J0, bounds)[0]
    _, big = ms.calculate_intervals(res.fun, J_big)
    np.testing.assert_allclose(conf.half_widths, np.maximum(big, plain.half_widths))


# -- 6. an unconverged fit is flagged -----------------------------------------------------------
def test_an_unconverged_fit_keeps_its_caveat_first():
    rng = np.random.default_rng(5)
    J = rng.standard_normal((40, 2))
    conf = compute_confidence(_result([1.0, 2.0], 0.1 * rng.standard_normal(40), J, "ab", False))
    assert not conf.converged
    assert conf.caveats()[0].startswith("the fit did not converge")
    assert conf.to_dict()["converged"] is False


def test_an_unknown_method_is_refused():
    res = _result([1.0], [0.1, -0.1, 0.2], [[1.0], [2.0], [3.0]], ["a"])
    with pytest.raises(
        ValueError, match=r"method must be one of \['auto', 'linear', 'hac', 'bootstrap'\]"
    ):
        compute_confidence(res, None, method="jackknife")


def test_a_bound_member_of_a_collinear_pair_does_not_pin_its_partner():
    """The UR5e case: the shoulder mass 2.1e-8 above its bound, its column nearly the pan
    armature's. Held at the bound, the armature alone would get a zero-width interval that
    has absorbed the mass's error; the pair's caveat keeps it infinite."""
    J, names = _collinear_problem()
    x = np.array([2.1e-8, 0.3, 0.1])
    params = _params(names, x, [0, 0, 0], [10, 10, 10])
    conf = compute_confidence(_result(x, np.zeros(200), J, names), None, params=params)
    assert conf.at_bound.tolist() == [-1, 0, 0]
    assert np.isinf(conf.half_widths[:2]).all() and conf.half_widths[2] == 0.0
    assert any(c.startswith("shoulder_mass is at its lower bound") for c in conf.caveats())
    assert any(c.startswith("shoulder_mass and pan_armature: only") for c in conf.caveats())


def test_a_column_without_effect_or_at_round_off_is_not_rough():
    t = T[:, None]

    def residual(X):
        # θ1 has no effect; θ2 one at the round-off of the residual (1e-300 of θ0's)
        return t * X[0] - 0.5 * t + 0.0 * X[1] + 1e-300 * X[2]

    x = np.array([0.2, 0.3, 0.4])
    bounds = (np.full(3, -1.0), np.full(3, 1.0))
    r0 = residual(x[:, None])[:, 0]
    J0 = fd_jacobian(residual, x, r0, bounds)
    calls = []
    J, factor = rough_columns(lambda X: calls.append(X.shape) or residual(X), x, r0, J0, bounds)
    assert factor.tolist() == [1.0, 1.0, 1.0]
    np.testing.assert_array_equal(J, J0)
    assert calls == [(3, 3)]  # one batch at the larger step; the residual at x is given


def test_a_column_stable_at_no_step_is_said_to_be_rough_and_not_called_collinear():
    t = T[:, None]

    def residual_fn(X, params):
        # θ1 and θ2 both make the same contact at any step up from here: a jump that no
        # step size averages out
        chatter = 0.1 * (X[1] + X[2] > 0.3 + 0.1)
        return t * X[0] + t**2 * (X[1] + chatter) + np.cos(3 * t) * X[2] - 0.5 * t

    names = ["damping", "friction", "stiction"]
    x = np.array([0.2, 0.3, 0.1])
    bounds = (np.full(3, -1.0), np.full(3, 1.0))
    r0 = residual_fn(x[:, None], None)[:, 0]
    J0 = fd_jacobian(lambda X: residual_fn(X, None), x, r0, bounds)
    res = _result(x, r0, J0, names)
    conf = compute_confidence(
        res, residual_fn, params=_params(names, x, [-1] * 3, [1] * 3), method="linear"
    )
    assert conf.notes[0].startswith("2 Jacobian column(s) used a larger finite-difference step")
    assert conf.notes[1] == (
        "2 of them agreed at no step tried (up to 10000x): the cost is step-like there at every "
        "scale and their intervals are rough (friction, stiction)"
    )
    # both columns are the chatter's jump over the step: alike, but no collinearity is named
    assert near_collinear(conf_jacobian(residual_fn, x, J0, bounds), names, x)
    assert len(conf.notes) == 2


def conf_jacobian(residual_fn, x, J0, bounds):
    """The Jacobian compute_confidence uses (rough columns re-stepped)."""
    fn = lambda X: residual_fn(X, None)  # noqa: E731
    return rough_columns(fn, x, fn(x[:, None])[:, 0], J0, bounds)[0]


def test_many_parameters_at_bounds_make_one_caveat():
    from mjsysid.fit.confidence import Confidence

    names = [f"w#{k}/qvel0" for k in range(6)] + ["mass"]
    side = np.array([1, -1, 1, 1, -1, 1, 0])
    conf = Confidence(names, np.zeros(7), np.full(7, np.inf), np.eye(7), 0.05, at_bound=side)
    assert conf.caveats() == [
        "6 parameters are at a bound (w#0/qvel0, w#1/qvel0, w#2/qvel0 and 3 more; the table "
        "marks them): their intervals are bound-limited (not given), and the others' are "
        "computed with them free (which can only widen them)"
    ]
    few = Confidence(names[:2], np.zeros(2), np.full(2, np.inf), np.eye(2), 0.05, at_bound=side[:2])
    assert [c.split(":")[0] for c in few.caveats()] == [
        "w#0/qvel0 is at its upper bound",
        "w#1/qvel0 is at its lower bound",
    ]
