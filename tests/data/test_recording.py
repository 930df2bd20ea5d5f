"""Recording files: unique column names, every column used, simulated sensor effects."""

from __future__ import annotations

import csv
import io
import re
import warnings
import zipfile
from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2, excitation
from mjsysid.data.recording import load_recording, read_columns
from mjsysid.sim.sensor_effects import apply_sensor_effects
from mjsysid.util.limits import limits_set

N = 50


@pytest.fixture
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(ARM2)


def _columns(model: mujoco.MjModel) -> dict[str, np.ndarray]:
    """Every column :func:`write_recording` would write, with distinct made-up values."""
    t = np.arange(N) * 0.01
    cols: dict[str, np.ndarray] = {"time": t, "ctrl.m1": np.sin(t), "ctrl.m2": np.cos(t)}
    for i in range(model.nsensor):
        dim = int(model.sensor_dim[i])
        data = (i + 1) * t[:, None] + np.arange(dim)
        cols[model.sensor(i).name] = data[:, 0] if dim == 1 else data
    return cols


def _write_csv(path: Path, header: list[str], columns: list[np.ndarray]) -> Path:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(header)
    for row in np.stack(columns, axis=1):
        w.writerow([repr(float(x)) for x in row])
    path.write_text(out.getvalue())
    return path


def _flat(cols: dict[str, np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
    header, columns = [], []
    for k, v in cols.items():
        if v.ndim == 1:
            header.append(k)
            columns.append(v)
        else:
            for j in range(v.shape[1]):
                header.append(f"{k}[{j}]")
                columns.append(v[:, j])
    return header, columns


# -- unique column names ---------------------------------------------------------------------


def test_repeated_csv_header_is_an_error_naming_file_and_column(tmp_path, model):
    header, columns = _flat(_columns(model))
    # a mislabelled column: the second 'j1_pos' really is j2_pos; reading would keep only one
    header[header.index("j2_pos")] = "j1_pos"
    path = _write_csv(tmp_path / "dup.csv", header, columns)
    with pytest.raises(
        ValueError,
        match=r"'.*dup\.csv': column names must be unique, got 1 repeated in the header: "
        r"\['j1_pos'\] \(only one column of each name could be used",
    ):
        read_columns(path)


@pytest.mark.parametrize(
    ("rename", "match"),
    [
        (("tip_pos[1]", "tip_pos[0]"), r"got 1 repeated in the header: \['tip_pos\[0\]'\]"),
        (("tip_pos[1]", "tip_pos[01]"), r"got 'tip_pos\[01\]' for column tip_pos\[1\] twice"),
        (("j1_vel", "tip_gyro"), r"got 'tip_gyro' both as a column and as columns tip_gyro\[i\]"),
    ],
)
def test_repeated_grouped_csv_columns_are_errors(tmp_path, model, rename, match):
    header, columns = _flat(_columns(model))
    old, new = rename
    if old == "tip_pos[1]" and new == "tip_pos[01]":
        header.append(new)  # an extra spelling of tip_pos[1]
        columns.append(columns[header.index(old)])
    else:
        header[header.index(old)] = new
    path = _write_csv(tmp_path / "g.csv", header, columns)
    with pytest.raises(ValueError, match=r"'.*g\.csv': column names must be unique, " + match):
        read_columns(path)


def test_repeated_npz_array_is_an_error(tmp_path, model):
    path = tmp_path / "dup.npz"
    np.savez(path, **_columns(model))
    buf = io.BytesIO()
    np.save(buf, np.zeros(N))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile: "Duplicate name"
        with zipfile.ZipFile(path, "a") as z:
            z.writestr("j2_vel.npy", buf.getvalue())
    assert sorted(np.load(path).files).count("j2_vel") == 2  # what numpy would hide
    with pytest.raises(
        ValueError, match=r"'.*dup\.npz': column names must be unique, got 1 repeated: \['j2_vel'\]"
    ):
        read_columns(path)


# -- every column used -----------------------------------------------------------------------


def test_unused_columns_are_listed(tmp_path, model):
    cols = _columns(model)
    cols["foo"] = np.ones(N)
    cols["t"] = cols["time"]  # a second time column: not the one used
    np.savez(tmp_path / "r.npz", **cols)
    rec = load_recording(tmp_path / "r.npz", model)
    assert rec.unused_columns == ("foo", "t")
    assert rec.hints == {}
    assert rec.unused_message() == (
        "2 column(s) are not used: ['foo', 't'] (not the time column, a control, a model "
        "sensor or joint state)"
    )
    assert rec.sensordata.names == ["j1_pos", "j2_pos", "j1_vel", "j2_vel", "tip_pos", "tip_gyro"]
    # deliberately ignored columns are not reported
    rec = load_recording(tmp_path / "r.npz", model, ignore_columns=["foo", "t"])
    assert rec.unused_columns == () and rec.unused_message() == ""


def test_misspelt_sensor_column_is_an_error_with_a_suggestion(tmp_path, model):
    cols = _columns(model)
    cols["j1_poss"] = cols.pop("j1_pos")
    np.savez(tmp_path / "r.npz", **cols)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "column 'j1_poss' is not used: did you mean the model sensor 'j1_pos' (which has no "
            "column)? Without it the fit would leave that sensor out; rename the column, map it "
            "under sensors: (e.g. sensors: {j1_pos: j1_poss}) or list it under ignore_columns:"
        ),
    ):
        load_recording(tmp_path / "r.npz", model)
    # the two ways out: map it, or say it is something else
    rec = load_recording(
        tmp_path / "r.npz",
        model,
        sensors={"j1_pos": "j1_poss", "j2_pos": "j2_pos", "tip_pos": "tip_pos"},
    )
    assert rec.sensordata.names == ["j1_pos", "j2_pos", "tip_pos"]
    np.testing.assert_array_equal(rec.sensordata.data[:, 0], cols["j1_poss"])
    # an explicit map leaves the rest out on purpose: reported, not an error
    assert rec.unused_columns == ("j1_vel", "j2_vel", "tip_gyro")
    rec = load_recording(tmp_path / "r.npz", model, ignore_columns=["j1_poss"])
    assert "j1_pos" not in rec.sensordata.names and rec.unused_columns == ()


