"""Capturing over a real pseudo-terminal against the simulated device (mjsysid device)."""

from __future__ import annotations

import argparse
import copy
import io
import os
import signal
from importlib import resources
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

import mjsysid as ms
from mjsysid.app.commands import capture as capture_cmd
from mjsysid.app.commands import device as device_cmd
from mjsysid.data.recording import load_recording
from mjsysid.lab.capture import CaptureSession, DeviceError, EndReason, LineFormat
from mjsysid.lab.capture.device import device_from_dict, load_device
from mjsysid.lab.capture.serialport import open_port
from mjsysid.lab.simdevice import SimOptions, SimulatedDevice

pytest.importorskip("serial")

EXAMPLE = Path(str(resources.files("mjsysid") / "examples" / "dcmotor"))
COUNT = 2 * np.pi / 1320  # rad per encoder count
RATE = 50.0

BASE = {
    "port": "",
    "rate": RATE,
    "state": {
        "format": "S,{time_ms:d},{counts:d},{vel},{pwm:d}",
        "time": "time_ms",
        "fields": {
            "time_ms": {"scale": 0.001, "unit": "s"},
            "counts": {"column": "encoder", "scale": COUNT, "unit": "rad"},
            "vel": {"column": "shaft_qvel", "unit": "rad/s"},
            "pwm": {"record": False},
        },
    },
    "command": {"format": "M{pwm:d}", "actuator": "motor", "scale": 1 / 255, "limits": [-255, 255]},
    "stop": "H",
    "watchdog": {"stale": 0.3, "startup": 2.0},
    "excitation": {"signal": "prbs", "amplitude": 200, "duration": 0.6, "hold": 0.06, "seed": 3},
}


def _device(**changes):
    data = copy.deepcopy(BASE)
    for key, value in changes.items():
        data[key] = value
    return device_from_dict(data, "test-device")


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_path(str(EXAMPLE / "dcmotor.xml"))


def _capture(device, model, tmp_path, options=None, **session):
    """Captures from a simulated device; returns (result, simulated device, recording path)."""
    path = tmp_path / "run.csv"
    with SimulatedDevice(device, model, options or SimOptions(lockstep=True)) as sim:
        port = open_port(device, sim.path)
        try:
            result = CaptureSession(device, port, **session).run(path)
        finally:
            port.close()
    return result, sim, path


def _sidecar(result):
    return yaml.safe_load(result.sidecar.read_text())


def test_end_to_end_matches_a_direct_simulation(model, tmp_path):
    device = _device()
    result, sim, path = _capture(device, model, tmp_path)
    assert result.reason is EndReason.COMPLETED and result.stop_sent
    assert sim.received[-1] == "H"
    assert result.rows == round(0.6 * RATE)
    rec = load_recording(path, model)
    assert not rec.unused_columns
    np.testing.assert_allclose(np.diff(rec.times), 1 / RATE, atol=1e-9)  # rows at the rate
    side = _sidecar(result)
    assert side["ended"] == "completed"
    assert side["timing"]["device_hz"] == pytest.approx(RATE)
    assert side["lines"]["malformed"] == 0 and side["lines"]["dropped"] == 0
    assert side["late_commands"] == 0  # the echo shows each command applied from its row
    # a direct simulation of the recorded (applied) commands, held from their row on
    assert rec.control is not None
    ctrl = rec.control.data
    assert np.ptp(ctrl) > 1.0  # the PRBS moved
    substeps = round(1 / RATE / model.opt.timestep)
    x0 = ms.create_initial_state(model)  # the device sat at rest before the capture
    (traj,) = ms.sysid_rollout(model, None, np.repeat(ctrl, substeps, axis=0), x0)
    want = traj.sensordata[::substeps, 0]
    got = rec.sensordata.data[:, 0]  # the encoder (columns follow the model's sensors first)
    assert np.max(np.abs(got - want)) <= COUNT / 2 + 1e-9
    assert np.ptp(got) > 20 * COUNT
    vel = rec.sensordata.data[:, 1]
    np.testing.assert_allclose(vel, traj.qvel()[::substeps, 0], atol=1e-9)


