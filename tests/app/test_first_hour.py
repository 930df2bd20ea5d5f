"""A newcomer's first runs: the time by phase, intervals computed once, plain counts."""

from __future__ import annotations

import io
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import mjsysid.fit.confidence as confidence_module
import mjsysid.output.results as results_module
from mjsysid.app.cli import main
from mjsysid.app.commands.common import Phases
from mjsysid.app.experiment import bundled_examples


def _fit(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    code = main(["fit", "example:box", *argv], stdout=io.StringIO(), stderr=err)
    return code, err.getvalue()


def test_the_whole_time_is_reported_by_phase(tmp_path: Path):
    code, err = _fit("--out", str(tmp_path / "o"))
    assert code == 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("time ")
    for phase in ("loading", "fitting", "intervals", "saving", "report"):
        assert f"{phase} " in last
    assert "[fitting] ..." not in err  # (its iteration lines show it going on)
    code, err = _fit("--out", str(tmp_path / "o"), "-q", "--no-report")
    assert code == 0 and "time " not in err  # -q: the answer only


def test_slow_phases_announce_themselves_unless_quiet():
    err = io.StringIO()
    ph = Phases(err, announce_after=0.0)
    with ph("loading"):
        time.sleep(0.05)
    assert err.getvalue() == "[loading] ...\n"
    assert ph.seconds["loading"] >= 0.05
    assert (
        ph.summary() == f"time {ph.seconds['loading']:.1f} s: loading {ph.seconds['loading']:.1f} s"
    )
    quiet = io.StringIO()
    with Phases(quiet, quiet=True, announce_after=0.0)("fitting"):
        time.sleep(0.05)
    assert quiet.getvalue() == ""
    with ph("fitting", announce=False):  # a phase whose own lines show it going on
        time.sleep(0.05)
    assert err.getvalue() == "[loading] ...\n" and ph.seconds["fitting"] >= 0.05


def test_intervals_are_computed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    calls: list[int] = []
    real = confidence_module.compute_confidence

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(confidence_module, "compute_confidence", counted)
    monkeypatch.setattr(results_module, "compute_confidence", counted)
    code, _ = _fit("--out", str(tmp_path / "o"), "-q")
    assert code == 0
    assert len(calls) == 1


def test_counts_are_in_good_english(tmp_path: Path):
    code, err = _fit("--out", str(tmp_path / "o"), "--no-report")
    assert code == 0
    assert "1 sequence of 'box'" in err and "1 sequences" not in err


def test_report_rebuilds_a_demo_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from mjsysid.lab.demo import identify

    lines: list[str] = []
    found = identify(tmp_path / "demo", quick=True, report=False, say=lines.append)
    assert (found.folder / "run.yaml").is_file()
    assert main(["report", str(found.folder)]) == 0, capsys.readouterr().err
    assert (found.folder / "report.html").is_file()


def test_the_nav_counts_the_rows_of_the_parameter_table(tmp_path: Path):
    import re

    # the arm example has a frozen parameter: a row of the table, not a fitted value
    err = io.StringIO()
    code = main(["fit", "example:arm", "--out", str(tmp_path / "o"), "-q"], stderr=err)
    assert code == 0, err.getvalue()
    html = (tmp_path / "o" / "report.html").read_text()
    table = html[html.index('<section id="parameters"') : html.index('<section id="fit"')]
    rows = len(re.findall(r'<tr data-order="', table))
    assert f'<a href="#parameters">Parameters ({rows})</a>' in html


def test_the_report_and_confidence_yaml_agree_on_bounds():
    from mjsysid.fit.confidence import Confidence
    from mjsysid.output.report.content import parameter_rows
    from mjsysid.params.parameter import Parameter, ParameterDict

    init = ParameterDict([Parameter("a", 1.0, 0.0, 2.0)])
    final = init.copy()
    final.update_from_vector(np.array([2.0 - 1e-7]))  # within the report's own tolerance
    names, x = ["a"], np.array([2.0 - 1e-7])
    inside = Confidence(names, x, np.array([0.1]), np.eye(1), 0.05, at_bound=np.array([0]))
    (row,) = parameter_rows(init, final, inside)
    assert not row.at_upper and "at upper bound" not in row.flags
    at = Confidence(names, x, np.array([0.1]), np.eye(1), 0.05, at_bound=np.array([1]))
    (row,) = parameter_rows(init, final, at)
    assert row.at_upper


def test_the_box_example_opens_clean(tmp_path: Path):
    from mjsysid.util.files import read_yaml

    err = io.StringIO()
    assert main(["fit", "example:box", "--out", str(tmp_path / "o"), "-q"], stderr=err) == 0
    html = (tmp_path / "o" / "report.html").read_text()
    assert "No warnings:" in html
    assert "cannot reproduce" not in html
    assert '<span class="badge ok">' in html  # a converged fit at its noise: the green badge
    assert "large interval" not in html.split('<section id="parameters"')[1].split("<section")[0]
    assert read_yaml(tmp_path / "o" / "result.yaml")["success"]


def test_noise_only_columns_are_not_called_unreproducible():
    from mjsysid.output.report.content import SignalError, _white_columns
    from mjsysid.output.report.warnings import _large_errors

    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 500)
    data = np.stack([np.sin(2 * np.pi * t), rng.normal(size=t.size)], axis=1)
    assert _white_columns(data).tolist() == [False, True]

    errors = [
        SignalError("m/s", "pos", "pos[0]", 1.0, 0.9, noise_only=False),
        SignalError("m/s", "pos", "pos[1]", 1.0, 1.0, noise_only=True),
    ]
    (warning,) = _large_errors(SimpleNamespace(errors=errors, large_error=0.2))  # type: ignore[arg-type]
    assert "1 signal column(s)" in warning.message and "pos[1]" not in " ".join(warning.details)


@pytest.mark.parametrize("name", sorted(bundled_examples()))
def test_every_bundled_example_can_take_a_global_stage(name: str):
    """`mjsysid fit example:NAME --global cmaes` samples the box of the physical values: every
    bundled example gives them finite bounds (the initial states get theirs from shooting)."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.objective.initial_state import nuisance_mask

    params = load_experiment(f"example:{name}").params
    lo, hi = params.get_bounds()
    physical = ~nuisance_mask(params)
    names = np.array(params.get_non_frozen_parameter_names())
    infinite = names[physical & ~(np.isfinite(lo) & np.isfinite(hi))]
    assert infinite.size == 0, f"example:{name}: infinite bounds on {infinite.tolist()}"
