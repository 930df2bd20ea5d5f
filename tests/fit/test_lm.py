"""The Levenberg-Marquardt engine with secant updates (``mjsysid.fit.lm``), on analytic problems."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

from mjsysid.fit.jacobian import fd_jacobian
from mjsysid.fit.lm import LMOptions, levenberg_marquardt

T = np.linspace(0.0, 4.0, 60)


def model(x: np.ndarray) -> np.ndarray:
    """``(p, k) -> (60, k)``: a damped oscillation ``a·exp(−b t)·cos(ω t) + c``."""
    a, b, w, c = (x[i][None, :] for i in range(4))
    return a * np.exp(-b * T[:, None]) * np.cos(w * T[:, None]) + c


TRUTH = np.array([1.5, 0.7, 2.2, 0.3])
X0 = np.array([1.0, 0.4, 2.0, 0.0])


class Problem:
    """Counts evaluations and records where finite-difference Jacobians were taken."""

    def __init__(self, y: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]) -> None:
        self.y, self.bounds = y, bounds
        self.nfev = 0
        self.batches: list[int] = []
        self.jac_at: list[np.ndarray] = []

    def residual(self, X: np.ndarray) -> np.ndarray:
        self.nfev += X.shape[1]
        self.batches.append(X.shape[1])
        return model(X) - self.y[:, None]

    def jacobian(self, x: np.ndarray, r: np.ndarray) -> np.ndarray:
        self.jac_at.append(x.copy())
        return fd_jacobian(self.residual, x, r, self.bounds)

    def run(self, x0: np.ndarray = X0, **options: object):
        r0 = self.residual(x0[:, None])[:, 0]
        J0 = self.jacobian(x0, r0)
        self.jac_at.clear()
        return levenberg_marquardt(
            self.residual, self.jacobian, x0, r0, J0, self.bounds, LMOptions(**options)
        )


WIDE = (np.full(4, -10.0), np.full(4, 10.0))


def _scipy(y: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    res = scipy.optimize.least_squares(
        lambda x: model(x[:, None])[:, 0] - y, X0, bounds=bounds, xtol=1e-15, ftol=1e-15, gtol=1e-15
    )
    return res.x


@pytest.mark.parametrize("secant", [True, False])
def test_recovers_truth_from_exact_data(secant):
    prob = Problem(model(TRUTH[:, None])[:, 0], WIDE)
    res = prob.run(secant=secant)
    assert res.status in ("gtol", "xtol")
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-8)
    assert res.cost < 1e-16  # limited by the finite-difference Jacobian (gtol 1e-8)
    assert (res.nsecant > 0) == secant


def test_secant_phase_saves_evaluations_and_converges_on_a_fresh_jacobian():
    y = model(TRUTH[:, None])[:, 0]
    with_secant, without = Problem(y, WIDE), Problem(y, WIDE)
    a, b = with_secant.run(secant=True), without.run(secant=False)
    assert with_secant.nfev < without.nfev
    assert a.njev < b.njev
    np.testing.assert_allclose(a.x, b.x, rtol=1e-8)
    # the convergence test used a finite-difference Jacobian at the final point
    np.testing.assert_array_equal(with_secant.jac_at[-1], a.x)


def test_a_stop_taken_unconfirmed_saves_the_last_finite_difference_jacobian():
    """``confirm_stop=False`` (an early horizon stage): a stop found on a Broyden update ends
    the fit there, and a step the update does not stop on still gets its finite-difference
    Jacobian; the point reached is the confirmed run's."""
    y = model(TRUTH[:, None])[:, 0]
    confirmed, unconfirmed = Problem(y, WIDE), Problem(y, WIDE)
    a, b = confirmed.run(), unconfirmed.run(confirm_stop=False)
    assert a.status == b.status == "gtol"
    assert b.njev < a.njev and unconfirmed.nfev < confirmed.nfev
    assert not any(np.array_equal(x, b.x) for x in unconfirmed.jac_at)  # no Jacobian at the end
    np.testing.assert_allclose(b.x, TRUTH, rtol=1e-7)
    np.testing.assert_allclose(b.x, a.x, rtol=1e-7)
    # the same iterations up to the stop: every step taken was a step of the confirmed run
    assert b.nit <= a.nit


