"""optimize: recover the truth for every parameter kind, with every backend; errors."""

from __future__ import annotations

import io

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2, BOX, DC_MOTOR, SERVO, dc_motor_truth
from mjsysid.fit.checkpoints import load_checkpoint
from mjsysid.fit.options import FitOptions
from mjsysid.fit.status import MessageContext

BACKENDS = ["mujoco", "scipy", "scipy_parallel_fd"]

FREE = """
<mujoco model="free">
  <option timestep="0.002"/>
  <worldbody>
    <body name="rock" pos="0 0 1">
      <freejoint name="free"/>
      <geom type="box" size="0.1 0.06 0.04" pos="0.02 -0.01 0.03" euler="0.3 0.2 0.1" mass="1.0"/>
      <site name="s"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="fx" joint="free" gear="1 0 0 0 0 0"/>
    <motor name="fy" joint="free" gear="0 1 0 0 0 0"/>
    <motor name="fz" joint="free" gear="0 0 1 0 0 0"/>
    <motor name="tx" joint="free" gear="0 0 0 0.1 0 0"/>
    <motor name="ty" joint="free" gear="0 0 0 0 0.1 0"/>
    <motor name="tz" joint="free" gear="0 0 0 0 0 0.1"/>
  </actuator>
  <sensor>
    <framepos name="pos" objtype="site" objname="s"/>
    <framequat name="quat" objtype="site" objname="s"/>
    <framelinvel name="linvel" objtype="site" objname="s"/>
    <frameangvel name="angvel" objtype="site" objname="s"/>
  </sensor>
</mujoco>
"""


def _fit(problem, make_params, truth_x, optimizer, rtol, max_iters=60, **kw):
    params = make_params(problem.spec, problem.model)
    rf = ms.build_residual_fn([problem.sequences], **kw)
    opt, res = ms.optimize(params, rf, optimizer=optimizer, max_iters=max_iters)
    np.testing.assert_allclose(res.x, truth_x, rtol=rtol, atol=rtol * 1e-2)
    np.testing.assert_allclose(opt.as_vector(), res.x)
    assert res.cost < 1e-10 * max(res.initial_cost, 1.0)
    return opt, res


def _with(make_params, x):
    def truth(spec, model):
        d = make_params(spec, model)
        d.update_from_vector(x)
        return d

    return truth


def arm_masses(spec, model):
    return ms.ParameterDict(
        [ms.body_inertia_param(spec, model, b, ms.InertiaType.Mass) for b in ("link1", "link2")]
    )


def arm_joints(spec, model):
    d = ms.ParameterDict()
    d.add(ms.make_parameter("joint_damping", model, "j1"))
    d.add(ms.make_parameter("joint_armature", model, "j2"))
    d.add(ms.make_parameter("joint_frictionloss", model, "j1", nominal=0.02))
    return d


def servo_gains(spec, model):
    d = ms.ParameterDict()
    d.add(ms.make_parameter("actuator_kp", model, "servo"))
    d.add(ms.make_parameter("actuator_kv", model, "servo"))
    return d


def arm_gear(spec, model):
    return ms.ParameterDict([ms.make_parameter("actuator_gear", model, "m1")])


def mass_ipos(spec, model):
    return ms.ParameterDict([ms.body_inertia_param(spec, model, "link2", ms.InertiaType.MassIpos)])


@pytest.mark.parametrize("optimizer", BACKENDS)
def test_recover_link_masses(make_problem, optimizer):
    truth = np.array([1.3, 0.5])
    p = make_problem(ARM2, _with(arm_masses, truth), n=300, qpos=[0.3, -0.2])
    _fit(p, arm_masses, truth, optimizer, 1e-6)


@pytest.mark.parametrize("optimizer", BACKENDS)
def test_recover_joint_damping_armature_frictionloss(make_problem, optimizer):
    truth = np.array([0.12, 0.03, 0.05])
    p = make_problem(ARM2, _with(arm_joints, truth), n=400, qpos=[0.3, -0.2], scale=2.0)
    _fit(p, arm_joints, truth, optimizer, 1e-4)


@pytest.mark.parametrize("optimizer", BACKENDS)
def test_recover_position_actuator_gains(make_problem, optimizer):
    truth = np.array([3.5, 0.25])
    p = make_problem(SERVO, _with(servo_gains, truth), n=400)
    _fit(p, servo_gains, truth, optimizer, 1e-6)


@pytest.mark.parametrize("optimizer", BACKENDS)
def test_recover_motor_gear(make_problem, optimizer):
    truth = np.array([1.7])
    p = make_problem(ARM2, _with(arm_gear, truth), n=300, qpos=[0.3, -0.2])
    _fit(p, arm_gear, truth, optimizer, 1e-6)


