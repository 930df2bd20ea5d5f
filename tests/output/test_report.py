"""Tests for mjsysid.report: section data (pure helpers), the HTML report, and a headless browser.

The browser test drives Debian's ``chromium`` through the Chrome DevTools protocol (with the
``websockets`` package's synchronous client): it loads the report from disk, records console
errors and every network request, waits for plotly to draw, and writes screenshots.
"""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import mjsysid as ms
from mjsysid import report as rep
from mjsysid.fit.confidence import Confidence, compute_confidence
from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.result import FitHistory, OptimizeResult, TwoStarts
from mjsysid.output.report import (
    Direction,
    ParameterRow,
    at_bound_flags,
    collect_warnings,
    condition_number,
    correlation_from_covariance,
    decimate_indices,
    default_report,
    nrmse,
    optimisation_trace,
    parameter_rows,
    signal_errors,
    strong_correlations,
    unidentifiable_directions,
)
from mjsysid.output.report import html as report_html

pytest.importorskip("jinja2", reason="the report needs the report extra (jinja2)")
pytest.importorskip("plotly", reason="the report needs the report extra (plotly)")

from report_support import (
    DevTools,
    Fit,
    figures_of,
    open_page,
    page_problems,
    screenshot,
)

pytest_plugins = ("report_support",)  # the fixtures fit and browser


# -- pure helpers ------------------------------------------------------------------------------
def test_at_bound_flags() -> None:
    lo = np.array([0.0, 0.0, -np.inf, 1.0, 0.0])
    hi = np.array([1.0, 1.0, np.inf, 2.0, np.inf])
    x = np.array([0.0, 1.0 - 1e-9, 5.0, 1.5, 0.0])
    at_lo, at_hi = at_bound_flags(x, lo, hi)
    np.testing.assert_array_equal(at_lo, [True, False, False, False, True])
    np.testing.assert_array_equal(at_hi, [False, True, False, False, False])
    # The tolerance is relative to the bound range.
    at_lo, _ = at_bound_flags([1e-3], [0.0], [1.0], rtol=1e-2)
    assert at_lo[0]
    at_lo, _ = at_bound_flags([1e-3], [0.0], [1.0], rtol=1e-4)
    assert not at_lo[0]


def test_correlation_from_covariance_finite() -> None:
    cov = np.array([[4.0, 1.2, 0.0], [1.2, 1.0, -0.5], [0.0, -0.5, 0.25]])
    corr = correlation_from_covariance(cov)
    np.testing.assert_allclose(np.diag(corr), 1.0)
    np.testing.assert_allclose(corr[0, 1], 1.2 / (2.0 * 1.0))
    np.testing.assert_allclose(corr[1, 2], -0.5 / (1.0 * 0.5))
    np.testing.assert_allclose(corr, corr.T)
    assert np.all(np.abs(corr) <= 1.0)


def test_correlation_from_covariance_unidentifiable_is_nan_not_a_crash() -> None:
    # Two identical Jacobian columns: parameters 1 and 2 are unidentifiable, 0 is fine.
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 200))
    J = np.stack([a, b, b], axis=1)
    cov, half = calculate_intervals(0.1 * rng.normal(size=200), J)
    assert np.isfinite(half[0]) and np.isinf(half[1]) and np.isinf(half[2])
    corr = correlation_from_covariance(cov)
    assert corr[0, 0] == 1.0
    assert np.isnan(corr[1]).all() and np.isnan(corr[:, 2]).all()
    assert np.isfinite(corr[0, 0])
    assert np.isnan(correlation_from_covariance(np.array([[0.0]]))).all()  # zero variance


def test_condition_number() -> None:
    assert condition_number(np.eye(3)) == pytest.approx(1.0)
    c = 0.9
    J = np.array([[1.0, c], [0.0, math.sqrt(1 - c * c)]])
    assert condition_number(J) == pytest.approx((1 + c) / (1 - c))
    # Units do not matter: scaling a column leaves κ unchanged.
    assert condition_number(J * [1.0, 1e6]) == pytest.approx((1 + c) / (1 - c))
    assert condition_number(np.array([[1.0, 2.0], [2.0, 4.0]])) == math.inf
    assert condition_number(np.array([[1.0, 0.0], [2.0, 0.0]])) == math.inf
    assert math.isnan(condition_number(np.zeros((0, 2))))


def test_unidentifiable_directions_names_the_combination() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, 100))
    dirs = unidentifiable_directions(np.stack([a, b, 3.0 * b], axis=1), ["m1", "m2", "m3"])
    assert len(dirs) == 1
    assert sorted(dirs[0].names) == ["m2", "m3"]
    np.testing.assert_allclose(np.abs(dirs[0].weights), [1 / math.sqrt(2)] * 2, atol=1e-6)
    assert "m2" in dirs[0].describe() and "m3" in dirs[0].describe()
    assert unidentifiable_directions(np.stack([a, b], axis=1), ["x", "y"]) == []


def test_strong_correlations() -> None:
    corr = np.array([[1.0, 0.99, np.nan], [0.99, 1.0, -0.97], [np.nan, -0.97, 1.0]])
    assert strong_correlations(corr, ["a", "b", "c"], 0.95) == [("a", "b", 0.99), ("b", "c", -0.97)]


def test_nrmse() -> None:
    t = np.linspace(0, 1, 200)
    y = np.stack([np.sin(6 * t), np.full_like(t, 2.0)], axis=1)
    np.testing.assert_allclose(nrmse(y, y), [0.0, 0.0])
    np.testing.assert_allclose(nrmse(y[:, :1], np.full((200, 1), y[:, 0].mean())), [1.0])
    # A constant signal is scaled by its RMS.
    np.testing.assert_allclose(nrmse(y[:, 1:], y[:, 1:] + 0.2), [0.1])
    bad = y.copy()
    bad[3, 0] = np.nan
    assert np.isnan(nrmse(y, bad)[0])


