"""Identifiability audit (mjsysid.fit.audit) and the ``mjsysid audit`` command."""

from __future__ import annotations

import dataclasses
import io

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.app.cli import main
from mjsysid.data.excitation import make_excitation
from mjsysid.fit.audit import audit_jacobian, audit_residual, noise_from_residual
from mjsysid.fit.jacobian import fd_jacobian

# a slide with two damping sources: the joint's damping and a velocity actuator whose command
# stays 0 (force −kv·v); RK4 integrates both explicitly, so only their sum matters
TWO_DAMPERS = """
<mujoco><option timestep="0.005" gravity="0 0 0" integrator="RK4"/>
  <worldbody><body name="cart"><joint name="slide" type="slide" axis="1 0 0" damping="0.5"/>
    <geom type="box" size=".05 .05 .05" mass="1"/></body></worldbody>
  <actuator><motor name="push" joint="slide"/><velocity name="brake" joint="slide" kv="2"/>
  </actuator>
  <sensor><jointpos name="x" joint="slide"/><jointvel name="v" joint="slide"/></sensor>
</mujoco>
"""

# a free slide pushed by a motor with a gear: x'' = gear·u/mass, only the ratio matters
GEARED_MASS = """
<mujoco><option timestep="0.005" gravity="0 0 0"/>
  <worldbody><body name="cart"><joint name="slide" type="slide" axis="1 0 0"/>
    <geom type="box" size=".05 .05 .05" mass="1"/></body></worldbody>
  <actuator><motor name="push" joint="slide" gear="3"/></actuator>
  <sensor><jointpos name="x" joint="slide"/><jointvel name="v" joint="slide"/></sensor>
</mujoco>
"""


def _residual(xml: str, params_of, noise: float = 0.0, brake_off: bool = False):
    spec = mujoco.MjSpec.from_string(xml)
    model = spec.compile()
    params = params_of(spec, model)
    ctrl = make_excitation("prbs", 400, model.nu, model.opt.timestep)
    if brake_off:
        ctrl[:, 1:] = 0.0
    x0 = ms.create_initial_state(model)
    traj = ms.sysid_rollout(model, None, ctrl, x0)[0]
    data = np.asarray(traj.sensordata)
    data = data + noise * np.random.default_rng(0).standard_normal(data.shape)
    sens = ms.TimeSeries.from_names(traj.times, data, model)
    control = ms.TimeSeries.from_control_names(traj.times, ctrl, model)
    seqs = ms.ModelSequences("m", spec, "s", x0, control, sens)
    return ms.build_residual_fn([seqs]), params, model


def _two_dampers(spec, model):
    return ms.ParameterDict(
        [
            ms.make_parameter("joint_damping", model, "slide"),
            ms.make_parameter("actuator_kv", model, "brake"),
        ]
    )


def test_two_dampers_only_their_sum_is_determined():
    rf, params, model = _residual(
        TWO_DAMPERS,
        _two_dampers,
        noise=1e-3,
        brake_off=True,
    )
    audit = audit_residual(rf, params, n_columns=model.nsensordata)
    assert audit.n_determined == 0
    assert audit.summary().startswith("0 of 2 parameters determined")
    (combo,) = audit.combinations
    assert combo.kind == "sum"
    assert set(combo.names) == {"slide_damping", "brake_kv"}
    assert combo.text.endswith("only their sum is determined")
    assert any("only their sum" in a and a.startswith("freeze one of") for a in audit.advice)


def test_gear_over_mass_is_named_a_ratio():
    rf, params, _ = _residual(
        GEARED_MASS,
        lambda s, m: ms.ParameterDict(
            [
                ms.make_parameter("actuator_gear", m, "push"),
                ms.body_inertia_param(s, m, "cart", ms.InertiaType.Mass),
            ]
        ),
    )
    audit = audit_residual(rf, params, noise=1e-3)
    (combo,) = audit.combinations
    assert combo.kind == "ratio" and set(combo.names) == {"push_gear", "cart_mass"}
    assert "only their ratio is determined" in combo.text