def test_malformed_lines_are_counted_and_skipped(model, tmp_path):
    device = _device()
    result, _, path = _capture(
        device, model, tmp_path, SimOptions(lockstep=True, malformed_every=4)
    )
    assert result.reason is EndReason.COMPLETED
    side = _sidecar(result)
    assert side["lines"]["malformed"] >= result.rows // 4 - 1
    assert side["lines"]["examples"][0].endswith(",x")
    assert result.rows == round(0.6 * RATE)
    assert side["lines"]["dropped"] == 0
    load_recording(path, model)


def test_a_silent_device_ends_the_capture_by_the_watchdog(model, tmp_path):
    device = _device()
    result, sim, path = _capture(
        device,
        model,
        tmp_path,
        SimOptions(silent_after=0.4),  # real time, no lockstep
    )
    assert result.reason is EndReason.WATCHDOG
    assert "no new state line for 0.3 s" in result.message
    assert result.stop_sent and sim.received[-1] == "H"
    side = _sidecar(result)
    assert side["ended"] == "watchdog" and side["rows"] == result.rows
    assert 2 <= result.rows < round(0.6 * RATE)
    assert len(load_recording(path, model).times) == result.rows


def test_a_hard_limit_stops_the_capture(model, tmp_path):
    device = _device(limits={"counts": {"hard": [-0.3, 0.3]}})
    result, sim, path = _capture(device, model, tmp_path, policy=lambda k, v: 255.0)
    assert result.reason is EndReason.HARD_LIMIT
    assert result.message.startswith("hard limit: counts = ")
    assert "outside [-0.3, 0.3]" in result.message
    assert sim.received[-1] == "H" and sim.stops >= 1
    side = _sidecar(result)
    assert side["ended"] == "hard_limit" and "hard limit" in side["message"]
    rec = load_recording(path, model)
    assert abs(rec.sensordata.data[-1, 0]) > 0.3  # the violating row is kept ...
    assert rec.control is not None and rec.control.data[-1, 0] == 0.0  # ... with the stop


def test_soft_limits_block_outward_commands(model, tmp_path):
    device = _device(limits={"counts": {"soft": [-0.2, 0.2]}})
    result, _, path = _capture(device, model, tmp_path, policy=lambda k, v: 255.0)
    assert result.reason is EndReason.COMPLETED
    rec = load_recording(path, model)
    assert rec.control is not None
    beyond = rec.sensordata.data[:, 0] > 0.2
    assert beyond.any() and np.all(rec.control.data[beyond, 0] == 0.0)
    assert _sidecar(result)["soft_limited"] == int(beyond.sum())


def test_the_stop_is_sent_on_an_exception(model, tmp_path):
    def policy(k, values):
        if k == 5:
            raise RuntimeError("controller crashed")
        return 100.0

    device = _device()
    path = tmp_path / "run.npz"
    with SimulatedDevice(device, model, SimOptions(lockstep=True)) as sim:
        port = open_port(device, sim.path)
        session = CaptureSession(device, port, policy=policy)
        with pytest.raises(RuntimeError, match="controller crashed"):
            session.run(path)
        port.close()
    assert sim.received[-1] == "H"
    side = yaml.safe_load((tmp_path / "run.capture.yaml").read_text())
    assert side["ended"] == "error" and "controller crashed" in side["message"]
    assert side["rows"] == 5 and load_recording(path, model).times.size == 5


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_and_the_handlers_are_restored(model, tmp_path, signum):
    before = signal.getsignal(signum)

    def policy(k, values):
        if k == 4:
            os.kill(os.getpid(), signum)
            os.kill(os.getpid(), signum)  # a second Ctrl-C does not stop the stopping
        return 50.0

    result, sim, path = _capture(_device(), model, tmp_path, policy=policy)
    assert result.reason is EndReason.INTERRUPTED and signum.name in result.message
    assert sim.received[-1] == "H"
    assert signal.getsignal(signum) is before
    assert load_recording(path, model).times.size == 4


