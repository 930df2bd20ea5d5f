"""The report as a reader meets it: the answer first, one source for every figure, units on
every axis, every plot drawn in a static capture and in print, plotly.js found offline after
the folder moved, a bounded size with many signals, and videos one per recording.

Each browser check opens the written page in Debian's headless ``chromium``
(:mod:`report_support`) at 1400 px.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mujoco
import numpy as np
import pytest
from report_support import DevTools, Fit, figures_of, open_page, page_problems

import mjsysid as ms
from mjsysid.fit.audit import Audit, Combination, ParameterAudit
from mjsysid.output.report import ParameterRow, collect_warnings, default_report
from mjsysid.output.report.content import SignalError, with_verdicts
from mjsysid.output.report.format import error_rows
from mjsysid.output.report.units import control_unit, sensor_unit, signal_unit
from mjsysid.util.limits import limits_set

pytest_plugins = ("report_support",)  # the fixtures fit and browser

pytest.importorskip("jinja2", reason="the report needs the report extra (jinja2)")
pytest.importorskip("plotly", reason="the report needs the report extra (plotly)")


@pytest.fixture(scope="module")
def windowed_fit(fit: Fit) -> Iterator[SimpleNamespace]:
    """The arm fitted in 0.4 s shooting windows with their initial states estimated (16
    nuisance parameters next to the 2 dampings), its own recording held out."""
    from mjsysid.fit.validation import validation_table

    windows = ms.split_windows(fit.seq, 0.4)
    params = fit.params.copy()
    for p in ms.initial_state_params(windows).values():
        params.add(p)
    rf = ms.build_residual_fn([windows])
    hold = ms.build_residual_fn([fit.seq])
    opt, res = ms.optimize(params, rf, max_iters=2, horizons=None)
    table = validation_table(params, opt, rf, hold)
    yield SimpleNamespace(windows=windows, params=params, rf=rf, opt=opt, res=res, table=table)
    rf.close()
    hold.close()


def _report(w: SimpleNamespace, folder: Path, **options: Any) -> str:
    out = default_report(
        w.windows, w.params, w.opt, w.res, w.rf, folder, validation=w.table, **options
    )
    return out.read_text(encoding="utf-8")


def _section(html: str, sid: str) -> str:
    start = html.index(f'<section id="{sid}">')
    return html[start : html.index("</section>", start)]


# -- the answer first ----------------------------------------------------------------------------
def test_the_report_leads_with_the_answer(windowed_fit: SimpleNamespace, tmp_path: Path) -> None:
    html = _report(windowed_fit, tmp_path / "r", videos=False)
    order = ["summary", "warnings", "parameters", "audit", "states", "validation", "fit"]
    order += ["signals", "correlation", "trace", "videos"]
    at = [html.index(f'<section id="{s}">') for s in order]
    assert at == sorted(at), "sections out of order"
    # the headline table holds the physical parameters only; the window starts are apart
    params = _section(html, "parameters")
    assert params.count("<tr data-order=") == 2 and "j1_damping" in params
    assert "_qpos0" not in params and "_qvel0" not in params
    states = _section(html, "states")
    assert states.count("<tr data-order=") == 16 and "arm/s1#3/j2_qvel0" in states
    assert '<details class="nuisance">' in states  # collapsed
    # the summary counts the windows, it does not list them
    summary = _section(html, "summary")
    assert "4 shooting windows" in summary and "s1#0" not in summary
    assert "2 physical" in summary and '16 <a href="#states">initial states</a>' in summary
    assert "Held-out fit" in summary and "arm/s1: j1_pos" in summary
    # the held-out table lists the held-out rows only, with units
    validation = _section(html, "validation")
    assert validation.count("<tr><td") == 4 and '<td class="t">rad</td>' in validation
    # nuisance states are in no map, no path plot and no warning's headline
    figs = figures_of(html)
    assert figs["corr"]["data"][0]["x"][0].startswith("j1_damping")
    assert len(figs["corr"]["data"][0]["x"]) == 2
    assert {t["name"] for t in figs["trace_paths"]["data"]} == {"j1_damping", "j2_damping"}
    for w in re.findall(r'<li data-category="[a-z]+"><span class="cat">[a-z]+</span>([^<]*)', html):
        assert "_qpos0" not in w and "_qvel0" not in w, w


# -- one source for each figure ------------------------------------------------------------------
def _row(name: str, hw: float, *, lower: float = 0.0, upper: float = 1.0) -> ParameterRow:
    return ParameterRow(
        name, name, "joint_damping", 0.5, 0.5, 0.5, lower, upper, hw, 0.0,
        False, False, False, not math.isinf(hw), False,
    )  # fmt: skip


def test_the_verdict_is_read_from_the_interval_and_agrees_with_the_audit() -> None:
    """The audit said "NOT determined" for b (a weak combination) and c (at its noise
    level); the table gives both finite, narrow intervals: b is then "only jointly" (its
    why names the combination) and c "determined"; d's interval is wider than its range."""
    rows = [_row("a", 0.01), _row("b", 0.1), _row("c", 0.05), _row("d", 0.6), _row("e", math.inf)]
    audit = Audit(
        np.ones(5),
        1.0,
        [ParameterAudit(n, 0.5, 1.0, 0.3, 1.0, n == "a") for n in "abcde"],
        [Combination(1e-4, "sum", ["b", "e"], [0.7, 0.7], "b and e: only their sum is determined")],
    )
    got = {r.name: (r.verdict, r.why) for r in with_verdicts(rows, audit)}
    assert got["a"] == ("determined", "")
    assert got["b"] == (
        "only jointly",
        "in a weak combination: b and e: only their sum is determined",
    )
    assert got["c"] == ("determined", "")
    assert got["d"][0] == "not determined" and "wider than its range (1)" in got["d"][1]
    assert got["e"][0] == "not determined" and "only their sum" in got["e"][1]
    flagged = {r.name: r.flags for r in with_verdicts(rows, audit)}
    assert flagged["b"] == ["weak combination"] and flagged["d"] == ["not determined"]
    # without intervals the audit's verdict stands, and says so
    bare = [_row(n, math.nan) for n in "ac"]
    assert [r.verdict for r in with_verdicts(bare, audit)] == ["determined", "not determined"]
    assert [r.verdict for r in with_verdicts(bare, None)] == ["", ""]


