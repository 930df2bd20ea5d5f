"""Initial states without effect at the start (a joint at rest held by friction that sticks
forgets a small initial velocity within its first step) are held at their recorded values
in the last stage, with a warning, instead of stopping the fit with the no-effect error that
a modelling mistake gets; the LM box step treats a box without width as a pinned value."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest

import mjsysid as ms
from mjsysid.app.experiment import bundled_examples, load_experiment
from mjsysid.fit.lm import _box_step


def test_a_box_without_width_pins_its_entry_and_the_rest_solve_the_reduced_problem():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(6, 4))
    H, g = A.T @ A, rng.normal(size=4)
    wide = np.full(4, 1e6)
    lower, upper = -wide.copy(), wide.copy()
    lower[1] = upper[1] = 0.25  # entry 1 pinned at a step of 0.25
    d = _box_step(H, g, 0.1, lower, upper)
    free = [0, 2, 3]
    Hf = H[np.ix_(free, free)] + 0.1 * np.eye(3)
    expected = np.linalg.solve(Hf, -(g[free] + H[free, 1] * 0.25))
    assert d is not None and d[1] == 0.25
    np.testing.assert_allclose(d[free], expected, rtol=1e-9)
    all_pinned = _box_step(H, g, 0.1, np.full(4, 0.5), np.full(4, 0.5))
    np.testing.assert_array_equal(all_pinned, np.full(4, 0.5))


def test_a_servo_at_rest_fits_with_its_starts_estimated(tmp_path, caplog):
    """example:servo with shooting: {estimate_initial_state: true}, the advice of the warning
    the example prints: the three fitted logs start at rest, and the friction that sticks
    makes their initial velocities dead at the start. They stay at their recorded values; the
    positions are estimated."""
    folder = tmp_path / "servo"
    shutil.copytree(bundled_examples()["servo"].parent, folder)
    exp_file = folder / "experiment.yaml"
    exp_file.write_text(exp_file.read_text() + "shooting: {estimate_initial_state: true}\n")
    exp = load_experiment(exp_file)
    start = exp.params.copy()
    options = exp.fit_options.replace(max_iters=3)
    with caplog.at_level(logging.WARNING, logger="mjsysid.fit.optimize"):
        opt, res = ms.optimize(exp.params, exp.build_residual_fn(), options=options)
    still = [n for n in opt if n.endswith("_qvel0")]
    assert len(still) == 3
    assert f"the initial states {still} have no effect" in caplog.text
    assert "held at their recorded values" in caplog.text
    for name in still:
        np.testing.assert_array_equal(opt[name].value, start[name].value)
    assert any(
        not np.array_equal(opt[n].value, start[n].value) for n in opt if n.endswith("_qpos0")
    )
    assert np.isfinite(res.cost) and res.cost < res.initial_cost


class _SwitchedOff:
    """``b`` acts only through ``a·(b − 2)``: the head drives ``a`` to its lower bound 0, where
    ``b`` has no effect on the whole data (a Stribeck velocity once the Stribeck friction is
    zero)."""

    def __init__(self, whole: bool = True) -> None:
        self.whole = whole

    def __call__(self, X: np.ndarray, params: object) -> np.ndarray:
        a, b = np.asarray(X, dtype=float)[:, None, :]
        if not self.whole:
            return np.concatenate([a + 5.0, a * (b - 2.0)], axis=0)
        return np.concatenate([a * (b - 2.0), a - 1.0], axis=0)

    def supports_horizons(self, params: object = None) -> bool:
        return True

    def horizon_samples(self, fraction: float, params: object = None) -> list[int]:
        return [100]

    def head(self, fraction: float) -> _SwitchedOff:
        return _SwitchedOff(whole=False)


def test_a_value_switched_off_by_another_is_held_not_an_error(caplog):
    """Where the early stage ended, ``b`` has no effect: not the modelling mistake the
    no-effect error is for (it had one where the fit started), so it is held with a warning;
    the run from the fit's start then finds the whole data's minimum."""
    params = ms.ParameterDict(
        [ms.Parameter("a", 0.5, 0.0, 10.0), ms.Parameter("b", 1.0, 0.1, 10.0)]
    )
    with caplog.at_level(logging.WARNING, logger="mjsysid.fit.optimize"):
        _, res = ms.optimize(params, _SwitchedOff(), horizons=[0.5, 1.0])
    assert "['b'] had an effect where the fit started but have none here" in caplog.text
    np.testing.assert_allclose(res.x, [1.0, 2.0], atol=1e-6)
    # a parameter that never had an effect is still the modelling mistake's error
    dead = ms.ParameterDict([ms.Parameter("a", 0.0, 0.0, 10.0), ms.Parameter("b", 1.0, 0.1, 10.0)])
    with pytest.raises(ValueError, match=r"parameters \['b'\] have no effect"):
        ms.optimize(dead, _SwitchedOff(), horizons=None)
