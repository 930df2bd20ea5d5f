"""The command thresholds' profile over the recorded levels after the local fit
(:mod:`mjsysid.fit.thresholds`): a deadzone started in the wrong range between recorded levels
ends in the right one, a fit already there is left as it was, and the pieces (the ranges, the
batched refit, the options, the results files) do what they say."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_threshold_levels import TRUE_DEADZONE, _problem

import mjsysid as ms
from mjsysid.fit.options import FitOptions, ThresholdProfileOptions, as_threshold_options
from mjsysid.fit.result import ThresholdProfile
from mjsysid.fit.thresholds import level_ranges, refit_batch
from mjsysid.objective.levels import LevelBracket

WRONG = {"deadzone": [60 / 255, 10 / 255], "torque_constant": [0.25, 0.25]}  # (50, 76.5], (0, 20]


def test_a_deadzone_started_in_the_wrong_range_is_profiled_into_the_right_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    params, fn = _problem(WRONG, width=0.0)  # a cut edge: no gradient ever moves it
    stuck, plain = ms.optimize(params, fn, max_iters=30, threshold_profile=False)
    assert plain.threshold_profile is None
    np.testing.assert_array_equal(stuck["m_deadzone"].value, WRONG["deadzone"])
    assert plain.cost > 1e-3  # the torque constants adapted to the wrong levels
    with caplog.at_level(logging.INFO, logger="mjsysid.fit.thresholds"):
        fitted, result = ms.optimize(params, fn, max_iters=30)
    profile = result.threshold_profile
    assert profile is not None and profile.kept == "refit" and profile.moved
    assert profile.fit_cost == pytest.approx(plain.cost, rel=1e-12)
    assert profile.refit_cost == pytest.approx(result.cost) and result.cost < 1e-12
    for j in (0, 1):  # the truth's range (20, 50] PWM both ways
        assert 20 / 255 < fitted["m_deadzone"].value[j] <= 50 / 255
    np.testing.assert_allclose(fitted["m_torque_constant"].value, 0.3, rtol=1e-6)
    assert [s.name for s in profile.sweeps][:2] == ["m_deadzone[0]", "m_deadzone[1]"]
    first = profile.sweeps[0]
    own = [t for t in first.trials if t.current]
    assert len(own) == 1 and (own[0].below, own[0].above) == (50 / 255, 0.3)  # (the bound)
    # three ranges within the bounds [0, 0.3]: (0, 20], (20, 50], (50, 76.5] PWM, all refitted
    assert len(first.trials) == 3 and all(t.refit_cost is not None for t in first.trials)
    assert "Threshold profile: moved m_deadzone[0] to" in result.message
    assert "is the result" in result.message
    assert result.nfev > plain.nfev + profile.evaluations  # the fit after it counted too
    assert result.initial_cost == pytest.approx(plain.initial_cost)
    assert "threshold profile: m_deadzone[0] moved to" in caplog.text


def test_a_fit_in_the_right_range_is_left_as_it_was() -> None:
    params, fn = _problem({"deadzone": TRUE_DEADZONE, "torque_constant": [0.25, 0.25]}, 0.0)
    _, plain = ms.optimize(params, fn, max_iters=20, threshold_profile=False)
    _, result = ms.optimize(params, fn, max_iters=20)
    profile = result.threshold_profile
    assert profile is not None and profile.kept == "unmoved" and not profile.moved
    np.testing.assert_array_equal(result.x, plain.x)
    assert result.cost == plain.cost
    assert result.nfev == plain.nfev + profile.evaluations
    assert "every entry stayed in its range" in result.message


def test_a_fit_without_thresholds_runs_no_profile() -> None:
    params, fn = _problem(WRONG, width=0.0)
    params["m_deadzone"].frozen = True
    _, result = ms.optimize(params, fn, max_iters=5)
    assert result.threshold_profile is None


def test_a_map_fit_is_profiled_too() -> None:
    """The prior's wrapper passes the thresholds of the residual it wraps on."""
    params, fn = _problem(WRONG, width=0.0)
    params["m_torque_constant"].prior = {"mean": [0.3, 0.3], "std": [0.1, 0.1]}
    fitted, result = ms.optimize(params, fn, max_iters=30)
    assert result.prior is not None and result.threshold_profile is not None
    assert result.threshold_profile.kept == "refit"
    assert all(20 / 255 < v <= 50 / 255 for v in fitted["m_deadzone"].value)


def test_level_ranges_cover_the_bounds_between_the_recorded_levels() -> None:
    levels = (0.1, 0.2, 0.4)
    b = LevelBracket("d[0]", 0.15, 0.1, 0.2, "positive", levels, (0.0, 0.5))
    values, below, above = level_ranges(b)
    np.testing.assert_array_equal(below, [0.0, 0.1, 0.2, 0.4])
    np.testing.assert_array_equal(above, [0.1, 0.2, 0.4, 0.5])
    np.testing.assert_allclose(values, [0.05, 0.15, 0.3, 0.45])
    # an infinite bound: the last range ends one gap past the last level
    b = LevelBracket("d[0]", 0.15, 0.1, 0.2, "positive", levels, (0.0, np.inf))
    values, _, above = level_ranges(b)
    assert above[-1] == pytest.approx(0.6) and np.isfinite(values).all()
    # levels outside the bounds do not count; none inside: nothing to choose from
    b = LevelBracket("d[0]", 0.15, 0.0, 0.3, "positive", (0.35, 0.4), (0.0, 0.3))
    assert all(a.size == 0 for a in level_ranges(b))


