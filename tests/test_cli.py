"""The mjsysid command, run in-process; experiment files and recordings."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import yaml

import mjsysid as ms
from mjsysid.cli import main
from mjsysid.experiment import ExperimentError, bundled_examples, load_experiment
from mjsysid.recording import load_recording, read_columns


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_help_on_every_level(capsys):
    for argv in ([], ["fit"], ["report"], ["simulate"], ["demo"], ["examples"]):
        with pytest.raises(SystemExit) as e:
            main([*argv, "--help"])
        assert e.value.code == 0
        assert "usage: mjsysid" in capsys.readouterr().out


def test_examples_listed():
    code, out, _ = run("examples")
    assert code == 0
    assert {"arm", "box", "cartpole"} <= set(bundled_examples())
    assert "example:arm" in out and "example:box" in out


@pytest.mark.parametrize(
    ("name", "truth"),
    [
        (
            "arm",
            {
                "link1_mass": 1.5,
                "link2_mass": 0.65,
                "link3_mass": 0.45,
                "shoulder_damping": 0.12,
                "elbow_damping": 0.08,
            },
        ),
        ("box", {"box_floor_friction": 0.72}),
        ("cartpole", {"pole_mass": 0.8, "slider_damping": 0.05, "hinge_damping": 0.002}),
    ],
)
def test_fit_bundled_examples(tmp_path, name, truth):
    code, out, err = run(
        "fit", f"example:{name}", "--out", str(tmp_path / name), "--no-report", "-q"
    )
    assert code == 0, err
    assert "Converged" in err
    res = ms.load_results(tmp_path / name)
    conf = dict(zip(res.confidence.names, res.confidence.half_widths, strict=True))
    for key, value in truth.items():
        # noisy recordings: the truth lies within the (finite) 95 % interval, up to 3 widths
        assert conf[key] < 0.01 * value, key
        assert abs(res.opt_params[key].value[0] - value) <= 3 * conf[key], key
    assert (tmp_path / name / "run.yaml").is_file()
    assert (tmp_path / name / f"{name}.xml").is_file()
    for key in truth:
        assert key in out


def test_simulate_then_fit_own_experiment(tmp_path):
    model_xml = bundled_examples()["arm"].parent / "arm.xml"
    rec = tmp_path / "rec.csv"
    code, _, err = run(
        "simulate",
        str(model_xml),
        "--out",
        str(rec),
        "--duration",
        "1",
        "--signal",
        "chirp",
        "--amplitude",
        "0.5",
        "--qpos",
        "1.5",
        "0",
        "0",
        "--set",
        "joint_damping:elbow=0.2",
    )
    assert code == 0, err
    cols = read_columns(rec)
    assert cols["time"].shape == (500,) and "ctrl.shoulder_motor" in cols
    (tmp_path / "arm.xml").write_text(model_xml.read_text())
    exp = {
        "name": "mine",
        "model": "arm.xml",
        "sequences": [
            {"name": "chirp", "file": "rec.csv", "initial_state": {"qpos": [1.5, 0.0, 0.0]}}
        ],
        "parameters": [{"kind": "joint_damping", "target": "elbow", "max": 1.0}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    code, _, err = run(
        "fit",
        str(tmp_path / "exp.yaml"),
        "--out",
        str(tmp_path / "res"),
        "--no-report",
        "--optimizer",
        "scipy_parallel_fd",
    )
    assert code == 0, err
    assert ms.load_results(tmp_path / "res").opt_params["elbow_damping"].value[0] == pytest.approx(
        0.2, rel=1e-4
    )
    assert "iter" in err  # progress lines unless --quiet


def test_fit_resume_from_checkpoint(tmp_path):
    out = tmp_path / "arm"
    code, _, _ = run(
        "fit", "example:arm", "--out", str(out), "--no-report", "-q", "--max-iters", "1"
    )
    assert code == 0 and (out / "checkpoint.npz").is_file()
    code, _, err = run("fit", "example:arm", "--out", str(out), "--no-report", "-q", "--resume")
    assert code == 0 and "Converged" in err


def test_fit_in_horizon_stages_from_the_file_or_the_command_line(tmp_path):
    path = _write_exp(tmp_path, optimizer={"method": "lm", "horizons": [0.3, 1.0]})
    assert load_experiment(path).optimizer_options == {"horizons": (0.3, 1.0)}
    for name, extra in (("file", []), ("flag", ["--horizons", "0.5", "1"])):
        code, _, err = run(
            "fit", str(path), "--out", str(tmp_path / name), "--no-report", "-q", *extra
        )
        assert code == 0 and "Converged" in err, err
        shares = "30 %, 100 %" if name == "file" else "50 %, 100 %"
        assert f"in stages on the first {shares} of every sequence" in err
        run_yaml = yaml.safe_load((tmp_path / name / "run.yaml").read_text())
        want = [0.3, 1.0] if name == "file" else [0.5, 1.0]
        assert run_yaml["optimizer_options"] == {"horizons": want}
        stages = ms.load_results(tmp_path / name).result.extras.get("stages")
        assert [s["horizon"] for s in stages] == want
    assert ms.load_results(tmp_path / "file").opt_params["link1_mass"].value[0] == pytest.approx(
        1.5, rel=1e-2
    )


def test_horizons_auto_by_default_and_none_for_one_stage(tmp_path):
    assert load_experiment(
        _write_exp(tmp_path, optimizer={"horizons": "none"})
    ).optimizer_options == {"horizons": None}
    path = _write_exp(tmp_path, optimizer={"horizons": "auto"})
    assert load_experiment(path).optimizer_options == {"horizons": "auto"}
    for name, extra in (("auto", []), ("none", ["--horizons", "none"])):
        code, _, err = run("fit", str(path), "--out", str(tmp_path / name), "--no-report", *extra)
        assert code == 0 and "Converged" in err, err
        staged = "in stages on the first 10 %, 30 %, 100 % of every sequence" in err
        stages = ms.load_results(tmp_path / name).result.extras.get("stages")
        assert staged == (name == "auto") and bool(stages) == (name == "auto")
        # progress lines name the stage they belong to
        first = "first 10 %  iter    1  cost" if name == "auto" else "\niter    1  cost"
        assert first in err and ("first 10 %" in err) == (name == "auto")
    code, _, err = run("fit", str(path), "--out", str(tmp_path / "x"), "--horizons", "0.3", "all")
    want = "error: --horizons must be 'auto', 'none' or fractions in (0, 1] (e.g. 0.3 1), got "
    assert code == 1 and want + "'0.3 all'" in err


def _write_exp(tmp_path: Path, **overrides) -> Path:
    base = bundled_examples()["arm"].parent
    exp = yaml.safe_load((base / "experiment.yaml").read_text())
    exp["model"] = str(base / "arm.xml")
    for s in exp["sequences"]:
        s["file"] = str(base / s["file"])
    exp.update(overrides)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (
            {"parameters": [{"kind": "body_mass", "target": "link1", "max": "high"}]},
            r"parameters\[0\].max must be a number or a list of numbers, got str 'high'",
        ),
        (
            {"parameters": [{"kind": "body_colour", "target": "link1"}]},
            r"parameters\[0\].kind must be one of \[",
        ),
        ({"parameters": [{"kind": "body_mass"}]}, r"parameters\[0\].target is required"),
        (
            {"parameters": [{"kind": "joint_damping", "target": "knee"}]},
            r"parameters\[0\]: the model has no joint named 'knee'",
        ),
        (
            {"parameters": [{"kind": "body_mass", "target": "link1", "colour": 1}]},
            r"parameters\[0\] has unknown keys \['colour'\]",
        ),
        ({"parameters": []}, r"parameters must be a non-empty list"),
        ({"optimizer": {"method": "adam"}}, r"optimizer.method must be one of"),
        ({"optimizer": {"max_iters": "many"}}, r"optimizer.max_iters must be int, got str 'many'"),
        (
            {"optimizer": {"horizons": [0.5, 0.3]}},
            r"optimizer.horizons must be 'auto', 'none' or increasing fractions in \(0, 1\], "
            r"e.g. \[0.3, 1.0\], got list \[0.5, 0.3\]",
        ),
        ({"optimizer": {"horizons": [0.3, 2]}}, r"optimizer.horizons must be 'auto', 'none' or"),
        (
            {"optimizer": {"horizons": "always"}},
            r"optimizer.horizons must be 'auto', 'none' or increasing fractions .*got str 'always'",
        ),
        ({"sequences": [{"name": "x"}]}, r"sequences\[0\].file is required"),
        (
            {"residual": {"control_interpolation": "cubic"}},
            r"residual.control_interpolation must be",
        ),
        ({"schema_version": 9}, r"schema_version must be <= 1, got 9"),
        ({"extra": 1}, r"top level has unknown keys \['extra'\]"),
    ],
)
def test_bad_experiment_files(tmp_path, overrides, match):
    path = _write_exp(tmp_path, **overrides)
    with pytest.raises(ExperimentError, match=match):
        load_experiment(path)
    code, _, err = run("fit", str(path), "--out", str(tmp_path / "o"), "--no-report")
    assert code == 1 and err.startswith("error: ")


def test_bad_recording_columns(tmp_path):
    base = bundled_examples()["arm"].parent
    path = _write_exp(
        tmp_path, sequences=[{"file": str(base / "run1.npz"), "sensors": {"shoulder_pos": "nope"}}]
    )
    with pytest.raises(ExperimentError, match=r"sequences\[0\]: .*no column 'nope'"):
        load_experiment(path)
    missing = _write_exp(tmp_path, model="missing.xml")
    code, _, err = run("fit", str(missing), "--no-report")
    assert code == 1 and "no such file" in err


def test_recording_round_trip_npz_and_csv(tmp_path):
    import mujoco

    model = mujoco.MjModel.from_xml_string(
        (bundled_examples()["box"].parent / "box.xml").read_text()
    )
    t = np.arange(5) * 0.01
    ctrl = np.arange(5.0)[:, None]
    sens = np.arange(30.0).reshape(5, 6)
    for suffix in (".npz", ".csv"):
        from mjsysid.recording import write_recording

        path = write_recording(tmp_path / f"r{suffix}", model, t, ctrl, sens)
        rec = load_recording(path, model)
        np.testing.assert_allclose(rec.sensordata.data, sens)
        np.testing.assert_allclose(rec.control.data, ctrl)
        assert rec.sensordata.names == ["box_pos", "box_vel"]


def test_simulate_bad_set(tmp_path):
    model_xml = bundled_examples()["box"].parent / "box.xml"
    code, _, err = run(
        "simulate", str(model_xml), "--out", str(tmp_path / "r.npz"), "--set", "oops"
    )
    assert code == 1 and "--set must look like KIND:TARGET=VALUE" in err


def test_report_command_needs_fit_folder(tmp_path):
    code, _, err = run("report", str(tmp_path))
    assert code == 1 and "no result.yaml" in err


URDF = """<?xml version="1.0"?>
<robot name="pendulum">
  <link name="base">
    <inertial><origin xyz="0 0 0"/><mass value="1.0"/>
      <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="arm">
    <inertial><origin xyz="0 0 -0.25"/><mass value="0.5"/>
      <inertia ixx="0.01" iyy="0.01" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <joint name="swing" type="revolute">
    <parent link="base"/><child link="arm"/><origin xyz="0 0 1"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="10" velocity="10"/>
    <dynamics damping="0.02"/>
  </joint>
