"""``mujoco.sysid._src.residual``: ``build_residual_fn``, ``residual``, ``model_residual``,
``construct_ts_from_defaults`` and the callback types, on top of mjsysid's batched residual.

The peer's residual functions return ``(residuals, predictions, measurements)``, lists with
one entry per measured sequence; so do these. :func:`build_residual_fn` captures keywords as
the peer's does and returns a :class:`PeerResidual` (called as ``fn(x, params, **overrides)``)
that evaluates every candidate of a batch in one batched rollout, mjsysid's
:class:`~mjsysid.objective.residual.ResidualFunction`, which :func:`mjsysid.compat.optimize`
uses directly. Conventions are mjsysid's: sensor row ``k`` of a rollout is stamped at ``t_k``
(the peer stamps ``t_k + dt``), the prediction is interpolated at the measured times
(``resample_true`` and ``return_pred_all`` are accepted and change nothing; the measured data
is never resampled), and ``residual`` normalises each signal by its RMS as mjsysid does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.compat._src.trajectory import ModelSequences
from mjsysid.data.timeseries import SignalType, TimeSeries
from mjsysid.objective.protocols import BuildModelFn, CustomRolloutFn, ModifyResidualFn
from mjsysid.objective.residual import ResidualFunction
from mjsysid.objective.residual import build_residual_fn as _core_build_residual_fn
from mjsysid.objective.signal_ops import weighted_diff
from mjsysid.params.apply import apply_param_modifiers
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.rollout import sysid_rollout
from mjsysid.sim.trajectory import SystemTrajectory
from mjsysid.util.errors import must_be

__all__ = [
    "BuildModelFn",
    "CustomRolloutFn",
    "ModelSequences",
    "ModifyResidualFn",
    "PeerResidual",
    "SystemTrajectory",
    "build_residual_fn",
    "construct_ts_from_defaults",
    "model_residual",
    "residual",
    "sysid_rollout",
]

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
    n_threads: int | None = None,
    return_pred_all: bool = False,
    resample_true: bool = True,
    sensor_weights: Mapping[str, float] | None = None,
    enabled_observations: Observations = (),
) -> Triple:
    """``(residuals, predictions, measurements)`` at ``x``, one entry per sequence of every
    ModelSequences (mjsysid's residual blocks; ``return_pred_all`` and ``resample_true``
    change nothing; ``n_threads`` defaults to every CPU, as the peer's). ``params`` is not
    modified."""
    fn = _residual_function(
        models_sequences, build_model, modify_residual, custom_rollout, n_threads,
        sensor_weights, enabled_observations,
    )  # fmt: skip
    try:
        return _triple(fn, x, params)
    finally:
        fn.close()


def _residual_function(
    models_sequences: Sequence[ModelSequences] | ModelSequences,
    build_model: BuildModelFn = apply_param_modifiers,
    modify_residual: ModifyResidualFn | None = None,
    custom_rollout: CustomRolloutFn | None = None,
    n_threads: int | None = None,
    sensor_weights: Mapping[str, float] | None = None,
    enabled_observations: Observations = (),
) -> ResidualFunction:
    """mjsysid's batched residual for the peer's keywords."""
    return _core_build_residual_fn(
        models_sequences,
        modify_residual,
        custom_rollout,
        build_model,
        sensor_weights,
        observation_names(enabled_observations),
        nthread=n_threads,
    )


def _triple(fn: ResidualFunction, x: npt.ArrayLike, params: ParameterDict) -> Triple:
    """``(residuals, predictions, measurements)`` of ``fn`` at ``x``: at one point (``x``
    1-D), the predictions and measured series of every sequence; for a batch ``(p, k)``,
    each sequence's ``(n_i, k)`` residual block, and no series."""
    xa = np.asarray(x, dtype=np.float64)
    if xa.ndim == 2:
        r = fn(xa, params)
        cuts = [int(c) for c in fn.block_offsets[1:-1]]
        return list(np.split(r, cuts, axis=0)), [], []
    preds = fn.predict(xa, params)
    return (
        [p.residual for p in preds],
        [p.predicted_at_measured for p in preds],
        [p.measured_used for p in preds],
    )


_RESIDUAL_KEYWORDS = (
    "models_sequences",
    "build_model",
    "modify_residual",
    "custom_rollout",
    "n_threads",
    "return_pred_all",
    "resample_true",
    "sensor_weights",
    "enabled_observations",
)


class PeerResidual:
    """What the peer's :func:`build_residual_fn` returns: ``fn(x, params, **overrides)`` ->
    ``(residuals, predictions, measurements)``.

    The captured keywords are :func:`residual`'s; mjsysid's batched residual is built from
    them once (:attr:`residual_function`) and again only for a call whose ``overrides``
    change them.
    """

    def __init__(self, captured: Mapping[str, Any]) -> None:
        unknown = sorted(set(captured) - set(_RESIDUAL_KEYWORDS))
        if unknown:
            raise TypeError(
                must_be("build_residual_fn keywords", f"among {list(_RESIDUAL_KEYWORDS)}", unknown)
            )
        if "models_sequences" not in captured:
            raise TypeError("build_residual_fn() needs models_sequences=")
        self.captured = dict(captured)
        self._fn: ResidualFunction | None = None

    @property
    def residual_function(self) -> ResidualFunction:
        """mjsysid's :class:`~mjsysid.objective.residual.ResidualFunction` of the captured
        keywords (built on first use)."""
        if self._fn is None:
            self._fn = _residual_function(**_core_keywords(self.captured))
        return self._fn

    def __call__(self, x: npt.ArrayLike, params: ParameterDict, **overrides: Any) -> Triple:
        if not overrides:
            return _triple(self.residual_function, x, params)
        fn = _residual_function(**_core_keywords({**self.captured, **overrides}))
        try:
            return _triple(fn, x, params)
        finally:
            fn.close()

    def close(self) -> None:
        """Releases the rollout threads of :attr:`residual_function`."""
        if self._fn is not None:
            self._fn.close()


def _core_keywords(kw: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords of :func:`residual` that change anything (``return_pred_all`` and
    ``resample_true`` do not)."""
    return {k: v for k, v in kw.items() if k not in ("return_pred_all", "resample_true")}


def build_residual_fn(**captured_kwargs: Any) -> PeerResidual:
    """The peer's: a residual function with :func:`residual`'s keywords bound, called as
    ``fn(x, params, **overrides)``.

    Raises:
      TypeError: A keyword :func:`residual` does not take (the peer fails at the first call),
        or no ``models_sequences``.
    """
    return PeerResidual(captured_kwargs)


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