def test_the_bundled_device_with_its_reset_phase(model, tmp_path):
    device = load_device(EXAMPLE / "device.yaml")
    assert device.model == EXAMPLE / "dcmotor.xml" and device.reset is not None
    result, sim, path = _capture(device, model, tmp_path, duration=0.3)
    assert result.reason is EndReason.COMPLETED and result.rows == 15
    assert sim.received[-1] == "M0"
    side = _sidecar(result)
    assert side["device_time_origin_s"] >= 0.5  # the reset waited 0.5 s for stillness
    load_recording(path, model)


def test_simulated_quantization_and_noise(model):
    device = _device()
    sim = SimulatedDevice(device, model, SimOptions(noise={"vel": 0.5}, quantize={"vel": 0.25}))
    try:
        values = [device.state.parse(sim.state_line()) for _ in range(50)]
    finally:
        sim.stop()
    vel = np.array([v["vel"] for v in values if v is not None])
    assert vel.size == 50 and np.ptp(vel) > 0
    np.testing.assert_allclose(vel / 0.25, np.round(vel / 0.25), atol=1e-9)
    again = SimulatedDevice(device, model, SimOptions(noise={"vel": 0.5}, quantize={"vel": 0.25}))
    try:
        assert [device.state.parse(again.state_line())["vel"] for _ in range(50)] == list(vel)
    finally:
        again.stop()


def test_line_templates():
    fmt = LineFormat.compile("S,{t:d},{x},{u:d}")
    assert fmt.parse("S,20,-1.5e-3,7\r\n") == {"t": 20.0, "x": -0.0015, "u": 7.0}
    assert fmt.parse("S,20,1.0") is None and not fmt.is_foreign("S,20,1.0")
    assert fmt.parse("S,2.5,1,7") is None  # an integer field
    assert fmt.is_foreign("boot: esp32 v1.2")
    assert fmt.format({"t": 20.4, "x": 0.5, "u": -3.6}) == "S,20,0.5,-4"
    with pytest.raises(ValueError, match=r"state.format must be a template naming 'x' once"):
        LineFormat.compile("S,{x},{x}", "state.format")


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("rate", -5, r"test-device: rate must be a finite number > 0, got -5"),
        ("command", {"format": "M{a},{b}", "actuator": "motor"}, r"command.format must be a "),
        ("limits", {"speed": {"hard": [-1, 1]}}, r"limits.speed must be a field of the state"),
        ("limits", {"counts": {"hard": [1, -1]}}, r"limits.counts.hard must be \[low, high\]"),
        ("excitation", {"signal": "noise"}, r"excitation.signal must be one of \['prbs'"),
        ("watchdog", {"stale": 0}, r"watchdog.stale must be a finite number > 0, got 0"),
        ("stop", "", r"stop must be one non-empty line of ASCII text \(e.g. M0\), got ''"),
        ("baudrate", 9600, r"top level has unknown keys \['baudrate'\]"),
        (
            "state",
            {"format": "S,{t:d},{a},{b}", "time": "t", "fields": {"b": {"column": "a"}}},
            r"state.fields.b.column must be a column of its own, got 'a', which is field a's",
        ),
        ("state", {"format": "S,{t:d},{a}", "time": "x"}, r"state.time must be a field of"),
    ],
)
def test_device_description_errors_name_the_key(key, value, match):
    with pytest.raises(DeviceError, match=match):
        _device(**{key: value})


