"""Bad inputs to optimize, refused at the start point before any iteration; and what a
fit keeps (the caller's parameters and spec, a named error for a lost custom modifier)."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from bad_inputs_support import (
    INF,
    NAN,
    _boom,
    _case,
    _checkpoint,
    _model_boom,
    _negative_geom_mass,
    _noop,
    _resume_narrower,
    _start,
    _truncated_checkpoint,
    _with,
    table_test,
)
from conftest import Arm

CASES = [
    # ---- optimize: what only the start point can tell ----------------------------------------
    _case(
        "opt-empty-params",
        lambda c: ms.optimize(ms.ParameterDict(), c.rf),
        ValueError,
        r"initial_params must be a non-empty ParameterDict, got 'an empty one'",
    ),
    _case(
        "opt-all-frozen",
        lambda c: ms.optimize(
            ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 2.0, frozen=True)]), c.rf
        ),
        ValueError,
        r"initial_params must have at least one non-frozen parameter, got 1 "
        r"parameters, all frozen: \['a'\]",
    ),
    _case(
        "opt-start-outside-bounds-peer",
        lambda c: ms.optimize(_start(c.masses(), "link1_mass", 50.0), c.rf),
        ValueError,
        r"initial_params: link1_mass must start within its bounds \[0\.1, 10\.0\], "
        r"got 50\.0; mjsysid does not clip silently",
    ),
    _case(
        "opt-unknown-optimizer",
        lambda c: ms.optimize(c.masses(), c.rf, optimizer="adam"),
        ValueError,
        r"optimizer must be one of \['lm', 'mujoco', 'scipy', 'scipy_parallel_fd'\], got "
        r"'adam'",
    ),
    _case(
        "opt-negative-max-iters",
        lambda c: ms.optimize(c.masses(), c.rf, max_iters=-1),
        ValueError,
        r"max_iters must be a non-negative integer, got -1",
    ),
    _case(
        "opt-infinite-bounds-mujoco",
        lambda c: ms.optimize(
            ms.ParameterDict([ms.make_parameter("joint_damping", c.model, "j1", max_value=INF)]),
            c.rf,
            optimizer="mujoco",
        ),
        ValueError,
        r"optimizer 'mujoco' needs finite bounds, got infinite bounds for "
        r"\['j1_damping'\]",
    ),
    _case(
        "opt-modifier-raises",
        lambda c: ms.optimize(
            ms.ParameterDict([ms.Parameter("k", 1.0, 0.0, 2.0, modifier=_boom)]), c.rf
        ),
        ms.ModifierError,
        r"the modifier of parameter 'k' failed for value "
        r"array\(shape=\(1,\), \[1\.\]\): RuntimeError: kaboom",
    ),
    _case(
        "opt-modifier-breaks-compilation",
        lambda c: ms.optimize(
            ms.ParameterDict(
                [ms.Parameter("g1_mass", 1.0, 0.0, 3.0, modifier=_negative_geom_mass)]
            ),
            c.rf,
        ),
        ms.ModifierError,
        r"the spec failed to compile after applying parameters "
        r"\(g1_mass=array\(shape=\(1,\), \[1\.\]\)\): Error: mass, inertia or "
        r"density are negative",
    ),
    _case(
        "opt-model-modifier-raises",
        lambda c: ms.optimize(
            ms.ParameterDict(
                [ms.Parameter("k", 1.0, 0.0, 2.0, modifier=_noop, model_modifier=_model_boom)]
            ),
            c.rf,
        ),
        ms.ModifierError,
        r"the model_modifier of parameter 'k' failed for value "
        r"array\(shape=\(1,\), \[1\.\]\): IndexError: bad index",
    ),
    _case(
        "opt-modifier-changes-nothing-peer",
        lambda c: ms.optimize(
            _with(c.masses(), ms.Parameter("noop", 1.0, 0.0, 2.0, modifier=_noop)), c.rf
        ),
        ValueError,
        r"parameters \['noop'\] have no effect on the residual at the start point "
        r"\(zero Jacobian column\)",
    ),
    _case(
        "opt-parameter-without-modifier",
        lambda c: ms.optimize(_with(c.masses(), ms.Parameter("orphan", 1.0, 0.0, 2.0)), c.rf),
        ValueError,
        r"parameters \['orphan'\] have no effect on the residual",
    ),
    _case(
        "opt-diverges-at-start",
        lambda c: ms.optimize(
            ms.ParameterDict(
                [
                    ms.make_parameter(
                        "actuator_kp",
                        c.servo_model,
                        "servo",
                        nominal=1e14,
                        min_value=0.1,
                        max_value=1e15,
                    )
                ]
            ),
            c.servo_rf,
        ),
        ValueError,
        r"the residual must be finite at the start point, got a non-finite value "
        r"at servo/s, signal 'angle' at t=0 s \(servo/s: simulation diverged",
    ),
    _case(
        "opt-resume-without-checkpoint",
        lambda c: ms.optimize(c.masses(), c.rf, resume=True),
        ValueError,
        r"checkpoint must be a path when resume=True, got None",
    ),
    _case(
        "opt-checkpoint-of-other-parameters",
        lambda c: ms.optimize(
            ms.ParameterDict([ms.make_parameter("joint_damping", c.model, "j1")]),
            c.rf,
            checkpoint=_checkpoint(c, c.masses()),
            resume=True,
        ),
        ValueError,
        r"checkpoint '.*fit\.ckpt\.npz' must hold the same parameters as "
        r"initial_params, got \['link1_mass', 'link2_mass'\] vs \['j1_damping'\]",
    ),
    _case(
        "opt-checkpoint-truncated",
        lambda c: ms.optimize(c.masses(), c.rf, resume=True, checkpoint=_truncated_checkpoint(c)),
        ValueError,
        r"'.*fit\.ckpt\.npz' is not a readable \.npz file",
    ),
    _case(
        "opt-loaded-parameter-unknown-joint",
        lambda c: ms.optimize(
            ms.ParameterDict.load_from_disk(
                c.params_yaml(
                    "name: d, nominal: 0.05, min_value: 0.0, max_value: 1.0, "
                    "meta: {kind: joint_damping, target: j9}"
                )
            ),
            c.rf,
        ),
        ms.ModifierError,
        r"parameter 'd' failed for value array\(shape=\(1,\), \[0\.05\]\): "
        r"KeyError: .*no joint named 'j9'; known: \['j1', 'j2'\]",
    ),
    _case(
        "opt-eps-zero",
        lambda c: ms.optimize(c.masses(), c.rf, eps=0.0),
        ValueError,
        r"eps must be a finite number > 0, got 0\.0",
    ),
    _case(
        "opt-eps-nan",
        lambda c: ms.optimize(c.masses(), c.rf, eps=NAN),
        ValueError,
        r"eps must be a finite number > 0, got nan",
    ),
    _case(
        "opt-xtol-negative",
        lambda c: ms.optimize(c.masses(), c.rf, xtol=-1.0),
        ValueError,
        r"xtol must be a finite number >= 0, got -1\.0",
    ),
    _case(
        "opt-callback-not-callable",
        lambda c: ms.optimize(c.masses(), c.rf, callback=3),
        TypeError,
        r"callback must be callable callback\(iteration, x, cost\) or None, got 3",
    ),
    _case(
        "opt-x-scale-wrong-shape",
        lambda c: ms.optimize(c.masses(), c.rf, optimizer="scipy", x_scale=[1.0, 2.0, 3.0]),
        ValueError,
        r"x_scale must be 'jac', a positive number or an array of shape \(2,\), got "
        r"array\(shape=\(3,\)",
    ),
    _case(
        "opt-resume-outside-bounds",
        _resume_narrower,
        ValueError,
        r"checkpoint '.*fit\.ckpt\.npz': link1_mass must lie within its bounds "
        r"\[0\.5, 1\.05\], got 1\.",
    ),
]


test_bad_input = table_test(CASES)


def test_custom_modifier_lost_on_load_is_named_in_a_fit(arm: Arm, tmp_path: Path):
    """A parameter whose modifier cannot be re-created must not fit silently to nothing."""

    def scale_damping(spec: mujoco.MjSpec, p: ms.Parameter) -> None:
        spec.joint("j1").damping[0] = p.value[0]

    params = _with(arm.masses(), ms.Parameter("my_damping", 0.05, 0.0, 1.0, modifier=scale_damping))
    params.save_to_disk(tmp_path / "p.yaml")
    loaded = ms.ParameterDict.load_from_disk(tmp_path / "p.yaml")
    lost = (
        r"parameters \['my_damping'\] were saved with custom modifiers and loaded without them "
        r"\(callbacks are not saved\); set p.modifier again"
    )
    with pytest.raises(ValueError, match=rf"residual_fn: {lost}"):  # before any simulation
        ms.optimize(loaded, arm.rf, max_iters=3)
    with pytest.raises(ValueError, match=rf"apply modifiers: {lost}"):
        ms.apply_param_modifiers(loaded, arm.spec)
    loaded["my_damping"].frozen = True  # frozen: it is not applied, nothing is lost
    ms.apply_param_modifiers(loaded, arm.spec)
    params.load_values(tmp_path / "p.yaml")  # the documented way to continue with own modifiers
    assert params["my_damping"].modifier is scale_damping


def test_optimize_leaves_callers_parameters_and_spec_alone(arm: Arm):
    """Peer: after optimizing, the spec and the caller's parameters sit at a perturbed FD point."""
    params = arm.masses()
    params.update_from_vector([1.1, 0.6])
    before = params.as_vector()
    xml = arm.spec.to_xml()
    opt, res = ms.optimize(params, arm.rf, max_iters=30)
    np.testing.assert_array_equal(params.as_vector(), before)
    assert arm.spec.to_xml() == xml
    np.testing.assert_array_equal(opt.as_vector(), res.x)  # exactly the answer, not x + h
    np.testing.assert_array_equal(arm.rf(opt.as_vector(), opt), res.fun)
    np.testing.assert_allclose(res.x, [1.3, 0.5], rtol=1e-6)
    # a fit that stops with an error leaves them alone too
    bad = _with(params.copy(), ms.Parameter("noop", 1.0, 0.0, 2.0, modifier=_noop))
    with pytest.raises(ValueError, match="no effect"):
        ms.optimize(bad, arm.rf)
    np.testing.assert_array_equal(bad.as_vector()[:2], before)
    assert arm.spec.to_xml() == xml


def test_unwritable_checkpoint_fails_before_any_residual(arm: Arm, tmp_path: Path):
    """A checkpoint that cannot be written is an error at the start, not after iteration 1."""
    calls = []

    def counted(x: np.ndarray, p: ms.ParameterDict) -> np.ndarray:
        calls.append(np.shape(x))
        return arm.rf(x, p)

    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    params = arm.masses()
    params.update_from_vector([1.1, 0.6])
    with pytest.raises(OSError, match=r"cannot create folder '.*not_a_folder'"):
        ms.optimize(params, counted, checkpoint=blocker / "fit.npz", max_iters=5)
    assert calls == [], f"{len(calls)} residual calls before the error"