@pytest.mark.parametrize("optimizer", BACKENDS)
def test_recover_mass_and_com(make_problem, optimizer):
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()
    nominal = mass_ipos(spec, model)["link2_mass_ipos"].nominal
    truth = nominal * np.array([1.4, 1.0, 1.0, 1.0]) + np.array([0, 0.03, 0.0, 0.02])
    p = make_problem(ARM2, _with(mass_ipos, truth), n=500, qpos=[0.3, -0.2], scale=2.0)
    # the y-offset of a planar arm's COM has no effect: freeze-free check on the others
    _opt, res = ms.optimize(
        mass_ipos(p.spec, p.model),
        ms.build_residual_fn([p.sequences]),
        optimizer=optimizer,
        allow_no_effect=True,
        max_iters=80,
    )
    np.testing.assert_allclose(res.x[[0, 1, 3]], truth[[0, 1, 3]], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("optimizer", BACKENDS)
def test_recover_full_inertia(make_problem, optimizer):
    spec = mujoco.MjSpec.from_string(FREE)
    model = spec.compile()

    def pseudo(spec, model):
        return ms.ParameterDict([ms.body_inertia_param(spec, model, "rock", ms.InertiaType.Pseudo)])

    nominal = pseudo(spec, model)["rock_inertia"].nominal
    truth = nominal + np.array([0.1, 0.05, -0.05, 0.08, 0.02, -0.02, 0.03, 0.01, -0.01, 0.02])
    p = make_problem(FREE, _with(pseudo, truth), n=300, scale=3.0)
    params = pseudo(p.spec, p.model)
    rf = ms.build_residual_fn([p.sequences])
    opt, res = ms.optimize(params, rf, optimizer=optimizer, max_iters=100)
    np.testing.assert_allclose(res.x, truth, rtol=1e-5, atol=1e-6)
    m_hat, _com_hat, inertia_hat = ms.full_inertia_from_model(
        ms.apply_param_modifiers(opt, p.spec), p.model.body("rock").id
    )
    m_true, _com_true, inertia_true = ms.full_inertia_from_model(
        ms.apply_param_modifiers(_with(pseudo, truth)(p.spec, p.model), p.spec),
        p.model.body("rock").id,
    )
    assert m_hat == pytest.approx(m_true, rel=1e-6)
    np.testing.assert_allclose(inertia_hat, inertia_true, rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("optimizer", BACKENDS)
def test_recover_contact_friction(make_problem, optimizer):
    def friction(spec, model):
        return ms.ParameterDict(
            [ms.make_parameter("pair_friction", model, "box_floor", min_value=0.05, max_value=2.0)]
        )

    p = make_problem(
        BOX, _with(friction, [0.8]), n=300, qvel=[1.5, 0.5, 0], names=["box_pos", "box_vel"]
    )
    params = friction(p.spec, p.model)
    params["box_floor_friction"].value = [0.5]
    rf = ms.build_residual_fn([p.sequences])
    _opt, res = ms.optimize(params, rf, optimizer=optimizer)
    np.testing.assert_allclose(res.x, [0.8], rtol=1e-4)


# -- behaviour --------------------------------------------------------------------------------
@pytest.fixture
def arm_problem(make_problem):
    return make_problem(ARM2, _with(arm_masses, [1.3, 0.5]), n=200, qpos=[0.3, -0.2])


def test_caller_params_not_mutated_and_silent(arm_problem, capsys):
    params = arm_masses(arm_problem.spec, arm_problem.model)
    before = params.as_vector()
    spec_xml = arm_problem.spec.to_xml()
    _opt, res = ms.optimize(params, ms.build_residual_fn([arm_problem.sequences]))
    np.testing.assert_array_equal(params.as_vector(), before)
    assert arm_problem.spec.to_xml() == spec_xml
    assert capsys.readouterr().out == ""
    assert res.success and res.status in ("xtol", "gtol") and "Converged" in res.message
    assert res.nit > 0 and res.nfev > res.nit and res.njev >= 1
    assert len(res.extras["objective"]) == len(res.extras["candidate"])
    assert res.extras["objective"] == res.history.objective
    assert all(np.shape(c) == (2,) for c in res.extras["candidate"])  # no Jacobians kept


def test_verbose_prints_iterations(arm_problem):
    out = io.StringIO()
    ms.optimize(
        arm_masses(arm_problem.spec, arm_problem.model),
        ms.build_residual_fn([arm_problem.sequences]),
        verbose=True,
        output=out,
    )
    assert "iter    1" in out.getvalue() and "Converged" in out.getvalue()


def test_max_iters_message(arm_problem):
    _, res = ms.optimize(
        arm_masses(arm_problem.spec, arm_problem.model),
        ms.build_residual_fn([arm_problem.sequences]),
        max_iters=1,
    )
    assert res.status == "max_iters" and not res.success and "raise max_iters" in res.message


_PY, _FILE = "raise max_iters or restart", "raise optimizer: {max_iters: N}"


@pytest.mark.parametrize(
    ("language", "said", "not_said"), [("python", _PY, _FILE), ("file", _FILE, _PY)]
)
def test_messages_are_in_the_readers_words(arm_problem, language, said, not_said):
    out = io.StringIO()
    _, res = ms.optimize(
        arm_masses(arm_problem.spec, arm_problem.model),
        ms.build_residual_fn([arm_problem.sequences]),
        max_iters=1,
        verbose=True,
        output=out,
        messages=MessageContext(language),
    )
    assert said in res.message and not_said not in res.message
    assert res.message.split(";")[0] in out.getvalue() and not_said not in out.getvalue()


def test_messages_must_be_a_message_context():
    with pytest.raises(TypeError, match="messages must be a MessageContext or None, got 'file'"):
        FitOptions(messages="file")


def test_start_outside_bounds_is_an_error(arm_problem):
    params = arm_masses(arm_problem.spec, arm_problem.model)
    params["link1_mass"].value = [50.0]
    with pytest.raises(
        ValueError, match=r"link1_mass must start within its bounds \[0.1, 10.0\], got 50.0"
    ):
        ms.optimize(params, ms.build_residual_fn([arm_problem.sequences]))


def test_no_effect_parameter_is_named(arm_problem):
    params = arm_masses(arm_problem.spec, arm_problem.model)
    params.add(ms.Parameter("unused", 1.0, 0.0, 2.0, modifier=lambda s, p: None))
    rf = ms.build_residual_fn([arm_problem.sequences])
    with pytest.raises(ValueError, match=r"parameters \['unused'\] have no effect on the residual"):
        ms.optimize(params, rf)
    _, res = ms.optimize(params, rf, allow_no_effect=True)
    np.testing.assert_allclose(res.x[:2], [1.3, 0.5], rtol=1e-6)


def test_non_finite_start_names_sequence_and_signal(make_problem):
    p = make_problem(SERVO, None, n=200)
    params = ms.ParameterDict(
        [
            ms.make_parameter(
                "actuator_kp", p.model, "servo", nominal=1e14, min_value=0.1, max_value=1e15
            )
        ]
    )
    with pytest.raises(
        ValueError,
        match=r"residual must be finite at the start point.*servo/seq0, "
        r"signal 'angle'",
    ):
        ms.optimize(params, ms.build_residual_fn([p.sequences]))


def test_diverging_trial_step_is_rejected(make_problem):
    def gains(spec, model):
        return ms.ParameterDict(
            [ms.make_parameter("actuator_kp", model, "servo", min_value=0.1, max_value=1e12)]
        )

    p = make_problem(SERVO, _with(gains, [3.0]), n=300)
    params = gains(p.spec, p.model)
    params["servo_kp"].value = [1.0]
    _, res = ms.optimize(params, ms.build_residual_fn([p.sequences]), x_scale=1.0, max_iters=100)
    assert res.x[0] == pytest.approx(3.0, rel=1e-5)


def test_infinite_bounds_need_lm_or_scipy(arm_problem):
    # a joint stiffness may be negative (a destabilising spring): it has no physical lower
    # limit, so infinite bounds on it are a fit's business (a damping's are not, see below)
    params = ms.ParameterDict(
        [
            ms.make_parameter(
                "joint_stiffness", arm_problem.model, "j1", min_value=-np.inf, max_value=np.inf
            )
        ]
    )
    rf = ms.build_residual_fn([arm_problem.sequences])
    with pytest.raises(ValueError, match=r"optimizer 'mujoco' needs finite bounds.*j1_stiffness"):
        ms.optimize(params, rf, optimizer="mujoco")
    _, ref = ms.optimize(params, rf, optimizer="scipy", max_iters=50)
    _, res = ms.optimize(params, rf)  # "lm" takes infinite bounds
    # the masses are off, so the best stiffness is a compromise (negative: unbounded)
    assert res.optimizer == "lm" and res.success and res.cost < 0.2 * res.initial_cost
    assert res.x[0] < 0
    np.testing.assert_allclose(res.x, ref.x, rtol=1e-4)
    np.testing.assert_allclose(res.cost, ref.cost, rtol=1e-8)


def _never_evaluated(x, params):
    raise AssertionError("the residual must not be evaluated")


_ARM_MODEL = mujoco.MjModel.from_xml_string(ARM2)


def _damping(**kwargs):
    return ms.make_parameter("joint_damping", _ARM_MODEL, "j1", nominal=0.5, **kwargs)


def _vector():
    return ms.Parameter("v", [0.5, 0.5], [0.0, 0.0], [1.0, 1.0], modifier=lambda s, p: None)


def _changed(param, field, index, value):
    """``param`` after ``param.<field>[index] = value`` (in place: nothing validates it)."""
    getattr(param, field)[index] = value
    return param


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (  # equal bounds used to give MuJoCo's FatalError, or "converged" after 0 iterations
            lambda: _changed(_changed(_damping(), "min_value", 0, 0.5), "max_value", 0, 0.5),
            r"initial_params: j1_damping must have min_value < max_value to be optimized, got "
            r"\[0.5, 0.5\]; freeze it to keep it fixed \(frozen: true in an experiment file, "
            r"frozen=True in Python\), or widen its bounds",
        ),
        (
            lambda: _changed(_changed(_damping(), "min_value", 0, 2.0), "max_value", 0, 1.0),
            r"j1_damping must have min_value < max_value to be optimized, got \[2.0, 1.0\]; "
            r"fix the bounds",
        ),
        (  # a NaN bound used to surface as "residual_fn: x must be finite"
            lambda: _changed(_damping(), "max_value", 0, np.nan),
            r"j1_damping must have bounds that are numbers \(\+-inf allowed\), got \[0.0, nan\]",
        ),
        (
            lambda: _changed(_damping(), "value", 0, np.nan),
            r"initial_params: j1_damping must start at a finite value, got nan",
        ),
        (
            lambda: _changed(_vector(), "max_value", 1, 0.0),
            r"initial_params: v\[1\] must have min_value < max_value to be optimized, got "
            r"\[0.0, 0.0\]",
        ),
        (
            lambda: _changed(_vector(), "min_value", 1, np.nan),
            r"initial_params: v\[1\] must have bounds that are numbers",
        ),
        (
            lambda: _changed(_vector(), "value", 1, np.inf),
            r"initial_params: v\[1\] must start at a finite value, got inf",
        ),
        (
            lambda: _changed(_vector(), "value", 0, 2.0),
            r"initial_params: v\[0\] must start within its bounds \[0.0, 1.0\], got 2.0",
        ),
        (  # assigning a value outside the bounds is allowed; starting a fit there is not
            lambda: setattr(p := _damping(), "value", 7.0) or p,
            r"initial_params: j1_damping must start within its bounds \[0.0, 5.0\], got 7.0; "
            r"mjsysid does not clip silently",
        ),
        (
            lambda: setattr(v := _vector(), "min_value", np.zeros(3)) or v,
            r"initial_params: v.min_value must be a float array of shape \(2,\), got "
            r"array\(shape=\(3,\)",
        ),
        (  # no lower bound on a damping: accepted by make_parameter (to write a truth), not here
            lambda: _damping(min_value=-np.inf),
            r"initial_params: j1_damping must have min_value >= 0.0 \(joint_damping: a negative "
            r"damping adds energy\), got -inf; a fit must not reach values that are not physical",
        ),
        (
            lambda: _changed(_damping(), "min_value", 0, -1.0),
            r"j1_damping must have min_value >= 0.0 \(joint_damping: .*\), got -1.0",
        ),
    ],
)
@pytest.mark.parametrize("optimizer", ["lm", "mujoco", "scipy", "scipy_parallel_fd"])
def test_bounds_and_start_rechecked_before_any_evaluation(make, match, optimizer):
    """Bounds, values and frozen flags can change after a parameter is created; ``optimize``
    checks every free entry again and names it, before any backend or simulation sees it."""
    params = ms.ParameterDict([ms.Parameter("ok", 1.0, 0.0, 2.0), make()])
    with pytest.raises(ValueError, match=match):
        ms.optimize(params, _never_evaluated, optimizer=optimizer)


