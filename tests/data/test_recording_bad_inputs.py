"""Bad recording CSV files: each fails early with a clear message."""

from __future__ import annotations

import mjsysid.data.recording
from bad_inputs_support import (
    _case,
    table_test,
)

CASES = [
    # ---- recording CSV files -----------------------------------------------------------------
    _case(
        "csv-truncated-last-line",
        lambda c: mjsysid.data.recording.read_columns(
            c.file("cut.csv", "time,a,b\n0,1,2\n0.1,1,2\n0.2,1\n")
        ),
        ValueError,
        r"cut\.csv' line 4: must have 3 fields, got 2; a line cut off \(a truncated capture\) "
        r"or with a stray separator: repair or delete it",
    ),
    _case(
        "csv-comment-above-the-header",
        lambda c: mjsysid.data.recording.read_columns(
            c.file("c.csv", "# motor log\ntime,a,b\n0,1,2\n")
        ),
        ValueError,
        r"c\.csv' line 2: must have 1 fields, got 3; the header \(line 1\) names 1 columns "
        r"\['# motor log'\]: is a comment or title line above it\?",
    ),
]


test_bad_input = table_test(CASES)
