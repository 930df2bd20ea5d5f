"""Bad inputs to create_initial_state: each fails early with a clear message."""

from __future__ import annotations

import mjsysid as ms
from bad_inputs_support import (
    INF,
    NAN,
    _case,
    table_test,
)

CASES = [
    # ---- initial states ----------------------------------------------------------------------
    _case(
        "state-qpos-nan",
        lambda c: ms.create_initial_state(c.model, qpos=[0.1, NAN]),
        ValueError,
        r"qpos must be finite, got qpos\[1\]=nan",
    ),
    _case(
        "state-qvel-inf",
        lambda c: ms.create_initial_state(c.model, qvel=[INF, 0.0]),
        ValueError,
        r"qvel must be finite, got qvel\[0\]=inf",
    ),
    _case(
        "state-qpos-wrong-length",
        lambda c: ms.create_initial_state(c.model, qpos=[0.1]),
        ValueError,
        r"qpos must be an array of length 2, got array\(shape=\(1,\)",
    ),
    _case(
        "state-qpos-unknown-joint",
        lambda c: ms.create_initial_state(c.model, qpos={"j9": 0.1}),
        KeyError,
        r"qpos: the model has no joint named 'j9'; known: \['j1', 'j2'\]",
    ),
    _case(
        "state-model-is-spec",
        lambda c: ms.create_initial_state(c.spec),
        TypeError,
        r"model must be a compiled mujoco.MjModel, got 'MjSpec'",
    ),
]


test_bad_input = table_test(CASES)
