"""What ``mjsysid fit`` says after a fit speaks the experiment file's language (keys and
flags, not Python calls) and names only remedies that can apply (issue #19)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.app.experiment import bundled_examples

PYTHON_WORDS = ("split_windows", "optimize(", "global_search=", "initial_state_params", "Python:")


def _example(tmp_path: Path, name: str, **optimizer) -> Path:
    folder = tmp_path / name
    shutil.copytree(bundled_examples()[name].parent, folder)
    exp = folder / "experiment.yaml"
    data = yaml.safe_load(exp.read_text())
    data["optimizer"].update(optimizer)
    exp.write_text(yaml.safe_dump(data))
    return exp


def _fit(exp: Path, out: Path, *extra: str) -> str:
    """What the fit said on stderr and stdout (with -q the status is on stdout)."""
    err, stdout = io.StringIO(), io.StringIO()
    code = main(["fit", str(exp), "--out", str(out), *extra], stdout=stdout, stderr=err)
    assert code == 0, err.getvalue()
    return err.getvalue() + stdout.getvalue()


@pytest.mark.parametrize("quiet", [False, True])
def test_a_small_step_stop_names_experiment_keys(tmp_path: Path, quiet: bool):
    exp = _example(tmp_path, "arm", xtol=0.5, gtol=0.0, horizons="none")
    err = _fit(exp, tmp_path / "res", "--no-report", *(["-q"] if quiet else []))
    assert "Not converged: the fit stopped on a small step" in err
    assert "shooting: {window: 1.0, estimate_initial_state: true}" in err
    assert "optimizer: {horizons: auto}, or --horizons 0.25 1" in err
    assert not any(w in err for w in PYTHON_WORDS), err
    saved = yaml.safe_load((tmp_path / "res" / "result.yaml").read_text())
    assert "shooting: {window:" in str(saved) and "split_windows" not in str(saved)


def test_a_windowed_motor_gets_no_window_or_contact_advice(tmp_path: Path):
    pytest.importorskip("jinja2")
    pytest.importorskip("plotly")
    exp = _example(tmp_path, "dcmotor", max_iters=1, horizons="none")
    err = _fit(exp, tmp_path / "res", "-q")
    assert (
        "Stopped after max_iters=1 iterations before converging; raise optimizer: "
        "{max_iters: N} (or --max-iters N)." in err
    )
    html = (tmp_path / "res" / "report.html").read_text(encoding="utf-8")
    for text in (err, html):
        assert not any(w in text for w in PYTHON_WORDS)
        assert "contacts" not in text and "shooting: {window" not in text
    assert "raise optimizer: {max_iters: N} (or --max-iters N)" in html