def test_decimate_indices_keeps_peaks_and_bounds_size() -> None:
    n = 10_000
    v = np.zeros(n)
    v[4321] = 5.0
    v[777] = -3.0
    idx = decimate_indices(v, 200)
    assert idx.size <= 200 and idx[0] == 0 and idx[-1] == n - 1
    assert 4321 in idx and 777 in idx and np.all(np.diff(idx) > 0)
    np.testing.assert_array_equal(decimate_indices(np.arange(50.0), 100), np.arange(50))
    assert decimate_indices(np.zeros((n, 3)), 100).size <= 100


def _pd(*params: ms.Parameter) -> ms.ParameterDict:
    return ms.ParameterDict(params)


def test_parameter_rows_flags() -> None:
    init = _pd(
        ms.Parameter("a", 1.0, 0.0, 2.0),
        ms.Parameter("v", [1.0, 2.0], [0, 0], [5, 5]),
        ms.Parameter("f", 3.0, 0.0, 5.0, frozen=True),
    )
    final = init.copy()
    final.update_from_vector(np.array([2.0, 1.5, 0.0]))
    conf = Confidence(
        ["a", "v[0]", "v[1]"],
        np.array([2.0, 1.5, 0.0]),
        np.array([0.01, np.inf, 0.3]),
        np.eye(3),
        0.05,
    )
    rows = parameter_rows(init, final, conf)
    assert [r.name for r in rows] == ["a", "v[0]", "v[1]", "f"]
    assert [r.group for r in rows] == ["a", "v", "v", "f"]
    a, v0, v1, f = rows
    assert a.at_upper and not a.at_lower and a.flags == ["at upper bound"]
    assert a.rel_change == pytest.approx(1.0)
    assert not v0.identifiable and "unidentifiable" in v0.flags
    assert v1.at_lower and v1.large_interval and v1.flags == ["at lower bound", "large interval"]
    assert v1.rel_change == pytest.approx(-1.0)
    assert f.frozen and f.flags == ["frozen"] and math.isnan(f.half_width)
    # Without intervals nothing is called unidentifiable.
    assert all(r.identifiable for r in parameter_rows(init, final, None))


def test_collect_warnings_in_words() -> None:
    row = ParameterRow(
        "a", "a", "", 1.0, 1.0, 2.0, 0.0, 2.0, math.inf, 1.0, False, True, False, False, False
    )
    from mjsysid.output.report import SignalError

    errs = [
        SignalError("arm/s1", "j1_pos", "j1_pos", 0.9, 0.5),
        SignalError("arm/s1", "j2_pos", "j2_pos", 0.9, 0.01),
    ]
    ws = collect_warnings(
        [row],
        opt_result=None,
        condition=1e9,
        directions=[Direction(0.0, ["a", "b"], [0.7, -0.7])],
        correlations=[("a", "b", 0.99)],
        errors=errs,
        notes=["note"],
    )
    cats = [w.category for w in ws]
    assert cats == [
        "confidence",
        "bounds",
        "identifiability",
        "conditioning",
        "correlation",
        "signals",
    ]
    assert "ended at a bound" in ws[1].message and "a = 2 at its upper bound 2" in ws[1].details
    assert "not identifiable" in ws[2].message and "0.70·a − 0.70·b" in ws[2].details[0]
    assert "κ = 1e+09" in ws[3].message
    assert "j1_pos" in ws[5].details[0] and not any("j2_pos" in d for d in ws[5].details)
    assert collect_warnings([]) == []
    # a stalled fit is a success, but the report says what it means
    stalled = SimpleNamespace(success=True, status="stalled", message="Converged: ...")
    (w,) = collect_warnings([], opt_result=stalled)
    assert w.category == "optimizer" and "stalled" in w.message and "non-smooth cost" in w.message
    assert collect_warnings([], opt_result=SimpleNamespace(success=True, status="gtol")) == []


def test_residual_autocorrelation_and_its_warning():
    """An AR(1) residual with ρ = 0.9 is measured as such and flagged with its interval
    inflation √((1+ρ)/(1−ρ)) ≈ 4.4; white residuals and an exact fit are not flagged."""
    from mjsysid.output.report import ResidualCorrelation, residual_autocorrelation

    rng = np.random.default_rng(0)
    n = 4000
    t = np.arange(n) * 0.01
    ar = np.zeros(n)
    for k in range(1, n):
        ar[k] = 0.9 * ar[k - 1] + rng.standard_normal()
    y = np.stack([np.sin(t), np.cos(t), 2 + np.sin(3 * t)], axis=1)

    def pred(err, name="s"):
        meas = ms.TimeSeries.from_custom_map(t, y, ["a", "b", "c"])
        at = ms.TimeSeries.from_custom_map(t, y - err, ["a", "b", "c"])
        return SimpleNamespace(
            model_name="m", sequence_name=name, measured_used=meas, predicted_at_measured=at
        )

    white = rng.standard_normal((n, 3)) * 0.01
    colored = white.copy()
    colored[:, 1] = 0.01 * ar
    got = residual_autocorrelation([pred(white), pred(colored, "t"), pred(np.zeros((n, 3)))])
    assert [(c.sequence, c.signal) for c in got] == [("m/s", s) for s in "abc"] + [
        ("m/t", s) for s in "abc"
    ]  # the exact fit is left out
    rho = {(c.sequence, c.signal): c.rho for c in got}
    assert abs(rho[("m/s", "b")]) < 0.05 and abs(rho[("m/t", "b")] - 0.9) < 0.03
    (w,) = collect_warnings([], autocorrelation=got)
    assert w.category == "confidence" and "1 signal(s) are correlated in time" in w.message
    assert "b in m/t" in w.message and "×4.4" in w.message
    assert "too narrow" in w.message and "confidence: {method: auto}" in w.message
    # HAC and bootstrap intervals already allow for the correlation: said, not "too narrow"
    (hac,) = collect_warnings([], autocorrelation=got, interval_method="hac")
    assert "account for it: a Newey-West (HAC) sandwich" in hac.message
    assert "too narrow" not in hac.message and "b in m/t" in hac.message
    (boot,) = collect_warnings([], autocorrelation=got, interval_method="bootstrap")
    assert "block bootstrap" in boot.message and "too narrow" not in boot.message
    assert collect_warnings([], autocorrelation=[ResidualCorrelation("m/s", "a", 0.3)]) == []


