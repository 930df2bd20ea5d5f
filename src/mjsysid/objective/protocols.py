"""Named callback protocols used across mjsysid.

Each protocol documents the exact call signature mjsysid uses, so type checkers and readers
know what a callback receives and must return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import mujoco
import numpy as np

if TYPE_CHECKING:
    from mjsysid.data.timeseries import TimeSeries
    from mjsysid.params.parameter import Parameter, ParameterDict
    from mjsysid.sim.rollout import SystemTrajectory


class ModifierFn(Protocol):
    """Writes a parameter's current value into an ``MjSpec``.

    Called as ``modifier(spec, param)``; ``param.value`` is a 1-D float array. A modifier must
    set absolute values (``joint.damping[0] = p.value[0]``), never accumulate
    (``*= p.value[0]``): mjsysid calls it many times on the same working spec.
    """

    def __call__(self, spec: mujoco.MjSpec, param: Parameter, /) -> None: ...


class ModelModifierFn(Protocol):
    """Optional fast path: writes a parameter's value into a compiled ``MjModel``.

    Called as ``model_modifier(model, param)`` on a private compiled model. It must have
    exactly the effect the spec modifier plus a recompile would have (mjsysid calls
    ``mj_setConst`` afterwards to refresh derived constants), and it must write every field it
    can change, whatever the value: the residual function reuses its candidate models and
    rewrites only the parameters whose values changed.
    """

    def __call__(self, model: mujoco.MjModel, param: Parameter, /) -> None: ...


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
