"""``mjsysid fit`` in a terminal: ``-q`` is the answer only, window starts are one line,
iteration lines say i/max, elapsed time and an ETA, stages are labelled, and Ctrl-C
saves the parameters and exits within seconds."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mjsysid.app.cli import main
from mjsysid.util.progress import IterationClock, clock_time, iteration_line

_ITER = re.compile(
    r"^(first \d+ %  )?iter +\d+/\d+  cost \d\.\d{6}e[+-]\d\d  "
    r"elapsed \d+:\d\d  ETA <= (\d+:\d\d|\?)$"
)


def test_the_iteration_line_says_i_of_max_elapsed_and_eta():
    line = iteration_line(3, 100, 1.2345678e-3, 2.4, 65.2, "first 30 %  ")
    assert line == "first 30 %  iter    3/100  cost 1.234568e-03  elapsed 0:02  ETA <= 1:05"
    assert clock_time(3725) == "1:02:05" and clock_time(float("nan")) == "?"
    clock = IterationClock(started=time.monotonic() - 10.0)
    # 10 s for iterations 5 and 6 (a resumed fit's first line is iteration 5): 5 s each
    clock.line(5, 20, 1.0)
    eta = clock.line(6, 20, 1.0).rsplit("ETA <= ", 1)[1]
    assert eta in ("1:10", "1:11")  # 14 iterations left at 5 s


def _fit(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["fit", "example:dcmotor", "--out", str(tmp_path / "r"), "--no-report"]
    code = main([*argv, "--no-timing-check", *extra], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_quiet_gives_the_answer_only(tmp_path):
    code, out, err = _fit(tmp_path, "-q")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Converged") and "(status " in lines[0]
    assert lines[1].split() == ["parameter", "initial", "identified", "±", "95", "%"]
    assert [ln.split()[0] for ln in lines[2:7]] == [
        "motor_deadband_pos",
        "motor_deadband_neg",
        "motor_gain_neg",
        "motor_filter_tau",
        "motor_kv",
    ]
    assert lines[7] == "30 window-start parameters (see params_x_hat.yaml)"
    assert lines[8] == f"results: {tmp_path / 'r'}"
    assert len(lines) == 9  # no validation table, no per-window rows
    assert err == ""  # no progress, stages, phases or caveats


def test_progress_lines_label_the_stages_and_summarise_the_window_starts(tmp_path):
    code, out, err = _fit(tmp_path)
    assert code == 0
    assert "fitting 35 values on 10 windows of 1 recording of 'dcmotor'" in err
    assert "stage 1/2: the first 30 % of every sequence or window" in err
    assert "stage 2/2: the whole data" in err
    iters = [ln for ln in err.splitlines() if " iter " in f" {ln}"]
    assert iters and all(_ITER.match(ln) for ln in iters), iters
    assert "initial_qpos" not in out  # the 30 window starts are one line
    assert "30 window-start parameters (see params_x_hat.yaml)" in out
    # the validation: one line per recording and signal, not one per window
    assert "run1#" not in out
    table = out.split("fitted windows (median and worst window):\n", 1)[1].splitlines()
    assert table[0].split()[:3] == ["recording", "signal", "windows"]
    row = table[1].split()
    assert row[:3] == ["run1", "encoder", "10"] and float(row[4].rstrip("%")) > 95


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_saves_the_parameters_and_exits_at_once(tmp_path):
    out = tmp_path / "r"
    cli = ["fit", "example:dcmotor", "--out", str(out)]
    cli += ["--no-timing-check", "--horizons", "none", "--max-iters", "200"]
    # Ctrl-C's handler installed in the child: a test run from a background job (SIGINT
    # ignored, which a child inherits and Python then keeps) still sees Ctrl-C as a user would
    start = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        f"sys.argv = ['mjsysid'] + {cli!r}; "
        "runpy.run_module('mjsysid.app.cli', run_name='__main__')"
    )
    argv = [sys.executable, "-c", start]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        argv, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + 60
    for line in proc.stderr:
        seen.append(line)
        if _ITER.match(line.rstrip("\n")) or time.monotonic() > deadline:
            break
    assert any(_ITER.match(ln.rstrip("\n")) for ln in seen), seen
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    assert proc.returncode == 130, "".join(seen) + rest
    assert took < 3.0, f"exited {took:.1f} s after Ctrl-C"
    assert (out / "params_x_hat.yaml").is_file()
    assert "was interrupted after" in (out / "INTERRUPTED.txt").read_text()
    assert not (out / "result.yaml").exists() and not (out / "report.html").exists()
    assert "interrupted: the best parameters so far are in" in rest


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["--set", "actuator_kv:motr=0.004"], "no actuator named 'motr'; known: ['motor']"),
        (["--set", "control_deadband:Motor=0.1"], "actuators: ['motor']"),
        (["--set", "sensor_delay:encodr=0.01"], "sensors: ['encoder']"),
    ],
)
def test_a_misspelt_target_gets_did_you_mean(tmp_path, argv, hint):
    from mjsysid.app.experiment import bundled_examples

    model = bundled_examples()["dcmotor"].parent / "dcmotor.xml"
    err = io.StringIO()
    code = main(
        ["simulate", str(model), "--out", str(tmp_path / "s.csv"), *argv],
        stdout=io.StringIO(),
        stderr=err,
    )
    assert code == 1 and hint in err.getvalue()
    close = "'encoder'" if "sensor" in argv[1] else "'motor'"
    assert err.getvalue().rstrip().endswith(f"; did you mean {close}?")
