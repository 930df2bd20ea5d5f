"""Confidence intervals, saved results and the spec's skeleton case study."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

import mjsysid as ms
import mjsysid.data.recording
import mjsysid.fit.confidence
import mjsysid.objective.signal_transform
import mjsysid.output.results
from conftest import ARM2


def test_interval_coverage_linear_gaussian():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((60, 3))
    theta = np.array([1.0, -2.0, 0.5])
    covered = 0
    for _ in range(200):
        y = A @ theta + 0.3 * rng.standard_normal(60)
        est, *_ = np.linalg.lstsq(A, y, rcond=None)
        r = A @ est - y
        _, half = ms.calculate_intervals(r, A, 0.05)
        covered += np.all(np.abs(est - theta) <= half)
    # the joint coverage of three 95 % intervals is about 0.95**3 ~ 0.86; test each one
    per = []
    rng = np.random.default_rng(1)
    for _ in range(200):
        y = A @ theta + 0.3 * rng.standard_normal(60)
        est, *_ = np.linalg.lstsq(A, y, rcond=None)
        _, half = ms.calculate_intervals(A @ est - y, A, 0.05)
        per.append(np.abs(est - theta) <= half)
    rate = np.mean(per, axis=0)
    assert np.all((rate >= 0.90) & (rate <= 0.99)), rate
    assert covered > 150


def test_known_noise_variance_coverage():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((40, 2))
    hits = []
    for _ in range(200):
        y = A @ [1.0, 2.0] + 0.1 * rng.standard_normal(40)
        est, *_ = np.linalg.lstsq(A, y, rcond=None)
        _, half = ms.calculate_intervals(A @ est - y, A, 0.05, noise_variance=0.01)
        hits.append(np.abs(est - [1.0, 2.0]) <= half)
    rate = np.mean(hits, axis=0)
    assert np.all((rate >= 0.90) & (rate <= 0.99)), rate


def test_unidentifiable_direction_only_affects_its_parameters():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((50, 2))
    J = np.column_stack([A, A[:, 1], rng.standard_normal(50)])  # params 1 and 2 are confounded
    r = 0.01 * rng.standard_normal(50)
    cov, half = ms.calculate_intervals(r, J)
    assert np.isfinite(half[0]) and np.isfinite(half[3])
    assert np.isinf(half[1]) and np.isinf(half[2])
    tval = half[0] / np.sqrt(cov[0, 0])
    np.testing.assert_allclose(half[[0, 3]], tval * np.sqrt(np.diag(cov)[[0, 3]]))  # they agree
    assert np.isnan(cov[0, 1]) and np.isinf(cov[1, 1])


def test_intervals_do_not_depend_on_parameter_units():
    """A parameter in other units (its column scaled by 1e6 or 1e-6) keeps a finite interval,
    scaled accordingly, and the others keep theirs; a column without effect is the only
    unidentifiable one (before, the eigenvalue test on the unscaled JᵀJ called the small-
    column parameters unidentifiable)."""
    rng = np.random.default_rng(5)
    J = rng.standard_normal((300, 3))
    r = 0.01 * rng.standard_normal(300)
    cov, half = ms.calculate_intervals(r, J)
    scale = np.array([1e6, 1.0, 1e-6])
    cov_s, half_s = ms.calculate_intervals(r, J * scale)
    np.testing.assert_allclose(half_s, half / scale, rtol=1e-9)
    np.testing.assert_allclose(cov_s, cov / np.outer(scale, scale), rtol=1e-9)
    _, half_z = ms.calculate_intervals(r, np.column_stack([J * scale, np.zeros(300)]))
    np.testing.assert_allclose(half_z[:3], half / scale, rtol=3e-3)  # n - p one smaller
    assert np.isinf(half_z[3])


def test_per_group_noise_keeps_coverage_when_sensors_differ():
    rng = np.random.default_rng(4)
    # a precise, informative sensor and a noisy, weakly informative one
    J = np.concatenate([3.0 + rng.random((100, 1)), 0.1 * rng.standard_normal((100, 1))])
    sigma = np.repeat([0.01, 1.0], 100)
    groups = np.repeat([0, 1], 100)
    grouped, pooled = [], []
    for _ in range(200):
        y = J[:, 0] * 2.0 + sigma * rng.standard_normal(200)
        est = float(J[:, 0] @ y / (J[:, 0] @ J[:, 0]))
        r = J[:, 0] * est - y
        grouped.append(abs(est - 2.0) <= ms.calculate_intervals(r, J, groups=groups)[1][0])
        pooled.append(abs(est - 2.0) <= ms.calculate_intervals(r, J)[1][0])
    assert 0.90 <= np.mean(grouped) <= 0.99
    assert np.mean(pooled) > 0.99  # one pooled variance is far too pessimistic here


def test_interval_errors():
    with pytest.raises(ValueError, match=r"J must be shape \(3, p\) matching residuals"):
        ms.calculate_intervals(np.zeros(3), np.zeros((4, 1)))
    with pytest.raises(ValueError, match="residuals must be more entries than parameters"):
        ms.calculate_intervals(np.zeros(2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\)"):
        ms.calculate_intervals(np.zeros(3), np.zeros((3, 1)), alpha=1.5)


_R = np.random.default_rng(0).standard_normal(50)
_J = np.random.default_rng(1).standard_normal((50, 3))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"alpha": "0.05"}, TypeError, r"alpha must be a number in \(0, 1\), got '0.05'"),
        ({"alpha": True}, TypeError, r"alpha must be a number in \(0, 1\), got True"),
        ({"alpha": np.nan}, ValueError, r"alpha must be in \(0, 1\), got nan"),
        ({"rtol": -1.0}, ValueError, r"rtol must be in \[0, 1\), got -1.0"),
        ({"rtol": np.nan}, ValueError, r"rtol must be in \[0, 1\), got nan"),
        ({"rtol": 1.0}, ValueError, r"rtol must be in \[0, 1\), got 1.0"),
        ({"rtol": "1e-10"}, TypeError, r"rtol must be a number in \[0, 1\), got '1e-10'"),
        # a known noise variance is finite and > 0: no clipping to a tiny one, no NaN widths
        ({"noise_variance": -1.0}, ValueError, r"noise_variance must be finite and > 0, got -1.0"),
        (
            {"noise_variance": 0.0},
            ValueError,
            r"noise_variance must be finite and > 0, got 0.0\. For an exact, noise-free fit "
            r"leave noise_variance out",
        ),
        ({"noise_variance": np.nan}, ValueError, r"noise_variance must be finite and > 0, got nan"),
        ({"noise_variance": np.inf}, ValueError, r"noise_variance must be finite and > 0, got inf"),
        (
            {"noise_variance": np.r_[np.ones(49), 0.0]},
            ValueError,
            r"noise_variance must be finite and > 0, got 0.0\. It is at entry 49\.",
        ),
        (
            {"noise_variance": np.ones(7)},
            ValueError,
            r"noise_variance must be a scalar or an array of shape \(50,\), got "
            r"array\(shape=\(7,\)",
        ),
        (
            {"noise_variance": "a"},
            TypeError,
            r"noise_variance must be an array of numbers, got 'a'",
        ),
        (
            {"noise_variance": 1.0, "groups": np.zeros(50)},
            ValueError,
            r"calculate_intervals takes noise_variance or groups, not both",
        ),
        ({"groups": np.zeros(10)}, ValueError, r"groups must be 50 labels, got 10"),
        ({"groups": np.zeros((5, 10))}, ValueError, r"groups must be a 1-D array of 50 labels"),
        (
            {"groups": np.r_[np.zeros(49), np.nan]},
            ValueError,
            r"groups must be labels without NaN",
        ),
    ],
)
def test_interval_argument_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ms.calculate_intervals(_R, _J, **kwargs)


@pytest.mark.parametrize(
    ("r", "J", "exc", "match"),
    [
        (
            _R,
            np.zeros((50, 0)),
            ValueError,
            r"J must have at least one column .*got shape \(50, 0\)",
        ),
        (_R.reshape(10, 5), _J, ValueError, r"residuals must be a 1-D array of shape \(n,\)"),
        (_R, np.where(_J > 2, np.nan, _J), ValueError, r"J must be finite, got nan at J\[10, 0\]"),
        (
            np.r_[_R[:-1], np.inf],
            _J,
            ValueError,
            r"residuals must be finite, got inf at residuals\[49\]",
        ),
        (["a"] * 50, _J, TypeError, r"residuals must be an array of numbers"),
    ],
)
def test_interval_array_errors(r, J, exc, match):
    with pytest.raises(exc, match=match):
        ms.calculate_intervals(r, J)


def test_exact_fit_gives_zero_width_intervals():
    """A zero residual (noise-free data, exact fit) estimates a zero variance: the identifiable
    parameters get zero-width intervals (+0.0, no NaN, no invented noise floor; before, the
    variance was clipped to 2e-308 and gave widths of 5e-155), an unidentifiable one stays
    infinite."""
    J = np.column_stack([_J, np.zeros(50)])  # the last parameter has no effect
    cov, half = ms.calculate_intervals(np.zeros(50), J)
    np.testing.assert_array_equal(half[:3], 0.0)
    assert not np.any(np.signbit(half[:3]))
    np.testing.assert_array_equal(cov[:3, :3], 0.0)
    assert np.isinf(half[3]) and np.isinf(cov[3, 3]) and np.isnan(cov[0, 3])
    # per group: an exactly fitted group adds nothing, the others keep their variance
    r = np.r_[np.zeros(25), 0.1 * _R[25:]]
    groups = np.repeat(["exact", "noisy"], 25)
    _, half_g = ms.calculate_intervals(r, _J, groups=groups)
    assert np.all(np.isfinite(half_g) & (half_g > 0))
    sigma2 = float(r[25:] @ r[25:]) / (25 * (50 - 3) / 50)
    var = np.r_[np.zeros(25), np.full(25, sigma2)]
    Hinv = np.linalg.inv(_J.T @ _J)  # full rank: the sandwich (JᵀJ)⁻¹ Jᵀ diag(σ²) J (JᵀJ)⁻¹
    cov_ref = Hinv @ (_J.T * var) @ _J @ Hinv
    tval = scipy.stats.t.ppf(0.975, 50 - 3)
    np.testing.assert_allclose(half_g, tval * np.sqrt(np.diag(cov_ref)), rtol=1e-10)


def test_group_variance_follows_the_documented_formula():
    """``σ_g² = ‖r_g‖² / (n_g − p·n_g/n)`` for every group, one-sample groups included (the
    denominator used to be raised to 1 for them, silently)."""
    groups = np.r_[np.zeros(30), np.ones(19), 2]  # the last group holds one residual
    n, p = _J.shape
    expected = np.empty(n)
    for g in np.unique(groups):
        sel = groups == g
        expected[sel] = float(_R[sel] @ _R[sel]) / (sel.sum() * (n - p) / n)
    cov_g, half_g = ms.calculate_intervals(_R, _J, groups=groups)
    cov_k, half_k = ms.calculate_intervals(_R, _J, noise_variance=expected)
    np.testing.assert_allclose(cov_g, cov_k, rtol=1e-12)
    np.testing.assert_allclose(half_g, half_k, rtol=1e-12)
    # string labels work the same
    _, half_s = ms.calculate_intervals(_R, _J, groups=groups.astype(int).astype(str))
    np.testing.assert_allclose(half_s, half_g, rtol=1e-12)


def _fit(make_problem, noise=0.0):
    def masses(spec, model):
        return ms.ParameterDict(
            [ms.body_inertia_param(spec, model, b, ms.InertiaType.Mass) for b in ("link1", "link2")]
        )

    def truth(spec, model):
        d = masses(spec, model)
        d.update_from_vector([1.3, 0.5])
        return d

    p = make_problem(
        ARM2,
        truth,
        n=300,
        qpos=[0.3, -0.2],
        noise=noise,
        names=["j1_pos", "j2_pos", "j1_vel", "j2_vel"],
    )
    params = masses(p.spec, p.model)
    rf = ms.build_residual_fn([p.sequences])
    opt, res = ms.optimize(params, rf)
    return p, params, rf, opt, res


def test_noisy_fit_intervals_cover_truth(make_problem):
    _p, _params, rf, _opt, res = _fit(make_problem, noise=0.002)
    conf = mjsysid.fit.confidence.compute_confidence(res, rf)
    assert np.all(np.abs(res.x - [1.3, 0.5]) <= conf.half_widths)
    assert np.all(conf.half_widths < 0.05)


def test_save_and_load_results(make_problem, tmp_path):
    p, params, rf, opt, res = _fit(make_problem)
    folder = ms.save_results(str(tmp_path / "new" / "exp"), [p.sequences], params, opt, res, rf)
    names = {f.name for f in folder.iterdir()}
    assert {
        "params_x_0.yaml",
        "params_x_hat.yaml",
        "result.yaml",
        "result.npz",
        "confidence.npz",
        "confidence.yaml",
        "arm2.xml",
    } <= names
    assert not any(n.endswith((".pkl", ".tmp")) for n in names)
    back = ms.load_results(folder)
    np.testing.assert_allclose(back.result.x, res.x)
    np.testing.assert_allclose(back.result.jac, res.jac)
    assert back.result.status == res.status and back.result.message == res.message
    np.testing.assert_allclose(back.opt_params.as_vector(), opt.as_vector())
    # the identified model reproduces the identified masses, and its modifiers are re-bound
    import mujoco

    identified = mujoco.MjModel.from_xml_path(str(back.model_files["arm2"]))
    np.testing.assert_allclose(identified.body("link1").mass, [1.3], rtol=1e-8)
    assert back.opt_params["link1_mass"].modifier is not None


def test_incomplete_results_folder(make_problem, tmp_path):
    p, params, rf, opt, res = _fit(make_problem)
    folder = ms.save_results(tmp_path, [p.sequences], params, opt, res, rf)
    (folder / "confidence.npz").unlink()
    with pytest.raises(ValueError, match=r"is incomplete: missing \['confidence.npz'\]"):
        ms.load_results(folder)
    (folder / "result.yaml").unlink()
    with pytest.raises(FileNotFoundError, match="saving was interrupted"):
        ms.load_results(folder)


def test_unwritable_results_folder(make_problem, tmp_path):
    p, params, rf, opt, res = _fit(make_problem)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError, match="cannot create folder"):
        ms.save_results(blocker / "sub", [p.sequences], params, opt, res, rf)


def test_skeleton_case_study_runs_as_written(tmp_path, monkeypatch):
    """The API spec's skeleton, with mjsysid imports and a generated recording."""
    import mujoco

    from mjsysid import (
        ModelSequences,
        Parameter,
        ParameterDict,
        TimeSeries,
        build_residual_fn,
        create_initial_state,
        optimize,
        save_results,
    )

    xml = ARM2.replace(
        '<geom name="g1" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1.0"/>',
        '<inertial pos="0.15 0 0" mass="2.0" diaginertia="0.02 0.02 0.001"/>'
        '<geom name="g1" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0"/>',
    )
    (tmp_path / "robot.xml").write_text(xml)
    monkeypatch.chdir(tmp_path)

    # 1. Load model.
    spec = mujoco.MjSpec.from_file("robot.xml")
    model = spec.compile()

    # 2. Define parameters with modifier callbacks.
    params = ParameterDict()
    params.add(
        Parameter(
            "link1_mass",
            nominal=2.0,
            min_value=0.5,
            max_value=5.0,
            modifier=lambda spec, p: setattr(spec.body("link1"), "mass", p.value[0]),
        )
    )

    # 3. Package recorded data (here: generated with a true mass of 2.6 kg).
    truth = params.copy()
    truth.update_from_vector([2.6])
    times = np.arange(300) * model.opt.timestep
    ctrl_array = np.column_stack([np.sin(7 * times), np.cos(5 * times)])
    qpos_0, qvel_0 = np.array([0.3, -0.2]), np.zeros(2)
    recorded = ms.sysid_rollout(
        ms.apply_param_modifiers(truth, spec),
        None,
        ctrl_array,
        create_initial_state(model, qpos_0, qvel_0),
    )[0]
    sensor_array = recorded.sensordata

    control = TimeSeries.from_control_names(times, ctrl_array, model)
    sensordata = TimeSeries.from_names(times, sensor_array, model)
    initial_state = create_initial_state(model, qpos_0, qvel_0)

    ms_ = ModelSequences(
        name="robot",
        spec=spec,
        sequence_name="traj_1",
        initial_state=initial_state,
        control=control,
        sensordata=sensordata,
    )

    # 4. Build the residual function and optimize.
    residual_fn = build_residual_fn(models_sequences=[ms_])
    opt_params, opt_result = optimize(
        initial_params=params, residual_fn=residual_fn, optimizer="mujoco"
    )

    # 5. Inspect results.
    assert "link1_mass" in repr(opt_params)
    save_results("results/", [ms_], params, opt_params, opt_result, residual_fn)
    assert opt_params["link1_mass"].value[0] == pytest.approx(2.6, rel=1e-6)
    assert (tmp_path / "results" / "robot.xml").is_file()
