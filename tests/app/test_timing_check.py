"""``mjsysid fit`` checks the command timing before fitting (quickly), ``--no-timing-check``
skips it."""

from __future__ import annotations

import io
import shutil
import time
from pathlib import Path

import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.app.commands.check import QUICK_FRACTION, QUICK_ITERS, quick_shift_check
from mjsysid.app.experiment import bundled_examples, load_experiment


def _fit(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    code = main(["fit", *argv, "--no-report"], stdout=io.StringIO(), stderr=err)
    return code, err.getvalue()


@pytest.fixture
def misdeclared(tmp_path: Path) -> Path:
    """The arm example with ``command_timing: before`` declared: its commands one row out of
    step (the recordings hold them as applied from sample k)."""
    box = tmp_path / "arm"
    shutil.copytree(bundled_examples()["arm"].parent, box)
    path = box / "experiment.yaml"
    doc = yaml.safe_load(path.read_text())
    for seq in doc["sequences"]:
        seq["command_timing"] = "before"
    doc["optimizer"]["max_iters"] = 3
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_fit_warns_before_fitting_when_a_shift_fits_markedly_better(
    misdeclared: Path, tmp_path: Path
):
    code, err = _fit(str(misdeclared), "--out", str(tmp_path / "out"))
    assert code == 0, err
    warning = next(line for line in err.splitlines() if "command timing" in line)
    assert warning.startswith("warning: command timing: with the commands one row later")
    assert f"({QUICK_ITERS} iterations on the first {100 * QUICK_FRACTION:g} % of the data)" in (
        warning
    )
    assert "costs by shift -1: " in warning and "Fix: commands one row later" in warning
    assert warning.endswith("(skip this check with --no-timing-check)")
    assert err.index("command timing") < err.index("iterations,")  # before the fit's summary


def test_no_timing_check_flag_skips_it(misdeclared: Path, tmp_path: Path):
    code, err = _fit(str(misdeclared), "--out", str(tmp_path / "out"), "--no-timing-check")
    assert code == 0 and "command timing" not in err


def test_right_timing_gives_no_warning_and_the_check_is_cheap(tmp_path: Path):
    exp = load_experiment("example:arm")
    t0 = time.perf_counter()
    check = quick_shift_check(exp)
    assert time.perf_counter() - t0 < 5.0  # (about 0.2 s alone; 2 s is the aim on dcmotor)
    assert check.best == 0 and check.message() == ""
    assert check.iterations == QUICK_ITERS and check.fraction == QUICK_FRACTION
    code, err = _fit("example:arm", "--out", str(tmp_path / "out"), "--max-iters", "2")
    assert code == 0 and "command timing" not in err
