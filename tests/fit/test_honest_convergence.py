"""Issue #22: a stop on a small step is not convergence when the model still predicts a
clear decrease; such fits say so (status ``small_step``) and their intervals are flagged."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2
from mjsysid.fit.confidence import compute_confidence
from mjsysid.fit.lm import predicted_decrease
from mjsysid.fit.status import Status, honest_status, message


def _arm_masses(spec, model):
    return ms.ParameterDict(
        [ms.body_inertia_param(spec, model, b, ms.InertiaType.Mass) for b in ("link1", "link2")]
    )


def _truth(spec, model):
    d = _arm_masses(spec, model)
    d.update_from_vector(np.array([1.3, 0.5]))
    return d


@pytest.fixture
def arm(make_problem):
    return make_problem(ARM2, _truth, n=200, qpos=[0.3, -0.2], noise=0.01)


def test_predicted_decrease_of_a_linear_problem_is_the_whole_reducible_cost():
    J = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    x = np.zeros(2)
    target = np.array([1.0, 2.0, 0.5])
    r = J @ x - target
    best = np.linalg.lstsq(J, target, rcond=None)[0]
    rest = J @ best - target
    expected = 0.5 * (r @ r) - 0.5 * (rest @ rest)
    inf = np.full(2, np.inf)
    assert predicted_decrease(J, r, x, (-inf, inf)) == pytest.approx(expected, rel=1e-9)
    assert predicted_decrease(J, rest, best, (-inf, inf)) == pytest.approx(0.0, abs=1e-12)


def test_predicted_decrease_respects_active_bounds():
    J = np.eye(2)
    r = np.array([1.0, 1.0])  # the descent direction lowers both entries
    x = np.zeros(2)
    held = (np.zeros(2), np.full(2, 5.0))  # both at their lower bound
    assert predicted_decrease(J, r, x, held) == 0.0
    half = (np.array([-0.5, 0.0]), np.full(2, 5.0))  # entry 0 may fall by 0.5 of its 1.0
    assert predicted_decrease(J, r, x, half) == pytest.approx(0.5 * 1.0 - 0.5 * 0.25)


def test_honest_status_keeps_genuine_stops_and_renames_false_ones():
    assert honest_status(Status.XTOL, 1.0, 1e-6, 10.0) is Status.XTOL
    assert honest_status(Status.FTOL, 1.0, 1e-3, 10.0) is Status.FTOL
    assert honest_status(Status.XTOL, 0.129, 0.078, 50.0) is Status.SMALL_STEP
    assert honest_status(Status.FTOL, 489.0, 480.0, 900.0) is Status.SMALL_STEP
    assert honest_status(Status.XTOL, 1e-28, 6e-29, 100.0) is Status.XTOL  # round-off
    assert honest_status(Status.GTOL, 1.0, 0.9, 10.0) is Status.SMALL_STEP  # judged too
    assert honest_status(Status.MAX_ITERS, 1.0, 0.9, 10.0) is Status.MAX_ITERS
    assert honest_status(Status.XTOL, 1.0, float("nan"), 10.0) is Status.XTOL
    # issue #30: a step of more than 0.3 standard errors left is no convergence ...
    assert honest_status(Status.FTOL, 1.0, 1e-3, 10.0, step_se=2.0) is Status.SMALL_STEP
    assert honest_status(Status.FTOL, 1.0, 1e-3, 10.0, step_se=0.2) is Status.FTOL
    # ... unless the decrease left is round-off at an exact fit
    assert honest_status(Status.XTOL, 1e-28, 6e-29, 100.0, step_se=5.0) is Status.XTOL


def test_small_step_message_names_the_remedies():
    text = message(Status.SMALL_STEP, 50)
    assert text.startswith("Not converged")
    for remedy in ("shooting: {window:", "horizons", "global stage", "confidence intervals"):
        assert remedy in text


def test_a_premature_xtol_stop_is_called_small_step(arm, caplog):
    """A loose xtol stops the fit after a step far from the minimum: not convergence."""
    rf = ms.build_residual_fn([arm.sequences])
    params = _arm_masses(arm.spec, arm.model)
    with caplog.at_level(logging.WARNING, logger="mjsysid.fit.optimize"):
        _, res = ms.optimize(params, rf, xtol=0.5, gtol=0.0, horizons=None, max_iters=20)
    assert res.status == "small_step" and not res.success
    assert res.message.startswith("Not converged")
    assert "not converged (status small_step)" in caplog.text
    conf = compute_confidence(res, rf)
    assert not conf.converged
    assert any("did not converge" in c for c in conf.caveats())


def test_a_genuine_xtol_stop_stays_converged(arm):
    rf = ms.build_residual_fn([arm.sequences])
    params = _arm_masses(arm.spec, arm.model)
    _, res = ms.optimize(params, rf, horizons=None)
    assert res.status in ("xtol", "gtol", "ftol") and res.success
    assert compute_confidence(res, rf).converged


def test_cli_names_a_small_step_stop_and_flags_the_intervals(tmp_path):
    """``mjsysid fit`` on the arm example with a loose xtol: the stop is named, not hidden."""
    import io
    import shutil

    import yaml

    from mjsysid.app.cli import main
    from mjsysid.app.experiment import bundled_examples

    folder = tmp_path / "arm"
    shutil.copytree(bundled_examples()["arm"].parent, folder)
    exp = folder / "experiment.yaml"
    data = yaml.safe_load(exp.read_text())
    data["optimizer"].update({"xtol": 0.5, "gtol": 0.0, "horizons": "none"})
    exp.write_text(yaml.safe_dump(data))
    out, err = io.StringIO(), io.StringIO()
    argv = ["fit", str(exp), "--out", str(tmp_path / "res"), "--no-report"]
    main(argv, stdout=out, stderr=err)
    text = err.getvalue()
    assert "Not converged: the fit stopped on a small step" in text
    assert "warning: the fit did not converge" in text


def test_an_exact_fit_at_round_off_after_horizon_stages_is_converged():
    """The last horizon stage of an exact fit may start at round-off already (the shorter
    stages found the truth): the round-off floor is the whole fit's start cost, not the
    stage's (the bench's quadruped with foot friction ended 'small_step' at cost 3e-23)."""
    from mjsysid.fit.horizons import Stage, _judge_stop

    rng = np.random.default_rng(0)
    J, r = rng.normal(size=(6, 5)), 1e-12 * rng.normal(size=6)
    x, bounds = np.zeros(5), (np.full(5, -1.0), np.full(5, 1.0))
    assert predicted_decrease(J, r, x, bounds) > 0.5 * (0.5 * r @ r)  # most of it "reducible"

    def stage() -> Stage:
        cost = 0.5 * float(r @ r)
        return Stage(1.0, x, 1e-20, cost, Status.XTOL, 3, 9, 3, 0, [cost], [x], r, J)

    alone = stage()
    _judge_stop(alone, bounds)  # the stage's own start (1e-20) as the yardstick
    assert alone.status is Status.SMALL_STEP
    after_stages = stage()
    _judge_stop(after_stages, bounds, start_cost=2.5)  # the fit began at cost 2.5
    assert after_stages.status is Status.XTOL