def test_confirm_stop_must_be_a_bool():
    with pytest.raises(ValueError, match=r"LMOptions.confirm_stop.*True or False"):
        LMOptions(confirm_stop="no")  # type: ignore[arg-type]


def test_noisy_data_same_minimum_as_scipy():
    rng = np.random.default_rng(0)
    y = model(TRUTH[:, None])[:, 0] + 0.05 * rng.normal(size=T.size)
    res = Problem(y, WIDE).run()
    ref = _scipy(y, WIDE)
    np.testing.assert_allclose(res.x, ref, rtol=1e-6)
    assert res.cost > 1e-3  # a true least-squares minimum, not a zero residual


def test_active_bound_same_solution_as_scipy():
    y = model(TRUTH[:, None])[:, 0]
    bounds = (np.array([0.0, 0.0, 0.0, -1.0]), np.array([5.0, 0.5, 5.0, 1.0]))  # b* = 0.7 > 0.5
    res = Problem(y, bounds).run()
    ref = _scipy(y, bounds)
    assert res.x[1] == 0.5
    np.testing.assert_allclose(res.x, ref, rtol=1e-6, atol=1e-9)
    assert np.all(res.x >= bounds[0]) and np.all(res.x <= bounds[1])


def test_infinite_bounds():
    y = model(TRUTH[:, None])[:, 0]
    inf = (np.full(4, -np.inf), np.full(4, np.inf))
    np.testing.assert_allclose(Problem(y, inf).run().x, TRUTH, rtol=1e-8)


def test_batched_trial_steps():
    y = model(TRUTH[:, None])[:, 0]
    prob = Problem(y, WIDE)
    res = prob.run(trial_steps=3)
    np.testing.assert_allclose(res.x, TRUTH, rtol=1e-8)
    assert 3 in prob.batches  # three damping values in one call


def test_no_acceptable_step_is_reported():
    y = model(TRUTH[:, None])[:, 0]
    prob = Problem(y, WIDE)
    finite = prob.residual

    def nan_away_from_start(X: np.ndarray) -> np.ndarray:
        R = finite(X)
        R[:, np.any(X != X0[:, None], axis=0) & (X.shape[1] == 1)] = np.nan
        return R

    prob.residual = nan_away_from_start  # type: ignore[method-assign]
    res = prob.run()
    assert res.status == "no_improvement" and res.nit == 0
    np.testing.assert_array_equal(res.x, X0)


def test_max_iters_and_callback():
    y = model(TRUTH[:, None])[:, 0]
    seen: list[tuple[int, float]] = []
    prob = Problem(y, WIDE)
    r0 = prob.residual(X0[:, None])[:, 0]
    res = levenberg_marquardt(
        prob.residual,
        prob.jacobian,
        X0,
        r0,
        prob.jacobian(X0, r0),
        WIDE,
        LMOptions(max_iters=2),
        lambda it, x, cost: seen.append((it, cost)),
    )
    assert res.status == "max_iters" and res.nit == 2
    assert [s[0] for s in seen] == [1, 2] and seen[1][1] == res.cost < seen[0][1]

    class Stop(Exception):
        pass

    def stop(it: int, x: np.ndarray, cost: float) -> None:
        raise Stop

    with pytest.raises(Stop):
        levenberg_marquardt(
            prob.residual, prob.jacobian, X0, r0, prob.jacobian(X0, r0), WIDE, None, stop
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"xtol": -1.0}, "LMOptions.xtol must be a finite number >= 0, got -1.0"),
        ({"mu_min": 0.0}, r"LMOptions.mu_min, mu_max must be 0 < mu_min < mu_max < inf"),
        ({"mu_factor": 1.0}, "LMOptions.mu_factor must be a finite number > 1, got 1.0"),
        ({"trial_steps": 0}, "LMOptions.trial_steps must be an integer >= 1, got 0"),
        ({"max_iters": 1.5}, "LMOptions.max_iters must be an integer >= 0, got 1.5"),
        ({"secant": "no"}, "LMOptions.secant must be True or False, got 'no'"),
    ],
)
def test_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LMOptions(**kwargs)


