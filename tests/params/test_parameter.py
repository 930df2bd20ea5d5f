"""Parameter, ParameterDict, YAML files and parameter kinds."""

from __future__ import annotations

import functools
from pathlib import Path

import mujoco
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mjsysid as ms
from mjsysid.params.kinds import ACTUATOR_KINDS, KINDS

DATA = Path(__file__).parent.parent / "fixtures"


def test_scalar_becomes_length_one_vector():
    p = ms.Parameter("m", 2.0, 1.0, 3.0)
    assert p.value.shape == (1,) and p.shape == (1,) and p.size == 1
    assert p.value[0] == 2.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"nominal": [1.0, 2.0], "min_value": 0.0, "max_value": [3.0, 3.0]},
            r"parameter 'p': nominal, min_value and max_value must have the same shape, "
            r"got \(2,\), \(1,\)",
        ),
        ({"nominal": np.nan, "min_value": 0.0, "max_value": 1.0}, r"'p': nominal must be finite"),
        (
            {"nominal": 1.0, "min_value": np.nan, "max_value": 2.0},
            r"'p': min_value must be a number",
        ),
        (
            {"nominal": 1.0, "min_value": 2.0, "max_value": 0.0},
            r"'p': min_value must be <= max_value, got min_value\[0\]=2.0 > max_value\[0\]=0.0",
        ),
        (
            {"nominal": 1.0, "min_value": 1.0, "max_value": 1.0},
            r"'p': min_value must be < max_value for a non-frozen parameter.*frozen=True",
        ),
        (
            {"nominal": 5.0, "min_value": 0.0, "max_value": 1.0},
            r"'p': nominal must lie within \[min_value, max_value\], got nominal\[0\]=5.0 outside",
        ),
        (
            {"nominal": [[1.0]], "min_value": 0.0, "max_value": 2.0},
            r"'p': nominal must be a scalar or a 1-D",
        ),
        ({"nominal": "abc", "min_value": 0.0, "max_value": 2.0}, r"'p': nominal must be a number"),
        # booleans and numeric strings are mistakes, not 1.0 / 0.0 / a parsed number
        (
            {"nominal": True, "min_value": 0.0, "max_value": 2.0},
            r"'p': nominal must be a number or a sequence of numbers, got True",
        ),
        (
            {"nominal": [0.5, True], "min_value": [0, 0], "max_value": [2, 2]},
            r"'p': nominal must be a number or a sequence of numbers, got \[0.5, True\]",
        ),
        (
            {"nominal": 0.5, "min_value": False, "max_value": 2.0},
            r"'p': min_value must be a number or a sequence of numbers, got False",
        ),
        (
            {"nominal": 0.5, "min_value": 0.0, "max_value": "2"},
            r"'p': max_value must be a number or a sequence of numbers, got '2'",
        ),
    ],
)
def test_parameter_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ms.Parameter("p", **kwargs)


def test_frozen_allows_equal_bounds():
    p = ms.Parameter("p", 1.0, 1.0, 1.0, frozen=True)
    assert p.frozen


def test_frozen_must_be_a_bool():
    with pytest.raises(TypeError, match=r"parameter 'p': frozen must be True or False, got 'no'"):
        ms.Parameter("p", 1.0, 0.0, 2.0, frozen="no")  # type: ignore[arg-type]
    p = ms.Parameter("p", 1.0, 0.0, 2.0, frozen=np.bool_(True))
    assert p.frozen is True
    with pytest.raises(TypeError, match=r"parameter 'p': frozen must be True or False, got 0"):
        p.frozen = 0  # type: ignore[assignment]
    assert p.frozen is True  # unchanged by the refused assignment
    p.frozen = False
    assert p.frozen is False


def test_unfreezing_equal_bounds_is_an_error():
    """Equal bounds are allowed only while frozen; unfreezing such a parameter used to reach the
    optimizer (MuJoCo's FatalError, or "converged" after 0 iterations)."""
    p = ms.Parameter("p", [0.5, 1.0], [0.0, 1.0], [1.0, 1.0], frozen=True)
    with pytest.raises(
        ValueError,
        match=r"'p': min_value must be < max_value for a non-frozen parameter, got both equal "
        r"to 1.0 at index 1; widen the bounds before unfreezing it",
    ):
        p.frozen = False
    assert p.frozen
    p.max_value[1] = 2.0
    p.frozen = False
    assert not p.frozen