def test_frozen_parameters_are_not_rechecked():
    p = _changed(_changed(_damping(frozen=True), "min_value", 0, 0.5), "max_value", 0, 0.5)
    p.value[0] = np.nan  # never used: the model keeps its own damping
    calls = []

    def residual(x, params):  # (1,) -> (2,) and (1, k) -> (2, k); minimum at x = 1
        calls.append(x)
        d = np.asarray(x, dtype=float) - 1.0
        return np.concatenate([d, 2.0 * d])

    _, res = ms.optimize(ms.ParameterDict([ms.Parameter("a", 0.5, 0.0, 2.0), p]), residual)
    assert calls and res.x[0] == pytest.approx(1.0)


def test_loaded_damping_with_negative_bound_loads_but_is_not_fitted(arm_problem):
    """Saved files keep loading (no kind check on load); a fit refuses the non-physical bound."""
    data = {
        "schema": "mjsysid.parameters",
        "schema_version": 1,
        "parameters": [
            {
                "name": "j1_damping",
                "nominal": [0.05],
                "min_value": [-1.0],
                "max_value": [1.0],
                "meta": {"kind": "joint_damping", "target": "j1"},
            }
        ],
    }
    params = ms.ParameterDict.from_dict(data)
    assert params["j1_damping"].modifier is not None
    with pytest.raises(ValueError, match=r"j1_damping must have min_value >= 0.0"):
        ms.optimize(params, ms.build_residual_fn([arm_problem.sequences]))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"optimizer": "adam"}, ValueError, r"optimizer must be one of \['lm', 'mujoco', 'scip"),
        ({"max_iters": -1}, ValueError, "max_iters must be a non-negative integer"),
        ({"max_iters": 2.5}, ValueError, "max_iters must be a non-negative integer"),
        ({"mu_factor": 1.0}, ValueError, "mu_factor must be a finite number > 1, got 1.0"),
        ({"eps": True}, ValueError, "eps must be a finite number > 0, got True"),
        ({"xtol": True}, ValueError, "xtol must be a finite number >= 0, got True"),
        ({"ftol": float("nan")}, ValueError, "ftol must be a finite number >= 0, got nan"),
        ({"x_scale": True}, ValueError, r"x_scale must be 'jac', a positive number or an arr"),
        ({"x_scale": [1, "a", 2]}, ValueError, r"x_scale must be 'jac', a positive number or"),
        ({"verbose": "no"}, TypeError, "verbose must be True or False, got 'no'"),
        ({"secant": 1}, TypeError, "secant must be True or False, got 1"),
        ({"output": "fit.log"}, TypeError, r"output must be a text stream with write\(\)"),
    ],
)
def test_bad_options(arm_problem, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ms.optimize(
            arm_masses(arm_problem.spec, arm_problem.model),
            ms.build_residual_fn([arm_problem.sequences]),
            **kwargs,
        )


def test_empty_and_all_frozen(arm_problem):
    rf = ms.build_residual_fn([arm_problem.sequences])
    with pytest.raises(ValueError, match="initial_params must be a non-empty ParameterDict"):
        ms.optimize(ms.ParameterDict(), rf)
    frozen = ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 2.0, frozen=True)])
    with pytest.raises(
        ValueError,
        match=r"at least one non-frozen parameter, got 1 parameters, all frozen: \['a'\]",
    ):
        ms.optimize(frozen, rf)