def test_section_data_from_a_real_fit(fit: Fit) -> None:
    conf = compute_confidence(fit.result, fit.rf)
    rows = parameter_rows(fit.params, fit.opt_params, conf)
    assert [r.name for r in rows] == ["j1_damping", "j2_damping"]
    assert rows[1].at_upper and not rows[0].at_upper and not rows[0].at_lower
    errs = signal_errors(fit.rf.predict(None, fit.params), fit.rf.predict(None, fit.opt_params))
    assert [e.column for e in errs] == ["j1_pos", "j2_pos", "j1_vel", "j2_vel"]
    assert all(e.identified < e.initial for e in errs)
    trace = optimisation_trace(fit.result)
    # 800 samples: the default horizons="auto" fits on the first 10 % and 30 % first
    stages = [st.summary() for st in fit.result.stages]
    assert trace is not None and [st.label for st in trace.early] == ["first 10 %", "first 30 %"]
    assert trace.early[0].cost[0] == stages[0]["initial_cost"]
    assert trace.early[0].cost[-1] == stages[0]["cost"]
    assert trace.early[1].iterations[0] == trace.early[0].iterations[-1] == stages[0]["nit"]
    assert trace.iterations[0] == stages[0]["nit"] + stages[1]["nit"]
    assert trace.cost[0] == stages[2]["initial_cost"]
    assert trace.cost[-1] == pytest.approx(fit.result.cost, rel=1e-12)
    assert trace.candidates.shape == (trace.cost.size, 2)
    assert math.isfinite(condition_number(fit.result.jac))


def test_points_per_trace_budget(fit: Fit) -> None:
    preds = fit.rf.predict(None, fit.opt_params)  # 4 columns, 2 actuators: 22 lines
    assert rep.points_per_trace(preds, 1000, 2_000_000) == 1000
    assert rep.points_per_trace(preds, 1000, 22 * 300) == 300
    assert rep.points_per_trace(preds, 1000, 1000) == 100  # never below 100 per line
    assert rep.points_per_trace(preds * 100, 1000, 2_000_000) == 2_000_000 // 2_200


def test_measured_qpos_from_joint_sensors(fit: Fit) -> None:
    from mjsysid.output.report.videos import measured_qpos, states_from_qpos

    model = fit.seq.model
    meas = fit.seq.sensordata[0]
    qpos, missing = measured_qpos(model, meas)
    assert missing == [] and qpos is not None
    np.testing.assert_allclose(qpos, meas.data[:, :2])
    states = states_from_qpos(model, fit.seq.initial_state[0], meas.times, qpos)
    assert states.shape == (meas.times.size, fit.seq.initial_state[0].size)
    np.testing.assert_allclose(states[:, 0], meas.times)
    vel_only = meas.slice_by_name(["j1_vel", "j2_pos"])
    qpos, missing = measured_qpos(model, vel_only)
    assert qpos is None and missing == ["j1"]


# -- the report --------------------------------------------------------------------------------
def test_report_from_a_real_fit(fit: Fit, tmp_path: Path) -> None:
    folder = tmp_path / "not" / "yet" / "there"
    out = default_report(
        [fit.seq],
        fit.params,
        fit.opt_params,
        fit.result,
        fit.rf,
        str(folder),
        title="Arm <damping> fit",
    )
    assert out == folder / "report.html" and out.is_file()
    html = out.read_text(encoding="utf-8")
    assert "<title>Arm &lt;damping&gt; fit</title>" in html  # escaped
    for section in (
        "summary",
        "warnings",
        "parameters",
        "fit",
        "signals",
        "correlation",
        "trace",
        "videos",
    ):
        assert f'<section id="{section}">' in html
    # Offline: no remote URL is referenced; plotly.js is the installed package's own copy.
    assert not re.search(r'(src|href)="(https?:)?//', html)
    sources = re.search(r'id="mjsysid-plotly">\["(file://[^"]+)"', html)
    assert sources is not None and sources[1].endswith("/plotly/package_data/plotly.min.js")
    assert "Plotly" in Path(sources[1][len("file://") :]).read_text(encoding="utf-8")[:5000]
    # Summary and warnings.
    assert fit.result.status in html and "4000" in html
    assert "j2_damping = 0.2 at its upper bound 0.2" in html
    assert 'data-category="bounds"' in html
    # Figures: controls + one per measured column, correlation, trace.
    figs = figures_of(html)
    assert {"s0u", "s0c0", "s0c1", "s0c2", "s0c3", "corr", "trace_cost", "trace_paths"} <= set(figs)
    names = [t["name"] for t in figs["s0c0"]["data"]]
    assert names == ["measured", "initial", "identified", "initial", "identified"]
    assert [t.get("yaxis") for t in figs["s0c0"]["data"]][-1] == "y2"  # residual panel
    assert figs["corr"]["data"][0]["x"] == ["j1_damping", "j2_damping (at its bound)"]
    # Videos: rendered when offscreen OpenGL works, else the section says why.
    gifs = sorted((folder / "report_assets").glob("video-*.gif"))
    if gifs:
        assert gifs[0].read_bytes()[:6] == b"GIF89a"
        assert 'src="report_assets/video-0.gif"' in html and "measured joint positions" in html
    else:
        assert "No videos:" in html and "MUJOCO_GL=egl" in html
    assert not list(folder.glob(".report-*"))


