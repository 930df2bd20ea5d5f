"""ControlTransform: deadbands, direction-dependent gains and offsets on the commands."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.data.excitation import multisine

ROTOR = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="rotor">
      <joint name="shaft" type="hinge" axis="0 0 1" damping="0.02"/>
      <geom type="cylinder" size="0.05 0.01" mass="0.3"/>
    </body>
    <body name="arm2" pos="0.3 0 0">
      <joint name="shaft2" type="hinge" axis="0 0 1" damping="0.02"/>
      <geom type="cylinder" size="0.05 0.01" mass="0.3"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="motor" joint="shaft" gear="0.05"/>
    <motor name="fan" joint="shaft2" gear="0.05"/>
  </actuator>
  <sensor><jointpos name="angle" joint="shaft"/><jointvel name="speed" joint="shaft"/></sensor>
</mujoco>
"""

TRUTH = {"dz": [0.14, 0.08], "g": [1.0, 0.8], "c": [0.01]}


def _params(values=None) -> ms.ParameterDict:
    v = values or {"dz": [0.05, 0.05], "g": [1.0, 1.0], "c": [0.0]}
    return ms.ParameterDict(
        [
            ms.Parameter("dz", v["dz"], [0.0, 0.0], [0.4, 0.4]),
            ms.Parameter("g", v["g"], [0.3, 0.3], [2.0, 2.0]),
            ms.Parameter("c", v["c"], [-0.1], [0.1]),
        ]
    )


def _transform() -> ms.ControlTransform:
    return ms.ControlTransform().deadband("motor", "dz").gain("motor", "g").offset("mo*", "c")


def test_apply_is_the_documented_formula():
    model = mujoco.MjModel.from_xml_string(ROTOR)
    u = np.array([[-0.5, 0.3], [-0.05, 0.3], [0.0, 0.3], [0.1, 0.3], [0.5, 0.3]])
    out = _transform().apply(_params(TRUTH), u, model)
    dz = np.where(u[:, 0] > 0.14, u[:, 0] - 0.14, np.where(u[:, 0] < -0.08, u[:, 0] + 0.08, 0))
    want = np.where(dz >= 0, 1.0 * dz, 0.8 * dz) + 0.01
    np.testing.assert_allclose(out[:, 0], want, atol=1e-15)
    np.testing.assert_array_equal(out[:, 1], u[:, 1])  # "fan" matches no pattern
    np.testing.assert_array_equal(u[:, 0], [-0.5, -0.05, 0.0, 0.1, 0.5])  # input untouched
    # one value = both directions; declaration order matters (offset before the band)
    sym = ms.ParameterDict([ms.Parameter("d", 0.1, 0.0, 1.0), ms.Parameter("o", 0.2, -1, 1)])
    first = ms.ControlTransform().offset("motor", "o").deadband("motor", "d")
    np.testing.assert_allclose(first.apply(sym, u, model)[:, 0], [-0.2, 0.05, 0.1, 0.2, 0.6])


def _recording(spec: mujoco.MjSpec, model: mujoco.MjModel) -> ms.ModelSequences:
    """Commands through the true deadband/gain/offset, measured angle and speed."""
    n = 1500
    ctrl = np.zeros((n, 2))
    ctrl[:, 0] = 0.6 * multisine(n, 1, 0.002, amplitude=1.0, f0=0.3, f1=4.0, seed=1)[:, 0]
    x0 = ms.create_initial_state(model)
    applied = _transform().apply(_params(TRUTH), ctrl, model)
    (traj,) = ms.sysid_rollout(model, None, applied, x0)
    t = 0.002 * np.arange(n)
    return ms.ModelSequences(
        "rotor",
        spec,
        "run",
        x0,
        ms.TimeSeries.from_control_names(t, ctrl, model),
        ms.TimeSeries.from_names(t, traj.sensordata, model),
    )


def test_deadband_gains_and_offset_are_recovered():
    spec = mujoco.MjSpec.from_string(ROTOR)
    model = spec.compile()
    seq = _recording(spec, model)
    rf = ms.build_residual_fn([seq], control_transform=_transform())
    opt, res = ms.optimize(_params(), rf)
    np.testing.assert_allclose(opt.as_vector(), [0.14, 0.08, 1.0, 0.8, 0.01], atol=1e-6)
    assert rf.stats.compiles == 0 and rf.stats.model_edits <= rf.stats.calls  # no model work
    assert res.success


