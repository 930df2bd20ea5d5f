"""``optimize(..., holdout=)``: held-out sequences simulated with the identified parameters,
their fit percentages against a hand computation (issue #19)."""

from __future__ import annotations

import numpy as np
import pytest

import mjsysid as ms
from conftest import arm2_masses, arm2_truth, excitation, simulate
from mjsysid.fit.validation import ValidationTable


@pytest.fixture(scope="module")
def problem():
    """ARM2 with noisy data from masses (1.3, 0.5): seq0 to fit, seq1 held out."""
    spec, model, true, x0 = arm2_truth()

    def part(k):
        ctrl = excitation(300, model.nu, seed=k)
        names = ["j1_pos", "j2_pos"]
        sens, control = simulate(spec, true, ctrl, x0, names, noise=0.002, seed=10 + k)
        return ms.ModelSequences("arm2", spec, [f"seq{k}"], [x0], [control], [sens])

    return part(0), part(1), arm2_masses(spec, model)


def _fit_by_hand(test, params) -> list[float]:
    """100·(1 − ‖y − ŷ‖ / ‖y − ȳ‖) per column of the held-out sequence, from its prediction."""
    rf = ms.build_residual_fn([test])
    try:
        pred = rf.predict(None, params)[0]
    finally:
        rf.close()
    y, yh = pred.measured_used.data, pred.predicted_at_measured.data
    return [
        100.0
        * (1.0 - np.linalg.norm(y[:, c] - yh[:, c]) / np.linalg.norm(y[:, c] - y[:, c].mean()))
        for c in range(y.shape[1])
    ]


def test_holdout_is_scored_with_the_identified_parameters(problem):
    train, test, start = problem
    rf = ms.build_residual_fn([train])
    opt, res = ms.optimize(start, rf, holdout=test, horizons=None)
    rf.close()
    table = res.validation
    assert isinstance(table, ValidationTable)
    assert [(r.sequence, r.signal, r.held_out) for r in table.rows] == [
        ("seq0", "j1_pos", False),
        ("seq0", "j2_pos", False),
        ("seq1", "j1_pos", True),
        ("seq1", "j2_pos", True),
    ]
    held = [r for r in table.rows if r.held_out]
    by_hand = _fit_by_hand(test, opt)
    assert [r.fit_identified for r in held] == pytest.approx(by_hand, rel=1e-9)
    assert [r.fit_start for r in held] == pytest.approx(_fit_by_hand(test, start), rel=1e-9)
    assert all(r.fit_identified > 95.0 and r.fit_identified > r.fit_start for r in held)
    assert len(table.held_out_identified) == 1  # the predictions, for overlays


def test_holdout_of_a_windowed_fit_runs_whole_from_its_own_start(problem):
    train, test, start = problem
    windows = ms.split_windows(train, 0.2)
    params = start.copy()
    params.update(ms.initial_state_params(windows))
    rf = ms.build_residual_fn([windows])
    opt, res = ms.optimize(params, rf, holdout=[test], horizons=None, max_iters=5)
    rf.close()
    held = [r for r in res.validation.rows if r.held_out]
    assert [r.sequence for r in held] == ["seq1", "seq1"]
    masses = ms.ParameterDict(p.copy() for n, p in opt.items() if n in start)
    assert [r.fit_identified for r in held] == pytest.approx(_fit_by_hand(test, masses))


def test_holdout_of_a_plain_callable_scores_only_the_held_out_rows(problem):
    train, test, start = problem
    rf = ms.build_residual_fn([train])

    def residual(x, params):
        return rf(x, params)

    _, res = ms.optimize(start, residual, holdout=[test], horizons=None, max_iters=3)
    rf.close()
    assert {r.held_out for r in res.validation.rows} == {True}


def test_a_bad_holdout_fails_before_the_fit(problem):
    train, _, start = problem
    rf = ms.build_residual_fn([train])
    with pytest.raises(TypeError, match="holdout must be a ModelSequences, a non-empty list"):
        ms.optimize(start, rf, holdout="seq1")
    with pytest.raises(TypeError, match="holdout must be"):
        ms.optimize(start, rf, holdout=[])
    rf.close()
