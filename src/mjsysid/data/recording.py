"""Recordings on disk: ``.npz`` and ``.csv`` files with named columns.

A recording holds a time column and named signal columns. Conventions (all overridable by
an explicit column map in the experiment file):

* time: ``time`` (``t`` and ``times`` are accepted too);
* controls: ``ctrl.<actuator>`` (or a column named like the actuator);
* sensors: ``<sensor>``; a d-dimensional sensor is one ``(N, d)`` npz array, or csv columns
  ``<sensor>[0] .. <sensor>[d-1]``;
* joint states: ``<joint>_qpos`` / ``<joint>_qvel``;
* initial state (optional): ``initial_qpos`` ``(nq,)`` and ``initial_qvel`` ``(nv,)``.

Column names must be unique, and every column must be used or explicitly ignored (see
*Unused columns* below). :func:`write_recording` writes
exactly this layout; ``mjsysid simulate`` uses it, with
:func:`mjsysid.sim.sensor_effects.apply_sensor_effects` for simulated sensor delays, gains and
biases.

Unused columns
--------------
In :func:`load_recording` a column is *used* when it is the time column, a control column, the
column(s) of a loaded sensor or joint-state signal, ``initial_qpos`` or ``initial_qvel``;
columns named in ``ignore_columns`` are deliberately left out. Any other column is *unused*:

* With the default sensor matching (``sensors=None``), an unused column whose name is close
  (``difflib`` ratio >= 0.8) to a named model sensor that has no column of its own is an
  error: ``j1_poss`` next to a model sensor ``j1_pos`` is almost certainly a typo, and the fit
  would run without that sensor. Rename the column, map it (``sensors=``), or list it in
  ``ignore_columns``.
* Every other unused column is listed in :attr:`Recording.unused_columns` (with
  :attr:`Recording.hints` for names close to an unloaded joint state or sensor); the
  experiment loader reports them as a warning, which ``mjsysid fit`` prints.
"""

from __future__ import annotations

import csv
import difflib
import io
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.clock import clock_messages, retime_plan
from mjsysid.data.json_logs import read_json_log
from mjsysid.data.robot_logs import LogSource, read_log_columns
from mjsysid.data.timeseries import (
    SignalType,
    TimeSeries,
    resolve_signal_name,
    signal_source_indices,
)
from mjsysid.data.timeseries_files import check_npz_headers
from mjsysid.data.timing import (
    JITTER_TOLERANCE,
    CommandTiming,
    TimingWarning,
    apply_command_timing,
    parse_command_timing,
    resample_recording,
)
from mjsysid.data.timing import retime as retime_times
from mjsysid.util.errors import finite_real, must_be
from mjsysid.util.files import atomic_savez, atomic_write_text, load_npz
from mjsysid.util.limits import check_limit
from mjsysid.util.progress import Progress

TIME_KEYS = ("time", "t", "times")


def _repeated(names: Sequence[str]) -> list[str]:
    """Names that occur more than once in ``names``, in order of first repetition."""
    seen: set[str] = set()
    out: list[str] = []
    for n in names:
        if n in seen and n not in out:
            out.append(n)
        seen.add(n)
    return out


def _npz_names(path: Path) -> list[str]:
    """The array names of an ``.npz`` archive, repeats kept (``np.load`` keeps only one)."""
    with zipfile.ZipFile(path) as z:
        return [n[:-4] if n.endswith(".npy") else n for n in z.namelist()]


def read_columns(path: str | Path, progress: Progress | None = None) -> dict[str, np.ndarray]:
    """All named columns of an ``.npz``, ``.csv`` (header row, numbers below) or ``.json``
    file (a list of samples, :mod:`mjsysid.data.json_logs`).

    ``name[i]`` csv columns are gathered into one ``(N, d)`` array called ``name``. A csv
    file's data rows parsed are counted to ``progress(done, total)`` (every
    :data:`PROGRESS_ROWS` rows and at the end), e.g. a
    :class:`~mjsysid.util.progress.ProgressBar`.

    Every column name must occur once: a repeated name (two csv header fields, two arrays of
    one name in an npz archive, ``name[i]`` twice, or a plain ``name`` next to ``name[i]``
    columns) is an error, since only one of the columns could be used and the other would be
    dropped without a word.

    Raises:
      FileNotFoundError: No such file.
      ValueError: Unknown extension, unreadable content or a repeated column name.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return _read_npz(path)
    if suffix == ".json":
        return read_json_log(path).columns
    if suffix != ".csv":
        raise ValueError(
            must_be(f"recording {str(path)!r}", "a .npz, .csv or .json file", suffix or path.name)
        )
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    header, data = _read_csv_table(path, progress)
    return _group_columns(header, data, repr(str(path)))


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` archive (numbers as float64); a repeated name is an error."""
    where = repr(str(path))
    if path.is_file() and zipfile.is_zipfile(path):
        check_npz_headers(path, where)
    loaded = load_npz(path)
    try:
        names = _npz_names(path)
    except (OSError, zipfile.BadZipFile) as e:  # pragma: no cover - load_npz read it
        raise ValueError(f"{where} is not a readable .npz file ({e})") from e
    repeated = _repeated(names)
    if repeated:
        raise ValueError(
            f"{where}: column names must be unique, got {len(repeated)} repeated: "
            f"{repeated} (only one array of each name could be read; rename or remove "
            "the others)"
        )
    return {
        k: np.asarray(v, dtype=np.float64) if v.dtype.kind in "biuf" else v
        for k, v in loaded.items()
    }


