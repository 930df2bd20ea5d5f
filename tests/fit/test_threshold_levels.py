"""A command threshold (a deadzone) is determined by the recorded command levels only to the
range between the levels around it: its interval says so, whatever its linearisation says."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.fit.confidence import compute_confidence
from mjsysid.objective.levels import (
    LevelBracket,
    coarse_level_notes,
    level_bracket,
    threshold_brackets,
)
from mjsysid.sim.laws.core import force_law_params
from mjsysid.sim.laws.motors import CommandTorque, RobotYamlMotor

MOTOR = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <body name="rotor">
      <joint name="j" type="hinge" axis="0 0 1" armature="0.003" damping="0.01"/>
      <geom type="cylinder" size="0.03 0.01" mass="0.1"/>
    </body>
  </worldbody>
  <actuator><motor name="u" joint="j" gear="0"/></actuator>
  <sensor><jointpos name="angle" joint="j"/><jointvel name="speed" joint="j"/></sensor>
</mujoco>
"""
PWM = np.array([-150, -90, -50, -20, 20, 50, 90, 150])  # the levels a random hold drew
TRUE_DEADZONE = (36 / 255, 30 / 255)  # 36 and 30 PWM: between 20 and 50 both ways


def test_level_bracket_is_the_levels_around_the_value() -> None:
    levels = np.array([0.1, 0.2, 0.4])
    assert level_bracket(levels, 0.3, 0.0, 1.0) == (0.2, 0.4)
    assert level_bracket(levels, 0.2, 0.0, 1.0) == (0.1, 0.2)  # a level at d drives
    assert level_bracket(levels, 0.05, 0.0, 1.0) == (0.0, 0.1)  # none below: the bound
    assert level_bracket(levels, 0.5, 0.0, 1.0) == (0.4, 1.0)  # none above: the bound


def test_threshold_brackets_per_direction_from_the_bound_actuator() -> None:
    model = mujoco.MjModel.from_xml_string(MOTOR)
    law = RobotYamlMotor("m", "j", actuator="u").bind(model)
    nominal = {"gear": [0.4, 0.4], "deadzone": [0.12, 0.1], "damping": [0.0, 0.0]}
    nominal |= {"frictionloss": [0.0, 0.0], "viscous_quadratic": 0.0, "back_emf_gain": 0.0}
    params = ms.ParameterDict(force_law_params(law, nominal))
    controls = [(PWM / 255)[:, None], np.array([[0.3], [-0.35]])]
    got = threshold_brackets([law], controls, params)
    pos = tuple(sorted([*(PWM[PWM >= 0] / 255).tolist(), 0.3]))
    neg = tuple(sorted([*(-PWM[PWM < 0] / 255).tolist(), 0.35]))
    assert got == [
        LevelBracket("m_deadzone[0]", 0.12, 20 / 255, 50 / 255, "positive", pos, (0, np.inf)),
        LevelBracket("m_deadzone[1]", 0.1, 20 / 255, 50 / 255, "negative", neg, (0, np.inf)),
    ]
    params["m_deadzone"].frozen = True
    assert threshold_brackets([law], controls, params) == []


def _problem(nominal: dict, width: float = 0.02) -> tuple[ms.ParameterDict, object]:
    """A rotor driven through a deadzone by random holds of the PWM levels, simulated at the
    true values; the parameters start at ``nominal`` (``width``: the deadzone's edge)."""
    spec = mujoco.MjSpec.from_string(MOTOR)
    model = spec.compile()
    rng = np.random.default_rng(3)
    u = np.repeat(rng.choice(PWM, 40), 20) / 255.0  # 40 holds of 0.1 s
    times = np.arange(u.size) * model.opt.timestep
    control = ms.TimeSeries.from_control_names(times, u[:, None], model)
    x0 = ms.create_initial_state(model)
    # a logistic edge (width 0.02): the fit has a slope, and its linearised interval is narrow
    law = CommandTorque("m", "j", actuator="u", back_emf=False, width=width)
    truth = ms.ParameterDict(
        force_law_params(law, {"deadzone": TRUE_DEADZONE, "torque_constant": [0.3, 0.3]})
    )
    blank = ms.TimeSeries.from_names(times, np.ones((u.size, 2)), model)
    seqs = ms.ModelSequences("rotor", spec, ["holds"], [x0], [control], [blank])
    fn = ms.build_residual_fn([seqs], force_laws=[law], nthread=1)
    measured = fn.predict(None, truth)[0].predicted_at_measured
    seqs = ms.ModelSequences("rotor", spec, ["holds"], [x0], [control], [measured])
    low = {"deadzone": [0.0, 0.0], "torque_constant": [0.05, 0.05]}
    high = {"deadzone": [0.3, 0.3], "torque_constant": [1.0, 1.0]}
    params = ms.ParameterDict(force_law_params(law, nominal, min_value=low, max_value=high))
    return params, ms.build_residual_fn([seqs], force_laws=[law], nthread=1)


def test_a_deadzone_interval_covers_the_levels_around_it() -> None:
    params, fn = _problem({"deadzone": [0.15, 0.1], "torque_constant": [0.25, 0.25]})
    fitted, result = ms.optimize(params, fn, max_iters=30)
    assert np.allclose(fitted["m_torque_constant"].value, 0.3, rtol=1e-4)
    linear = compute_confidence(result, fn, params=fitted, levels=False)
    conf = compute_confidence(result, fn, params=fitted)
    i = linear.names.index("m_deadzone[0]")
    assert linear.half_widths[i] < 0.01  # what the slope alone would claim
    ends = dict(zip(conf.names, conf.ends(), strict=True))
    for j in (0, 1):
        lo, hi = ends[f"m_deadzone[{j}]"]
        assert lo <= 20 / 255 and hi >= 50 / 255  # the whole range the data leave open
        assert lo < TRUE_DEADZONE[j] < hi
    notes = "\n".join(conf.caveats())
    assert "m_deadzone[0] = " in notes
    assert f"({20 / 255:.6g}, {50 / 255:.6g}]" in notes
    # the torque constant's interval is not touched
    assert ends["m_torque_constant[0]"][1] - ends["m_torque_constant[0]"][0] < 1e-3


