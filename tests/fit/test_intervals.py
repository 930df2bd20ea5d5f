"""Confidence intervals (calculate_intervals, compute_confidence)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

import mjsysid as ms
import mjsysid.fit.confidence
from conftest import fit_arm_masses


def test_interval_coverage_linear_gaussian():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((60, 3))
    theta = np.array([1.0, -2.0, 0.5])
    covered = 0
    for _ in range(200):
        y = A @ theta + 0.3 * rng.standard_normal(60)
        est, *_ = np.linalg.lstsq(A, y, rcond=None)
        r = A @ est - y
        _, half = ms.calculate_intervals(r, A, 0.05)
        covered += np.all(np.abs(est - theta) <= half)
    # the joint coverage of three 95 % intervals is about 0.95**3 ~ 0.86; test each one
    per = []
    rng = np.random.default_rng(1)
    for _ in range(200):
        y = A @ theta + 0.3 * rng.standard_normal(60)
        est, *_ = np.linalg.lstsq(A, y, rcond=None)
        _, half = ms.calculate_intervals(A @ est - y, A, 0.05)
        per.append(np.abs(est - theta) <= half)
    rate = np.mean(per, axis=0)
    assert np.all((rate >= 0.90) & (rate <= 0.99)), rate
    assert covered > 150


def test_known_noise_variance_coverage():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((40, 2))
    hits = []
    for _ in range(200):
        y = A @ [1.0, 2.0] + 0.1 * rng.standard_normal(40)
        est, *_ = np.linalg.lstsq(A, y, rcond=None)
        _, half = ms.calculate_intervals(A @ est - y, A, 0.05, noise_variance=0.01)
        hits.append(np.abs(est - [1.0, 2.0]) <= half)
    rate = np.mean(hits, axis=0)
    assert np.all((rate >= 0.90) & (rate <= 0.99)), rate


def test_unidentifiable_direction_only_affects_its_parameters():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((50, 2))
    J = np.column_stack([A, A[:, 1], rng.standard_normal(50)])  # params 1 and 2 are confounded
    r = 0.01 * rng.standard_normal(50)
    cov, half = ms.calculate_intervals(r, J)
    assert np.isfinite(half[0]) and np.isfinite(half[3])
    assert np.isinf(half[1]) and np.isinf(half[2])
    tval = half[0] / np.sqrt(cov[0, 0])
    np.testing.assert_allclose(half[[0, 3]], tval * np.sqrt(np.diag(cov)[[0, 3]]))  # they agree
    assert np.isnan(cov[0, 1]) and np.isinf(cov[1, 1])


def test_intervals_do_not_depend_on_parameter_units():
    """A parameter in other units (its column scaled by 1e6 or 1e-6) keeps a finite interval,
    scaled accordingly, and the others keep theirs; a column without effect is the only
    unidentifiable one (before, the eigenvalue test on the unscaled JᵀJ called the small-
    column parameters unidentifiable)."""
    rng = np.random.default_rng(5)
    J = rng.standard_normal((300, 3))
    r = 0.01 * rng.standard_normal(300)
    cov, half = ms.calculate_intervals(r, J)
    scale = np.array([1e6, 1.0, 1e-6])
    cov_s, half_s = ms.calculate_intervals(r, J * scale)
    np.testing.assert_allclose(half_s, half / scale, rtol=1e-9)
    np.testing.assert_allclose(cov_s, cov / np.outer(scale, scale), rtol=1e-9)
    _, half_z = ms.calculate_intervals(r, np.column_stack([J * scale, np.zeros(300)]))
    np.testing.assert_allclose(half_z[:3], half / scale, rtol=3e-3)  # n - p one smaller
    assert np.isinf(half_z[3])


def test_per_group_noise_keeps_coverage_when_sensors_differ():
    rng = np.random.default_rng(4)
    # a precise, informative sensor and a noisy, weakly informative one
    J = np.concatenate([3.0 + rng.random((100, 1)), 0.1 * rng.standard_normal((100, 1))])
    sigma = np.repeat([0.01, 1.0], 100)
    groups = np.repeat([0, 1], 100)
    grouped, pooled = [], []
    for _ in range(200):
        y = J[:, 0] * 2.0 + sigma * rng.standard_normal(200)
        est = float(J[:, 0] @ y / (J[:, 0] @ J[:, 0]))
        r = J[:, 0] * est - y
        grouped.append(abs(est - 2.0) <= ms.calculate_intervals(r, J, groups=groups)[1][0])
        pooled.append(abs(est - 2.0) <= ms.calculate_intervals(r, J)[1][0])
    assert 0.90 <= np.mean(grouped) <= 0.99
    assert np.mean(pooled) > 0.99  # one pooled variance is far too pessimistic here


def test_interval_errors():
    with pytest.raises(ValueError, match=r"J must be shape \(3, p\) matching residuals"):
        ms.calculate_intervals(np.zeros(3), np.zeros((4, 1)))
    with pytest.raises(ValueError, match="residuals must be more entries than parameters"):
        ms.calculate_intervals(np.zeros(2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\)"):
        ms.calculate_intervals(np.zeros(3), np.zeros((3, 1)), alpha=1.5)


_R = np.random.default_rng(0).standard_normal(50)
_J = np.random.default_rng(1).standard_normal((50, 3))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"alpha": "0.05"}, TypeError, r"alpha must be a number in \(0, 1\), got '0.05'"),
        ({"alpha": True}, TypeError, r"alpha must be a number in \(0, 1\), got True"),
        ({"alpha": np.nan}, ValueError, r"alpha must be in \(0, 1\), got nan"),
        ({"rtol": -1.0}, ValueError, r"rtol must be in \[0, 1\), got -1.0"),
        ({"rtol": np.nan}, ValueError, r"rtol must be in \[0, 1\), got nan"),
        ({"rtol": 1.0}, ValueError, r"rtol must be in \[0, 1\), got 1.0"),
        ({"rtol": "1e-10"}, TypeError, r"rtol must be a number in \[0, 1\), got '1e-10'"),
        # a known noise variance is finite and > 0: no clipping to a tiny one, no NaN widths
        ({"noise_variance": -1.0}, ValueError, r"noise_variance must be finite and > 0, got -1.0"),
        (
            {"noise_variance": 0.0},
            ValueError,
            r"noise_variance must be finite and > 0, got 0.0\. For an exact, noise-free fit "
            r"leave noise_variance out",
        ),
        ({"noise_variance": np.nan}, ValueError, r"noise_variance must be finite and > 0, got nan"),
        ({"noise_variance": np.inf}, ValueError, r"noise_variance must be finite and > 0, got inf"),
        (
            {"noise_variance": np.r_[np.ones(49), 0.0]},
            ValueError,
            r"noise_variance must be finite and > 0, got 0.0\. It is at entry 49\.",
        ),
        (
            {"noise_variance": np.ones(7)},
            ValueError,
            r"noise_variance must be a scalar or an array of shape \(50,\), got "
            r"array\(shape=\(7,\)",
        ),
        (
            {"noise_variance": "a"},
            TypeError,
            r"noise_variance must be an array of numbers, got 'a'",
        ),
        (
            {"noise_variance": 1.0, "groups": np.zeros(50)},
            ValueError,
            r"calculate_intervals takes noise_variance or groups, not both",
        ),
        ({"groups": np.zeros(10)}, ValueError, r"groups must be 50 labels, got 10"),
        ({"groups": np.zeros((5, 10))}, ValueError, r"groups must be a 1-D array of 50 labels"),
        (
            {"groups": np.r_[np.zeros(49), np.nan]},
            ValueError,
            r"groups must be labels without NaN",
        ),
    ],
)
def test_interval_argument_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ms.calculate_intervals(_R, _J, **kwargs)


@pytest.mark.parametrize(
    ("r", "J", "exc", "match"),
    [
        (
            _R,
            np.zeros((50, 0)),
            ValueError,
            r"J must have at least one column .*got shape \(50, 0\)",
        ),
        (_R.reshape(10, 5), _J, ValueError, r"residuals must be a 1-D array of shape \(n,\)"),
        (_R, np.where(_J > 2, np.nan, _J), ValueError, r"J must be finite, got nan at J\[10, 0\]"),
        (
            np.r_[_R[:-1], np.inf],
            _J,
            ValueError,
            r"residuals must be finite, got inf at residuals\[49\]",
        ),
        (["a"] * 50, _J, TypeError, r"residuals must be an array of numbers"),
    ],
)
def test_interval_array_errors(r, J, exc, match):
    with pytest.raises(exc, match=match):
        ms.calculate_intervals(r, J)


def test_exact_fit_gives_zero_width_intervals():
    """A zero residual (noise-free data, exact fit) estimates a zero variance: the identifiable
    parameters get zero-width intervals (+0.0, no NaN, no invented noise floor; before, the
    variance was clipped to 2e-308 and gave widths of 5e-155), an unidentifiable one stays
    infinite."""
    J = np.column_stack([_J, np.zeros(50)])  # the last parameter has no effect
    cov, half = ms.calculate_intervals(np.zeros(50), J)
    np.testing.assert_array_equal(half[:3], 0.0)
    assert not np.any(np.signbit(half[:3]))
    np.testing.assert_array_equal(cov[:3, :3], 0.0)
    assert np.isinf(half[3]) and np.isinf(cov[3, 3]) and np.isnan(cov[0, 3])
    # per group: an exactly fitted group adds nothing, the others keep their variance
    r = np.r_[np.zeros(25), 0.1 * _R[25:]]
    groups = np.repeat(["exact", "noisy"], 25)
    _, half_g = ms.calculate_intervals(r, _J, groups=groups)
    assert np.all(np.isfinite(half_g) & (half_g > 0))
    sigma2 = float(r[25:] @ r[25:]) / (25 * (50 - 3) / 50)
    var = np.r_[np.zeros(25), np.full(25, sigma2)]
    Hinv = np.linalg.inv(_J.T @ _J)  # full rank: the sandwich (JᵀJ)⁻¹ Jᵀ diag(σ²) J (JᵀJ)⁻¹
    cov_ref = Hinv @ (_J.T * var) @ _J @ Hinv
    tval = scipy.stats.t.ppf(0.975, 50 - 3)
    np.testing.assert_allclose(half_g, tval * np.sqrt(np.diag(cov_ref)), rtol=1e-10)


def test_group_variance_follows_the_documented_formula():
    """``σ_g² = ‖r_g‖² / (n_g − p·n_g/n)`` for every group, one-sample groups included (the
    denominator used to be raised to 1 for them, silently)."""
    groups = np.r_[np.zeros(30), np.ones(19), 2]  # the last group holds one residual
    n, p = _J.shape
    expected = np.empty(n)
    for g in np.unique(groups):
        sel = groups == g
        expected[sel] = float(_R[sel] @ _R[sel]) / (sel.sum() * (n - p) / n)
    cov_g, half_g = ms.calculate_intervals(_R, _J, groups=groups)
    cov_k, half_k = ms.calculate_intervals(_R, _J, noise_variance=expected)
    np.testing.assert_allclose(cov_g, cov_k, rtol=1e-12)
    np.testing.assert_allclose(half_g, half_k, rtol=1e-12)
    # string labels work the same
    _, half_s = ms.calculate_intervals(_R, _J, groups=groups.astype(int).astype(str))
    np.testing.assert_allclose(half_s, half_g, rtol=1e-12)


def test_noisy_fit_intervals_cover_truth(make_problem):
    _p, _params, rf, _opt, res = fit_arm_masses(make_problem, noise=0.002)
    conf = mjsysid.fit.confidence.compute_confidence(res, rf)
    assert np.all(np.abs(res.x - [1.3, 0.5]) <= conf.half_widths)
    assert np.all(conf.half_widths < 0.05)
