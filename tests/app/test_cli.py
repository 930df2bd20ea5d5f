"""The mjsysid command, run in-process; experiment files and recordings."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

import mjsysid as ms
import mjsysid.data.recording
import mjsysid.objective.signal_transform
import mjsysid.output.results
from conftest import arm_experiment_text
from mjsysid.app.cli import main
from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment
from mjsysid.data.recording import load_recording, read_columns


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


def test_every_command_module_follows_the_convention():
    from mjsysid.app.cli import COMMANDS, build_parser

    names = [c.NAME for c in COMMANDS]
    assert names == [
        "fit",
        "check",
        "audit",
        "design",
        "report",
        "compare",
        "evaluate",
        "simulate",
        "capture",
        "device",
        "examples",
        "schema",
        "demo",
    ]
    for command in COMMANDS:
        assert isinstance(command.HELP, str) and "\n" not in command.HELP
        assert callable(command.add_arguments) and callable(command.run)
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(subparsers.choices) == names


def test_every_command_that_writes_names_its_output_with_o_or_out():
    """One name for one meaning: ``-o`` / ``--out`` wherever a command writes a file or a
    folder (``design`` keeps its older ``--output`` as an alias)."""
    from mjsysid.app.cli import build_parser

    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    writers = {}
    for name, parser in subparsers.choices.items():
        outs = [a for a in parser._actions if "--out" in a.option_strings]
        if outs:
            writers[name] = outs[0]
            assert outs[0].dest == "out" and "-o" in outs[0].option_strings, name
        assert not any("--output" in a.option_strings for a in parser._actions) or (
            name == "design"
        ), name
    assert set(writers) == {"fit", "design", "compare", "evaluate", "simulate", "schema", "demo"}
    design = subparsers.choices["design"]
    for flag in ("-o", "--out", "--output"):
        assert design.parse_args(["example:dcmotor", flag, "d.csv"]).out == "d.csv"


def test_examples_listed():
    code, out, _ = run("examples")
    assert code == 0
    assert {"arm", "box", "cartpole", "dcmotor"} <= set(bundled_examples())
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
        (
            "dcmotor",
            {
                "motor_deadband_pos": 0.14,
                "motor_deadband_neg": 0.08,
                "motor_gain_neg": 0.85,
                "motor_filter_tau": 0.03,
                "motor_kv": 0.003,
            },
        ),
    ],
)
def test_fit_bundled_examples(tmp_path, name, truth):
    code, out, err = run(
        "fit", f"example:{name}", "--out", str(tmp_path / name), "--no-report", "-q"
    )
    assert code == 0, err
    assert "Converged" in out  # -q: the status with the answer, on stdout
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
    code, _, err = run("fit", "example:arm", "--out", str(out), "--no-report", "--max-iters", "1")
    assert code == 0 and (out / "checkpoint.npz").is_file()
    # the intervals of an unfinished fit come with a warning, here and in confidence.yaml
    assert "warning: the fit did not converge (max_iters: Stopped after max_iters=1" in err
    assert "the intervals describe its end point" in err
    saved = yaml.safe_load((out / "confidence.yaml").read_text())
    assert saved["converged"] is False and "did not converge" in saved["caveats"][0]
    code, _, err = run("fit", "example:arm", "--out", str(out), "--no-report", "--resume")
    assert code == 0 and "Converged" in err and "warning" not in err
    saved = yaml.safe_load((out / "confidence.yaml").read_text())
    assert saved["converged"] is True and saved["caveats"] == []
    assert {p["at_bound"] for p in saved["parameters"]} == {False}


def test_fit_says_every_caveat_of_its_intervals(tmp_path):
    params = [
        {"kind": "body_mass", "target": "link1"},
        {"kind": "joint_damping", "target": "elbow", "max": 0.05},  # the truth is 0.08
    ]
    path = _write_exp(tmp_path, parameters=params)
    code, _, err = run("fit", str(path), "--out", str(tmp_path / "r"), "--no-report")
    assert code == 0, err
    assert (
        "warning: elbow_damping is at its upper bound: its interval is bound-limited (not "
        "given), and the others' are computed with it free (which can only widen them)"
    ) in err
    saved = yaml.safe_load((tmp_path / "r" / "confidence.yaml").read_text())
    assert any("elbow_damping is at its upper bound" in c for c in saved["caveats"])


def test_many_caveats_are_said_up_to_a_limit():
    from mjsysid.app.commands.fit import MAX_CAVEATS, say_caveats

    err = io.StringIO()
    say_caveats([f"c{k}" for k in range(MAX_CAVEATS + 5)], err)
    lines = err.getvalue().splitlines()
    assert lines[:MAX_CAVEATS] == [f"warning: c{k}" for k in range(MAX_CAVEATS)]
    assert lines[MAX_CAVEATS:] == [
        "warning: and 5 more about the intervals: confidence.yaml and the report list them all"
    ]


def test_fit_in_horizon_stages_from_the_file_or_the_command_line(tmp_path):
    path = _write_exp(tmp_path, optimizer={"method": "lm", "horizons": [0.3, 1.0]})
    assert load_experiment(path).optimizer_options == {"horizons": (0.3, 1.0)}
    for name, extra in (("file", []), ("flag", ["--horizons", "0.5", "1"])):
        code, _, err = run("fit", str(path), "--out", str(tmp_path / name), "--no-report", *extra)
        assert code == 0 and "Converged" in err, err
        shares = "30 %, 100 %" if name == "file" else "50 %, 100 %"
        assert f"in stages on the first {shares} of every sequence" in err
        run_yaml = yaml.safe_load((tmp_path / name / "run.yaml").read_text())
        want = [0.3, 1.0] if name == "file" else [0.5, 1.0]
        assert run_yaml["optimizer_options"] == {"horizons": want}
        stages = ms.load_results(tmp_path / name).result.stages
        assert [s.horizon for s in stages] == want
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
        stages = ms.load_results(tmp_path / name).result.stages
        assert staged == (name == "auto") and bool(stages) == (name == "auto")
        # progress lines name the stage they belong to
        first = "first 10 %  iter    1/100  cost" if name == "auto" else "\niter    1/100  cost"
        assert first in err and ("first 10 %" in err) == (name == "auto")
    code, _, err = run("fit", str(path), "--out", str(tmp_path / "x"), "--horizons", "0.3", "all")
    want = "error: --horizons must be 'auto', 'none' or fractions in (0, 1] (e.g. 0.3 1), got "
    assert code == 1 and want + "'0.3 all'" in err


def _write_exp(tmp_path: Path, **overrides) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(arm_experiment_text(**overrides))
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
        from mjsysid.data.recording import write_recording

        path = write_recording(tmp_path / f"r{suffix}", model, t, ctrl, sens)
        rec = load_recording(path, model)
        np.testing.assert_allclose(rec.sensordata.data, sens)
        np.testing.assert_allclose(rec.control.data, ctrl)
        assert rec.sensordata.names == ["box_pos", "box_vel"]


def test_simulate_logs_at_a_given_rate(tmp_path):
    """--rate 50 writes what a 50 Hz logger would: a sample every 20 ms, each command held
    until the next (the simulation between runs at the model's timestep)."""
    model_xml = bundled_examples()["dcmotor"].parent / "dcmotor.xml"
    out = tmp_path / "r.npz"
    code, _, err = run(
        "simulate", str(model_xml), "--out", str(out), "--duration", "2", "--rate", "50"
    )
    assert code == 0 and "wrote 100 samples (1.98 s" in err, err
    # the held commands and the sampled readings are the simulation: a zero residual
    model = mujoco.MjModel.from_xml_path(str(model_xml))
    rec = mjsysid.data.recording.load_recording(out, model)
    x0 = ms.create_initial_state(model, rec.initial_qpos, rec.initial_qvel)
    seq = ms.ModelSequences(
        "m", mujoco.MjSpec.from_file(str(model_xml)), "s", x0, rec.control, rec.sensordata
    )
    params = ms.ParameterDict([ms.make_parameter("actuator_kv", model, "motor")])
    r = ms.build_residual_fn([seq], normalize=False)(params.as_vector(), params)
    assert np.max(np.abs(r)) < 1e-12
    with np.load(out) as z:
        np.testing.assert_allclose(np.diff(z["time"]), 0.02, rtol=1e-9)
        full = tmp_path / "full.npz"
        assert run("simulate", str(model_xml), "--out", str(full), "--duration", "2")[0] == 0
        with np.load(full) as f:
            assert f["time"].size == 1000
    code, _, err = run("simulate", str(model_xml), "--out", str(out), "--rate", "333")
    assert (
        code == 1
        and (
            "--rate must be the simulation rate 500 Hz divided by a whole number (e.g. 500, 250, "
            "50 Hz), got 333.0"
        )
        in err
    )


def test_simulate_bad_set(tmp_path):
    model_xml = bundled_examples()["box"].parent / "box.xml"
    code, _, err = run(
        "simulate", str(model_xml), "--out", str(tmp_path / "r.npz"), "--set", "oops"
    )
    assert code == 1 and "--set must look like KIND:TARGET=VALUE" in err
    code, _, err = run(
        "simulate", str(model_xml), "--out", str(tmp_path / "r.npz"), "--set", "joint_damping:x=-1"
    )
    assert (
        code == 1
        and (
            "--set 'joint_damping:x=-1': VALUE must be >= 0 (a negative damping adds energy), "
            "got -1.0"
        )
        in err
    )


def test_report_command_needs_fit_folder(tmp_path):
    code, _, err = run("report", str(tmp_path))
    assert code == 1 and "no result.yaml" in err


def test_report_refuses_inputs_changed_since_the_fit(tmp_path):
    """'mjsysid report' rebuilds the residual from the experiment: if a recording, the model
    or the experiment changed since the fit, the report would describe other data."""
    base = bundled_examples()["box"].parent
    for f in base.iterdir():
        shutil.copy(f, tmp_path)
    out = tmp_path / "o"
    code, _, err = run(
        "fit", str(tmp_path / "experiment.yaml"), "--out", str(out), "-q", "--no-report"
    )
    assert code == 0, err
    run_yaml = yaml.safe_load((out / "run.yaml").read_text())
    assert set(run_yaml["inputs"]) == {
        str((tmp_path / n).resolve()) for n in ("experiment.yaml", "box.xml", "push.csv")
    }
    code, _, err = run("report", str(out))  # unchanged: written
    assert code == 0 and (out / "report.html").is_file(), err
    data = tmp_path / "push.csv"
    data.write_text(data.read_text().replace("0.0,", "0.00,", 1))  # one byte more
    code, _, err = run("report", str(out))
    assert code == 1 and err.startswith(
        f"error: the inputs of this fit changed since it ran: [{str(data.resolve())!r}]; the "
        "report would show other data or parameters than were fitted: run 'mjsysid fit' again"
    ), err


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


# -- names, files and columns of experiment files ----------------------------------------------


@pytest.mark.parametrize("bad", ["../../escape", "a/b", "a\\b", "", "..", "x..y"])
@pytest.mark.parametrize("where", ["name", "sequences[0].name"])
def test_names_that_could_leave_the_results_folder_are_refused(tmp_path, bad, where):
    base = bundled_examples()["arm"].parent
    if where == "name":
        path = _write_exp(tmp_path, name=bad)
    else:
        path = _write_exp(tmp_path, sequences=[{"name": bad, "file": str(base / "run1.npz")}])
    want = (
        f"{where} must be a plain file name (non-empty, without '/', '\\', '..' or NUL), got "
        f"str {bad!r}"
    )
    with pytest.raises(ExperimentError, match=re.escape(want)):
        load_experiment(path)
    out = tmp_path / "deep" / "out"
    code, _, err = run("fit", str(path), "--out", str(out), "--no-report", "-q")
    assert code == 1 and want in err
    assert not list(tmp_path.rglob("*.xml")) and not out.exists()


def test_default_name_from_the_file_name_is_checked_too(tmp_path):
    path = _write_exp(tmp_path)
    exp = yaml.safe_load(path.read_text())
    del exp["name"]
    odd = tmp_path / "v1..2.yaml"
    odd.write_text(yaml.safe_dump(exp))
    with pytest.raises(
        ExperimentError,
        match=r"name must be a plain file name .*, got str 'v1..2' \(taken from the file name "
        r"'v1..2.yaml'; set name: explicitly\)",
    ):
        load_experiment(odd)


def test_missing_recording_names_the_key_and_the_path(tmp_path):
    path = _write_exp(tmp_path, sequences=[{"name": "a", "file": "nosuch.npz"}])
    want = (
        f"sequences[0].file: no such file {str(tmp_path / 'nosuch.npz')!r} (the file says "
        "'nosuch.npz', relative to the experiment file)"
    )
    with pytest.raises(FileNotFoundError, match=re.escape(want)):
        load_experiment(path)
    code, _, err = run("fit", str(path), "--out", str(tmp_path / "o"), "--no-report")
    assert code == 1 and err == f"error: {path}: {want}\n"
    (tmp_path / "folder.npz").mkdir()
    path = _write_exp(tmp_path, sequences=[{"file": str(tmp_path / "folder.npz")}])
    with pytest.raises(FileNotFoundError, match=r"sequences\[0\]\.file: is not a file '.*folder"):
        load_experiment(path)


def _arm_recording(tmp_path: Path, **edit) -> Path:
    """The arm example's first recording with columns renamed/added (``new=old`` or array)."""
    base = bundled_examples()["arm"].parent
    with np.load(base / "run1.npz") as z:
        cols = {k: z[k] for k in z.files}
    for new, old in edit.items():
        cols[new] = cols.pop(old) if isinstance(old, str) else old
    path = tmp_path / "rec.npz"
    np.savez(path, **cols)
    return path


def test_repeated_csv_column_fails_the_fit(tmp_path):
    rec = tmp_path / "dup.csv"
    rec.write_text("time,ctrl.shoulder_motor,elbow_pos,elbow_pos\n0,0,0,0\n0.002,0,0,0\n")
    path = _write_exp(tmp_path, sequences=[{"file": str(rec)}])
    code, _, err = run("fit", str(path), "--out", str(tmp_path / "o"), "--no-report")
    assert code == 1
    assert (
        f"sequences[0]: '{rec}': column names must be unique, got 1 repeated in the header: "
        "['elbow_pos']"
    ) in err


def test_unused_columns_are_a_warning_and_misspelt_sensors_an_error(tmp_path):
    rec = _arm_recording(tmp_path, foo=np.zeros(1000))
    path = _write_exp(tmp_path, sequences=[{"name": "s", "file": str(rec)}])
    exp = load_experiment(path)
    want = (
        f"{path}: sequences[0] ({str(rec)!r}): 1 column(s) are not used: ['foo'] (not the time "
        "column, a control, a model sensor or joint state); list them under "
        "sequences[0].ignore_columns if that is intended"
    )
    assert exp.warnings == [want]
    code, _, err = run(
        "fit", str(path), "--out", str(tmp_path / "o"), "--no-report", "-q", "--max-iters", "1"
    )
    assert code == 0 and err == f"warning: {want}\n"  # (-q: nothing but the warning)
    path = _write_exp(
        tmp_path, sequences=[{"name": "s", "file": str(rec), "ignore_columns": ["foo"]}]
    )
    assert load_experiment(path).warnings == []
    path = _write_exp(tmp_path, sequences=[{"file": str(rec), "ignore_columns": "foo"}])
    with pytest.raises(
        ExperimentError, match=r"sequences\[0\]\.ignore_columns must be a list of column names"
    ):
        load_experiment(path)
    # a typo in a sensor column: an error, before any fitting
    rec = _arm_recording(tmp_path, elbow_poss="elbow_pos")
    path = _write_exp(tmp_path, sequences=[{"file": str(rec)}])
    code, _, err = run("fit", str(path), "--out", str(tmp_path / "o2"), "--no-report")
    assert code == 1 and err.startswith(f"error: {path}: sequences[0]: recording ")
    assert "column 'elbow_poss' is not used: did you mean the model sensor 'elbow_pos'" in err
    assert not (tmp_path / "o2").exists()


def test_time_range_in_an_experiment_file(tmp_path):
    """A sequence's time_range keeps part of the recording; the window's initial state comes
    from the sensors at its start; a bad range is named with its key path."""
    rec = _arm_recording(tmp_path)
    path = _write_exp(
        tmp_path, sequences=[{"name": "s", "file": str(rec), "time_range": [0.5, None]}]
    )
    exp = load_experiment(path)
    assert exp.warnings[0] == (
        f"{path}: the initial state of ['sequences[0]'] is read from the first sample of the "
        "sensors and held fixed, so its measurement noise biases the fit; add shooting: "
        "{estimate_initial_state: true} to fit it as well (or give initial_qpos / initial_qvel "
        "columns or initial_state: qpos)"
    )
    assert exp.notes == [  # (a note: what the loader did, not a problem)
        f"{path}: sequences[0] ({str(rec)!r}): time_range starts at 0.5 s, after the first "
        "sample: the columns ['initial_qpos', 'initial_qvel'] (the state at 0.0 s) are not "
        "used, the initial state comes from the sensors at the range's start (or initial_state:)"
    ]
    _, x0, ctrl, sens = exp.sequences.sequences()[0]
    whole = load_experiment(_write_exp(tmp_path, sequences=[{"name": "s", "file": str(rec)}]))
    _, _, ctrl_all, sens_all = whole.sequences.sequences()[0]
    i = int(np.searchsorted(sens_all.times, 0.5 - 1e-9))
    np.testing.assert_array_equal(sens.times, sens_all.times[i:])
    np.testing.assert_array_equal(ctrl.data, ctrl_all.data[i:])
    assert x0[0] == sens.times[0] == pytest.approx(0.5)
    qpos, _ = mjsysid.data.recording.initial_state_from_sensors(exp.model, sens)
    np.testing.assert_array_equal(x0[1 : 1 + exp.model.nq], qpos)
    path = _write_exp(tmp_path, sequences=[{"file": str(rec), "time_range": [3.0, 1.0]}])
    with pytest.raises(
        ExperimentError, match=r"sequences\[0\]: recording .* time_range must be start < end"
    ):
        load_experiment(path)
    path = _write_exp(tmp_path, sequences=[{"file": str(rec), "time_range": 0.5}])
    with pytest.raises(
        ExperimentError,
        match=r"sequences\[0\]\.time_range must be \[start, end\] in seconds "
        r"\(null for an open end\)",
    ):
        load_experiment(path)


def test_a_frozen_parameter_with_a_nominal_is_that_value_in_the_model(tmp_path):
    """``frozen: true`` with ``nominal``: not fitted, and the model every fit runs on (and the
    saved MJCF) has that value, not the XML's; without a nominal the XML's value stays."""
    base = bundled_examples()["arm"].parent
    exp = yaml.safe_load((base / "experiment.yaml").read_text())
    params = [
        {"kind": "body_mass", "target": "link1"},
        {"kind": "joint_damping", "target": "shoulder", "max": 1.0},
        {"kind": "joint_damping", "target": "elbow", "nominal": 0.37, "frozen": True},
        {"kind": "joint_damping", "target": "wrist", "frozen": True},
    ]
    path = _write_exp(tmp_path, parameters=params)
    loaded = load_experiment(path)
    xml = mujoco.MjModel.from_xml_path(str(base / exp["model"]))
    for m in (loaded.model, loaded.sequences.model):
        assert m.dof_damping[m.joint("elbow").dofadr[0]] == 0.37
        wrist = m.joint("wrist").dofadr[0]
        assert m.dof_damping[wrist] == xml.dof_damping[wrist]
    assert loaded.params["elbow_damping"].frozen
    assert list(loaded.params.as_vector().shape) == [2]
    out = tmp_path / "o"
    code, _, err = run("fit", str(path), "--out", str(out), "--no-report", "-q", "--max-iters", "2")
    assert code == 0, err
    saved = mujoco.MjModel.from_xml_path(str(next(out.glob("*.xml"))))
    assert saved.dof_damping[saved.joint("elbow").dofadr[0]] == 0.37


def test_commands_outside_ctrlrange_are_a_warning(tmp_path):
    """Commands in other units than the model's ctrlrange (PWM counts for a duty cycle) are
    clamped by MuJoCo: the experiment loader says so, with the actuator and the numbers."""
    base = bundled_examples()["dcmotor"].parent
    text = (base / "run1.csv").read_text().splitlines()
    rows = [text[0]] + [
        ",".join([t, repr(255 * float(u)), e]) for t, u, e in (r.split(",") for r in text[1:])
    ]
    (tmp_path / "run1.csv").write_text("\n".join(rows) + "\n")
    shutil.copy(base / "dcmotor.xml", tmp_path)
    shutil.copy(base / "experiment.yaml", tmp_path)
    exp = load_experiment(tmp_path / "experiment.yaml")
    (msg,) = [w for w in exp.warnings if "ctrlrange" in w]
    assert re.search(
        r"sequences\[0\] \('.*run1\.csv'\): the commands of actuator 'motor' leave its "
        r"ctrlrange \[-1, 1\] in \d+ of \d+ samples \(up to -?2\d\d(\.\d+)?\), where MuJoCo "
        r"clamps them; check their units \(duty cycle or PWM counts\?\)",
        msg,
    ), msg
    assert not [w for w in load_experiment(base / "experiment.yaml").warnings if "ctrlrange" in w]


# -- simulate: sensor effects, argument checks -------------------------------------------------


def _simulate(tmp_path: Path, name: str, *extra: str) -> tuple[int, str, dict[str, np.ndarray]]:
    model_xml = bundled_examples()["arm"].parent / "arm.xml"
    out = tmp_path / name
    code, _, err = run(
        "simulate", str(model_xml), "--out", str(out), "--duration", "0.5", "--qpos", "1", "0", "0",
        *extra,
    )  # fmt: skip
    return code, err, (read_columns(out) if code == 0 else {})


def test_simulate_applies_sensor_delay_gain_and_bias(tmp_path):
    _, _, plain = _simulate(tmp_path, "plain.npz")
    code, err, cols = _simulate(
        tmp_path,
        "fx.npz",
        "--set",
        "sensor_delay:*_pos=0.006",
        "--set",
        "sensor_gain:elbow_vel=1.25",
        "--set",
        "sensor_bias:elbow_vel=-0.5",
    )
    assert code == 0, err
    assert (
        "['shoulder_pos', 'elbow_pos', 'wrist_pos'] delayed by 0.006 s: 3 samples at the start "
        "repeat the first reading"
    ) in err
    for s in ("shoulder_pos", "elbow_pos", "wrist_pos"):  # 0.006 s = 3 timesteps
        np.testing.assert_allclose(cols[s][3:], plain[s][:-3], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(cols[s][:3], plain[s][:1].repeat(3))
    np.testing.assert_allclose(cols["elbow_vel"], 1.25 * plain["elbow_vel"] - 0.5)
    for s in ("time", "ctrl.shoulder_motor", "shoulder_vel", "wrist_vel", "initial_qpos"):
        np.testing.assert_array_equal(cols[s], plain[s])


def test_simulated_sensor_delay_is_fitted_back(tmp_path):
    code, err, _ = _simulate(tmp_path, "rec.npz", "--set", "sensor_delay:*_pos=0.0047")
    assert code == 0, err
    (tmp_path / "arm.xml").write_text((bundled_examples()["arm"].parent / "arm.xml").read_text())
    exp = {
        "name": "delay",
        "model": "arm.xml",
        "sequences": [{"name": "s", "file": "rec.npz"}],
        "parameters": [{"kind": "sensor_delay", "target": "*_pos", "min": 0.0, "max": 0.02}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    code, _, err = run(
        "fit", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "res"), "--no-report", "-q"
    )
    assert code == 0, err
    fitted = ms.load_results(tmp_path / "res").opt_params["*_pos_delay"].value[0]
    assert fitted == pytest.approx(0.0047, abs=1e-9)


def test_residual_normalize_reaches_the_signal_transform(tmp_path):
    """``residual: {normalize: false}`` with signal parameters scales like the built-in
    residual (it was handed to build_residual_fn, which cannot use it with a transform)."""
    from mjsysid.app.experiment import load_experiment

    code, err, _ = _simulate(tmp_path, "rec.npz")
    assert code == 0, err
    (tmp_path / "arm.xml").write_text((bundled_examples()["arm"].parent / "arm.xml").read_text())
    residuals = {}
    for normalize, kinds in ((False, ["sensor_delay"]), (False, []), (True, ["sensor_delay"])):
        exp = {
            "name": "n",
            "model": "arm.xml",
            "sequences": [{"name": "s", "file": "rec.npz"}],
            "parameters": [{"kind": "joint_damping", "target": "elbow"}]
            + [{"kind": k, "target": "*_pos", "min": 0.0, "max": 0.002} for k in kinds],
            "residual": {"normalize": normalize},
        }
        (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
        e = load_experiment(tmp_path / "exp.yaml")
        x = np.array([0.3] + [0.0] * len(kinds))
        residuals[(normalize, bool(kinds))] = e.build_residual_fn()(x, e.params)
    plain = residuals[(False, False)]
    delayed = residuals[(False, True)]  # the delay window leaves out the first sample
    width = plain.size - delayed.size
    np.testing.assert_allclose(delayed, plain[width:], atol=1e-12)
    assert not np.allclose(residuals[(True, True)], delayed)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--duration", "-1"], "--duration must be a finite number of seconds > 0, got -1.0"),
        (["--duration", "nan"], "--duration must be a finite number of seconds > 0, got nan"),
        (
            ["--duration", "0.002"],
            "--duration must be at least 2 timesteps of the model (0.004 s at timestep 0.002 s), "
            "got 0.002",
        ),
        (["--noise", "-0.1"], "--noise must be a finite standard deviation >= 0, got -0.1"),
        (["--noise", "inf"], "--noise must be a finite standard deviation >= 0, got inf"),
        (["--amplitude", "0"], "--amplitude must be a finite number > 0, got 0.0"),
        (["--amplitude", "nan"], "--amplitude must be a finite number > 0, got nan"),
        (["--seed", "-3"], "--seed must be an integer >= 0, got -3"),
        (["--set", "joint_damping:elbow=nan"], "--set 'joint_damping:elbow=nan': VALUE must be"),
        (["--set", "joint_dampin:elbow=1"], "--set 'joint_dampin:elbow=1': KIND must be one of"),
        (
            ["--set", "body_inertia:link1=1"],
            "--set 'body_inertia:link1=1': VALUE must be 10 comma-separated numbers",
        ),
        (
            ["--set", "sensor_gain:nosuch=2"],
            "--set sensor_gain:nosuch: the pattern must match at least one sensor, got none",
        ),
        (
            ["--duration", "0.5", "--set", "sensor_delay:*_pos=0.6"],
            "--set sensor_delay:*_pos value must be a delay shorter than the recording (0.498 s)",
        ),
        (
            ["--set", "actuator_gear:shoulder_motor=1e6"],
            "error: the simulation of '{model}' with --set actuator_gear:shoulder_motor=1e6 "
            "diverged, nothing written: rollout 0 diverged at step",
        ),
        (
            ["--set", "joint_damping:shoulder=-50"],
            "--set 'joint_damping:shoulder=-50': VALUE must be >= 0 (a negative damping adds "
            "energy), got -50.0",
        ),
        (["--qpos", "1"], "--qpos: qpos must be an array of length 3"),
    ],
)
def test_simulate_checks_its_arguments(tmp_path, args, message):
    model_xml = bundled_examples()["arm"].parent / "arm.xml"
    code, _, err = run("simulate", str(model_xml), "--out", str(tmp_path / "r.npz"), *args)
    assert code == 1
    assert message.format(model=model_xml) in err
    assert "Traceback" not in err and not (tmp_path / "r.npz").exists()


def test_simulate_checks_output_and_model_paths(tmp_path):
    model_xml = bundled_examples()["arm"].parent / "arm.xml"
    code, _, err = run("simulate", str(model_xml), "--out", str(tmp_path / "r.txt"))
    assert code == 1
    assert f"--out must be a .npz or .csv file name, got {str(tmp_path / 'r.txt')!r}" in err
    code, _, err = run("simulate", str(tmp_path / "no.xml"), "--out", str(tmp_path / "r.npz"))
    assert code == 1 and err == f"error: model: no such file {str(tmp_path / 'no.xml')!r}\n"


# -- multiple shooting from the experiment file -----------------------------------------------


def test_fit_with_shooting_windows_recovers_the_truth(tmp_path):
    code, err, _ = _simulate(
        tmp_path, "rec.npz", "--duration", "0.8", "--set", "joint_damping:elbow=0.2"
    )
    assert code == 0, err
    (tmp_path / "arm.xml").write_text((bundled_examples()["arm"].parent / "arm.xml").read_text())
    exp = {
        "name": "windows",
        "model": "arm.xml",
        "sequences": [{"name": "s", "file": "rec.npz"}],
        "parameters": [{"kind": "joint_damping", "target": "elbow", "max": 1.0}],
        "shooting": {"window": 0.3, "overlap": 0.05},
        "optimizer": {"horizons": "none"},
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    loaded = load_experiment(tmp_path / "exp.yaml")
    # starts every 0.25 s: 0-0.3, 0.25-0.55, 0.5-0.8 and 0.75-0.798 s
    assert loaded.sequences.sequence_name == ["s#0", "s#1", "s#2", "s#3"]
    names = loaded.params.get_non_frozen_parameter_names()
    assert len(names) == 1 + 4 * 6 and "windows/s#3/wrist_qvel0" in names
    code, _, err = run(
        "fit", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "res"), "--no-report"
    )
    assert code == 0, err
    assert "multiple shooting: 4 windows of 0.3 s (overlap 0.05 s), initial states estimated" in err
    assert "Converged" in err
    res = ms.load_results(tmp_path / "res")
    assert list(res.result.parameter_names) == names
    assert res.opt_params["elbow_damping"].value[0] == pytest.approx(0.2, rel=1e-4)
    # the windows start from the simulated states, which the fit keeps
    with np.load(tmp_path / "rec.npz") as rec:
        assert res.opt_params["windows/s#0/shoulder_qpos0"].value[0] == pytest.approx(
            rec["initial_qpos"][0], abs=1e-6
        )


def test_shooting_without_windows_or_state_estimation(tmp_path):
    exp = load_experiment(_write_exp(tmp_path, shooting={}))
    assert exp.sequences.sequence_name == ["prbs", "multisine"]
    assert "arm/multisine/elbow_qpos0" in exp.params
    assert exp.shooting == {
        "window": None,
        "overlap": 0.0,
        "estimate_initial_state": True,
        "qpos_margin": 0.2,
        "qvel_margin": 2.0,
    }
    exp = load_experiment(
        _write_exp(tmp_path, shooting={"window": 1, "estimate_initial_state": False})
    )
    assert exp.sequences.sequence_name == ["prbs#0", "prbs#1", "multisine#0", "multisine#1"]
    assert not any("_qpos0" in n for n in exp.params)
    exp = load_experiment(_write_exp(tmp_path, shooting={"qpos_margin": 0.1, "qvel_margin": 1}))
    p = exp.params["arm/prbs/elbow_qpos0"]
    assert p.max_value[0] - p.min_value[0] == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("shooting", "match"),
    [
        ({"window": 0}, r"shooting.window must be a finite number > 0, got float 0.0"),
        ({"window": -1.0}, r"shooting.window must be a finite number > 0, got float -1.0"),
        ({"window": float("inf")}, r"shooting.window must be a finite number > 0, got float inf"),
        ({"window": "1s"}, r"shooting.window must be a number, got str '1s'"),
        ({"window": True}, r"shooting.window must be a number, got bool True"),
        (
            {"overlap": 0.1},
            r"shooting.overlap needs shooting.window \(the window length in seconds\), got "
            r"overlap 0.1 without a window",
        ),
        (
            {"window": 0.5, "overlap": 0.5},
            r"shooting.overlap must be a number of seconds in \[0, window=0.5\), got float 0.5",
        ),
        (
            {"window": 0.5, "overlap": -0.1},
            r"shooting.overlap must be a number of seconds in \[0, window=0.5\), got float -0.1",
        ),
        (
            {"estimate_initial_state": "yes"},
            r"shooting.estimate_initial_state must be bool, got str 'yes'",
        ),
        ({"qvel_margin": 0}, r"shooting.qvel_margin must be a finite number > 0, got float 0.0"),
        ({"windows": 1.0}, r"shooting has unknown keys \['windows'\]; allowed: "),
        (1.0, r"shooting must be a mapping, got float 1.0"),
    ],
)
def test_bad_shooting_options(tmp_path, shooting, match):
    with pytest.raises(ExperimentError, match=match):
        load_experiment(_write_exp(tmp_path, shooting=shooting))


def test_shooting_windows_need_joint_state_measurements(tmp_path):
    base = bundled_examples()["box"].parent
    exp = yaml.safe_load((base / "experiment.yaml").read_text())
    exp["model"] = str(base / "box.xml")
    exp["sequences"][0]["file"] = str(base / "push.csv")
    exp["shooting"] = {"window": 0.5}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    with pytest.raises(ExperimentError, match=r"exp\.yaml: shooting\.window: .*'push'"):
        load_experiment(tmp_path / "exp.yaml")


def test_command_deadband_and_gain_simulated_then_fitted(tmp_path):
    """``simulate --set control_*`` passes the commands through a deadband and a reverse
    gain (the recording keeps the commanded values); an experiment with control_* kinds, one
    parameter per side, fits them back."""
    # a multisine: commands of many sizes (PRBS's two levels could not tell a band from a gain)
    code, err, cols = _simulate(
        tmp_path,
        "rec.npz",
        "--signal", "multisine",
        "--set", "control_deadband:shoulder_motor=0.3,0.2",
        "--set", "control_gain:shoulder_motor=1.0,0.7",
    )  # fmt: skip
    assert code == 0, err
    plain = _simulate(tmp_path, "plain.npz", "--signal", "multisine")[2]
    np.testing.assert_array_equal(cols["ctrl.shoulder_motor"], plain["ctrl.shoulder_motor"])
    assert not np.allclose(cols["shoulder_pos"], plain["shoulder_pos"])
    (tmp_path / "arm.xml").write_text((bundled_examples()["arm"].parent / "arm.xml").read_text())
    side = [{"direction": "positive"}, {"direction": "negative"}]
    exp = {
        "name": "cmd",
        "model": "arm.xml",
        "sequences": [{"name": "s", "file": "rec.npz"}],
        "parameters": [
            {"kind": "control_deadband", "target": "shoulder_motor", "max": 1.0, **d} for d in side
        ]
        + [{"kind": "control_gain", "target": "shoulder_motor", **d} for d in side],
        "optimizer": {"horizons": "none"},
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    code, _, err = run(
        "fit", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "res"), "--no-report", "-q"
    )
    assert code == 0, err
    fitted = ms.load_results(tmp_path / "res").opt_params
    got = [fitted[n].value[0] for n in fitted]
    assert list(fitted) == [
        "shoulder_motor_deadband_pos",
        "shoulder_motor_deadband_neg",
        "shoulder_motor_gain_pos",
        "shoulder_motor_gain_neg",
    ]
    np.testing.assert_allclose(got, [0.3, 0.2, 1.0, 0.7], atol=1e-6)
    # what a controller needs to apply them is saved with the values
    assert [(fitted[n].meta["direction"], fitted[n].meta["order"]) for n in fitted] == [
        ("positive", 0),
        ("negative", 1),
        ("positive", 2),
        ("negative", 3),
    ]
    exp["parameters"] = [{"kind": "control_offset", "target": "elbow_motor", "direction": "up"}]
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    code, _, err = run("fit", str(tmp_path / "exp.yaml"), "--no-report", "-q")
    assert code != 0 and "parameters[0].direction must be absent: an offset has no direction" in err
    code, err, _ = _simulate(tmp_path, "bad.npz", "--set", "control_offset:nothing=0.1")
    assert code != 0 and "the pattern must match at least one actuator" in err


def test_shooting_warns_when_sensor_parameters_correct_the_window_starts(tmp_path):
    """Window starts come from the raw measurements: a gain on a joint sensor biases them,
    which the experiment says (found by an audit: a 30 % gain came out 1.19 instead of 1.3)."""
    from mjsysid.app.experiment import load_experiment

    base = yaml.safe_load((bundled_examples()["arm"].parent / "experiment.yaml").read_text())
    params = [*base["parameters"], {"kind": "sensor_gain", "target": "shoulder_pos"}]
    path = _write_exp(tmp_path, parameters=params, shooting={"window": 0.5})
    (warning,) = [w for w in load_experiment(path).warnings if "shooting" in w]
    assert "window starts are read from the raw measurements of ['shoulder_pos']" in warning
    path = _write_exp(tmp_path, parameters=params)  # no windows: nothing to say
    assert not [w for w in load_experiment(path).warnings if "shooting" in w]
