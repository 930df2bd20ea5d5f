"""The JSON Schema of experiment files (``mjsysid schema``): a valid draft 2020-12 schema that
the bundled examples satisfy and that refuses what the loader refuses; and the messages of
mistakes that only the schema's reading tells."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment
from mjsysid.app.experiment.schema import json_schema


def _schema_file(tmp_path: Path) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    path = tmp_path / "experiment.schema.json"
    assert main(["schema", "--out", str(path)], stdout=out, stderr=err) == 0
    assert err.getvalue() == f"wrote {path}\n"
    return json.loads(path.read_text())


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_command_writes_a_draft_2020_12_schema(tmp_path: Path):
    schema = _schema_file(tmp_path)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema == json_schema()
    _validator(schema)
    out = io.StringIO()
    assert main(["schema"], stdout=out, stderr=io.StringIO()) == 0
    assert json.loads(out.getvalue()) == schema


@pytest.mark.parametrize("name", sorted(bundled_examples()))
def test_bundled_examples_satisfy_the_schema(tmp_path: Path, name: str):
    data = yaml.safe_load(bundled_examples()[name].read_text())
    _validator(_schema_file(tmp_path)).validate(data)


def _arm(**overrides: Any) -> dict[str, Any]:
    base = bundled_examples()["arm"].parent
    exp = yaml.safe_load((base / "experiment.yaml").read_text())
    exp["model"] = str(base / "arm.xml")
    for s in exp["sequences"]:
        s["file"] = str(base / s["file"])
    exp.update(overrides)
    return exp


BAD = [
    pytest.param(
        {"optimizer": {"max_iter": 3}},
        r"optimizer has unknown keys \['max_iter'\]; .*did you mean 'max_iters' for 'max_iter'\?",
        id="misspelt-option",
    ),
    pytest.param(
        {"optimiser": {"method": "lm"}},
        r"top level has unknown keys \['optimiser'\]; .*did you mean 'optimizer'",
        id="misspelt-top-level-key",
    ),
    pytest.param(
        {"shooting": {"window": "1s"}},
        r"shooting\.window must be a number, got str '1s'",
        id="wrong-type",
    ),
    pytest.param(
        {"confidence": {"draws": 1}},
        r"confidence\.draws must be an integer >= 2, got int 1",
        id="out-of-range",
    ),
    pytest.param(
        {"parameters": [{"kind": "joint_dampin", "target": "elbow"}]},
        r"parameters\[0\]\.kind must be one of \[.*'joint_damping'.*\], got str 'joint_dampin'",
        id="unknown-kind",
    ),
    pytest.param(
        {"parameters": [{"kind": "joint_damping", "target": "elbow", "apply_to": "measured"}]},
        r"parameters\[0\] has unknown keys \['apply_to'\]",
        id="key-of-another-kind",
    ),
    pytest.param(
        {"force_laws": [{"law": "coulomb", "name": "f", "joint": "elbow", "widht": 0.1}]},
        r"force_laws\[0\] has unknown keys \['widht'\]; .*did you mean 'width' for 'widht'\?",
        id="misspelt-force-law-option",
    ),
    pytest.param(
        {"sequences": [{"file": "run1.npz", "time_scale": "ms"}]},
        r"sequences\[0\]\.time_scale must be a number \(s per unit\), got str 'ms'",
        id="sequence-option",
    ),
    pytest.param(
        {"executor": {"wrkers": 2}},
        r"executor has unknown keys \['wrkers'\]; .*did you mean 'workers' for 'wrkers'\?",
        id="member-of-a-union",
    ),
]


@pytest.mark.parametrize(("overrides", "match"), BAD)
def test_the_schema_and_the_loader_refuse_the_same_mistakes(
    tmp_path: Path, overrides: dict[str, Any], match: str
):
    data = _arm(**overrides)
    with pytest.raises(jsonschema.ValidationError):
        _validator(json_schema()).validate(data)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ExperimentError, match=rf"^{re.escape(str(path))}: {match}"):
        load_experiment(path)


def test_missing_and_misspelt_keys_of_one_mapping_are_told_together(tmp_path: Path):
    path = tmp_path / "exp.yaml"
    data = _arm()
    data["sequences"][0] = {"name": "s", "fiel": data["sequences"][0]["file"]}
    path.write_text(yaml.safe_dump(data))
    want = (
        f"{path}: sequences[0].file is required (a .npz or .csv path); sequences[0] has unknown "
        "keys ['fiel']; allowed: ['command_timing', 'constants', 'control', 'file', 'holdout', "
        "'ignore_columns', 'initial_state', 'inputs', 'jitter_tolerance', 'name', 'resample', "
        "'retime', 'sensors', 'source', 'time', 'time_range', 'time_scale']; did you mean 'file' "
        "for 'fiel'?"
    )
    with pytest.raises(ExperimentError) as e:
        load_experiment(path)
    assert str(e.value) == want


@pytest.mark.parametrize(
    ("entry", "want"),
    [
        (
            {"kind": "joint_damping", "target": "elbw"},
            "the model has no joint named 'elbw'; known: ['shoulder', 'elbow', 'wrist']; "
            "did you mean 'elbow'?",
        ),
        (
            {"kind": "body_mass", "target": "lnk2"},
            "the model has no body named 'lnk2'; known: ['world', 'link1', 'link2', 'link3']; "
            "did you mean 'link2'?",
        ),
        (
            {"kind": "joint_damping", "target": "knee"},
            "the model has no joint named 'knee'; known: ['shoulder', 'elbow', 'wrist']",
        ),
    ],
)
def test_a_misspelt_target_gets_a_did_you_mean(tmp_path: Path, entry: dict[str, Any], want: str):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_arm(parameters=[entry])))
    with pytest.raises(ExperimentError) as e:
        load_experiment(path)
    assert str(e.value) == f"{path}: parameters[0]: {want}"