@pytest.mark.parametrize("method", ["linear", "hac", "bootstrap"])
def test_the_widening_holds_for_every_interval_method(method: str) -> None:
    params, fn = _problem({"deadzone": TRUE_DEADZONE, "torque_constant": [0.3, 0.3]})
    _, result = ms.optimize(params, fn, max_iters=2)
    blocks = np.repeat(np.arange(4), result.fun.size // 4)
    conf = compute_confidence(result, fn, params=params, method=method, blocks=blocks, draws=20)
    assert conf.method == method
    for j in (0, 1):
        i = conf.names.index(f"m_deadzone[{j}]")
        lo, hi = conf.ends()[i]
        assert np.isfinite(conf.half_widths[i]) and lo <= 20 / 255 and hi >= 50 / 255


def test_coarse_levels_are_noted_before_a_fit_dense_ones_not() -> None:
    model = mujoco.MjModel.from_xml_string(MOTOR)
    law = CommandTorque("m", "j", actuator="u", back_emf=False).bind(model)
    high = {"deadzone": [0.3, 0.3], "torque_constant": [1.0, 1.0]}
    nominal = {"deadzone": [0.1, 0.1], "torque_constant": [0.3, 0.3]}
    params = ms.ParameterDict(force_law_params(law, nominal, max_value=high))
    notes = coarse_level_notes([law], [(PWM / 255)[:, None]], params)
    assert len(notes) == 2
    assert notes[0].startswith("m_deadzone[0] is a threshold on the recorded commands")
    assert "hold 2 such levels within its bounds [0, 0.3], the widest range without one " \
        "(0.07843, 0.1961]" in notes[0]  # fmt: skip
    every = np.arange(-76, 77)[:, None] / 255  # a chirp through every level: 1.3 % apart
    assert coarse_level_notes([law], [every], params) == []
    params["m_deadzone"].frozen = True
    assert coarse_level_notes([law], [(PWM / 255)[:, None]], params) == []


def test_an_experiment_notes_its_coarse_thresholds_when_it_loads() -> None:
    from mjsysid.app.experiment import load_experiment

    notes = [n for n in load_experiment("example:furuta").notes if "a threshold on the" in n]
    named = [n.split(": force_laws: ")[1].split(" ")[0] for n in notes]
    assert named == ["motor_deadzone[0]", "motor_deadzone[1]"]


def test_a_cut_deadzone_without_effect_gets_the_range_not_an_infinite_interval() -> None:
    """The cut edge (width 0) between two levels has a zero Jacobian column: the linearised
    interval is infinite, but the data tell the range between the levels exactly."""
    params, fn = _problem({"deadzone": TRUE_DEADZONE, "torque_constant": [0.25, 0.25]}, 0.0)
    fitted, result = ms.optimize(params, fn, max_iters=20, allow_no_effect=True)
    plain = compute_confidence(result, fn, params=fitted, levels=False)
    conf = compute_confidence(result, fn, params=fitted)
    for j in (0, 1):
        i = conf.names.index(f"m_deadzone[{j}]")
        assert np.isinf(plain.half_widths[i])
        assert tuple(conf.ends()[i]) == (20 / 255, 50 / 255)
        assert np.isfinite(conf.half_widths[i])
    i = conf.names.index("m_torque_constant[0]")  # the others as before
    assert conf.half_widths[i] == plain.half_widths[i]


def test_a_threshold_declaration_is_checked() -> None:
    from mjsysid.sim.laws.core import LawParameter

    with pytest.raises(TypeError, match=r"LawParameter.command_threshold must be True or False"):
        LawParameter(2, command_threshold="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"command_threshold must be 1 or 2 .* got 3"):
        LawParameter(3, command_threshold=True)


def test_a_threshold_without_effect_at_the_start_keeps_its_value_and_the_fit_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A deadzone started between two recorded levels (none within its edge) has a zero
    Jacobian column: no modelling mistake, so no error (the fit once stopped with "no
    effect ... allow_no_effect=True"); it keeps its value, with a warning, and the rest is
    fitted."""
    import logging

    params, fn = _problem({"deadzone": TRUE_DEADZONE, "torque_constant": [0.25, 0.25]}, 0.0)
    with caplog.at_level(logging.WARNING, logger="mjsysid.fit.optimize"):
        fitted, _ = ms.optimize(params, fn, max_iters=20)
    said = "the command thresholds ['m_deadzone[0]', 'm_deadzone[1]'] have no effect"
    assert said in caplog.text
    np.testing.assert_array_equal(fitted["m_deadzone"].value, TRUE_DEADZONE)
    np.testing.assert_allclose(fitted["m_torque_constant"].value, 0.3, rtol=1e-6)
    # a parameter without effect that is neither a threshold nor a start is still an error
    spec_params = ms.ParameterDict([*params.values()])
    spec_params.add(ms.Parameter("unused", 1.0, 0.0, 2.0, modifier=lambda spec, p: None))
    with pytest.raises(ValueError, match=r"parameters \['unused'\] have no effect"):
        ms.optimize(spec_params, fn, max_iters=2)