def test_checkpoint_and_resume(arm_problem, tmp_path):
    params = arm_masses(arm_problem.spec, arm_problem.model)
    rf = ms.build_residual_fn([arm_problem.sequences])
    ckpt = tmp_path / "fit.ckpt.npz"
    _, partial = ms.optimize(params, rf, max_iters=2, checkpoint=ckpt)
    x_ckpt, it = load_checkpoint(ckpt, params)
    np.testing.assert_allclose(x_ckpt, partial.x)
    assert it == 2
    _, resumed = ms.optimize(params, rf, max_iters=50, checkpoint=ckpt, resume=True)
    _, full = ms.optimize(params, rf, max_iters=50)
    np.testing.assert_allclose(resumed.x, full.x, rtol=1e-8)


def test_sweep_parameter(arm_problem):
    params = arm_masses(arm_problem.spec, arm_problem.model)
    rf = ms.build_residual_fn([arm_problem.sequences])
    params["link2_mass"].value = [0.5]
    values = np.linspace(1.0, 1.6, 7)
    costs = ms.sweep_parameter(params, "link1_mass", values, rf)
    assert costs.shape == (7,) and np.argmin(costs) == 3 and costs[3] < 1e-20
    assert rf.stats.calls == 1
    with pytest.raises(KeyError, match="'link9_mass' must be one of the free parameter entries"):
        ms.sweep_parameter(params, "link9_mass", values, rf)


