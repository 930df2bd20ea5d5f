"""The ``shooting:`` key: multiple-shooting options, the windows they cut and their
initial-state parameters."""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np

from mjsysid.app.experiment.limits import _limited
from mjsysid.app.experiment.loading import _Loading
from mjsysid.app.experiment.nodes import ExperimentError, _Node, _positive_number
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import SignalType
from mjsysid.objective.initial_state import initial_state_params
from mjsysid.objective.signal_transform import SignalTransform
from mjsysid.objective.windows import split_windows
from mjsysid.params.parameter import ParameterDict


def _shooting_options(top: _Node) -> dict[str, Any] | None:
    node = top.child("shooting")
    if node is None:
        return None
    window = _positive_number(node, "window", None)
    overlap = node.get("overlap", float, None, expected="a number of seconds")
    if overlap is not None:
        if window is None:
            raise ExperimentError(
                f"{node.source}: shooting.overlap needs shooting.window (the window length "
                f"in seconds), got overlap {overlap!r} without a window"
            )
        if not (math.isfinite(overlap) and 0 <= overlap < window):
            raise node.err("overlap", f"a number of seconds in [0, window={window:g})", overlap)
    opts = {
        "window": window,
        "overlap": 0.0 if overlap is None else overlap,
        "estimate_initial_state": node.get("estimate_initial_state", bool, True),
        "qpos_margin": _positive_number(node, "qpos_margin", 0.2),
        "qvel_margin": _positive_number(node, "qvel_margin", 2.0),
    }
    if "estimate_activation" in node.data:  # (absent: as before, when the model has any)
        opts["estimate_activation"] = node.get("estimate_activation", bool)
    node.finish()
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
    _limited(
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
    ld: _Loading, sequences: ModelSequences, transform: SignalTransform
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


def _shoot(
    ld: _Loading,
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
