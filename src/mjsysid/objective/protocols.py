"""Named callback protocols used across mjsysid.

Each protocol documents the exact call signature mjsysid uses, so type checkers and readers
know what a callback receives and must return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import mujoco
import numpy as np

from mjsysid.data.timeseries import TimeSeries
from mjsysid.params.parameter import ModelModifierFn, ModifierFn, ParameterDict
from mjsysid.sim.rollout import SystemTrajectory

__all__ = [
    "BuildModelFn",
    "CustomRolloutFn",
    "ModelModifierFn",
    "ModifierFn",
    "ModifyResidualFn",
]


class BuildModelFn(Protocol):
    """Turns parameters and a spec into a compiled model (default: ``apply_param_modifiers``)."""

    def __call__(self, params: ParameterDict, spec: mujoco.MjSpec, /) -> mujoco.MjModel: ...


class ModifyResidualFn(Protocol):
    """Custom residual for one sequence and one candidate.

    Called as ``fn(params, sensordata_predicted, sensordata_measured, model, return_pred_all,
    state=state, sensor_weights=weights)`` where the predicted series is on the simulation grid
    and the measured one is the recording. ``state`` has shape ``(nstep, nstate)`` (full physics
    state at each predicted time). Returns ``(residual, predicted, measured)``: a 1-D (or 2-D,
    flattened by the caller) residual array and the two aligned series it was computed from.
    The residual length must not depend on the parameter values.
    """

    def __call__(
        self,
        params: ParameterDict,
        sensordata_predicted: TimeSeries,
        sensordata_measured: TimeSeries,
        model: mujoco.MjModel,
        return_pred_all: bool,
        /,
        *,
        state: TimeSeries | None = None,
        sensor_weights: Mapping[str, Any] | None = None,
    ) -> tuple[np.ndarray, TimeSeries, TimeSeries]: ...


class CustomRolloutFn(Protocol):
    """Replaces the built-in batched rollout.

    Called as ``fn(models, datas, control_signal, initial_states, param_dicts)`` with ``models``
    a list of ``nbatch`` compiled models, ``datas`` one ``MjData`` per thread, ``control_signal``
    of shape ``(nbatch, nstep, nu)``, ``initial_states`` of shape ``(nbatch, nstate)`` and
    ``param_dicts`` the candidate ``ParameterDict`` of each model. Returns one
    ``SystemTrajectory`` per model.
    """

    def __call__(
        self,
        models: Sequence[mujoco.MjModel],
        datas: Sequence[mujoco.MjData],
        control_signal: np.ndarray,
        initial_states: np.ndarray,
        param_dicts: Sequence[ParameterDict],
        /,
    ) -> Sequence[SystemTrajectory]: ...