def test_value_may_leave_the_bounds_and_optimize_refuses_it():
    """The value is checked for shape and finiteness, not bounds: simulating a truth outside a
    fit's bounds and sweeping are legitimate; ``optimize`` names such a start (test_optimize)."""
    p = ms.Parameter("p", 1.0, 0.0, 2.0)
    p.value = 5.0
    assert p.value[0] == 5.0
    d = ms.ParameterDict([p])
    d.update_from_vector([-3.0])
    assert p.value[0] == -3.0
    d.reset()
    assert p.value[0] == 1.0
    d.randomize(np.random.default_rng(0))
    assert 0.0 <= p.value[0] <= 2.0
    with pytest.raises(ValueError, match=r"'p': value must be a number .*, got True"):
        p.value = True


def test_value_setter_checks_shape_and_finiteness():
    p = ms.Parameter("p", [1.0, 2.0], [0.0, 0.0], [3.0, 3.0])
    with pytest.raises(ValueError, match=r"'p': value must be shape \(2,\)"):
        p.value = [1.0]
    with pytest.raises(ValueError, match="'p': value must be finite"):
        p.value = [1.0, np.inf]


def test_sample_within_bounds_and_infinite_bounds_rejected():
    p = ms.Parameter("p", [1.0, 2.0], [0.0, 1.5], [3.0, 2.5])
    v = p.sample(np.random.default_rng(0))
    assert np.all(v >= p.min_value) and np.all(v <= p.max_value)
    q = ms.Parameter("q", 0.0, -np.inf, np.inf)
    with pytest.raises(ValueError, match="'q': sample needs finite bounds"):
        q.sample()


def _dict() -> ms.ParameterDict:
    d = ms.ParameterDict()
    d.add(ms.Parameter("a", 1.0, 0.0, 2.0))
    d.add(ms.Parameter("b", [1.0, 2.0], [0.0, 0.0], [5.0, 5.0]))
    d.add(ms.Parameter("c", 3.0, 3.0, 3.0, frozen=True, modifier=lambda s, p: 1 / 0))
    return d


def test_vector_view_skips_frozen():
    d = _dict()
    np.testing.assert_array_equal(d.as_vector(), [1.0, 1.0, 2.0])
    lo, hi = d.get_bounds()
    np.testing.assert_array_equal(lo, [0, 0, 0])
    np.testing.assert_array_equal(hi, [2, 5, 5])
    assert d.get_non_frozen_parameter_names() == ["a", "b[0]", "b[1]"]
    d.update_from_vector([1.5, 3.0, 4.0])
    np.testing.assert_array_equal(d["b"].value, [3.0, 4.0])
    assert d["c"].value[0] == 3.0
    d.randomize(np.random.default_rng(1))
    assert d["c"].value[0] == 3.0
    d.reset()
    np.testing.assert_array_equal(d.as_vector(), [1.0, 1.0, 2.0])


def test_update_from_vector_checks_length_and_finiteness():
    d = _dict()
    with pytest.raises(ValueError, match=r"update_from_vector: x must be a 1-D array of length 3"):
        d.update_from_vector([1.0, 2.0])
    with pytest.raises(ValueError, match=r"x must be finite, got x\[2\]=nan \(b\[1\]\)"):
        d.update_from_vector([1.0, 2.0, np.nan])
    with pytest.raises(ValueError, match=r"update_from_vector: x must be an array of 3 numbers"):
        d.update_from_vector("abc")
    with pytest.raises(
        ValueError, match=r"x must be an array of 3 numbers, got \[1.0, True, 2.0\]"
    ):
        d.update_from_vector([1.0, True, 2.0])


def test_container_protocol():
    d = _dict()
    assert len(d) == 3 and "a" in d and "z" not in d and list(d) == ["a", "b", "c"]
    with pytest.raises(
        KeyError, match=r"no parameter named 'z'; known parameters: \['a', 'b', 'c'\]"
    ):
        d["z"]
    with pytest.raises(ValueError, match="already has a parameter named 'a'"):
        d.add(ms.Parameter("a", 1.0, 0.0, 2.0))
    e = ms.ParameterDict([ms.Parameter("x", 1.0, 0.0, 2.0)])
    d.update(e)
    assert "x" in d


