"""Every duration, rate, population, count and timeout of the command line is checked against a
named limit (:mod:`mjsysid.util.limits`) before any work starts: no hang, no MemoryError, no
traceback; the message names the argument, the number and the limit."""

from __future__ import annotations

import copy
import io
import re
import time
from pathlib import Path

import mujoco
import pytest
import yaml

import mjsysid
from mjsysid.app.cli import main
from mjsysid.util.limits import limits_set

DCMOTOR = Path(mjsysid.__file__).parent / "examples" / "dcmotor"
MODEL = str(DCMOTOR / "dcmotor.xml")

DEVICE = {
    "port": "",
    "rate": 50,
    "model": MODEL,
    "state": {
        "format": "S,{time_ms:d},{counts:d}",
        "time": "time_ms",
        "fields": {"time_ms": {"scale": 0.001}, "counts": {"column": "encoder", "scale": 0.001}},
    },
    "command": {"format": "M{pwm:d}", "actuator": "motor", "scale": 0.004},
    "stop": "M0",
    "excitation": {"duration": 1.0},
}

# (argv, the message): the hostile numbers of the issue and their neighbours
COMMAND_LINE_BAD_INPUTS = [
    (
        ["simulate", MODEL, "--out", "{tmp}/x.csv", "--duration", "1e9"],
        r"--duration: 1e\+09 exceeds the limit max_duration_s=86,400",
    ),
    (
        ["simulate", MODEL, "--out", "{tmp}/x.csv", "--duration", "80000"],
        r"--duration 80000 s at timestep 0.002 s: 4e\+07 exceeds the limit max_steps",
    ),
    (
        ["simulate", MODEL, "--out", "{tmp}/x.csv", "--duration", "nan"],
        r"--duration must be a finite number of seconds > 0, got nan",
    ),
    (
        ["simulate", MODEL, "--out", "{tmp}/x.csv", "--rate", "1e9"],
        r"--rate: 1e\+09 exceeds the limit max_rate_hz",
    ),
    (
        ["simulate", MODEL, "--out", "{tmp}/x.csv", "--rate", "1e-9"],
        r"--rate must be at least 2 samples over --duration 5 s",
    ),
    (
        ["design", "example:dcmotor", "--duration", "1e7", "-o", "{tmp}/d.npz"],
        r"--duration: 1e\+07 exceeds the limit max_duration_s",
    ),
    (
        ["design", "example:dcmotor", "--duration", "50000", "-o", "{tmp}/d.npz"],
        r"--duration 50000 s at timestep 0.002 s: 2.5e\+07 exceeds the limit max_steps",
    ),
    (
        ["design", "example:dcmotor", "--popsize", "1000000000", "-o", "{tmp}/d.npz"],
        r"--popsize: 1,000,000,000 exceeds the limit max_candidates=100,000",
    ),
    (
        ["design", "example:dcmotor", "--popsize", "0", "-o", "{tmp}/d.npz"],
        r"--popsize must be an integer >= 4, got 0",
    ),
    (
        ["design", "example:dcmotor", "--generations", "0", "-o", "{tmp}/d.npz"],
        r"--generations must be an integer >= 1, got 0",
    ),
    (
        ["design", "example:dcmotor", "--generations", "1000000000", "-o", "{tmp}/d.npz"],
        r"--generations: 1,000,000,000 exceeds the limit max_iterations",
    ),
    (
        ["design", "example:dcmotor", "--max-velocity", "inf", "-o", "{tmp}/d.npz"],
        r"--max-velocity must be a finite \|qvel\| limit > 0, got inf",
    ),
    (
        ["evaluate", "example:cartpole", "nominal", "--horizons", "inf"],
        r"--horizons must be positive finite seconds, got 'inf'",
    ),
    (
        ["evaluate", "example:cartpole", "nominal", "--horizons", "1e12"],
        r"--horizons: 1e\+12 exceeds the limit max_duration_s",
    ),
    (
        ["evaluate", "example:cartpole", "nominal", "--starts", "100000000"],
        r"--starts: 100,000,000 exceeds the limit max_starts=10,000",
    ),
    (
        ["evaluate", "example:cartpole", "nominal", "--starts", "0"],
        r"--starts must be an integer >= 1, got 0",
    ),
    (
        ["check", "example:cartpole", "--shift-iters", "1000000000"],
        r"--shift-iters: 1,000,000,000 exceeds the limit max_iterations",
    ),
    (
        ["device", "{tmp}/device.yaml", "--duration", "1e12"],
        r"--duration: 1e\+12 exceeds the limit max_duration_s",
    ),
    (
        ["device", "{tmp}/device.yaml", "--noise", "counts=inf"],
        r"--noise counts must be a finite number >= 0, got 'inf'",
    ),
    (
        ["device", "{tmp}/device.yaml", "--quantize", "counts=0"],
        r"--quantize counts must be a finite number > 0, got '0'",
    ),
]

