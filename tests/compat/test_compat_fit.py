"""Drop-in (#16): optimize and calculate_intervals as ``mujoco.sysid`` users call them.

A peer-style residual function returns ``(residuals, predictions, records)`` with
``residuals`` a list of arrays, one per sequence.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

import mjsysid.compat as sysid


def _params() -> sysid.ParameterDict:
    return sysid.ParameterDict(
        [sysid.Parameter("a", 1.0, 0.0, 3.0), sysid.Parameter("b", 0.0, -2, 2)]
    )


def _peer_style(x: np.ndarray, params: sysid.ParameterDict) -> tuple:
    r = np.array([x[0] - 1.5, 10 * (x[1] + 0.5), x[0] * x[1] + 0.75])
    return [r[:2], r[2:]], None, None


def _ill(x: np.ndarray, params: sysid.ParameterDict) -> tuple:
    return [np.array([x[0] + x[1] - 1.0, 1e-7 * (x[0] - x[1])])], None, None


@pytest.mark.parametrize("backend", ["mujoco", "scipy", "scipy_parallel_fd"])
def test_peer_style_residual_and_result(backend: str) -> None:
    params = _params()
    opt, res = sysid.optimize(params, _peer_style, optimizer=backend, verbose=False)
    np.testing.assert_allclose(opt.as_vector(), [1.5, -0.5], atol=1e-6)
    np.testing.assert_array_equal(params.as_vector(), [1.0, 0.0])  # input untouched
    for key in ("x", "jac", "grad"):  # a scipy OptimizeResult: attributes and keys
        assert key in res
        assert getattr(res, key) is res[key]
    np.testing.assert_allclose(res.x, [1.5, -0.5], atol=1e-6)


def test_verbose_is_the_fourth_positional() -> None:
    opt, _ = sysid.optimize(_params(), _peer_style, "scipy", False)
    np.testing.assert_allclose(opt.as_vector(), [1.5, -0.5], atol=1e-6)


def test_backend_options_pass_through() -> None:
    opt, _ = sysid.optimize(
        _params(), _peer_style, optimizer="scipy", verbose=False, loss="soft_l1"
    )
    np.testing.assert_allclose(opt.as_vector(), [1.5, -0.5], atol=1e-5)
    for backend in ("mujoco", "scipy"):
        opt, _ = sysid.optimize(
            _params(), _peer_style, optimizer=backend, verbose=False, x_scale="jac"
        )
        np.testing.assert_allclose(opt.as_vector(), [1.5, -0.5], atol=1e-6)
    opt, _ = sysid.optimize(_params(), _peer_style, optimizer="mujoco", verbose=False, max_iters=3)
    assert opt.as_vector().shape == (2,)


def _conditioning_messages(fn, caplog: pytest.LogCaptureFixture) -> list[str]:
    """What ``check_conditioning`` reported, as a logged warning or a Python warning."""
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        sysid.optimize(_params(), fn, optimizer="scipy", verbose=False, check_conditioning=True)
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return logged + [str(w.message) for w in caught]


def test_check_conditioning_warns_on_an_ill_conditioned_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The peer: "cond(J^T J) ~ 1.0e+14 at the starting point; the problem may be
    # ill-conditioned. Consider x_scale='jac' or regularizing."
    messages = _conditioning_messages(_ill, caplog)
    assert any("cond" in m and "x_scale" in m for m in messages), messages


def test_check_conditioning_quiet_when_well_conditioned(caplog: pytest.LogCaptureFixture) -> None:
    assert not [m for m in _conditioning_messages(_peer_style, caplog) if "cond" in m]


def test_calculate_intervals_positional() -> None:
    J = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [0.5, -1.0]])
    r = np.array([0.1, -0.2, 0.05, 0.1])
    cov, half = sysid.calculate_intervals(r, J)
    np.testing.assert_allclose(half, [0.5118338355183469, 0.3134329325278908], rtol=1e-12)
    np.testing.assert_allclose(cov[0], [0.01415094339622642, -0.0011792452830188683], rtol=1e-12)


def test_calculate_intervals_peer_keywords_and_residual_list() -> None:
    J = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [0.5, -1.0]])
    parts = [np.array([0.1, -0.2]), np.array([0.05, 0.1])]
    cov, half = sysid.calculate_intervals(residuals_star=parts, J=J, alpha=0.05)
    np.testing.assert_allclose(half, [0.5118338355183469, 0.3134329325278908], rtol=1e-12)
    cov, half = sysid.calculate_intervals(parts, J, 0.05, 1e-15, 1e-8)  # the peer's thresholds
    np.testing.assert_allclose(cov[1, 1], 0.005306603773584906, rtol=1e-12)