def test_the_page_has_one_kappa_one_warnings_list_and_agreeing_verdicts(
    windowed_fit: SimpleNamespace, tmp_path: Path
) -> None:
    html = _report(windowed_fit, tmp_path / "r", videos=False)
    assert len(re.findall(r"κ", html.split("<main>")[1])) == 1  # the summary's, nowhere else
    audit = _section(html, "audit")
    assert "ratio of" not in audit and "condition number" not in audit
    nav = re.search(r'<a href="#warnings">Warnings \((\d+)\)</a>', html)
    assert nav is not None
    n_warnings = html.count('<li data-category="')
    assert int(nav[1]) == n_warnings
    flagged = re.search(r'id="fit-flagged"> only flagged \((\d+)\)', html)
    assert flagged is not None
    if int(flagged[1]):
        assert 'data-category="signals"' in html
    # every "not determined" row has an infinite interval or says why it is not
    for table in ("param-table", "states-table"):
        body = html[html.index(f'id="{table}"') :]
        body = body[: body.index("</table>")]
        for row in body.split("<tr data-order=")[1:]:
            cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
            interval, verdict = cells[6], cells[7]
            if verdict.startswith("not determined") and interval != "(−∞, ∞)":
                assert "wider than its range" in verdict, row
    summary = _section(html, "summary")
    counts = re.search(r"(\d+) of (\d+) parameters determined", summary)
    assert counts is not None and counts[2] == "2"
    determined = _section(html, "parameters").count('class="t verdict ok"')
    assert int(counts[1]) == determined


def test_the_warnings_and_the_fit_table_flag_by_one_rule() -> None:
    """A pure-noise signal with a large NRMSE is marked, never flagged; a large error on a
    real signal is both a flagged row and a warning; the counts agree."""
    errors = [
        SignalError("m/s", "a", "a", 0.9, 0.5),
        SignalError("m/s", "b", "b", 1.0, 1.0, noise_only=True),
        SignalError("m/s", "c", "c", 0.5, 0.01),
        SignalError("m/s", "d", "d", 0.5, math.nan),
    ]
    rows = error_rows(errors, 0.2)
    assert [r["flagged"] for r in rows] == [True, False, False, True]
    assert rows[1]["noise_only"]
    warned = collect_warnings([], errors=errors, large_error=0.2)
    details = [d for w in warned if w.category == "signals" for d in w.details]
    assert details == ["m/s: a: NRMSE 0.9 → 0.5", "m/s: d"]
    assert len(details) == sum(r["flagged"] for r in rows)


