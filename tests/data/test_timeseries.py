"""Tests for mjsysid.timeseries: construction, name resolution, interpolation, files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mjsysid.data.timeseries import (
    DtStatistics,
    SignalType,
    TimeSeries,
    resolve_signal_name,
    signal_source_indices,
)

ARM_XML = """
<mujoco>
  <worldbody>
    <body name="link1">
      <joint name="shoulder" type="hinge" axis="0 0 1"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/>
      <body name="link2" pos="0.5 0 0">
        <joint name="elbow" type="hinge" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/>
        <site name="tip" pos="0.5 0 0"/>
      </body>
    </body>
    <body name="ballbody" pos="0 1 0">
      <joint name="ball" type="ball"/>
      <geom type="sphere" size="0.1"/>
    </body>
    <body name="slider" pos="1 0 0">
      <joint name="slide" type="slide" axis="1 0 0"/>
      <geom type="sphere" size="0.1"/>
    </body>
    <body name="freebody" pos="0 0 1">
      <freejoint name="float"/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <site name="imu"/>
    </body>
  </worldbody>
  <actuator>
    <position name="shoulder_servo" joint="shoulder" kp="10"/>
    <general name="elbow_filtered" joint="elbow" dyntype="filter" dynprm="0.05"/>
  </actuator>
  <sensor>
    <jointpos name="shoulder_pos" joint="shoulder"/>
    <jointvel name="elbow_vel" joint="elbow"/>
    <framepos name="tip_pos" objtype="site" objname="tip"/>
    <gyro name="imu_gyro" site="imu"/>
    <jointpos name="slide_qpos" joint="slide"/>
  </sensor>
</mujoco>
"""
# Layout of ARM_XML: qpos = shoulder 0, elbow 1, ball 2:6, slide 6, float 7:14;
# qvel = shoulder 0, elbow 1, ball 2:5, slide 5, float 6:12; sensordata = shoulder_pos 0,
# elbow_vel 1, tip_pos 2:5, imu_gyro 5:8, slide_qpos 8; act = elbow_filtered 0.
# The sensor "slide_qpos" deliberately shadows the state name of joint "slide".

UNNAMED_XML = """
<mujoco>
  <worldbody>
    <body>
      <joint name="hinge" type="hinge"/>
      <geom type="sphere" size="0.1"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge"/></actuator>
  <sensor>
    <jointpos name="hinge_pos" joint="hinge"/>
    <jointvel joint="hinge"/>
  </sensor>
