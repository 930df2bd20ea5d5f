"""Timing of recordings: command timing conventions, clock jitter, retime and resample."""

from __future__ import annotations

import csv
import io
import re
import warnings
from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.app.commands import check
from mjsysid.data.excitation import multisine
from mjsysid.data.recording import load_recording
from mjsysid.data.timing import (
    TimingWarning,
    apply_command_timing,
    jitter_stats,
    parse_command_timing,
    retime,
)

XML = Path(ms.__file__).parent / "examples" / "dcmotor" / "dcmotor.xml"
TAU, KV = 0.03, 0.003  # the true motor (the model file says 0.02 and 0.002)
EVERY = 10  # simulation steps per logged row: 50 Hz at the 2 ms timestep


def _params(model: mujoco.MjModel) -> ms.ParameterDict:
    return ms.ParameterDict(
        [
            ms.make_parameter("actuator_filter_tau", model, "motor"),
            ms.make_parameter("actuator_kv", model, "motor"),
        ]
    )


class Capture:
    """A 6 s, 50 Hz capture of the true motor: device times, duty cycles, encoder."""

    def __init__(self) -> None:
        self.spec = mujoco.MjSpec.from_file(str(XML))
        self.model = self.spec.compile()
        truth = _params(self.model)
        truth.update_from_vector([TAU, KV])
        true_model = ms.apply_param_modifiers(truth, self.spec)
        n = 3000
        duty = 0.8 * multisine(n // EVERY, 1, EVERY * 0.002, amplitude=1.0, f0=0.2, f1=4.0, seed=3)
        held = np.repeat(duty, EVERY, axis=0)  # each command held for one row
        (traj,) = ms.sysid_rollout(true_model, None, held, ms.create_initial_state(self.model))
        rows = np.arange(0, n, EVERY)
        self.t = traj.times[rows]
        self.u = held[rows, 0]
        self.y = traj.sensordata[rows, 0]

    def write(self, path: Path, times: np.ndarray, u: np.ndarray | None = None) -> Path:
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time", "ctrl.motor", "encoder"])
            for row in zip(times, self.u if u is None else u, self.y, strict=True):
                w.writerow([repr(float(x)) for x in row])
        return path

    def fit(self, path: Path, **options: object) -> np.ndarray:
        rec = load_recording(path, self.model, **options)  # type: ignore[arg-type]
        x0 = ms.create_initial_state(self.model, time=float(rec.times[0]))
        seqs = ms.ModelSequences("m", self.spec, ["s"], [x0], [rec.control], [rec.sensordata])
        opt, _ = ms.optimize(_params(self.model), ms.build_residual_fn([seqs]), max_iters=50)
        return opt.as_vector()


@pytest.fixture(scope="module")
def capture() -> Capture:
    return Capture()


def _host_clock(t: np.ndarray, sigma: float = 0.0015, seed: int = 1) -> np.ndarray:
    return t + np.random.default_rng(seed).normal(0.0, sigma, t.size)


# --- command timing -------------------------------------------------------------------------


def test_held_keeps_the_rows(capture: Capture, tmp_path: Path) -> None:
    rec = load_recording(capture.write(tmp_path / "r.csv", capture.t), capture.model)
    assert rec.control is not None
    np.testing.assert_array_equal(rec.control.data[:, 0], capture.u)
    assert rec.notes == ()


def test_before_moves_commands_one_row_earlier(capture: Capture, tmp_path: Path) -> None:
    # the rig logs at row k the command it applied before sample k
    before = np.concatenate([[0.5], capture.u[:-1]])
    path = capture.write(tmp_path / "r.csv", capture.t, before)
    rec = load_recording(path, capture.model, command_timing="before")
    assert rec.control is not None
    np.testing.assert_array_equal(rec.control.data[:-1, 0], capture.u[:-1])
    assert rec.control.data[-1, 0] == before[-1]  # the last command held over the last row
    assert len(rec.control) == len(rec.sensordata) == capture.t.size
    assert any("first row's command" in n for n in rec.notes)


@pytest.mark.parametrize("latency", [0.005, -0.005])
def test_latency_moves_the_control_time_axis(
    capture: Capture, tmp_path: Path, latency: float
) -> None:
    path = capture.write(tmp_path / "r.csv", capture.t)
    rec = load_recording(path, capture.model, command_timing=latency)
    ctrl = rec.control
    assert ctrl is not None
    assert ctrl.times[0] <= rec.times[0] and ctrl.times[-1] >= rec.times[-1]  # covers
    np.testing.assert_allclose(ctrl.get(capture.t[5] + latency, method="zoh")[1], [capture.u[5]])
    np.testing.assert_allclose(
        ctrl.get(capture.t[5] + latency - 1e-4, method="zoh")[1], [capture.u[4]]
    )
    assert any(f"{latency!r} s after their stamps" in n for n in rec.notes)


def test_bad_command_timing_names_the_forms(capture: Capture, tmp_path: Path) -> None:
    path = capture.write(tmp_path / "r.csv", capture.t)
    with pytest.raises(ValueError, match=r"command_timing must be 'held'.*'before'.*latency"):
        load_recording(path, capture.model, command_timing="after")
    with pytest.raises(ValueError, match="shorter than the recording"):
        apply_command_timing(load_recording(path, capture.model).control, 100.0)  # type: ignore[arg-type]
    assert parse_command_timing(0) == 0.0


def test_before_fits_the_truth_and_held_does_not(capture: Capture, tmp_path: Path) -> None:
    before = np.concatenate([[0.0], capture.u[:-1]])
    path = capture.write(tmp_path / "r.csv", capture.t, before)
    np.testing.assert_allclose(capture.fit(path, command_timing="before"), [TAU, KV], rtol=1e-3)
    assert abs(capture.fit(path)[0] - TAU) > 0.2 * TAU  # one row out of step: biased


# --- clock jitter ---------------------------------------------------------------------------


def test_jittered_clock_warns_with_the_numbers(capture: Capture, tmp_path: Path) -> None:
    path = capture.write(tmp_path / "r.csv", _host_clock(capture.t))
    with pytest.warns(
        TimingWarning,
        match=r"time stamps jitter: median step 19\.9\d ms, spread 2\.\d+ ms \(10\.\d % of the "
        r"step, tolerance 2 %\), std .* ms, max deviation .* ms, \d+ of 299 steps irregular.*"
        r"device's own clock column.*retime: 0\.0.*resample: 0\.0",
    ):
        load_recording(path, capture.model)


def test_regular_clock_does_not_warn(capture: Capture, tmp_path: Path) -> None:
    path = capture.write(tmp_path / "r.csv", capture.t)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_recording(path, capture.model)
    # a dropped sample is not jitter
    keep = np.ones(capture.t.size, bool)
    keep[40] = False
    stats = jitter_stats(capture.t[keep])
    assert not stats.jittery and stats.n_irregular == 1


def test_jitter_tolerance_is_declared(capture: Capture, tmp_path: Path) -> None:
    path = capture.write(tmp_path / "r.csv", _host_clock(capture.t))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_recording(path, capture.model, jitter_tolerance=0.2)


def test_device_clock_and_retime_recover_the_truth(capture: Capture, tmp_path: Path) -> None:
    host = capture.write(tmp_path / "host.csv", _host_clock(capture.t))
    device = capture.write(tmp_path / "device.csv", capture.t)
    with pytest.warns(TimingWarning):
        biased = capture.fit(host)
    assert abs(biased[0] - TAU) > 0.03 * TAU  # the host's clock biases the lag
    np.testing.assert_allclose(capture.fit(device), [TAU, KV], rtol=1e-3)
    np.testing.assert_allclose(capture.fit(host, retime=0.02), [TAU, KV], rtol=1e-3)
    np.testing.assert_allclose(capture.fit(host, retime=True), [TAU, KV], rtol=0.02)


def test_retime_snaps_rows_and_keeps_gaps() -> None:
    t = 0.02 * np.array([0, 1, 2, 4, 5, 6, 7], float)
    noisy = t + np.array([0.0, 1e-3, -2e-3, 1.5e-3, 0.0, -1e-3, 2e-3])
    np.testing.assert_allclose(retime(noisy, 0.02) - retime(noisy, 0.02)[0], t, atol=1e-12)
    with pytest.raises(ValueError, match=r"rows 2 and 3 .* fall on one slot"):
        retime(np.array([0.0, 0.02, 0.025, 0.06]), 0.02)


def test_resample_holds_commands_and_interpolates_sensors(capture: Capture, tmp_path: Path) -> None:
    irregular = capture.t.copy()
    irregular[1::2] += 0.004  # true, irregular sample times
    path = capture.write(tmp_path / "r.csv", irregular)
    with pytest.warns(TimingWarning):
        load_recording(path, capture.model)
    rec = load_recording(path, capture.model, resample=0.01)
    assert rec.control is not None
    assert np.allclose(np.diff(rec.times), 0.01)
    k = 7  # grid time 0.07 s lies between rows 3 (0.064 s) and 4 (0.08 s)
    np.testing.assert_allclose(rec.control.data[k, 0], capture.u[3])
    w = (0.07 - irregular[3]) / (irregular[4] - irregular[3])
    np.testing.assert_allclose(rec.sensordata.data[k, 0], (1 - w) * capture.y[3] + w * capture.y[4])


# --- the check command ----------------------------------------------------------------------


def _experiment(tmp_path: Path, capture: Capture, u: np.ndarray) -> Path:
    capture.write(tmp_path / "run.csv", capture.t, u)
    (tmp_path / "motor.xml").write_text(XML.read_text())
    exp = tmp_path / "experiment.yaml"
    exp.write_text(
        "model: motor.xml\n"
        "sequences:\n"
        "  - {name: run, file: run.csv, initial_state: {qpos: [0.0], qvel: [0.0]}}\n"
        "parameters:\n"
        "  - {kind: actuator_filter_tau, target: motor}\n"
        "  - {kind: actuator_kv, target: motor}\n"
    )
    return exp


def _run_check(path: Path) -> tuple[int, str, str]:
    parser = check.argparse.ArgumentParser()
    check.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        rc = check.run(parser.parse_args([str(path)]), out, err)
    return rc, out.getvalue(), err.getvalue()


def test_check_reports_commands_out_of_step(capture: Capture, tmp_path: Path) -> None:
    before = np.concatenate([[0.0], capture.u[:-1]])
    rc, out, err = _run_check(_experiment(tmp_path, capture, before))
    assert rc == check.EXIT_WARNINGS
    assert "timing check: cost by row shift" in out
    assert "one row earlier" in err and "declare command_timing: before" in err


def test_check_is_clean_for_a_right_capture(capture: Capture, tmp_path: Path) -> None:
    exp = _experiment(tmp_path, capture, capture.u)
    rc, out, err = _run_check(exp)
    assert (rc, err) == (check.EXIT_CLEAN, "")
    assert "timing check: cost by row shift" in out and out.rstrip().endswith("ok")


def test_check_prints_jitter_warnings(capture: Capture, tmp_path: Path) -> None:
    path = _experiment(tmp_path, capture, capture.u)
    capture.write(tmp_path / "run.csv", _host_clock(capture.t))
    rc, _out, err = _run_check(path)
    assert rc == check.EXIT_WARNINGS
    assert "sequences[0]: recording" in err and "time stamps jitter" in err


# --- the same options in experiment files ----------------------------------------------------


def _experiment_with(tmp_path: Path, capture: Capture, u: np.ndarray, options: str) -> Path:
    path = _experiment(tmp_path, capture, u)
    text = path.read_text().replace(
        "initial_state: {qpos: [0.0], qvel: [0.0]}}",
        f"initial_state: {{qpos: [0.0], qvel: [0.0]}}, {options}}}",
    )
    path.write_text(text)
    return path


def test_experiment_command_timing_before_is_applied(capture: Capture, tmp_path: Path) -> None:
    from mjsysid.app.experiment import load_experiment

    before = np.concatenate([[0.0], capture.u[:-1]])  # row k holds the command before k
    held = load_experiment(_experiment(tmp_path, capture, before)).sequences.control[0].data
    path = _experiment_with(tmp_path, capture, before, "command_timing: before")
    declared = load_experiment(path).sequences.control[0].data
    np.testing.assert_array_equal(declared[:-1, 0], held[1:, 0])  # one row earlier
    _rc, out, err = _run_check(path)
    assert "timing check: cost by row shift" in out  # and nothing found:
    assert "warning" not in err and _rc == check.EXIT_CLEAN


def test_experiment_jitter_is_a_warning_of_the_experiment(capture: Capture, tmp_path: Path) -> None:
    from mjsysid.app.experiment import load_experiment

    path = _experiment(tmp_path, capture, capture.u)
    capture.write(tmp_path / "run.csv", _host_clock(capture.t))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TimingWarning)  # collected, not raised
        exp = load_experiment(path)
    assert any("time stamps jitter" in w and "sequences[0]" in w for w in exp.warnings)
    retimed = _experiment_with(tmp_path, capture, capture.u, "retime: 0.02")
    capture.write(tmp_path / "run.csv", _host_clock(capture.t))
    loaded = load_experiment(retimed)
    found = loaded.warnings + loaded.notes
    assert not any("time stamps jitter" in w for w in found), found
    # the largest row move of the retime is said (a note: well under a period here)
    assert any(
        re.search(r"retime: 0.02 moves row \d+ by [2-5]\.\d+ ms \(0\.\d+ periods\)", w)
        for w in found
    )


def test_experiment_timing_keys_are_checked(capture: Capture, tmp_path: Path) -> None:
    from mjsysid.app.experiment import ExperimentError, load_experiment

    path = _experiment_with(tmp_path, capture, capture.u, "resample: -1")
    with pytest.raises(ExperimentError, match=r"sequences\[0\]\.resample must be a finite"):
        load_experiment(path)


def test_check_verifies_a_retime_before_suggesting_it(capture: Capture, tmp_path: Path) -> None:
    """A 50 Hz capture stamped by a jittering host clock (1.5 ms): the retime moves no row by
    more than a fraction of a period, and its quick fit is better than the stamps as logged,
    so it is suggested, with both costs."""
    path = _experiment(tmp_path, capture, capture.u)
    capture.write(tmp_path / "run.csv", _host_clock(capture.t))
    rc, out, err = _run_check(path)
    line = next(x for x in out.splitlines() if x.startswith("retime of 'run'"))
    cost, logged = map(float, re.findall(r"cost (\S+) against (\S+) as logged", line)[0])
    assert cost < 0.7 * logged, line
    assert rc == check.EXIT_WARNINGS
    assert re.search(r"Fix: retime: 0\.0(199|200)\d* on that sequence", err), err
