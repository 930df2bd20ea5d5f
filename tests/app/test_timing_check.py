"""The timing check: one function (:func:`timing_check`) for ``mjsysid check`` and for
``mjsysid fit`` before it fits, the same numbers in both; ``--no-timing-check`` skips it;
``mjsysid check``'s exit codes; the two-rate servo clock that a retime must not touch."""

from __future__ import annotations

import io
import re
import shutil
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_law_state_starts import write_geared_experiment

from mjsysid.app.cli import main
from mjsysid.app.commands import check
from mjsysid.app.experiment import bundled_examples, load_experiment
from mjsysid.app.timing_check import ITERATIONS, SHIFT_RATIO, plausible_shifts, timing_check
from mjsysid.data.clock import clock_report, retime_plan
from mjsysid.data.json_logs import read_json_log
from mjsysid.data.recording import load_recording
from mjsysid.data.timing import TimingWarning

SERVO = bundled_examples()["servo"].parent
LIFT_AND_DROP = SERVO / "2024-10-26_12h23m42.json"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _copy(tmp_path: Path, example: str, edit) -> Path:
    box = tmp_path / example
    shutil.copytree(bundled_examples()[example].parent, box)
    path = box / "experiment.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def misdeclared(tmp_path: Path) -> Path:
    """The arm example with ``command_timing: before`` declared: its commands one row early
    (the recordings hold them as applied from sample k)."""

    def edit(doc: dict) -> None:
        for seq in doc["sequences"]:
            seq["command_timing"] = "before"
        doc["optimizer"]["max_iters"] = 2

    return _copy(tmp_path, "arm", edit)


def test_commands_one_row_early_are_caught_with_the_same_numbers_in_check_and_fit(
    misdeclared: Path, tmp_path: Path
):
    code, out, err = _cli("check", str(misdeclared))
    assert code == check.EXIT_WARNINGS
    numbers = re.search(r"timing check: (cost by row shift .*)", out)
    assert numbers is not None, out
    warning = next(x for x in err.splitlines() if "command timing" in x)
    assert warning.startswith("warning: command timing: with the commands one row later")
    assert "if command_timing: before is declared, remove it" in warning
    ratio = float(re.search(r"reaches (\S+) times", warning)[1])  # type: ignore[index]
    assert ratio < 0.2  # a clear trap: the right timing fits many times better
    # mjsysid fit runs the same check before fitting: the same costs, to the digit
    code, _out, err = _cli("fit", str(misdeclared), "--out", str(tmp_path / "o"), "--no-report")
    assert code == 0, err
    fit_warning = next(x for x in err.splitlines() if "command timing" in x)
    assert numbers[1] in fit_warning
    assert fit_warning.endswith("(skip this check with --no-timing-check)")
    assert err.index("command timing") < err.index("iterations,")  # before the fit's summary


def test_no_timing_check_flag_skips_it(misdeclared: Path, tmp_path: Path):
    code, _out, err = _cli(
        "fit", str(misdeclared), "--out", str(tmp_path / "o"), "--no-report", "-q",
        "--no-timing-check",
    )  # fmt: skip
    assert code == 0 and "command timing" not in err and "timing check" not in err


def test_right_timing_is_quiet_and_the_check_is_cheap():
    exp = load_experiment("example:arm")
    t0 = time.perf_counter()
    result = timing_check(exp)
    assert time.perf_counter() - t0 < 5.0  # (about 0.5 s alone)
    assert result.best == 0 and result.messages() == []
    assert result.iterations == ITERATIONS and result.windows > 10
    assert max(result.costs[-1], result.costs[1]) > 5 * result.costs[0]


def test_a_filtered_actuator_does_not_raise_a_false_alarm():
    """dcmotor: a filter actuator (na = 1) on an encoder; the windows' start activations are
    fitted (the nominal simulation's would make a shift look better)."""
    result = timing_check(load_experiment("example:dcmotor"))
    assert result.best == 0 and result.messages() == [], result.describe()


def test_check_exit_codes(tmp_path: Path):
    assert _cli("check", str(tmp_path / "missing.yaml"))[0] == check.EXIT_UNREADABLE == 3
    assert _cli("check", "example:nope")[0] == check.EXIT_UNREADABLE
    broken = tmp_path / "broken.yaml"
    arm = bundled_examples()["arm"].parent / "arm.xml"
    broken.write_text(f"model: {arm}\nsequences: []\nunknown_key: 1\n")
    code, _out, err = _cli("check", str(broken))
    assert code == check.EXIT_ERRORS == 2 and err.startswith("error: ")
    code, out, err = _cli("check", "example:arm")
    assert (code, err) == (check.EXIT_CLEAN, "") and out.rstrip().endswith("ok")


def test_declared_before_with_notes_only_exits_0(tmp_path: Path):
    """The servo logs declared ``command_timing: before``: the loader's notes (what happened
    at the edges, the two-rate clock of one log) are notes, not warnings."""

    def edit(doc: dict) -> None:
        for seq in doc["sequences"]:
            seq["command_timing"] = "before"
        doc["shooting"] = {"estimate_initial_state": True}  # (else a warning says to)

    path = _copy(tmp_path, "servo", edit)
    code, out, err = _cli("check", str(path), "--no-shift-check")
    assert code == check.EXIT_CLEAN, err
    assert "warning" not in err
    assert "note: " in err and "the clock changes rate: rows 0-95 at 20.5 ms" in err
    assert re.search(r"ok, \d+ note\(s\)", out)