PROGRESS_ROWS = 4096
"""Rows parsed between two calls of a ``progress`` callback."""


def _read_csv_table(path: Path, progress: Progress | None = None) -> tuple[list[str], np.ndarray]:
    """The unique header names and the ``(N, columns)`` numbers of a csv file (the rows
    parsed counted to ``progress``)."""
    _check_csv_size(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{str(path)!r} must be a UTF-8 text file (a CSV), got a byte that is not UTF-8 at "
            f"offset {e.start}; is it the right file?"
        ) from None
    reader = csv.reader(io.StringIO(text))
    try:
        rows = list(reader)
    except csv.Error as e:  # a field over csv's limit (131072 characters), a stray quote
        raise ValueError(
            f"{str(path)!r} line {reader.line_num}: not readable as CSV: {e}"
        ) from None
    if len(rows) < 2:
        raise ValueError(
            f"{str(path)!r} must have a header row and data rows, got {len(rows)} rows"
        )
    header = [h.strip() for h in rows[0]]
    repeated = _repeated(header)
    if repeated:
        raise ValueError(
            f"{str(path)!r}: column names must be unique, got {len(repeated)} repeated in the "
            f"header: {repeated} (only one column of each name could be used; rename or remove "
            "the others)"
        )
    body = []
    total = len(rows) - 1
    for i, row in enumerate(rows[1:], start=2):
        if progress is not None and (i - 1) % PROGRESS_ROWS == 0:
            progress(i - 1, total)
        if not row:
            continue
        if len(row) != len(header):
            hint = (
                f"; the header (line 1) names {len(header)} columns {header[:6]}: is a comment "
                "or title line above it?"
                if i == 2
                else "; a line cut off (a truncated capture) or with a stray separator: "
                "repair or delete it"
            )
            raise ValueError(
                f"{str(path)!r} line {i}: must have {len(header)} fields, got {len(row)}{hint}"
            )
        try:
            body.append([float(x) for x in row])
        except ValueError:
            raise ValueError(
                f"{str(path)!r} line {i}: values must be numbers, got {row!r}"
            ) from None
    if progress is not None:
        progress(total, total)
    return header, np.array(body)


def _check_csv_size(path: Path, chunk: int = 1 << 22) -> None:
    """Refuses a csv file over the byte or row limits, counting lines in bounded chunks
    before anything is parsed."""
    where = repr(str(path))
    size = path.stat().st_size
    check_limit("max_file_bytes", size, f"{where}: bytes")
    lines = 0
    last = b"\n"
    with open(path, "rb") as f:
        while block := f.read(chunk):
            lines += block.count(b"\n")
            last = block[-1:]
    lines += last != b"\n"  # a last line without a newline
    check_limit("max_rows", max(lines - 1, 0), f"{where}: data rows")


def _group_columns(header: list[str], data: np.ndarray, where: str) -> dict[str, np.ndarray]:
    """Columns by name, ``name[i]`` columns gathered into one ``(N, d)`` array ``name``."""
    out: dict[str, np.ndarray] = {}
    grouped: dict[str, dict[int, np.ndarray]] = {}
    for j, name in enumerate(header):
        if name.endswith("]") and "[" in name:
            base, idx = name[:-1].split("[", 1)
            if idx.isdigit():
                cols = grouped.setdefault(base, {})
                if int(idx) in cols:
                    raise ValueError(
                        f"{where}: column names must be unique, got {name!r} for column "
                        f"{base}[{int(idx)}] twice"
                    )
                cols[int(idx)] = data[:, j]
                continue
        out[name] = data[:, j]
    for base, cols in grouped.items():
        if base in out:
            raise ValueError(
                f"{where}: column names must be unique, got {base!r} both as a column and as "
                f"columns {base}[i]"
            )
        if sorted(cols) != list(range(len(cols))):
            raise ValueError(
                f"{where}: columns {base}[i] must be numbered 0..{len(cols) - 1}, "
                f"got {sorted(cols)}"
            )
        out[base] = np.stack([cols[i] for i in range(len(cols))], axis=1)
    return out


SIMILAR = 0.8
"""``difflib`` ratio from which an unused column counts as a misspelt signal name."""


