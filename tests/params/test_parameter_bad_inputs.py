"""Bad inputs to Parameter, ParameterDict and parameter YAML files: each fails early
with a clear message; saved parameters keep their modifiers and metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import mjsysid as ms
from bad_inputs_support import (
    GOOD,
    NAN,
    _case,
    _set_value,
    table_test,
)
from conftest import Arm


def _yaml_case(case_id: str, text: str, match: str) -> Any:
    """A parameter file with this ``text`` is refused on loading with a ``ValueError``."""
    return _case(
        case_id,
        lambda c: ms.ParameterDict.load_from_disk(c.file("p.yaml", text)),
        ValueError,
        match,
    )


def _entry_case(case_id: str, entry: str, match: str) -> Any:
    """A parameter file whose one parameter is ``entry`` is refused with a ``ValueError``."""
    return _case(
        case_id,
        lambda c: ms.ParameterDict.load_from_disk(c.params_yaml(entry)),
        ValueError,
        match,
    )


CASES = [
    # ---- Parameter and ParameterDict ---------------------------------------------------------
    _case(
        "param-min-gt-max-peer",
        lambda c: ms.Parameter("a", 1.0, 2.0, 0.0),
        ValueError,
        r"parameter 'a': min_value must be <= max_value, got min_value\[0\]=2\.0 > "
        r"max_value\[0\]=0\.0",
    ),
    _case(
        "param-equal-bounds-peer",
        lambda c: ms.Parameter("a", 1.0, 1.0, 1.0),
        ValueError,
        r"parameter 'a': min_value must be < max_value for a non-frozen parameter, "
        r"got both equal to 1\.0 at index 0\. Freeze it",
    ),
    _case(
        "param-nominal-outside-bounds",
        lambda c: ms.Parameter("a", 3.0, 0.0, 2.0),
        ValueError,
        r"parameter 'a': nominal must lie within \[min_value, max_value\], got "
        r"nominal\[0\]=3\.0 outside \[0\.0, 2\.0\]",
    ),
    _case(
        "param-shape-mismatch",
        lambda c: ms.Parameter("a", [1.0, 1.0], [0.0], [2.0, 2.0]),
        ValueError,
        r"parameter 'a': nominal, min_value and max_value must have the same shape, "
        r"got \(2,\), \(1,\) and \(2,\)",
    ),
    _case(
        "param-nominal-2d",
        lambda c: ms.Parameter("a", [[1.0]], [[0.0]], [[2.0]]),
        ValueError,
        r"parameter 'a': nominal must be a scalar or a 1-D array, got "
        r"array\(shape=\(1, 1\)",
    ),
    _case(
        "param-nominal-nan",
        lambda c: ms.Parameter("a", NAN, 0.0, 2.0),
        ValueError,
        r"parameter 'a': nominal must be finite, got array\(shape=\(1,\), \[nan\]\)",
    ),
    _case(
        "param-bound-nan",
        lambda c: ms.Parameter("a", 1.0, NAN, 2.0),
        ValueError,
        r"parameter 'a': min_value must be a number \(\+-inf allowed\), not NaN, "
        r"got array",
    ),
    _case(
        "param-nominal-empty",
        lambda c: ms.Parameter("a", [], [], []),
        ValueError,
        r"parameter 'a': nominal must be non-empty, got array\(shape=\(0,\)",
    ),
    _case(
        "param-nominal-text",
        lambda c: ms.Parameter("a", "one", 0.0, 2.0),
        ValueError,
        r"parameter 'a': nominal must be a number or a sequence of numbers, got "
        r"'one'",
    ),
    _case(
        "param-empty-name",
        lambda c: ms.Parameter("", 1.0, 0.0, 2.0),
        ValueError,
        r"Parameter name must be a non-empty string, got ''",
    ),
    _case(
        "param-modifier-not-callable",
        lambda c: ms.Parameter("a", 1.0, 0.0, 2.0, modifier=3),
        ValueError,
        r"parameter 'a': modifier must be callable or None, got 3",
    ),
    _case(
        "param-value-wrong-shape",
        lambda c: _set_value(ms.Parameter("a", 1.0, 0.0, 2.0), [1.0, 2.0]),
        ValueError,
        r"parameter 'a': value must be shape \(1,\), got array\(shape=\(2,\)",
    ),
    _case(
        "param-value-nan",
        lambda c: _set_value(ms.Parameter("a", 1.0, 0.0, 2.0), NAN),
        ValueError,
        r"parameter 'a': value must be finite, got array\(shape=\(1,\), \[nan\]\)",
    ),
    _case(
        "param-meta-not-plain-data",
        lambda c: ms.Parameter("a", 1.0, 0.0, 2.0, meta={"scale": np.ones(2)}),
        TypeError,
        r"parameter 'a': meta\['scale'\] must be plain data .*got .*ndarray",
    ),
    _case(
        "pd-duplicate-name",
        lambda c: ms.ParameterDict(
            [ms.Parameter("a", 1.0, 0.0, 2.0), ms.Parameter("a", 1.0, 0.0, 2.0)]
        ),
        ValueError,
        r"ParameterDict already has a parameter named 'a'; names must be unique",
    ),
    _case(
        "pd-add-not-a-parameter",
        lambda c: ms.ParameterDict().add({"name": "a"}),
        TypeError,
        r"ParameterDict.add: param must be a Parameter, got \{'name': 'a'\}",
    ),
    _case(
        "pd-vector-wrong-length",
        lambda c: c.masses().update_from_vector([1.0, 2.0, 3.0]),
        ValueError,
        r"update_from_vector: x must be a 1-D array of length 2 \(one entry per "
        r"non-frozen scalar\), got array\(shape=\(3,\)",
    ),
    _case(
        "pd-vector-nan",
        lambda c: c.masses().update_from_vector([1.0, NAN]),
        ValueError,
        r"update_from_vector: x must be finite, got x\[1\]=nan \(link2_mass\)",
    ),
    _case(
        "pd-unknown-name",
        lambda c: c.masses()["link3_mass"],
        KeyError,
        r"no parameter named 'link3_mass'; known parameters: \['link1_mass', "
        r"'link2_mass'\]",
    ),
    # ---- parameter YAML files ----------------------------------------------------------------
    _yaml_case(
        "yaml-unknown-top-level-key",
        "schema_version: 1\nparameters: []\ncomment: hi\n",
        r"p\.yaml: unknown top-level keys \['comment'\]",
    ),
    _entry_case(
        "yaml-unknown-parameter-key",
        GOOD + ", unit: kg",
        r"p\.yaml: parameters\[0\]: unknown keys \['unit'\]; allowed: ",
    ),
    _entry_case(
        "yaml-bound-wrong-type",
        "name: a, nominal: 1.0, min_value: low, max_value: 2.0",
        r"p\.yaml: parameters\[0\]\.min_value must be numbers, got 'low'",
    ),
    _entry_case(
        "yaml-frozen-wrong-type",
        GOOD + ", frozen: 'yes'",
        r"p\.yaml: parameters\[0\]\.frozen must be true or false, got 'yes'",
    ),
    _entry_case(
        "yaml-name-wrong-type",
        "name: 3, nominal: 1.0, min_value: 0.0, max_value: 2.0",
        r"p\.yaml: parameters\[0\]\.name must be a string, got 3",
    ),
    _entry_case(
        "yaml-missing-key",
        "name: a, nominal: 1.0, max_value: 2.0",
        r"p\.yaml: parameters\[0\]: missing required key 'min_value'",
    ),
    _yaml_case(
        "yaml-parameters-not-a-list",
        "schema_version: 1\nparameters: {a: 1}\n",
        r"p\.yaml: parameters must be a list, got \{'a': 1\}",
    ),
    _yaml_case(
        "yaml-not-a-mapping",
        "- 1\n- 2\n",
        r"p\.yaml must be a YAML mapping, got 'list'",
    ),
    _yaml_case(
        "yaml-newer-schema",
        "schema_version: 2\nparameters: []\n",
        r"p\.yaml: schema_version must be an integer <= 1, got 2; the file was "
        r"written by a newer mjsysid",
    ),
    _yaml_case(
        "yaml-python-object-tag",
        "!!python/object/apply:os.system ['true']\n",
        r"p\.yaml': unsupported YAML tag .*python/object/apply:os\.system.*never "
        r"constructs Python objects",
    ),
    _yaml_case(
        "yaml-syntax-error",
        "parameters: [1, 2\n",
        r"p\.yaml' is not valid YAML",
    ),
    _case(
        "yaml-missing-file",
        lambda c: ms.ParameterDict.load_from_disk(c.tmp / "nope.yaml"),
        FileNotFoundError,
        r"no such file: '.*nope\.yaml'",
    ),
    _case(
        "yaml-load-values-other-names",
        lambda c: c.masses().load_values(c.params_yaml(GOOD)),
        KeyError,
        r"p\.yaml: saved parameters must match this ParameterDict, missing "
        r"\['link1_mass', 'link2_mass'\], unexpected \['a'\]",
    ),
    _yaml_case(
        "yaml-foreign-schema",
        "schema: other.tool\nschema_version: 1\nparameters: []\n",
        r"p\.yaml: schema must be 'mjsysid\.parameters', got 'other\.tool'",
    ),
    _yaml_case(
        "yaml-schema-version-bool",
        "schema_version: true\nparameters: []\n",
        r"p\.yaml: schema_version must be an integer <= 1, got True",
    ),
    _entry_case(
        "yaml-value-outside-bounds",
        GOOD + ", value: 5.0",
        r"p\.yaml: parameters\[0\]\.value must lie within \[0\.0, 2\.0\], got 5\.0",
    ),
    _entry_case(
        "yaml-known-kind-bad-target",
        GOOD + ", meta: {kind: joint_damping, target: 3}",
        r"p\.yaml: parameters\[0\]\.meta\.target must be a joint name, got 3",
    ),
    # ---- parameter files: unwritable folder --------------------------------------------------
    _case(
        "params-save-not-writable",
        lambda c: c.masses().save_to_disk(c.blocker() / "p.yaml"),
        OSError,
        r"cannot create folder '.*not_a_folder' for 'p\.yaml'",
    ),
]


test_bad_input = table_test(CASES)


def test_saved_parameters_keep_modifiers_and_metadata(arm: Arm, tmp_path: Path):
    """Peer: saved parameters lose their modifiers and inertia metadata."""
    params = ms.ParameterDict(
        [
            ms.body_inertia_param(arm.spec, arm.model, "link1", ms.InertiaType.MassIpos),
            ms.body_inertia_param(arm.spec, arm.model, "link2", ms.InertiaType.Mass),
            ms.make_parameter("joint_damping", arm.model, "j1"),
            ms.make_parameter("actuator_gear", arm.model, "m2"),
            ms.make_parameter("sensor_delay", None, "j1_pos"),
        ]
    )
    params.update_from_vector([1.2, 0.16, 0.001, 0.002, 0.6, 0.09, 1.3, 0.01])
    params.save_to_disk(tmp_path / "p.yaml")
    loaded = ms.ParameterDict.load_from_disk(tmp_path / "p.yaml")
    assert loaded.keys() == params.keys()
    for name in params:
        assert loaded[name].meta == params[name].meta, name
        np.testing.assert_array_equal(loaded[name].value, params[name].value)
        np.testing.assert_array_equal(loaded[name].min_value, params[name].min_value)
        assert (loaded[name].modifier is None) == (params[name].modifier is None), name
    # the re-bound modifiers build the very same model
    m_orig = ms.apply_param_modifiers(params, arm.spec)
    m_load = ms.apply_param_modifiers(loaded, arm.spec)
    for field in ("body_mass", "body_ipos", "body_inertia", "dof_damping", "actuator_gear"):
        np.testing.assert_array_equal(getattr(m_load, field), getattr(m_orig, field), field)
