"""Intervals that say when they cannot be trusted (issue #31 item 4): a whiteness figure
(Durbin-Watson per signal) on every fit, Newey-West (HAC) intervals by default when the
residual is not white, and the caveat that names the signals."""

from __future__ import annotations

import numpy as np
import pytest

import mjsysid as ms
from conftest import linear_result
from mjsysid.fit.confidence import compute_confidence
from mjsysid.fit.whiteness import (
    bandwidth,
    durbin_watson,
    hac_score_covariance,
    residual_series,
    whiteness,
)

STEPS = 400
SIGNALS = ("pos", "vel")
TIME = np.linspace(0.0, 1.0, STEPS)
# two signals per time step, interleaved as the built-in residual lays them out
A = np.zeros((2 * STEPS, 2))
A[0::2, 0], A[0::2, 1] = 1.0, TIME  # pos: offset + slope·t
A[1::2, 1] = 1.0  # vel: slope
THETA = np.array([0.5, -1.0])


class _Described:
    """A residual that says where its rows come from (DescribedResidualFn), one block."""

    def __init__(self, y: np.ndarray) -> None:
        self.y = y
        self.last_divergence: list[str] = []

    def __call__(self, X: np.ndarray, params: object) -> np.ndarray:
        return A @ X - self.y[:, None]

    @property
    def block_offsets(self) -> np.ndarray:
        return np.array([0, 2 * STEPS])

    def describe_index(self, i: int) -> str:
        return f"arm/run, signal {SIGNALS[i % 2]!r} at t={TIME[i // 2]:.6g} s"

    def signal_groups(self) -> np.ndarray:
        return np.tile([0, 1], STEPS)

    def check_params(self, params: object) -> None:
        return None


def _ar1(rng: np.random.Generator, n: int, rho: float, sigma: float = 0.1) -> np.ndarray:
    e = np.empty(n)
    e[0] = rng.standard_normal() * sigma
    w = rng.standard_normal(n) * sigma * np.sqrt(1 - rho**2)
    for k in range(1, n):
        e[k] = rho * e[k - 1] + w[k]
    return e


def _fit(noise: np.ndarray):
    y = A @ THETA + noise
    est = np.linalg.lstsq(A, y, rcond=None)[0]
    rf = _Described(y)
    res = linear_result(est, A @ est - y, A, ["offset", "slope"])
    params = ms.ParameterDict(
        [ms.Parameter("offset", est[0], -10, 10), ms.Parameter("slope", est[1], -10, 10)]
    )
    return res, rf, params


def _coloured(rng: np.random.Generator, rho: float = 0.97) -> np.ndarray:
    """Correlated noise on ``pos``, white on ``vel``."""
    noise = np.empty(2 * STEPS)
    noise[0::2] = _ar1(rng, STEPS, rho)
    noise[1::2] = 0.1 * rng.standard_normal(STEPS)
    return noise


def test_durbin_watson_is_two_for_white_noise_and_small_for_a_smooth_misfit():
    rng = np.random.default_rng(0)
    assert durbin_watson(rng.standard_normal(20000)) == pytest.approx(2.0, abs=0.05)
    assert durbin_watson(_ar1(rng, 20000, 0.9)) == pytest.approx(2 * (1 - 0.9), abs=0.02)
    assert durbin_watson(np.sin(np.linspace(0, 3, 1000))) < 1e-3
    assert np.isnan(durbin_watson(np.zeros(10)))


def test_the_layout_finds_each_signal_in_time_order():
    rf = _Described(np.zeros(2 * STEPS))
    layout = residual_series(rf, 2 * STEPS)
    assert [b.shape for b in layout.blocks] == [(STEPS, 2)]
    assert layout.names == {0: "pos", 1: "vel"}
    np.testing.assert_array_equal(layout.blocks[0][:3, 0], [0, 2, 4])


