"""Saved results and the spec's skeleton case study."""

from __future__ import annotations

import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2, fit_arm_masses


def test_save_and_load_results(make_problem, tmp_path):
    p, params, rf, opt, res = fit_arm_masses(make_problem)
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
    p, params, rf, opt, res = fit_arm_masses(make_problem)
    folder = ms.save_results(tmp_path, [p.sequences], params, opt, res, rf)
    (folder / "confidence.npz").unlink()
    with pytest.raises(ValueError, match=r"is incomplete: missing \['confidence.npz'\]"):
        ms.load_results(folder)
    (folder / "result.yaml").unlink()
    with pytest.raises(FileNotFoundError, match="saving was interrupted"):
        ms.load_results(folder)


def test_unwritable_results_folder(make_problem, tmp_path):
    p, params, rf, opt, res = fit_arm_masses(make_problem)
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


def test_bootstrap_intervals_survive_saving(make_problem, tmp_path):
    """load_results gives back the Confidence save_results wrote: method, ends and notes."""
    from mjsysid.fit.confidence import compute_confidence

    p, params, rf, opt, res = fit_arm_masses(make_problem, noise=0.01)
    blocks = np.arange(res.fun.size) * 6 // res.fun.size  # six blocks of rows
    conf = compute_confidence(res, rf, params=opt, method="bootstrap", draws=30, blocks=blocks)
    assert conf.method == "bootstrap" and conf.interval is not None and conf.notes
    assert not np.allclose(conf.interval[:, 1] - conf.values, conf.values - conf.interval[:, 0])
    folder = ms.save_results(
        str(tmp_path / "boot"), [p.sequences], params, opt, res, rf, confidence=conf
    )
    back = ms.load_results(folder).confidence
    assert back.method == "bootstrap" and back.notes == conf.notes
    np.testing.assert_array_equal(back.interval, conf.interval)
    np.testing.assert_array_equal(back.half_widths, conf.half_widths)
    assert back.caveats() == conf.caveats() and back.to_dict() == conf.to_dict()
    # a linearised Confidence comes back linearised, without ends or notes
    lin = ms.load_results(
        ms.save_results(str(tmp_path / "lin"), [p.sequences], params, opt, res, rf)
    ).confidence
    assert lin.method == "linear" and lin.interval is None and lin.notes == []
    # a folder written before the bootstrap (no method, ends or notes) reads as linearised
    from mjsysid.util.files import load_npz, npz_bytes

    old = dict(load_npz(folder / "confidence.npz"))
    for key in ("method", "notes", "interval"):
        del old[key]
    (folder / "confidence.npz").write_bytes(npz_bytes(old))
    before = ms.load_results(folder).confidence
    assert before.method == "linear" and before.interval is None and before.notes == []
    np.testing.assert_array_equal(before.half_widths, conf.half_widths)