def test_frozen_modifier_not_called(arm_spec):
    d = _dict()  # "c" raises if its modifier runs
    ms.apply_param_modifiers(d, arm_spec)


def test_copy_is_deep_and_keeps_modifiers():
    calls = []
    d = ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 2.0, modifier=lambda s, p: calls.append(1))])
    c = d.copy()
    c["a"].value[0] = 1.5
    assert d["a"].value[0] == 1.0
    assert c["a"].modifier is d["a"].modifier


def test_yaml_round_trip_and_schema(tmp_path):
    d = _dict()
    d["a"].value = 1.25
    path = tmp_path / "p.yaml"
    d.save_to_disk(path)
    text = path.read_text()
    assert "schema_version: 1" in text
    back = ms.ParameterDict.load_from_disk(path)
    assert back.keys() == d.keys()
    for name in d:
        np.testing.assert_array_equal(back[name].value, d[name].value)
        np.testing.assert_array_equal(back[name].min_value, d[name].min_value)
        assert back[name].frozen == d[name].frozen


def test_infinite_bounds_round_trip(tmp_path):
    d = ms.ParameterDict([ms.Parameter("bias", 0.0, -np.inf, np.inf)])
    d.save_to_disk(tmp_path / "p.yaml")
    back = ms.ParameterDict.load_from_disk(tmp_path / "p.yaml")
    assert back["bias"].min_value[0] == -np.inf and back["bias"].max_value[0] == np.inf


def test_reads_peer_yaml():
    d = ms.ParameterDict.load_from_disk(DATA / "peer_params.yaml")
    assert d["m"].value[0] == 2.5 and d["m"].nominal[0] == 2.0
    assert d["f"].frozen and d["f"].size == 2


def test_load_values_rebinds_by_name(tmp_path):
    calls = []
    d = ms.ParameterDict(
        [ms.Parameter("a", 1.0, 0.0, 2.0, modifier=lambda s, p: calls.append(p.value[0]))]
    )
    saved = d.copy()
    saved["a"].value = 1.75
    saved.save_to_disk(tmp_path / "p.yaml")
    d.load_values(tmp_path / "p.yaml")
    assert d["a"].value[0] == 1.75
    d["a"].modifier(None, d["a"])
    assert calls == [1.75]


def test_load_values_errors(tmp_path):
    ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 2.0)]).save_to_disk(tmp_path / "p.yaml")
    other = ms.ParameterDict([ms.Parameter("b", 1.0, 0.0, 2.0)])
    with pytest.raises(KeyError, match=r"missing \['b'\], unexpected \['a'\]"):
        other.load_values(tmp_path / "p.yaml")
    narrow = ms.ParameterDict([ms.Parameter("a", 0.1, 0.0, 0.5)])
    ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 2.0)]).save_to_disk(tmp_path / "q.yaml")
    with pytest.raises(ValueError, match=r"a.value must lie within"):
        narrow.load_values(tmp_path / "q.yaml")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("schema_version: 2\nparameters: []\n", "schema_version must be an integer <= 1, got 2"),
        ("schema_version: 1\nparameters: []\nextra: 1\n", r"unknown top-level keys \['extra'\]"),
        (
            "schema_version: 1\nparameters:\n- {name: a, nominal: [1], min_value: [0], "
            "max_value: [2], "
            "colour: red}\n",
            r"parameters\[0\]: unknown keys \['colour'\]",
        ),
        (
            "schema_version: 1\nparameters:\n- {name: a, nominal: [1], min_value: [0]}\n",
            r"parameters\[0\]: missing required key 'max_value'",
        ),
        (
            "schema_version: 1\nparameters:\n- {name: a, nominal: [1], min_value: [0], "
            "max_value: [2], "
            "frozen: maybe}\n",
            r"parameters\[0\].frozen must be true or false",
        ),
        ("!!python/object/apply:os.system ['echo hacked']\n", "unsupported YAML tag"),
        ("a: [1, 2\n", "is not valid YAML"),
    ],
)
def test_bad_yaml_files(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        ms.ParameterDict.load_from_disk(path)


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=5),
    frozen=st.lists(st.booleans(), min_size=5, max_size=5),
)
def test_vector_and_yaml_round_trip_property(tmp_path_factory, values, frozen):
    d = ms.ParameterDict()
    for i, v in enumerate(values):
        d.add(ms.Parameter(f"p{i}", v, v - 1.0, v + 1.0, frozen=frozen[i]))
    x = d.as_vector()
    d.update_from_vector(x)
    np.testing.assert_array_equal(d.as_vector(), x)
    path = tmp_path_factory.mktemp("rt") / "p.yaml"
    d.save_to_disk(path)
    back = ms.ParameterDict.load_from_disk(path)
    np.testing.assert_array_equal(back.as_vector(), x)
    assert [p.frozen for p in back.values()] == [p.frozen for p in d.values()]


