"""Bad inputs to build_residual_fn and the residual function: each fails at build time."""

from __future__ import annotations

import numpy as np
import pytest

import mjsysid as ms
from bad_inputs_support import (
    NAN,
    _case,
    _zero_column,
    table_test,
)
from conftest import Arm
from mjsysid.util.limits import limits_set

CASES = [
    # ---- build_residual_fn -------------------------------------------------------------------
    _case(
        "rf-weight-unknown-name-peer",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"j3_pos": 1.0}),
        KeyError,
        r"sensor_weights names \['j3_pos'\] match no measured signal; measured "
        r"signals: \['j1_pos'",
    ),
    _case(
        "rf-weight-negative",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"j1_pos": -1.0}),
        ValueError,
        r"sensor_weights\['j1_pos'\] must be finite and >= 0, got -1\.0",
    ),
    _case(
        "rf-weight-nan",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"j1_pos": NAN}),
        ValueError,
        r"sensor_weights\['j1_pos'\] must be finite and >= 0, got nan",
    ),
    _case(
        "rf-weight-wrong-width",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"tip_pos": [1.0, 2.0]}),
        ValueError,
        r"sensor_weights\['tip_pos'\] must be a scalar or 3 values \(one per "
        r"column of 'tip_pos'\), got \[1\.0, 2\.0\]",
    ),
    _case(
        "rf-weight-pattern-wrong-width",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"*_pos": [1.0, 2.0]}),
        ValueError,
        r"sensor_weights\['\*_pos'\] must be a scalar or 1 values \(one per column of "
        r"'j1_pos'\), got \[1\.0, 2\.0\]",
    ),
    _case(
        "rf-enabled-unknown-name",
        lambda c: ms.build_residual_fn(c.seqs, enabled_observations=["j3_pos"]),
        KeyError,
        r"enabled_observations names \['j3_pos'\] match no measured signal",
    ),
    _case(
        "rf-enabled-empty",
        lambda c: ms.build_residual_fn(c.seqs, enabled_observations=[]),
        ValueError,
        r"arm2/s: enabled_observations \[\] leave no measured signal; it has "
        r"\['j1_pos'",
    ),
    _case(
        "rf-enabled-given-a-string",
        lambda c: ms.build_residual_fn(c.seqs, enabled_observations="j1_pos"),
        TypeError,
        r"enabled_observations must be a list of signal names, got 'j1_pos'",
    ),
    _case(
        "rf-control-interpolation",
        lambda c: ms.build_residual_fn(c.seqs, control_interpolation="cubic"),
        ValueError,
        r"control_interpolation must be 'zoh' or 'linear', got 'cubic'",
    ),
    _case(
        "rf-nthread-zero",
        lambda c: ms.build_residual_fn(c.seqs, nthread=0),
        ValueError,
        r"nthread must be a positive integer, got 0",
    ),
    _case(
        "rf-no-sequences",
        lambda c: ms.build_residual_fn([]),
        TypeError,
        r"models_sequences must be a non-empty list of ModelSequences, got \[\]",
    ),
    _case(
        "rf-zero-column-peer",
        lambda c: ms.build_residual_fn(c.seq(sensordata=_zero_column(c, 1))),
        ValueError,
        r"arm2/s: measured signal 'j2_pos' must not be all zeros to be "
        r"RMS-normalised, got only zeros; drop it",
    ),
    _case(
        "rf-zero-column-with-transform",
        lambda c: ms.build_residual_fn(
            c.seq(sensordata=_zero_column(c, 2)), ms.SignalTransform().apply
        ),
        ValueError,
        r"measured signal 'j1_vel' must not be all zeros",
    ),
    _case(
        "rf-one-sample",
        lambda c: ms.build_residual_fn(
            c.seq(sensordata=ms.TimeSeries.from_names(c.times[:1], c.sens.data[:1], c.model))
        ),
        ValueError,
        r"arm2/s: sensordata must be at least 2 samples, got 1",
    ),
    _case(
        "rf-x-wrong-shape",
        lambda c: c.rf(np.ones(3), c.masses()),
        ValueError,
        r"residual_fn: x must be shape \(2,\) or \(2, k\) for the 2 free parameter "
        r"values, got array\(shape=\(3,\)",
    ),
]


test_bad_input = table_test(CASES)


def test_too_many_candidates_in_one_call_are_refused_before_simulating(arm: Arm):
    """A batched call's candidate count (the columns of X) is checked against max_candidates."""
    params = arm.masses()
    X = np.tile(params.as_vector()[:, None], (1, 3))
    with limits_set(max_candidates=2):
        calls = arm.rf.stats.calls
        with pytest.raises(ValueError, match=r"candidates \(columns k\): 3 exceeds the limit "):
            arm.rf(X, params)
        assert arm.rf.stats.calls == calls  # nothing was simulated
    assert arm.rf(X, params).shape[1] == 3