def test_the_two_rate_servo_clock_is_named_and_retime_refuses_it():
    times = read_json_log(LIFT_AND_DROP).columns["timestamp"]
    report = clock_report(times)
    assert report.describe_segments() == "rows 0-95 at 20.5 ms, rows 96-353 at 15.2 ms"
    plan = retime_plan(times)
    assert plan.refused.startswith("the rate changes within the recording")
    assert plan.max_move > 5 * report.period  # what a retime would do: hundreds of ms
    one_rate = read_json_log(SERVO / "2024-10-26_12h23m27.json").columns["timestamp"]
    assert not clock_report(one_rate).rate_changes


def test_applying_retime_to_the_two_rate_log_warns_with_the_largest_move(tmp_path: Path):
    def edit(doc: dict) -> None:
        doc["sequences"][1]["retime"] = True

    path = _copy(tmp_path, "servo", edit)
    found = [w for w in load_experiment(path).warnings if "retime: True moves row" in w]
    assert len(found) == 1 and "sequences[1]" in found[0]  # the experiment's warning
    move = float(re.search(r"by (\S+) ms", found[0])[1])  # type: ignore[index]
    assert move > 100  # it says how far: whole periods, not jitter
    assert "the rate changes within the recording" in found[0] and "remove retime" in found[0]
    # the same as a TimingWarning when the recording is loaded alone
    with pytest.warns(TimingWarning, match=r"retime: True moves row \d+ by"):
        load_recording(LIFT_AND_DROP, load_experiment("example:servo").model, retime=True,
                       time="timestamp", sensors={"angle": "position"},
                       inputs=["goal_position", "torque_enable"],
                       ignore_columns=["speed", "load", "input_volts", "temp"])  # fmt: skip


@pytest.mark.slow  # (12 s on the shared machine)
def test_servo_force_laws_check_is_quiet_and_refuses_the_retimes():
    """Force laws with recorded inputs (goal position, torque enable): the inputs are the
    commands that move; the declared timing fits best; no retime is offered for these
    clocks (two rates in one log, more than 0.9 of a period of moves in the others)."""
    result = timing_check(load_experiment("example:servo"))
    assert result.best == 0 and result.ratio == 1.0, result.describe()
    assert min(result.costs[-1], result.costs[1]) > result.costs[0] / SHIFT_RATIO
    assert result.retimes and all(r.refused and not r.helps for r in result.retimes)
    assert any("rate changes" in r.refused for r in result.retimes)
    assert np.isnan([r.cost for r in result.retimes]).all()


def _furuta_captured_before(tmp_path: Path, declare: bool) -> Path:
    """The Furuta example (force laws: commanded torque with a deadzone, Coulomb and viscous
    friction) as the source document's firmware logs it: row k holds the command applied
    *before* sample k (the files' command column moved one row later)."""

    def edit(doc: dict) -> None:
        for seq in doc["sequences"]:
            if declare:
                seq["command_timing"] = "before"

    path = _copy(tmp_path, "furuta", edit)
    for name in ("run1.csv", "run2.csv", "check.csv"):
        lines = (path.parent / name).read_text().splitlines()
        rows = [line.split(",") for line in lines[1:]]
        commands = [rows[0][1]] + [r[1] for r in rows[:-1]]
        body = [",".join([r[0], c, *r[2:]]) for r, c in zip(rows, commands, strict=True)]
        (path.parent / name).write_text("\n".join([lines[0], *body]) + "\n")
    return path


def test_force_law_capture_with_commands_before_is_caught_and_the_declaration_quiets_it(
    tmp_path: Path,
):
    trap = timing_check(load_experiment(_furuta_captured_before(tmp_path / "a", False)))
    assert trap.best == -1 and trap.ratio < SHIFT_RATIO, trap.describe()  # (0.25)
    assert "declare command_timing: before" in trap.message()
    declared = timing_check(load_experiment(_furuta_captured_before(tmp_path / "b", True)))
    assert declared.best == 0 and declared.messages() == [], declared.describe()
    # after `before`, two rows before the sample is no timing a loop logs: not tried
    assert sorted(declared.costs) == [0, 1] and declared.costs[1] > 2 * declared.costs[0]


def test_the_declared_timing_decides_which_shifts_are_tried():
    assert plausible_shifts({"a": "held", "b": 0.004}) == (0, -1, 1)
    assert plausible_shifts({"a": "before", "b": "held"}) == (0, 1)
    exp = load_experiment("example:arm")
    assert exp.command_timing == {"prbs": "held", "multisine": "held"}


def test_a_laws_internal_state_is_fitted_at_every_window_start(tmp_path: Path):
    """A force law with an internal state whose starts the experiment estimates
    (``estimate_states``): the check fits them at its own windows' starts as well."""
    from mjsysid.app.timing_check import _windows, physics_params

    exp = load_experiment(write_geared_experiment(tmp_path, "{held: 0.5}"))
    windows, n = _windows(exp.sequences, 12, 48)
    params = physics_params(exp.params, windows, exp.residual_options["force_laws"])
    held = [p for p in params.values() if p.meta.get("kind") == "initial_law_state"]
    assert len(held) == n > 10 and held[0].name.endswith("/motor.held0")
    assert float(held[0].max_value[0] - held[0].min_value[0]) == pytest.approx(1.0)
    result = timing_check(exp)
    assert set(result.costs) == {-1, 0, 1} and all(np.isfinite(list(result.costs.values())))
