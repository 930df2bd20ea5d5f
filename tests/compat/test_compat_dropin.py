"""The drop-in cases of #26 through ``import mjsysid.compat as sysid``, each as
``mujoco.sysid`` 4.0.1 documents it (its docstrings and return types; the peer itself is never
imported here)."""

from __future__ import annotations

import logging
from pathlib import Path
from unittest import mock

import mujoco
import numpy as np
import pytest
import scipy.optimize

import mjsysid
import mjsysid.compat as sysid

DT = 0.01

#: A planar two-link arm: hinges about y, links along -z; a centre of mass moved along the
#: hinge axis (y) changes nothing, so MassIpos has entries the data cannot see.
PLANAR = """
<mujoco><option timestep="0.01"/><worldbody>
<body name="l1"><joint name="j1" axis="0 1 0" damping="0.05"/>
 <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="1"/>
 <body name="l2" pos="0 0 -0.3"><joint name="j2" axis="0 1 0" damping="0.05"/>
  <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="0.5"/></body></body>
</worldbody>
<actuator><motor name="m1" joint="j1"/><motor name="m2" joint="j2"/></actuator>
<sensor><jointpos name="p1" joint="j1"/><jointpos name="p2" joint="j2"/></sensor></mujoco>
"""


def _sequence(spec: mujoco.MjSpec, n: int = 80, seed: int = 0) -> sysid.ModelSequences:
    model = spec.compile()
    rng = np.random.default_rng(seed)
    t = np.arange(n) * DT
    ctrl = sysid.TimeSeries.from_control_names(t, rng.normal(0, 0.5, (n, model.nu)), model)
    x0 = sysid.create_initial_state(model, np.full(model.nq, 0.2))
    (tr,) = sysid.sysid_rollout(model, None, ctrl, x0)
    return sysid.ModelSequences("m", spec, "s", x0, ctrl, tr.sensordata)


def _damping(name: str):
    def modifier(s: mujoco.MjSpec, p: sysid.Parameter) -> None:
        s.joint(name).damping = [float(p.value[0]), 0.0, 0.0]

    return modifier


def _fit(pendulum_spec: mujoco.MjSpec):
    seq = _sequence(pendulum_spec)
    params = sysid.ParameterDict()
    params.add(sysid.Parameter("d", 0.2, 0.0, 1.0, modifier=_damping("hinge")))
    fn = sysid.build_residual_fn(models_sequences=[seq], n_threads=1)
    opt_params, result = sysid.optimize(params, fn, verbose=False, max_iters=20)
    return seq, params, opt_params, result, fn


def test_optimize_returns_a_scipy_result_with_x_jac_grad(pendulum_spec: mujoco.MjSpec) -> None:
    _, params, opt_params, result, fn = _fit(pendulum_spec)
    assert isinstance(result, scipy.optimize.OptimizeResult)
    assert result.x[0] == pytest.approx(0.1, abs=1e-6)  # the pendulum's damping
    assert result["jac"].shape[1] == 1 and result.grad.shape == (1,)
    assert opt_params["d"].value[0] == pytest.approx(0.1, abs=1e-6)
    assert params["d"].value[0] == 0.2  # the start is untouched
    assert isinstance(result.result, mjsysid.OptimizeResult)
    fn.close()


def test_default_report_returns_a_report_with_save(
    pendulum_spec: mujoco.MjSpec, tmp_path: Path
) -> None:
    seq, params, opt_params, result, fn = _fit(pendulum_spec)
    report = sysid.default_report([seq], params, opt_params, fn, result, generate_videos=False)
    assert report.save(tmp_path / "my_report.html") == tmp_path / "my_report.html"
    html = (tmp_path / "my_report.html").read_text(encoding="utf-8")
    assert "<html" in html.lower() and "d" in html
    assert not (tmp_path / "report.html").exists()  # written under the name asked for
    page = report.build()
    assert page.lower().startswith("<!doctype html") and "plotly" in page.lower()
    with pytest.raises(ValueError, match="save_path is required when generate_videos=True"):
        sysid.default_report([seq], params, opt_params, fn, result)
    fn.close()


