"""The ``shooting:`` key: multiple-shooting options, the windows they cut and their
initial-state parameters."""

from __future__ import annotations

import math
from typing import Annotated, Any

import mujoco
import numpy as np
from pydantic import model_validator

from mjsysid.app.experiment.nodes import (
    ExperimentError,
    Keys,
    Loading,
    Must,
    Positive,
    mistake,
    said,
    within_limit,
)
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import SignalType
from mjsysid.objective.initial_state import initial_state_params
from mjsysid.objective.signal_transform import SignalTransform
from mjsysid.objective.windows import split_windows
from mjsysid.params.parameter import ParameterDict


class ShootingKeys(Keys):
    """``shooting:`` multiple shooting (see :mod:`mjsysid.app.experiment`)."""

    window: Positive | None = None
    overlap: Annotated[float, Must("a number of seconds")] | None = None
    estimate_initial_state: bool = True
    qpos_margin: Positive = 0.2
    qvel_margin: Positive = 2.0
    estimate_activation: bool | None = None

    @model_validator(mode="after")
    def _overlap_within_window(self) -> ShootingKeys:
        overlap, window = self.overlap, self.window
        if overlap is None:
            return self
        if window is None:
            raise said(
                "{path}.overlap needs {path}.window (the window length in seconds), got "
                f"overlap {overlap!r} without a window"
            )
        if not (math.isfinite(overlap) and 0 <= overlap < window):
            raise mistake("overlap", f"a number of seconds in [0, window={window:g})", overlap)
        return self


def shooting_options(keys: ShootingKeys | None) -> dict[str, Any] | None:
    """The ``shooting:`` options as :func:`shoot` takes them (``None`` without the key)."""
    if keys is None:
        return None
    opts = keys.model_dump(exclude={"estimate_activation"})
    opts["overlap"] = keys.overlap or 0.0
    if keys.estimate_activation is not None:  # (absent: as before, when the model has any)
        opts["estimate_activation"] = keys.estimate_activation
    return opts


def _apply_shooting(
    sequences: ModelSequences, opts: dict[str, Any], source: str
) -> tuple[ModelSequences, ParameterDict]:
    """The windows (or the sequences themselves) and their initial-state parameters."""
    if opts["window"] is not None:
        _check_window_count(sequences, opts, source)
        try:
            sequences = split_windows(sequences, opts["window"], overlap=opts["overlap"])
        except (KeyError, ValueError) as e:
            msg = e.args[0] if isinstance(e, KeyError) else str(e)
            raise ExperimentError(f"{source}: shooting.window: {msg}") from None
    if not opts["estimate_initial_state"]:
        return sequences, ParameterDict()
    try:
        state = initial_state_params(
            sequences,
            qpos_margin=opts["qpos_margin"],
            qvel_margin=opts["qvel_margin"],
            act=opts.get("estimate_activation"),
        )
    except (KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        raise ExperimentError(f"{source}: shooting.estimate_initial_state: {msg}") from None
    if not len(state):
        raise ExperimentError(
            f"{source}: shooting.estimate_initial_state: the model must have a hinge or slide "
            "joint whose initial state can be estimated, got none; set it to false"
        )
    return sequences, state


def _check_window_count(sequences: ModelSequences, opts: dict[str, Any], source: str) -> None:
    """Refuses more shooting windows than ``max_windows`` before any window is cut."""
    stride = opts["window"] - opts["overlap"]
    count = 0.0
    for _, _, _, meas in sequences.sequences():
        times = np.asarray(meas.times)
        span = float(times[-1] - times[0]) if times.size else 0.0
        count += max(1.0, math.ceil(span / stride))
    within_limit(
        "max_windows",
        count,
        f"{source}: shooting.window: {opts['window']!r} s with overlap {opts['overlap']!r} s "
        "gives windows",
    )


def _state_signals(model: mujoco.MjModel, meas: Any) -> set[str]:
    """Measured signals that give joint positions or velocities (read for window starts)."""
    out = set()
    for name, (stype, _) in (meas.signal_mapping or {}).items():
        if stype in (SignalType.MjStateQPos, SignalType.MjStateQVel):
            out.add(name)
        elif stype == SignalType.MjSensor and int(model.sensor_type[model.sensor(name).id]) in (
            int(mujoco.mjtSensor.mjSENS_JOINTPOS),
            int(mujoco.mjtSensor.mjSENS_JOINTVEL),
        ):
            out.add(name)
    return out


def _warn_uncorrected_starts(
    ld: Loading, sequences: ModelSequences, transform: SignalTransform
) -> None:
    first = sequences.sequences()[0][3]
    corrected = transform.signals_with_parameters(first.names)
    starts = [n for n in corrected if n in _state_signals(ld.model, first)]
    if starts:
        ld.warnings.append(
            f"{ld.source}: shooting: the window starts are read from the raw measurements of "
            f"{starts}, which sensor parameters also correct (delay, gain or bias): the "
            "starts do not get that correction; estimate_initial_state (with wide enough "
            "qpos_margin/qvel_margin) can absorb a small one"
        )


def shoot(
    ld: Loading,
    sequences: ModelSequences,
    shooting: dict[str, Any],
    params: ParameterDict,
    transform: SignalTransform | None,
) -> ModelSequences:
    """The ``shooting:`` key applied: the sequences cut into windows (said when a sensor
    transform leaves their measured starts uncorrected), the window starts' parameters
    added to ``params``."""
    if shooting.get("window") is not None and transform is not None:
        _warn_uncorrected_starts(ld, sequences, transform)
    sequences, state_params = _apply_shooting(sequences, shooting, ld.source)
    try:
        params.update(state_params)
    except ValueError as e:
        raise ExperimentError(f"{ld.source}: shooting: {e}") from None
    return sequences