def test_cli_commands(model, tmp_path):
    path = tmp_path / "device.yaml"
    data = copy.deepcopy(BASE)
    data["model"] = str(EXAMPLE / "dcmotor.xml")
    path.write_text(yaml.safe_dump(data))
    parser = argparse.ArgumentParser()
    device_cmd.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    args = parser.parse_args([str(path), "--duration", "0.1", "--quantize", "vel=0.1"])
    assert device_cmd.run(args, out, err) == 0
    assert "on /dev/" in out.getvalue() and "0 lines received" in err.getvalue()
    with pytest.raises(ValueError, match=r"--noise must be FIELD=NUMBER, got 'vel'"):
        device_cmd.run(parser.parse_args([str(path), "--noise", "vel"]), out, err)
    parser = argparse.ArgumentParser()
    capture_cmd.add_arguments(parser)
    with SimulatedDevice(load_device(path), model, SimOptions(lockstep=True)) as sim:
        args = parser.parse_args(
            [str(path), str(tmp_path / "r.npz"), "--port", sim.path, "--duration", "0.2"]
        )
        assert capture_cmd.run(args, out, err) == 0
    assert "10 rows" in out.getvalue()
    assert capture_cmd.NAME == "capture" and device_cmd.NAME == "device"


def test_dropped_lines_are_counted_and_the_command_held_over_the_gap(model, tmp_path):
    device = _device()
    result, _, path = _capture(device, model, tmp_path, SimOptions(lockstep=True, drop_every=7))
    assert result.reason is EndReason.COMPLETED
    side = _sidecar(result)
    rec = load_recording(path, model)
    k = np.round(rec.times * RATE).astype(int)  # the period index of every row
    assert side["lines"]["dropped"] == k[-1] + 1 - k.size > 0
    # the command of row k is held until the next row, across the lost line
    assert rec.control is not None
    held = rec.control.data[np.searchsorted(k, np.arange(k[-1] + 1), side="right") - 1]
    substeps = round(1 / RATE / model.opt.timestep)
    x0 = ms.create_initial_state(model)
    (traj,) = ms.sysid_rollout(model, None, np.repeat(held, substeps, axis=0), x0)
    want = traj.sensordata[k * substeps, 0]
    assert np.max(np.abs(rec.sensordata.data[:, 0] - want)) <= COUNT / 2 + 1e-9


def test_a_reset_that_cannot_finish_ends_by_its_timeout(model, tmp_path):
    reset = {"field": "counts", "target": 5.0, "gain": 10, "max_command": 20, "timeout": 0.3}
    result, sim, _ = _capture(_device(reset=reset), model, tmp_path)
    assert result.reason is EndReason.RESET_TIMEOUT
    assert "reset: counts not at 5 and still within 0.3 s" in result.message
    assert sim.received[-1] == "H" and result.recording is None  # nothing was excited
    assert any(line == "M20" for line in sim.received)  # drove towards the target, clipped


def test_reset_phase_drives_then_waits_for_stillness():
    from mjsysid.lab.capture.device import Reset
    from mjsysid.lab.capture.safety import ResetPhase

    phase = ResetPhase(
        Reset(
            "x",
            0.0,
            gain=100,
            max_command=50,
            tolerance=0.1,
            still=("x",),
            within=0.01,
            still_for=0.1,
        ),
        stop_value=0.0,
    )
    assert phase.command(0.0, {"x": 1.0}) == -50.0  # clipped P-command towards the target
    assert phase.command(0.02, {"x": 0.3}) == -30.0
    assert phase.command(0.04, {"x": 0.05}) == 0.0  # within tolerance: wait ...
    assert phase.command(0.06, {"x": 0.03}) == 0.0  # ... still moving
    done = [phase.command(0.06 + 0.02 * i, {"x": 0.03}) for i in range(1, 7)]
    assert done[-1] is None and done[0] == 0.0