def test_check_conditioning_reports_a_rank_deficient_start(
    pendulum_spec: mujoco.MjSpec, caplog: pytest.LogCaptureFixture
) -> None:
    seq = _sequence(pendulum_spec)
    params = sysid.ParameterDict()
    params.add(sysid.Parameter("d", 0.2, 0.0, 1.0, modifier=_damping("hinge")))
    params.add(sysid.Parameter("noop", 1.0, 0.5, 2.0, modifier=lambda s, p: None))
    fn = sysid.build_residual_fn(models_sequences=[seq], n_threads=1)
    with caplog.at_level(logging.WARNING):
        _, result = sysid.optimize(params, fn, verbose=False, check_conditioning=True, max_iters=20)
    assert "cond(J^T J) ~ inf" in caplog.text
    assert result.x[0] == pytest.approx(0.1, abs=1e-6) and result.x[1] == 1.0
    # the spec door refuses such a start, naming the way out
    with pytest.raises(ValueError, match=r"\['noop'\] have no effect.*allow_no_effect=True"):
        mjsysid.optimize(params, fn.residual_function, max_iters=5)
    fn.close()


def test_equal_bounds_are_accepted_and_kept(pendulum_spec: mujoco.MjSpec) -> None:
    pinned = sysid.Parameter("pinned", 0.7, 0.7, 0.7)
    assert not pinned.frozen and pinned.get_bounds() == (np.array([0.7]), np.array([0.7]))
    pinned.move_off_bound()
    assert pinned.value[0] == 0.7
    with pytest.raises(ValueError, match="min_value must be < max_value for a non-frozen"):
        mjsysid.Parameter("pinned", 0.7, 0.7, 0.7)
    seq = _sequence(pendulum_spec)
    params = sysid.ParameterDict()
    params.add(sysid.Parameter("d", 0.2, 0.0, 1.0, modifier=_damping("hinge")))
    params.add(pinned)
    fn = sysid.build_residual_fn(models_sequences=[seq], n_threads=1)
    opt_params, result = sysid.optimize(params, fn, verbose=False, max_iters=20)
    assert not opt_params["pinned"].frozen and opt_params["pinned"].value[0] == 0.7
    np.testing.assert_allclose(result.x, [0.1, 0.7], atol=1e-6)
    assert result.jac.shape[1] == 2 and np.all(result.jac[:, 1] == 0)
    fn.close()


def test_mass_ipos_on_a_planar_arm_fits(tmp_path: Path) -> None:
    spec = mujoco.MjSpec.from_string(PLANAR)
    model = spec.compile()
    seq = _sequence(spec, 120)
    params = sysid.ParameterDict()
    p = sysid.body_inertia_param(spec, model, "l2", sysid.InertiaType.MassIpos)
    assert p.size == 4 and p.name == "l2_mass_ipos"  # the peer's defaults
    p.value = p.value * np.array([1.3, 1.0, 1.0, 1.0])
    params.add(p)
    fn = sysid.build_residual_fn(models_sequences=[seq], n_threads=1)
    opt_params, _ = sysid.optimize(params, fn, verbose=False, max_iters=40)
    assert opt_params["l2_mass_ipos"].value[0] == pytest.approx(0.5, rel=1e-4)
    fn.close()


def test_unknown_actuator_is_a_value_error(pendulum: mujoco.MjModel) -> None:
    t = np.arange(3) * DT
    with pytest.raises(ValueError, match="nope"):
        sysid.TimeSeries.from_control_names(t, np.zeros((3, 1)), pendulum, ["nope"])
    with pytest.raises(KeyError):  # and a KeyError, for mjsysid's own handlers
        sysid.TimeSeries.from_control_names(t, np.zeros((3, 1)), pendulum, ["nope"])


def test_trajectory_with_a_stand_in_model_saves_and_splits(tmp_path: Path) -> None:
    model = mock.Mock()  # the peer passes the model through untouched
    t = np.arange(6) * DT
    ctrl = sysid.TimeSeries(t, np.zeros((6, 1)))
    sens = sysid.TimeSeries(t, np.arange(6.0)[:, None])
    state = sysid.TimeSeries(t, np.column_stack([t, np.arange(6.0)]))
    tr = sysid.SystemTrajectory(model, ctrl, sens, np.array([0.0, 0.0]), state)
    tr.save_to_disk(tmp_path / "t.npz")
    assert (tmp_path / "t.npz").is_file()
    chunks = tr.split(3)
    assert [c.sensordata.data[:, 0].tolist() for c in chunks] == [[0, 1, 2], [3, 4, 5]]
    assert all(c.model is model for c in chunks)