@dataclass
class Recording:
    """One recorded sequence, ready for :class:`ModelSequences`.

    Attributes:
      times: ``(N,)`` sample times (s).
      control: ``(N, nu)`` controls, ``None`` for a model without actuators.
      sensordata: The loaded sensor and joint-state signals, ``(N, D)``.
      initial_qpos, initial_qvel: ``(nq,)`` / ``(nv,)`` recorded initial state, if present.
      unused_columns: Columns that nothing reads, in file order (see :func:`load_recording`).
      hints: ``{unused column: close signal name}`` for unused columns that look like a
        signal of the model that was not loaded (a likely misspelling).
      notes: Other things worth telling the user, one line each (the experiment loader
        reports them as warnings): recorded initial-state columns left unused by a
        ``time_range`` that starts after the first sample.
      inputs: The force laws' recorded inputs (``None``: none mapped), on the control's
        timing.
      constants: The per-recording constants: a JSON log's settings, then the ones given.
    """

    times: np.ndarray
    control: TimeSeries | None
    sensordata: TimeSeries
    initial_qpos: np.ndarray | None
    initial_qvel: np.ndarray | None
    unused_columns: tuple[str, ...] = ()
    hints: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    inputs: TimeSeries | None = None
    constants: dict[str, float] = field(default_factory=dict)

    def unused_message(self) -> str:
        """A one-line description of :attr:`unused_columns` (empty when there are none)."""
        if not self.unused_columns:
            return ""
        hint = "".join(
            f"; did you mean {self.hints[c]!r} for {c!r}?"
            for c in self.unused_columns
            if c in self.hints
        )
        return (
            f"{len(self.unused_columns)} column(s) are not used: {list(self.unused_columns)} "
            f"(not the time column, a control, a model sensor or joint state){hint}"
        )


def _close(name: str, candidates: Sequence[str]) -> str | None:
    """The candidate most similar to ``name`` (ratio >= :data:`SIMILAR`), or ``None``."""
    found = difflib.get_close_matches(name, list(candidates), n=1, cutoff=SIMILAR)
    return found[0] if found else None


def _did_you_mean(name: str, candidates: Sequence[str]) -> str:
    best = _close(name, candidates)
    return f"; did you mean {best!r}?" if best else ""


def _column(
    cols: Mapping[str, np.ndarray],
    key: str | Sequence[str],
    what: str,
    n: int,
    rows: slice = slice(None),
) -> np.ndarray:
    """Column(s) ``key`` as an ``(len(rows), width)`` array: ``n`` rows in the file, the
    ``rows`` kept, which must be finite (errors give the row of the file)."""
    first = rows.start or 0
    keys = [key] if isinstance(key, str) else list(key)
    parts = []
    for k in keys:
        if k not in cols:
            raise KeyError(
                f"{what}: the recording has no column {k!r}{_did_you_mean(k, sorted(cols))}; "
                f"it has {sorted(cols)}"
            )
        arr = np.asarray(cols[k], dtype=np.float64)
        arr = arr[:, None] if arr.ndim == 1 else arr
        if arr.shape[0] != n:
            raise ValueError(
                must_be(
                    f"{what}: column {k!r}",
                    f"{n} rows (the time column's length)",
                    f"{arr.shape[0]} rows",
                )
            )
        arr = arr[rows]
        bad = np.flatnonzero(~np.all(np.isfinite(arr), axis=1))
        if bad.size:
            row = int(bad[0])
            raise ValueError(
                f"{what}: column {k!r} must be finite, got {arr[row].tolist()} in data row "
                f"{first + row + 1} of {n} ({bad.size} such row(s)); a lost or corrupt "
                "sample: drop or repair the row, or leave it out with time_range, before "
                "fitting"
            )
        parts.append(arr)
    return np.concatenate(parts, axis=1)


def _check_times(times: np.ndarray, what: str, plausible: bool = True) -> None:
    """Finite, strictly increasing sample times; with ``plausible``, a typical step over
    0.5 s is reported as probably not in seconds (the model would be simulated for hours)."""
    bad = np.flatnonzero(~np.isfinite(times))
    if bad.size:
        raise ValueError(
            f"{what} must be finite, got {float(times[bad[0]])} in data row "
            f"{int(bad[0]) + 1}; drop or repair the row"
        )
    step = np.diff(times)
    back = np.flatnonzero(step <= 0)
    if back.size:
        i = int(back[0])
        raise ValueError(
            f"{what} must be strictly increasing, got {float(times[i])!r} then "
            f"{float(times[i + 1])!r} in "
            f"data rows {i + 1} and {i + 2} ({back.size} such place(s)); a repeated or "
            "reordered sample: drop or repair it"
        )
    if plausible and step.size and float(np.median(step)) > 0.5:
        raise ValueError(
            f"{what} must be in seconds: its typical step is {float(np.median(step))!r}, "
            "which looks like milliseconds or another unit; give time_scale (experiment "
            "file: time_scale: 0.001 for ms; time_scale: 1 for a recording that really is "
            "that slow)"
        )


def check_time_gap(times: np.ndarray, what: str) -> None:
    """Refuses a time stamp far beyond the others (a glitch).

    A step between two samples is a glitch when it is larger than 10 times the span of all
    the other samples and than 1000 median steps (a stamp such as ``1e5`` at the end of a
    2 s recording would otherwise ask for ~10^8 simulated steps).

    Args:
      times: ``(N,)`` strictly increasing sample times (s).
      what: The recording, for the message.

    Raises:
      ValueError: Names the two rows, the gap and the fixes.
    """
    if times.size < 3:
        return
    step = np.diff(times)
    i = int(np.argmax(step))
    rest = float(times[-1] - times[0] - step[i])
    if step[i] > 10 * rest and step[i] > 1000 * float(np.median(step)):
        raise ValueError(
            f"{what}: time stamps must not jump far beyond the others, got "
            f"{float(times[i])!r} then {float(times[i + 1])!r} in data rows {i + 1} and "
            f"{i + 2} (a gap of {float(step[i]):.4g} s; the other samples span {rest:.4g} s): "
            "a glitched time stamp or a wrong time_scale; repair or drop the row (or leave it "
            "out with time_range)"
        )


