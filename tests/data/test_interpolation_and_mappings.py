"""mjsysid's side of the #16 data additions: interpolation methods, model mappings, the
mapping JSON, control-name aliases and named initial states."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.data.interpolation import Interpolation
from mjsysid.data.signals import SignalType, mapping_key
from mjsysid.data.timeseries import (
    ResampleArgumentError,
    decode_signal_mapping,
    encode_signal_mapping,
)

FREE = """
<mujoco><worldbody>
<body name="base"><freejoint name="root"/><geom size="0.1" mass="1"/>
 <body name="arm" pos="0 0 -0.3"><joint type="hinge" axis="0 1 0"/><geom size="0.05" mass="0.5"/>
  <body name="tip" pos="0 0 -0.3"><joint name="wrist" type="hinge" axis="0 1 0"/>
   <geom size="0.05" mass="0.5"/></body></body></body>
</worldbody>
<actuator><motor name="m" joint="wrist"/><motor joint="wrist"/>
<general name="f" joint="wrist" dyntype="filter" dynprm="0.1"/></actuator>
<sensor><jointpos name="wpos" joint="wrist"/><jointvel joint="wrist"/></sensor></mujoco>
"""

T = np.linspace(0.0, 1.0, 11)


@pytest.fixture
def free() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(FREE)


def test_methods_on_two_dimensional_data_and_the_enum() -> None:
    ts = ms.TimeSeries(T, np.column_stack([T**2, T**5]))
    q = np.array([0.05, 0.55, 0.95])
    out = ts.interpolate(q, method=Interpolation.QUINTIC)
    assert out.shape == (3, 2)
    np.testing.assert_allclose(out, np.column_stack([q**2, q**5]), atol=1e-12)
    np.testing.assert_allclose(ts.interpolate(q, "quadratic")[:, 0], q**2, atol=1e-12)
    assert ts.interpolate(0.5, "cubic").shape == (2,)
    np.testing.assert_array_equal(ts.interpolate(0.55, Interpolation.ZOH), ts.data[5])
    assert Interpolation.ZOH is Interpolation.ZERO_ORDER_HOLD
    # Splines reproduce the samples; hold clamps before the spline is evaluated.
    np.testing.assert_allclose(ts.interpolate(T, "cubic"), ts.data, atol=1e-12)
    np.testing.assert_allclose(ts.interpolate([-1.0, 2.0], "cubic", hold=True), ts.data[[0, -1]])


def test_method_errors() -> None:
    ts = ms.TimeSeries(T[:5], T[:5])
    with pytest.raises(ValueError, match=r"at least 6 samples for method 'quintic'.*got 5"):
        ts.interpolate(0.1, "quintic")
    with pytest.raises(TypeError, match=r"method must be one of 'linear'"):
        ts.interpolate(0.1, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"method must be one of .*got 'nearest'"):
        ts.resample(target_dt=0.1, method="nearest")  # type: ignore[arg-type]
    single = ms.TimeSeries([0.0], [2.0])
    np.testing.assert_array_equal(single.interpolate(0.0, "quintic"), [2.0])


def test_resample_argument_error_is_both_kinds() -> None:
    ts = ms.TimeSeries(T, T)
    for call in (lambda: ts.resample(), lambda: ts.resample(T, 0.1)):
        with pytest.raises(ResampleArgumentError) as info:
            call()
        assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    r = ts.resample(None, 0.25, "zoh")  # target_dt and method by position
    np.testing.assert_allclose(r.data, [0.0, 0.2, 0.5, 0.7, 1.0])


def test_one_dimensional_series_through_the_methods(tmp_path: Path) -> None:
    ts = ms.TimeSeries.from_custom_map(T, T, ["x"])
    assert ts.slice_by_name("x").data.shape == (11,)
    assert ts.remove_from_beginning(time_to_remove_s=0.5).data.shape == (6,)
    assert ts.remove_from_beginning(t=0.5).times[0] == 0.5
    with pytest.raises(TypeError, match="exactly one of time_to_remove_s or t, got both"):
        ts.remove_from_beginning(0.1, t=0.1)
    back = ms.TimeSeries.load_from_disk(ts.save_to_disk(tmp_path / "x.npz"))
    assert back.data.shape == (11,) and back.names == ["x"]
    wide = ts.as_2d()
    assert wide.data.shape == (11, 1) and wide.as_2d() is wide and wide.names == ["x"]
    two = ms.TimeSeries(T, np.c_[T, T])
    assert two.as_2d() is two
    times, value = ts.get(0.25)
    assert times.shape == () and value.shape == () and value == pytest.approx(0.25)


def test_control_alias_both_ways(free: mujoco.MjModel) -> None:
    ts = ms.TimeSeries.from_control_names(T, np.c_[T, 2 * T], free, ["m", "f_ctrl"])
    assert ts.names == ["m_ctrl", "f_ctrl"]
    assert ts.get_indices("f")[1].tolist() == [1]
    s = ts.slice_by_name(["f", "m"])
    assert s.names == ["f_ctrl", "m_ctrl"]
    with pytest.raises(ValueError, match=r"names must name each signal once, got 'm_ctrl' twice"):
        ts.slice_by_name(["m", "m_ctrl"])
    # A mapping keyed by the bare actuator name (earlier mjsysid) answers to "<act>_ctrl".
    old = {"m": (SignalType.MjCtrl, np.array([0]))}
    assert mapping_key(old, "m_ctrl") == "m" and mapping_key(old, "x") is None
    custom = {"m": (SignalType.CustomObs, np.array([0]))}
    assert mapping_key(custom, "m_ctrl") is None
    assert ms.resolve_signal_name(free, "m_ctrl") == ("m_ctrl", SignalType.MjCtrl)


def test_model_mappings_named_free_joint_and_unnamed_elements(free: mujoco.MjModel) -> None:
    qpos, qvel, act, ctrl = ms.TimeSeries.compute_all_state_mappings(free)
    # The free joint is keyed by its body although it has a name; the unnamed hinge is left out.
    assert {k: v[1].tolist() for k, v in qpos.items()} == {
        "base_qpos": [0, 1, 2, 3, 4, 5, 6],
        "wrist_qpos": [8],
    }
    assert {k: v[1].tolist() for k, v in qvel.items()} == {
        "base_qvel": [9, 10, 11, 12, 13, 14],
        "wrist_qvel": [16],
    }
    assert {k: v[1].tolist() for k, v in act.items()} == {"f_act": [17]}
    assert {k: v[1].tolist() for k, v in ctrl.items()} == {"m_ctrl": [0], "f_ctrl": [2]}
    sensors = ms.TimeSeries.compute_all_sensor_mapping(free)
    assert {k: v[1].tolist() for k, v in sensors.items()} == {"wpos": [0]}


def test_mapping_json_codes_and_names() -> None:
    mapping = {
        "a": (SignalType.CustomObs, np.array([0])),
        "q": (SignalType.MjStateQPos, np.array([1, 2])),
    }
    text = encode_signal_mapping(mapping)
    assert text == '{"a": [1, [0]], "q": [2, [1, 2]]}'  # mujoco.sysid's integer codes
    back = decode_signal_mapping('{"a": ["CustomObs", [0]], "c": [5, 3]}')
    assert back["a"][0] is SignalType.CustomObs and back["c"][0] is SignalType.MjCtrl
    assert back["c"][1].tolist() == [3]
    with pytest.raises(ValueError, match=r"type must be a SignalType name or code"):
        decode_signal_mapping('{"a": [9, [0]]}')
    with pytest.raises(ValueError, match=r"must be valid JSON"):
        decode_signal_mapping("{")
    with pytest.raises(ValueError, match=r"indices must be a list of integers"):
        decode_signal_mapping('{"a": [0, [true]]}')


def test_save_to_csv_two_dimensional(tmp_path: Path) -> None:
    ts = ms.TimeSeries(T, np.c_[T, -T])
    path = tmp_path / "sub" / "x.csv"
    assert ts.save_to_csv(path) is None
    np.testing.assert_array_equal(np.loadtxt(path, delimiter=","), np.c_[T, T, -T])


def test_create_initial_state_names_and_mappings(free: mujoco.MjModel) -> None:
    quat = [0.0, 0.0, 1.0, 0.0]
    pose = [1.0, 2.0, 3.0, *quat]
    for name in ("base_qpos", "base", "root", "root_qpos"):  # body key or joint name
        x = ms.create_initial_state(free, pose, qpos_names=[name])
        np.testing.assert_array_equal(x[1:8], pose)
    x = ms.create_initial_state(free, act={"f": 0.5})
    assert x[-1] == 0.5
    x = ms.create_initial_state(free, qpos={"wrist_qpos": 0.2}, qvel={"base": np.ones(6)})
    assert x[9] == 0.2 and x[10:16].tolist() == [1.0] * 6
    with pytest.raises(TypeError, match=r"qpos must be an array when qpos_names is given"):
        ms.create_initial_state(free, {"wrist": 0.1}, qpos_names=["wrist"])
    with pytest.raises(KeyError, match=r"unknown state 'elbow_qpos'"):
        ms.create_initial_state(free, [0.1], qpos_names=["elbow_qpos"])
    with pytest.raises(ValueError, match=r"qvel must be an array of length 7 \(base:6, wrist:1\)"):
        ms.create_initial_state(free, qvel=np.zeros(6), qvel_names=["base", "wrist"])
    with pytest.raises(KeyError, match=r"act: the model has no actuator named 'g'"):
        ms.create_initial_state(free, act={"g": 0.5})
