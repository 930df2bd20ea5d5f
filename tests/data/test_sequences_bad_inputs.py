"""Bad inputs to ModelSequences: each fails early with a clear message."""

from __future__ import annotations

import numpy as np

import mjsysid as ms
from bad_inputs_support import (
    N,
    _case,
    _with_nan,
    table_test,
)

CASES = [
    # ---- ModelSequences ----------------------------------------------------------------------
    _case(
        "seq-initial-state-nan-peer",
        lambda c: c.seq(initial_state=_with_nan(c.x0, (2,))),
        ValueError,
        r"ModelSequences 'arm2', sequence 's': initial_state must be finite, got "
        r"initial_state\[2\]=nan",
    ),
    _case(
        "seq-initial-state-length",
        lambda c: c.seq(initial_state=c.x0[:-1]),
        ValueError,
        r"initial_state must be a 1-D full-physics state of length 5, got "
        r"array\(shape=\(4,\).*create_initial_state",
    ),
    _case(
        "seq-control-shorter-peer",
        lambda c: c.seq(
            control=ms.TimeSeries.from_control_names(c.times[:50], c.ctrl[:50], c.model)
        ),
        ValueError,
        r"control must cover the sensordata time span \[0\.0, 0\.198\] s, got "
        r"control times \[0\.0, 0\.098\] s",
    ),
    _case(
        "seq-control-starts-late",
        lambda c: c.seq(
            control=ms.TimeSeries.from_control_names(c.times[10:], c.ctrl[10:], c.model)
        ),
        ValueError,
        r"control must cover the sensordata time span \[0\.0, 0\.198\] s, got "
        r"control times \[0\.02, 0\.198\] s",
    ),
    _case(
        "seq-count-mismatch",
        lambda c: c.seq(sequence_name=["a", "b"]),
        ValueError,
        r"must have the same number of sequences, got \{'sequence_name': 2, "
        r"'initial_state': 1, 'control': 1, 'sensordata': 1\}",
    ),
    _case(
        "seq-spec-is-model",
        lambda c: c.seq(spec=c.model),
        TypeError,
        r"spec must be a mujoco.MjSpec, got 'MjModel'\. did you pass a compiled "
        r"MjModel instead of an MjSpec\?",
    ),
    _case(
        "seq-control-missing",
        lambda c: c.seq(control=None),
        ValueError,
        r"control must be a TimeSeries for the model's 2 actuators, got None",
    ),
    _case(
        "seq-control-missing-actuator",
        lambda c: c.seq(
            control=ms.TimeSeries.from_control_names(c.times, c.ctrl[:, :1], c.model, ["m1"])
        ),
        ValueError,
        r"control must be a column for every actuator, got \"none for \['m2'\]\"",
    ),
    _case(
        "seq-raw-sensordata-width",
        lambda c: c.seq(sensordata=ms.TimeSeries(c.times, c.sens.data[:, :3])),
        ValueError,
        r"sensordata must be 10 columns \(all model sensors\) when it has no signal "
        r"mapping, got '3 columns'",
    ),
    _case(
        "seq-sensor-of-another-model",
        lambda c: c.seq(
            sensordata=ms.TimeSeries.from_names(c.times, np.ones((N, 2)), c.servo_model)
        ),
        KeyError,
        r"sequence 's': sensordata: unknown sensor 'angle' \(model sensors: "
        r"\['j1_pos'",
    ),
    _case(
        "seq-duplicate-names",
        lambda c: c.seq(
            sequence_name=["a", "a"],
            initial_state=[c.x0, c.x0],
            control=[c.control, c.control],
            sensordata=[c.sens, c.sens],
        ),
        ValueError,
        r"sequence_name must be unique names, got \['a', 'a'\]",
    ),
    _case(
        "seq-sensordata-is-array",
        lambda c: c.seq(sensordata=c.sens.data),
        TypeError,
        r"sensordata must be a TimeSeries.*got 'ndarray'",
    ),
    _case(
        "seq-control-is-array",
        lambda c: c.seq(control=c.ctrl),
        TypeError,
        r"control must be a TimeSeries.*got 'ndarray'",
    ),
]


test_bad_input = table_test(CASES)
