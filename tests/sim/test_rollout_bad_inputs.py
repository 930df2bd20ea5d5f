"""Bad inputs to sysid_rollout: each fails early with a clear message."""

from __future__ import annotations

import mjsysid as ms
from bad_inputs_support import (
    _case,
    _with_nan,
    table_test,
)

CASES = [
    # ---- rollouts ----------------------------------------------------------------------------
    _case(
        "rollout-control-nan",
        lambda c: ms.sysid_rollout(c.model, None, _with_nan(c.ctrl, (3, 0)), c.x0),
        ValueError,
        r"control must be finite, got array\(shape=\(1,\), \[nan\]\)",
    ),
    _case(
        "rollout-initial-state-nan",
        lambda c: ms.sysid_rollout(c.model, None, c.ctrl, _with_nan(c.x0, (1,))),
        ValueError,
        r"initial_states must be finite, got array\(shape=\(1,\), \[nan\]\)",
    ),
    _case(
        "rollout-control-width",
        lambda c: ms.sysid_rollout(c.model, None, c.ctrl[:, :1], c.x0),
        ValueError,
        r"control must be shape \(nbatch, nstep, 2\), got array\(shape=\(1, 100, 1\)",
    ),
]


test_bad_input = table_test(CASES)
