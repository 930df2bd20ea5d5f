"""Drop-in (#16): TimeSeries as ``mujoco.sysid`` users call it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mjsysid.compat as sysid

T = np.array([0.0, 0.1, 0.2, 0.3, 0.4])
Q = np.array([0.05, 0.15, 0.25])


def _cubic() -> sysid.TimeSeries:
    return sysid.TimeSeries(T, T**3)


def _custom() -> sysid.TimeSeries:
    data = np.column_stack([T, 2 * T, 3 * T])
    custom = sysid.SignalType.CustomObs
    mapping = {"a": (custom, np.array([0])), "b": (custom, np.array([1, 2]))}
    return sysid.TimeSeries(T, data, mapping)


def test_one_dimensional_data_stays_one_dimensional() -> None:
    ts = _cubic()
    assert ts.data.shape == (5,)
    assert ts.interpolate(Q).shape == (3,)
    assert ts.resample(target_dt=0.1).data.shape == (5,)


def test_linear_interpolation_by_default() -> None:
    np.testing.assert_allclose(np.ravel(_cubic().interpolate(Q)), [0.0005, 0.0045, 0.0175])


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("linear", [0.0005, 0.0045, 0.0175]),
        ("cubic", [0.000125, 0.003375, 0.015625]),  # not-a-knot cubic spline: t**3 exactly
        ("quadratic", [-0.00014285714285714292, 0.0034285714285714284, 0.01557142857142857]),
        ("zero_order_hold", [0.0, 0.001, 0.008]),
        ("zoh", [0.0, 0.001, 0.008]),
    ],
)
def test_interpolate_methods(method: str, expected: list[float]) -> None:
    np.testing.assert_allclose(_cubic().interpolate(Q, method=method), expected, rtol=1e-9)


def test_quintic_reproduces_a_quintic() -> None:
    # The peer raises NotImplementedError here (scipy's interp1d has no quintic); mjsysid
    # gives the degree-5 spline, exact for a degree-5 polynomial.
    t = np.linspace(0.0, 1.0, 8)
    ts = sysid.TimeSeries(t, t**5)
    np.testing.assert_allclose(ts.interpolate(Q, method="quintic"), Q**5, atol=1e-12)


def test_unknown_method_is_rejected_with_the_choices() -> None:
    with pytest.raises(ValueError, match=r"method must be .*zoh"):
        _cubic().interpolate(Q, method="nearest")


def test_resample_with_method() -> None:
    r = _cubic().resample(new_times=np.array([0.0, 0.15, 0.4]), method="zoh")
    np.testing.assert_allclose(r.times, [0.0, 0.15, 0.4])
    np.testing.assert_allclose(np.ravel(r.data), [0.0, 0.001, 0.064])
    r = _cubic().resample(target_dt=0.1, method="cubic")
    np.testing.assert_allclose(np.ravel(r.data), T**3, atol=1e-15)


def test_resample_target_dt_linear() -> None:
    r = _cubic().resample(target_dt=0.05)
    np.testing.assert_allclose(r.times, np.arange(9) * 0.05, atol=1e-12)
    expected = [0.0, 0.0005, 0.001, 0.0045, 0.008, 0.0175, 0.027, 0.0455, 0.064]
    np.testing.assert_allclose(np.ravel(r.data), expected, atol=1e-12)


def test_resample_needs_new_times_or_target_dt() -> None:
    # The peer raises ValueError; mjsysid raises TypeError today (an error class deriving
    # from both keeps existing callers working).
    with pytest.raises(ValueError, match=r"new_times|target_dt"):
        _cubic().resample()


def test_get_returns_times_and_values() -> None:
    times, values = sysid.TimeSeries(T, np.column_stack([T**3, 2 * T**3])).get(np.array([0.15]))
    np.testing.assert_allclose(times, [0.15])
    np.testing.assert_allclose(values, [[0.0045, 0.009]])
    times, values = _cubic().get(0.15, method="zoh")
    np.testing.assert_allclose(values, 0.001)


def test_from_custom_map_with_name_width_type() -> None:
    custom = sysid.SignalType.CustomObs
    data = np.column_stack([T, 2 * T, 3 * T])
    ts = sysid.TimeSeries.from_custom_map(T, data, [("a", 1, custom), ("b", 2, custom)])
    assert list(ts.signal_mapping) == ["a", "b"]
    kind, idx = ts.signal_mapping["b"]
    assert kind is sysid.SignalType.CustomObs
    np.testing.assert_array_equal(idx, [1, 2])


def test_from_custom_map_width_mismatch_names_both_widths() -> None:
    custom = sysid.SignalType.CustomObs
    with pytest.raises(ValueError, match=r"(?s)1.*3"):
        sysid.TimeSeries.from_custom_map(T, np.zeros((5, 3)), [("a", 1, custom)])


def test_get_indices() -> None:
    kind, idx = _custom().get_indices("b")
    assert kind is sysid.SignalType.CustomObs
    np.testing.assert_array_equal(idx, [1, 2])
    with pytest.raises((KeyError, ValueError), match="zz"):
        _custom().get_indices("zz")


def test_slice_by_name_called_on_the_class() -> None:
    s = sysid.TimeSeries.slice_by_name(_custom(), ["b"])
    assert s.data.shape == (5, 2)
    np.testing.assert_array_equal(s.signal_mapping["b"][1], [0, 1])


def test_remove_from_beginning_keyword() -> None:
    r = _cubic().remove_from_beginning(time_to_remove_s=0.15)
    # The peer re-zeroes the kept times ([0, .1, .2]); mjsysid keeps them (aligned with the
    # control and the initial state), see docs/coming-from-mujoco-sysid.md.
    np.testing.assert_allclose(r.times, [0.2, 0.3, 0.4])
    np.testing.assert_allclose(np.ravel(r.data), [0.008, 0.027, 0.064])


def test_create_normalizes_indices() -> None:
    kind = sysid.SignalType.CustomObs
    ts = sysid.TimeSeries.create(T, np.column_stack([T, T]), {"q": (kind, [0, 1])})
    assert isinstance(ts.signal_mapping["q"][1], np.ndarray)
    np.testing.assert_array_equal(ts.signal_mapping["q"][1], [0, 1])
    ts = sysid.TimeSeries.create(T, T, {"q": (kind, 0)})
    np.testing.assert_array_equal(ts.signal_mapping["q"][1], [0])


def test_save_to_csv_times_then_columns(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    assert _custom().save_to_csv(path) is None
    table = np.loadtxt(path, delimiter=",")
    np.testing.assert_allclose(table, np.column_stack([T, T, 2 * T, 3 * T]))
    _cubic().save_to_csv(tmp_path / "y.csv")  # the peer fails on 1-D data
    np.testing.assert_allclose(np.loadtxt(tmp_path / "y.csv", delimiter=","), np.c_[T, T**3])


def test_error_messages_carry_the_peer_key_words() -> None:
    with pytest.raises(ValueError, match=r"Empty.*must|must.*Empty"):
        sysid.TimeSeries(np.array([]), np.array([]))
    with pytest.raises(ValueError, match=r"1D.*got|must be .*1D"):
        sysid.TimeSeries(np.array([[0.0, 1.0]]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"Length.*5.*3"):
        sysid.TimeSeries(T, (T**3)[:3])


def test_strictly_increasing_message() -> None:
    with pytest.raises(ValueError, match="times must be strictly increasing"):
        sysid.TimeSeries(np.array([0.0, 0.0, 1.0]), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="new_times must be strictly increasing"):
        _cubic().resample(new_times=np.array([0.2, 0.1]))


def test_signal_mapping_json_round_trip() -> None:
    from mjsysid.compat._src import timeseries

    mapping = _custom().signal_mapping
    text = timeseries.encode_signal_mapping(mapping)
    assert isinstance(text, str)
    back = timeseries.decode_signal_mapping(text)
    assert list(back) == ["a", "b"]
    assert back["b"][0] is sysid.SignalType.CustomObs
    np.testing.assert_array_equal(back["b"][1], [1, 2])


def test_interpolation_method_literal_is_exported() -> None:
    from mjsysid.compat._src.timeseries import InterpolationMethod

    assert set(InterpolationMethod.__args__) == {  # type: ignore[attr-defined]
        "linear",
        "cubic",
        "quadratic",
        "quintic",
        "zero_order_hold",
        "zoh",
    }


def test_signal_mapping_type_alias_is_exported() -> None:
    from mjsysid.compat._src.timeseries import SignalMappingType

    mapping: SignalMappingType = {"a": (sysid.SignalType.CustomObs, np.array([0]))}
    assert sysid.TimeSeries(T, T, mapping).get_indices("a")[0] is sysid.SignalType.CustomObs
