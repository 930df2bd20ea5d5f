"""Validation metrics (fit %, RMS, AIC/BIC) against hand-computed references, and the
validation table of a synthetic fit with a held-out sequence."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mjsysid as ms
from conftest import arm2_masses, arm2_truth, excitation, simulate
from mjsysid.fit.validation import (
    ValidationTable,
    fit_percent,
    rms_error,
    validate,
)


def test_fit_percent_against_a_hand_computed_reference():
    y, yh = [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 5.0]
    # ‖y − ŷ‖ = 1, ȳ = 2.5, ‖y − ȳ‖ = sqrt(2.25 + 0.25 + 0.25 + 2.25) = sqrt(5)
    assert fit_percent(y, yh) == pytest.approx(100.0 * (1.0 - 1.0 / math.sqrt(5.0)))
    assert fit_percent(y, yh) == pytest.approx(55.27864045)
    assert rms_error(y, yh) == pytest.approx(0.5)  # sqrt(1 / 4)
    assert fit_percent(y, y) == 100.0
    assert fit_percent(y, [2.5] * 4) == pytest.approx(0.0)  # the mean: 0 %
    assert fit_percent(y, [2.5, 2.5, 2.5, 10.0]) < 0  # worse than the mean


def test_fit_percent_of_two_columns_and_non_finite_rows():
    y = np.array([[0.0, 1.0], [2.0, 1.0], [np.nan, 5.0], [4.0, 3.0]])
    yh = np.array([[0.0, 1.0], [2.0, 2.0], [1.0, 1.0], [4.0, 3.0]])
    # rows 0, 1, 3: column means (2, 5/3); ‖y − ȳ‖² = 8 + (4/9 + 4/9 + 16/9) = 8 + 24/9
    ref = 100.0 * (1.0 - 1.0 / math.sqrt(8.0 + 24.0 / 9.0))
    assert fit_percent(y, yh) == pytest.approx(ref)
    assert rms_error(y, yh) == pytest.approx(math.sqrt(1.0 / 6.0))


def test_fit_percent_of_a_constant_signal_and_a_wrong_shape():
    assert fit_percent([1.0, 1.0], [1.0, 1.0]) == 100.0
    assert math.isnan(fit_percent([1.0, 1.0], [1.0, 2.0]))
    assert math.isnan(fit_percent([np.nan], [1.0]))
    with pytest.raises(ValueError, match=r"predicted must be an array of shape \(3, 1\)"):
        fit_percent([1.0, 2.0, 3.0], [1.0, 2.0])


@pytest.fixture(scope="module")
def problem():
    """ARM2 with data from masses (1.3, 0.5): seq0 to fit, seq1 held out; the identified
    parameters are the truth itself (no fit needed to test the table)."""
    spec, model, true, x0 = arm2_truth()

    def part(k):
        ctrl = excitation(200, model.nu, seed=k)
        sens, control = simulate(spec, true, ctrl, x0, ["j1_pos", "j2_pos"])
        return ms.ModelSequences("arm2", spec, [f"seq{k}"], [x0], [control], [sens])

    start = arm2_masses(spec, model)
    fitted = start.copy()
    fitted.update_from_vector([1.3, 0.5])
    return model, part(0), part(1), start, fitted


def test_validate_scores_fitted_and_held_out_against_a_hand_computation(problem):
    _, train, test, start, fitted = problem
    table = validate(start, fitted, [train], holdout=[test])
    assert [(r.sequence, r.signal, r.held_out) for r in table.rows] == [
        ("seq0", "j1_pos", False),
        ("seq0", "j2_pos", False),
        ("seq1", "j1_pos", True),
        ("seq1", "j2_pos", True),
    ]
    for r in table.rows:  # the truth predicts its own noise-free data
        assert r.fit_identified == pytest.approx(100.0, abs=1e-6)
        assert r.rms_identified == pytest.approx(0.0, abs=1e-8)
    # the start by hand: simulate the held-out sequence with the nominal masses
    rf = ms.build_residual_fn([test])
    pred = rf.predict(None, start)[0]
    y, yh = pred.measured_used.data[:, 1], pred.predicted_at_measured.data[:, 1]
    ref = 100.0 * (1.0 - np.sqrt(np.sum((y - yh) ** 2)) / np.sqrt(np.sum((y - y.mean()) ** 2)))
    row = table.rows[3]
    assert row.fit_start == pytest.approx(ref)
    assert row.fit_start < 99.0
    assert row.rms_start == pytest.approx(np.sqrt(np.mean((y - yh) ** 2)))
    rf.close()
    assert len(table.held_out_identified) == 1


def test_the_table_round_trips_through_its_yaml_form(problem):
    _, _, test, start, fitted = problem
    table = validate(start, fitted, None, holdout=test)
    data = table.as_dict()
    assert [len(data["fitted"]), len(data["held_out"])] == [0, 2]
    again = ValidationTable.from_dict(data)
    assert again.rows == table.rows
    text = table.format()
    assert "held-out sequences:" in text and "fitted sequences:" not in text
    with pytest.raises(TypeError, match="holdout must be a ModelSequences or a list of them"):
        validate(start, fitted, None, holdout=[1])