def test_a_rehearsed_capture_fits_back_the_simulated_model(model, tmp_path):
    """The whole user path: device.yaml -> simulated device -> capture -> mjsysid fit."""
    from mjsysid.app.cli import main

    device = load_device(EXAMPLE / "device.yaml")
    # lockstep: on a loaded test machine a real-time device applies some commands a period
    # late (the sidecar counts them as late_commands), which biases the lag estimate
    result, _, _ = _capture(device, model, tmp_path, SimOptions(lockstep=True), duration=1.5)
    assert _sidecar(result)["late_commands"] == 0
    (tmp_path / "dcmotor.xml").write_text((EXAMPLE / "dcmotor.xml").read_text())
    exp = {
        "schema_version": 1,
        "name": "rehearsal",
        "model": "dcmotor.xml",
        "sequences": [{"name": "run", "file": "run.csv"}],
        "parameters": [
            {"kind": "actuator_filter_tau", "target": "motor", "nominal": 0.05, "max": 0.2},
            {"kind": "actuator_kv", "target": "motor", "nominal": 0.004},
        ],
        "optimizer": {"method": "lm", "max_iters": 50},
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    out, err = io.StringIO(), io.StringIO()
    argv = ["fit", str(tmp_path / "exp.yaml"), "--no-report", "--out", str(tmp_path / "res")]
    assert main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    table = {line.split()[0]: line.split() for line in out.getvalue().splitlines() if line}
    assert float(table["motor_filter_tau"][2]) == pytest.approx(0.02, rel=0.05)
    assert float(table["motor_kv"][2]) == pytest.approx(0.002, rel=0.02)


def test_device_set_rehearses_a_truth_that_differs_from_the_model(model, tmp_path):
    """mjsysid device --set: the device runs a changed motor, a capture records it, and a fit
    that starts from the model's nominal values identifies the change (not the nominal)."""
    from mjsysid.app.cli import main

    truth = ["actuator_kv:motor=0.004", "actuator_filter_tau:motor=0.04"]
    true_model, lines = device_cmd.true_model(EXAMPLE / "dcmotor.xml", truth)
    assert lines == [
        "actuator_kv:motor = 0.004 (the model's: 0.002)",
        "actuator_filter_tau:motor = 0.04 (the model's: 0.02)",
    ]
    device = load_device(EXAMPLE / "device.yaml")
    result, _, _ = _capture(device, true_model, tmp_path, SimOptions(lockstep=True), duration=1.5)
    assert _sidecar(result)["late_commands"] == 0
    (tmp_path / "dcmotor.xml").write_text((EXAMPLE / "dcmotor.xml").read_text())
    exp = {
        "schema_version": 1,
        "name": "rehearsal",
        "model": "dcmotor.xml",
        "sequences": [{"name": "run", "file": "run.csv"}],
        "parameters": [  # nominal: the model's values (0.02 s, 0.002)
            {"kind": "actuator_filter_tau", "target": "motor", "max": 0.2},
            {"kind": "actuator_kv", "target": "motor"},
        ],
        "optimizer": {"method": "lm", "max_iters": 50},
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    out, err = io.StringIO(), io.StringIO()
    argv = ["fit", str(tmp_path / "exp.yaml"), "--no-report", "--out", str(tmp_path / "res")]
    assert main([*argv, "-q"], stdout=out, stderr=err) == 0, err.getvalue()
    table = {line.split()[0]: line.split() for line in out.getvalue().splitlines() if line}
    assert float(table["motor_filter_tau"][1]) == pytest.approx(0.02)  # started at the model's
    assert float(table["motor_filter_tau"][2]) == pytest.approx(0.04, rel=0.05)
    assert float(table["motor_kv"][2]) == pytest.approx(0.004, rel=0.02)


def test_device_set_refuses_what_a_device_cannot_simulate(tmp_path):
    with pytest.raises(ValueError, match=r"changes model parameters only, got \['sensor_delay'\]"):
        device_cmd.true_model(EXAMPLE / "dcmotor.xml", ["sensor_delay:encoder=0.01"])
    with pytest.raises(ValueError, match=r"no actuator named 'motr'.*did you mean 'motor'\?"):
        device_cmd.true_model(EXAMPLE / "dcmotor.xml", ["actuator_kv:motr=0.004"])
    with pytest.raises(ValueError, match=r"--set must look like KIND:TARGET=VALUE"):
        device_cmd.true_model(EXAMPLE / "dcmotor.xml", ["actuator_kv=0.004"])