def _pendulum_residual(extra: bool):
    """Gravity torque of a pendulum with a given inertia: τ = m·l·g·sin q (only m·l matters);
    with ``extra`` a damping term d·q̇ that is determined on its own."""
    t = np.linspace(0, 5, 300)
    q, qd = np.sin(1.3 * t), 1.3 * np.cos(1.3 * t)

    def residual(X: np.ndarray) -> np.ndarray:
        m, length = X[0][None, :], X[1][None, :]
        tau = m * length * 9.81 * np.sin(q)[:, None]
        if extra:
            tau = tau + X[2][None, :] * qd[:, None]
        return tau

    return residual


def test_mass_times_length_is_named_a_product():
    residual = _pendulum_residual(extra=True)
    x = np.array([0.8, 0.25, 0.1])  # mass (kg), length (m), damping
    lo, hi = np.array([0.1, 0.05, 0.0]), np.array([5.0, 2.0, 1.0])
    J = fd_jacobian(residual, x, residual(x[:, None])[:, 0], (lo, hi), eps=1e-7)
    audit = audit_jacobian(J, ["pole_mass", "pole_length", "damping"], x, lo, hi, noise=0.01)
    (combo,) = audit.combinations
    assert combo.kind == "product"
    assert combo.text == "pole_mass x pole_length: only their product is determined"
    assert [p.determined for p in audit.parameters] == [False, False, True]
    assert audit.summary().startswith("1 of 3 parameters determined")
    assert np.isinf(audit.parameters[0].half_width) and np.isfinite(audit.parameters[2].half_width)


def test_a_sum_is_not_mistaken_for_a_product():
    t = np.linspace(0, 5, 200)
    u = np.sin(t)

    def residual(X: np.ndarray) -> np.ndarray:
        return (X[0] + X[1])[None, :] * u[:, None]

    x, lo, hi = np.array([0.3, 2.0]), np.zeros(2), np.array([1.0, 10.0])
    J = fd_jacobian(residual, x, residual(x[:, None])[:, 0], (lo, hi))
    (combo,) = audit_jacobian(J, ["a", "b"], x, lo, hi).combinations
    assert combo.kind == "sum"


def test_well_posed_problem_is_determined_with_intervals_from_the_noise():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((500, 2))
    audit = audit_jacobian(A, ["a", "b"], [1.0, 2.0], [0, 0], [10, 10], noise=0.1)
    assert audit.n_determined == 2 and audit.combinations == [] and audit.advice == []
    # σ²(AᵀA)⁻¹: the half-width scales with the noise
    wider = audit_jacobian(A, ["a", "b"], [1.0, 2.0], [0, 0], [10, 10], noise=0.2)
    np.testing.assert_allclose(
        [p.half_width for p in wider.parameters],
        [2 * p.half_width for p in audit.parameters],
        rtol=1e-9,
    )
    assert "2 of 2 parameters determined" in "\n".join(audit.lines())


def test_large_noise_makes_a_weak_parameter_undetermined():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((400, 2)) * [1.0, 1e-3]
    audit = audit_jacobian(A, ["strong", "weak"], [1.0, 1.0], [0, 0], [2, 2], noise=0.5)
    assert [p.determined for p in audit.parameters] == [True, False]
    assert any(a.startswith("freeze weak") for a in audit.advice)


def test_parameter_without_effect_is_to_be_frozen_and_pairs_tied():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((100, 3))
    A[:, 1] = 0.0
    A[:, 2] = A[:, 0]
    names = ["left_knee_damping", "unused", "right_knee_damping"]
    audit = audit_jacobian(A, names, [1.0, 1.0, 1.0], [0, 0, 0], [2, 2, 2])
    kinds = sorted(c.kind for c in audit.combinations)
    assert kinds == ["difference", "single"] or kinds == ["single", "sum"]
    assert any(a.startswith("freeze unused") for a in audit.advice)
    assert any(a.startswith("tie left_knee_damping and right_knee_damping") for a in audit.advice)