def test_two_misspelt_sensor_columns(tmp_path, model):
    cols = _columns(model)
    cols["j1_poss"] = cols.pop("j1_pos")
    cols["tip_gyr"] = cols.pop("tip_gyro")
    np.savez(tmp_path / "r.npz", **cols)
    with pytest.raises(
        ValueError,
        match=r"columns 'j1_poss', 'tip_gyr' are not used: did you mean the model sensors "
        r"'j1_pos', 'tip_gyro' \(which have no column\)\? Without it the fit would leave those "
        r"sensors out",
    ):
        load_recording(tmp_path / "r.npz", model)


def test_column_close_to_a_joint_state_is_reported_with_a_hint(tmp_path, model):
    cols = _columns(model)
    cols["j1_qpso"] = np.zeros(N)  # joint-state columns are optional: a warning, not an error
    np.savez(tmp_path / "r.npz", **cols)
    rec = load_recording(tmp_path / "r.npz", model)
    assert rec.unused_columns == ("j1_qpso",)
    assert rec.hints == {"j1_qpso": "j1_qpos"}
    assert rec.unused_message().endswith("; did you mean 'j1_qpos' for 'j1_qpso'?")


def test_ignore_columns_must_name_unused_columns(tmp_path, model):
    np.savez(tmp_path / "r.npz", **_columns(model))
    with pytest.raises(
        KeyError, match=r"ignore_columns names 'j1_poss', which is not a column; did you mean "
    ):
        load_recording(tmp_path / "r.npz", model, ignore_columns=["j1_poss"])
    with pytest.raises(
        ValueError,
        match=r"ignore_columns must be columns that nothing else reads, got \['time', 'j1_pos'\]",
    ):
        load_recording(tmp_path / "r.npz", model, ignore_columns=["time", "j1_pos"])
    with pytest.raises(TypeError, match=r"ignore_columns must be a list of column names"):
        load_recording(tmp_path / "r.npz", model, ignore_columns="j1_pos")