</mujoco>
"""


@pytest.fixture(scope="module")
def arm() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(ARM_XML)


@pytest.fixture(scope="module")
def unnamed() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(UNNAMED_XML)


def _times(n: int = 10, dt: float = 0.1) -> np.ndarray:
    return np.arange(n) * dt


def _ramp(n: int, d: int) -> np.ndarray:
    return np.arange(n * d, dtype=float).reshape(n, d)


# ------------------------------------------------------------------------------------------
# Construction and validation


def test_plain_construction_copies_and_freezes() -> None:
    t = _times()
    d = _ramp(10, 2)
    ts = TimeSeries(t, d)
    t[0] = -5.0
    d[0, 0] = 99.0
    assert ts.times[0] == 0.0 and ts.data[0, 0] == 0.0
    assert not ts.times.flags.writeable and not ts.data.flags.writeable
    assert ts.times.dtype == np.float64 and ts.data.dtype == np.float64
    with pytest.raises(ValueError, match="read-only"):
        ts.data[0, 0] = 1.0
    assert len(ts) == 10 and ts.dim == 2 and ts.n_signals == 0 and ts.names == []
    assert ts.signal_mapping is None


def test_one_dimensional_data_stays_one_dimensional() -> None:
    # 1-D data keeps its shape, as in mujoco.sysid.
    ts = TimeSeries(_times(5), np.arange(5))
    assert ts.data.shape == (5,)
    assert ts.data_2d.shape == (5, 1) and ts.dim == 1
    assert not ts.data_2d.flags.writeable


def test_integer_inputs_are_converted() -> None:
    ts = TimeSeries(np.arange(4), np.ones((4, 2), dtype=np.int32))
    assert ts.times.dtype == np.float64 and ts.data.dtype == np.float64


@pytest.mark.parametrize(
    ("times", "match"),
    [
        ([0.0, 0.1, np.nan, 0.3], r"times must be finite, got nan at index 2"),
        ([0.0, np.inf, 0.2, 0.3], r"times must be finite, got inf at index 1"),
        (
            [0.0, 0.1, 0.3, 0.2],
            r"times must be strictly increasing, got times\[3\]=0\.2 <= times\[2\]=0\.3",
        ),
        ([0.0, 0.1, 0.1, 0.2], r"strictly increasing, got times\[2\]=0\.1 <= times\[1\]=0\.1"),
        ([], r"times must have at least one sample, got 0"),
        ([[0.0, 0.1]], r"times must be a 1-D array, got shape \(1, 2\)"),
    ],
)
def test_bad_times(times: list, match: str) -> None:
    n = np.asarray(times).size
    with pytest.raises(ValueError, match=match):
        TimeSeries(np.asarray(times, dtype=float), np.zeros(max(n, 1)))


def test_unsorted_times_name_first_offending_index() -> None:
    t = np.arange(30) * 0.01
    t[17] = 0.16 - 0.01  # out of order at index 17
    with pytest.raises(ValueError, match=r"times\[17\]=0\.15 <= times\[16\]=0\.16"):
        TimeSeries(t, np.zeros(30))


@pytest.mark.parametrize(("value", "word"), [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")])
def test_non_finite_data_names_row_and_column(value: float, word: str) -> None:
    d = np.zeros((10, 3))
    d[5, 2] = value
    d[7, 0] = value  # later entries are not reported
    with pytest.raises(ValueError, match=rf"data must be finite, got {word} at row 5, column 2"):
        TimeSeries(_times(), d)


def test_length_mismatch() -> None:
    with pytest.raises(
        ValueError, match=r"times and data must have the same length, got 100 and 99"
    ):
        TimeSeries(_times(100, 0.01), np.zeros((99, 2)))


def test_bad_data_shape_and_dtype() -> None:
    with pytest.raises(ValueError, match=r"data must be a 1-D \(N,\) or 2-D \(N, D\) array"):
        TimeSeries(_times(2), np.zeros((2, 2, 2)))
    with pytest.raises(TypeError, match="data must be a real numeric array"):
        TimeSeries(_times(2), np.zeros(2, dtype=complex))
    with pytest.raises(TypeError, match="times must be a real numeric array"):
        TimeSeries(np.array([True, False]), np.zeros(2))


def test_mapping_is_validated_and_converted() -> None:
    ts = TimeSeries(
        _times(3),
        np.zeros((3, 4)),
        {"a": (SignalType.CustomObs, [0, 2]), "b": (SignalType.MjSensor, np.uint8(3))},
    )
    kind, idx = ts.signal_mapping["a"]
    assert kind is SignalType.CustomObs
    assert idx.dtype == np.intp and not idx.flags.writeable
    np.testing.assert_array_equal(ts.columns("b"), [3])
    np.testing.assert_array_equal(ts.signal("a"), np.zeros((3, 2)))


@pytest.mark.parametrize(
    ("mapping", "error", "match"),
    [
        (
            {"a": (SignalType.CustomObs, [0, 4])},
            ValueError,
            r"signal_mapping\['a'\] indices must be data columns in \[0, 4\), got 4 at position 1",
        ),
        (
            {"a": (SignalType.CustomObs, [-1])},
            ValueError,
            r"in \[0, 4\), got -1 at position 0",
        ),
        (
            {"a": (SignalType.CustomObs, [0, 1]), "b": (SignalType.CustomObs, [2, 1])},
            ValueError,
            r"column 1 must belong to one signal only, got claimed by 'a' and 'b'",
        ),
        (
            {"a": (SignalType.CustomObs, [2, 2])},
            ValueError,
            r"column 2 must belong to one signal only, got claimed twice by 'a'",
        ),
        ({"a": (SignalType.CustomObs, [0.0])}, TypeError, r"indices must be integers"),
        ({"a": (SignalType.CustomObs, [])}, ValueError, r"must be a non-empty 1-D array"),
        ({"a": ("MjSensor", [0])}, TypeError, r"signal_mapping\['a'\] type must be a SignalType"),
        ({"a": [0]}, TypeError, r"must be a \(SignalType, indices\) pair"),
        ({1: (SignalType.CustomObs, [0])}, TypeError, r"keys must be non-empty strings"),
        ([("a", 0)], TypeError, r"signal_mapping must be a dict"),
    ],
)
def test_bad_mapping(mapping: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        TimeSeries(_times(3), np.zeros((3, 4)), mapping)  # type: ignore[arg-type]


def test_unchecked_stores_as_given() -> None:
    t = _times(3)
    d = np.zeros((3, 2))
    ts = TimeSeries.trusted(t, d, None)
    assert ts.times is t and ts.data is d and ts.signal_mapping is None
    assert isinstance(ts, TimeSeries)


def test_frozen() -> None:
    ts = TimeSeries(_times(3), np.zeros(3))
    with pytest.raises(AttributeError):
        ts.times = _times(4)  # type: ignore[misc]


def test_repr() -> None:
    ts = TimeSeries.from_custom_map(_times(10), np.zeros((10, 3)), ["x", ("v", 2)])
    assert repr(ts) == "TimeSeries(N=10, D=3, span=[0, 0.9] s, signals=['x', 'v'])"
    assert "signals=None" in repr(TimeSeries(_times(2), np.zeros(2)))


# ------------------------------------------------------------------------------------------
# Name resolution and model source indices


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("shoulder_pos", ("shoulder_pos", SignalType.MjSensor)),
        ("tip_pos", ("tip_pos", SignalType.MjSensor)),
        ("elbow_qpos", ("elbow_qpos", SignalType.MjStateQPos)),
        ("float_qvel", ("float_qvel", SignalType.MjStateQVel)),
        ("elbow_filtered_act", ("elbow_filtered_act", SignalType.MjStateAct)),
        # A sensor named like a joint state wins over the state.
        ("slide_qpos", ("slide_qpos", SignalType.MjSensor)),
        ("slide_qvel", ("slide_qvel", SignalType.MjStateQVel)),
    ],
)
def test_resolve_signal_name(arm: mujoco.MjModel, name: str, expected: tuple) -> None:
    assert resolve_signal_name(arm, name) == expected


def test_resolve_unknown_lists_names_and_suggests(arm: mujoco.MjModel) -> None:
    with pytest.raises(KeyError, match=r"unknown signal 'tip_poss'") as info:
        resolve_signal_name(arm, "tip_poss")
    msg = str(info.value)
    assert "sensors: ['shoulder_pos', 'elbow_vel', 'tip_pos', 'imu_gyro', 'slide_qpos']" in msg
    assert "'float_qpos'" in msg and "'elbow_filtered_act'" in msg
    assert msg.endswith("did you mean 'tip_pos'?")


def test_resolve_joint_and_actuator_names_get_hints(arm: mujoco.MjModel) -> None:
    with pytest.raises(KeyError, match=r"'elbow' is a joint: use 'elbow_qpos' or 'elbow_qvel'"):
        resolve_signal_name(arm, "elbow")
    with pytest.raises(
        KeyError,
        match=r"'shoulder_servo' is an actuator: pass \('shoulder_servo', SignalType\.MjCtrl\)",
    ):
        resolve_signal_name(arm, "shoulder_servo")


def test_resolve_act_without_activation(arm: mujoco.MjModel) -> None:
    with pytest.raises(
        ValueError,
        match=r"actuator 'shoulder_servo' must have an activation state for MjStateAct, got none",
    ):
        resolve_signal_name(arm, "shoulder_servo_act")


def test_resolve_needs_compiled_model(arm: mujoco.MjModel) -> None:
    spec = mujoco.MjSpec.from_string(ARM_XML)
    with pytest.raises(TypeError, match=r"model must be a compiled mujoco.MjModel.*spec.compile"):
        resolve_signal_name(spec, "tip_pos")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("shoulder_pos", SignalType.MjSensor, [0]),
        ("tip_pos", SignalType.MjSensor, [2, 3, 4]),
        ("imu_gyro", SignalType.MjSensor, [5, 6, 7]),
        ("ball", SignalType.MjStateQPos, [2, 3, 4, 5]),
        ("ball_qpos", SignalType.MjStateQPos, [2, 3, 4, 5]),
        ("ball_qvel", SignalType.MjStateQVel, [2, 3, 4]),
        ("float_qpos", SignalType.MjStateQPos, list(range(7, 14))),
        ("float", SignalType.MjStateQVel, list(range(6, 12))),
        ("slide_qpos", SignalType.MjStateQPos, [6]),
        ("slide", SignalType.MjStateQVel, [5]),
        ("elbow_filtered", SignalType.MjStateAct, [0]),
        ("elbow_filtered_act", SignalType.MjStateAct, [0]),
        ("elbow_filtered", SignalType.MjCtrl, [1]),
        ("shoulder_servo_ctrl", SignalType.MjCtrl, [0]),
    ],
)
def test_signal_source_indices(
    arm: mujoco.MjModel, name: str, kind: SignalType, expected: list[int]
) -> None:
    idx = signal_source_indices(arm, name, kind)
    assert idx.dtype == np.intp
    np.testing.assert_array_equal(idx, expected)


def test_source_indices_read_the_right_model_entries(arm: mujoco.MjModel) -> None:
    data = mujoco.MjData(arm)
    data.qpos[:] = np.arange(arm.nq) + 1.0
    data.qvel[:] = -(np.arange(arm.nv) + 1.0)
    mujoco.mj_forward(arm, data)
    qpos = data.qpos[signal_source_indices(arm, "ball_qpos", SignalType.MjStateQPos)]
    np.testing.assert_array_equal(qpos, [3, 4, 5, 6])
    jp = data.sensordata[signal_source_indices(arm, "shoulder_pos", SignalType.MjSensor)]
    np.testing.assert_array_equal(jp, [1.0])
    vel = data.sensordata[signal_source_indices(arm, "elbow_vel", SignalType.MjSensor)]
    np.testing.assert_array_equal(vel, data.qvel[[1]])


def test_source_indices_errors(arm: mujoco.MjModel) -> None:
    with pytest.raises(ValueError, match=r"CustomObs, which has no source in the model"):
        signal_source_indices(arm, "anything", SignalType.CustomObs)
    with pytest.raises(KeyError, match=r"unknown sensor 'elbow_qpos'.*did you mean 'elbow_vel'"):
        signal_source_indices(arm, "elbow_qpos", SignalType.MjSensor)
    with pytest.raises(
        KeyError, match=r"unknown joint 'elbw_qpos' for MjStateQPos.*did you mean 'elbow_qpos'"
    ):
        signal_source_indices(arm, "elbw_qpos", SignalType.MjStateQPos)
    with pytest.raises(KeyError, match=r"unknown actuator 'servo' for MjCtrl"):
        signal_source_indices(arm, "servo", SignalType.MjCtrl)
    with pytest.raises(ValueError, match=r"'shoulder_servo' must have an activation state"):
        signal_source_indices(arm, "shoulder_servo", SignalType.MjStateAct)
    with pytest.raises(TypeError, match=r"signal_type must be a SignalType"):
        signal_source_indices(arm, "tip_pos", "MjSensor")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# Factories


def test_from_names_all_sensors(arm: mujoco.MjModel) -> None:
    d = _ramp(10, arm.nsensordata)
    ts = TimeSeries.from_names(_times(), d, arm)
    assert ts.names == ["shoulder_pos", "elbow_vel", "tip_pos", "imu_gyro", "slide_qpos"]
    assert all(k is SignalType.MjSensor for k, _ in ts.signal_mapping.values())
    np.testing.assert_array_equal(ts.columns("tip_pos"), [2, 3, 4])
    np.testing.assert_array_equal(ts.signal("imu_gyro"), d[:, 5:8])
    # With all sensors, data columns coincide with sensordata indices.
    for name in ts.names:
        np.testing.assert_array_equal(
            ts.columns(name), signal_source_indices(arm, name, SignalType.MjSensor)
        )


def test_from_names_wrong_width_states_layout(arm: mujoco.MjModel) -> None:
    with pytest.raises(
        ValueError,
        match=re.escape(
            "data must have 9 columns (shoulder_pos:1, elbow_vel:1, tip_pos:3, imu_gyro:3, "
            "slide_qpos:1), got 5"
        ),
    ):
        TimeSeries.from_names(_times(), np.zeros((10, 5)), arm)


def test_from_names_mixed_states(arm: mujoco.MjModel) -> None:
    names = ["float_qpos", "tip_pos", "ball_qvel", "elbow_filtered_act", "shoulder_qpos"]
    ts = TimeSeries.from_names(_times(), _ramp(10, 7 + 3 + 3 + 1 + 1), arm, names=names)
    assert ts.names == names
    m = ts.signal_mapping
    assert m["float_qpos"][0] is SignalType.MjStateQPos
    np.testing.assert_array_equal(m["float_qpos"][1], np.arange(7))
    np.testing.assert_array_equal(m["tip_pos"][1], [7, 8, 9])
    assert m["ball_qvel"][0] is SignalType.MjStateQVel
    np.testing.assert_array_equal(m["ball_qvel"][1], [10, 11, 12])
    assert m["elbow_filtered_act"][0] is SignalType.MjStateAct
    np.testing.assert_array_equal(m["shoulder_qpos"][1], [14])


def test_from_names_explicit_pairs(arm: mujoco.MjModel) -> None:
    names = [
        ("slide_qpos", SignalType.MjSensor),
        ("ball", SignalType.MjStateQPos),  # a bare joint name
        ("float", SignalType.MjStateQVel),
        ("elbow_filtered", SignalType.MjStateAct),
        ("elbow_filtered", SignalType.MjCtrl),
    ]
    ts = TimeSeries.from_names(_times(), np.zeros((10, 1 + 4 + 6 + 1 + 1)), arm, names)
    assert ts.names == [
        "slide_qpos",
        "ball_qpos",
        "float_qvel",
        "elbow_filtered_act",
        "elbow_filtered_ctrl",  # #16 (D1.7): controls are keyed "<actuator>_ctrl"
    ]
    assert ts.signal_type("slide_qpos") is SignalType.MjSensor
    # The explicit type selects the joint state although a sensor has that name.
    ts = TimeSeries.from_names(
        _times(), np.zeros((10, 1)), arm, [("slide_qpos", SignalType.MjStateQPos)]
    )
    assert ts.signal_type("slide_qpos") is SignalType.MjStateQPos
    np.testing.assert_array_equal(
        signal_source_indices(arm, "slide_qpos", SignalType.MjStateQPos), [6]
    )
    # Sensor and state under one key cannot share a series.
    with pytest.raises(
        ValueError,
        match=r"got 'slide_qpos' twice .*the MjSensor and the MjStateQPos signal share the "
        r"mapping key 'slide_qpos'",
    ):
        TimeSeries.from_names(
            _times(), np.zeros((10, 2)), arm, [names[0], ("slide", SignalType.MjStateQPos)]
        )


def test_from_names_explicit_pair_state_alias(arm: mujoco.MjModel) -> None:
    # "<joint>_qpos" with an explicit type is the joint state even when a sensor has that name.
    ts = TimeSeries.from_names(
        _times(), np.zeros((10, 1)), arm, [("slide_qvel", SignalType.MjStateQVel)]
    )
    assert ts.names == ["slide_qvel"]


def test_from_names_errors(arm: mujoco.MjModel) -> None:
    t, d = _times(), np.zeros((10, 1))
    with pytest.raises(KeyError, match=r"unknown sensor 'shoulder_qpos'"):
        TimeSeries.from_names(t, d, arm, [("shoulder_qpos", SignalType.MjSensor)])
    with pytest.raises(KeyError, match=r"unknown signal 'nope'"):
        TimeSeries.from_names(t, d, arm, ["nope"])
    with pytest.raises(ValueError, match=r"signal type of 'x' must be one of .*from_custom_map"):
        TimeSeries.from_names(t, d, arm, [("x", SignalType.CustomObs)])
    with pytest.raises(TypeError, match=r"signal type of 'tip_pos' must be a SignalType"):
        TimeSeries.from_names(t, d, arm, [("tip_pos", "MjSensor")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"each name must be a string or a \(name, SignalType\)"):
        TimeSeries.from_names(t, d, arm, [3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"names must name each signal once, got 'ball_qpos'"):
        TimeSeries.from_names(
            t, np.zeros((10, 8)), arm, ["ball_qpos", ("ball", SignalType.MjStateQPos)]
        )
    with pytest.raises(ValueError, match=r"times must be strictly increasing"):
        TimeSeries.from_names(t[::-1], d, arm, ["shoulder_pos"])


def test_from_names_single_string(arm: mujoco.MjModel) -> None:
    ts = TimeSeries.from_names(_times(), np.zeros(10), arm, "elbow_vel")
    assert ts.names == ["elbow_vel"]


def test_from_names_unnamed_sensor(unnamed: mujoco.MjModel) -> None:
    with pytest.raises(
        ValueError,
        match=r"sensor 1 \(type mjSENS_JOINTVEL\) must have a name.*name every sensor in the "
        r"MJCF or pass names=\[\.\.\.\]",
    ):
        TimeSeries.from_names(_times(), np.zeros((10, 2)), unnamed)
    ts = TimeSeries.from_names(_times(), np.zeros((10, 2)), unnamed, ["hinge_pos", "hinge_qvel"])
    assert ts.names == ["hinge_pos", "hinge_qvel"]


def test_from_control_names(arm: mujoco.MjModel) -> None:
    u = _ramp(10, 2)
    ts = TimeSeries.from_control_names(_times(), u, arm)
    # #16 (D1.7): keys "<actuator>_ctrl"; the actuator name still finds the signal.
    assert ts.names == ["shoulder_servo_ctrl", "elbow_filtered_ctrl"]
    assert all(k is SignalType.MjCtrl for k, _ in ts.signal_mapping.values())
    np.testing.assert_array_equal(ts.signal("elbow_filtered"), u[:, [1]])
    np.testing.assert_array_equal(ts.signal("elbow_filtered_ctrl"), u[:, [1]])
    ts = TimeSeries.from_control_names(_times(), u[:, :1], arm, ["elbow_filtered_ctrl"])
    assert ts.names == ["elbow_filtered_ctrl"]
    with pytest.raises(KeyError, match=r"unknown actuator 'elbow' for MjCtrl"):
        TimeSeries.from_control_names(_times(), u[:, :1], arm, ["elbow"])
    with pytest.raises(
        ValueError, match=r"data must have 2 columns \(shoulder_servo:1, elbow_filtered:1\), got 3"
    ):
        TimeSeries.from_control_names(_times(), np.zeros((10, 3)), arm)
    with pytest.raises(
        ValueError, match=r"signal type of 'shoulder_servo' must be one of \['MjCtrl'\]"
    ):
        TimeSeries.from_control_names(
            _times(), u[:, :1], arm, [("shoulder_servo", SignalType.MjSensor)]
        )


def test_from_control_names_unnamed(unnamed: mujoco.MjModel) -> None:
    with pytest.raises(ValueError, match=r"actuator 0 must have a name"):
        TimeSeries.from_control_names(_times(), np.zeros((10, 1)), unnamed)


def test_from_custom_map() -> None:
    ts = TimeSeries.from_custom_map(_times(), _ramp(10, 4), ["a", ("b", 2), ("c", 1)])
    assert ts.names == ["a", "b", "c"]
    assert all(k is SignalType.CustomObs for k, _ in ts.signal_mapping.values())
    np.testing.assert_array_equal(ts.columns("b"), [1, 2])
    with pytest.raises(ValueError, match=r"data must have 3 columns \(a:1, b:2\), got 4"):
        TimeSeries.from_custom_map(_times(), _ramp(10, 4), ["a", ("b", 2)])
    with pytest.raises(ValueError, match=r"width of 'b' must be a positive integer, got 0"):
        TimeSeries.from_custom_map(_times(), _ramp(10, 1), ["a", ("b", 0)])
    with pytest.raises(ValueError, match=r"signals must name each signal once, got 'a' twice"):
        TimeSeries.from_custom_map(_times(), _ramp(10, 2), ["a", "a"])
    with pytest.raises(TypeError, match=r"each signal must be a name or a \(name, width\) pair"):
        TimeSeries.from_custom_map(_times(), _ramp(10, 1), [("a", 1, 2)])  # type: ignore[list-item]


def test_columns_unknown_name_lists_known() -> None:
    ts = TimeSeries.from_custom_map(_times(), _ramp(10, 2), ["alpha", "beta"])
    with pytest.raises(
        KeyError, match=r"unknown signal 'alpah' \(known signals: \['alpha', 'beta'\]\); did you"
    ):
        ts.columns("alpah")
    with pytest.raises(KeyError, match=r"got a series without a mapping"):
        TimeSeries(_times(), _ramp(10, 2)).signal("alpha")


# ------------------------------------------------------------------------------------------
# Interpolation, hold, resampling


def _irregular() -> TimeSeries:
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.01, 0.2, size=40))
    return TimeSeries.from_custom_map(t, rng.normal(size=(40, 3)), ["a", ("b", 2)])


def test_resample_matches_per_column_np_interp() -> None:
    ts = _irregular()
    rng = np.random.default_rng(1)
    new = np.sort(rng.uniform(ts.times[0], ts.times[-1], size=200))
    new = np.unique(np.concatenate([new, ts.times[::3], ts.times[[-1]]]))
    out = ts.resample(new)
    ref = np.stack([np.interp(new, ts.times, ts.data[:, j]) for j in range(ts.dim)], axis=1)
    np.testing.assert_allclose(out.data, ref, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(out.times, new)
    assert out.signal_mapping is ts.signal_mapping
    assert not out.data.flags.writeable and not out.times.flags.writeable
    # Sample times are reproduced exactly.
    hit = np.isin(new, ts.times)
    np.testing.assert_array_equal(out.data[hit], ts.data[np.isin(ts.times, new)])


def test_resample_target_dt() -> None:
    ts = TimeSeries(_times(11, 0.1), np.arange(11.0))
    out = ts.resample(target_dt=0.03)
    np.testing.assert_allclose(out.times, np.arange(34) * 0.03)
    assert out.times[-1] <= ts.times[-1]
    np.testing.assert_allclose(out.data, out.times * 10, atol=1e-12)
    # A grid that ends on the last sample keeps it despite float noise in k * dt.
    out = ts.resample(target_dt=0.1)
    assert len(out) == 11 and out.times[-1] == ts.times[-1]
    np.testing.assert_array_equal(out.data, ts.data)
    # A step longer than the span gives the first sample only.
    assert len(ts.resample(target_dt=5.0)) == 1


def test_resample_argument_errors() -> None:
    ts = TimeSeries(_times(11, 0.1), np.arange(11.0))
    with pytest.raises(TypeError, match="exactly one of new_times or target_dt, got neither"):
        ts.resample()
    with pytest.raises(TypeError, match="exactly one of new_times or target_dt, got both"):
        ts.resample(ts.times, target_dt=0.1)
    for bad in (0.0, -0.1, np.nan, np.inf, True):
        with pytest.raises(ValueError, match="target_dt must be a finite positive number"):
            ts.resample(target_dt=bad)
    with pytest.raises(
        ValueError,
        match=r"new_times must lie within the series span \[0\.0, 1\.0\], got new_times\[2\]=1\.2",
    ):
        ts.resample([0.5, 0.9, 1.2, 1.5])
    with pytest.raises(ValueError, match=r"got new_times\[0\]=-0\.1"):
        ts.resample([-0.1, 0.5])
    with pytest.raises(
        ValueError, match=r"new_times must be strictly increasing, got new_times\[1\]"
    ):
        ts.resample([0.5, 0.5])
    with pytest.raises(ValueError, match=r"new_times must be finite, got nan at index 1"):
        ts.resample([0.5, np.nan])


def test_resample_tolerates_float_noise_at_span_ends() -> None:
    ts = TimeSeries(np.linspace(0.0, 1.0, 11), np.arange(11.0))
    end = 1.0 + 1e-14
    out = ts.resample([0.0 - 1e-14, 0.5, end])
    assert out.times[-1] == end  # times are kept as given
    np.testing.assert_allclose(out.data, [0.0, 5.0, 10.0])


def test_resample_single_sample_series() -> None:
    ts = TimeSeries([2.0], [[1.0, 2.0]])
    out = ts.resample([2.0])
    np.testing.assert_array_equal(out.data, [[1.0, 2.0]])
    np.testing.assert_array_equal(ts.interpolate(2.0), [1.0, 2.0])
    np.testing.assert_array_equal(ts.get(2.0)[1], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"span \[2\.0, 2\.0\]"):
        ts.interpolate(2.1)


def test_interpolate_scalar_and_array() -> None:
    ts = TimeSeries(_times(11, 0.1), np.stack([np.arange(11.0), -np.arange(11.0)], axis=1))
    out = ts.interpolate(0.25)
    assert out.shape == (2,)
    np.testing.assert_allclose(out, [2.5, -2.5])
    out = ts.interpolate([0.95, 0.05, 0.5])  # any order
    assert out.shape == (3, 2)
    np.testing.assert_allclose(out[:, 0], [9.5, 0.5, 5.0])
    np.testing.assert_array_equal(ts.interpolate(ts.times), ts.data)


def test_interpolate_outside_span() -> None:
    ts = TimeSeries(_times(11, 0.1), np.arange(11.0))
    with pytest.raises(
        ValueError, match=r"t must lie within the series span \[0\.0, 1\.0\], got t=1\.5"
    ):
        ts.interpolate(1.5)
    with pytest.raises(ValueError, match=r"got t\[1\]=-0\.5.*hold=True"):
        ts.interpolate([0.5, -0.5, 2.0])
    np.testing.assert_array_equal(ts.interpolate([-0.5, 0.5, 2.0], hold=True), [0, 5, 10])
    with pytest.raises(ValueError, match=r"t must be finite, got t=nan"):
        ts.interpolate(np.nan, hold=True)
    with pytest.raises(ValueError, match=r"t must be a scalar or a 1-D array, got shape"):
        ts.interpolate(np.zeros((2, 2)))


def test_get_zero_order_hold() -> None:
    # #16 (D1.4): get returns (times, values) and takes a method (linear by default).
    t = _times(11, 0.1)
    ts = TimeSeries(t, np.arange(11.0))

    def zoh(q: object, hold: bool = False) -> np.ndarray:
        return ts.get(q, method="zoh", hold=hold)[1]

    assert zoh(0.25).shape == ()
    assert zoh(0.25) == 2.0
    assert zoh(0.0) == 0.0
    assert zoh(1.0) == 10.0
    # Exact sample times, with and without float noise, give exactly that sample.
    np.testing.assert_array_equal(zoh(t), np.arange(11.0))
    np.testing.assert_array_equal(zoh(t - 1e-13)[1:], np.arange(1, 11.0))
    np.testing.assert_array_equal(zoh(t + 1e-13), np.arange(11.0))
    assert zoh(0.3) == 3.0  # 0.3 != 3 * 0.1 in floating point
    # Outside the span.
    with pytest.raises(ValueError, match=r"t must lie within the series span \[0\.0, 1\.0\]"):
        zoh(1.01)
    with pytest.raises(ValueError, match=r"got t\[0\]=-1\.0"):
        zoh([-1.0, 0.5])
    np.testing.assert_array_equal(zoh([-1.0, 0.55, 3.0], hold=True), [0.0, 5.0, 10.0])
    times, values = ts.get([0.25, 0.3])
    np.testing.assert_array_equal(times, [0.25, 0.3])
    np.testing.assert_allclose(values, [2.5, 3.0])


def test_get_returns_copy() -> None:
    ts = TimeSeries(_times(3), np.zeros((3, 2)))
    row = ts.get(0.1)[1]
    row[0] = 5.0
    assert ts.data[1, 0] == 0.0


# ------------------------------------------------------------------------------------------
# Other methods


def test_dt_statistics() -> None:
    t = np.concatenate([np.arange(10) * 0.01, [0.15, 0.16]])
    stats = TimeSeries(t, np.zeros(12)).dt_statistics()
    assert isinstance(stats, DtStatistics)
    assert stats.median == pytest.approx(0.01)
    assert stats.max == pytest.approx(0.06)
    assert stats.min == pytest.approx(0.01)
    assert stats.mean == pytest.approx(0.16 / 11)
    assert stats.std == pytest.approx(np.diff(t).std())
    assert stats.n_irregular == 1
    assert TimeSeries(_times(100, 0.01), np.zeros(100)).dt_statistics().n_irregular == 0
    with pytest.raises(ValueError, match="dt_statistics needs at least 2 samples, got 1"):
        TimeSeries([0.0], [0.0]).dt_statistics()


def test_remove_from_beginning() -> None:
    ts = TimeSeries.from_custom_map(_times(11, 0.1) + 5.0, np.arange(11.0), ["x"])
    out = ts.remove_from_beginning(0.3)
    np.testing.assert_allclose(out.times, 5.0 + np.arange(3, 11) * 0.1)  # not shifted
    np.testing.assert_array_equal(out.data, np.arange(3, 11.0))
    assert out.names == ["x"]
    assert len(ts.remove_from_beginning(0)) == 11
    assert len(ts.remove_from_beginning(0.25)) == 8
    assert len(ts.remove_from_beginning(1.0)) == 1
    with pytest.raises(ValueError, match=r"t must be a finite number >= 0 \(seconds\), got -0\.1"):
        ts.remove_from_beginning(-0.1)
    with pytest.raises(ValueError, match=r"t must be a finite number >= 0"):
        ts.remove_from_beginning(np.nan)
    with pytest.raises(ValueError, match=r"t must leave at least one sample, got 1\.5"):
        ts.remove_from_beginning(1.5)


def test_slice_by_name(arm: mujoco.MjModel) -> None:
    d = _ramp(10, arm.nsensordata)
    ts = TimeSeries.from_names(_times(), d, arm)
    out = ts.slice_by_name(["imu_gyro", "shoulder_pos"])
    assert out.names == ["imu_gyro", "shoulder_pos"]
    np.testing.assert_array_equal(out.columns("imu_gyro"), [0, 1, 2])
    np.testing.assert_array_equal(out.columns("shoulder_pos"), [3])
    np.testing.assert_array_equal(out.data, d[:, [5, 6, 7, 0]])
    assert out.signal_type("imu_gyro") is SignalType.MjSensor
    same = TimeSeries.slice_by_name(ts, ["imu_gyro", "shoulder_pos"])
    np.testing.assert_array_equal(same.data, out.data)
    np.testing.assert_array_equal(ts.slice_by_name("tip_pos").data, d[:, 2:5])
    with pytest.raises(KeyError, match=r"unknown signal 'gyro' \(known signals: \['shoulder_pos'"):
        ts.slice_by_name(["gyro"])
    with pytest.raises(ValueError, match=r"names must name each signal once, got 'tip_pos' twice"):
        ts.slice_by_name(["tip_pos", "tip_pos"])
    assert not out.data.flags.writeable


# ------------------------------------------------------------------------------------------
# Files


def test_save_load_round_trip(tmp_path: Path, arm: mujoco.MjModel) -> None:
    ts = TimeSeries.from_names(
        _times(), _ramp(10, 7 + 3), arm, ["float_qpos", ("imu_gyro", SignalType.MjSensor)]
    )
    path = ts.save_to_disk(tmp_path / "sub" / "ts.npz")
    assert path == tmp_path / "sub" / "ts.npz"
    back = TimeSeries.load_from_disk(path)
    np.testing.assert_array_equal(back.times, ts.times)
    np.testing.assert_array_equal(back.data, ts.data)
    assert back.names == ts.names
    assert back.signal_type("float_qpos") is SignalType.MjStateQPos
    with np.load(path, allow_pickle=False) as z:
        assert int(z["schema_version"]) == 1
        assert json.loads(str(z["signal_mapping_json"]))[1] == {
            "name": "imu_gyro",
            "type": "MjSensor",
            "indices": [7, 8, 9],
        }
    raw = TimeSeries(_times(3), np.zeros(3))
    raw.save_to_disk(tmp_path / "raw.npz")
    assert TimeSeries.load_from_disk(tmp_path / "raw.npz").signal_mapping is None


def _write(path: Path, **arrays: np.ndarray) -> Path:
    base = {
        "times": _times(3),
        "data": np.zeros((3, 1)),
        "signal_mapping_json": np.array('[{"name": "a", "type": "CustomObs", "indices": [0]}]'),
        "schema_version": np.array(1),
    }
    base.update(arrays)
    np.savez(path, **{k: v for k, v in base.items() if v is not None})
    return path


def test_load_errors(tmp_path: Path) -> None:
    assert TimeSeries.load_from_disk(_write(tmp_path / "ok.npz")).names == ["a"]
    with pytest.raises(FileNotFoundError, match="no such file"):
        TimeSeries.load_from_disk(tmp_path / "missing.npz")
    good = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "trunc.npz").write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match=r"is not a readable \.npz file"):
        TimeSeries.load_from_disk(tmp_path / "trunc.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ValueError, match=r"is not a readable \.npz file"):
        TimeSeries.load_from_disk(tmp_path / "text.npz")
    np.savez(tmp_path / "foreign.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match=r"missing \['times', 'data', 'signal_mapping_json'"):
        TimeSeries.load_from_disk(tmp_path / "foreign.npz")
    with pytest.raises(ValueError, match=r"schema_version must be <= 1, got 2.*newer mjsysid"):
        TimeSeries.load_from_disk(_write(tmp_path / "v2.npz", schema_version=np.array(2)))
    with pytest.raises(ValueError, match=r"schema_version must be an integer"):
        TimeSeries.load_from_disk(_write(tmp_path / "vf.npz", schema_version=np.array(1.0)))
    bad_type = np.array('[{"name": "a", "type": "MjFoo", "indices": [0]}]')
    with pytest.raises(ValueError, match=r"type must be one of \['MjSensor'.*got 'MjFoo'"):
        TimeSeries.load_from_disk(_write(tmp_path / "t.npz", signal_mapping_json=bad_type))
    with pytest.raises(ValueError, match=r"signal_mapping_json must be valid JSON"):
        TimeSeries.load_from_disk(_write(tmp_path / "j.npz", signal_mapping_json=np.array("[{")))
    bad_entry = np.array('[{"name": "a", "indices": [0]}]')
    with pytest.raises(ValueError, match=r"signal_mapping_json\[0\] must be \{"):
        TimeSeries.load_from_disk(_write(tmp_path / "e.npz", signal_mapping_json=bad_entry))
    out_of_range = np.array('[{"name": "a", "type": "CustomObs", "indices": [3]}]')
    with pytest.raises(ValueError, match=r"indices must be data columns in \[0, 1\), got 3"):
        TimeSeries.load_from_disk(_write(tmp_path / "r.npz", signal_mapping_json=out_of_range))
    with pytest.raises(ValueError, match=r"data must be finite, got nan at row 1, column 0"):
        TimeSeries.load_from_disk(
            _write(tmp_path / "n.npz", data=np.array([[0.0], [np.nan], [0.0]]))
        )
    with pytest.raises(ValueError, match=r"times must be strictly increasing"):
        TimeSeries.load_from_disk(_write(tmp_path / "s.npz", times=np.array([0.0, 0.0, 1.0])))


# ------------------------------------------------------------------------------------------
# Properties (Hypothesis)


@st.composite
def series(draw: st.DrawFn) -> TimeSeries:
    n = draw(st.integers(1, 30))
    steps = draw(
        hnp.arrays(np.float64, n - 1, elements=st.floats(1e-3, 10.0, allow_subnormal=False))
    )
    t0 = draw(st.floats(-100.0, 100.0))
    times = t0 + np.concatenate([[0.0], np.cumsum(steps)])
    widths = draw(st.lists(st.integers(1, 3), min_size=0, max_size=4))
    dim = sum(widths) + draw(st.integers(0, 2))  # some columns may be unnamed
    data = draw(
        hnp.arrays(np.float64, (n, dim), elements=st.floats(-1e6, 1e6, allow_subnormal=False))
    )
    kinds = draw(
        st.lists(st.sampled_from(list(SignalType)), min_size=len(widths), max_size=len(widths))
    )
    if not widths and draw(st.booleans()):
        return TimeSeries(times, data)
    perm = draw(st.permutations(list(range(dim))))
    mapping, start = {}, 0
    for i, (w, kind) in enumerate(zip(widths, kinds, strict=True)):
        mapping[f"s{i}"] = (kind, np.array(perm[start : start + w]))
        start += w
    return TimeSeries(times, data, mapping)


@settings(max_examples=40, deadline=None)
@given(ts=series())
def test_save_load_round_trip_property(
    tmp_path_factory: pytest.TempPathFactory, ts: TimeSeries
) -> None:
    path = tmp_path_factory.mktemp("rt") / "ts.npz"
    back = TimeSeries.load_from_disk(ts.save_to_disk(path))
    np.testing.assert_array_equal(back.times, ts.times)
    np.testing.assert_array_equal(back.data, ts.data)
    if ts.signal_mapping is None:
        assert back.signal_mapping is None
    else:
        assert back.names == ts.names
        for name, (kind, idx) in ts.signal_mapping.items():
            assert back.signal_mapping[name][0] is kind
            np.testing.assert_array_equal(back.signal_mapping[name][1], idx)


@settings(max_examples=60, deadline=None)
@given(ts=series())
def test_resample_at_own_times_is_identity(ts: TimeSeries) -> None:
    out = ts.resample(ts.times)
    np.testing.assert_array_equal(out.times, ts.times)
    np.testing.assert_array_equal(out.data, ts.data)
    np.testing.assert_array_equal(ts.get(ts.times, method="zoh")[1], ts.data)


@settings(max_examples=60, deadline=None)
@given(
    ts=series(),
    slope=st.floats(-10.0, 10.0),
    offset=st.floats(-10.0, 10.0),
    fractions=hnp.arrays(np.float64, 8, elements=st.floats(0.0, 1.0)),
)
def test_interpolate_is_exact_for_linear_data(
    ts: TimeSeries, slope: float, offset: float, fractions: np.ndarray
) -> None:
    linear = TimeSeries(ts.times, offset + slope * ts.times)
    t0, t1 = linear.span
    query = np.clip(t0 + fractions * (t1 - t0), t0, t1)
    expected = offset + slope * query
    scale = 1.0 + abs(offset) + abs(slope) * max(abs(t0), abs(t1))
    np.testing.assert_allclose(linear.interpolate(query), expected, atol=1e-12 * scale)
    out = linear.resample(np.unique(query))
    np.testing.assert_allclose(out.data, offset + slope * out.times, atol=1e-12 * scale)
