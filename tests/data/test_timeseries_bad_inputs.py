"""Bad inputs to TimeSeries and its npz files: each fails early with a clear message."""

from __future__ import annotations

import numpy as np

import mjsysid as ms
from bad_inputs_support import (
    INF,
    NAN,
    N,
    _case,
    _corrupt_middle,
    _pickled_npz,
    _savez,
    _ts_npz,
    _with_nan,
    _write,
    table_test,
)

CASES = [
    # ---- TimeSeries: times, data, widths, names ----------------------------------------------
    _case(
        "ts-times-nan",
        lambda c: ms.TimeSeries([0.0, NAN, 2.0], np.ones(3)),
        ValueError,
        r"times must be finite, got nan at index 1",
    ),
    _case(
        "ts-times-inf",
        lambda c: ms.TimeSeries([0.0, 1.0, INF], np.ones(3)),
        ValueError,
        r"times must be finite, got inf at index 2",
    ),
    _case(
        "ts-times-unsorted",
        lambda c: ms.TimeSeries([0.0, 2.0, 1.0], np.ones(3)),
        ValueError,
        r"times must be strictly increasing, got times\[2\]=1\.0 <= times\[1\]=2\.0",
    ),
    _case(
        "ts-times-repeated",
        lambda c: ms.TimeSeries([0.0, 1.0, 1.0], np.ones(3)),
        ValueError,
        r"times must be strictly increasing, got times\[2\]=1\.0 <= times\[1\]=1\.0",
    ),
    _case(
        "ts-times-2d",
        lambda c: ms.TimeSeries(np.zeros((2, 2)), np.ones(2)),
        ValueError,
        r"times must be a 1-D array, got shape \(2, 2\)",
    ),
    _case(
        "ts-data-nan-peer",
        lambda c: c.sensors(_with_nan(c.sens.data, (7, 4))),
        ValueError,
        r"data must be finite, got nan at row 7, column 4",
    ),
    _case(
        "ts-data-inf",
        lambda c: ms.TimeSeries([0.0, 1.0, 2.0], [[1.0], [-INF], [2.0]]),
        ValueError,
        r"data must be finite, got -inf at row 1, column 0",
    ),
    _case(
        "ts-data-strings",
        lambda c: ms.TimeSeries([0.0, 1.0], ["a", "b"]),
        TypeError,
        r"data must be a real numeric array, got array\(shape=\(2,\)",
    ),
    _case(
        "ts-data-3d",
        lambda c: ms.TimeSeries([0.0, 1.0], np.ones((2, 2, 2))),
        ValueError,
        r"data must be a 1-D \(N,\) or 2-D \(N, D\) array, got shape \(2, 2, 2\)",
    ),
    _case(
        "ts-length-mismatch",
        lambda c: ms.TimeSeries([0.0, 1.0, 2.0], np.ones(4)),
        ValueError,
        r"times and data must have the same length, got 3 and 4",
    ),
    _case(
        "ts-width-mismatch",
        lambda c: c.sensors(c.sens.data[:, :5]),
        ValueError,
        r"data must have 10 columns \(j1_pos:1, j2_pos:1, .*tip_gyro:3\), got 5",
    ),
    _case(
        "ts-control-width-mismatch",
        lambda c: ms.TimeSeries.from_control_names(c.times, np.ones((N, 3)), c.model),
        ValueError,
        r"data must have 2 columns \(m1:1, m2:1\), got 3",
    ),
    _case(
        "ts-control-nan-peer",
        lambda c: ms.TimeSeries.from_control_names(c.times, _with_nan(c.ctrl, (5, 1)), c.model),
        ValueError,
        r"data must be finite, got nan at row 5, column 1",
    ),
    _case(
        "ts-control-times-nan",
        lambda c: ms.TimeSeries.from_control_names(_with_nan(c.times, (3,)), c.ctrl, c.model),
        ValueError,
        r"times must be finite, got nan at index 3",
    ),
    _case(
        "ts-unknown-sensor",
        lambda c: ms.TimeSeries.from_names(c.times, c.sens.data[:, :1], c.model, ["j3_pos"]),
        KeyError,
        r"unknown signal 'j3_pos' \(not a sensor or a state of the model; sensors: "
        r"\['j1_pos'.*did you mean 'j2_pos'\?",
    ),
    _case(
        "ts-unknown-actuator",
        lambda c: ms.TimeSeries.from_control_names(c.times, c.ctrl[:, :1], c.model, ["m3"]),
        KeyError,
        r"unknown actuator 'm3' for MjCtrl \(model actuators: \['m1', 'm2'\]\)",
    ),
    _case(
        "ts-unknown-joint",
        lambda c: ms.TimeSeries.from_names(
            c.times, c.sens.data[:, :1], c.model, [("j7", ms.SignalType.MjStateQPos)]
        ),
        KeyError,
        r"unknown joint 'j7' for MjStateQPos .*model joints: \['j1', 'j2'\]",
    ),
    _case(
        "ts-resample-outside-span",
        lambda c: ms.TimeSeries([0.0, 1.0, 2.0], np.ones(3)).resample([0.5, 3.0]),
        ValueError,
        r"new_times must lie within the series span \[0\.0, 2\.0\], got "
        r"new_times\[1\]=3\.0; no extrapolation",
    ),
    # ---- TimeSeries files: unwritable folder -------------------------------------------------
    _case(
        "ts-save-not-writable",
        lambda c: c.sens.save_to_disk(c.blocker() / "ts.npz"),
        OSError,
        r"cannot create folder '.*not_a_folder' for 'ts\.npz'",
    ),
    # ---- TimeSeries npz files ----------------------------------------------------------------
    _case(
        "npz-truncated",
        lambda c: ms.TimeSeries.load_from_disk(_write(c.tmp / "t.npz", c.ts_file()[:200])),
        ValueError,
        r"'.*t\.npz' is not a readable \.npz file \(not a zip archive: truncated or "
        r"a foreign format\)",
    ),
    _case(
        "npz-corrupted",
        lambda c: ms.TimeSeries.load_from_disk(
            _write(c.tmp / "t.npz", _corrupt_middle(c.ts_file()))
        ),
        ValueError,
        r"'.*t\.npz' is not a readable \.npz file \(Bad CRC-32",
    ),
    _case(
        "npz-foreign",
        lambda c: ms.TimeSeries.load_from_disk(_savez(c.tmp / "t.npz", a=np.ones(3))),
        ValueError,
        r"'.*t\.npz' must contain arrays \['times', 'data', 'signal_mapping_json', "
        r"'schema_version'\], missing .*; found \['a'\]",
    ),
    _case(
        "npz-text-file",
        lambda c: ms.TimeSeries.load_from_disk(c.file("t.npz", "times,data\n0,1\n")),
        ValueError,
        r"'.*t\.npz' is not a readable \.npz file \(not a zip archive",
    ),
    _case(
        "npz-pickled-object-array",
        lambda c: ms.TimeSeries.load_from_disk(_pickled_npz(c.tmp / "t.npz")),
        ValueError,
        r"'.*t\.npz' is not a readable \.npz file \(Object arrays cannot be loaded "
        r"when allow_pickle=False\)",
    ),
    _case(
        "npz-newer-schema",
        lambda c: ms.TimeSeries.load_from_disk(_ts_npz(c.tmp / "t.npz", [0.0, 1.0], 2)),
        ValueError,
        r"t\.npz': schema_version must be <= 1, got 2; the file was written by a "
        r"newer mjsysid",
    ),
    _case(
        "npz-nan-times",
        lambda c: ms.TimeSeries.load_from_disk(_ts_npz(c.tmp / "t.npz", [0.0, NAN, 2.0])),
        ValueError,
        r"t\.npz': times must be finite, got nan at index 1",
    ),
    _case(
        "npz-missing-file",
        lambda c: ms.TimeSeries.load_from_disk(c.tmp / "none.npz"),
        FileNotFoundError,
        r"no such file: '.*none\.npz'",
    ),
]


test_bad_input = table_test(CASES)