def test_fd_jacobian_matches_analytic_linear():
    A = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.0]])
    J = ms.fd_jacobian(
        lambda X: A @ X, np.array([0.2, 0.9]), A @ np.array([0.2, 0.9]), (np.zeros(2), np.ones(2))
    )
    np.testing.assert_allclose(J, A, rtol=1e-6)


def test_fd_jacobian_large_finite_columns_are_not_retried():
    """Columns are screened for inf/NaN by their sums; a sum that overflows on finite
    entries is confirmed entry by entry, so the column is neither retried nor zeroed."""
    calls = []
    A = np.zeros((101, 2))
    A[:100, 0] = 1e307  # column 0 of J: entries 1e307, their sum overflows
    A[100, 1] = 1.0

    def residual(X):
        calls.append(X.shape[1])
        return A @ X

    x = np.array([1e-3, 0.5])
    J = ms.fd_jacobian(residual, x, A @ x, (np.zeros(2), np.ones(2)))
    assert calls == [2]  # one batched call, no retry
    with np.errstate(over="ignore"):
        assert np.all(np.isfinite(J)) and np.isinf(J.sum(axis=0)[0])
    np.testing.assert_allclose(J, A, rtol=1e-6)


def test_fd_jacobian_is_float64_whatever_the_residual_dtype():
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    x, bounds = np.array([1.0, 2.0]), (np.full(2, -10.0), np.full(2, 10.0))
    for cast in (np.float32, np.int64):

        def residual(X, cast=cast):
            return np.rint(1e6 * (A @ X)).astype(cast)

        J = ms.fd_jacobian(residual, x, residual(x[:, None])[:, 0], bounds, eps=1e-3)
        assert J.dtype == np.float64
        np.testing.assert_allclose(J, 1e6 * A, rtol=1e-3)