# -- units -------------------------------------------------------------------------------------
UNITS_XML = """
<mujoco>
  <worldbody>
    <body name="cart">
      <joint name="slide" type="slide" axis="1 0 0"/>
      <geom type="box" size=".1 .1 .1" mass="1"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 .5" size=".02" mass=".1"/>
        <site name="tip" pos="0 0 .5"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="push" joint="slide"/>
    <motor name="geared" joint="hinge" gear="20"/>
    <motor name="command" joint="hinge" gear="0"/>
    <position name="servo" joint="hinge" kp="10"/>
    <velocity name="speed" joint="slide" kv="3"/>
    <dcmotor name="dc" joint="hinge" motorconst="0.05" resistance="2"/>
  </actuator>
  <sensor>
    <jointpos name="x" joint="slide"/><jointpos name="theta" joint="hinge"/>
    <jointvel name="xdot" joint="slide"/><jointvel name="omega" joint="hinge"/>
    <actuatorfrc name="f" actuator="push"/><accelerometer name="acc" site="tip"/>
    <framequat name="q" objtype="site" objname="tip"/><user name="u" dim="1"/>
  </sensor>
</mujoco>
"""


def test_units_of_sensors_joints_and_controls() -> None:
    m = mujoco.MjModel.from_xml_string(UNITS_XML)
    by_sensor = {m.sensor(i).name: sensor_unit(m, i) for i in range(m.nsensor)}
    assert by_sensor == {
        "x": "m", "theta": "rad", "xdot": "m/s", "omega": "rad/s", "f": "N",
        "acc": "m/s²", "q": "1", "u": "",
    }  # fmt: skip
    by_actuator = {m.actuator(i).name: control_unit(m, i) for i in range(m.nu)}
    assert by_actuator == {
        "push": "N", "geared": "×20 N·m", "command": "1", "servo": "rad",
        "speed": "m/s", "dc": "V",
    }  # fmt: skip
    assert signal_unit(m, "hinge", ms.SignalType.MjStateQVel) == "rad/s"
    assert signal_unit(m, "anything", ms.SignalType.CustomObs) == ""


def test_every_axis_has_a_unit(windowed_fit: SimpleNamespace, tmp_path: Path) -> None:
    figs = figures_of(_report(windowed_fit, tmp_path / "r", videos=False))
    titles = {
        fid: f["layout"]["yaxis"]["title"]["text"] for fid, f in figs.items() if fid != "corr"
    }
    assert titles["s0c0"] == "j1_pos [rad]" and titles["s0c2"] == "j1_vel [rad/s]"
    assert figs["s0c0"]["layout"]["yaxis2"]["title"]["text"] == "residual [rad]"
    assert titles["s0u"] == "control [N·m]"
    assert titles["trace_cost"] == "cost ½‖r‖²" and "[1]" in titles["trace_paths"]
    for fid, f in figs.items():
        for axis in ("xaxis", "yaxis"):
            text = f["layout"][axis].get("title", {}).get("text", "")
            counted = text.startswith(("cost", "iteration"))  # a cost and a count
            assert fid == "corr" or "[" in text or counted, (fid, axis, text)


def test_the_trace_marks_every_stage(fit: Fit, tmp_path: Path) -> None:
    opt, res = ms.optimize(fit.params, fit.rf, horizons=(0.3, 1.0))
    html = default_report(fit.seq, fit.params, opt, res, fit.rf, tmp_path, videos=False).read_text(
        encoding="utf-8"
    )
    figs = figures_of(html)
    cost, paths = figs["trace_cost"], figs["trace_paths"]
    switch = res.stages[0].nit
    assert [a["text"] for a in cost["layout"]["annotations"]] == ["→ whole data"]
    assert cost["layout"]["shapes"][0]["x0"] == switch == paths["layout"]["shapes"][0]["x0"]
    assert cost["layout"]["yaxis"]["type"] == "log"
    # the paths start at iteration 0 from the initial values (dotted over the early stage)
    dotted = [t for t in paths["data"] if t["line"].get("dash") == "dot"]
    assert len(dotted) == 2 and all(t["x"] == [0, switch] for t in dotted)
    assert sorted(t["customdata"][0] for t in dotted) == pytest.approx(
        sorted(fit.params.as_vector())
    )


# -- every plot drawn in a static capture and in print -------------------------------------------
def _drawn_everywhere(browser: DevTools, s: str) -> tuple[int, int]:
    """(figures that are not inside a closed <details>, those of them with a drawn plot)."""
    return tuple(
        browser.evaluate(
            s,
            """(() => {
            const shown = el => { for (let d = el.closest('details'); d;
                d = d.parentElement.closest('details')) { if (!d.open) return false; }
                return true; };
            const figs = [...document.querySelectorAll('[data-fig]')].filter(shown);
            const drawn = figs.filter(el => el.querySelector('.main-svg') &&
                el.querySelectorAll('.main-svg path, .main-svg image').length > 3);
            return [figs.length, drawn.length]; })()""",
        )
    )