# -- parameter kinds ----------------------------------------------------------------------------
KIND_XML = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="b" pos="0 0 0.5">
      <joint name="j" type="hinge" axis="0 1 0" damping="0.1" armature="0.02" frictionloss="0.03"
             stiffness="0.5"/>
      <geom name="g" type="capsule" fromto="0 0 0 0.3 0 -0.3" size="0.05" mass="1"/>
      <body name="c" pos="0.3 0 -0.3">
        <joint name="k" type="ball" damping="0.2"/>
        <geom name="g2" type="sphere" size="0.05" mass="0.5"/>
      </body>
    </body>
  </worldbody>
  <contact><pair name="p" geom1="g2" geom2="floor"/></contact>
  <actuator>
    <position name="servo" joint="j" kp="3" kv="0.2"/>
    <motor name="mot" joint="j" gear="2"/>
    <general name="lag" joint="j" dyntype="filter" dynprm="0.02" gainprm="1.5"
             biastype="affine" biasprm="0 0 -0.1"/>
  </actuator>
</mujoco>
"""

KIND_TARGETS = {
    "joint_damping": ("k", 0.35),
    "joint_armature": ("j", 0.05),
    "joint_frictionloss": ("j", 0.07),
    "joint_stiffness": ("j", 1.2),
    "joint_ref": ("j", 0.1),
    "actuator_kp": ("servo", 5.0),
    "actuator_kv": ("servo", 0.6),
    "actuator_gear": ("mot", 3.0),
    "actuator_filter_tau": ("lag", 0.05),
    "geom_friction": ("g", 0.4),
    "pair_friction": ("p", 0.3),
}


@pytest.mark.parametrize("kind", sorted(KIND_TARGETS))
def test_kind_fast_path_matches_recompile(kind):
    spec = mujoco.MjSpec.from_string(KIND_XML)
    model = spec.compile()
    target, value = KIND_TARGETS[kind]
    p = ms.make_parameter(kind, model, target)
    assert p.meta == {"kind": kind, "target": target}
    assert np.all(p.min_value <= p.nominal) and np.all(p.nominal <= p.max_value)
    p.value = [value]
    d = ms.ParameterDict([p])
    slow = ms.apply_param_modifiers(d, spec)
    fast = model.__copy__()
    p.model_modifier(fast, p)
    mujoco.mj_setConst(fast, mujoco.MjData(fast))
    for field in (
        "dof_damping",
        "dof_armature",
        "dof_frictionloss",
        "jnt_stiffness",
        "actuator_gainprm",
        "actuator_biasprm",
        "actuator_gear",
        "geom_friction",
        "pair_friction",
        "dof_invweight0",
        "actuator_acc0",
        "qpos0",
    ):
        np.testing.assert_allclose(
            getattr(fast, field), getattr(slow, field), rtol=1e-12, atol=1e-14, err_msg=field
        )
    # the spec was not modified
    assert spec.compile().dof_damping.tolist() == model.dof_damping.tolist()


def test_kind_errors():
    model = mujoco.MjSpec.from_string(KIND_XML).compile()
    with pytest.raises(ValueError, match=r"kind must be one of"):
        ms.make_parameter("joint_colour", model, "j")
    with pytest.raises(KeyError, match=r"no joint named 'nope'; known: \['j', 'k'\]"):
        ms.make_parameter("joint_damping", model, "nope")
    with pytest.raises(ValueError, match="'mot' must be a position-type actuator"):
        ms.make_parameter("actuator_kp", model, "mot")
    with pytest.raises(TypeError, match="did you pass an MjSpec"):
        ms.make_parameter("joint_damping", mujoco.MjSpec.from_string(KIND_XML), "j")
    signal = {"sensor_delay", "sensor_gain", "sensor_bias"}
    control = {"control_deadband", "control_gain", "control_offset"}
    assert set(KIND_TARGETS) | signal | control | set(ACTUATOR_KINDS) == set(KINDS)


@pytest.mark.parametrize(
    ("kind", "target", "kwargs", "exc", "match"),
    [
        (
            "joint_damping",
            "j",
            {"nominal": [0.3, 0.4]},
            ValueError,
            r"nominal must be a single number for joint_damping \(one value for the whole joint, "
            r"written to each of its dofs\), got \[0.3, 0.4\]",
        ),
        (
            "joint_damping",
            "k",
            {"nominal": [0.3, 0.3, 0.3]},
            ValueError,  # ball: 3 dofs, 1 value
            r"nominal must be a single number for joint_damping",
        ),
        (
            "actuator_gear",
            "mot",
            {"max_value": [5.0, 5.0]},
            ValueError,
            r"max_value must be a single number for actuator_gear, got \[5.0, 5.0\]",
        ),
        (
            "joint_damping",
            "j",
            {"nominal": True},
            ValueError,
            r"nominal must be a number or a sequence of numbers, got True",
        ),
        (
            "joint_damping",
            "j",
            {"nominal": "x"},
            ValueError,
            r"nominal must be a number or a sequence of numbers, got 'x'",
        ),
        (
            "joint_damping",
            "j",
            {"frozen": "no"},
            TypeError,
            r"parameter 'j_damping': frozen must be True or False, got 'no'",
        ),
        (
            3,
            "j",
            {},
            TypeError,
            r"kind must be a string, one of \['actuator_armature', .*\], got 3",
        ),
        (
            ["joint_damping"],
            "j",
            {},
            TypeError,
            r"kind must be a string, one of .*, got \['joint_damping'\]",
        ),
        ("joint_damping", 0, {}, TypeError, r"target must be the joint's name \(a string\), got 0"),
        ("sensor_gain", None, {}, TypeError, r"target must be a sensor name pattern, got None"),
    ],
)
def test_make_parameter_argument_errors(kind, target, kwargs, exc, match):
    model = mujoco.MjSpec.from_string(KIND_XML).compile()
    with pytest.raises(exc, match=match):
        ms.make_parameter(kind, model, target, **kwargs)


LIMITED = {
    "joint_damping": ("j", "a negative damping adds energy"),
    "joint_armature": ("j", "armature is a rotor inertia, never negative"),
    "joint_frictionloss": ("j", "a friction loss is a magnitude, never negative"),
    "actuator_kp": ("servo", "a negative position gain drives away from the target"),
    "actuator_kv": ("servo", "a negative velocity gain adds energy"),
    "actuator_filter_tau": ("lag", "a time constant is positive"),
    "control_deadband": ("mot", "a deadband is a width, never negative"),
    "geom_friction": ("g", "a friction coefficient is never negative"),
    "pair_friction": ("p", "a friction coefficient is never negative"),
}


def test_physical_lower_limits_are_the_documented_ones():
    limited = {k for k, v in KINDS.items() if v.lower is not None and k not in ACTUATOR_KINDS}
    assert limited == set(LIMITED)  # the native actuator kinds: tests/params/test_actuator_kinds.py
    assert all(KINDS[k].lower == 0.0 for k in LIMITED)
    model = mujoco.MjSpec.from_string(KIND_XML).compile()
    for kind, (target, _) in LIMITED.items():  # the default bounds respect the limit
        assert ms.make_parameter(kind, model, target).min_value[0] >= 0.0


@pytest.mark.parametrize("kind", sorted(LIMITED))
def test_bounds_below_a_physical_limit_are_rejected(kind):
    model = mujoco.MjSpec.from_string(KIND_XML).compile()
    target, reason = LIMITED[kind]
    with pytest.raises(
        ValueError,
        match=rf"min_value must be >= 0.0 for {kind} \({reason}\), got -1.0\. A lower bound "
        "below it lets the fit reach values that are not physical",
    ):
        ms.make_parameter(kind, model, target, min_value=-1.0)
    # 0 is the limit itself; -inf (no bound: writing any value, e.g. a simulated truth) is
    # accepted here and refused by optimize (see test_optimize)
    assert ms.make_parameter(kind, model, target, min_value=0.0).min_value[0] == 0.0
    assert ms.make_parameter(kind, model, target, min_value=-np.inf).min_value[0] == -np.inf


def test_kinds_where_negative_values_mean_something_have_no_limit():
    model = mujoco.MjSpec.from_string(KIND_XML).compile()
    for kind, target in (
        ("joint_stiffness", "j"),
        ("actuator_gear", "mot"),
        ("sensor_bias", "*"),
        ("sensor_gain", "*"),
        ("sensor_delay", "*"),
    ):
        assert ms.make_parameter(kind, model, target, min_value=-1.0).min_value[0] == -1.0


def test_negative_gear_gets_bounds_on_its_side_of_zero():
    """A reversed motor (gear -2) used to get default bounds [0.2, 20] that excluded its own
    nominal value."""
    spec = mujoco.MjSpec.from_string(KIND_XML)
    spec.actuator("mot").gear[0] = -2.0
    p = ms.make_parameter("actuator_gear", spec.compile(), "mot")
    np.testing.assert_allclose(p.nominal, [-2.0])
    np.testing.assert_allclose(p.get_bounds(), ([-20.0], [-0.2]))


def test_kind_modifiers_rebound_after_load(tmp_path):
    spec = mujoco.MjSpec.from_string(KIND_XML)
    model = spec.compile()
    d = ms.ParameterDict(
        [
            ms.make_parameter("joint_damping", model, "j"),
            ms.make_parameter("sensor_delay", None, "*_pos"),
        ]
    )
    d["j_damping"].value = [0.9]
    d.save_to_disk(tmp_path / "p.yaml")
    back = ms.ParameterDict.load_from_disk(tmp_path / "p.yaml")
    assert (
        back["j_damping"].modifier is not None
        and back["pos_delay" if False else "*_pos_delay"].modifier is None
    )
    assert ms.apply_param_modifiers(back, spec).dof_damping[0] == pytest.approx(0.9)


def _model_arrays(model):
    return {
        name: getattr(model, name).copy()
        for name in dir(model)
        if not name.startswith("_") and isinstance(getattr(model, name, None), np.ndarray)
    }


def test_write_plan_equals_every_model_modifier_bit_for_bit():
    """All kinds at once through WritePlan (one array write per field) against each
    parameter's model_modifier, from two different previous contents of the model."""
    from mjsysid.params.apply import WritePlan, refresh_constants, write_model_params

    spec = mujoco.MjSpec.from_string(KIND_XML)
    model = spec.compile()
    d = ms.ParameterDict([ms.make_parameter(k, model, t) for k, (t, _) in KIND_TARGETS.items()])
    d.add(ms.body_inertia_param(spec, model, "b", ms.InertiaType.Mass))
    d.add(ms.body_inertia_param(spec, model, "c", ms.InertiaType.MassIpos))  # no elementwise map
    free = d.non_frozen()
    plan = WritePlan(model, free)
    assert [free[i].name for i in plan.other] == ["c_mass_ipos"]
    assert {f[0] for f in plan.fields} >= {"dof_damping", "actuator_biasprm", "body_inertia"}
    rng = np.random.default_rng(4)
    lo, hi = d.get_bounds()
    fast, slow = model.__copy__(), model.__copy__()
    data_f, data_s = mujoco.MjData(fast), mujoco.MjData(slow)
    for _ in range(3):
        x = lo + (np.minimum(hi, 10.0) - lo) * rng.uniform(0.1, 0.9, lo.size)
        d.update_from_vector(x)
        plan.write(fast, x, [free[i] for i in plan.other])
        refresh_constants(fast, data_f)
        write_model_params(slow, free, data_s)
        a, b = _model_arrays(fast), _model_arrays(slow)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        assert fast.stat.meaninertia == slow.stat.meaninertia
        assert fast.stat.meanmass == slow.stat.meanmass