def check_time_span(times: np.ndarray, timestep: float, what: str) -> float:
    """The simulated steps of a recording, refused over ``max_steps`` and with a glitched
    stamp (:func:`check_time_gap`), before anything is resampled or simulated.

    Args:
      times: ``(N,)`` sample times (s), after ``time_scale``.
      timestep: The model's physics step (s).
      what: The recording, for the message.

    Returns:
      The span over the timestep: the physics steps one rollout of it takes.
    """
    check_time_gap(times, what)
    span = float(times[-1] - times[0]) if times.size else 0.0
    steps = span / float(timestep)
    check_limit(
        "max_steps",
        steps,
        f"{what}: simulated steps (time span {span:.6g} s after time_scale / timestep "
        f"{float(timestep):g} s)",
    )
    return steps


def _time_rows(times: np.ndarray, time_range: Any, where: str) -> slice:
    """The rows of ``times (N,)`` (s) within ``time_range = (start, end)`` (s; ``None``: that
    end of the recording), ends included."""
    what = f"{where}: time_range"
    ok = isinstance(time_range, Sequence) and not isinstance(time_range, str)
    if not ok or len(time_range) != 2:
        raise ValueError(
            must_be(what, "[start, end] in seconds (None for an open end)", time_range)
        )
    ends = []
    for v, default in zip(time_range, (times[0], times[-1]), strict=True):
        if v is not None and not finite_real(v):
            raise ValueError(must_be(what, "two finite numbers (s) or None", list(time_range)))
        ends.append(float(default) if v is None else float(v))
    start, end = ends
    span = (float(times[0]), float(times[-1]))
    if not start < end:
        raise ValueError(must_be(what, "start < end", list(time_range)))
    # a thousandth of the smallest sample spacing: ends typed as rounded decimals (or float32)
    # still include the sample they name
    tol = 1e-3 * float(np.min(np.diff(times))) if times.size > 1 else 0.0
    if start < span[0] - tol or end > span[1] + tol:
        raise ValueError(
            must_be(
                what,
                f"within the recording's span [{span[0]!r}, {span[1]!r}] s (its own clock)",
                list(time_range),
            )
        )
    i0 = int(np.searchsorted(times, start - tol, side="left"))
    i1 = int(np.searchsorted(times, end + tol, side="right"))
    if i1 - i0 < 2:
        raise ValueError(
            must_be(
                what,
                "a range holding at least 2 samples",
                list(time_range),
                f"It holds {i1 - i0}.",
            )
        )
    return slice(i0, i1)


