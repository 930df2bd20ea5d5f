"""Batched, multithreaded rollouts.

Time convention. A rollout from the full-physics state ``s_0`` at time ``t_0`` with controls
``u_0 .. u_{N-1}`` produces, for every step ``k = 0 .. N-1``, the sensor readings and the state
*at* ``t_k = t_0 + k·dt`` (before step ``k`` is integrated). MuJoCo's rollout returns the
state *after* each step, so :func:`batched_rollout` shifts it by one step and prepends ``s_0``:
row ``k`` of both arrays then describes the same instant.

Divergence. When MuJoCo meets an unstable state it resets the data (and its clock) and warns;
inside a batched rollout that is only visible in the outputs. :func:`batched_rollout` checks
that every trajectory's clock advanced by exactly ``dt`` per step and that everything is
finite, and reports the first rollout and step that did not.

Sensors only. Recording the state of every step costs about 2 % of a cheap model's rollout
(``mj_getState`` per step). Where nobody reads the states (a residual without measured states),
:meth:`BatchRollout.run` with ``record_states=False`` runs the batch on
:class:`mujoco.batch.Batch` instead, recording the sensors only: its state rows keep each
simulation's last state, whose time is the clock check (a simulation MuJoCo reset, or one the
batch stopped because its warnings rose, ends at another time). The sensor values are the
same bits as ``mujoco.rollout``'s.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from typing import Any, Literal, overload

import mujoco
import mujoco.batch
import mujoco.rollout
import numpy as np
import numpy.typing as npt

from mjsysid.data.states import full_physics_columns, state_size
from mjsysid.data.states import state_slices as state_slices  # re-export (tests use it)
from mjsysid.data.timeseries import SignalMapping, TimeSeries
from mjsysid.sim.model_key import ModelKey, model_key
from mjsysid.sim.trajectory import SystemTrajectory, TrajectorySeries, state_signal_mapping
from mjsysid.util.errors import must_be, short_repr

ROLLOUTS = ("cpu", "warp")
"""Where a population can be simulated: MuJoCo's CPU rollouts, or MuJoCo Warp worlds
(:mod:`mjsysid.sim.warp`)."""


class RolloutDivergedError(RuntimeError):
    """A simulation became unstable (MuJoCo reset it) or produced non-finite values."""

    def __init__(self, index: int, step: int, time: float, reason: str) -> None:
        super().__init__(
            f"rollout {index} diverged at step {step} (t={time:.6g} s): {reason}. The "
            "simulation is unstable for these parameter values; check bounds (e.g. masses "
            "near zero, huge gains) or reduce the model timestep"
        )
        self.index, self.step, self.time = index, step, time


_SENSOR_BATCHES = 8
"""Sensor-only batches a :class:`BatchRollout` keeps (by model shape and size)."""
_SENSOR_SIMS = 16
"""The fewest simulations of a sensor-only batch."""


def default_nthread() -> int:
    """Threads for rollouts: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def clock_end(
    t0: np.ndarray, dt: np.ndarray, nstep: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(t_end, tol, negative)``: the time each rollout must end at, the tolerance on it,
    and the rollouts that start at a negative time."""
    t_end = t0 + dt * nstep
    tol = 1e-9 * np.maximum(1.0, np.maximum(np.abs(t0), np.abs(t_end))) + 1e-6 * dt
    return t_end, tol, np.flatnonzero(t0 < 0)


def clock_ok(
    states: np.ndarray,
    t0: np.ndarray,
    dt: np.ndarray,
    scan: bool = True,
    end: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """``(nbatch,)`` mask of rollouts whose clock advanced by ``dt`` per step and, with
    ``scan``, whose states are all finite.

    A reset (MuJoCo's response to an unstable state) shows in the clock; a non-finite entry
    anywhere makes the sum over the rollout non-finite (one pass over the array). Runs right
    after a rollout, when the caches are cold: every Python step counts, so the common case
    (no negative start time, no scan) is one NumPy expression.

    Args:
      states: ``(nbatch, nstep, nstate)`` rollout output (state after each step; column 0 is
        the time).
      t0: ``(nbatch,)`` start times. dt: ``(nbatch,)`` timesteps.
      scan: Look for non-finite entries. Without it only the clock is checked, which is
        enough when MuJoCo's automatic reset is on: a non-finite position, velocity or
        acceleration then resets the simulation instead of entering the state.
      end: :func:`clock_end` computed beforehand (it does not depend on ``states``).
    """
    nstep = states.shape[1]
    t_end, tol, neg = clock_end(t0, dt, nstep) if end is None else end
    # NaN and inf times compare False without a warning
    ok = np.abs(states[:, -1, 0] - t_end) <= tol
    if scan:
        with np.errstate(over="ignore", invalid="ignore"):
            ok &= np.isfinite(states.sum(axis=(1, 2)))
    # A reset sets the time to 0, so from t0 >= 0 the clock ends early; only a rollout that
    # starts at a negative time can come back to the expected end, so check each step.
    if neg.size:
        expected = t0[neg, None] + dt[neg, None] * np.arange(1, nstep + 1)[None, :]
        ok[neg] &= (np.abs(states[neg, :, 0] - expected) <= tol[neg, None]).all(axis=1)
    return ok


def divergence_error(states: np.ndarray, index: int, t0: float, dt: float) -> RolloutDivergedError:
    """Builds the error for rollout ``index`` (first bad step and reason)."""
    s = states[index]
    nstep = s.shape[0]
    expected = t0 + dt * np.arange(1, nstep + 1)
    bad_clock = np.abs(s[:, 0] - expected) > 1e-9 * np.maximum(1.0, np.abs(expected)) + 1e-6 * dt
    bad_val = ~np.isfinite(s).all(axis=1)
    step = int(np.flatnonzero(bad_clock | bad_val)[0])
    reason = "non-finite state" if bad_val[step] else "MuJoCo reset the simulation (instability)"
    return RolloutDivergedError(index, step, float(expected[step] - dt), reason)


def align_states(raw_state: np.ndarray, initial_states: np.ndarray) -> np.ndarray:
    """States at ``t_k`` from MuJoCo's states after each step, ``(..., nstep, nstate)``."""
    state = np.empty_like(raw_state)
    state[..., 0, :] = initial_states
    state[..., 1:, :] = raw_state[..., :-1, :]
    return state


def checked_output(
    raw_state: np.ndarray,
    sensordata: np.ndarray,
    initial_states: np.ndarray,
    t0: np.ndarray,
    dt: np.ndarray,
    *,
    scan: bool,
    align: bool,
    end: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What :meth:`BatchRollout.run` returns, from MuJoCo's output of a batch.

    Args:
      raw_state: ``(nbatch, nstep, nstate)`` states after each step (row ``k`` at ``t_{k+1}``).
      sensordata: ``(nbatch, nstep, nsensordata)`` sensor values.
      initial_states: ``(nbatch, nstate)`` states at ``t_0``.
      t0, dt, scan, end: As for :func:`clock_ok` (``t0``, ``dt``: ``(nbatch,)`` s).
      align: Return states aligned with the sensors (row ``k`` at ``t_k``).

    Returns:
      ``(state, sensordata, ok)``: ``ok`` ``(nbatch,)`` is ``False`` for a rollout whose clock
      went wrong or whose states (with ``scan``) or sensor values are not all finite.
    """
    ok = clock_ok(raw_state, t0, dt, scan=scan, end=end)
    with np.errstate(over="ignore", invalid="ignore"):
        ok &= np.isfinite(sensordata.sum(axis=(1, 2)))
    if not align:
        return raw_state, sensordata, ok
    return align_states(raw_state, initial_states), sensordata, ok


class _SensorBatch:
    """A :class:`mujoco.batch.Batch` of ``nsim`` simulations for sensor-only rollouts; a run
    of fewer uses the first ones.

    A simulation's row is ``mjSTATE_INTEGRATION``: the full-physics columns come from the
    initial states; the others (warm start, inputs, equality activations, mocap poses, user
    data) are what ``mj_resetData`` gives, as in ``mujoco.rollout``. Only the activations and
    mocap poses depend on the model (``eq_active0``, the mocap bodies' poses), so a model
    without equalities and mocap bodies copies one reset row; another is reset on every run.
    """

    def __init__(self, model: mujoco.MjModel, nsim: int, nthread: int) -> None:
        self.nsim = nsim
        self.batch = mujoco.batch.Batch(model, nsim=nsim, nthread=nthread)
        self.rows = self.batch.state
        self.cols = full_physics_columns(model)
        self.ids = np.arange(nsim, dtype=np.int32)
        self.batch.reset(stage=int(mujoco.mjtStage.mjSTAGE_NONE))
        self.reset_row = None if model.neq or model.nmocap else self.rows[0].copy()

    def run(
        self, models: Sequence[mujoco.MjModel], initial_states: np.ndarray, control: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(sensordata, last_time)``: ``(n, nstep, nsensordata)`` sensors of simulation
        ``i`` on ``models[i]`` (set on every run: the candidate models are edited in place
        between calls) from ``initial_states[i]`` under ``control[i]``, and ``(n,)`` the time
        each simulation ended at (its initial time where MuJoCo raised an error)."""
        n, nstep = control.shape[0], control.shape[1]
        ids = None if n == self.nsim else self.ids[:n]
        self.batch.set_models(models if ids is None else [*models, *[models[0]] * (self.nsim - n)])
        if self.reset_row is None:
            self.batch.reset(ids=ids, stage=int(mujoco.mjtStage.mjSTAGE_NONE))
        else:
            self.rows[:n] = self.reset_row
        self.rows[:n, self.cols] = initial_states
        sensordata = np.empty((n, nstep, models[0].nsensordata))
        try:
            self.batch.rollout(
                nstep, control, record=("sensordata",), ids=ids, out={"sensordata": sensordata}
            )
        except mujoco.batch.SimulationError:
            pass  # those simulations kept their initial state
        return sensordata, self.rows[:n, 0]


class BatchRollout:
    """A persistent thread pool plus per-thread ``MjData`` scratch, reused across calls.

    Args:
      nthread: Worker threads (default: all CPUs available to the process).
    """

    def __init__(self, nthread: int | None = None) -> None:
        self.nthread = default_nthread() if nthread is None else int(nthread)
        if self.nthread < 1:
            raise ValueError(must_be("nthread", "a positive integer", nthread))
        self._runner = mujoco.rollout.Rollout(nthread=self.nthread) if self.nthread > 1 else None
        self._datas: dict[ModelKey, list[mujoco.MjData]] = {}
        self._ends: dict[tuple[bytes, bytes, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        # per model object (not kept alive by this): its datas, state size and signature
        self._known: weakref.WeakKeyDictionary[
            mujoco.MjModel, tuple[list[mujoco.MjData], int, ModelKey]
        ]
        self._known = weakref.WeakKeyDictionary()
        self._sensor_batches: dict[tuple[ModelKey, int], _SensorBatch] = {}

    def use_datas(self, model: mujoco.MjModel, datas: list[mujoco.MjData]) -> None:
        """Uses the caller's per-thread ``MjData`` for models shaped like ``model``."""
        if len(datas) != self.nthread:
            raise ValueError(
                must_be("datas", f"{self.nthread} MjData (one per thread)", len(datas))
            )
        self._datas[model_key(model)] = list(datas)
        self._known.clear()

    def datas_for(self, model: mujoco.MjModel) -> list[mujoco.MjData]:
        """Per-thread ``MjData`` compatible with ``model`` (cached by model signature)."""
        return self._shape_of(model)[0]

    def _shape_of(self, model: mujoco.MjModel) -> tuple[list[mujoco.MjData], int, ModelKey]:
        """``(datas, state size, signature)`` of ``model``, remembered per model object: a fit
        rolls out the same candidate models call after call, and the signature is hashed once
        each."""
        known = self._known.get(model)
        if known is None:
            key = model_key(model)
            if key not in self._datas:
                self._datas[key] = [mujoco.MjData(model) for _ in range(self.nthread)]
            known = self._known[model] = (self._datas[key], state_size(model), key)
        return known

    def _sensor_batch(self, model: mujoco.MjModel, n: int) -> _SensorBatch:
        """The kept batch for ``n`` simulations of models shaped like ``model``: one per
        power of two from :data:`_SENSOR_SIMS` (a batch's first run pays for an ``MjData``;
        a run of fewer simulations costs a few µs more)."""
        nsim = max(_SENSOR_SIMS, 1 << (n - 1).bit_length())
        key = (self._shape_of(model)[2], nsim)
        sims = self._sensor_batches.get(key)
        if sims is None:
            if len(self._sensor_batches) >= _SENSOR_BATCHES:
                self._sensor_batches.clear()
            sims = self._sensor_batches[key] = _SensorBatch(model, nsim, self.nthread)
        return sims

    @overload
    def run(
        self,
        models: Sequence[mujoco.MjModel],
        initial_states: np.ndarray,
        control: np.ndarray,
        *,
        align: bool = ...,
        record_states: Literal[True] = ...,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    @overload
    def run(
        self,
        models: Sequence[mujoco.MjModel],
        initial_states: np.ndarray,
        control: np.ndarray,
        *,
        align: bool = ...,
        record_states: bool,
    ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]: ...

    def run(
        self,
        models: Sequence[mujoco.MjModel],
        initial_states: np.ndarray,
        control: np.ndarray,
        *,
        align: bool = True,
        record_states: bool = True,
    ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """Rolls out ``nbatch`` models in one multithreaded call.

        Args:
          models: ``nbatch`` models with the same sizes.
          initial_states: ``(nbatch, nstate)`` full-physics states at ``t_0``.
          control: ``(nbatch, nstep, nu)`` controls.
          align: Return states aligned with the sensors (row ``k`` at ``t_k``); ``False``
            returns MuJoCo's states after each step (row ``k`` at ``t_{k+1}``), saving a copy.
          record_states: Record the states. ``False`` returns ``None`` for them and runs the batch
            on :class:`mujoco.batch.Batch`, which records the sensors only (module
            docstring); a start at a negative time records them all the same (its clock
            check needs every step).

        Returns:
          ``(state, sensordata, ok)``: ``(nbatch, nstep, nstate)`` (or ``None``) and
          ``(nbatch, nstep, nsensordata)`` arrays aligned so row ``k`` is time ``t_k``, and a
          ``(nbatch,)`` mask that is ``False`` for rollouts that diverged (see
          :func:`divergence_error` for the reason).
        """
        nbatch, nstep = control.shape[0], control.shape[1]
        x0 = np.ascontiguousarray(initial_states, dtype=np.float64)
        ctrl = np.ascontiguousarray(control, dtype=np.float64)
        # Read what the checks need now: after the rollout the caches are cold, and every
        # Python step costs several times more.
        opts = {id(m): m.opt for m in models}  # models repeat across sequences
        dt = np.array([opts[id(m)].timestep for m in models])
        t0 = np.array(initial_states[:, 0], dtype=np.float64)
        end = self._clock_end(t0, dt, nstep)
        if not record_states and not end[2].size:
            return self._run_sensors(models, x0, ctrl, end)
        autoreset = all(
            not o.disableflags & mujoco.mjtDisableBit.mjDSBL_AUTORESET for o in opts.values()
        )
        m0 = models[0]
        datas, nstate, _ = self._shape_of(m0)
        raw_state = np.empty((nbatch, nstep, nstate))
        sensordata = np.empty((nbatch, nstep, m0.nsensordata))
        runner = mujoco.rollout.rollout if self._runner is None else self._runner.rollout
        runner(
            list(models),
            datas[0] if self._runner is None else datas,
            x0,
            ctrl,
            skip_checks=True,
            nstep=nstep,
            state=raw_state,
            sensordata=sensordata,
        )
        return checked_output(
            raw_state, sensordata, initial_states, t0, dt, scan=not autoreset, align=align, end=end
        )

    def _run_sensors(
        self,
        models: Sequence[mujoco.MjModel],
        x0: np.ndarray,
        ctrl: np.ndarray,
        end: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> tuple[None, np.ndarray, np.ndarray]:
        """:meth:`run` with ``record_states=False`` (no start at a negative time): the sensors of
        every step, and each simulation's last time checked against ``end``."""
        sensordata, last_time = self._sensor_batch(models[0], len(models)).run(models, x0, ctrl)
        t_end, tol, _ = end
        # NaN and inf times compare False without a warning
        ok = np.abs(last_time - t_end) <= tol
        with np.errstate(over="ignore", invalid="ignore"):
            ok &= np.isfinite(sensordata.sum(axis=(1, 2)))
        return None, sensordata, ok

    def _clock_end(
        self, t0: np.ndarray, dt: np.ndarray, nstep: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`clock_end` of the rollouts, cached (the same for every call of a fit)."""
        key = (t0.tobytes(), dt.tobytes(), nstep)
        end = self._ends.get(key)
        if end is None:
            if len(self._ends) >= 16:
                self._ends.clear()
            end = self._ends[key] = clock_end(t0, dt, nstep)
        return end

    def close(self) -> None:
        """Stops the worker threads (also done when the object is garbage collected)."""
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        self._sensor_batches.clear()

    def __enter__(self) -> BatchRollout:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _control_rows(control: Any, timestep: float) -> npt.ArrayLike:
    """``control`` as rows, one per step: arrays pass through; a ``TimeSeries`` (or a list
    of them, one per rollout) must be sampled every ``timestep`` seconds."""
    series = [control] if isinstance(control, TimeSeries) else None
    if isinstance(control, list | tuple) and control and isinstance(control[0], TimeSeries):
        series = list(control)
    if series is None:
        return control
    for k, ts in enumerate(series):
        what = "control" if len(series) == 1 else f"control[{k}]"
        if not isinstance(ts, TimeSeries):
            raise TypeError(must_be(what, "a TimeSeries like the other entries", ts))
        dt = np.diff(ts.times)
        if dt.size and not np.allclose(dt, timestep, rtol=1e-6, atol=0.0):
            raise ValueError(
                must_be(
                    what,
                    f"a TimeSeries sampled every model timestep ({timestep!r} s): one row per step",
                    ts,
                    hint=f"Its steps are {dt.min():.6g} to {dt.max():.6g} s; resample it "
                    f"first: ts.resample(target_dt={timestep!r})",
                )
            )
    lengths = {ts.data.shape[0] for ts in series}
    if len(lengths) > 1:
        raise ValueError(must_be("control", "TimeSeries of one length", sorted(lengths)))
    return np.stack([ts.data for ts in series])


def sysid_rollout(
    models: Sequence[mujoco.MjModel] | mujoco.MjModel,
    datas: Sequence[mujoco.MjData] | mujoco.MjData | None,
    control_signal: npt.ArrayLike | Any,
    initial_states: npt.ArrayLike,
    rollout_signal_mapping: SignalMapping | None = None,
    rollout_state_mapping: SignalMapping | None = None,
    ctrl_mapping: SignalMapping | None = None,
    *,
    nthread: int | None = None,
) -> list[SystemTrajectory]:
    """Rolls out many models in one batched, multithreaded ``mujoco.rollout`` call.

    Args:
      models: ``nbatch`` compiled models of the same sizes (or one model, broadcast).
      datas: One ``MjData`` per thread (or ``None`` to create them); the thread count is
        ``len(datas)`` when given.
      control_signal: ``(nbatch, nstep, nu)`` or ``(nstep, nu)`` (broadcast) controls, one
        row per step; or a control ``TimeSeries`` (broadcast) or a list of them, one per
        rollout, sampled every model timestep. Every row is used: ``nstep`` rows give
        ``nstep`` sensor rows (``mujoco.sysid`` drops the last).
      initial_states: ``(nbatch, nstate)`` or ``(nstate,)`` (broadcast) full-physics states.
      rollout_signal_mapping, rollout_state_mapping, ctrl_mapping: Mappings of the returned
        series (default: the model's sensors, :func:`~.trajectory.state_signal_mapping`,
        one signal per actuator).
      nthread: Thread count when ``datas`` is ``None``.

    Returns:
      One :class:`SystemTrajectory` per rollout, its series' rows at ``t_k = t_0 + k·dt``:
      sensor row ``k`` is read at ``t_k``, before step ``k`` (``mujoco.sysid`` stamps it
      ``t_k + dt``).

    Raises:
      ValueError: Shapes that do not match the models.
      RolloutDivergedError: A simulation became unstable.
    """
    model_list, ctrl, x0 = _batch_inputs(models, control_signal, initial_states)
    m0 = model_list[0]
    if datas is not None:
        data_list = [datas] if isinstance(datas, mujoco.MjData) else list(datas)
        runner = BatchRollout(nthread=len(data_list))
        runner.use_datas(m0, data_list)
    else:
        runner = BatchRollout(nthread=nthread)
    with runner:
        raw_state, sensordata, ok = runner.run(model_list, x0, ctrl, align=False)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise divergence_error(raw_state, i, float(x0[i, 0]), float(model_list[i].opt.timestep))
    state = align_states(raw_state, x0)
    maps = _Mappings.of(m0, rollout_signal_mapping, rollout_state_mapping, ctrl_mapping)
    out = []
    for i, m in enumerate(model_list):
        times = x0[i, 0] + m.opt.timestep * np.arange(ctrl.shape[1])
        out.append(maps.trajectory(m, times, ctrl[i], sensordata[i], x0[i], state[i]))
    return out


class _Mappings:
    """The signal mappings of :func:`sysid_rollout`'s series, built once per call."""

    def __init__(self, sensor: SignalMapping, state: SignalMapping, ctrl: SignalMapping) -> None:
        self.sensor, self.state, self.ctrl = sensor, state, ctrl

    @classmethod
    def of(
        cls,
        model: mujoco.MjModel,
        sensor: SignalMapping | None,
        state: SignalMapping | None,
        ctrl: SignalMapping | None,
    ) -> _Mappings:
        t = np.zeros(1)
        if sensor is None:
            sensor = (
                TimeSeries.from_names(t, np.zeros((1, model.nsensordata)), model).signal_mapping
                if model.nsensordata
                else {}
            )
        if ctrl is None:
            ctrl = (
                TimeSeries.from_control_names(t, np.zeros((1, model.nu)), model).signal_mapping
                if model.nu
                else {}
            )
        return cls(
            sensor or {}, state_signal_mapping(model) if state is None else state, ctrl or {}
        )

    def trajectory(
        self,
        model: mujoco.MjModel,
        times: np.ndarray,
        ctrl: np.ndarray,
        sens: np.ndarray,
        x0: np.ndarray,
        state: np.ndarray,
    ) -> SystemTrajectory:
        def series(data: np.ndarray, mapping: SignalMapping) -> TimeSeries:
            return TrajectorySeries.trusted(times, data, mapping)

        return SystemTrajectory.from_series(
            model,
            series(ctrl, self.ctrl),
            series(sens, self.sensor),
            x0,
            series(state, self.state),
        )


def _batch_inputs(
    models: Sequence[mujoco.MjModel] | mujoco.MjModel,
    control: npt.ArrayLike | Any,
    initial_states: npt.ArrayLike,
) -> tuple[list[mujoco.MjModel], np.ndarray, np.ndarray]:
    """``(models, control, initial_states)`` of :func:`sysid_rollout` broadcast to one batch,
    ``nbatch`` models, ``(nbatch, nstep, nu)`` and ``(nbatch, nstate)``, shapes checked."""
    model_list = [models] if isinstance(models, mujoco.MjModel) else list(models)
    if not model_list:
        raise ValueError(must_be("models", "a non-empty sequence of MjModel", models))
    m0 = model_list[0]
    ctrl = np.asarray(_control_rows(control, float(m0.opt.timestep)), dtype=np.float64)
    if ctrl.ndim == 2:
        ctrl = ctrl[None]
    x0 = np.asarray(initial_states, dtype=np.float64)
    if x0.ndim == 1:
        x0 = x0[None]
    nbatch = max(len(model_list), ctrl.shape[0], x0.shape[0])
    if len(model_list) == 1:
        model_list = model_list * nbatch
    for what, n in (
        ("models", len(model_list)),
        ("control", ctrl.shape[0]),
        ("initial_states", x0.shape[0]),
    ):
        if n not in (1, nbatch):
            raise ValueError(must_be(f"{what} batch size", f"1 or {nbatch}", n))
    ctrl = np.broadcast_to(ctrl, (nbatch, *ctrl.shape[1:])).copy()
    x0 = np.broadcast_to(x0, (nbatch, x0.shape[1])).copy()
    if ctrl.ndim != 3 or ctrl.shape[2] != m0.nu:
        raise ValueError(
            must_be(
                "control", f"shape (nbatch, nstep, {m0.nu})", ctrl, hint=f"got shape {ctrl.shape}"
            )
        )
    if x0.shape[1] != state_size(m0):
        raise ValueError(
            must_be(
                "initial_states",
                f"rows of length {state_size(m0)} (full-physics state; see create_initial_state)",
                x0,
            )
        )
    for name, arr in (("control", ctrl), ("initial_states", x0)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite, got {short_repr(arr[~np.isfinite(arr)])}")
    return model_list, ctrl, x0