REFRESH_XML = """
<mujoco>
  <worldbody>
    <body name="free" pos="0 0 1"><freejoint/>
      <inertial pos="0.02 0 0.01" mass="1.5" diaginertia="0.02 0.03 0.04"/>
      <body name="ball" pos="0.3 0 0"><joint type="ball"/>
        <inertial pos="0.1 0 0" mass="0.7" diaginertia="0.01 0.02 0.02"/>
        <body name="link" pos="0.2 0 0"><joint type="hinge" axis="0 1 0"/>
          <inertial pos="0.1 0 0" mass="0.4" diaginertia="0.001 0.004 0.004"/>
          CHAIN
        </body>
      </body>
    </body>
    <body name="slider" pos="0 1 1"><joint type="slide" axis="1 0 0"/>
      <inertial pos="0 0 0" mass="2" diaginertia="0.1 0.1 0.1"/>
    </body>
  </worldbody>
</mujoco>
"""
_LINK = (
    '<body pos="0.1 0 0"><joint type="hinge" axis="0 0 1"/>'
    '<inertial pos="0.05 0 0" mass="0.2" diaginertia="0.0005 0.001 0.001"/>{}</body>'
)
REFRESH_XML = REFRESH_XML.replace(
    "CHAIN", functools.reduce(lambda a, _: _LINK.format(a), range(6), "")
)