def test_fd_jacobian_retries_a_non_finite_column_with_the_opposite_step():
    def residual(X):
        R = np.vstack([X[0] + 2 * X[1], X[0] - X[1]])
        R[:, X[1] > 0.5 + 1e-12] = np.nan  # the forward step of x_1 diverges
        return R

    x = np.array([0.2, 0.5])
    J = ms.fd_jacobian(residual, x, residual(x[:, None])[:, 0], (np.zeros(2), np.ones(2)))
    np.testing.assert_allclose(J, [[1.0, 2.0], [1.0, -1.0]], rtol=1e-6)


def test_residual_and_jacobian_is_the_residual_then_fd_jacobian_in_one_call(make_problem):
    """The start's residual with its Jacobian: one batched call of p + 1 candidates, the same
    bits as the residual alone then fd_jacobian (every candidate is simulated on its own);
    the retry of a diverged column as fd_jacobian's; at a non-finite point a NaN Jacobian
    and no retry."""
    from mjsysid.fit.jacobian import residual_and_jacobian

    p = make_problem(ARM2, _with(arm_masses, [1.3, 0.5]), n=200, qpos=[0.3, -0.2])
    params = arm_masses(p.spec, p.model)
    rf = ms.build_residual_fn([p.sequences])
    x, bounds = params.as_vector() * 1.1, params.get_bounds()
    calls: list[int] = []

    def residual(X):
        calls.append(X.shape[1])
        return rf(X, params)

    r, J = residual_and_jacobian(residual, x, bounds)
    assert calls == [3]
    assert r.flags.owndata  # (not a view keeping the whole batch alive)
    r_alone = rf(x, params)
    np.testing.assert_array_equal(r, r_alone)
    np.testing.assert_array_equal(J, ms.fd_jacobian(residual, x, r_alone, bounds))

    def diverging(X):
        calls.append(X.shape[1])
        R = np.vstack([X[0] + 2 * X[1], X[0] - X[1]])
        R[:, X[1] > 0.5 + 1e-12] = np.nan  # the forward step of x_1 diverges
        return R

    calls.clear()
    r, J = residual_and_jacobian(diverging, np.array([0.2, 0.5]), (np.zeros(2), np.ones(2)))
    assert calls == [3, 1]  # the retry of column 1
    np.testing.assert_allclose(r, [1.2, -0.3])
    np.testing.assert_allclose(J, [[1.0, 2.0], [1.0, -1.0]], rtol=1e-6)
    calls.clear()
    r, J = residual_and_jacobian(diverging, np.array([0.2, 0.7]), (np.zeros(2), np.ones(2)))
    assert calls == [3] and np.all(np.isnan(r)) and np.all(np.isnan(J))


def test_the_counter_tells_a_kept_point_without_evaluating_it():
    from mjsysid.fit.jacobian import CountedResidual

    fn = CountedResidual(lambda X, p: np.vstack([X[0], 2 * X[1]]), None)
    X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    fn(X)
    assert fn.nfev == 3
    kept = fn.kept(X[:, 1])
    np.testing.assert_array_equal(kept, [2.0, 10.0])
    kept[0] = -1.0  # a copy
    np.testing.assert_array_equal(fn(X[:, 1]), [2.0, 10.0])
    assert fn.kept(np.array([9.0, 9.0])) is None and fn.nfev == 3


def test_ftol_stops_on_a_plateau(make_problem):
    p = make_problem(ARM2, _with(arm_masses, [1.3, 0.5]), n=200, qpos=[0.3, -0.2], noise=0.01)
    params = arm_masses(p.spec, p.model)
    rf = ms.build_residual_fn([p.sequences])
    one = {"xtol": 0.0, "gtol": 0.0, "max_iters": 40, "horizons": None}  # ftol on one stage
    _, tight = ms.optimize(params, rf, **one)
    _, loose = ms.optimize(params, rf, ftol=1e-3, **one)
    assert loose.status == "ftol" and loose.success and "ftol" in loose.message
    assert loose.nit <= tight.nit
    assert loose.cost <= tight.cost * (1 + 1e-2)
    with pytest.raises(ValueError, match="ftol must be a finite number >= 0"):
        ms.optimize(params, rf, ftol=-1.0)