# device descriptions: (key, value, the message)
DEVICE_BAD_INPUTS = [
    ("rate", 1e9, r"device.yaml: rate: 1e\+09 exceeds the limit max_rate_hz=100,000"),
    (
        "watchdog",
        {"stale": 1e9},
        r"device.yaml: watchdog.stale: 1e\+09 exceeds the limit max_timeout_s",
    ),
    (
        "watchdog",
        {"startup": 1e6},
        r"device.yaml: watchdog.startup: 1e\+06 exceeds the limit max_timeout_s",
    ),
    (
        "excitation",
        {"duration": 1e12},
        r"device.yaml: excitation.duration: 1e\+12 exceeds the limit max_duration_s",
    ),
    (
        "excitation",
        {"duration": 80000},
        r"device.yaml: excitation.duration x rate: rows: 4e\+06 exceeds the limit max_rows",
    ),
    (
        "reset",
        {"field": "counts", "timeout": 1e7},
        r"device.yaml: reset.timeout: 1e\+07 exceeds the limit max_timeout_s",
    ),
]


def _write_device(tmp_path: Path, **changes) -> Path:
    data = copy.deepcopy(DEVICE)
    data.update(changes)
    path = tmp_path / "device.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    code = main(argv, stdout=out, stderr=err)
    assert time.perf_counter() - t0 < 30, "a refused input must be refused before the work"
    return code, err.getvalue()


@pytest.mark.parametrize(("argv", "match"), COMMAND_LINE_BAD_INPUTS)
def test_command_line_bad_inputs(tmp_path, argv, match):
    _write_device(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, err = _run(argv)
    assert code == 1, err
    assert err.startswith("error: ") and "Traceback" not in err
    assert re.search(match, err), err
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "d.npz").exists()


@pytest.mark.parametrize(("key", "value", "match"), DEVICE_BAD_INPUTS)
@pytest.mark.parametrize("command", ["device", "capture"])
def test_device_bad_inputs(tmp_path, key, value, match, command):
    path = _write_device(tmp_path, **{key: value})
    argv = [command, str(path)] + (
        [str(tmp_path / "run.csv"), "--port", "/dev/null"] if command == "capture" else []
    )
    code, err = _run(argv)
    assert code == 1, err
    assert re.search(match, err), err


def test_capture_duration_is_bounded_before_the_port_is_opened(tmp_path):
    """``capture --duration 1e12`` asked for 5e13 excitation samples (MemoryError after the port
    was opened and the start lines sent); now refused before the port is touched."""
    from mjsysid.lab.capture.device import load_device
    from mjsysid.lab.simdevice import SimOptions, SimulatedDevice

    pytest.importorskip("serial")
    path = _write_device(tmp_path)
    model = mujoco.MjModel.from_xml_path(MODEL)
    with SimulatedDevice(load_device(path), model, SimOptions(lockstep=True)) as sim:
        for duration, match in (
            ("1e12", r"--duration: 1e\+12 exceeds the limit max_duration_s"),
            ("80000", r"--duration x rate: rows: 4e\+06 exceeds the limit max_rows"),
            ("-1", r"--duration must be a finite number > 0, got -1.0"),
        ):
            argv = ["capture", str(path), str(tmp_path / "r.csv"), "--port", sim.path]
            code, err = _run([*argv, "--duration", duration])
            assert code == 1 and err.startswith("error: "), err
            assert re.search(match, err), err
        assert sim.received == []  # nothing was sent: the port was never opened
    assert not list(tmp_path.glob("r*"))


def test_a_raised_limit_lets_the_work_through(tmp_path):
    with limits_set(max_duration_s=10**7, max_steps=10**10):
        code, err = _run(
            ["simulate", MODEL, "--out", str(tmp_path / "x.csv"), "--duration", "0.02"]
        )
    assert code == 0, err
