"""JSON recordings (a list of samples and the recording's settings): the real STS3250 servo
logs of Rhoban's BAM project read with no conversion code, their inputs and constants reaching
the force laws, and every malformed file refused naming the file, the sample and the key.

The logs (src/mjsysid/examples/servo/, Apache-2.0, see the README there) are real data."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.app.experiment import load_experiment
from mjsysid.data.json_logs import read_json_log
from mjsysid.data.recording import read_columns

SERVO = Path(str(resources.files("mjsysid") / "examples" / "servo"))
LIFT_AND_DROP = SERVO / "2024-10-26_12h23m42.json"
READ = {
    "time": "timestamp",
    "sensors": {"angle": "position"},
    "inputs": ["goal_position", "torque_enable"],
    "ignore_columns": ["speed", "load", "input_volts", "temp"],
    "jitter_tolerance": 0.3,
}


def test_a_real_servo_log_reads_as_columns_and_settings():
    raw = json.loads(LIFT_AND_DROP.read_text())
    log = read_json_log(LIFT_AND_DROP)
    assert log.samples_key == "entries" and len(log.columns["timestamp"]) == 354
    assert log.settings == {"mass": 1.13, "length": 0.12, "kp": 32.0, "vin": 12.0}
    entries = raw["entries"]
    np.testing.assert_array_equal(log.columns["position"], [e["position"] for e in entries])
    enable = [float(e["torque_enable"]) for e in entries]
    np.testing.assert_array_equal(log.columns["torque_enable"], enable)
    assert log.columns["torque_enable"][96:].sum() == 0  # the torque is off from row 96
    assert set(read_columns(LIFT_AND_DROP)) == set(entries[0])


def test_load_recording_gives_the_laws_inputs_and_constants():
    model = mujoco.MjModel.from_xml_path(str(SERVO / "servo.xml"))
    rec = ms.load_recording(LIFT_AND_DROP, model, constants={"vin": 11.5}, **READ)
    assert rec.control is None  # the servo model has no actuator: the goal is a law input
    assert rec.constants == {"mass": 1.13, "length": 0.12, "kp": 32.0, "vin": 11.5}
    assert rec.inputs is not None and rec.inputs.data.shape == (354, 2)
    raw = read_json_log(LIFT_AND_DROP).columns
    np.testing.assert_array_equal(rec.inputs.data[:, 0], raw["goal_position"])
    # command timing "before": the inputs are commands, they move with the controls
    before = ms.load_recording(LIFT_AND_DROP, model, command_timing="before", **READ)
    assert before.inputs is not None
    np.testing.assert_array_equal(before.inputs.data[:-1, 0], raw["goal_position"][1:])
    # resampled: the inputs are held between rows
    fine = ms.load_recording(LIFT_AND_DROP, model, resample=0.005, **READ)
    assert fine.inputs is not None and len(fine.inputs) == len(fine.sensordata)
    t = fine.inputs.times
    k = np.searchsorted(raw["timestamp"], t, side="right") - 1
    np.testing.assert_array_equal(fine.inputs.data[:, 1], raw["torque_enable"][k])


def test_the_servo_example_reads_every_log_with_its_settings():
    exp = load_experiment("example:servo")
    seqs = exp.sequences
    assert seqs.sequence_name == ["sin_sin", "lift_and_drop", "sin_time_square"]
    for i in range(3):
        inputs, constants = seqs.law_data(i)
        assert inputs is not None and constants["kp"] == 32.0 and constants["vin"] == 12.0
    assert exp.holdout is not None and exp.holdout.sequence_name == ["up_and_down"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"entries": [{"t": 0.0, "x": 1}', r"is not valid JSON: .* at line 1, column"),
        ("[" * 100_000 + "]" * 100_000, r"nested too deeply"),
        ('{"a": 1}', r"the samples must be the one list of objects in the file, got none"),
        ('{"a": [{"t": 0}], "b": [{"t": 1}]}', r"got 2 such lists \['a', 'b'\]"),
        ('[{"t": 0.0, "x": 1}, {"t": 0.1}]', r"sample 1 has no 'x' \(sample 0 has it\)"),
        ('[{"t": 0.0}, {"t": 0.1, "y": 2}]', r"sample 1 has keys sample 0 does not have: \['y'\]"),
        ('[{"t": 0.0, "x": "high"}]', r"sample 0: 'x' must be a number, true/false, null or a"),
        ('[{"t": 0, "v": [1, 2]}, {"t": 1, "v": [1]}]', r"'v' must have the same length"),
        ("[1, 2]", r"sample 0 must be an object, got int 1"),
        ('"text"', r"must be a JSON object or a list of samples, got text of 4 characters"),
    ],
)
def test_malformed_json_logs_are_refused_naming_the_file_and_the_place(tmp_path, text, match):
    path = tmp_path / "log.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        read_json_log(path)
    assert str(path) in str(info.value)


def test_nested_samples_are_flattened_and_vectors_kept(tmp_path):
    path = tmp_path / "log.json"
    samples = [{"t": k * 0.1, "imu": {"gyro": [k, 2 * k, 3 * k]}, "on": k > 0} for k in range(3)]
    path.write_text(json.dumps({"gain": 4, "name": "rig", "rows": samples}))
    log = read_json_log(path)
    assert log.columns["imu.gyro"].shape == (3, 3) and log.settings == {"gain": 4.0}
    np.testing.assert_array_equal(log.columns["on"], [0.0, 1.0, 1.0])
