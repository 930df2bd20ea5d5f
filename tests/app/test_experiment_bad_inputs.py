"""Bad experiment files and recordings (the CLI's inputs): each fails early with a clear message."""

from __future__ import annotations

import numpy as np

from bad_inputs_support import (
    _arm_run1,
    _case,
    _with_nan,
    _write,
    table_test,
)
from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment
from mjsysid.app.experiment.schema import read_file

CASES = [
    # ---- experiment files and recordings (the CLI's inputs) ----------------------------------
    _case(
        "exp-python-object-tag",
        lambda c: load_experiment(c.experiment("!!python/object/apply:os.system ['true']\n")),
        ValueError,
        r"exp\.yaml': unsupported YAML tag .*never constructs Python objects",
    ),
    _case(
        "exp-newer-schema",
        lambda c: load_experiment(c.experiment(schema_version=2)),
        ExperimentError,
        r"exp\.yaml: schema_version must be <= 1, got 2; upgrade mjsysid",
    ),
    _case(
        "exp-unknown-key",
        lambda c: load_experiment(c.experiment(optimiser={"method": "scipy"})),
        ExperimentError,
        r"exp\.yaml: top level has unknown keys \['optimiser'\]; allowed: ",
    ),
    _case(
        "exp-wrong-type",
        lambda c: load_experiment(c.experiment(name=["arm"])),
        ExperimentError,
        r"exp\.yaml: name must be str, got list \['arm'\]",
    ),
    _case(
        "exp-recording-truncated",
        lambda c: load_experiment(
            c.experiment(
                sequences=[
                    {
                        "file": str(
                            _write(
                                c.tmp / "cut.npz",
                                (bundled_examples()["arm"].parent / "run1.npz").read_bytes()[:999],
                            )
                        )
                    }
                ]
            )
        ),
        ExperimentError,
        r"exp\.yaml: sequences\[0\]: '.*cut\.npz' is not a readable \.npz file",
    ),
    _case(
        "exp-recording-pickled",
        lambda c: load_experiment(c.recording(time=lambda t: t.astype(object))),
        ExperimentError,
        r"sequences\[0\]: '.*rec\.npz' is not a readable \.npz file \(Object "
        r"arrays cannot be loaded when allow_pickle=False\)",
    ),
    _case(
        "exp-recording-nan-data",
        lambda c: load_experiment(c.recording(elbow_pos=lambda a: _with_nan(a, (10,)))),
        ExperimentError,
        r"exp\.yaml: sequences\[0\]: recording '.*': column 'elbow_pos' must be finite, got "
        r"\[nan\] in data row 11 of",
    ),
    _case(
        "exp-recording-repeated-times",
        lambda c: load_experiment(
            c.recording(time=lambda t: np.where(np.arange(t.size) == 5, t[4], t))
        ),
        ExperimentError,
        r"sequences\[0\]: recording '.*': time column 'time' must be strictly increasing, "
        r"got .* then .* in data rows 5 and 6",
    ),
    _case(
        "exp-recording-nan-initial-qpos",
        lambda c: load_experiment(c.recording(initial_qpos=lambda q: _with_nan(q, (1,)))),
        ExperimentError,
        r"exp\.yaml: sequences\[0\]: .*initial_qpos.*qpos must be finite, got "
        r"qpos\[1\]=nan",
    ),
    _case(
        "exp-time-range-reversed",
        lambda c: load_experiment(
            c.experiment(sequences=[{"file": str(_arm_run1()), "time_range": [1.0, 0.5]}])
        ),
        ExperimentError,
        r"sequences\[0\]: recording '.*run1\.npz': time_range must be start < end, got "
        r"\[1\.0, 0\.5\]",
    ),
    _case(
        "exp-time-range-outside-the-recording",
        lambda c: load_experiment(
            c.experiment(sequences=[{"file": str(_arm_run1()), "time_range": [0.5, 99.0]}])
        ),
        ExperimentError,
        r"sequences\[0\]: recording '.*': time_range must be within the recording's span "
        r"\[0\.0, .*\] s \(its own clock\), got \[0\.5, 99\.0\]",
    ),
    _case(
        "exp-time-range-not-numbers",
        lambda c: load_experiment(
            c.experiment(sequences=[{"file": str(_arm_run1()), "time_range": ["a", None]}])
        ),
        ExperimentError,
        r"time_range must be two finite numbers \(s\) or None, got \['a', None\]",
    ),
    _case(
        "exp-sequence-key-misspelt-before-loading",
        lambda c: load_experiment(
            c.experiment(sequences=[{"file": str(_arm_run1()), "timescale": 0.001}])
        ),
        ExperimentError,
        r"sequences\[0\] has unknown keys \['timescale'\]; allowed: \[.*\]; did you mean "
        r"'time_scale' for 'timescale'\?",
    ),
    _case(
        "exp-model-file-given-as-experiment",
        lambda c: load_experiment(bundled_examples()["arm"].parent / "arm.xml"),
        ExperimentError,
        r"arm\.xml: this is a model file; give an experiment file \(YAML\)",
    ),
    # the whole file not a mapping, given as data: described, never echoed (it was
    # "got list ['hunter2', ...]")
    _case(
        "exp-data-a-list",
        lambda c: read_file(["hunter2", "root:x:0:0", "secret"], "exp.yaml"),
        ExperimentError,
        r"^exp\.yaml: the file must be a mapping, got list \(a list of 3 items\)$",
    ),
    _case(
        "exp-data-text",
        lambda c: read_file("password=hunter2", "exp.yaml"),
        ExperimentError,
        r"^exp\.yaml: the file must be a mapping, got str \(plain text of 16 characters\)$",
    ),
]


test_bad_input = table_test(CASES)
