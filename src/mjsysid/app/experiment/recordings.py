"""One ``sequences[i]`` entry's recording: its file, its column and timing options (robot
logs included), read with :func:`~mjsysid.data.recording.load_recording`, its warnings
(unused columns, commands outside ``ctrlrange``) and its simulated steps checked."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

import mujoco
import numpy as np
from pydantic import Field

from mjsysid.app.experiment.nodes import (
    ExperimentError,
    Keys,
    Loading,
    Must,
    Number,
    Positive,
    within_limit,
)
from mjsysid.data.recording import check_time_gap, load_recording
from mjsysid.data.robot_logs import FORMATS, STAMPS, LogSource
from mjsysid.data.timing import TimingWarning

Column = Annotated[str, Must("a column name (str)")]


class LogSourceKeys(Keys):
    """``source:`` which message fields of a robot log fill which columns
    (:class:`~mjsysid.data.robot_logs.LogSource`, docs/robot-logs.md)."""

    format: Literal[FORMATS] | None = None  # type: ignore[valid-type]
    stamp: Annotated[
        Literal[STAMPS],  # type: ignore[valid-type]
        Must(
            "'header' (the message's header.stamp: the device's clock) or 'receive' (when the "
            "logger received it: the host's clock); declare which"
        ),
    ]
    columns: dict[str, str] = Field(default_factory=dict)
    joint_states: str | None = None
    joints: dict[str, str] | None = None
    grid: Annotated[str | float, Must("a topic or a step > 0 (s)")] | None = None


_TIMING = (
    "'held' (row k's command acts from sample k), 'before' (it acted before sample k, from "
    "sample k-1) or a latency in seconds"
)
_START_END: dict[str, Any] = {"items": {"type": ["number", "null"]}}  # (checked when read)


class RecordingKeys(Keys):
    """The keys of a ``sequences[i]`` entry that say how its recording is read (see
    :func:`~mjsysid.data.recording.load_recording`, docs/timing.md)."""

    file: Annotated[str, Must("a .npz or .csv path")]
    control: Annotated[dict[str, str], Must("a mapping of actuators to columns")] | None = None
    sensors: (
        Annotated[
            dict[str, Annotated[str | list[str], Must("a column or a list of columns")]],
            Must("a mapping of signals to columns"),
        ]
        | None
    ) = None
    ignore_columns: Annotated[list[Column], Must("a list of column names")] = Field(
        default_factory=list
    )
    time: str | None = None
    time_scale: Annotated[float, Must("a number (s per unit)")] | None = None
    time_range: (
        Annotated[
            list[Any],
            Field(min_length=2, max_length=2, json_schema_extra=_START_END),
            Must("[start, end] in seconds (null for an open end)"),
        ]
        | None
    ) = None
    command_timing: Annotated[Literal["held", "before"] | float, Must(_TIMING)] | None = None
    retime: Annotated[bool | float, Must("true or a period (s)")] | None = None
    resample: Positive | None = None
    jitter_tolerance: Positive | None = None
    source: LogSourceKeys | None = None
    inputs: (
        Annotated[
            dict[str, str] | list[str],
            Must("a mapping of force-law inputs to columns, or a list of columns"),
        ]
        | None
    ) = None
    constants: Annotated[dict[str, Number], Must("a mapping of names to numbers")] | None = None


def recording_file(keys: RecordingKeys, where: str, ld: Loading) -> Path:
    rec_file = ld.base / keys.file
    is_log = keys.source is not None  # a robot log may be a bag folder
    if not (rec_file.is_file() or (is_log and rec_file.is_dir())):
        what = "is not a file" if rec_file.exists() else "no such file"
        rel = "" if Path(keys.file).is_absolute() else ", relative to the experiment file"
        raise FileNotFoundError(
            f"{ld.source}: {where}.file: {what} {str(rec_file.absolute())!r} "
            f"(the file says {keys.file!r}{rel})"
        )
    return rec_file


# the keys of a ``sequences[i]`` entry passed to load_recording as they are (where given)
_LOAD_KEYS = (
    "time",
    "time_scale",
    "control",
    "sensors",
    "ignore_columns",
    "inputs",
    "constants",
    "command_timing",
    "retime",
    "resample",
    "jitter_tolerance",
)


def _load_options(keys: RecordingKeys, where: str) -> dict[str, Any]:
    """The keywords of :func:`~mjsysid.data.recording.load_recording` for one
    ``sequences[i]`` entry: its column keys, ``time_range``, the timing keys and ``source``
    (see docs/timing.md and docs/robot-logs.md); a key not given keeps the function's
    default."""
    out = {k: getattr(keys, k) for k in _LOAD_KEYS if getattr(keys, k) is not None}
    if keys.time_range is not None:
        out["time_range"] = tuple(keys.time_range)
    if keys.source is not None:
        try:
            out["source"] = LogSource(**keys.source.model_dump(exclude_unset=True))
        except (TypeError, ValueError) as e:
            raise ExperimentError(f"{where}.source: {e}") from None
    return out


def read_recording(keys: RecordingKeys, where: str, rec_file: Path, ld: Loading) -> Any:
    """The recording of one ``sequences[i]`` entry, read with its column options."""
    options = _load_options(keys, f"{ld.source}: {where}")
    bar = ld.progress(f"reading {rec_file.name!r}") if ld.progress is not None else None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TimingWarning)
            rec = load_recording(rec_file, ld.model, progress=bar, **options)
        for w in caught:
            if issubclass(w.category, TimingWarning):
                ld.warnings.append(f"{ld.source}: {where}: {w.message}")
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return rec
    except KeyError as e:
        raise ExperimentError(f"{ld.source}: {where}: {e.args[0]}") from None
    except ValueError as e:
        raise ExperimentError(f"{ld.source}: {where}: {e}") from None
    finally:
        close = getattr(bar, "close", None)
        if callable(close):
            close()


def recording_warnings(where: str, rec: Any, rec_file: Path, ld: Loading) -> None:
    prefix = f"{ld.source}: {where} ({str(rec_file)!r})"
    ld.notes += [f"{prefix}: {n}" for n in rec.notes]
    if rec.control is not None:
        ld.warnings += [f"{prefix}: {n}" for n in _outside_ctrlrange(ld.model, rec.control.data)]
    if rec.unused_columns:
        ld.warnings.append(
            f"{ld.source}: {where} ({str(rec_file)!r}): {rec.unused_message()}; list "
            f"them under {where}.ignore_columns if that is intended"
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


def check_span(where: str, times: np.ndarray, rec_file: Path, ld: Loading) -> float:
    """The simulated steps of one recording, checked against ``max_steps``."""
    what = f"{ld.source}: {where} ({str(rec_file)!r})"
    try:
        check_time_gap(times, what)  # load_recording checks it too; time_range can hide it
    except ValueError as e:
        raise ExperimentError(str(e)) from None
    dt = float(ld.model.opt.timestep)
    span = float(times[-1] - times[0]) if times.size else 0.0
    steps = span / dt
    within_limit(
        "max_steps",
        steps,
        f"{what}: simulated steps (time span {span:.6g} s after time_scale / timestep {dt:g} s)",
    )
    return steps
