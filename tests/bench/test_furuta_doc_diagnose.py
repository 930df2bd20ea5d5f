"""``bench/furuta_doc_fit.py --diagnose``: the lowest cost the model's structure reaches (the
truth's physics with its window starts fitted) and each identified entry's effect alone on
the held-out error, on a short capture of the document's Furuta (bench/truth/furuta_doc.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bench_import import load_bench_module

from mjsysid.app.experiment import load_experiment

fit = load_bench_module("bench/furuta_doc_fit.py", "bench_furuta_doc_fit")


@pytest.fixture(scope="module")
def exp(tmp_path_factory: pytest.TempPathFactory) -> object:
    folder = Path(tmp_path_factory.mktemp("furuta"))
    return load_experiment(fit.write_case(folder, (("prbs", 0, 4.0),), window=2.0))


def test_truth_with_fitted_starts_is_far_below_the_truth_at_recorded_starts(exp: object) -> None:
    truth = fit.true_values(exp.params)  # type: ignore[attr-defined]
    r = exp.build_residual_fn()(truth.as_vector(), truth)  # type: ignore[attr-defined]
    recorded = 0.5 * float(r @ r)
    floor, status = fit.truth_with_fitted_starts(exp, exp.fit_options)  # type: ignore[attr-defined]
    assert floor < 0.05 * recorded, (floor, recorded, status)


def test_sensitivity_of_the_truth_itself_is_the_ramps_own_figure(exp: object) -> None:
    truth = fit.true_values(exp.params)  # type: ignore[attr-defined]
    rows = fit.sensitivity(exp, truth)
    assert len(rows) == 14  # the physical entries, the window starts left out
    assert all(not name.startswith("furuta/") for name, _ in rows)
    ramp = fit.held_out_rms(exp, truth)
    cut = fit.held_out_rms(exp, truth, cut=True)
    for _, ratio in rows:  # every entry at its own true value: the ramp over the cut
        for signal, value in ratio.items():
            assert value == pytest.approx(ramp[signal] / cut[signal], rel=1e-12)
            assert 0.9 < value < 1.2


def test_one_entry_off_moves_the_held_out_error(exp: object) -> None:
    truth = fit.true_values(exp.params)  # type: ignore[attr-defined]
    off = truth.copy()
    off["motor_gear"].value = off["motor_gear"].value * np.array([0.8, 1.0])
    rows = dict(fit.sensitivity(exp, off))
    assert rows["motor_gear[0]"]["motor_angle"] > 1.3 * rows["motor_gear[1]"]["motor_angle"]


def test_level_limit_brackets_the_true_deadzone_and_spans_one_at_its_end(exp: object) -> None:
    """The short PRBS's recorded levels around each true deadzone entry hold it, and the
    held-out error with the deadzone moved within them is a ratio to the truth's."""
    brackets, spread = fit.level_limit(exp)
    truth = fit.fd.TRUE_PARAMS
    names = [b.name for b in brackets]
    assert names == ["motor_deadzone[0]", "motor_deadzone[1]"]
    for b, key in zip(brackets, ("motor_deadzone_pos", "motor_deadzone_neg"), strict=True):
        assert b.below < truth[key] <= b.above
        assert b.value == pytest.approx(truth[key])
    for lo, hi in spread.values():
        assert 0.9 < lo <= hi