def test_noise_from_residual_ignores_a_smooth_model_error():
    t = np.linspace(0, 10, 2000)
    rng = np.random.default_rng(4)
    smooth = np.stack([np.sin(t), 3 * np.cos(0.5 * t)], axis=1)
    r = (smooth + 0.05 * rng.standard_normal(smooth.shape)).reshape(-1)
    assert noise_from_residual(r, 2) == pytest.approx(0.05, rel=0.1)
    with pytest.raises(ValueError, match="residual must be at least 4 rows of 3 columns"):
        noise_from_residual(r[:7], 3)


def test_audit_jacobian_rejects_bad_input():
    with pytest.raises(ValueError, match=r"jac must be shape \(n, 2\)"):
        audit_jacobian(np.ones((5, 3)), ["a", "b"], [1, 1], [0, 0], [1, 1])
    with pytest.raises(ValueError, match="noise must be finite and >= 0"):
        audit_jacobian(np.ones((5, 2)), ["a", "b"], [1, 1], [0, 0], [1, 1], noise=-1.0)


def test_audit_of_a_point_where_the_residual_is_not_finite_names_the_entry():
    """Was a silent audit of zeroed Jacobian columns and a NaN noise estimate."""
    rf, params, _ = _residual(TWO_DAMPERS, _two_dampers)
    calls = []

    def diverging(X, p):
        calls.append(np.shape(X))
        R = np.asarray(rf(X, p))
        R[3] = np.nan
        return R

    with pytest.raises(ValueError, match=r"audit_residual: the residual must be finite at the "):
        audit_residual(diverging, params)
    assert calls == [(2, 3)]  # the point with its Jacobian's columns, one call
    assert len(audit_residual(rf, params, noise=0.01).parameters) == 2


def test_audit_command_prints_the_audit():
    out, err = io.StringIO(), io.StringIO()
    assert main(["audit", "example:cartpole", "--noise", "0.01"], stdout=out, stderr=err) == 0
    text = out.getvalue()
    assert "parameters determined" in text and "pole_mass" in text and "95% ±" in text


def test_window_starts_are_summed_up_and_listed_with_all():
    """example:furuta fits 9 physical values and 160 window starts (1 s windows): the audit
    lists the physics, counts the starts and the weak combinations among them alone, and
    keeps every weak combination that touches the physics; --all lists everything."""
    from mjsysid.app.experiment import load_experiment

    exp = load_experiment("example:furuta")
    audit = audit_residual(exp.build_residual_fn(), exp.params, noise=0.35)
    assert len(audit.nuisance) == 160 and all("#" in n for n in audit.nuisance)
    text = "\n".join(audit.lines())
    physical = [p for p in audit.parameters if p.name not in audit.nuisance]
    assert text.startswith(
        f"{sum(p.determined for p in physical)} of 9 physical parameters determined, and "
    )
    assert "furuta/run1#3/pendulum_joint_qpos0 " not in text  # no table row of a start
    alone = [c for c in audit.combinations if set(c.names) <= audit.nuisance]
    assert f"initial states: 160 left out of the table and {len(alone)} weak combinations" in text
    for c in audit.combinations:
        if not set(c.names) <= audit.nuisance:
            assert f"weak: {c.text}" in text
    assert "(the smallest; 169 in all)" in text
    every = "\n".join(audit.lines(every=True))
    assert every.startswith(audit.summary()) and "furuta/run1#3/pendulum_joint_qpos0 " in every
    assert every.count("\nweak: ") == len(audit.combinations)
    # without initial states the audit reads as before
    plain = audit_residual(exp.build_residual_fn(), exp.params, noise=0.35)
    assert dataclasses.replace(plain, nuisance=frozenset()).lines() == every.split("\n")


def test_audit_command_lists_the_window_starts_with_all():
    row = "furuta/run1#3/pendulum_joint_qpos0 "
    outputs = []
    for extra in ([], ["--all"]):
        out = io.StringIO()
        argv = ["audit", "example:furuta", "--noise", "0.35", *extra]
        assert main(argv, stdout=out, stderr=io.StringIO()) == 0
        outputs.append(out.getvalue())
    assert row not in outputs[0] and "mjsysid audit --all lists them" in outputs[0]
    assert row in outputs[1] and "left out of the table" not in outputs[1]
