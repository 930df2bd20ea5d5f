"""The bundled Furuta pendulum examples: force-law motor model, held-out run, model selection."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.app.experiment import bundled_examples, load_experiment
from mjsysid.fit.validation import model_parameters, signal_scores
from mjsysid.params.parameter import ParameterDict

# The held-out RMS errors (rad) of the true system on check.csv, as README.md reports them:
# what the disturbance and the encoders leave (make_recording.py).
TRUE_HELD_OUT_RMS = {"motor_angle": 0.009610, "pendulum_angle": 0.010487}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def held_out_rms(example: str, params: ParameterDict) -> dict[str, float]:
    """RMS error by signal of ``params`` (identified or true) on the example's held-out run."""
    exp = load_experiment(bundled_examples()[example])
    rf = exp.build_holdout_residual_fn()
    assert rf is not None
    try:
        return {sig: rms for _, _, sig, _, rms in signal_scores(rf.predict(None, params))}
    finally:
        rf.close()


def true_params() -> ParameterDict:
    """example:furuta's parameters at the true values of make_recording.py (truth.yaml)."""
    path = bundled_examples()["furuta"]
    params = model_parameters(load_experiment(path).params)
    truth = yaml.safe_load((path.parent / "truth.yaml").read_text())
    assert set(truth) == set(params.keys())
    for name, value in truth.items():
        params[name].value = np.asarray(value, dtype=float)
    return params


def test_furuta_examples_listed_and_share_the_recordings():
    code, out, _ = run("examples")
    assert code == 0
    assert "example:furuta" in out and "example:furuta-symmetric" in out
    rich = load_experiment(bundled_examples()["furuta"])
    simple = load_experiment(bundled_examples()["furuta-symmetric"])
    same = [f.resolve() for f in rich.files[1:-1]] == [f.resolve() for f in simple.files[1:]]
    assert same  # the same model file and CSVs, not copies
    assert rich.export_urdf is not None and rich.files[-1] == rich.export_urdf
    assert rich.holdout is not None and list(rich.holdout.sequence_name) == ["check"]
    assert list(rich.sequences.sequence_name[:1]) == ["run1#0"]  # 1 s shooting windows
    laws = {p.meta["kind"] for p in rich.params.values() if "law" in p.meta}
    assert laws == {"law:command_torque", "law:coulomb", "law:viscous"}


def test_furuta_true_parameters_give_the_reported_held_out_error():
    rms = held_out_rms("furuta", true_params())
    assert rms == pytest.approx(TRUE_HELD_OUT_RMS, rel=1e-3)


@pytest.mark.slow
def test_furuta_fit_and_model_selection(tmp_path):
    """Both fits end to end (about 15 s each alone), then ``compare`` on the held-out run."""
    a, b = tmp_path / "A", tmp_path / "B"
    for example, folder in (("furuta", a), ("furuta-symmetric", b)):
        code, _, err = run("fit", f"example:{example}", "--out", str(folder), "--no-report")
        assert code == 0, err
        if example == "furuta":
            assert "Converged" in err
    assert (a / "robot.yaml").is_file() and (a / "furuta.xml").is_file()
    identified = model_parameters(ParameterDict.load_from_disk(a / "params_x_hat.yaml"))
    rms = held_out_rms("furuta", identified)
    for signal, true_rms in TRUE_HELD_OUT_RMS.items():
        assert rms[signal] <= 1.2 * true_rms, signal
    validation = yaml.safe_load((a / "validation.yaml").read_text())
    reported = {r["signal"]: r["rms_identified"] for r in validation["held_out"]}
    assert reported == pytest.approx(rms, rel=1e-6)

    code, out, err = run("compare", str(a), str(b), "--out", str(tmp_path / "cmp.json"))
    assert code == 0, err
    assert "on 1 held-out sequence(s): check" in out
    assert "'A' is better than 'B': " in out  # the per-direction model wins beyond its scatter
    (verdict,) = json.loads((tmp_path / "cmp.json").read_text())["verdicts"]
    assert (verdict["a"], verdict["b"], verdict["better"]) == ("A", "B", "A")
