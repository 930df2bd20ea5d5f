"""ModelSequences validation."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import SERVO


@pytest.fixture
def parts(arm_spec):
    model = arm_spec.compile()
    t = np.arange(100) * 0.002
    x0 = ms.create_initial_state(model)
    ctrl = ms.TimeSeries.from_control_names(t, np.zeros((100, 2)), model)
    sens = ms.TimeSeries.from_names(t, np.ones((100, model.nsensordata)), model)
    return arm_spec, model, t, x0, ctrl, sens


def test_single_sequence_promoted(parts):
    spec, _, _, x0, ctrl, sens = parts
    seq = ms.ModelSequences("arm", spec, "s", x0, ctrl, sens)
    assert seq.sequence_name == ["s"] and len(seq) == 1 and seq.model.nu == 2


def test_unequal_lists(parts):
    spec, _, _, x0, ctrl, sens = parts
    with pytest.raises(
        ValueError,
        match=r"'arm': sequence_name, initial_state, control and sensordata must "
        r"have the same number of sequences, got .*'control': 1",
    ):
        ms.ModelSequences("arm", spec, ["a", "b"], [x0, x0], [ctrl], [sens, sens])


def test_duplicate_sequence_names(parts):
    spec, _, _, x0, ctrl, sens = parts
    with pytest.raises(ValueError, match="sequence_name must be unique names"):
        ms.ModelSequences("arm", spec, ["a", "a"], [x0, x0], [ctrl, ctrl], [sens, sens])


def test_names_must_be_file_names(parts):
    """Names become file names (<name>.xml): a name with a path in it must not write outside
    the results folder."""
    spec, _, _, x0, ctrl, sens = parts
    for bad in ("../../escape", "a/b", "a\\b", "..", "tab\there"):
        with pytest.raises(ValueError, match=r"ModelSequences name must be a name usable as a"):
            ms.ModelSequences(bad, spec, "s", x0, ctrl, sens)
        with pytest.raises(ValueError, match=r"'arm': sequence_name must be a name usable as a"):
            ms.ModelSequences("arm", spec, bad, x0, ctrl, sens)
    ms.ModelSequences("arm #2 (left)", spec, "run 1.csv", x0, ctrl, sens)


def test_sensordata_columns_must_all_be_signals(parts):
    """A mapping that labels some columns only would leave the others compared with nothing
    (the residual read unset memory there)."""
    spec, model, t, x0, ctrl, _ = parts
    data = np.ones((100, model.nsensordata))
    partial = ms.TimeSeries(t, data, signal_mapping={"j1_pos": (ms.SignalType.MjSensor, [0])})
    with pytest.raises(
        ValueError,
        match=r"sequence 's': sensordata must be a signal for every column .* got "
        r"'columns \[1, 2, 3, 4, 5, 6, 7, 8, 9\] in no signal'. Label them .*slice_by_name",
    ):
        ms.ModelSequences("arm", spec, "s", x0, ctrl, partial)
    ms.ModelSequences("arm", spec, "s", x0, ctrl, partial.slice_by_name("j1_pos"))


def test_initial_state_forms(parts):
    """One state as an array or a flat list of numbers; anything else is named."""
    spec, _, _, x0, ctrl, sens = parts
    seq = ms.ModelSequences("arm", spec, "s", list(x0), ctrl, sens)
    np.testing.assert_array_equal(seq.initial_state[0], x0)
    match = r"'arm': initial_state must be a full-physics state \(numbers\)"
    for bad in ("abc", True, 3.0, None):
        with pytest.raises(TypeError, match=match):
            ms.ModelSequences("arm", spec, "s", bad, ctrl, sens)
    with pytest.raises(TypeError, match=match):
        ms.ModelSequences("arm", spec, ["s", "t"], [x0, ["a"] * 5], [ctrl] * 2, [sens] * 2)
    with pytest.raises(ValueError, match=r"data must be a rectangular array \(rows of one length"):
        ms.TimeSeries(np.arange(3.0), [[1.0, 2.0], [3.0], [4.0, 5.0]])


def test_bad_initial_state(parts):
    spec, _, _, x0, ctrl, sens = parts
    with pytest.raises(
        ValueError,
        match=r"sequence 's': initial_state must be a 1-D full-physics state "
        r"of length 5.*create_initial_state",
    ):
        ms.ModelSequences("arm", spec, "s", x0[:3], ctrl, sens)
    bad = x0.copy()
    bad[2] = np.inf
    with pytest.raises(
        ValueError, match=r"initial_state must be finite, got initial_state\[2\]=inf"
    ):
        ms.ModelSequences("arm", spec, "s", bad, ctrl, sens)


def test_control_must_cover_sensor_span(parts):
    spec, model, t, x0, _, sens = parts
    short = ms.TimeSeries.from_control_names(t[:50], np.zeros((50, 2)), model)
    with pytest.raises(
        ValueError,
        match=r"sequence 's': control must cover the sensordata time span "
        r"\[0.0, 0.198\] s, got control times \[0.0, 0.098\] s",
    ):
        ms.ModelSequences("arm", spec, "s", x0, short, sens)


def test_control_width_and_names(parts):
    spec, model, t, x0, _, sens = parts
    narrow = ms.TimeSeries(t, np.zeros((100, 1)))
    with pytest.raises(
        ValueError, match=r"control must be 2 columns \(one per actuator\), got '1 columns'"
    ):
        ms.ModelSequences("arm", spec, "s", x0, narrow, sens)
    partial = ms.TimeSeries.from_control_names(t, np.zeros((100, 1)), model, names=["m2"])
    with pytest.raises(
        ValueError, match=r"control must be a column for every actuator, got \"none for \['m1'\]\""
    ):
        ms.ModelSequences("arm", spec, "s", x0, partial, sens)
    with pytest.raises(
        ValueError, match=r"control must be a TimeSeries for the model's 2 actuators"
    ):
        ms.ModelSequences("arm", spec, "s", x0, None, sens)


def test_sensordata_width_without_mapping(parts):
    spec, _, t, x0, ctrl, _ = parts
    with pytest.raises(ValueError, match=r"sensordata must be 10 columns \(all model sensors\)"):
        ms.ModelSequences("arm", spec, "s", x0, ctrl, ms.TimeSeries(t, np.ones((100, 3))))


def test_sensordata_unknown_name(parts):
    spec, _, t, x0, ctrl, _ = parts
    other = mujoco.MjModel.from_xml_string(SERVO)
    sens = ms.TimeSeries.from_names(t, np.ones((100, 1)), other, names=["angle"])
    with pytest.raises(KeyError, match="sequence 's': sensordata: "):
        ms.ModelSequences("arm", spec, "s", x0, ctrl, sens)


def test_model_instead_of_spec(parts):
    _spec, model, _, x0, ctrl, sens = parts
    with pytest.raises(TypeError, match="did you pass a compiled MjModel instead of an MjSpec"):
        ms.ModelSequences("arm", model, "s", x0, ctrl, sens)