def test_refresh_constants_reproduces_the_compilers_statistics():
    """``stat.meaninertia`` (trace of M at qpos0 over nv, read from the diagonal of the sparse
    M) and ``stat.meanmass`` after writing masses and inertias into a compiled model equal,
    bit for bit, what the compiler computes for the same values (free, ball, hinge, slide;
    17 DoF and 11 bodies: NumPy's pairwise sums would differ in the last bit)."""
    from mjsysid.params.apply import refresh_constants

    spec = mujoco.MjSpec.from_string(REFRESH_XML)
    base = spec.compile()
    rng = np.random.default_rng(7)
    for _ in range(5):
        for body in spec.bodies[1:]:
            f = rng.uniform(0.5, 2.0)
            body.mass *= f
            body.inertia = np.asarray(body.inertia) * rng.uniform(0.9, 1.1, 3) * f
        compiled = spec.compile()
        model = base.__copy__()
        model.body_mass[:] = compiled.body_mass
        model.body_inertia[:] = compiled.body_inertia
        refresh_constants(model, mujoco.MjData(model))
        assert model.stat.meaninertia == compiled.stat.meaninertia
        assert model.stat.meanmass == compiled.stat.meanmass
        assert model.stat.meaninertia != base.stat.meaninertia  # the test sees a change
        np.testing.assert_array_equal(model.dof_invweight0, compiled.dof_invweight0)


