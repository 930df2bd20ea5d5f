"""One ``sequences[i]`` entry's recording: its file, its column and timing options (robot
logs included), read with :func:`~mjsysid.data.recording.load_recording`, its warnings
(unused columns, commands outside ``ctrlrange``) and its simulated steps checked."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from mjsysid.app.experiment.limits import _limited
from mjsysid.app.experiment.loading import _Loading
from mjsysid.app.experiment.nodes import ExperimentError, _Node, _positive_number
from mjsysid.data.recording import check_time_gap, load_recording
from mjsysid.data.robot_logs import LogSource
from mjsysid.data.timing import TimingWarning


def _recording_file(node: _Node, ld: _Loading) -> Path:
    raw_file = node.get("file", str, required=True, expected="a .npz or .csv path")
    rec_file = ld.base / raw_file
    is_log = "source" in node.data  # a robot log may be a bag folder
    if not (rec_file.is_file() or (is_log and rec_file.is_dir())):
        what = "is not a file" if rec_file.exists() else "no such file"
        rel = "" if Path(raw_file).is_absolute() else ", relative to the experiment file"
        raise FileNotFoundError(
            f"{ld.source}: {node.path}.file: {what} {str(rec_file.absolute())!r} "
            f"(the file says {raw_file!r}{rel})"
        )
    return rec_file


def _timing_options(node: _Node) -> dict[str, Any]:
    """``command_timing``, ``retime``, ``resample``, ``jitter_tolerance`` and ``source`` of
    one ``sequences[i]`` entry, as keywords of :func:`~mjsysid.data.recording.load_recording`
    (see docs/timing.md and docs/robot-logs.md)."""
    out: dict[str, Any] = {}
    timing = node.get(
        "command_timing",
        (str, int, float),
        None,
        expected="'held', 'before' or a latency in seconds",
    )
    if timing is not None:
        out["command_timing"] = timing
    retime = node.get("retime", (bool, int, float), None, expected="true or a period (s)")
    if retime is not None:
        out["retime"] = retime
    for key in ("resample", "jitter_tolerance"):
        value = _positive_number(node, key, None)
        if value is not None:
            out[key] = value
    if "source" in node.data:
        out["source"] = _log_source(node)
    return out


def _log_source(node: _Node) -> LogSource:
    """The ``source:`` mapping of a robot log (MCAP file or ROS 2 bag)."""
    src = node.child("source")
    assert src is not None  # the caller saw the key
    fields = {
        "format": src.get("format", str, None),
        "stamp": src.get("stamp", str, "", expected="'header' or 'receive'"),
        "columns": src.get("columns", dict, {}),
        "joint_states": src.get("joint_states", str, None),
        "joints": src.get("joints", dict, None),
        "grid": src.get("grid", (str, int, float), None),
    }
    src.finish()
    try:
        return LogSource(**fields)
    except (TypeError, ValueError) as e:
        raise ExperimentError(f"{src.source}: {src.path}: {e}") from None


def _read_recording(node: _Node, rec_file: Path, ld: _Loading) -> Any:
    """The recording of one ``sequences[i]`` entry, read with its column options."""
    cmap = node.get("control", dict, None)
    smap = node.get("sensors", dict, None)
    ignore = node.get("ignore_columns", list, [], expected="a list of column names")
    for k, c in enumerate(ignore):
        if not isinstance(c, str):
            raise node.err(f"ignore_columns[{k}]", "a column name (str)", c)
    time_key = node.get("time", str, None)
    time_scale = node.get("time_scale", (int, float), None, expected="a number (s per unit)")
    time_range = node.get(
        "time_range", list, None, expected="[start, end] in seconds (null for an open end)"
    )
    timing = _timing_options(node)
    bar = ld.progress(f"reading {rec_file.name!r}") if ld.progress is not None else None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TimingWarning)
            rec = load_recording(
                rec_file,
                ld.model,
                time=time_key,
                time_scale=time_scale,
                control=cmap,
                sensors=smap,
                ignore_columns=ignore,
                time_range=None if time_range is None else tuple(time_range),
                progress=bar,
                **timing,
            )
        for w in caught:
            if issubclass(w.category, TimingWarning):
                ld.warnings.append(f"{ld.source}: {node.path}: {w.message}")
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return rec
    except KeyError as e:
        raise ExperimentError(f"{ld.source}: {node.path}: {e.args[0]}") from None
    except ValueError as e:
        raise ExperimentError(f"{ld.source}: {node.path}: {e}") from None
    finally:
        close = getattr(bar, "close", None)
        if callable(close):
            close()


def _recording_warnings(node: _Node, rec: Any, rec_file: Path, ld: _Loading) -> None:
    notes = list(rec.notes)
    if rec.control is not None:
        notes += _outside_ctrlrange(ld.model, rec.control.data)
    ld.warnings += [f"{ld.source}: {node.path} ({str(rec_file)!r}): {n}" for n in notes]
    if rec.unused_columns:
        ld.warnings.append(
            f"{ld.source}: {node.path} ({str(rec_file)!r}): {rec.unused_message()}; list "
            f"them under {node.path}.ignore_columns if that is intended"
        )


def _outside_ctrlrange(model: mujoco.MjModel, control: np.ndarray) -> list[str]:
    """One line per limited actuator whose recorded commands ``(N, nu)`` (actuator order)
    leave its ``ctrlrange``: MuJoCo clamps them, silently, before any dynamics."""
    out = []
    for i in np.flatnonzero(model.actuator_ctrllimited):
        lo, hi = (float(v) for v in model.actuator_ctrlrange[i])
        u = control[:, i]
        tol = 1e-9 * max(1.0, abs(lo), abs(hi))
        bad = (u < lo - tol) | (u > hi + tol)
        if bad.any():
            far = float(u[bad][np.argmax(np.abs(u[bad] - 0.5 * (lo + hi)))])
            out.append(
                f"the commands of actuator {model.actuator(i).name!r} leave its ctrlrange "
                f"[{lo:g}, {hi:g}] in {int(bad.sum())} of {u.size} samples (up to {far:g}), "
                "where MuJoCo clamps them; check their units (duty cycle or PWM counts?) "
                "against the model's ctrlrange"
            )
    return out


def _check_span(node: _Node, times: np.ndarray, rec_file: Path, ld: _Loading) -> float:
    """The simulated steps of one recording, checked against ``max_steps``."""
    what = f"{ld.source}: {node.path} ({str(rec_file)!r})"
    try:
        check_time_gap(times, what)  # load_recording checks it too; time_range can hide it
    except ValueError as e:
        raise ExperimentError(str(e)) from None
    dt = float(ld.model.opt.timestep)
    span = float(times[-1] - times[0]) if times.size else 0.0
    steps = span / dt
    _limited(
        "max_steps",
        steps,
        f"{what}: simulated steps (time span {span:.6g} s after time_scale / timestep {dt:g} s)",
    )
    return steps