def test_the_batched_refit_solves_each_column_as_least_squares_does() -> None:
    """On a linear residual ``r = A x − b`` every column's moving rows reach the least-squares
    solution with the other rows held (one Gauss-Newton step is exact; the damping only
    delays it), each column independently."""
    rng = np.random.default_rng(0)
    A, b = rng.normal(size=(30, 4)), rng.normal(size=30)

    def residual(X: np.ndarray) -> np.ndarray:
        return A @ X - b[:, None]

    X0 = rng.normal(size=(4, 3))
    rows = np.array([0, 2, 3])
    inf = np.full(4, np.inf)
    costs, X = refit_batch(residual, X0, rows, (-inf, inf), iterations=12)
    for col in range(3):
        held = X0[1, col]
        sol = np.linalg.lstsq(A[:, rows], b - A[:, 1] * held, rcond=None)[0]
        np.testing.assert_allclose(X[rows, col], sol, rtol=1e-6)
        assert X[1, col] == held
        r = A @ X[:, col] - b
        assert costs[col] == pytest.approx(0.5 * r @ r)
    # the bounds hold every step
    lo, hi = np.full(4, -0.05), np.full(4, 0.05)
    _, X = refit_batch(residual, np.zeros((4, 2)), rows, (lo, hi), iterations=5)
    assert np.all(X >= lo[:, None]) and np.all(X <= hi[:, None])


def test_a_diverging_candidate_counts_as_infinite_cost_and_is_never_taken() -> None:
    def residual(X: np.ndarray) -> np.ndarray:
        R = X.copy() - 1.0
        R[:, X[0] > 5.0] = np.nan  # this region "diverges"
        return R

    costs, X = refit_batch(residual, np.array([[0.0, 9.0]]), np.array([0]), (
        np.array([-10.0]), np.array([10.0])), iterations=4)  # fmt: skip
    assert costs[0] < 1e-6 and X[0, 0] == pytest.approx(1.0, abs=1e-3)
    assert costs[1] == np.inf and X[0, 1] == 9.0  # no finite start: left where it was


def test_the_options_are_checked_and_named() -> None:
    assert FitOptions().threshold_profile == ThresholdProfileOptions()
    assert FitOptions(threshold_profile=False).threshold_profile is None
    assert FitOptions(threshold_profile={"keep": 6}).threshold_profile == ThresholdProfileOptions(
        keep=6
    )
    with pytest.raises(ValueError, match=r"threshold_profile: keep must be an integer >= 1, got 0"):
        ThresholdProfileOptions(keep=0)
    with pytest.raises(ValueError, match=r"threshold_profile: margin must be a number in \[0, 1\)"):
        ThresholdProfileOptions(margin=1.5)
    with pytest.raises(
        ValueError, match=r"threshold_profile must be keys of .*'keep'.*got \['kep'\]"
    ):
        as_threshold_options({"kep": 3})
    with pytest.raises(TypeError, match=r"threshold_profile must be a ThresholdProfileOptions"):
        FitOptions(threshold_profile="yes")


def test_an_experiment_file_sets_or_switches_off_the_profile(tmp_path: Path) -> None:
    from mjsysid.app.experiment import ExperimentError, load_experiment

    for key, expected in (
        ("false", None),
        ("{keep: 6, iterations: 2}", ThresholdProfileOptions(keep=6, iterations=2)),
        (None, ThresholdProfileOptions()),
    ):
        exp = load_experiment(_furuta_with(tmp_path / f"case{len(str(key))}", key))
        assert exp.fit_options.threshold_profile == expected
    with pytest.raises(ExperimentError, match=r"optimizer.threshold_profile"):
        load_experiment(_furuta_with(tmp_path / "bad", "{kep: 6}"))


def _furuta_with(folder: Path, value: str | None) -> Path:
    """The bundled Furuta example with ``threshold_profile: value`` in its optimizer."""
    shutil.copytree(Path(ms.__file__).parent / "examples" / "furuta", folder)
    path = folder / "experiment.yaml"
    text = path.read_text()
    old = "optimizer: {method: lm, max_iters: 100}"
    assert old in text
    if value is not None:
        text = text.replace(
            old, f"optimizer: {{method: lm, max_iters: 100, threshold_profile: {value}}}"
        )
    path.write_text(text)
    return path


def test_the_profile_round_trips_through_the_results_files(tmp_path: Path) -> None:
    from mjsysid.output.results import load_results, save_results

    params, fn = _problem(WRONG, width=0.0)
    fitted, result = ms.optimize(params, fn, max_iters=30)
    profile = result.threshold_profile
    assert profile is not None
    save_results(tmp_path / "out", fn.models_sequences, params, fitted, result, fn)
    again = load_results(tmp_path / "out").result.threshold_profile
    assert again is not None
    assert again.summary() == profile.summary()
    assert again.text() == profile.text()
    assert ThresholdProfile.from_summary(profile.summary()).summary() == profile.summary()
    # and the report says it
    pytest.importorskip("jinja2", reason="the report needs the report extra")
    from mjsysid.output.report import default_report

    page = default_report(
        fn.models_sequences, params, fitted, result, fn, tmp_path / "report", videos=False
    )
    html = Path(page).read_text()
    assert "Deadzone profile</th>" in html and "Threshold profile: moved m_deadzone[0]" in html


def test_a_verbose_fit_says_when_the_profile_runs_and_what_it_did() -> None:
    import io

    params, fn = _problem(WRONG, width=0.0)
    out = io.StringIO()
    ms.optimize(params, fn, max_iters=30, verbose=True, output=out)
    text = out.getvalue()
    assert (
        "threshold profile: m_deadzone[0], m_deadzone[1] over the ranges between recorded levels"
        in text
    )
    assert "Threshold profile: moved m_deadzone[0] to" in text
    assert "Fitting again from there:" in text
    after = text.split("Fitting again from there:")[1]
    assert "iter" in after  # the second fit's own lines follow