def test_candidates_get_their_own_controls():
    """A batched call equals one call per candidate (each column simulated with its own
    transformed commands), and the recorded controls are never changed."""
    spec = mujoco.MjSpec.from_string(ROTOR)
    model = spec.compile()
    seq = _recording(spec, model)
    before = seq.control[0].data.copy()
    params = _params()
    x = params.as_vector()
    X = x[:, None] + 0.05 * np.eye(x.size, x.size + 1, 1)
    rf = ms.build_residual_fn([seq], control_transform=_transform())
    R = rf(X, params)
    alone = ms.build_residual_fn([seq], control_transform=_transform())
    for j in range(X.shape[1]):
        np.testing.assert_array_equal(R[:, j], alone(X[:, j], params))
    assert np.all(np.any(R[:, 1:] != R[:, :1], axis=0))  # every parameter acts
    np.testing.assert_array_equal(seq.control[0].data, before)


def test_mistakes_are_named_before_simulating():
    spec = mujoco.MjSpec.from_string(ROTOR)
    model = spec.compile()
    seq = _recording(spec, model)
    with pytest.raises(
        ValueError,
        match=r"ControlTransform.gain\('wheel', 'g'\): the pattern must match at least one "
        r"actuator, got none; actuators: \['motor', 'fan'\]",
    ):
        ms.build_residual_fn([seq], control_transform=ms.ControlTransform().gain("wheel", "g"))
    with pytest.raises(TypeError, match="control_transform must be a ControlTransform or None"):
        ms.build_residual_fn([seq], control_transform=_transform().apply)
    rf = ms.build_residual_fn([seq], control_transform=ms.ControlTransform().offset("motor", "g"))
    with pytest.raises(
        ValueError, match=r"offset\('motor', 'g'\): the parameter must be one value"
    ):
        ms.optimize(_params(), rf)
    neg = ms.ParameterDict([ms.Parameter("dz", 0.1, -0.2, 0.4)])
    rf = ms.build_residual_fn([seq], control_transform=ms.ControlTransform().deadband("*", "dz"))
    with pytest.raises(ValueError, match=r"the parameter's min_value must be 0 or more"):
        ms.optimize(neg, rf)
    with pytest.raises(KeyError, match=r"no parameter named 'dz'"):
        ms.optimize(ms.ParameterDict([ms.Parameter("q", 0.1, 0.0, 1.0)]), rf)
    with pytest.raises(TypeError, match=r"ControlTransform.gain: pattern must be a non-empty str"):
        ms.ControlTransform().gain("", "g")


def test_one_parameter_per_direction_equals_one_for_both():
    model = mujoco.MjModel.from_xml_string(ROTOR)
    u = np.stack([np.linspace(-0.6, 0.6, 241), np.zeros(241)], axis=1)
    both = ms.ParameterDict(
        [
            ms.Parameter("dz", [0.14, 0.08], [0, 0], [1, 1]),
            ms.Parameter("g", [1.2, 0.8], [0, 0], [2, 2]),
        ]
    )
    split = ms.ParameterDict(
        [
            ms.Parameter(name, value, 0.0, 2.0)
            for name, value in (("dzp", 0.14), ("dzn", 0.08), ("gp", 1.2), ("gn", 0.8))
        ]
    )
    one = ms.ControlTransform().deadband("motor", "dz").gain("motor", "g")
    sides = (
        ms.ControlTransform()
        .deadband("motor", "dzp", "positive")
        .deadband("motor", "dzn", "negative")
        .gain("motor", "gp", "positive")
        .gain("motor", "gn", "negative")
    )
    np.testing.assert_array_equal(one.apply(both, u, model), sides.apply(split, u, model))
    sides.validate(model, split)
    with pytest.raises(
        ValueError, match=r"deadband\('motor', 'dz'\): the parameter must be one value"
    ):
        ms.ControlTransform().deadband("motor", "dz", "positive").validate(model, both)
    with pytest.raises(ValueError, match=r"ControlTransform.gain: direction must be one of"):
        ms.ControlTransform().gain("motor", "g", "up")


def test_default_bounds_follow_the_command_range():
    """Deadband and offset bounds are in command units: half the largest |ctrlrange| of the
    matched actuators (1 when none is limited)."""
    model = mujoco.MjModel.from_xml_string(
        ROTOR.replace('<motor name="motor" joint="shaft" gear="0.05"/>',
                      '<motor name="motor" joint="shaft" gear="0.05" ctrlrange="-3 2"/>')
    )  # fmt: skip
    band = ms.make_parameter("control_deadband", model, "motor")
    offset = ms.make_parameter("control_offset", model, "mo*")
    assert (band.min_value[0], band.max_value[0]) == (0.0, 1.5)
    assert (offset.min_value[0], offset.max_value[0]) == (-1.5, 1.5)
    unlimited = ms.make_parameter("control_deadband", model, "fan")
    assert unlimited.max_value[0] == 0.5
    assert ms.make_parameter("control_gain", model, "motor").max_value[0] == 2.0