def test_report_accepts_path_and_overwrites(fit: Fit, tmp_path: Path) -> None:
    for _ in range(2):
        out = default_report(
            fit.seq, fit.params, fit.opt_params, fit.result, fit.rf, tmp_path, videos=False
        )
    assert out == tmp_path / "report.html"
    html = out.read_text(encoding="utf-8")
    assert "Videos are turned off (videos=False, or --no-videos)." in html
    assert not list((tmp_path / "report_assets").glob("*.gif"))


def test_report_lists_horizon_stages(fit: Fit, tmp_path: Path) -> None:
    opt, res = ms.optimize(fit.params, fit.rf, horizons=(0.5, 1.0))
    html = default_report(fit.seq, fit.params, opt, res, fit.rf, tmp_path, videos=False).read_text(
        encoding="utf-8"
    )
    first, last = (st.summary() for st in res.stages)
    assert "<th>Horizon stages</th>" in html
    assert f"50 %: {first['nit']} iterations, {first['nfev']} evaluations" in html
    assert f"100 %: {last['nit']} iterations" in html
    # the cost trace: the early stage dotted on its own data, then the whole data from there
    head, whole = figures_of(html)["trace_cost"]["data"]
    assert head["name"] == "first 50 % of the data" and whole["name"] == "whole data"
    assert head["y"] == pytest.approx(first["objective"]) and head["line"]["dash"] == "dot"
    assert head["x"][-1] == whole["x"][0] == first["nit"]
    assert whole["y"][0] == pytest.approx(last["initial_cost"])
    assert "the dotted costs are on the first part only" in html
    # a last stage run from two points says which end it kept
    res.stages[-1] = dataclasses.replace(res.stages[-1], two_starts=TwoStarts("start", 0.5))
    html = default_report(fit.seq, fit.params, opt, res, fit.rf, tmp_path, videos=False).read_text(
        encoding="utf-8"
    )
    assert (
        "(also run from the fit&#39;s start; from the early stages&#39; end it ended at 0.5: "
        "the start&#39;s end kept)" in html
    )


def test_report_with_a_signal_transform(fit: Fit, tmp_path: Path) -> None:
    params = fit.params.copy()
    params.add(ms.Parameter("pos_bias", 0.0, -1.0, 1.0))
    transform = ms.SignalTransform().bias("*_pos", "pos_bias")
    rf = ms.build_residual_fn([fit.seq], modify_residual=transform.apply)
    try:
        opt, res = ms.optimize(params, rf, max_iters=3)
        out = default_report(fit.seq, params, opt, res, rf, tmp_path, videos=False)
    finally:
        rf.close()
    html = out.read_text(encoding="utf-8")
    assert "pos_bias" in html
    figs = figures_of(html)
    assert {"s0c0", "s0c3"} <= set(figs)
    assert html.count('data-fig="s0c') == 4


def test_report_inline_plotly_is_one_file(fit: Fit, tmp_path: Path) -> None:
    out = fit.report(
        tmp_path,
        videos=False,
        inline_plotly=True,
    )
    html = out.read_text(encoding="utf-8")
    assert "<script src=" not in html and len(html) > 1_000_000
    assert not list((tmp_path / "report_assets").glob("*.js"))