def test_white_and_coloured_residuals_on_a_linear_problem():
    rng = np.random.default_rng(1)
    white_res, rf, params = _fit(0.1 * rng.standard_normal(2 * STEPS))
    white = compute_confidence(white_res, rf, params=params)
    assert white.method == "linear" and white.whiteness.white
    assert all(abs(d - 2) < 0.3 for d in white.whiteness.durbin_watson.values())
    assert not any("cannot reproduce" in c for c in white.caveats())

    res, rf, params = _fit(_coloured(rng))
    auto = compute_confidence(res, rf, params=params)
    linear = compute_confidence(res, rf, params=params, method="linear")
    assert auto.method == "hac" and not auto.whiteness.white
    dw = auto.whiteness.durbin_watson
    assert dw["pos"] < 0.2 and dw["vel"] > 1.7
    # HAC wider: much wider for the offset, which only the correlated signal sees
    assert auto.half_widths[0] > 2.0 * linear.half_widths[0]
    assert auto.half_widths[1] >= linear.half_widths[1]
    (caveat,) = [c for c in auto.caveats() if "cannot reproduce" in c]
    assert caveat.startswith(
        "the model cannot reproduce the data: the residuals are not white (Durbin-Watson pos "
    )
    assert "vel" not in caveat.split("(2 is white)")[0]  # only the signal that is not white
    assert "Newey-West (HAC) sandwich" in caveat
    d = auto.to_dict()
    assert d["whiteness"]["white"] is False and d["whiteness"]["durbin_watson"]["pos"] < 0.2
    # asked for linear, the caveat says they are too narrow
    (lin_caveat,) = [c for c in linear.caveats() if "cannot reproduce" in c]
    assert "too narrow" in lin_caveat


def test_hac_intervals_cover_under_correlated_noise():
    rng = np.random.default_rng(2)
    hits_auto, hits_linear = [], []
    for _ in range(40):
        res, rf, params = _fit(_coloured(rng, rho=0.95))
        auto = compute_confidence(res, rf, params=params)
        lin = compute_confidence(res, rf, params=params, method="linear")
        hits_auto.append(np.abs(auto.values - THETA) <= auto.half_widths)
        hits_linear.append(np.abs(lin.values - THETA) <= lin.half_widths)
    assert np.all(np.mean(hits_linear, axis=0) < 0.75)
    assert np.all(np.mean(hits_auto, axis=0) >= 0.85)


def test_hac_with_one_lag_is_whites_estimate_and_the_bartlett_kernel_otherwise():
    rng = np.random.default_rng(3)
    n = 3000
    J = rng.standard_normal((n, 2))
    r = _ar1(rng, n, 0.8)
    layout = residual_series(None, n)
    g = J * r[:, None]
    S1, L1 = hac_score_covariance(r, J, layout, lags=1)
    assert L1 == 1
    np.testing.assert_allclose(S1, g.T @ g)
    L = 20
    S, _ = hac_score_covariance(r, J, layout, lags=L)
    ref = g.T @ g
    for lag in range(1, L):
        gamma = g[lag:].T @ g[:-lag]
        ref += (1 - lag / L) * (gamma + gamma.T)
    # equal up to the windows lost at the end of the series
    np.testing.assert_allclose(S, ref, rtol=0.02, atol=0.02 * float(np.max(np.diag(ref))))
    assert bandwidth(0.0, 1000) == 1 and bandwidth(0.95, 1000) > bandwidth(0.5, 1000)


def test_whiteness_of_several_blocks_pools_each_signal():
    rng = np.random.default_rng(4)

    class _Two(_Described):
        @property
        def block_offsets(self) -> np.ndarray:
            return np.array([0, STEPS, 2 * STEPS])

    rf = _Two(np.zeros(2 * STEPS))
    layout = residual_series(rf, 2 * STEPS)
    assert len(layout.blocks) == 2
    w = whiteness(rng.standard_normal(2 * STEPS), layout)
    assert w.white and set(w.durbin_watson) == {"pos", "vel"} and w.samples == STEPS
