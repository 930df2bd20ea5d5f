"""D-optimal excitation design (mjsysid.fit.design) and the ``mjsysid design`` command."""

from __future__ import annotations

import io

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.app.cli import main
from mjsysid.app.experiment import bundled_examples
from mjsysid.data.excitation import multisine, prbs
from mjsysid.data.recording import load_recording
from mjsysid.fit.design import DesignProblem, design_excitation, evaluate

# a cart on a limited rail with a spring and a damper, pushed within ctrlrange ±2 N
CART = """
<mujoco><option timestep="0.005" gravity="0 0 0"/>
  <worldbody><body name="cart">
    <joint name="slide" type="slide" axis="1 0 0" damping="0.5" stiffness="10"
           range="-1 1" limited="true"/>
    <geom type="box" size=".05 .05 .05" mass="1"/></body></worldbody>
  <actuator><motor name="push" joint="slide" ctrlrange="-2 2" ctrllimited="true"/></actuator>
  <sensor><jointpos name="x" joint="slide"/><jointvel name="v" joint="slide"/></sensor>
</mujoco>
"""


def _params(spec, model):
    return ms.ParameterDict(
        [
            ms.make_parameter("joint_damping", model, "slide"),
            ms.body_inertia_param(spec, model, "cart", ms.InertiaType.Mass),
        ]
    )


@pytest.fixture(scope="module")
def designed():
    spec = mujoco.MjSpec.from_string(CART)
    model = spec.compile()
    problem = DesignProblem(
        spec, _params(spec, model), ms.create_initial_state(model), 4.0, max_velocity=3.0
    )
    return problem, design_excitation(problem, generations=10, popsize=8)


def test_design_beats_plain_prbs_and_multisine_within_the_limits(designed):
    problem, design = designed
    assert design.logdet > design.baselines["prbs"]
    assert design.logdet > design.baselines["multisine"]
    assert design.violation == 0.0
    lo, hi = problem.model.actuator_ctrlrange[0]
    assert design.control.shape == (problem.n, 1)
    assert lo <= design.control.min() and design.control.max() <= hi
    # the limits checked again in a fresh simulation
    phi, viol, _ = evaluate(problem, [design.control])
    assert viol[0] == 0.0 and phi[0] == pytest.approx(design.logdet)
    assert "design (multisine)" in design.lines()[0]


def _fit_half_widths(control: np.ndarray, seed: int) -> np.ndarray:
    """95 % half-widths after fitting data from a known truth with noise 0.01."""
    spec = mujoco.MjSpec.from_string(CART)
    model = spec.compile()
    truth = _params(spec, model)
    truth.update_from_vector([0.7, 1.2])
    x0 = ms.create_initial_state(model)
    traj = ms.sysid_rollout(ms.apply_param_modifiers(truth, spec), None, control, x0)[0]
    data = np.asarray(traj.sensordata)
    data = data + 0.01 * np.random.default_rng(seed).standard_normal(data.shape)
    sens = ms.TimeSeries.from_names(traj.times, data, model)
    ctrl = ms.TimeSeries.from_control_names(traj.times, control, model)
    seqs = ms.ModelSequences("cart", spec, "s", x0, ctrl, sens)
    rf = ms.build_residual_fn([seqs], normalize=False)
    _, res = ms.optimize(_params(spec, model), rf)
    return ms.calculate_intervals(res.fun, res.jac)[1]


def test_designed_excitation_gives_narrower_fitted_intervals(designed):
    problem, design = designed
    n = problem.n
    designed_hw = _fit_half_widths(design.control, seed=5)
    plain_ms = _fit_half_widths(2.0 * multisine(n, 1, 0.005, f1=5.0), seed=5)
    plain_prbs = _fit_half_widths(2.0 * prbs(n, 1, 0.005, hold=10), seed=5)
    assert np.all(designed_hw < plain_ms)
    assert np.all(designed_hw < plain_prbs)


def test_prbs_family_design_and_bad_signal():
    spec = mujoco.MjSpec.from_string(CART)
    model = spec.compile()
    problem = DesignProblem(spec, _params(spec, model), ms.create_initial_state(model), 2.0)
    design = design_excitation(problem, "prbs", generations=2, popsize=4)
    assert design.signal == "prbs" and design.evaluations == 8
    levels = np.unique(np.round(design.control[:, 0], 9))  # binary: ±amplitude
    assert len(levels) == 2 and levels[0] == -levels[1] and levels[1] <= 2.0
    with pytest.raises(ValueError, match="signal must be one of"):
        design_excitation(problem, "chirp")
    with pytest.raises(ValueError, match="duration must be > 0 seconds"):
        DesignProblem(spec, _params(spec, model), ms.create_initial_state(model), 0.0)


