"""``force_laws:`` in experiment files: the laws' parameters join the fit's, the laws go to
the residual, and mistakes name their entry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment
from mjsysid.sim.laws.friction import CoulombFriction


def _experiment(tmp_path: Path, laws: list[dict]) -> Path:
    base = bundled_examples()["arm"].parent
    exp = yaml.safe_load((base / "experiment.yaml").read_text())
    exp["model"] = str(base / "arm.xml")
    for s in exp["sequences"]:
        s["file"] = str(base / s["file"])
    exp["force_laws"] = laws
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path


def test_force_laws_are_read_with_their_parameters(tmp_path):
    law = {
        "law": "coulomb",
        "name": "elbow_friction",
        "joint": "elbow",
        "width": 0.05,
        "nominal": {"friction": [0.01, 0.02]},
        "max": {"friction": 1.0},
    }
    exp = load_experiment(_experiment(tmp_path, [law]))
    p = exp.params["elbow_friction_friction"]
    np.testing.assert_array_equal(p.value, [0.01, 0.02])
    np.testing.assert_array_equal(p.max_value, [1.0, 1.0])
    assert p.meta["kind"] == "law:coulomb" and p.modifier is None
    assert exp.residual_options["force_laws"] == [
        CoulombFriction("elbow_friction", "elbow", width=0.05)
    ]
    rf = exp.build_residual_fn()
    r = rf(exp.params.as_vector(), exp.params)
    assert np.all(np.isfinite(r))


def test_force_law_mistakes_name_the_entry(tmp_path):
    bad = [{"law": "coulomb", "name": "f", "joint": "knee", "nominal": {"friction": 0.1}}]
    with pytest.raises(ExperimentError, match=r"force_laws\[0\]: .*no joint 'knee'"):
        load_experiment(_experiment(tmp_path, bad))
    bad = [{"law": "coulomb", "name": "f", "joint": "elbow", "nominal": {}}]
    with pytest.raises(ExperimentError, match=r"force_laws\[0\]: .*missing \['friction'\]"):
        load_experiment(_experiment(tmp_path, bad))