def load_recording(
    path: str | Path,
    model: mujoco.MjModel,
    *,
    time: str | None = None,
    time_scale: float | None = None,
    control: Mapping[str, str] | None = None,
    sensors: Mapping[str, str | Sequence[str]] | None = None,
    ignore_columns: Sequence[str] = (),
    time_range: tuple[float | None, float | None] | None = None,
    command_timing: CommandTiming = "held",
    retime: float | bool | None = None,
    resample: float | None = None,
    jitter_tolerance: float = JITTER_TOLERANCE,
    source: LogSource | None = None,
    inputs: Mapping[str, str] | Sequence[str] | None = None,
    constants: Mapping[str, float] | None = None,
    progress: Progress | None = None,
) -> Recording:
    """Reads a recording and maps its columns onto the model's actuators and sensors.

    Every column must have a use (see *Unused columns* in the module docstring). The timing
    options are described in :mod:`mjsysid.data.timing`; they apply in this order: retime,
    command timing ``"before"`` (on the file's rows), resample, latency.

    Args:
      path: ``.npz`` or ``.csv`` file (or a robot log with ``source``).
      model: The compiled model (for names and widths).
      time: Name of the time column (default: the first of ``time``, ``t``, ``times``).
      time_scale: Seconds per unit of the time column (``1e-3`` for milliseconds). Default:
        seconds, and a typical step over 0.5 s is refused as probably another unit (pass
        ``time_scale=1.0`` for a recording that really is that slow).
      control: ``{actuator: column}``; default ``ctrl.<actuator>`` or ``<actuator>`` for every
        actuator (all actuators are required).
      sensors: ``{signal: column or [columns]}``; default every model sensor and joint state
        (``<joint>_qpos``/``_qvel``) with a column of that name.
      ignore_columns: Columns to leave out without a warning; each must exist and not be
        used otherwise.
      time_range: ``(start, end)`` in seconds (after ``time_scale``; ``None``: that end of the
        recording): keep the samples in this range, ends included, e.g. to leave out an
        impact or a settling phase at the start, or a corrupt tail (values outside it are
        not checked; the time column must be valid throughout). After a range that starts
        past the first sample, ``initial_qpos`` / ``initial_qvel`` columns (the state at the
        first sample) are not used, and :attr:`Recording.notes` says so: the initial state
        comes from the sensors at ``start``.
      command_timing: ``"held"`` (row k's command acts from sample k), ``"before"`` (it
        acted from sample k-1 to k) or a latency in seconds.
      retime: The rows were sampled every ``retime`` s (``True``: estimate the period) and
        only their stamps jitter: snap them onto a regular grid.
      resample: Interpolate onto a grid of this step (s): sensors linearly, controls held.
      jitter_tolerance: Spread of the time steps, as a fraction of the median step, above
        which a :class:`~mjsysid.data.timing.TimingWarning` is issued.
      source: Read ``path`` as a robot log (MCAP file or ROS 2 bag) through this mapping
        (:mod:`mjsysid.data.robot_logs`).
      inputs: The force laws' recorded inputs (a servo's goal, a torque-enable flag): ``{input:
        column}`` or the names of columns read under their own names. They are commands:
        held between rows, on the controls' timing (``command_timing``, ``resample``).
      constants: The per-recording constants the force laws read (``{"kp": 32}``); a JSON
        log's top-level numbers are constants too (the ones given here win).
      progress: Called as ``progress(rows parsed, rows)`` while a csv file is read (see
        :func:`read_columns`); e.g. a :class:`~mjsysid.util.progress.ProgressBar`.

    Raises:
      KeyError: A named column or signal does not exist (lists what does).
      ValueError: Lengths or widths do not match, no sensor column was found, a column looks
        like a misspelt model sensor, ``ignore_columns`` names a used column, a time stamp
        jumps far beyond the others or the span needs more than ``max_steps`` physics steps
        (:func:`check_time_span`).

    Warns:
      TimingWarning: The time stamps jitter beyond ``jitter_tolerance``.
    """
    where = f"recording {str(path)!r}"
    cols, settings = _read_all(path, model, control, source, ignore_columns, progress)
    src = _time_axis(cols, time, time_scale, time_range, where)
    check_time_span(src.times, model.opt.timestep, where)
    if retime is not None and retime is not False:
        src.times = _retimed(src.times, retime, where, src.notes)
    ctrl_ts = _load_controls(model, src, control) if model.nu else None
    inputs_ts = _load_inputs(src, inputs)
    signals = _choose_signals(model, cols, sensors)
    src.used.update(k for key in signals.chosen.values() for k in _keys(key))
    unused = _unused_columns(src, signals, ignore_columns, default=sensors is None)
    unloaded = [x for x in signals.sensor_names + signals.state_names if x not in signals.chosen]
    hints = {c: m for c in unused if (m := _close(c, unloaded)) is not None}
    sens_ts = _load_signals(model, src, signals.chosen)
    timed = _apply_timing(
        _Timing(sens_ts, ctrl_ts, where, src.notes, inputs_ts),
        command_timing,
        resample,
        jitter_tolerance,
    )
    sens_ts, ctrl_ts = timed.sensors, timed.control
    qpos0 = None if "initial_qpos" in src.late else cols.get("initial_qpos")
    qvel0 = None if "initial_qvel" in src.late else cols.get("initial_qvel")
    return Recording(
        sens_ts.times,
        ctrl_ts,
        sens_ts,
        None if qpos0 is None else np.asarray(qpos0, dtype=np.float64).reshape(-1),
        None if qvel0 is None else np.asarray(qvel0, dtype=np.float64).reshape(-1),
        tuple(unused),
        hints,
        tuple(src.notes),
        timed.inputs,
        settings | _constants(constants, where),
    )


def _load_inputs(
    src: _Source, inputs: Mapping[str, str] | Sequence[str] | None
) -> TimeSeries | None:
    """The mapped input columns as one series (``None`` without)."""
    if inputs is None:
        return None
    if isinstance(inputs, str):
        raise TypeError(must_be("inputs", "a mapping of inputs to columns or a list", inputs))
    pairs = dict(inputs) if isinstance(inputs, Mapping) else {c: c for c in inputs}
    if not pairs:
        return None
    data, layout = [], []
    for name, column in pairs.items():
        if column not in src.cols:
            raise KeyError(
                f"{src.where}: inputs: no column {column!r} for input {name!r}"
                f"{_did_you_mean(column, sorted(src.cols))}; columns: {sorted(src.cols)}"
            )
        values = src.column(column)
        data.append(values)
        layout.append((name, values.shape[1]))
        src.used.add(column)
    return TimeSeries.from_custom_map(src.times, np.concatenate(data, axis=1), layout)


def _constants(constants: Mapping[str, float] | None, where: str) -> dict[str, float]:
    out = {}
    for name, value in (constants or {}).items():
        if not finite_real(value):
            raise ValueError(must_be(f"{where}: constants[{name!r}]", "a finite number", value))
        out[str(name)] = float(value)
    return out