def test_design_command_writes_a_recording(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "design.npz"
    argv = [
        "design",
        "example:cartpole",
        "--duration",
        "2",
        "--generations",
        "2",
        "--popsize",
        "4",
        "-o",
        str(target),
    ]
    assert main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    text = out.getvalue()
    assert "plain prbs" in text and "plain multisine" in text and f"wrote {target}" in text
    assert target.exists()
    model = mujoco.MjModel.from_xml_path(
        str(bundled_examples()["cartpole"].parent / "cartpole.xml")
    )
    rec = load_recording(target, model)
    assert rec.control.data.shape == (round(2 / model.opt.timestep), model.nu)


def test_a_population_cma_es_cannot_adapt_from_is_refused(tmp_path):
    """``popsize`` 2 or 3: one parent; cmaes divided by zero (a RuntimeWarning, an error in
    this suite) instead of a message."""
    spec = mujoco.MjSpec.from_string(CART)
    model = spec.compile()
    problem = DesignProblem(spec, _params(spec, model), ms.create_initial_state(model), 0.2)
    with pytest.raises(ValueError, match=r"^popsize must be an integer >= 4 \(CMA-ES adapts"):
        design_excitation(problem, generations=1, popsize=2)
    err = io.StringIO()
    argv = ["design", "example:cartpole", "--popsize", "3", "-o", str(tmp_path / "d.npz")]
    assert main(argv, stdout=io.StringIO(), stderr=err) == 1
    assert err.getvalue() == "error: --popsize must be an integer >= 4, got 3\n"


def test_a_windowed_experiment_with_force_laws_is_designed_for_its_laws_too(tmp_path):
    """example:furuta: a motor as force laws (a deadzone, a torque constant, friction), fitted
    in 1 s shooting windows. The design leaves the windows' starts out, simulates every
    candidate with the laws (a law's parameter has an effect, so a finite interval), and
    writes the sensors that simulation gives (the plain model's would miss the motor)."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.fit.design import nominal_run

    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "design.csv"
    argv = ["design", "example:furuta", "--duration", "2", "--generations", "2"]
    argv += ["--popsize", "4", "-o", str(target)]
    assert main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    assert "the 160 initial-state parameters of the recorded windows are left out" in err.getvalue()
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.getvalue().splitlines() if ln[:1] != " "}
    for name in ("motor_torque_constant[0]", "arm_friction_friction[1]", "motor_deadzone[0]"):
        assert np.isfinite(float(rows[name][0])), rows[name]  # the design's interval
    exp = load_experiment("example:furuta")
    rec = load_recording(target, exp.model)
    x0 = np.asarray(exp.sequences.initial_state[0], dtype=np.float64)
    laws = tuple(exp.residual_options["force_laws"])
    physics = ms.ParameterDict(
        [p for p in exp.params.values() if not p.meta.get("kind", "").startswith("initial_")]
    )
    problem = DesignProblem(exp.spec, physics, x0, 2.0, force_laws=laws)
    _, sensors, _ = nominal_run(problem, [rec.control.data], x0)
    np.testing.assert_allclose(rec.sensordata.data, sensors[0].data, rtol=1e-9, atol=1e-12)
    plain = DesignProblem(exp.spec, physics, x0, 2.0)  # without the laws: the motor is off
    _, unpowered, _ = nominal_run(plain, [rec.control.data], x0)
    assert np.abs(unpowered[0].data - sensors[0].data).max() > 0.1


def test_an_experiment_without_actuators_is_told_why_design_does_not_apply(tmp_path):
    err = io.StringIO()
    argv = ["design", "example:servo", "-o", str(tmp_path / "d.csv")]
    assert main(argv, stdout=io.StringIO(), stderr=err) == 1
    assert err.getvalue().startswith(
        "error: mjsysid design shapes the commands of the model's actuators, and the model of "
        "'example:servo' has none: its joints are driven otherwise (through the force laws "
        "['servo', 'friction'] and their recorded inputs)"
    )
    assert not (tmp_path / "d.csv").exists()
