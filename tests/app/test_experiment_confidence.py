"""Experiment-file keys for the intervals: shooting.estimate_activation and confidence:."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment


def _dcmotor(tmp_path: Path, shooting: str, extra: str = "") -> Path:
    src = bundled_examples()["dcmotor"].parent
    for f in ("dcmotor.xml", "run1.csv"):
        shutil.copy(src / f, tmp_path / f)
    text = (src / "experiment.yaml").read_text()
    assert "shooting: {window: 2.0}" in text
    text = text.replace("shooting: {window: 2.0}", f"shooting: {shooting}\n{extra}")
    path = tmp_path / "experiment.yaml"
    path.write_text(text)
    return path


def test_the_window_start_activations_can_be_left_out(tmp_path):
    on = load_experiment(_dcmotor(tmp_path, "{window: 2.0}"))
    assert any(n.endswith("/motor_act0") for n in on.params)
    off = load_experiment(_dcmotor(tmp_path, "{window: 2.0, estimate_activation: false}"))
    assert not any(n.endswith("/motor_act0") for n in off.params)
    assert any(n.endswith("/shaft_qvel0") for n in off.params)
    assert off.confidence == {}


def test_the_confidence_key_gives_compute_confidence_keywords(tmp_path):
    exp = load_experiment(
        _dcmotor(tmp_path, "{window: 2.0}", "confidence: {method: bootstrap, draws: 50, seed: 3}")
    )
    assert exp.confidence == {"method": "bootstrap", "draws": 50, "seed": 3}


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (
            "confidence: {method: jackknife}",
            r"confidence\.method must be auto, linear, hac or bootstrap, got str 'jackknife'",
        ),
        ("confidence: {draws: 1}", r"confidence\.draws must be an integer >= 2, got int 1"),
        ("confidence: {draws: 1.5}", r"confidence\.draws must be an integer >= 2, got float"),
        ("confidence: {method: bootstrap, drafts: 5}", r"confidence has unknown keys \['drafts'\]"),
    ],
)
def test_bad_confidence_keys(tmp_path, extra, match):
    with pytest.raises(ExperimentError, match=match):
        load_experiment(_dcmotor(tmp_path, "{window: 2.0}", extra))


def test_estimate_activation_must_be_a_bool(tmp_path):
    with pytest.raises(
        ExperimentError, match=r"shooting\.estimate_activation must be bool, got str 'no'"
    ):
        load_experiment(_dcmotor(tmp_path, "{window: 2.0, estimate_activation: 'no'}"))


def test_a_windowed_fit_gets_bootstrap_intervals_from_its_experiment_file(tmp_path):
    from mjsysid.fit.confidence import compute_confidence
    from mjsysid.fit.optimize import optimize

    exp = load_experiment(
        _dcmotor(tmp_path, "{window: 2.0}", "confidence: {method: bootstrap, draws: 20}")
    )
    rf = exp.build_residual_fn()
    opt, res = optimize(exp.params, rf, max_iters=30)
    conf = compute_confidence(res, rf, params=opt, **exp.confidence)
    assert conf.method == "bootstrap"
    assert conf.notes[-1] == (
        "bootstrap: 20 draws over 10 blocks (sequences or windows) resampled with replacement; "
        "percentile intervals; 30 parameter(s) seen by one block only (window starts) keep "
        "their linearised intervals"
    )
    physics = [i for i, n in enumerate(conf.names) if "#" not in n]
    lo, hi = conf.ends()[physics].T
    assert len(physics) == 5 and (lo < conf.values[physics]).all()
    assert (conf.values[physics] < hi).all()