def _read_all(
    path: str | Path,
    model: mujoco.MjModel,
    control: Mapping[str, str] | None,
    source: LogSource | None,
    ignore_columns: Sequence[str],
    progress: Progress | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The file's columns (a robot log's through ``source``; ``ignore_columns`` checked) and
    its settings (a JSON log's top-level numbers)."""
    where = f"recording {str(path)!r}"
    if isinstance(ignore_columns, str):
        raise TypeError(must_be("ignore_columns", "a list of column names", ignore_columns))
    settings: dict[str, float] = {}
    if source is not None:
        cols = read_log_columns(path, source, hold=_control_candidates(model, control))
    elif Path(path).suffix.lower() == ".json":
        log = read_json_log(path)
        cols, settings = log.columns, log.settings
    else:
        cols = read_columns(path, progress)
    for c in ignore_columns:
        if c not in cols:
            raise KeyError(
                f"{where}: ignore_columns names {c!r}, which is not a column"
                f"{_did_you_mean(c, sorted(cols))}; columns: {sorted(cols)}"
            )
    return cols, settings


@dataclass
class _Timing:
    """The loaded series while :func:`load_recording` applies the timing options.

    Attributes:
      sensors: The sensor and joint-state series.
      control: The control series (``None`` without actuators).
      where: ``"recording '<path>'"`` for messages.
      notes: :attr:`Recording.notes` (appended to).
      inputs: The force laws' recorded inputs (timed as the control).
    """

    sensors: TimeSeries
    control: TimeSeries | None
    where: str
    notes: list[str]
    inputs: TimeSeries | None = None


def _apply_timing(
    state: _Timing, command_timing: Any, resample: float | None, tolerance: float
) -> _Timing:
    """Command timing, resampling and the jitter check, in that order (see load_recording)."""
    try:
        timing = parse_command_timing(command_timing)
    except ValueError as e:
        raise ValueError(f"{state.where}: {e}") from None
    if timing == "before" and state.control is not None:
        state.control, note = apply_command_timing(state.control, "before")
        state.notes.append(note)
    if timing == "before" and state.inputs is not None:
        state.inputs = apply_command_timing(state.inputs, "before")[0]
    if resample is not None:
        state.sensors, state.control = resample_recording(state.sensors, state.control, resample)
        if state.inputs is not None:
            held = state.inputs.get(state.sensors.times, method="zoh", hold=True)[1]
            state.inputs = TimeSeries(state.sensors.times, held, state.inputs.signal_mapping)
    if isinstance(timing, float) and state.control is not None:
        state.control, note = apply_command_timing(state.control, timing)
        if note:
            state.notes.append(note)
    if isinstance(timing, float) and state.inputs is not None:
        state.inputs = apply_command_timing(state.inputs, timing)[0]
    if len(state.sensors) > 2:
        found, notes = clock_messages(state.sensors.times, state.where, tolerance)
        state.notes.extend(notes)
        for message in found:
            warnings.warn(TimingWarning(message), stacklevel=3)
    return state


def _retimed(times: np.ndarray, retime: float | bool, where: str, notes: list[str]) -> np.ndarray:
    """``retime`` applied to ``times``; how far it moved the rows is a note, or a
    :class:`TimingWarning` beyond :data:`~mjsysid.data.clock.RETIME_MAX_MOVE` periods."""
    dt = None if retime is True else float(retime)
    plan = retime_plan(times, dt)
    if plan.times is None:
        retime_times(times, dt)  # raises the reason
    text = f"{where}: retime: {retime!r} {plan.describe_move()} (the largest move)"
    if plan.refused:
        warnings.warn(
            TimingWarning(
                f"{text}: it does not fit this clock: {plan.refused}. The stamps as logged are "
                "probably the better times; remove retime (mjsysid check compares both)"
            ),
            stacklevel=4,
        )
    else:
        notes.append(text)
    assert plan.times is not None  # (checked above)
    return plan.times


def _control_candidates(model: mujoco.MjModel, control: Mapping[str, str] | None) -> set[str]:
    """The column names :func:`load_recording` may read as controls (held when resampled)."""
    cmap = dict(control or {})
    out: set[str] = set()
    for i in range(model.nu):
        a = model.actuator(i).name
        out.update([cmap[a]] if cmap.get(a) else [f"ctrl.{a}", a])
    return out


@dataclass
class _Source:
    """The columns of one recording while :func:`load_recording` maps them.

    Attributes:
      cols: All columns of the file.
      where: ``"recording '<path>'"`` for messages.
      n: Number of samples in the file.
      rows: The samples kept (``time_range``).
      times: ``(len(rows),)`` kept sample times [s].
      late: The initial-state columns a late ``time_range`` start leaves unused.
      notes: :attr:`Recording.notes`.
      used: Names of the columns used so far.
    """

    cols: dict[str, np.ndarray]
    where: str
    n: int
    rows: slice
    times: np.ndarray
    late: list[str]
    notes: list[str]
    used: set[str]

    def column(self, key: str | Sequence[str]) -> np.ndarray:
        """The kept rows of column(s) ``key``, ``(len(rows), d)``."""
        return _column(self.cols, key, self.where, self.n, self.rows)


def _keys(key: str | Sequence[str]) -> list[str]:
    return [key] if isinstance(key, str) else list(key)


def _time_axis(
    cols: dict[str, np.ndarray],
    time: str | None,
    time_scale: float | None,
    time_range: tuple[float | None, float | None] | None,
    where: str,
) -> _Source:
    """Finds and checks the time column, applies ``time_scale`` and ``time_range``."""
    tkey = time or next((k for k in TIME_KEYS if k in cols), None)
    if tkey is None or tkey not in cols:
        raise KeyError(f"{where}: no time column {time or TIME_KEYS!r}; it has {sorted(cols)}")
    scale = 1.0 if time_scale is None else time_scale
    if not (finite_real(scale) and scale > 0):
        raise ValueError(must_be("time_scale", "a finite number > 0 (s per unit)", time_scale))
    raw = np.asarray(cols[tkey], dtype=np.float64).reshape(-1)  # errors quote the file's units
    _check_times(raw, f"{where}: time column {tkey!r}", plausible=time_scale is None)
    times = raw * float(scale)
    n = times.size
    rows = slice(0, n) if time_range is None else _time_rows(times, time_range, where)
    notes: list[str] = []
    late: list[str] = [c for c in ("initial_qpos", "initial_qvel") if c in cols and rows.start > 0]
    if late:
        notes.append(
            f"time_range starts at {float(times[rows.start])!r} s, after the first sample: "
            f"the columns {late} (the state at {float(times[0])!r} s) are not used, the "
            "initial state comes from the sensors at the range's start (or initial_state:)"
        )
    used = {tkey, "initial_qpos", "initial_qvel"}
    return _Source(cols, where, n, rows, times[rows], late, notes, used)


def _load_controls(
    model: mujoco.MjModel, src: _Source, control: Mapping[str, str] | None
) -> TimeSeries:
    """The control of every actuator: mapped column, else ``ctrl.<actuator>`` or ``<actuator>``."""
    cols, where = src.cols, src.where
    names = [model.actuator(i).name for i in range(model.nu)]
    cmap = dict(control) if control is not None else {}
    unknown = sorted(set(cmap) - set(names))
    if unknown:
        raise KeyError(
            f"{where}: control names {unknown} are not actuators of the model; actuators: {names}"
        )
    data = []
    for a in names:
        mapped = cmap.get(a)
        candidates = [mapped] if mapped else [f"ctrl.{a}", a]
        key = next((k for k in candidates if k in cols), None)
        if key is None:
            spare = [c for c in cols if c not in src.used]
            best = next((m for k in candidates if (m := _close(k, spare))), None)
            looked = " or ".join(repr(k) for k in candidates)
            raise KeyError(
                f"{where}: no control column for actuator {a!r} (looked for {looked}"
                f"{f'; did you mean {best!r}?' if best else ''}); map it under control: "
                f"in the experiment file; the recording has columns {sorted(cols)}"
            )
        data.append(src.column(key))
        src.used.add(key)
    return TimeSeries.from_control_names(src.times, np.concatenate(data, axis=1), model)


@dataclass
class _Signals:
    """The sensor and joint-state signals to load.

    Attributes:
      chosen: ``{signal: column or [columns]}``.
      sensor_names: The model's named sensors.
      state_names: ``<joint>_qpos`` / ``<joint>_qvel`` of the model's named joints.
    """

    chosen: dict[str, str | Sequence[str]]
    sensor_names: list[str]
    state_names: list[str]


def _choose_signals(
    model: mujoco.MjModel,
    cols: dict[str, np.ndarray],
    sensors: Mapping[str, str | Sequence[str]] | None,
) -> _Signals:
    """``sensors`` if given, else every model sensor and joint state with a column of its name."""
    sensor_names = [model.sensor(i).name for i in range(model.nsensor) if model.sensor(i).name]
    state_names = [
        f"{model.joint(j).name}{suffix}"
        for j in range(model.njnt)
        if model.joint(j).name
        for suffix in ("_qpos", "_qvel")
    ]
    if sensors is None:
        chosen: dict[str, str | Sequence[str]] = {s: s for s in sensor_names if s in cols}
        for s in state_names:
            if s in cols and s not in chosen:
                chosen[s] = s
    else:
        chosen = dict(sensors)
    return _Signals(chosen, sensor_names, state_names)


def _unused_columns(
    src: _Source, signals: _Signals, ignore_columns: Sequence[str], *, default: bool
) -> list[str]:
    """Columns nothing reads; errors for a used ignored column and (``default`` sensor
    matching) for a likely misspelt model sensor or no signal at all."""
    unused = [c for c in src.cols if c not in src.used and c not in ignore_columns]
    clash = [c for c in ignore_columns if c in src.used]
    if clash:
        raise ValueError(
            must_be(
                f"{src.where}: ignore_columns",
                "columns that nothing else reads",
                clash,
                "these are the time, control, sensor or initial-state columns",
            )
        )
    if default:
        missing = [s for s in signals.sensor_names if s not in src.cols]
        typos = {c: m for c in unused if (m := _close(c, missing)) is not None}
        if typos:
            raise ValueError(_typo_message(src.where, typos))
        if not signals.chosen:
            raise ValueError(
                f"{src.where}: must contain at least one column named like a model sensor "
                f"or joint state, got columns {sorted(src.cols)}"
            )
    return unused


def _typo_message(where: str, typos: dict[str, str]) -> str:
    """Unused columns ``typos`` that look like the model sensors they map to."""
    many = len(typos) > 1
    found = ", ".join(repr(c) for c in typos)
    meant = ", ".join(repr(m) for m in typos.values())
    return (
        f"{where}: column{'s' if many else ''} {found} {'are' if many else 'is'} not "
        f"used: did you mean the model sensor{'s' if many else ''} {meant} (which "
        f"{'have' if many else 'has'} no column)? Without it the fit would leave "
        f"{'those sensors' if many else 'that sensor'} out; rename the column, map it "
        "under sensors: (e.g. sensors: {"
        f"{next(iter(typos.values()))}: {next(iter(typos))}"
        "}) or list it under ignore_columns:"
    )


def _load_signals(
    model: mujoco.MjModel, src: _Source, chosen: dict[str, str | Sequence[str]]
) -> TimeSeries:
    """The chosen signals' columns, each checked against the signal's width."""
    names_typed = []
    blocks = []
    for sig, key in chosen.items():
        canonical, stype = resolve_signal_name(model, sig)
        width = len(signal_source_indices(model, canonical, stype))
        block = src.column(key)
        if block.shape[1] != width:
            raise ValueError(
                must_be(f"{src.where}: signal {sig!r}", f"{width} columns", f"{block.shape[1]}")
            )
        names_typed.append((canonical, stype))
        blocks.append(block)
    return TimeSeries.from_names(
        src.times, np.concatenate(blocks, axis=1), model, names=names_typed
    )


def initial_state_from_sensors(
    model: mujoco.MjModel, sens: TimeSeries, *, fill: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(qpos, qvel)`` at the first sample, from joint sensors and joint-state columns.

    Entries without a measurement are ``fill`` when given, else ``qpos0`` and zero velocity.
    """
    qpos, qvel = model.qpos0.copy(), np.zeros(model.nv)
    if fill is not None:
        qpos[:], qvel[:] = fill, fill
    assert sens.signal_mapping is not None
    for name, (stype, cols) in sens.signal_mapping.items():
        first = sens.data[0, cols]
        if stype == SignalType.MjStateQPos:
            qpos[signal_source_indices(model, name, stype)] = first
        elif stype == SignalType.MjStateQVel:
            qvel[signal_source_indices(model, name, stype)] = first
        elif stype == SignalType.MjSensor:
            i = model.sensor(name).id
            if int(model.sensor_objtype[i]) != int(mujoco.mjtObj.mjOBJ_JOINT):
                continue
            j = int(model.sensor_objid[i])
            if int(model.jnt_type[j]) not in (
                int(mujoco.mjtJoint.mjJNT_HINGE),
                int(mujoco.mjtJoint.mjJNT_SLIDE),
            ):
                continue
            if int(model.sensor_type[i]) == int(mujoco.mjtSensor.mjSENS_JOINTPOS):
                qpos[model.jnt_qposadr[j]] = first[0]
            elif int(model.sensor_type[i]) == int(mujoco.mjtSensor.mjSENS_JOINTVEL):
                qvel[model.jnt_dofadr[j]] = first[0]
    return qpos, qvel


def write_recording(
    path: str | Path,
    model: mujoco.MjModel,
    times: np.ndarray,
    control: np.ndarray,
    sensordata: np.ndarray,
    *,
    initial_qpos: np.ndarray | None = None,
    initial_qvel: np.ndarray | None = None,
) -> Path:
    """Writes a recording in the layout :func:`load_recording` reads by default.

    ``sensordata`` holds all model sensors, ``(N, nsensordata)``; ``control`` is ``(N, nu)``.
    The format follows the extension: ``.npz`` or ``.csv``.
    """
    path = Path(path)
    cols: dict[str, np.ndarray] = {"time": np.asarray(times, dtype=np.float64)}
    for i in range(model.nu):
        cols[f"ctrl.{model.actuator(i).name}"] = control[:, i]
    for i in range(model.nsensor):
        s = model.sensor(i)
        name = s.name or f"sensor{i}"
        adr, dim = int(model.sensor_adr[i]), int(model.sensor_dim[i])
        cols[name] = sensordata[:, adr] if dim == 1 else sensordata[:, adr : adr + dim]
    if path.suffix.lower() == ".npz":
        if initial_qpos is not None:
            cols["initial_qpos"] = np.asarray(initial_qpos, dtype=np.float64)
        if initial_qvel is not None:
            cols["initial_qvel"] = np.asarray(initial_qvel, dtype=np.float64)
        return atomic_savez(path, cols)
    if path.suffix.lower() != ".csv":
        raise ValueError(must_be("path", "a .npz or .csv file name", str(path)))
    header, columns = [], []
    for k, v in cols.items():
        if v.ndim == 1:
            header.append(k)
            columns.append(v)
        else:
            for j in range(v.shape[1]):
                header.append(f"{k}[{j}]")
                columns.append(v[:, j])
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(header)
    for row in np.stack(columns, axis=1):
        w.writerow([repr(float(x)) for x in row])
    return atomic_write_text(path, out.getvalue())