def test_linear_problem_exact_zero_residual():
    """A linear residual with an exact solution: one Gauss-Newton step, then a cost of zero."""
    A = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # exact arithmetic: r ends exactly 0
    b = A @ np.array([2.0, -1.0])

    def residual(X: np.ndarray) -> np.ndarray:
        return A @ X - b[:, None]

    def jacobian(x: np.ndarray, r: np.ndarray) -> np.ndarray:
        return A.copy()

    x0 = np.zeros(2)
    res = levenberg_marquardt(
        residual,
        jacobian,
        x0,
        residual(x0[:, None])[:, 0],
        A.copy(),
        (np.full(2, -5.0), np.full(2, 5.0)),
    )
    assert res.status == "gtol" and res.nit == 1
    np.testing.assert_array_equal(res.x, [2.0, -1.0])
    assert res.cost == 0.0


@settings(max_examples=20, deadline=None)
@given(
    truth=st.tuples(
        st.floats(0.5, 3.0), st.floats(0.2, 1.5), st.floats(1.0, 3.0), st.floats(-1.0, 1.0)
    ),
    noise=st.sampled_from([0.0, 0.02]),
    seed=st.integers(0, 1000),
)
def test_same_minimum_as_scipy_property(truth, noise, seed):
    """On random instances lm ends where scipy's trust-region method ends (or lower)."""
    rng = np.random.default_rng(seed)
    y = model(np.array(truth)[:, None])[:, 0] + noise * rng.normal(size=T.size)
    x0 = np.array(truth) * rng.uniform(0.8, 1.2, 4)
    prob = Problem(y, WIDE)
    res = prob.run(x0=x0)
    ref = scipy.optimize.least_squares(
        lambda x: model(x[:, None])[:, 0] - y, x0, bounds=WIDE, xtol=1e-15, ftol=1e-15, gtol=1e-15
    )
    assert res.status in ("gtol", "xtol")
    cost0 = 0.5 * float(np.sum((model(x0[:, None])[:, 0] - y) ** 2))
    # gtol = 1e-8 on the scaled gradient: an exact fit ends below ~1e-16, scipy (told 1e-15) lower
    assert res.cost <= ref.cost * (1 + 1e-6) + 1e-14 * cost0


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"x0": np.array([np.nan, 0.4, 2.0, 0.0])}, r"x0 must be a non-empty finite 1-D array"),
        ({"J0": np.zeros((3, 4))}, r"J0 must be shape \(60, 4\) \(residuals x parameters\), got"),
        ({"x0": np.array([11.0, 0.4, 2.0, 0.0])}, r"x0 must be within bounds"),
        ({"bounds": (np.zeros(4),)}, r"bounds must be a pair \(lower, upper\)"),
    ],
)
def test_bad_inputs_are_named(change, match):
    prob = Problem(model(TRUTH[:, None])[:, 0], WIDE)
    args = {"x0": X0, "J0": None, "bounds": WIDE}
    args.update(change)
    r0 = prob.residual(X0[:, None])[:, 0]
    J0 = args["J0"] if args["J0"] is not None else prob.jacobian(X0, r0)
    with pytest.raises(ValueError, match=match):
        levenberg_marquardt(prob.residual, prob.jacobian, args["x0"], r0, J0, args["bounds"])


