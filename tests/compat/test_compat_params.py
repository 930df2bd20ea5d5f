"""Drop-in (#16): Parameter and ParameterDict as ``mujoco.sysid`` users call them."""

from __future__ import annotations

import mujoco
import numpy as np

import mjsysid.compat as sysid


def _abc() -> tuple[sysid.Parameter, sysid.Parameter, sysid.Parameter]:
    a = sysid.Parameter("a", 1.0, 0.0, 2.0)
    b = sysid.Parameter("b", [0.0, 1.0], [0.0, 0.0], [1.0, 1.0])
    c = sysid.Parameter("c", 3.0, 0.0, 10.0, frozen=True)
    return a, b, c


def test_dict_constructor_keeps_order() -> None:
    a, b, c = _abc()
    d = sysid.ParameterDict({"a": a, "b": b, "c": c})
    assert list(d.keys()) == ["a", "b", "c"]
    assert d["b"] is b


def test_size_and_names_of_non_frozen() -> None:
    a, b, c = _abc()
    d = sysid.ParameterDict([a, b, c])
    assert d.size == 3
    assert a.size == 1 and b.size == 2
    assert d.get_non_frozen_parameter_names() == ["a", "b[0]", "b[1]"]


def test_as_vector_include_frozen() -> None:
    d = sysid.ParameterDict(list(_abc()))
    np.testing.assert_array_equal(d.as_vector(), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(d.as_vector(include_frozen=True), [1.0, 0.0, 1.0, 3.0])


def test_as_nominal_vector() -> None:
    a, b, c = _abc()
    d = sysid.ParameterDict([a, b, c])
    d.update_from_vector(np.array([0.5, 0.2, 0.3]))
    np.testing.assert_array_equal(d.as_nominal_vector(), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(d.as_nominal_vector(include_frozen=True), [1.0, 0.0, 1.0, 3.0])
    np.testing.assert_array_equal(a.as_nominal_vector(), [1.0])
    assert a.as_nominal_vector().shape == (1,)


def test_update_from_vector_keyword_is_vector() -> None:
    a, b, c = _abc()
    a.update_from_vector(vector=np.array([1.5]))
    np.testing.assert_array_equal(a.value, [1.5])
    d = sysid.ParameterDict([a, b, c])
    d.update_from_vector(vector=np.array([0.5, 0.2, 0.3]))
    np.testing.assert_array_equal(d.as_vector(), [0.5, 0.2, 0.3])


def test_update_keyword_is_pdict() -> None:
    d = sysid.ParameterDict()
    d.update(pdict=sysid.ParameterDict([sysid.Parameter("a", 1.0, 0.0, 2.0)]))
    assert list(d.keys()) == ["a"]


def test_move_off_bound_moves_value_not_nominal() -> None:
    p = sysid.Parameter("b", [0.0, 0.5, 1.0, 0.9995], [0.0] * 4, [1.0] * 4)
    assert p.move_off_bound() is None
    np.testing.assert_allclose(p.value, [0.05, 0.5, 0.95, 0.95])
    np.testing.assert_array_equal(p.nominal, [0.0, 0.5, 1.0, 0.9995])
    q = sysid.Parameter("q", [0.0, 1.0], [0.0, 0.0], [1.0, 1.0])
    q.move_off_bound(fraction=0.2, at_bound_tol=1e-3)
    np.testing.assert_allclose(q.value, [0.2, 0.8])


def test_move_off_bounds_returns_self_and_skips_frozen() -> None:
    frozen = sysid.Parameter("f", 0.0, 0.0, 1.0, frozen=True)
    free = sysid.Parameter("e", 0.0, 0.0, 1.0)
    d = sysid.ParameterDict([frozen, free])
    assert d.move_off_bounds() is d
    np.testing.assert_array_equal(frozen.value, [0.0])
    np.testing.assert_allclose(free.value, [0.05])


def test_parameter_sample_draws_uniformly() -> None:
    s = sysid.Parameter("a", 1.0, 0.0, 2.0).sample(np.random.default_rng(0))
    np.testing.assert_allclose(s, [1.2739233746428])
    assert np.shape(s) == (1,)


def test_parameter_sample_leaves_value_unchanged() -> None:
    # The peer returns the draw and keeps .value; mjsysid stores it today (randomize() relies
    # on that and must then assign the draw itself).
    a = sysid.Parameter("a", 1.0, 0.0, 2.0)
    a.sample(np.random.default_rng(0))
    np.testing.assert_array_equal(a.value, [1.0])


def test_dict_sample_draws_non_frozen_in_order() -> None:
    d = sysid.ParameterDict(list(_abc()))
    s = d.sample(np.random.default_rng(0))
    np.testing.assert_allclose(s, [1.27392337, 0.26978671, 0.04097352], rtol=1e-7)
    np.testing.assert_array_equal(d.as_vector(), [1.0, 0.0, 1.0])


def test_apply_modifier_calls_modifier_with_spec_and_param() -> None:
    calls: list[tuple[object, float]] = []
    m = sysid.Parameter("m", 1.0, 0.0, 2.0, modifier=lambda s, p: calls.append((s, p.value[0])))
    spec = mujoco.MjSpec.from_string("<mujoco/>")
    assert m.apply_modifier(spec) is None
    assert calls == [(spec, 1.0)]
    assert sysid.Parameter("n", 1.0, 0.0, 2.0).apply_modifier(spec) is None  # no modifier


def test_get_parameter_info_lists_name_size_shape_frozen() -> None:
    info = sysid.ParameterDict(list(_abc())).get_parameter_info()
    assert isinstance(info, str)
    lines = [ln for ln in info.splitlines() if ln.split()[:1] in (["a"], ["b"], ["c"])]
    assert [ln.split()[:3] for ln in lines] == [
        ["a", "1", "(1,)"],
        ["b", "2", "(2,)"],
        ["c", "1", "(1,)"],
    ]
    assert "Yes" in lines[2] and "No" in lines[0]


def test_compare_parameters_table() -> None:
    d = sysid.ParameterDict(list(_abc()))
    init, pred, true = np.array([1.0, 0.0, 1.0]), np.array([1.1, 0.1, 0.9]), np.array([1.2, 0, 1])
    text = d.compare_parameters(init, pred, true)
    assert isinstance(text, str)
    for word in ("a", "b[0]", "b[1]", "Initial", "Nominal", "Identified", "Lower", "Upper"):
        assert word in text
    assert "RMSE: 0.1" in text and "RMS Delta: 0.1" in text
    text = d.compare_parameters(init, pred, sig_digits=3)  # without measured values
    assert "RMS Delta: 0.1" in text