</robot>
"""


def test_fit_urdf_model_with_joint_state_columns(tmp_path):
    import mujoco

    (tmp_path / "pendulum.urdf").write_text(URDF)
    spec = mujoco.MjSpec.from_file(str(tmp_path / "pendulum.urdf"))
    model = spec.compile()
    truth = ms.ParameterDict([ms.make_parameter("joint_damping", model, "swing")])
    truth.update_from_vector([0.05])
    x0 = ms.create_initial_state(model, qpos=[1.0])
    traj = ms.sysid_rollout(ms.apply_param_modifiers(truth, spec), None, np.zeros((400, 0)), x0)[0]
    np.savez(
        tmp_path / "swing.npz",
        time=traj.times,
        swing_qpos=traj.qpos()[:, 0],
        swing_qvel=traj.qvel()[:, 0],
        initial_qpos=traj.qpos()[0],
        initial_qvel=traj.qvel()[0],
    )
    exp = {
        "name": "pendulum",
        "model": "pendulum.urdf",
        "sequences": [{"name": "swing", "file": "swing.npz"}],
        "parameters": [{"kind": "joint_damping", "target": "swing", "max": 1.0}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    code, _out, err = run(
        "fit", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "res"), "--no-report", "-q"
    )
    assert code == 0, err
    res = ms.load_results(tmp_path / "res")
    assert res.opt_params["swing_damping"].value[0] == pytest.approx(0.05, rel=1e-6)
