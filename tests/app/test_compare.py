"""Held-out sequences in an experiment file, validation.yaml, and ``mjsysid compare``."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _arm(folder: Path, edit=None) -> Path:
    """example:arm copied into ``folder`` with the multisine sequence held out."""
    folder.mkdir(parents=True)
    for f in bundled_examples()["arm"].parent.iterdir():
        if f.is_file():
            shutil.copy(f, folder / f.name)
    exp = yaml.safe_load((folder / "experiment.yaml").read_text())
    exp["sequences"][1]["holdout"] = True
    exp["optimizer"]["max_iters"] = 20
    if edit is not None:
        edit(exp)
    path = folder / "experiment.yaml"
    path.write_text(yaml.safe_dump(exp, sort_keys=False))
    return path


def _wrong(exp):  # link2's mass frozen at a wrong value
    exp["parameters"][1].update(nominal=0.5, frozen=True)


@pytest.fixture(scope="module")
def fits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str, str]]:
    """Two fits on the prbs sequence: the true structure and one with a wrong frozen mass."""
    root = tmp_path_factory.mktemp("holdout")
    out = {}
    for label, edit in (("true", None), ("wrong", _wrong)):
        path = _arm(root / f"{label}_exp", edit)
        code, stdout, stderr = run("fit", str(path), "--out", str(root / label), "--no-report")
        assert code == 0, stderr
        out[label] = (root / label, stdout, stderr)
    return out


def test_a_holdout_sequence_is_not_fitted(tmp_path):
    exp = load_experiment(_arm(tmp_path / "e"))
    assert exp.sequences.sequence_name == ["prbs"]
    assert exp.holdout is not None and exp.holdout.sequence_name == ["multisine"]
    rf = exp.build_residual_fn()
    assert [p.sequence_name for p in rf.predict(None, exp.params)] == ["prbs"]
    rf.close()


def test_every_sequence_held_out_and_a_bad_value_are_errors(tmp_path):
    def all_held(exp):
        exp["sequences"][0]["holdout"] = True

    with pytest.raises(ExperimentError, match="at least one sequence to fit"):
        load_experiment(_arm(tmp_path / "a", all_held))

    def text(exp):
        exp["sequences"][1]["holdout"] = "yes"

    with pytest.raises(ExperimentError, match=r"sequences\[1\]\.holdout must be true or false"):
        load_experiment(_arm(tmp_path / "b", text))


def test_validation_yaml_has_both_models_on_fitted_and_held_out_data(fits):
    folder, stdout, _ = fits["true"]
    data = yaml.safe_load((folder / "validation.yaml").read_text())
    assert [r["sequence"] for r in data["fitted"]] == ["prbs"] * 6
    assert [r["sequence"] for r in data["held_out"]] == ["multisine"] * 6
    for r in data["held_out"]:
        assert r["fit_identified"] > 98.0 > r["fit_start"]
        assert r["rms_identified"] < r["rms_start"]
    assert "held-out sequences:" in stdout and "multisine" in stdout


def test_compare_names_the_true_structure(fits, tmp_path):
    target = tmp_path / "cmp.json"
    code, stdout, _ = run(
        "compare", str(fits["wrong"][0]), str(fits["true"][0]), "--out", str(target)
    )
    assert code == 0
    assert "'true' is better than 'wrong'" in stdout, stdout
    data = json.loads(target.read_text())
    assert data["data"] == ["multisine"]
    by = {m["label"]: m for m in data["models"]}
    assert [h["horizon"] for h in by["true"]["horizons"]] == [0.1, 0.5, 2.0]
    for true, wrong in zip(by["true"]["horizons"], by["wrong"]["horizons"], strict=True):
        assert true["bic"] < wrong["bic"] and true["mean"] < wrong["mean"]
        assert 1 <= true["n_eff"] <= true["n"]
    assert [by["true"]["k"], by["wrong"]["k"]] == [5, 4]
    assert data["verdicts"][0]["better"] == "true"
    # the same comparison as a page
    pytest.importorskip("plotly")
    page = tmp_path / "cmp.html"
    code, _, err = run("compare", str(fits["wrong"][0]), str(fits["true"][0]), "--html", str(page))
    assert code == 0 and f"page: {page}" in err
    text = page.read_text()
    assert "<title>Comparison: wrong, true</title>" in text
    assert "On the held-out sequence(s) multisine." in text
    assert "<li>&#x27;true&#x27; is better than &#x27;wrong&#x27;" in text


def test_compare_on_other_data_and_its_errors(fits, tmp_path):
    true, wrong = str(fits["true"][0]), str(fits["wrong"][0])
    data = _arm(tmp_path / "d")
    code, stdout, _ = run(
        "compare", true, wrong, "--data", str(data), "--out", str(tmp_path / "c.yaml")
    )
    assert code == 0 and "'true' is better than 'wrong'" in stdout
    assert yaml.safe_load((tmp_path / "c.yaml").read_text())["data"] == ["multisine"]
    code, _, err = run("compare", true)
    assert code == 1 and "compare needs two or more results folders, got 1" in err
    code, _, err = run("compare", true, wrong, "--out", str(tmp_path / "c.txt"))
    assert code == 1 and "--out must be a .json or .yaml file" in err
    code, _, err = run("compare", true, str(tmp_path))
    assert code == 1 and "run.yaml" in err


def test_held_out_sequences_are_simulated_whole_beside_shooting_windows(tmp_path):
    def windows(exp):
        exp["shooting"] = {"window": 1.0}
        exp["optimizer"]["max_iters"] = 5

    path = _arm(tmp_path / "e", windows)
    exp = load_experiment(path)
    assert exp.holdout is not None and exp.holdout.sequence_name == ["multisine"]
    code, _, err = run("fit", str(path), "--out", str(tmp_path / "r"), "-q", "--no-report")
    assert code == 0, err
    data = yaml.safe_load((tmp_path / "r" / "validation.yaml").read_text())
    assert {r["sequence"] for r in data["fitted"]} == {"prbs#0", "prbs#1"}
    assert [r["sequence"] for r in data["held_out"]] == ["multisine"] * 6


def test_compare_has_help(capsys):
    for argv in (["--help"], ["compare", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
    assert "--data EXPERIMENT" in capsys.readouterr().out


def test_the_report_has_the_validation_section(fits):
    pytest.importorskip("jinja2", reason="the report needs the report extra (jinja2)")
    pytest.importorskip("plotly", reason="the report needs the report extra (plotly)")
    folder = fits["true"][0]
    code, _, err = run("report", str(folder))
    assert code == 0, err
    html = (folder / "report.html").read_text()
    assert 'id="validation"' in html and "held out: arm/multisine" in html
    assert '"v0c0"' in html  # the overlay of the held-out sequence's first column


def test_a_folder_without_its_run_file_is_named_by_each_command(tmp_path):
    """``report`` and ``compare`` read a results folder's run file through one helper, each
    saying what it needs."""
    from mjsysid.app.commands.common import RUN_FILE, read_run_info

    with pytest.raises(FileNotFoundError, match="needs a folder written by 'mjsysid fit'"):
        read_run_info(tmp_path, "report")
    with pytest.raises(FileNotFoundError, match=r"'mjsysid compare' needs folders written"):
        read_run_info(tmp_path, "compare", "folders")
    (tmp_path / RUN_FILE).write_text("experiment: e.yaml\n")
    assert read_run_info(tmp_path, "report") == {"experiment": "e.yaml"}