def test_report_without_gl_says_why(
    fit: Fit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mjsysid.output import plotting

    monkeypatch.setattr(plotting, "gl_backend_candidates", lambda: [])
    out = default_report(
        fit.seq, fit.params, fit.opt_params, fit.result, fit.rf, tmp_path, videos=True
    )
    html = out.read_text(encoding="utf-8")
    assert "No videos:" in html and "MUJOCO_GL=egl" in html and "osmesa" in html


def test_failure_mid_write_leaves_no_report(
    fit: Fit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = report_html._write_file
    written: list[str] = []

    def failing(path: Path, payload: bytes) -> None:
        if path.name == "report.html":
            raise OSError("No space left on device")
        written.append(path.name)
        real(path, payload)

    monkeypatch.setattr(report_html, "_write_file", failing)
    with pytest.raises(OSError, match="No space left"):
        default_report(
            fit.seq, fit.params, fit.opt_params, fit.result, fit.rf, tmp_path / "r",
            videos=False, plotly_js="copy",
        )  # fmt: skip
    assert written  # the assets were being written when it failed
    assert not (tmp_path / "r" / "report.html").exists()
    assert not list((tmp_path / "r").glob(".report-*"))
    # A previous complete report survives a failed rewrite untouched.
    monkeypatch.setattr(report_html, "_write_file", real)
    out = default_report(
        fit.seq, fit.params, fit.opt_params, fit.result, fit.rf, tmp_path / "r", videos=False
    )
    before = out.read_bytes()
    monkeypatch.setattr(report_html, "_write_file", failing)
    with pytest.raises(OSError):
        fit.report(
            tmp_path / "r",
            videos=False,
            title="new",
        )
    assert out.read_bytes() == before
    assert not list((tmp_path / "r").glob(".report-*"))


def test_missing_dependencies_message(
    fit: Fit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[report\]' in the mjsysid checkout"):
        fit.report(tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_missing_dependencies_lists_nothing_here(monkeypatch: pytest.MonkeyPatch) -> None:
    assert rep.missing_dependencies() == []
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else real(name, *a)
    )
    assert rep.missing_dependencies() == ["plotly"]


def test_bad_arguments(fit: Fit, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="videos must be 'auto', True or False"):
        default_report(
            fit.seq, fit.params, fit.opt_params, fit.result, fit.rf, tmp_path, videos="yes"
        )
    with pytest.raises(TypeError, match=r"save_dir must be a str or os\.PathLike"):
        fit.report(3)
    with pytest.raises(TypeError, match="models_sequences must be a ModelSequences"):
        default_report([], fit.params, fit.opt_params, fit.result, fit.rf, tmp_path)
    with pytest.raises(TypeError, match="unexpected keyword"):
        default_report(
            fit.seq, fit.params, fit.opt_params, fit.result, fit.rf, tmp_path, colour="red"
        )
    args = (fit.seq, fit.params, fit.opt_params, fit.result, fit.rf, tmp_path)
    for name, value, expected in (
        ("alpha", 5, r"in \(0, 1\)"),
        ("large_error", float("nan"), "> 0"),
        ("cond_threshold", -1, "> 1"),
        ("correlation_threshold", 2, r"in \(0, 1\]"),
        ("video_fps", 0, "> 0"),
        ("max_video_seconds", True, "> 0"),
    ):
        with pytest.raises(ValueError, match=rf"{name} must be a finite number {expected}, got"):
            default_report(*args, **{name: value})
    with pytest.raises(ValueError, match="videos must be 'auto', True or False, got 1"):
        default_report(*args, videos=1)
    with pytest.raises(TypeError, match="opt_result must be the OptimizeResult of mjsysid"):
        default_report(fit.seq, fit.params, fit.opt_params, None, fit.rf, tmp_path)
    other = fit.params.copy()
    other.add(ms.Parameter("extra", 1.0, 0.0, 2.0))
    with pytest.raises(ValueError, match=r"opt_params must be the fitted parameters of opt_resu"):
        default_report(fit.seq, fit.params, other, fit.result, fit.rf, tmp_path)
    assert not (tmp_path / "report.html").exists()  # nothing written before the checks pass


def test_report_modules_do_not_import_heavy_dependencies() -> None:
    code = (
        "import sys, mjsysid, mjsysid.output.report, mjsysid.output.plotting; "
        "print(sorted(m for m in ('plotly', 'jinja2', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def big_problem(fit: Fit, p_scalar: int = 40, p_arrays: int = 40) -> tuple[Any, ...]:
    """200 free entries (40 scalars + 40 four-vectors), 3 frozen, 2 unidentifiable."""
    params = ms.ParameterDict()
    for i in range(p_scalar):
        params.add(
            ms.Parameter(
                f"link{i:02d}_mass",
                1.0 + 0.01 * i,
                0.1,
                10.0,
                meta={"kind": "body_mass", "target": f"link{i:02d}"},
            )
        )
    for i in range(p_arrays):
        params.add(
            ms.Parameter(
                f"act{i:02d}_gains",
                np.ones(4),
                np.zeros(4),
                np.full(4, 5.0),
                meta={"kind": "actuator_gains"},
            )
        )
    for i in range(3):
        params.add(ms.Parameter(f"frozen{i}", 1.0, 0.0, 2.0, frozen=True))
    p = params.size
    rng = np.random.default_rng(3)
    n = 600
    J = rng.normal(size=(n, p))
    J[:, 5] = J[:, 4]  # two parameters with the same effect: unidentifiable
    r = 0.05 * rng.normal(size=n)
    x = params.as_vector() + 0.1 * rng.normal(size=p)
    lo, hi = params.get_bounds()
    x = np.clip(x, lo, hi)
    x[0] = hi[0]  # at a bound
    opt = params.copy()
    opt.update_from_vector(x)
    names = params.get_non_frozen_parameter_names()
    result = OptimizeResult(
        x=x,
        cost=0.5 * float(r @ r),
        fun=r,
        jac=J,
        grad=J.T @ r,
        status="max_iters",
        success=False,
        message="Stopped after max_iters=5 iterations before converging.",
        nfev=1200,
        njev=6,
        nit=5,
        initial_cost=50.0,
        wall_time=12.5,
        parameter_names=names,
        optimizer="mujoco",
        history=FitHistory(
            [50.0, 10.0, 2.0, 1.0, 0.9, 0.5 * float(r @ r)],
            [params.as_vector() + k * (x - params.as_vector()) / 5 for k in range(6)],
        ),
    )
    cov, half = calculate_intervals(r, J)
    conf = Confidence(names, x, half, cov, 0.05)
    return params, opt, result, conf


def test_report_with_200_parameters(fit: Fit, tmp_path: Path) -> None:
    params, opt, result, conf = big_problem(fit)
    out = default_report(
        fit.seq, params, opt, result, None, tmp_path, confidence=conf, videos=False
    )
    html = out.read_text(encoding="utf-8")
    assert html.count("data-order=") == 203  # one row per entry, frozen included
    assert "act39_gains[3]" in html
    assert "No signal plots: pass the ResidualFunction" in html
    figs = figures_of(html)
    z = figs["corr"]["data"][0]["z"]
    assert len(z) == 200 and z[4][4] is None and z[0][0] == 1.0  # NaN -> null, drawn grey
    assert figs["corr"]["data"][1]["z"][4][0] == 1
    assert figs["corr"]["layout"]["xaxis"]["showticklabels"] is False
    assert len(figs["trace_paths"]["data"]) == 30
    for cat in ("optimizer", "bounds", "identifiability", "conditioning"):
        assert f'data-category="{cat}"' in html
    # a frozen parameter is grey (class frozen), never red (class flagged)
    rows = re.findall(
        r'<tr data-order="\d+" data-flagged="(\d)"[^>]*?(?:class="([^"]*)")?>\s*'
        r'<td class="t name" title="([^"]*)"',
        html,
    )
    by_name = {name: (flagged, css.split()) for flagged, css, name in rows}
    assert by_name["frozen0"][0] == "0" and "frozen" in by_name["frozen0"][1]
    assert "flagged" not in by_name["frozen0"][1]
    assert by_name["link00_mass"][0] == "1" and "flagged" in by_name["link00_mass"][1]


def test_report_in_headless_chromium(fit: Fit, browser: DevTools, tmp_path: Path) -> None:
    out = default_report(
        fit.seq, fit.params, fit.opt_params, fit.result, fit.rf, tmp_path / "report"
    )
    s = open_page(browser, out.resolve().as_uri())
    # Plots in view are drawn by plotly (SVG) as soon as the page is ready.
    assert browser.wait_for(s, "document.querySelectorAll('#signals .main-svg').length") > 0
    top = screenshot(browser, s, tmp_path / "report-top.png")
    assert top.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and top.stat().st_size > 20_000
    # Every figure is drawn on load, without scrolling (a screenshot or a PDF shows them).
    n_figs = browser.evaluate(s, "document.querySelectorAll('[data-fig]').length")
    drawn = browser.evaluate(s, "document.querySelectorAll('.js-plotly-plot').length")
    assert drawn == n_figs >= 8
    assert browser.evaluate(s, "document.querySelectorAll('#correlation .main-svg').length") > 0
    assert browser.evaluate(s, "document.documentElement.scrollWidth <= window.innerWidth")
    browser.evaluate(s, "document.getElementById('signals').scrollIntoView()")
    screenshot(browser, s, tmp_path / "report-signals.png")
    # Sorting the table by the identified value (descending on the second click).
    order = browser.evaluate(
        s,
        """(() => {
        const th = [...document.querySelectorAll('#param-table th')]
            .find(t => t.textContent.trim() === 'identified');
        th.querySelector('button').click(); th.querySelector('button').click();
        return [...document.querySelectorAll('#param-table tbody tr')]
            .map(r => r.cells[0].textContent); })()""",
    )
    values = {r.name: r.value[0] for r in fit.opt_params.values()}
    assert order == sorted(values, key=lambda k: -values[k])
    if (tmp_path / "report" / "report_assets" / "video-0.gif").exists():
        assert browser.evaluate(s, "document.querySelector('#videos img').naturalWidth") == 320
    errors, remote, urls = page_problems(browser, s)
    assert errors == []
    assert remote == []
    assert any(u.startswith("file://") and u.endswith(".min.js") for u in urls)  # recorded


def test_report_with_200_parameters_in_headless_chromium(
    fit: Fit, browser: DevTools, tmp_path: Path
) -> None:
    params, opt, result, conf = big_problem(fit)
    out = default_report(
        fit.seq, params, opt, result, None, tmp_path / "big", confidence=conf, videos=False
    )
    s = open_page(browser, out.resolve().as_uri())
    info = browser.evaluate(s, "document.querySelector('#param-pager .info').textContent")
    assert info == "rows 1–50 of 203"
    visible = "[...document.querySelectorAll('#param-table tbody tr')].filter(r => !r.hidden)"
    assert browser.evaluate(s, f"{visible}.length") == 50
    # The page never scrolls sideways: the table scrolls inside its own box.
    assert browser.evaluate(s, "document.documentElement.scrollWidth <= window.innerWidth")
    # Filtering and the flagged-only switch.
    browser.evaluate(
        s,
        """(() => { const f = document.getElementById('param-filter');
        f.value = 'act07'; f.dispatchEvent(new Event('input')); return true; })()""",
    )
    assert browser.evaluate(s, f"{visible}.map(r => r.cells[0].textContent)") == [
        f"act07_gains[{i}]" for i in range(4)
    ]
    browser.evaluate(
        s,
        """(() => { const f = document.getElementById('param-filter');
        f.value = ''; f.dispatchEvent(new Event('input'));
        const c = document.getElementById('param-flagged'); c.checked = true;
        c.dispatchEvent(new Event('change')); return true; })()""",
    )
    flagged = browser.evaluate(s, f"{visible}.map(r => r.cells[0].textContent)")
    assert {"link00_mass", "link04_mass", "link05_mass"} <= set(flagged)
    assert "frozen0" not in flagged  # frozen is marked grey, not flagged
    browser.evaluate(s, "document.getElementById('correlation').scrollIntoView()")
    assert browser.wait_for(s, "document.querySelectorAll('#correlation .main-svg').length") > 0
    assert browser.evaluate(s, "document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(browser, s, tmp_path / "report-200-correlation.png")
    browser.evaluate(s, "document.getElementById('parameters').scrollIntoView()")
    screenshot(browser, s, tmp_path / "report-200-parameters.png")
    errors, remote, _ = page_problems(browser, s)
    assert errors == [] and remote == []


def test_report_counts_its_videos_to_progress(fit: Fit, tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    fit.report(
        tmp_path,
        videos="auto",
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls and calls[0] == (0, calls[0][1]) and calls[0][1] >= 1
    # all of them, or (without OpenGL here) up to the first, where rendering stops
    assert calls[-1] in ((calls[0][1], calls[0][1]), (0, calls[0][1]))
    calls.clear()
    fit.report(tmp_path, videos=False)
    assert calls == []


# -- a windowed fit: the stitched whole-recording view ------------------------------------------
@pytest.fixture(scope="module")
def windowed(fit: Fit) -> Iterator[SimpleNamespace]:
    """The arm's 1.6 s recording fitted in 0.4 s shooting windows (one iteration)."""
    windows = ms.split_windows(fit.seq, 0.4)
    rf = ms.build_residual_fn([windows])
    opt, res = ms.optimize(fit.params, rf, max_iters=1, horizons=None)
    yield SimpleNamespace(windows=windows, rf=rf, opt=opt, res=res)
    rf.close()


def test_recordings_stitch_the_windows_of_each_recording() -> None:
    from mjsysid.output.report.stitching import recordings

    def pred(name: str, t0: float, model: str = "m") -> SimpleNamespace:
        t = t0 + np.arange(5) * 0.1
        ts = ms.TimeSeries.from_custom_map(t, t[:, None] * 2, ["a"])
        return SimpleNamespace(
            model_name=model,
            sequence_name=name,
            measured_used=ts,
            predicted_at_measured=ts,
            predicted=ts,
            control=np.zeros((5, 0)),
        )

    preds = [pred("r#1", 0.4), pred("plain", 0.0), pred("r#0", 0.0), pred("r#2", 0.8)]
    preds += [pred("r#0", 0.0, "other")]  # one window of another model: drawn as it is
    recs = recordings(None, preds)
    assert [r.p1.sequence_name for r in recs] == ["r", "plain", "r#0"]
    whole = recs[0]
    assert [w1.sequence_name for _, w1 in whole.windows] == ["r#0", "r#1", "r#2"]
    np.testing.assert_allclose(whole.starts, [0.4, 0.8])
    np.testing.assert_allclose(whole.p1.measured_used.times, np.arange(13) * 0.1, atol=1e-12)
    assert whole.p0 is None and recs[1].windows == [] and recs[1].p1 is preds[1]


def test_whole_recording_errors_join_the_windows() -> None:
    from mjsysid.output.report.stitching import whole_recording_errors

    rng = np.random.default_rng(3)
    meas = rng.normal(size=(10, 1)) + np.linspace(0, 3, 10)[:, None]
    pred = meas + rng.normal(scale=0.2, size=meas.shape)

    def window(k: int) -> SimpleNamespace:
        t = np.arange(5 * k, 5 * k + 5) * 0.1
        rows = slice(5 * k, 5 * k + 5)
        m = ms.TimeSeries.from_custom_map(t, meas[rows], ["a"])
        p = ms.TimeSeries.from_custom_map(t, pred[rows], ["a"])
        return SimpleNamespace(
            model_name="m", sequence_name=f"r#{k}", measured_used=m,
            predicted_at_measured=p, predicted=p, control=np.zeros((5, 0)),
        )  # fmt: skip

    (e,) = whole_recording_errors(None, [window(1), window(0)])
    expected = np.sqrt(np.mean((meas - pred) ** 2) / np.mean((meas - meas.mean()) ** 2))
    assert (e.sequence, e.windows) == ("m/r", 2)
    assert e.identified == pytest.approx(expected, rel=1e-12)
    assert whole_recording_errors(None, [window(0)]) == []  # one window: nothing joined


def test_a_windowed_fit_shows_the_whole_recording_and_collapsed_windows(
    fit: Fit, windowed: SimpleNamespace, tmp_path: Path
) -> None:
    w = windowed
    out = default_report(w.windows, fit.params, w.opt, w.res, w.rf, tmp_path / "r", videos=False)
    html = out.read_text(encoding="utf-8")
    figs = figures_of(html)
    # One stitched view of the recording, its window starts marked in every figure.
    assert html.count('<details class="sequence"') == 1
    assert "arm/s1 <span" in html and "4 shooting windows" in html
    assert "4 shooting windows stitched into 1 whole-recording view" in html
    starts = [sh["x0"] for sh in figs["s0c0"]["layout"]["shapes"]]
    assert starts == pytest.approx([0.4, 0.8, 1.2], abs=0.003)
    assert figs["s0u"]["layout"]["shapes"][0]["x0"] == starts[0]
    assert len(figs["s0c0"]["data"][0]["x"]) == 800  # the whole recording
    # The per-window detail: collapsed, every window drawn (5 figures each, under the limit).
    assert '<details class="windows">' in html and '<details class="windows" open' not in html
    assert html.count('<details class="window">') == 4
    assert {f"s0w{k}c0" for k in range(4)} | {"s0w3u"} <= set(figs)
    assert "arm/s1#3" in html and "Only the first" not in html
    # The fit table: the recording as a whole, then its windows as detail rows.
    table = html[html.index('<table class="data" id="fit-table"') :]
    table = table[: table.index("</table>")]
    assert 'data-detail="fit-windows"' in html and "each window (" in html
    whole = [r for r in table.split("<tr")[2:] if 'data-detail="0"' in r]
    detail = [r for r in table.split("<tr")[2:] if 'data-detail="1"' in r]
    assert whole and all("arm/s1 (4 windows joined)" in r for r in whole)
    assert len(detail) == 4 * len(whole) and all("arm/s1#" in r for r in detail)


def test_the_per_window_figures_are_bounded_by_the_limit(
    fit: Fit, windowed: SimpleNamespace, tmp_path: Path
) -> None:
    from mjsysid.util.limits import limits_set

    w = windowed
    with limits_set(max_report_figures=12):  # 5 figures a window: 2 windows
        out = default_report(
            w.windows, fit.params, w.opt, w.res, w.rf, tmp_path / "r", videos=False
        )
    html = out.read_text(encoding="utf-8")
    figs = figures_of(html)
    assert html.count('<details class="window">') == 2 and "s0w2c0" not in figs
    assert "Only the first 2 of 4 windows are drawn in detail" in html
    assert "max_report_figures=12" in html and "s0c0" in figs
    assert "mjsysid.util.limits.limits_set(max_report_figures=N)" in html  # Python words
    from mjsysid.fit.status import MessageContext
    from mjsysid.output.report.format import raise_limit

    assert raise_limit("max_report_figures", MessageContext("file")) == (
        "limits: {max_report_figures: N}"
    )


def test_windowed_report_in_headless_chromium(
    fit: Fit, windowed: SimpleNamespace, browser: DevTools, tmp_path: Path
) -> None:
    w = windowed
    out = default_report(w.windows, fit.params, w.opt, w.res, w.rf, tmp_path / "r", videos=False)
    s = open_page(browser, out.resolve().as_uri())
    assert browser.wait_for(s, "document.querySelectorAll('#signals .main-svg').length") > 0
    # The window starts are drawn as lines on the stitched view.
    browser.evaluate(s, "document.querySelector('[data-fig=\"s0c0\"]').scrollIntoView()")
    shapes = "document.querySelectorAll('[data-fig=\"s0c0\"] .shapelayer path').length"
    assert browser.wait_for(s, shapes) == 3
    # Closed windows draw nothing; opening one draws its figures.
    inside = "document.querySelectorAll('details.window .js-plotly-plot').length"
    assert browser.evaluate(s, inside) == 0
    browser.evaluate(
        s,
        """(() => { document.querySelector('details.windows').open = true;
        const d = document.querySelector('details.window'); d.open = true;
        d.scrollIntoView(); return true; })()""",
    )
    assert browser.wait_for(s, f"{inside} >= 1") >= 1
    # The fit table hides the per-window rows until asked.
    shown = "[...document.querySelectorAll('#fit-table tbody tr')].filter(r => !r.hidden)"
    whole = browser.evaluate(s, f"{shown}.length")
    assert whole >= 1 and browser.evaluate(s, f"{shown}.every(r => r.dataset.detail === '0')")
    browser.evaluate(
        s, "(() => { const b = document.getElementById('fit-windows'); b.click(); return true; })()"
    )
    assert browser.evaluate(s, f"{shown}.length") == 5 * whole
    screenshot(browser, s, tmp_path / "report-windows.png")
    errors, remote, _ = page_problems(browser, s)
    assert errors == [] and remote == []


def test_the_report_has_the_audit_of_the_final_jacobian(fit: Fit, tmp_path: Path) -> None:
    out = default_report(
        fit.seq, fit.params, fit.opt_params, fit.result, fit.rf, tmp_path / "r", videos=False
    )
    html = out.read_text(encoding="utf-8")
    assert '<section id="audit">' in html
    assert '<a href="#audit">What the data determine</a>' in html
    section = html[html.index('<section id="audit">') :]
    section = section[: section.index("</section>")]
    assert "1 of 2 parameters determined, 1 not determined" in section
    assert "The audit of the final Jacobian" in section
    assert "The 2 singular values of the range-scaled Jacobian span" in section
    # the verdict per parameter is the table's: j2 is held at its bound
    table = html[html.index('id="param-table"') :]
    verdicts = re.findall(r'<td class="t verdict (\w*)"', table[: table.index("</table>")])
    assert verdicts == ["ok", "bad"] and "held at its bound" in table


def test_report_warnings_speak_the_readers_language() -> None:
    from mjsysid.fit.status import MessageContext

    stalled = SimpleNamespace(success=True, status="stalled", message="")
    windowed = MessageContext("file", contacts=False, dry_friction=False, windowed=True)
    (w,) = collect_warnings([], opt_result=stalled, context=windowed)
    assert "stalled" in w.message and "optimizer: {global: cmaes}" in w.message
    assert "shooting" not in w.message and "contact" not in w.message
    assert "split_windows" not in w.message
    (w,) = collect_warnings([], opt_result=stalled, context=MessageContext("python"))
    assert "split_windows(sequences, 1.0)" in w.message and "shooting:" not in w.message
    failed = SimpleNamespace(
        success=False, status="max_iters", message="Stopped after max_iters=5 iterations ..."
    )
    (w,) = collect_warnings([], opt_result=failed, context=MessageContext("file"))
    assert w.message.endswith("raise optimizer: {max_iters: N} (or --max-iters N).")


def test_a_python_report_names_python_remedies(fit: Fit, tmp_path: Path) -> None:
    res = dataclasses.replace(fit.result, status="max_iters", success=False)
    out = default_report(
        fit.seq, fit.params, fit.opt_params, res, fit.rf, tmp_path / "r", videos=False
    )
    html = out.read_text(encoding="utf-8")
    assert "raise max_iters or restart from this result" in html
    assert "optimizer: {max_iters" not in html
    with pytest.raises(ValueError, match="messages must be one of"):
        default_report(
            fit.seq, fit.params, fit.opt_params, res, fit.rf, tmp_path / "r", messages="yaml"
        )


def test_the_report_says_when_the_model_cannot_reproduce_the_data(fit: Fit, tmp_path: Path):
    """Issue #31: the whiteness caveat (j2's truth lies beyond its bound: the residual is
    smooth) is in the report with the signals named, as in confidence.yaml and the CLI."""
    html = fit.report(tmp_path / "r", videos=False).read_text(encoding="utf-8")
    found = re.search(r"the model cannot reproduce the data: the residuals are not white "
                      r"\(Durbin-Watson (j\d_(pos|vel)) ", html)  # fmt: skip
    assert found, "no whiteness caveat in the report"
    assert "Newey-West (HAC) sandwich" in html


def test_the_status_badge_warns_when_a_converged_fit_does_not_reproduce_the_data(
    fit: Fit, tmp_path: Path
):
    """The badge follows the message: a converged fit whose residual is far above its noise
    (more than 10x: the message then says "Stopped at a minimum that does not reproduce the
    data") gets the warning colour, not the converged one."""
    from mjsysid.fit.status import FAR_ABOVE_NOISE

    html = fit.report(tmp_path / "r", videos=False).read_text(encoding="utf-8")
    conf = compute_confidence(fit.result, fit.rf, params=fit.opt_params)
    far = conf.whiteness is not None and conf.whiteness.noise_ratio > FAR_ABOVE_NOISE
    assert fit.result.success and far  # this fixture: j2's truth beyond its bound
    assert '<span class="badge warn">' in html and '<span class="badge ok">' not in html
    assert "Stopped at a minimum that does not reproduce the data" in html
