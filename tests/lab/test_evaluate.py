"""Three-axis evaluation: one-step and open-loop errors against synthetic truths, the JSON
file, the table's flag, a downstream task and ``mjsysid evaluate``."""

from __future__ import annotations

import html
import io
import json
import shutil
from importlib import resources
from pathlib import Path

import mujoco
import numpy as np
import pytest

from mjsysid.app.cli import main
from mjsysid.data.excitation import multisine
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import create_initial_state
from mjsysid.data.timeseries import TimeSeries
from mjsysid.lab.evaluate import (
    DownstreamResult,
    StateRecording,
    evaluate_models,
    first_bad_step,
    horizon_errors,
    horizon_grid,
    normalised_error,
    planner_task,
    recordings_from_sequences,
    rms_over_starts,
)
from mjsysid.lab.evaluate_report import (
    compounding_models,
    format_table,
    report_dict,
    write_html,
    write_json,
)
from mjsysid.lab.planning import cartpole_model, cartpole_starts, evaluate_planner
from mjsysid.sim.rollout import sysid_rollout

SLIDER = """
<mujoco>
  <option timestep="0.01" gravity="0 0 0"/>
  <worldbody>
    <body name="block">
      <joint name="x" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.1 0.1 0.1" mass="{mass}"/>
    </body>
  </worldbody>
  <actuator><motor name="push" joint="x"/></actuator>
  <sensor><jointpos name="x_pos" joint="x"/><jointvel name="x_vel" joint="x"/></sensor>
</mujoco>
"""


def slider(mass: float) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(SLIDER.format(mass=mass))


def truth_recording(
    model: mujoco.MjModel, control: np.ndarray, x0: np.ndarray, name: str = "truth"
) -> StateRecording:
    """A noise-free recording of ``model``: its simulated states."""
    (traj,) = sysid_rollout(model, None, control, x0)
    states = np.hstack([traj.qpos(), traj.qvel()])
    return StateRecording.from_states(name, traj.times, states, control, model.opt.timestep)


@pytest.fixture(scope="module")
def slider_report():
    """A block pushed by a constant force: a 20 % heavier model is wrong by the same amount
    from every start, growing as t² in position and t in velocity."""
    truth, wrong = slider(1.0), slider(1.2)
    control = np.full((400, 1), 0.5)
    recording = truth_recording(truth, control, create_initial_state(truth))
    return evaluate_models({"wrong": wrong, "true": truth}, [recording], starts=10)


@pytest.fixture(scope="module")
def cartpole_sequences() -> ModelSequences:
    """The real (0.8 kg) cart-pole under a multisine, noise-free sensors."""
    real = cartpole_model(0.8)
    n, dt = 300, real.opt.timestep
    ctrl = multisine(n, 1, dt, amplitude=3.0, f0=0.5, f1=3.0, seed=3)
    x0 = create_initial_state(real, qpos=[0.0, np.pi - 0.3])
    (traj,) = sysid_rollout(real, None, ctrl, x0)
    sens = TimeSeries.from_names(traj.times, traj.sensordata, real)
    control = TimeSeries.from_control_names(traj.times, ctrl, real)
    spec = mujoco.MjSpec.from_string(
        (resources.files("mjsysid") / "examples" / "cartpole" / "cartpole.xml").read_text()
    )
    return ModelSequences("cartpole", spec, "run", x0, control, sens)


def test_the_true_model_predicts_noise_free_data_exactly(slider_report, cartpole_sequences):
    true = slider_report.model("true")
    assert true.one_step_error < 1e-9
    assert np.all(true.open_loop.normalised < 1e-9)
    report = evaluate_models({"true": cartpole_model(0.8)}, cartpole_sequences, starts=8)
    assert report.models[0].one_step_error < 1e-8
    assert np.all(report.models[0].open_loop.normalised < 1e-8)


def test_a_wrong_mass_has_larger_errors_on_both_axes(cartpole_sequences):
    models = {"wrong": cartpole_model(0.2), "true": cartpole_model(0.8)}
    report = evaluate_models(models, cartpole_sequences, starts=8, horizons=(0.1, 0.5, 1.0))
    wrong, true = report.model("wrong"), report.model("true")
    assert wrong.one_step_error > 1e3 * max(true.one_step_error, 1e-15)
    assert np.all(wrong.open_loop.normalised > 1e3 * np.maximum(true.open_loop.normalised, 1e-15))
    np.testing.assert_allclose(wrong.open_loop.horizons, [0.1, 0.5, 1.0, 2.99])
    assert report.components == ("slider_qpos", "hinge_qpos", "slider_qvel", "hinge_qvel")