@pytest.mark.parametrize("order", ["C", "F"])
def test_broyden_update_in_place_matches_the_formula(order):
    from mjsysid.fit.lm import _broyden

    rng = np.random.default_rng(2)
    J0 = rng.normal(size=(40, 5))
    s, dr = rng.normal(size=5), rng.normal(size=40)
    want = J0 + np.outer(dr - J0 @ s, s) / (s @ s)  # J₊ s = Δr, unchanged orthogonally to s
    J = np.array(J0, order=order)
    JtJ = _broyden(J, J0.T @ J0, s, dr)
    np.testing.assert_allclose(J, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(JtJ, want.T @ want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(J @ s, dr, rtol=1e-12, atol=1e-12)
    J = np.array(J0, order=order)
    np.testing.assert_allclose(_broyden(J, None, s, dr), want.T @ want, rtol=1e-12, atol=1e-12)


def test_the_callers_jacobians_are_never_written():
    """Broyden updates work on a copy: J0 and every finite-difference Jacobian handed in
    (which optimize keeps for its result) stay as they were."""
    prob = Problem(model(TRUTH[:, None])[:, 0], WIDE)
    handed: list[tuple[np.ndarray, np.ndarray]] = []
    jacobian = prob.jacobian

    def keep(x, r):
        J = jacobian(x, r)
        handed.append((J, J.copy()))
        return J

    prob.jacobian = keep
    res = prob.run()
    assert res.nsecant > 0 and len(handed) >= 2  # secant steps happened after handed ones
    for J, before in handed:
        np.testing.assert_array_equal(J, before)


@pytest.mark.parametrize("x0", [[3.0, 2.0, 3.0, -1.0], [1.0, 0.1, 3.5, 0.0]])
def test_rejected_steps_are_not_retried_almost_unchanged(monkeypatch, x0):
    """After a rejection the next damping must shorten the step by >= 3 %; from μ = 0 the
    first rungs of the damping ladder hardly change it, and each would cost an evaluation."""
    import mjsysid.fit.lm as lm_module

    y = model(TRUTH[:, None])[:, 0]
    skipping, retrying = Problem(y, WIDE), Problem(y, WIDE)
    a = skipping.run(np.array(x0))
    monkeypatch.setattr(lm_module, "_SHORTER", 1.0)  # every rung of the ladder evaluated
    b = retrying.run(np.array(x0))
    np.testing.assert_allclose(a.x, TRUTH, rtol=1e-8)
    np.testing.assert_allclose(b.x, TRUTH, rtol=1e-8)
    assert skipping.nfev < retrying.nfev


def test_damping_after_an_accepted_step():
    from mjsysid.fit.lm import _damping_after

    opt = LMOptions(mu_factor=4.0, mu_min=1e-6)
    assert _damping_after(16.0, 0.9, True, opt) == 1.0  # good step at once: mu / 16
    assert _damping_after(16.0, 0.9, False, opt) == 4.0  # after rejections: only mu / 4
    assert _damping_after(1e-6, 0.9, True, opt) == 0.0  # below mu_min: undamped
    assert _damping_after(1.0, 0.1, True, opt) == 4.0  # poor model: more damping
    assert _damping_after(0.0, 0.1, True, opt) == 1e-6
    assert _damping_after(2.0, 0.5, False, opt) == 2.0


def _cliff(X: np.ndarray) -> np.ndarray:
    """``(1, k) -> (2, k)``: a residual that pulls ``x`` to 2 and jumps by 10 at ``x = 1``
    (a contact switching on): from below 1 every Gauss-Newton step crosses the cliff."""
    x = X[0][None, :]
    return np.concatenate([x - 2.0, 10.0 * (x > 1.0)], axis=0)


def _run_cliff(monkeypatch: pytest.MonkeyPatch | None = None):
    if monkeypatch is not None:
        monkeypatch.setattr("mjsysid.fit.lm._STALL_ITERS", 10**9)  # the rule off
    bounds = (np.array([-5.0]), np.array([5.0]))
    x0 = np.array([0.0])
    r0 = _cliff(x0[:, None])[:, 0]

    def jac(x, r):
        return fd_jacobian(_cliff, x, r, bounds)

    return levenberg_marquardt(_cliff, jac, x0, r0, jac(x0, r0), bounds, LMOptions())


def test_a_stalled_fit_on_a_non_smooth_cost_stops(monkeypatch):
    res = _run_cliff()
    assert res.status == "stalled" and 0.99 < res.x[0] <= 1.0
    # three stalled steps: accepted at a large damping, each gaining under 0.1 %
    without = _run_cliff(monkeypatch)  # it would crawl on towards the cliff
    assert without.status != "stalled" and without.nit > res.nit + 3
    assert res.cost <= without.cost * (1 + 1e-3)


def test_a_smooth_fit_never_stalls():
    for noise in (0.0, 0.05):
        y = model(TRUTH[:, None])[:, 0] + noise * np.random.default_rng(1).standard_normal(60)
        res = Problem(y, WIDE).run()
        assert res.status in ("gtol", "xtol")