def test_keyboard_interrupt_returns_best_so_far(arm_problem, tmp_path):
    params = arm_masses(arm_problem.spec, arm_problem.model)
    rf = ms.build_residual_fn([arm_problem.sequences])
    seen = []

    def stop_at_two(it, x, cost):
        seen.append(cost)
        if it == 2:
            raise KeyboardInterrupt

    ckpt = tmp_path / "c.npz"
    # one stage (an interrupt in an early horizon stage: tests/fit/test_horizons.py)
    _opt, res = ms.optimize(params, rf, callback=stop_at_two, checkpoint=ckpt, horizons=None)
    assert res.status == "interrupted" and not res.success and "best parameters" in res.message
    assert res.nit == 2
    assert res.cost == pytest.approx(min(seen)) and res.cost < res.initial_cost
    np.testing.assert_allclose(load_checkpoint(ckpt, params)[0], res.x)


def test_lm_backends_agree_and_secant_saves_evaluations(arm_problem):
    """The default "lm" finds what the "mujoco" backend finds, with fewer evaluations."""
    rf = ms.build_residual_fn([arm_problem.sequences])
    params = arm_masses(arm_problem.spec, arm_problem.model)
    runs = {
        name: ms.optimize(params, rf, **kw)[1]
        for name, kw in {
            "lm": {},
            "lm_fd": {"secant": False},
            "lm_batched": {"trial_steps": 3},
            "mujoco": {"optimizer": "mujoco"},
        }.items()
    }
    for name, res in runs.items():
        assert res.success, name
        np.testing.assert_allclose(res.x, [1.3, 0.5], rtol=1e-7, err_msg=name)
    assert runs["lm"].optimizer == "lm" and runs["lm"].history.secant_steps > 0
    assert runs["lm_fd"].history.secant_steps == 0
    assert runs["lm"].nfev < runs["lm_fd"].nfev and runs["lm"].nfev < runs["mujoco"].nfev
    # the Jacobian handed back is a finite-difference one at the solution, never a secant one
    r = rf(runs["lm"].x, params)
    J = ms.fd_jacobian(lambda X: rf(X, params), runs["lm"].x, r, params.get_bounds())
    np.testing.assert_array_equal(runs["lm"].jac, J)


def test_bad_lm_option_fails_before_any_simulation(arm_problem):
    rf = ms.build_residual_fn([arm_problem.sequences])
    with pytest.raises(ValueError, match=r"LMOptions.trial_steps must be an integer >= 1, got 0"):
        ms.optimize(arm_masses(arm_problem.spec, arm_problem.model), rf, trial_steps=0)
    assert rf.stats.calls == 0


def test_no_evaluation_is_repeated_at_the_end(arm_problem):
    """The solution's residual comes from the trial step that found it, not a new rollout."""
    rf = ms.build_residual_fn([arm_problem.sequences])
    widths: list[int] = []

    def counted(x, params):
        widths.append(1 if np.ndim(x) == 1 else np.shape(x)[1])
        return rf(x, params)

    _, res = ms.optimize(arm_masses(arm_problem.spec, arm_problem.model), counted)
    assert res.status == "gtol" and sum(widths) == res.nfev == rf.stats.candidates
    assert widths[-1] == res.x.size  # the last call is the Jacobian that confirmed convergence
    np.testing.assert_array_equal(
        res.fun, rf(res.x, arm_masses(arm_problem.spec, arm_problem.model))
    )


def test_a_fit_that_stalls_on_a_cliff_says_so():
    """A cost that jumps at x = 1 on the way to its smooth minimum at 2 (a contact switching
    on): the "lm" fit stops at the cliff with status "stalled" instead of crawling, and does
    not call that convergence (issue #31)."""
    params = ms.ParameterDict([ms.Parameter("x", 0.0, -5.0, 5.0)])

    def cliff(X, _params):
        x = np.asarray(X)[0][None, :]
        return np.concatenate([x - 2.0, 10.0 * (x > 1.0)], axis=0)

    opt, res = ms.optimize(params, cliff)
    assert res.status == "stalled" and not res.success
    assert res.message.startswith("Not converged: the cost stalled")
    assert "non-smooth" in res.message
    assert "start the data once the contacts have settled" in res.message
    assert 0.99 < opt["x"].value[0] <= 1.0