def test_open_loop_error_grows_with_horizon_where_it_must(slider_report):
    wrong = slider_report.model("wrong")
    horizons = wrong.open_loop.horizons
    np.testing.assert_allclose(horizons, [0.1, 0.2, 0.5, 1.0, 2.0, 3.99])
    assert np.all(np.diff(wrong.open_loop.normalised) > 0)
    assert np.all(np.diff(wrong.open_loop.rms, axis=0) > 0)  # position and velocity
    # the velocity error is (a_true - a_wrong) * h: 0.5 N / 1 kg vs 0.5 N / 1.2 kg
    dv = 0.5 * (1 / 1.0 - 1 / 1.2) * horizons
    np.testing.assert_allclose(wrong.open_loop.rms[:, 1], dv, rtol=1e-6)
    # the starts with a sample a horizon later: fewer as it grows, one for the whole recording
    assert np.all(np.diff(wrong.open_loop.starts) <= 0)
    assert wrong.open_loop.starts[0] == 9 and wrong.open_loop.starts[-1] == 1
    assert wrong.one_step.starts[0] == 399


def test_small_one_step_large_open_loop_is_flagged(slider_report):
    wrong = slider_report.model("wrong")
    assert wrong.one_step_error < 2e-3 < 0.1 < wrong.open_loop.normalised[-1]
    assert [m.name for m in compounding_models(slider_report)] == ["wrong"]
    table = format_table(slider_report)
    assert "<- compounds" in table.splitlines()[2]  # the 'wrong' row
    assert "note: 'wrong': one-step error" in table
    assert "'true'" not in table.split("note:", 1)[1]


def test_the_json_file(slider_report, tmp_path: Path):
    path = write_json(slider_report, tmp_path / "evaluation.json")
    content = json.loads(path.read_text())
    assert content == report_dict(slider_report)
    assert content["kind"] == "mjsysid.evaluation" and content["recordings"] == ["truth"]
    assert content["components"] == ["x_qpos", "x_qvel"]
    wrong, true = content["models"]
    assert (wrong["name"], true["name"]) == ("wrong", "true")
    assert wrong["compounds"] is True and true["compounds"] is False
    assert wrong["open_loop"]["horizons_s"] == pytest.approx([0.1, 0.2, 0.5, 1.0, 2.0, 3.99])
    assert len(wrong["open_loop"]["rms"]["x_qvel"]) == 6
    assert wrong["one_step"]["horizons_s"] == pytest.approx([0.01])
    assert wrong["downstream"] is None


def test_the_html_page(slider_report, tmp_path: Path):
    pytest.importorskip("plotly")
    page = write_html(slider_report, tmp_path / "evaluation.html").read_text()
    assert "Plotly.newPlot" in page and "wrong: open loop" in page and "&lt;- compounds" in page


def test_a_downstream_task_runs_with_every_model(slider_report):
    truth = slider(1.0)
    seen: list[float] = []

    def task(model: mujoco.MjModel) -> DownstreamResult:
        seen.append(float(model.body("block").mass[0]))
        return DownstreamResult(int(model.body("block").mass[0] == 1.0), 1)

    recording = truth_recording(truth, np.full((50, 1), 0.5), create_initial_state(truth))
    report = evaluate_models({"wrong": slider(1.2), "true": truth}, [recording], downstream=task)
    assert seen == [1.2, 1.0]
    assert [m.downstream for m in report.models] == [DownstreamResult(0, 1), DownstreamResult(1, 1)]
    assert "0/1" in format_table(report) and report_dict(report)["models"][1]["downstream"] == {
        "successes": 1,
        "trials": 1,
        "rate": 1.0,
    }


def test_the_planner_task_runs_the_planners_episodes():
    real, starts = cartpole_model(0.8), cartpole_starts(1)
    lines: list[str] = []
    task = planner_task(real, starts, duration=2.0, progress=lines.append, nthread=2)
    result = task(real)
    reference = evaluate_planner(real, real, starts, duration=2.0, nthread=2)
    assert result == DownstreamResult(reference.successes, 1)
    assert len(lines) == 1 and "episode 1/1" in lines[0]


def test_pure_pieces():
    times = np.array([[0.1, 0.2, 0.0], [0.1, 0.2, 0.3]])
    np.testing.assert_array_equal(first_bad_step(times, np.zeros(2), 0.1), [3, 4])
    rec = StateRecording("r", 0.0, 0.1, np.zeros((4, 1)), np.arange(4), np.arange(4.0)[:, None])
    predicted = np.array([[[1.0], [2.0], [3.0]], [[2.5], [3.5], [4.5]]])
    err = horizon_errors(predicted, np.array([4, 2]), np.array([0, 1]), np.array([1, 3]), rec)
    assert err[0, 0, 0] == 0.0 and err[0, 1, 0] == 0.0  # start 0 predicts exactly
    assert err[1, 0, 0] == 0.5 and np.isnan(err[1, 1, 0])  # no sample at step 4
    err2 = horizon_errors(predicted, np.array([1, 4]), np.array([0, 0]), np.array([1, 2]), rec)
    assert np.isinf(err2[0, 0, 0]) and np.isinf(err2[0, 1, 0]) and err2[1, 1, 0] == 1.5
    rms, count = rms_over_starts(err)
    np.testing.assert_allclose(rms[:, 0], [np.sqrt(0.125), 0.0])
    np.testing.assert_array_equal(count, [2, 1])
    assert normalised_error(np.array([3.0, 4.0]), np.array([1.0, 2.0])) == pytest.approx(
        np.sqrt(6.5)
    )
    np.testing.assert_array_equal(horizon_grid([0.1, 0.25, 1.0], [rec]), [1, 2, 3])


