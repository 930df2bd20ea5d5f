"""Block bootstrap intervals (fit/bootstrap.py, compute_confidence(method="bootstrap"))."""

from __future__ import annotations

import numpy as np
import pytest

import mjsysid as ms
from conftest import linear_result
from mjsysid.fit.confidence import block_bootstrap, block_labels, compute_confidence
from mjsysid.fit.result import OptimizeResult

BLOCKS, ROWS = 20, 50
T = np.tile(np.linspace(0.0, 1.0, ROWS), BLOCKS)
A = np.column_stack([np.ones_like(T), T])  # offset and slope, every block alike
THETA = np.array([0.5, -1.0])
LABELS = np.repeat(np.arange(BLOCKS), ROWS)


def _ar1(rng: np.random.Generator, rho: float = 0.95, sigma: float = 0.1) -> np.ndarray:
    """Noise correlated within each block (AR(1), ``ρ``), independent between blocks."""
    e = np.empty(BLOCKS * ROWS)
    for b in range(BLOCKS):
        w = rng.standard_normal(ROWS) * sigma * np.sqrt(1 - rho**2)
        x = rng.standard_normal() * sigma
        for k in range(ROWS):
            x = rho * x + w[k] if k else x
            e[b * ROWS + k] = x
    return e


def _fit(y: np.ndarray) -> tuple[OptimizeResult, ms.ParameterDict, object]:
    est = np.linalg.lstsq(A, y, rcond=None)[0]

    def residual_fn(X, params):
        return A @ X - y[:, None]

    r = A @ est - y
    res = linear_result(est, r, A, ["offset", "slope"])
    params = ms.ParameterDict(
        [ms.Parameter("offset", est[0], -10, 10), ms.Parameter("slope", est[1], -10, 10)]
    )
    return res, params, residual_fn


def test_the_block_bootstrap_recovers_coverage_under_correlated_noise():
    rng = np.random.default_rng(0)
    linear, boot = [], []
    for _ in range(60):
        res, params, rf = _fit(A @ THETA + _ar1(rng))
        lin = compute_confidence(res, rf, params=params, method="linear")
        bs = compute_confidence(
            res, rf, params=params, method="bootstrap", draws=200, seed=1, blocks=LABELS
        )
        linear.append(np.abs(lin.values - THETA) <= lin.half_widths)
        ends = bs.ends()
        boot.append((ends[:, 0] <= THETA) & (THETA <= ends[:, 1]))
    linear_rate, boot_rate = np.mean(linear, axis=0), np.mean(boot, axis=0)
    # the linearised intervals take 1000 correlated rows for 1000 independent ones
    assert np.all(linear_rate < 0.6), linear_rate
    assert np.all(boot_rate >= 0.8), boot_rate


def test_the_bootstrap_result_says_what_it_is():
    rng = np.random.default_rng(1)
    res, params, rf = _fit(A @ THETA + _ar1(rng))
    conf = compute_confidence(res, rf, params=params, method="bootstrap", draws=50, blocks=LABELS)
    assert conf.method == "bootstrap" and conf.to_dict()["method"] == "bootstrap"
    assert conf.notes[-1] == (
        "bootstrap: 50 draws over 20 blocks (sequences or windows) resampled with replacement; "
        "percentile intervals"
    )
    lower, upper = conf.ends().T
    assert np.all(lower < conf.values) and np.all(conf.values < upper)
    np.testing.assert_allclose(
        conf.half_widths, np.maximum(upper - conf.values, conf.values - lower)
    )
    row = conf.to_dict()["parameters"][0]
    assert row["lower"] == pytest.approx(lower[0]) and row["upper"] == pytest.approx(upper[0])
    again = compute_confidence(res, rf, params=params, method="bootstrap", draws=50, blocks=LABELS)
    np.testing.assert_array_equal(again.ends(), conf.ends())  # seeded


def test_more_refit_steps_agree_on_a_linear_problem():
    rng = np.random.default_rng(2)
    res, params, rf = _fit(A @ THETA + _ar1(rng))
    one = compute_confidence(res, rf, params=params, method="bootstrap", draws=20, blocks=LABELS)
    two = compute_confidence(
        res, rf, params=params, method="bootstrap", draws=20, blocks=LABELS, steps=2
    )
    np.testing.assert_allclose(two.ends(), one.ends(), rtol=1e-5, atol=1e-7)


def test_the_bootstrap_needs_two_blocks_and_params():
    rng = np.random.default_rng(3)
    res, params, rf = _fit(A @ THETA + _ar1(rng))
    with pytest.raises(ValueError, match=r"the bootstrap's blocks must be at least 2 "):
        compute_confidence(res, rf, params=params, method="bootstrap", blocks=np.zeros(T.size, int))
    with pytest.raises(ValueError, match=r"needs the residual rows' blocks"):
        compute_confidence(res, rf, params=params, method="bootstrap")
    with pytest.raises(ValueError, match=r"method='bootstrap'\) needs params"):
        compute_confidence(res, rf, method="bootstrap", blocks=LABELS)
    with pytest.raises(ValueError, match=r"draws must be an integer >= 2, got 1"):
        block_bootstrap(None, res.x, res.fun, res.jac, params.get_bounds(), LABELS, draws=1)


def test_block_labels_follow_the_residual_blocks():
    class WithOffsets:  # a DescribedResidualFn
        block_offsets = np.array([0, 3, 5])
        last_divergence = ()

        def describe_index(self, i: int) -> str:
            return f"row {i}"

        def signal_groups(self) -> None:
            return None

        def check_params(self, params: object) -> None:
            return None

    assert block_labels(WithOffsets(), 7).tolist() == [0, 0, 0, 1, 1, -1, -1]
    assert block_labels(object(), 7) is None  # a residual that does not say


def test_a_parameter_of_one_block_keeps_its_linearised_interval():
    """A window's initial state acts on its own rows only: resampling windows cannot show its
    spread (a window drawn twice fits it as once), so it keeps the linearised interval."""
    rng = np.random.default_rng(4)
    res, params, _ = _fit(A @ THETA + _ar1(rng))
    local = np.where(LABELS == 0, np.exp(-5 * T), 0.0)
    J = np.column_stack([A, local])
    res.jac, res.x = J, np.append(res.x, 0.0)
    res.parameter_names = ["offset", "slope", "seq0/qvel0"]
    params.add(ms.Parameter("seq0/qvel0", 0.0, -1, 1))
    lin = compute_confidence(res, None, params=params)
    bs = compute_confidence(res, None, params=params, method="bootstrap", draws=50, blocks=LABELS)
    np.testing.assert_allclose(bs.ends()[2], lin.ends()[2])
    assert bs.half_widths[2] == pytest.approx(lin.half_widths[2])
    assert bs.notes[-1].endswith(
        "; 1 parameter(s) seen by one block only (window starts) keep their linearised intervals"
    )
