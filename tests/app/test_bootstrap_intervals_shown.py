"""Bootstrap intervals as the fit shows them: the CLI table, the report, and the report
rebuilt from the results folder (``mjsysid report``)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from mjsysid.app.cli import main
from mjsysid.app.experiment import bundled_examples
from mjsysid.output.results import load_results


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _experiment(tmp_path: Path) -> Path:
    src = bundled_examples()["dcmotor"].parent
    for f in ("dcmotor.xml", "run1.csv"):
        shutil.copy(src / f, tmp_path / f)
    text = (src / "experiment.yaml").read_text()
    path = tmp_path / "experiment.yaml"
    path.write_text(text + "confidence: {method: bootstrap, draws: 20}\n")
    return path


def _parameter_section(html: str) -> str:
    m = re.search(r'<section id="parameters">.*?</section>', html, re.S)
    assert m is not None
    return m.group(0)


def test_the_fit_and_the_rebuilt_report_show_the_bootstrap_interval(tmp_path: Path) -> None:
    pytest.importorskip("jinja2", reason="the report needs the report extra (jinja2)")
    pytest.importorskip("plotly", reason="the report needs the report extra (plotly)")
    out = tmp_path / "o"
    code, table, err = _run(
        "fit", str(_experiment(tmp_path)), "--out", str(out), "-q", "--max-iters", "20"
    )
    assert code == 0, err
    # the CLI: the method in the header, each interval as its two ends
    head = next(s for s in table.splitlines() if s.startswith("parameter "))
    assert head.split()[:3] == ["parameter", "initial", "identified"]
    assert head.endswith("95 % block-bootstrap interval, 20 draws") and "±" not in head
    conf = load_results(out).confidence
    assert conf.method == "bootstrap" and conf.interval is not None
    k = conf.names.index("motor_kv")
    lo, hi = conf.interval[k]
    line = next(s for s in table.splitlines() if s.startswith("motor_kv "))
    assert line.endswith(f"[{lo:.4g}, {hi:.4g}]")
    # the report written by the fit
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<th>Intervals</th><td>95 % block-bootstrap interval, 20 draws</td>" in html
    section = _parameter_section(html)
    assert "the percentiles of the refits" in section
    assert "bootstrap: 20 draws over 10 blocks" in section  # the caveat
    # rebuilt from the folder: the same parameter table, intervals and caveats
    (out / "report.html").unlink()
    code, _, err = _run("report", str(out))
    assert code == 0, err
    again = (out / "report.html").read_text(encoding="utf-8")
    assert _parameter_section(again) == section
    assert "<th>Intervals</th><td>95 % block-bootstrap interval, 20 draws</td>" in again