def test_recordings_and_models_must_match(cartpole_sequences):
    recs = recordings_from_sequences(cartpole_sequences)
    assert recs[0].states.shape == (300, 4) and recs[0].control.shape == (300, 1)
    with pytest.raises(ValueError, match=r"timestep must be the recordings' 0\.01 s"):
        model = cartpole_model()
        model.opt.timestep = 0.005
        evaluate_models({"fine": model}, recs)
    with pytest.raises(ValueError, match="of the recordings' sizes"):
        evaluate_models({"slider": slider(1.0)}, recs)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_command_on_the_cartpole_example(tmp_path: Path):
    folder = tmp_path / "fit"
    folder.mkdir()
    bundled = resources.files("mjsysid") / "examples" / "cartpole" / "cartpole.xml"
    (folder / "cartpole.xml").write_text(bundled.read_text())
    out_json = tmp_path / "evaluation.json"
    code, out, err = run(
        "evaluate",
        "example:cartpole",
        "nominal",
        str(folder),
        "--out",
        str(out_json),
        "--starts",
        "5",
        "--horizons",
        "0.1,1",
    )
    assert code == 0, err
    assert "evaluating 'nominal'" in err and "evaluating 'fit'" in err
    prediction, table = out.split("\n\n", 1)  # the multi-step prediction, then the table
    rows = prediction.splitlines()
    assert rows[1].split()[:4] == ["model", "k", "state", "horizon"]
    assert [r.split()[0] for r in rows[2:6]] == ["nominal"] * 2 + ["fit"] * 2
    assert "no clear difference between 'nominal' and 'fit'" in rows[6]  # the same model
    lines = table.splitlines()
    assert lines[1].split()[:5] == ["model", "one-step", "0.1", "s", "1"]
    assert lines[2].startswith("nominal") and lines[3].startswith("fit")
    content = json.loads(out_json.read_text())
    assert [m["name"] for m in content["models"]] == ["nominal", "fit"]
    # the same file: the same numbers
    assert content["models"][0]["open_loop"] == content["models"][1]["open_loop"]


def test_the_command_writes_the_page_and_stays_quiet(tmp_path: Path):
    pytest.importorskip("plotly")
    page = tmp_path / "evaluation.html"
    code, out, err = run("evaluate", "example:arm", "nominal", "--html", str(page), "-q")
    assert code == 0, err
    assert "evaluating" not in err and f"page: {page}" in err
    assert out.split("\n\n", 1)[1].splitlines()[2].startswith("nominal")
    assert "Plotly.newPlot" in page.read_text()


def test_the_command_names_bad_models(tmp_path: Path):
    code, _, err = run("evaluate", "example:cartpole", str(tmp_path), "-q")
    assert code == 1 and "must hold the identified 'cartpole.xml'" in err
    code, _, err = run("evaluate", "example:cartpole", "nominal", "nominal", "-q")
    assert code == 1 and "two models are labelled 'nominal'" in err
    code, _, err = run("evaluate", "example:cartpole", "nominal", "--horizons", "0,x", "-q")
    assert code == 1 and "--horizons must be" in err
    shutil.rmtree(tmp_path)


def test_the_page_of_models_with_force_laws_holds_the_multi_step_prediction(tmp_path: Path):
    """example:servo's models have force laws: no state-space table, but the page is written
    with the prediction's table, verdict and curves (it used to be left out with a note)."""
    pytest.importorskip("plotly")
    page = tmp_path / "evaluation.html"
    code, out, err = run(
        "evaluate", "example:servo", "nominal", "again=nominal", "--html", str(page), "-q"
    )
    assert code == 0, err
    assert f"page: {page}" in err and "state-space table" in out
    text = page.read_text()
    assert "<h2>Multi-step prediction</h2>" in text and "One step, open loop" not in text
    assert "On the held-out sequences: up_and_down." in text
    assert 'Plotly.newPlot("prediction"' in text and '"name": "again"' in text
    verdict = out.strip().splitlines()[-2]  # (the last line is the state-space note)
    assert verdict.startswith("no clear difference between 'nominal' and 'again'")
    assert f"<li>{html.escape(verdict)}</li>" in text


def test_the_page_needs_something_to_draw(tmp_path: Path):
    with pytest.raises(ValueError, match="needs a state-space report or prediction scores"):
        write_html(None, tmp_path / "empty.html")