@pytest.mark.parametrize("optimizer", ["lm", "mujoco", "scipy", "scipy_parallel_fd"])
def test_plain_residual_of_bad_shape_is_named(optimizer):
    """A user residual that returns nothing, or a length that depends on x, is named (was a
    misleading 'no effect' error or a numpy broadcast error)."""
    params = ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 2.0), ms.Parameter("b", 1.0, 0.0, 2.0)])

    def empty(x, p):
        return np.zeros((0, *np.shape(x)[1:]))

    def varying(x, p):
        X = np.atleast_2d(np.asarray(x).T).T
        n = 3 if X[0, 0] == 1.0 else 4  # (the first call's first column is the start)
        out = np.outer(np.arange(1, n + 1), X[0] + X[1]) - 1.0
        return out[:, 0] if np.ndim(x) == 1 else out

    # (the start's residual is evaluated with its Jacobian's p = 2 columns: one call)
    with pytest.raises(ValueError, match=r"residual_fn output must be shape \(n, 3\) with n >= 1"):
        ms.optimize(params, empty, optimizer=optimizer, horizons=None)
    with pytest.raises(
        ValueError, match=r"residual_fn output must be 3 residuals, as at the first"
    ):
        ms.optimize(params, varying, optimizer=optimizer, horizons=None)


def test_dc_motor_lag_and_back_emf_are_recovered(make_problem):
    """A DC motor as MuJoCo models it natively: a first-order filter on the command
    (actuator_filter_tau, the electrical time constant) and a velocity term of an affine bias
    (actuator_kv: back-EMF damping)."""

    p = make_problem(DC_MOTOR, dc_motor_truth(0.05, 0.012), n=1000, names=["angle", "speed"])
    params = ms.ParameterDict(
        [
            ms.make_parameter("actuator_filter_tau", p.model, "motor"),
            ms.make_parameter("actuator_kv", p.model, "motor"),
        ]
    )
    opt, _ = ms.optimize(params, ms.build_residual_fn([p.sequences]))
    np.testing.assert_allclose(opt.as_vector(), [0.05, 0.012], rtol=1e-6)
    with pytest.raises(
        ValueError,
        match=r"actuator 'plain' must have first-order filter dynamics .* got dyntype mjDYN_NONE",
    ):
        ms.make_parameter("actuator_filter_tau", p.model, "plain")


# --- the options object and the status table (mjsysid.fit.options, mjsysid.fit.status) ---


def test_fit_options_one_rule_for_keywords_and_experiment_files():
    from mjsysid.fit.options import FitOptions

    where = "exp.yaml: optimizer"
    # a tolerance of 0 switches its test off, both ways (the rule optimize always had)
    assert FitOptions(xtol=0.0).xtol == 0.0
    assert FitOptions.from_mapping({"xtol": 0}, where=where).xtol == 0.0
    with pytest.raises(ValueError, match=r"^xtol must be a finite number >= 0, got -1\.0"):
        FitOptions(xtol=-1.0)
    with pytest.raises(
        ValueError, match=r"^exp\.yaml: optimizer\.xtol must be a finite number >= 0, got -1\.0"
    ):
        FitOptions.from_mapping({"xtol": -1.0}, where=where)
    with pytest.raises(ValueError, match=r"optimizer\.eps must be a finite number > 0, got 0\.0"):
        FitOptions.from_mapping({"eps": 0}, where=where)
    with pytest.raises(ValueError, match=r"optimizer\.gtol must be float \(YAML reads 1e-3 as"):
        FitOptions.from_mapping({"gtol": "1e-3"}, where=where)
    fit = FitOptions.from_mapping(
        {"method": "mujoco", "max_iters": 7, "horizons": "none"}, where=where, max_iters=100
    )
    assert (fit.optimizer, fit.max_iters, fit.horizons) == ("mujoco", 7, None)
    assert fit.damping_growth == 2.0 and FitOptions().damping_growth == 4.0
    assert fit.given({"method": "mujoco", "horizons": "none"}) == {"horizons": None}
    assert FitOptions.from_mapping({}, where=where, max_iters=100).max_iters == 100
    assert FitOptions(horizons=[0.3, 1]).horizons == (0.3, 1.0)
    with pytest.raises(ValueError, match="checkpoint must be a path when resume=True"):
        FitOptions(resume=True)


def test_status_enum_compares_as_its_word_and_every_final_status_has_a_message():
    from mjsysid.fit.status import MESSAGES, Status, message, mujoco_status, scipy_status

    assert Status.XTOL == "xtol" and str(Status.GTOL) == "gtol" and f"{Status.FTOL}" == "ftol"
    final = set(Status) - {Status.SLOWED, Status.SKIPPED}  # (early stages only)
    assert set(MESSAGES) == final
    assert "max_iters=12" in message("max_iters", 12)
    assert mujoco_status("... norm(dx) < tol.") is Status.XTOL
    assert mujoco_status("Zero gradient at the start") is Status.GTOL
    assert mujoco_status("") is Status.MAX_ITERS
    assert scipy_status(4) is Status.XTOL and scipy_status(-1) is Status.MAX_ITERS
