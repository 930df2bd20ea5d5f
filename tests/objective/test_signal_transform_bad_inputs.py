"""Bad inputs to SignalTransform: each fails at construction or at build_residual_fn time."""

from __future__ import annotations

import mjsysid as ms
from bad_inputs_support import (
    ARM_SIGNALS,
    _case,
    _transform_fit,
    table_test,
)

CASES = [
    # ---- SignalTransform ---------------------------------------------------------------------
    _case(
        "st-bad-target",
        lambda c: ms.SignalTransform().gain("j1_pos", "g", target="both"),
        ValueError,
        r"SignalTransform.gain: target must be 'predicted' or 'measured', got "
        r"'both'",
    ),
    _case(
        "st-empty-pattern",
        lambda c: ms.SignalTransform().delay("", "d"),
        TypeError,
        r"SignalTransform.delay: pattern must be a non-empty string, got ''",
    ),
    _case(
        "st-param-wrong-type",
        lambda c: ms.SignalTransform().bias("j1_pos", 3),
        TypeError,
        r"SignalTransform.bias: param must be a Parameter or a parameter name, got 3",
    ),
    _case(
        "st-negative-weight",
        lambda c: ms.SignalTransform().set_sensor_weights({"j1_pos": -1.0}),
        ValueError,
        r"set_sensor_weights\['j1_pos'\] must be finite numbers >= 0 \(scalar or 1-D\), got -1\.0",
    ),
    _case(
        "st-delay-matches-nothing-peer",
        lambda c: ms.build_residual_fn(c.seqs, ms.SignalTransform().delay("j3_*", "d").apply),
        ValueError,
        r"SignalTransform.delay\('j3_\*', 'd'\): the pattern must match at least one "
        r"measured signal, got none; measured signals: " + ARM_SIGNALS,
    ),
    _case(
        "st-gain-matches-nothing",
        lambda c: ms.build_residual_fn(c.seqs, ms.SignalTransform().gain("tip_acc", "g").apply),
        ValueError,
        r"SignalTransform.gain\('tip_acc', 'g'\): the pattern must match at least "
        r"one measured signal, got none",
    ),
    _case(
        "st-bias-matches-nothing",
        lambda c: ms.build_residual_fn(
            c.seqs, ms.SignalTransform().bias("J1_*", "b", target="measured").apply
        ),
        ValueError,
        r"SignalTransform.bias\('J1_\*', 'b'\): the pattern must match at least one "
        r"measured signal, got none",
    ),
    _case(
        "st-enabled-matches-nothing",
        lambda c: ms.build_residual_fn(
            c.seqs, ms.SignalTransform().enable_sensors(["gyro*"]).apply
        ),
        ValueError,
        r"SignalTransform: pattern 'gyro\*' must match at least one measured "
        r"signal, got none; measured signals: " + ARM_SIGNALS,
    ),
    _case(
        "st-weight-unknown-name-peer",
        lambda c: ms.build_residual_fn(
            c.seqs, ms.SignalTransform().set_sensor_weights({"j3_pos": 2.0}).apply
        ),
        ValueError,
        r"SignalTransform: pattern 'j3_pos' must match at least one measured "
        r"signal, got none",
    ),
    _case(
        "st-enable-sensors-given-a-string",
        lambda c: ms.SignalTransform().enable_sensors("j1_pos"),
        TypeError,
        r"SignalTransform.enable_sensors: sensor_names must be a list of names or patterns, "
        r"got 'j1_pos'",
    ),
    _case(
        "st-weight-wrong-width",
        lambda c: ms.build_residual_fn(
            c.seqs, ms.SignalTransform().set_sensor_weights({"tip_pos": [1.0, 2.0]}).apply
        ),
        ValueError,
        r"weights\['tip_pos'\] must be a scalar or 3 values \(one per column\), got "
        r"\[1\.0, 2\.0\]",
    ),
    _case(
        "st-unknown-parameter",
        lambda c: _transform_fit(c, ms.SignalTransform().delay("j1_pos", "j1_delay")),
        KeyError,
        r"SignalTransform.delay: no parameter named 'j1_delay'",
    ),
    _case(
        "st-delay-window-too-wide",
        lambda c: _transform_fit(
            c,
            ms.SignalTransform().delay("j1_pos", "d"),
            ms.make_parameter(
                "sensor_delay", None, "j1_pos", name="d", min_value=-1.0, max_value=1.0
            ),
        ),
        ValueError,
        r"the delay window \[1\.0, -0\.802\] s \(delays in \[-1\.0, 1\.0\] s\) "
        r"leaves 0 samples of the series; narrow the delay bounds",
    ),
]


test_bad_input = table_test(CASES)