def test_missing_control_column_suggests_a_close_one(tmp_path, model):
    cols = _columns(model)
    cols["ctrl.m_1"] = cols.pop("ctrl.m1")
    np.savez(tmp_path / "r.npz", **cols)
    with pytest.raises(
        KeyError,
        match=r"no control column for actuator 'm1' \(looked for 'ctrl.m1' or 'm1'; did you mean "
        r"'ctrl.m_1'\?\); map it under control: in the experiment file",
    ):
        load_recording(tmp_path / "r.npz", model)


# -- simulated sensor effects ----------------------------------------------------------------


def _truth(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(200) * model.opt.timestep
    x0 = ms.create_initial_state(model, [0.5, -0.3])
    ctrl = np.stack([np.sin(7 * t), np.cos(5 * t)], axis=1)
    traj = ms.sysid_rollout(model, None, ctrl, x0)[0]
    return traj.times, traj.sensordata


def test_sensor_delay_shifts_the_columns(model):
    t, y = _truth(model)
    dt = model.opt.timestep
    out, delays = apply_sensor_effects(model, t, y, [("sensor_delay", "j*_pos", 3 * dt)])
    assert delays == {"j1_pos": 3 * dt, "j2_pos": 3 * dt}
    # at t the sensor reports the value at t - d; the first 3 samples hold the first reading
    np.testing.assert_allclose(out[3:, :2], y[:-3, :2], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(out[:3, :2], np.repeat(y[:1, :2], 3, axis=0))
    np.testing.assert_array_equal(out[:, 2:], y[:, 2:])  # other sensors untouched
    # between samples: linear interpolation
    out, _ = apply_sensor_effects(model, t, y, [("sensor_delay", "j1_vel", 0.5 * dt)])
    np.testing.assert_allclose(out[1:, 2], 0.5 * (y[1:, 2] + y[:-1, 2]), rtol=1e-12)


def test_sensor_effects_match_signal_transform(model):
    """The written signals are what a fit's SignalTransform predicts at the true values."""
    t, y = _truth(model)
    d, g, b = 0.0046, np.array([1.5, 0.5, 2.0]), 0.2
    out, _ = apply_sensor_effects(
        model,
        t,
        y,
        [
            ("sensor_bias", "tip_pos", b),
            ("sensor_delay", "*_pos", d),
            ("sensor_gain", "tip_pos", g),
            ("sensor_gain", "j2_vel", 2.0),
        ],
    )
    tip = slice(4, 7)
    np.testing.assert_allclose(
        out[:, tip], g * np.array([np.interp(t - d, t, y[:, c]) for c in range(4, 7)]).T + b
    )
    params = ms.ParameterDict(
        [
            ms.Parameter("d", d, 0.0, 0.01),
            ms.Parameter("g", g, np.zeros(3), np.full(3, 3.0)),
            ms.Parameter("g2", 2.0, 0.0, 3.0),
            ms.Parameter("b", b, -1.0, 1.0),
        ]
    )
    transform = ms.SignalTransform()
    transform.delay("*_pos", "d")
    transform.gain("tip_pos", "g")
    transform.gain("j2_vel", "g2")
    transform.bias("tip_pos", "b")
    meas = ms.TimeSeries.from_names(t, out, model)
    pred = ms.TimeSeries.from_names(t, y, model)
    residual, _, _ = transform.apply(params, pred, meas, model)
    assert residual.shape[0] == t.size - 5  # the window every delay in [0, 0.01] can read
    np.testing.assert_allclose(residual, 0.0, atol=1e-12)


@pytest.mark.parametrize(
    ("effects", "match"),
    [
        (
            [("sensor_delay", "nosuch*", 0.01)],
            r"sensor_delay:nosuch\*: the pattern must match at least one sensor, got none; "
            r"sensors: \['j1_pos'",
        ),
        (
            [("sensor_delay", "*_pos", 0.01), ("sensor_delay", "j1*", 0.02)],
            r"sensor_delay:j1\*: sensors \['j1_pos'\] must be delayed once, got a second delay",
        ),
        (
            [("sensor_delay", "j1_pos", 0.4)],
            r"sensor_delay:j1_pos value must be a delay shorter than the recording \(0.398 s\)",
        ),
        ([("sensor_delay", "j1_pos", [0.1, 0.2])], r"sensor_delay:j1_pos value must be one number"),
        (
            [("sensor_gain", "tip_pos", [1.0, 2.0])],
            r"sensor_gain:tip_pos value must be 1 or 3 numbers \(for 'tip_pos'\)",
        ),
        ([("sensor_bias", "j1_pos", np.nan)], r"sensor_bias:j1_pos value must be finite"),
        ([("joint_damping", "j1", 0.1)], r"effect kind must be one of \['sensor_delay'"),
    ],
)
def test_bad_sensor_effects(model, effects, match):
    t, y = _truth(model)
    with pytest.raises(ValueError, match=match):
        apply_sensor_effects(model, t, y, effects)


def test_bad_samples_and_time_units_are_named(model, tmp_path):
    """A lost sample (NaN), a repeated time stamp and milliseconds are reported with the file,
    the column and the row; time_scale reads milliseconds as seconds."""
    cols = _columns(model)
    path = tmp_path / "r.npz"

    def load(edit, **kw):
        np.savez(path, **{**cols, **edit})
        return load_recording(path, model, **kw)

    nan = cols["j1_pos"].copy()
    nan[7] = np.nan
    with pytest.raises(
        ValueError,
        match=r"r\.npz': column 'j1_pos' must be finite, got \[nan\] in data row 8 of 50 "
        r"\(1 such row\(s\)\); a lost or corrupt sample",
    ):
        load({"j1_pos": nan})
    t = cols["time"].copy()
    t[5] = t[4]
    with pytest.raises(
        ValueError,
        match=r"r\.npz': time column 'time' must be strictly increasing, got 0\.04 then 0\.04 "
        r"in data rows 5 and 6 \(1 such place\(s\)\)",
    ):
        load({"time": t})
    ms_times = cols["time"] * 1000.0
    with pytest.raises(
        ValueError, match=r"time column 'time' must be in seconds: its typical step is 10\.0"
    ):
        load({"time": ms_times})
    rec = load({"time": ms_times}, time_scale=1e-3)
    np.testing.assert_allclose(rec.times, cols["time"], rtol=1e-12)
    slow = load({"time": cols["time"] * 100.0}, time_scale=1.0)  # really one sample a second
    assert slow.times[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"time_scale must be a finite number > 0"):
        load({}, time_scale=0)


def test_time_range_keeps_part_of_a_recording(model, tmp_path):
    """time_range keeps the samples in [start, end] (ends included, None: open), leaves out
    what lies outside it unchecked, and names every mistake."""
    cols = _columns(model)
    t = cols["time"]
    path = tmp_path / "r.npz"

    def load(edit=None, **kw):
        np.savez(path, **{**cols, **(edit or {})})
        return load_recording(path, model, **kw)

    full = load()
    rec = load(time_range=(0.1, 0.3))
    np.testing.assert_array_equal(rec.times, t[10:31])
    np.testing.assert_array_equal(rec.control.data, full.control.data[10:31])
    np.testing.assert_array_equal(rec.sensordata.data, full.sensordata.data[10:31])
    np.testing.assert_array_equal(load(time_range=(None, 0.2)).times, t[:21])
    np.testing.assert_array_equal(load(time_range=[0.4, None]).times, t[40:])
    # an end typed as a rounded decimal (here float32) still names its sample
    np.testing.assert_array_equal(load(time_range=(np.float32(0.3), 0.35)).times, t[30:36])
    # a corrupt tail left out is not checked; kept, it is named by its row in the file
    nan = cols["j1_pos"].copy()
    nan[45] = np.nan
    assert load({"j1_pos": nan}, time_range=(0.0, 0.3)).times.size == 31
    with pytest.raises(ValueError, match=r"got \[nan\] in data row 46 of 50 .* with time_range"):
        load({"j1_pos": nan}, time_range=(0.4, None))
    for bad, match in [
        ((0.3, 0.1), r"time_range must be start < end, got \[0\.3, 0\.1\]"),
        (
            (-1.0, 0.2),
            r"time_range must be within the recording's span \[0\.0, 0\.49\] s \(its own clock\)",
        ),
        (
            (0.101, 0.105),
            r"time_range must be a range holding at least 2 samples, got "
            r"\[0\.101, 0\.105\]\. It holds 0\.",
        ),
        ("0.1", r"time_range must be \[start, end\] in seconds \(None for an open end\)"),
        ((0.1,), r"time_range must be \[start, end\]"),
        ((0.1, float("nan")), r"time_range must be two finite numbers \(s\) or None"),
        ((True, 0.2), r"time_range must be two finite numbers"),
    ]:
        with pytest.raises(ValueError, match=match):
            load(time_range=bad)
    # recorded initial-state columns describe the first sample: unused after a later start
    late = load({"initial_qpos": np.ones(model.nq)}, time_range=(0.1, None))
    assert late.initial_qpos is None and late.notes == (
        "time_range starts at 0.1 s, after the first sample: the columns ['initial_qpos'] "
        "(the state at 0.0 s) are not used, the initial state comes from the sensors at the "
        "range's start (or initial_state:)",
    )
    early = load({"initial_qpos": np.ones(model.nq)}, time_range=(0.0, 0.2))
    np.testing.assert_array_equal(early.initial_qpos, np.ones(model.nq))
    assert early.notes == ()


def test_readme_recording_recipe(tmp_path):
    """The README's file path: write_recording -> load_recording -> initial state from the
    sensors -> ModelSequences; the residual of the true model on it vanishes."""
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()
    ctrl = excitation(300, model.nu, hold=20)
    x0 = ms.create_initial_state(model, qpos=[0.2, -0.1])
    (traj,) = ms.sysid_rollout(model, None, ctrl, x0)
    path = ms.write_recording(tmp_path / "run1.csv", model, traj.times, ctrl, traj.sensordata)
    rec = ms.load_recording(path, model)
    assert rec.unused_columns == ()
    start = ms.create_initial_state(model, *ms.initial_state_from_sensors(model, rec.sensordata))
    np.testing.assert_allclose(start, x0, atol=1e-12)  # jointpos/jointvel sensors give it
    seq = ms.ModelSequences("robot", spec, "run1", start, rec.control, rec.sensordata)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", model, "j1")])
    r = ms.build_residual_fn([seq], normalize=False)(params.as_vector(), params)
    assert np.max(np.abs(r)) < 1e-9


# -- time-stamp glitch and step count (also without load_experiment) ------------------------


def test_load_recording_refuses_a_glitched_time_stamp(tmp_path, model):
    cols = _columns(model)
    cols["time"] = cols["time"].copy()
    cols["time"][-1] = 1e5
    path = _write_csv(tmp_path / "glitch.csv", *_flat(cols))
    with pytest.raises(
        ValueError,
        match=r"glitch\.csv': time stamps must not jump far beyond the others, got 0\.48 then "
        r"100000\.0 in data rows 49 and 50 .*repair or drop the row",
    ):
        load_recording(path, model)


def test_load_recording_refuses_a_span_over_max_steps_before_resampling(tmp_path, model):
    header, columns = _flat(_columns(model))
    path = _write_csv(tmp_path / "slow.csv", header, columns)
    with pytest.raises(
        ValueError,
        match=r"slow\.csv': simulated steps \(time span 4\.9e\+07 s after time_scale / "
        r"timestep .* exceeds the limit max_steps",
    ):
        load_recording(path, model, time_scale=1e8, resample=0.01)
    with limits_set(max_steps=10), pytest.raises(ValueError, match=r"max_steps=10 "):
        load_recording(path, model)
    assert len(load_recording(path, model).times) == N
