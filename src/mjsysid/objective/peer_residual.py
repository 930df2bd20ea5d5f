"""``mujoco.sysid``'s functional residual API: ``residual``, ``model_residual`` and
``construct_ts_from_defaults``, on top of mjsysid's pieces.

mjsysid's own entry point is :func:`mjsysid.build_residual_fn` (a batched
:class:`~mjsysid.objective.residual.ResidualFunction`); these functions give peer code its
names and return shapes: ``(residuals, predictions, measurements)``, lists with one entry
per measured sequence. Conventions are mjsysid's: sensor row ``k`` of a rollout is stamped at
``t_k`` (the peer stamps ``t_k + dt``), the prediction is interpolated at the measured times
(the peer's ``resample_true`` is accepted; the measured data is never resampled), and
``residual`` normalises each signal by its RMS as :func:`~mjsysid.build_residual_fn` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import SignalType, TimeSeries
from mjsysid.objective.protocols import BuildModelFn, CustomRolloutFn, ModifyResidualFn
from mjsysid.objective.residual import build_residual_fn
from mjsysid.objective.signal_ops import weighted_diff
from mjsysid.params.apply import apply_param_modifiers
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.rollout import sysid_rollout
from mjsysid.sim.trajectory import SystemTrajectory
from mjsysid.util.errors import must_be

Observations = Sequence[str | tuple[str, SignalType]]
Triple = tuple[list[np.ndarray], list[TimeSeries], list[TimeSeries]]


def observation_names(enabled_observations: Observations | None) -> list[str] | None:
    """Names of ``enabled_observations`` (names or the peer's ``(name, SignalType)`` pairs);
    ``None`` or empty means all."""
    if not enabled_observations:
        return None
    return [o if isinstance(o, str) else str(o[0]) for o in enabled_observations]


def construct_ts_from_defaults(
    state_ts: TimeSeries,
    pred_sensordata: TimeSeries,
    measured_sensordata: TimeSeries,
    enabled_observations: Observations | None = None,
) -> tuple[TimeSeries, TimeSeries]:
    """``(measured, predicted)`` with the measured layout, sliced to the enabled signals.

    Each measured signal's prediction is copied from ``pred_sensordata`` (sensors, by name)
    or ``state_ts`` (``"<joint>_qpos"``, ``"<joint>_qvel"``, ``"<actuator>_act"``, by name
    in its mapping), on ``pred_sensordata``'s times.

    Raises:
      KeyError: A measured signal that neither prediction holds.
    """
    names = observation_names(enabled_observations)
    meas = measured_sensordata if names is None else measured_sensordata.slice_by_name(names)
    if meas.signal_mapping is None:
        raise ValueError(must_be("measured_sensordata", "a series with a signal mapping", None))
    width = meas.data.shape[1] if meas.data.ndim > 1 else 1
    out = np.empty((len(pred_sensordata), width))
    for name, (stype, cols) in meas.signal_mapping.items():
        src = pred_sensordata if stype == SignalType.MjSensor else state_ts
        if src.signal_mapping is None or name not in src.signal_mapping:
            raise KeyError(f"no prediction of measured signal {name!r} ({stype.name})")
        src_data = src.data if src.data.ndim > 1 else src.data[:, None]
        out[:, cols] = src_data[:, src.signal_mapping[name][1]]
    pred = TimeSeries(pred_sensordata.times, out, meas.signal_mapping)
    return meas, pred


def residual(
    x: npt.ArrayLike,
    params: ParameterDict,
    models_sequences: Sequence[ModelSequences] | ModelSequences,
    build_model: BuildModelFn = apply_param_modifiers,
    modify_residual: ModifyResidualFn | None = None,
    custom_rollout: CustomRolloutFn | None = None,
    n_threads: int = 2,
    return_pred_all: bool = False,
    resample_true: bool = True,
    sensor_weights: Mapping[str, float] | None = None,
    enabled_observations: Observations = (),
) -> Triple:
    """``(residuals, predictions, measurements)`` at ``x``, one entry per sequence of every
    ModelSequences (mjsysid's residual blocks; ``return_pred_all`` and ``resample_true``
    are accepted for peer code and change nothing). ``params`` is not modified."""
    fn = build_residual_fn(
        models_sequences,
        modify_residual,
        custom_rollout,
        build_model,
        sensor_weights,
        observation_names(enabled_observations),
        nthread=n_threads,
    )
    try:
        preds = fn.predict(np.asarray(x, dtype=np.float64), params)
    finally:
        fn.close()
    return (
        [p.residual for p in preds],
        [p.predicted_at_measured for p in preds],
        [p.measured_used for p in preds],
    )


def _grid_control(traj: SystemTrajectory, model: mujoco.MjModel) -> np.ndarray:
    """Control rows at ``t_0 + k·dt`` over the measured span (zero-order hold)."""
    t0, dt = float(traj.initial_state[0]), float(model.opt.timestep)
    n = int(np.floor((traj.sensordata.times[-1] - t0) / dt + 1e-9)) + 1
    grid = t0 + dt * np.arange(n)
    ct = traj.control.times
    rows = np.clip(np.searchsorted(ct, grid + 1e-12, side="right") - 1, 0, len(ct) - 1)
    data = traj.control.data if traj.control.data.ndim > 1 else traj.control.data[:, None]
    return np.asarray(data[rows], dtype=np.float64)


def model_residual(
    x: npt.ArrayLike,
    params: ParameterDict,
    build_model: Callable[[ParameterDict], mujoco.MjModel],
    traj_measured: Sequence[SystemTrajectory] | SystemTrajectory,
    modify_residual: Any = None,
    custom_rollout: Any = None,
    n_threads: int = 2,
    return_pred_all: bool = False,
    resample_true: bool = True,
    sensor_weights: Mapping[str, float] | None = None,
    enabled_observations: Observations = (),
) -> Triple:
    """Residuals of one model against measured trajectories, ``measured − predicted``.

    ``params`` is updated in place from ``x`` (1-D) as in the peer, the model built by
    ``build_model(params)``, every trajectory rolled out from its ``initial_state`` under
    its control (held between samples), and the prediction interpolated at the measured
    times. ``modify_residual`` and ``custom_rollout`` are refused: use
    :func:`mjsysid.build_residual_fn` for those.
    """
    if modify_residual is not None or custom_rollout is not None:
        raise TypeError(
            must_be(
                "model_residual: modify_residual and custom_rollout",
                "None",
                "a callable",
                "pass them to mjsysid.build_residual_fn(models_sequences, ...)",
            )
        )
    params.update_from_vector(np.asarray(x, dtype=np.float64).reshape(-1))
    model = build_model(params)
    trajs = [traj_measured] if isinstance(traj_measured, SystemTrajectory) else traj_measured
    out: Triple = ([], [], [])
    for traj in trajs:
        x0 = np.asarray(traj.initial_state, dtype=np.float64)
        (sim,) = sysid_rollout(model, None, _grid_control(traj, model), x0, nthread=n_threads)
        state = sim.state
        assert state is not None
        meas, pred = construct_ts_from_defaults(
            state, sim.sensordata, traj.sensordata, enabled_observations
        )
        at = TimeSeries(meas.times, pred.interpolate(meas.times, hold=True), meas.signal_mapping)
        out[0].append(weighted_diff(at, meas, model, sensor_weights))
        out[1].append(at)
        out[2].append(meas)
    return out