def test_a_full_page_screenshot_and_a_pdf_show_every_plot(
    windowed_fit: SimpleNamespace, browser: DevTools, tmp_path: Path
) -> None:
    from PIL import Image

    out = tmp_path / "r"
    _report(windowed_fit, out, videos=False)
    s = open_page(browser, (out / "report.html").resolve().as_uri(), width=1400, height=900)
    shown, drawn = _drawn_everywhere(browser, s)
    assert shown == drawn >= 8  # drawn without scrolling: nothing waits for the viewport
    height = browser.evaluate(s, "document.documentElement.scrollHeight")
    shot = browser.call(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": 1400, "height": height, "scale": 1},
        },
        s,
    )["data"]
    image = Image.open(io.BytesIO(base64.b64decode(shot))).convert("L")
    (tmp_path / "full.png").write_bytes(base64.b64decode(shot))
    boxes = browser.evaluate(
        s,
        """[...document.querySelectorAll('.js-plotly-plot')].map(el => {
            const r = el.getBoundingClientRect();
            return [r.left, r.top + window.scrollY, r.width, r.height]; })""",
    )
    assert len(boxes) == drawn
    for x, y, w, h in boxes:  # every plot has ink in the capture (lines, ticks, labels)
        crop = np.asarray(image.crop((int(x), int(y), int(x + w), int(y + h))))
        assert crop.size and (crop < 200).mean() > 0.003, (x, y, w, h)
    browser.call("Emulation.setEmulatedMedia", {"media": "print"}, s)
    # on paper every plot is redrawn to fit the page's width (680 CSS px)
    fits = (
        "[...document.querySelectorAll('.js-plotly-plot')].every(el => el._fullLayout.width <= 680)"
    )
    assert browser.wait_for(s, fits)
    pdf = base64.b64decode(browser.call("Page.printToPDF", {"printBackground": True}, s)["data"])
    (tmp_path / "report.pdf").write_bytes(pdf)
    assert pdf[:5] == b"%PDF-" and len(pdf) > 50_000
    shown, drawn = _drawn_everywhere(browser, s)
    assert shown == drawn
    errors, remote, _ = page_problems(browser, s)
    assert errors == [] and remote == []


# -- plotly.js offline, shared or copied ---------------------------------------------------------
def _plotly_sources(html: str) -> list[str]:
    m = re.search(r'<script type="application/json" id="mjsysid-plotly">(.*?)</script>', html)
    assert m is not None
    return list(json.loads(m[1]))


def test_plotly_is_shared_and_found_after_the_folder_moved(
    fit: Fit, browser: DevTools, tmp_path: Path
) -> None:
    from mjsysid.output.report.plotly_source import shared_plotly_file

    first = fit.report(tmp_path / "a", videos=False)
    html = first.read_text(encoding="utf-8")
    shared = shared_plotly_file()
    assert shared is not None
    assert _plotly_sources(html) == [shared.as_uri(), "report_assets/plotly.min.js"]
    assert not list((tmp_path / "a" / "report_assets").glob("*.js"))  # no copy
    assert "<script src=" not in html and not re.search(r'(src|href)="(https?:)?//', html)
    shutil.move(tmp_path / "a", tmp_path / "moved")
    s = open_page(browser, (tmp_path / "moved" / "report.html").resolve().as_uri())
    shown, drawn = _drawn_everywhere(browser, s)
    assert shown == drawn > 0
    errors, remote, urls = page_problems(browser, s)
    assert errors == [] and remote == [] and shared.as_uri() in urls


def test_a_standalone_copy_and_a_missing_plotly_say_so(
    fit: Fit, browser: DevTools, tmp_path: Path
) -> None:
    html = fit.report(tmp_path / "c", videos=False, plotly_js="copy").read_text(encoding="utf-8")
    assert _plotly_sources(html)[0] == "report_assets/plotly.min.js"
    assert (tmp_path / "c" / "report_assets" / "plotly.min.js").stat().st_size > 1_000_000
    # a report whose plotly.js is nowhere: every figure says why and what to do
    broken = tmp_path / "c" / "report.html"
    broken.write_text(
        re.sub(r'(id="mjsysid-plotly">).*?(</script>)', r'\1["nowhere/plotly.js"]\2', html),
        encoding="utf-8",
    )
    s = open_page(browser, broken.resolve().as_uri())
    said = browser.evaluate(s, "document.querySelector('[data-fig]').textContent")
    assert said.startswith("plotly.js could not be loaded (nowhere/plotly.js)")
    assert "mjsysid report FOLDER" in said
    with pytest.raises(
        ValueError, match=r"plotly_js must be one of \['shared', 'copy', 'inline'\]"
    ):
        fit.report(tmp_path / "x", plotly_js="cdn")