def test_write_plan_falls_back_where_the_map_does_not_hold():
    from mjsysid.params.apply import WritePlan

    spec = mujoco.MjSpec.from_string(KIND_XML)
    model = spec.compile()
    plain = ms.body_inertia_param(spec, model, "c", ms.InertiaType.Mass)
    spec.compiler.boundmass = 0.01  # the compiler's mass floor: a max(), not a linear map
    bounded = ms.body_inertia_param(spec, model, "b", ms.InertiaType.Mass)
    assert bounded.meta["boundmass"] == 0.01
    moved = model.__copy__()
    moved.body_ipos[model.body("c").id] += 0.01  # the model's frame is not the parameter's
    assert WritePlan(model, [bounded]).other == [0]
    assert WritePlan(moved, [plain]).other == [0] and WritePlan(model, [plain]).other == []


def test_motor_kinds_refuse_what_would_change_another_quantity():
    """kp on an affine-bias motor (back-EMF) would add a spring; a filter whose time
    constant is 0 in the model has no sensible default bounds."""
    model = mujoco.MjSpec.from_string(KIND_XML).compile()
    with pytest.raises(ValueError, match=r"actuator 'lag' must be a position servo \(biasprm"):
        ms.make_parameter("actuator_kp", model, "lag")
    ms.make_parameter("actuator_kv", model, "lag")  # its back-EMF damping is fine
    zero = mujoco.MjModel.from_xml_string(
        KIND_XML.replace('dyntype="filter" dynprm="0.02"', 'dyntype="filter" dynprm="0"')
    )
    with pytest.raises(
        ValueError, match=r"'lag' has a filter time constant of 0.0 in the model .* give nominal"
    ):
        ms.make_parameter("actuator_filter_tau", zero, "lag")
    p = ms.make_parameter(
        "actuator_filter_tau", zero, "lag", nominal=0.01, min_value=0.001, max_value=0.1
    )
    assert p.value[0] == 0.01
