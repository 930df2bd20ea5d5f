"""``export: {urdf: FILE}``: the URDF an MJCF was made from gets its identified copy."""

from __future__ import annotations

import io
import shutil
import xml.etree.ElementTree as ET

import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment


@pytest.fixture
def furuta(tmp_path):
    """A copy of example:furuta's folder (its experiment file declares the URDF)."""
    folder = tmp_path / "furuta"
    shutil.copytree(bundled_examples()["furuta"].parent, folder)
    return folder


def _with_export(folder, export: str) -> str:
    path = folder / "experiment.yaml"
    text = path.read_text().replace("export: {urdf: rotary_cartpole.urdf}", export)
    path.write_text(text)
    return str(path)


def test_the_urdf_is_an_input_of_the_experiment(furuta):
    exp = load_experiment(furuta / "experiment.yaml")
    assert exp.export_urdf == furuta / "rotary_cartpole.urdf"
    assert str(exp.export_urdf.resolve()) in exp.fingerprints()


@pytest.mark.parametrize(
    ("export", "error", "match"),
    [
        ("export: {urdf: furuta.xml}", ExperimentError, r"export\.urdf must be a \.urdf file"),
        ("export: {urdf: gone.urdf}", FileNotFoundError, r"export\.urdf: no such file"),
        (
            "export: {urdff: a.urdf}",
            ExperimentError,
            r"export has unknown keys \['urdff'\]; allowed: \['assets', 'urdf'\]; did you mean",
        ),
        ("export: {assets: copied}", ExperimentError, r"export\.assets must be"),
        ("export: rotary.urdf", ExperimentError, r"export must be a mapping, got str"),
    ],
)
def test_bad_export_keys_are_named(furuta, export, error, match):
    with pytest.raises(error, match=match):
        load_experiment(_with_export(furuta, export))


def test_a_urdf_of_another_robot_is_refused(furuta):
    urdf = furuta / "rotary_cartpole.urdf"
    urdf.write_text(urdf.read_text().replace('"pendulum_joint"', '"elbow"'))
    with pytest.raises(ExperimentError, match=r"got joints \['elbow'\] the model lacks"):
        load_experiment(furuta / "experiment.yaml")


def test_the_fit_writes_the_identified_urdf(furuta, tmp_path):
    out = tmp_path / "results"
    argv = ["fit", str(furuta / "experiment.yaml"), "--out", str(out), "--max-iters", "2"]
    code = main([*argv, "-q", "--no-report"], stdout=io.StringIO(), stderr=io.StringIO())
    assert code in (0, 1)
    joint = ET.parse(out / "furuta.urdf").find("joint[@name='pendulum_joint']/dynamics")
    assert joint is not None
    saved = yaml.safe_load((out / "params_x_hat.yaml").read_text())["parameters"]
    damping = next(p["value"][0] for p in saved if p["name"] == "pendulum_joint_damping")
    assert float(joint.get("damping")) == pytest.approx(damping, rel=1e-12)
    assert damping != pytest.approx(1e-4, rel=1e-3)  # moved from the source's value
