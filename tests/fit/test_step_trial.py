"""A stop the linearised model calls no minimum is checked on the residual: its Gauss-Newton
step is tried, and where the step does not deliver (a cost that is not quadratic at the scale
of the standard errors: the real servo logs of example:servo) the stop stands, said in the
message, the intervals' caveats and result.yaml."""

from __future__ import annotations

import numpy as np
import pytest

import mjsysid as ms
from mjsysid.app.experiment import load_experiment
from mjsysid.fit.confidence import compute_confidence
from mjsysid.fit.horizons import Stage, _judge_stop
from mjsysid.fit.jacobian import CountedResidual
from mjsysid.fit.status import Status, StepTrial

BOUNDS = (np.full(1, -10.0), np.full(1, 10.0))


def _stage(residual, J):
    """A stage stopped on xtol at x = 0 with the given (possibly wrong) Jacobian."""
    x = np.zeros(1)
    r = residual(x[:, None])[:, 0]
    cost = 0.5 * float(r @ r)
    return Stage(1.0, x, 10.0, cost, Status.XTOL, 3, 9, 3, 0, [cost], [x], r, np.array(J))


def _counted(residual):
    return CountedResidual(lambda X, params: residual(X), None)


def test_a_step_that_raises_the_cost_leaves_the_stop_standing():
    """r(x) = x² + 1 has its minimum at 0; a spoiled Jacobian column (slope 1) makes the
    linearised model promise the whole cost at x = -1. Tried, the step raises the cost at
    every fraction: the xtol stop stands, with the trial kept."""

    def residual(X):
        return X**2 + 1.0

    stage = _stage(residual, [[1.0]])
    _judge_stop(stage, BOUNDS)  # without the residual: the linearised model's word
    assert stage.status is Status.SMALL_STEP
    stage = _stage(residual, [[1.0]])
    _judge_stop(stage, BOUNDS, residual=_counted(residual))
    assert stage.status is Status.XTOL
    trial = stage.trial
    assert trial is not None and not trial.confirmed
    assert trial.fractions == (1.0, 0.5, 0.25)
    np.testing.assert_allclose(trial.actual, [0.5 * 2.0**2, 0.5 * 1.25**2, 0.5 * 1.0625**2])
    np.testing.assert_allclose(trial.predicted, [0.0, 0.125, 0.28125], atol=1e-12)
    assert "+300 % at the whole step, +56.2 % at half of it, +12.9 % at a quarter" in trial.text()


def test_a_step_that_delivers_makes_the_stop_small_step():
    def residual(X):
        return X + 1.0

    stage = _stage(residual, [[1.0]])
    _judge_stop(stage, BOUNDS, residual=_counted(residual))
    assert stage.status is Status.SMALL_STEP and stage.trial is None


def test_a_clear_fall_confirms_even_when_the_model_overpromises():
    """At a quarter of the step the cost falls by 5 % although the model promised far more:
    not a minimum."""
    trial = StepTrial(1.0, (1.0, 0.5, 0.25), (0.0, 0.25, 0.56), (3.0, 1.2, 0.95), 4.0)
    assert trial.confirmed
    flat = StepTrial(1.0, (1.0, 0.5, 0.25), (0.0, 0.25, 0.56), (3.0, 1.2, 0.999), 4.0)
    assert not flat.confirmed  # a 0.1 % fall where 44 % was promised
    diverged = StepTrial(1.0, (1.0,), (0.0,), (float("inf"),), 4.0)
    assert not diverged.confirmed and "diverged at the whole step" in diverged.text()
    assert StepTrial.from_summary(flat.summary()) == flat


@pytest.fixture(scope="module")
def servo_fit(tmp_path_factory):
    exp = load_experiment("example:servo")
    fn = exp.build_residual_fn()
    opt, res = ms.optimize(exp.params, fn, options=exp.fit_options)
    return exp, fn, opt, res, tmp_path_factory.mktemp("servo")


def test_real_servo_logs_end_at_a_stop_the_step_trial_keeps(servo_fit):
    """On BAM's STS3250 logs the fit stops on ftol where the linearised model still proposes
    a step of ~1.9 standard errors; that step raises the cost (the friction that sticks makes
    the cost curve sharply): converged, with the trial said in the message and the caveats."""
    exp, fn, opt, res, folder = servo_fit
    assert res.status is Status.FTOL and res.success
    trial = res.step_trial
    assert trial is not None and not trial.confirmed
    assert trial.step_se > 0.3 and all(a > trial.cost for a in trial.actual)
    assert "does not lower the cost" in res.message
    conf = compute_confidence(res, fn, params=opt)
    assert conf.converged
    assert any("not quadratic at the scale of the standard errors" in c for c in conf.caveats())
    ms.save_results(folder, [exp.sequences], exp.params, opt, res, fn)
    back = ms.load_results(folder)
    assert back.result.step_trial == trial