# -- a bounded report with many signals ----------------------------------------------------------
def _many_signals(n: int) -> tuple[Any, ...]:
    sensors = "".join(f'<jointpos name="p{i}" joint="j1"/>' for i in range(n))
    from conftest import LIT_ARM

    spec = mujoco.MjSpec.from_string(LIT_ARM.format(tip="", sensors=sensors))
    model = spec.compile()
    params = ms.ParameterDict()
    params.add(ms.make_parameter("joint_damping", model, "j1", min_value=0.01, max_value=1.0))
    ctrl = np.repeat(np.random.default_rng(0).normal(size=(4, 2)), 25, axis=0)
    x0 = ms.create_initial_state(model, qpos=[0.1, -0.2])
    traj = ms.sysid_rollout(model, None, ctrl, x0)[0]
    seq = ms.ModelSequences(
        "many", spec, "s", x0,
        ms.TimeSeries.from_control_names(traj.times, ctrl, model),
        ms.TimeSeries.from_names(traj.times, traj.sensordata, model),
    )  # fmt: skip
    rf = ms.build_residual_fn([seq])
    opt, res = ms.optimize(params, rf, max_iters=1, horizons=None)
    return seq, params, opt, res, rf


def test_a_report_with_many_signals_is_capped_and_says_what_it_left_out(tmp_path: Path) -> None:
    seq, params, opt, res, rf = _many_signals(300)
    try:
        with limits_set(max_report_signals=40):
            out = default_report(seq, params, opt, res, rf, tmp_path / "capped", videos=False)
        full = default_report(seq, params, opt, res, rf, tmp_path / "all", videos=False)
    finally:
        rf.close()
    html = out.read_text(encoding="utf-8")
    figs = figures_of(html)
    assert sum(1 for f in figs if re.fullmatch(r"s0c\d+", f)) == 40
    assert "40 of 300 signal figures are drawn, 260 left out" in html
    assert "max_report_signals=40" in html
    assert html.count('data-order="') >= 300  # every signal's fit is still in the table
    # the default limit (100 figures) bounds a 300-signal page too
    assert "100 of 300 signal figures are drawn" in full.read_text(encoding="utf-8")
    assert out.stat().st_size < 0.6 * full.stat().st_size < 6_000_000


# -- videos: one per recording, off on request ---------------------------------------------------
def test_a_windowed_recording_has_one_video(windowed_fit: SimpleNamespace, tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    html = _report(
        windowed_fit, tmp_path / "r", progress=lambda done, total: calls.append((done, total))
    )
    assert calls[0] == (0, 1)  # one recording, however many windows
    gifs = list((tmp_path / "r" / "report_assets").glob("video-*.gif"))
    if "No videos:" not in html:
        assert len(gifs) == 1 and "arm/s1</b>" in html


def test_no_videos_on_the_command_line(tmp_path: Path) -> None:
    from mjsysid.app.cli import main

    out = tmp_path / "o"
    err = io.StringIO()
    assert main(["fit", "example:box", "--out", str(out), "-q", "--no-videos"], stderr=err) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Videos are turned off" in html and not list((out / "report_assets").glob("*.gif"))
    assert main(["report", str(out), "--no-videos", "--standalone"], stderr=err) == 0
    assert (out / "report_assets" / "plotly.min.js").is_file()


def test_the_windows_of_a_recording_make_one_motion() -> None:
    """Videos are one per recording: the windows' states joined in time order (overlaps
    kept once), a plain sequence as it is; the limit counts recordings."""
    from mjsysid.output.report.videos import motions

    def pred(name: str, t0: float) -> SimpleNamespace:
        t = t0 + np.arange(5) * 0.1
        ts = ms.TimeSeries.from_custom_map(t, t[:, None], ["a"])
        state = np.stack([t, 10 * t], axis=1)
        return SimpleNamespace(
            model_name="m", sequence_name=name, measured_used=ts, measured=ts,
            predicted_at_measured=ts, predicted=ts, control=np.zeros((5, 0)), state=state,
        )  # fmt: skip

    got = motions(None, [pred("r#1", 0.4), pred("p", 0.0), pred("r#0", 0.0)])
    assert [m.label for m in got] == ["m/r", "m/p"]
    np.testing.assert_allclose(got[0].state[:, 0], np.arange(9) * 0.1, atol=1e-12)
    assert got[0].state0 is None and got[1].state.shape == (5, 2)
