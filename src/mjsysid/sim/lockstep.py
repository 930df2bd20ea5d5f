"""The lock-step batched rollout: force laws run before each step.

Every rollout of the batch advances one MuJoCo step at a time (``mujoco.rollout`` with
``nstep=1``, the previous step's states as initial states); before each step NumPy runs the
force laws (:mod:`mjsysid.sim.laws.core`) for the rollouts at once: they add generalized
forces, may change the controls, read their recorded inputs and per-recording constants, and
carry their internal states to the next step. The control vector of each step is
``[ctrl, qfrc_applied]`` (``control_spec = mjSTATE_CTRL | mjSTATE_QFRC_APPLIED``). This is
what a simulator that runs the laws, writes ``data.ctrl`` and ``data.qfrc_applied`` and calls
``mj_step`` does, step by step (:func:`reference_rollout`).

Threads. The batch is cut into contiguous chunks, and each chunk is stepped through the whole
horizon by a thread of its own (laws, then its MuJoCo step, then the next step), with no
synchronisation between chunks: MuJoCo's rollout releases the GIL, so one chunk's MuJoCo step
runs while another evaluates its laws. (A pool dispatch per step, the earlier scheme, costs
a thread wake-up per step and lost to one thread on small batches.) A chunk's Python work
per step holds the GIL and every hand-over of the GIL may cost a wake-up: the first
:data:`PROBE_STEPS` steps run as one chunk and time the MuJoCo and the Python work of a step,
and :func:`chunk_count` picks the number of chunks from them (one thread when a chunk would
get less than :data:`CHUNK_WORK` of MuJoCo work per step). The next :data:`TRIAL_STEPS` steps
run in those chunks, timed: when they were not faster per step than one chunk (on a loaded
machine a thread waiting for the GIL may wait for a core), the rest runs as one chunk.
Results do not depend on the
chunking (every rollout's arithmetic is the same; the tests check bit-identity).

Buffers are time-major (``(nstep, nbatch, ...)``): a chunk's rows at one step are one
contiguous block that MuJoCo reads and writes in place; one transpose at the end gives
:meth:`BatchRollout.run`'s layout.

Difference from a plain loop: each call starts from a reset ``MjData`` set to the
full-physics state, so the constraint solver's warm start (``qacc_warmstart``, not part of
``mjSTATE_FULLPHYSICS``) is zero at every step. Without active constraints (no contacts, limits
or equalities) the result is bit-identical to the loop; with them it differs at the solver's
tolerance.
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import mujoco
import mujoco.rollout
import numpy as np

from mjsysid.data.states import state_size, state_slices
from mjsysid.sim.laws.core import ForceLaw, State, StepContext, run_laws, start_laws
from mjsysid.sim.laws.dynamics import BatchDynamics, data_dynamics
from mjsysid.sim.laws.joint import ActuatedLaw, JointLaw
from mjsysid.sim.model_key import ModelKey, model_key
from mjsysid.sim.rollout import BatchRollout, checked_output

CHUNK_WORK = 20e-6  # s of MuJoCo work per step a chunk needs for a thread (bench/force_laws.py)
PROBE_STEPS = 8  # steps run as one chunk to time the MuJoCo and Python work per step
TRIAL_STEPS = 32  # steps run in chunks to see whether the threads pay (a loaded machine)
_CONTROL_SPEC = int(mujoco.mjtState.mjSTATE_CTRL | mujoco.mjtState.mjSTATE_QFRC_APPLIED)


def bind_laws(laws: Sequence[ForceLaw], model: mujoco.MjModel) -> list[ForceLaw]:
    """The laws bound to ``model`` (joints and actuators resolved)."""
    return [law.bind(model) for law in laws]


def _merge_key(law: ForceLaw) -> tuple[object, ...] | None:
    """Laws with equal keys differ only in their joint (and actuator); a law with an internal
    state, recorded inputs or constants is never merged."""
    if not isinstance(law, JointLaw) or law.states or law.inputs or law.constants:
        return None
    config = {k: v for k, v in law.config().items() if k not in ("name", "joint", "actuator")}
    return (type(law), tuple(sorted(config.items())))


def merge_laws(
    laws: Sequence[ForceLaw], values: Sequence[Mapping[str, np.ndarray]]
) -> tuple[list[ForceLaw], list[Mapping[str, np.ndarray]]]:
    """Library laws of one kind and options on distinct dofs as one law acting on all of
    them (an index array as its dof, values ``(batch, size, ndof)``): one NumPy evaluation
    per kind instead of one per joint. Other laws pass unchanged."""
    groups: dict[object, list[int]] = {}
    for i, law in enumerate(laws):
        key = _merge_key(law)
        groups.setdefault(i if key is None else key, []).append(i)
    out_laws: list[ForceLaw] = []
    out_values: list[Mapping[str, np.ndarray]] = []
    for members in groups.values():
        dofs = [getattr(laws[i], "dof", -1) for i in members]
        if len(members) == 1 or len(set(dofs)) < len(dofs):
            out_laws += [laws[i] for i in members]
            out_values += [values[i] for i in members]
            continue
        same: list[Any] = [laws[i] for i in members]
        first = same[0]
        extra = {}
        if isinstance(first, ActuatedLaw):
            extra["ctrl_index"] = np.array([law.ctrl_index for law in same])
        qpos = np.array([law.qpos for law in same])
        out_laws.append(dataclasses.replace(first, dof=np.array(dofs), qpos=qpos, **extra))
        out_values.append(
            {k: np.stack([values[i][k] for i in members], axis=-1) for k in values[members[0]]}
        )
    return out_laws, out_values


@dataclasses.dataclass
class _StepBuffers:
    """The time-major arrays of one run: row ``k`` holds step ``k`` of every rollout, so a
    chunk of rollouts at one step is a contiguous block MuJoCo reads or writes in place.

    Attributes:
      control: ``(nstep, nbatch, nu + nv)`` ``[ctrl, qfrc_applied]``; the forces start at 0
        and the laws add theirs (and may change the controls).
      state: ``(nstep, nbatch, nstate)`` states after each step.
      sensors: ``(nstep, nbatch, nsensordata)``.
      data: The laws' recorded inputs, constants and command rows (:class:`LawData`).
      law_states: Per law, ``{state: (nbatch, size)}``, the internal states before the next
        step (the chunks read and write their rows).
      dt: The timestep (s).
    """

    control: np.ndarray
    state: np.ndarray
    sensors: np.ndarray
    data: LawData
    law_states: list[State]
    dt: float

    @classmethod
    def of(
        cls, m0: mujoco.MjModel, control: np.ndarray, data: LawData, laws: Sequence[ForceLaw]
    ) -> _StepBuffers:
        nbatch, nstep, nu = control.shape
        step_control = np.zeros((nstep, nbatch, nu + m0.nv))
        step_control[:, :, :nu] = control.transpose(1, 0, 2)
        return cls(
            step_control,
            np.empty((nstep, nbatch, state_size(m0))),
            np.empty((nstep, nbatch, m0.nsensordata)),
            data.time_major(nbatch, nstep),
            [{k: np.zeros((nbatch, n)) for k, n in law.states.items()} for law in laws],
            float(m0.opt.timestep),
        )


@dataclasses.dataclass(frozen=True)
class LawData:
    """What the laws read besides the state: recorded inputs, constants and command rows.

    Attributes:
      inputs: ``{name: (nbatch, nstep)}`` recorded inputs on the simulation grid (held).
      constants: ``{name: (nbatch,)}`` per-recording constants.
      new_command: ``(nbatch, nstep)`` whether a recorded command row starts at each step
        (``None``: at every step).
    """

    inputs: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    constants: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    new_command: np.ndarray | None = None

    def time_major(self, nbatch: int, nstep: int) -> LawData:
        """The same with time first (``(nstep, nbatch)``), each step's rows contiguous."""
        new = self.new_command
        return LawData(
            {
                k: np.ascontiguousarray(np.broadcast_to(v, (nbatch, nstep)).T)
                for k, v in self.inputs.items()
            },
            {
                k: np.broadcast_to(np.asarray(v, float), (nbatch,))
                for k, v in self.constants.items()
            },
            np.ones((nstep, nbatch), dtype=bool)
            if new is None
            else np.ascontiguousarray(np.asarray(new, bool).T),
        )


@dataclasses.dataclass(frozen=True)
class LawRun:
    """One batched rollout with force laws, as :meth:`LawEngine.run` hands it to an engine.

    Attributes:
      models: ``nbatch`` models with the same sizes.
      initial_states: ``(nbatch, nstate)`` full-physics states at ``t_0`` (float64, C order).
      control: ``(nbatch, nstep, nu)`` recorded controls (float64).
      values: Per law, ``{parameter: (nbatch, size)}`` values of every rollout.
      data: The laws' recorded inputs, constants and command rows.
      align: Row ``k`` at ``t_k`` (else the state after step ``k``), as for
        :meth:`~mjsysid.sim.rollout.BatchRollout.run`.
    """

    models: list[mujoco.MjModel]
    initial_states: np.ndarray
    control: np.ndarray
    values: Sequence[Mapping[str, np.ndarray]]
    data: LawData
    align: bool

    def checked(
        self, state: np.ndarray, sensors: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(state, sensordata, ok)`` of time-major ``(nstep, nbatch, ...)`` step results,
        batch-major and checked by :func:`~mjsysid.sim.rollout.checked_output`."""
        return self.finished(
            np.ascontiguousarray(state.transpose(1, 0, 2)),
            np.ascontiguousarray(sensors.transpose(1, 0, 2)),
        )

    def finished(
        self, state: np.ndarray, sensors: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(state, sensordata, ok)`` of batch-major ``(nbatch, nstep, ...)`` step results,
        checked by :func:`~mjsysid.sim.rollout.checked_output`."""
        x0 = self.initial_states
        return checked_output(
            state,
            sensors,
            x0,
            x0[:, 0].copy(),
            np.array([m.opt.timestep for m in self.models]),
            scan=True,
            align=self.align,
        )


class LawEngine(abc.ABC):
    """What rolls out a batch with force laws: the lock steps and the device.

    Args:
      laws: The force laws (bound on first use to each model signature).
    """

    def __init__(self, laws: Sequence[ForceLaw]) -> None:
        self.laws = list(laws)
        self._bound: dict[ModelKey, list[ForceLaw]] = {}

    def bound(self, model: mujoco.MjModel) -> list[ForceLaw]:
        """The laws bound to models shaped like ``model``."""
        key = model_key(model)
        if key not in self._bound:
            self._bound[key] = bind_laws(self.laws, model)
        return self._bound[key]

    def run(
        self,
        models: Sequence[mujoco.MjModel],
        initial_states: np.ndarray,
        control: np.ndarray,
        values: Sequence[Mapping[str, np.ndarray]] | None = None,
        *,
        data: LawData | None = None,
        align: bool = True,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`~mjsysid.sim.rollout.BatchRollout.run` with the laws: the same arguments
        and results, plus the laws' values and data.

        Args:
          models: ``nbatch`` models with the same sizes.
          initial_states: ``(nbatch, nstate)`` full-physics states at ``t_0``.
          control: ``(nbatch, nstep, nu)`` recorded controls.
          values: Per law, ``{parameter: (nbatch, size)}`` values of every rollout.
          data: The laws' recorded inputs, constants and command rows (default: none, a new
            command at every step).
          align: As for :meth:`~mjsysid.sim.rollout.BatchRollout.run`.

        Returns:
          ``(state, sensordata, ok)``: ``(nbatch, nstep, nstate)``, ``(nbatch, nstep,
          nsensordata)`` and ``(nbatch,)`` (finite and not diverged).
        """
        return self.rollout(
            LawRun(
                list(models),
                np.ascontiguousarray(initial_states, dtype=np.float64),
                np.asarray(control, dtype=np.float64),
                list(values or []),
                data or LawData(),
                align,
            )
        )

    @abc.abstractmethod
    def rollout(self, run: LawRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The results of :meth:`run` for ``run``."""


@dataclasses.dataclass
class _Chunk:
    """A contiguous block of the batch, stepped through the whole horizon by one thread.

    Attributes:
      rows: Its rows of the batch.
      models: Its models.
      data: Its scratch ``MjData``.
      engine: A rollout without a pool (runs on the calling thread, GIL released).
      values: Per law, its rows of the law's values.
      dynamics: Computes the joint-space dynamics its laws read (``None``: none reads them).
    """

    rows: slice
    models: list[mujoco.MjModel]
    data: mujoco.MjData
    engine: mujoco.rollout.Rollout
    values: Sequence[Mapping[str, np.ndarray]]
    dynamics: BatchDynamics | None = None


@dataclasses.dataclass
class _Probe:
    """Seconds of the steps of one chunk: in MuJoCo, and in all (laws and Python included)."""

    mujoco: list[float] = dataclasses.field(default_factory=list)
    total: list[float] = dataclasses.field(default_factory=list)

    def python(self) -> float:
        """The Python work of a step (least total minus least MuJoCo, at least 0)."""
        return max(0.0, min(self.total) - min(self.mujoco))


class LockstepRollout(LawEngine):
    """Rolls out a batch with force laws, every rollout one MuJoCo step at a time.

    The batch is cut into contiguous chunks (at most one per thread), each stepped through
    the whole horizon by its thread without waiting for the others (see the module
    docstring).

    Args:
      runner: The persistent rollout whose thread count and ``MjData`` are used.
      laws: The force laws (bound on first use to each model signature).
      chunk_work: The least MuJoCo work per step (s) of a chunk with a thread of its own
        (:func:`chunk_count`); 0 gives every thread a chunk.
    """

    def __init__(
        self, runner: BatchRollout, laws: Sequence[ForceLaw], chunk_work: float = CHUNK_WORK
    ) -> None:
        super().__init__(laws)
        self.runner = runner
        self.chunk_work = float(chunk_work)
        self.last_chunk_count = 0  # chunks of the last run's last steps (diagnostics)
        self._engines = [mujoco.rollout.Rollout(nthread=0) for _ in range(runner.nthread)]

    def rollout(self, run: LawRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`LawEngine.run`, chunked (the module docstring)."""
        laws, merged = merge_laws(self.bound(run.models[0]), run.values)
        buf = _StepBuffers.of(run.models[0], run.control, run.data, laws)
        self._step_all(run.models, laws, merged, run.initial_states, buf)
        return run.checked(buf.state, buf.sensors)

    def _step_all(
        self,
        models: list[mujoco.MjModel],
        laws: list[ForceLaw],
        values: Sequence[Mapping[str, np.ndarray]],
        x0: np.ndarray,
        buf: _StepBuffers,
    ) -> None:
        """Fills ``buf``: the first :data:`PROBE_STEPS` steps as one chunk on this thread,
        timed; then :data:`TRIAL_STEPS` steps in :func:`chunk_count` chunks, timed; the rest
        in those chunks if their steps were faster, else as one chunk."""
        nbatch, nstep, nthread = len(models), buf.control.shape[0], self.runner.nthread
        whole = self._chunks(models, values, 1)[0]
        self.last_chunk_count = 1
        if nthread == 1 or nbatch == 1 or nstep <= PROBE_STEPS:
            _step_chunk(whole, laws, buf, x0, range(nstep))
            return
        probe = _Probe()
        _step_chunk(whole, laws, buf, x0, range(PROBE_STEPS), probe)
        work = min(probe.mujoco), probe.python()
        count = chunk_count(*work, nbatch, nthread, self.chunk_work)
        if count == 1:
            _step_chunk(whole, laws, buf, x0, range(PROBE_STEPS, nstep))
            return
        chunks = self._chunks(models, values, count)
        trial = range(PROBE_STEPS, min(nstep, PROBE_STEPS + TRIAL_STEPS))
        start = time.perf_counter()
        _step_chunks(chunks, laws, buf, x0, trial)
        chunked = (time.perf_counter() - start) / len(trial)
        rest = range(trial.stop, nstep)
        if chunked < sum(probe.total) / len(probe.total) or self.chunk_work <= 0:
            self.last_chunk_count = count
            _step_chunks(chunks, laws, buf, x0, rest)
        else:  # the threads did not pay (e.g. no free core): one chunk
            _step_chunk(whole, laws, buf, x0, rest)

    def _chunks(
        self,
        models: list[mujoco.MjModel],
        values: Sequence[Mapping[str, np.ndarray]],
        count: int,
    ) -> list[_Chunk]:
        """The batch cut into ``count`` contiguous chunks of near-equal size."""
        datas = self.runner.datas_for(models[0])
        bounds = np.linspace(0, len(models), count + 1).round().astype(int)
        dynamics = any(law.dynamics for law in self.laws)
        out = []
        for i, (a, b) in enumerate(itertools.pairwise(bounds)):
            rows = slice(int(a), int(b))
            vals = [{k: v[rows] for k, v in law_vals.items()} for law_vals in values]
            dyn = BatchDynamics(models[rows]) if dynamics else None
            out.append(_Chunk(rows, models[rows], datas[i], self._engines[i], vals, dyn))
        return out


def chunk_count(
    step_work: float, python_work: float, nbatch: int, nthread: int, chunk_work: float
) -> int:
    """How many chunks (threads) a batch is stepped in.

    With ``k`` chunks a step takes about ``max(k·P, P + W/k)``: each chunk's Python work
    ``P`` holds the GIL (so the chunks' Python work is serial), their MuJoCo work ``W/k``
    runs in parallel. The count minimising it is taken among those whose chunks keep at least
    ``chunk_work`` of MuJoCo work per step: each hand-over of the GIL between threads costs a
    thread wake-up, which a smaller chunk does not pay back.

    Args:
      step_work: ``W``, seconds of MuJoCo work of one step of the whole batch.
      python_work: ``P``, seconds of Python work (laws included) of one step of a chunk.
      nbatch: Rollouts in the batch. nthread: Threads available.
      chunk_work: The least MuJoCo work per step of a chunk (s); 0 gives every thread a
        chunk (at most one per rollout), whatever the estimate.

    Returns:
      The count, in ``[1, min(nthread, nbatch)]``.
    """
    most = max(1, min(nthread, nbatch))
    if chunk_work <= 0:
        return most
    best, best_time = 1, python_work + step_work
    for k in range(2, most + 1):
        if step_work / k < chunk_work:
            break
        wall = max(k * python_work, python_work + step_work / k)
        if wall < best_time:
            best, best_time = k, wall
    return best


class _WorkThread(threading.Thread):
    """Runs one piece of work; keeps the exception it raised for the calling thread."""

    def __init__(self, work: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.work = work
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # re-raised by the calling thread
            self.error = exc


def in_threads(work: Sequence[Callable[[], None]]) -> None:
    """Runs the first of ``work`` on this thread and each other on a thread of its own, and
    waits for all; re-raises the first exception a thread raised."""
    threads = [_WorkThread(w) for w in work[1:]]
    for t in threads:
        t.start()
    try:
        work[0]()
    finally:
        for t in threads:
            t.join()
    for t in threads:
        if t.error is not None:
            raise t.error


def _step_chunks(
    chunks: list[_Chunk],
    laws: list[ForceLaw],
    buf: _StepBuffers,
    x0: np.ndarray,
    steps: range,
) -> None:
    """Steps the first chunk on this thread and each other on a thread of its own; MuJoCo
    releases the GIL, and the chunks never wait for each other."""
    in_threads([partial(_step_chunk, c, laws, buf, x0, steps) for c in chunks])


def _step_chunk(
    chunk: _Chunk,
    laws: list[ForceLaw],
    buf: _StepBuffers,
    x0: np.ndarray,
    steps: range,
    probe: _Probe | None = None,
) -> None:
    """Steps one chunk through ``steps``: per step the laws' forces (NumPy), then one MuJoCo
    step of each of its rollouts, from the previous step's states, in place in ``buf``.

    Args:
      x0: ``(nbatch, nstate)`` the states before step 0.
      probe: Receives the seconds of each step and of its MuJoCo call (when given).
    """
    rows, m0 = chunk.rows, chunk.models[0]
    sl = state_slices(m0)
    nu = m0.nu
    sq, sv, sa = sl["qpos"], sl["qvel"], sl["act"]
    run, models, datas = chunk.engine.rollout, chunk.models, [chunk.data]
    x = (x0 if steps.start == 0 else buf.state[steps.start - 1])[rows]
    data = buf.data
    new_command = data.new_command
    assert new_command is not None  # (time_major fills it)
    constants = {k: c[rows] for k, c in data.constants.items()}
    for k in steps:
        begin = time.perf_counter() if probe is not None else 0.0
        step_control = buf.control[k, rows]
        ctx = StepContext(
            x[:, sq], x[:, sv], x[:, sa], step_control[:, :nu], step_control[:, nu:], x[:, 0],
            buf.dt, new_command[k, rows],
        )  # fmt: skip
        if chunk.dynamics is not None:
            ctx.bias, ctx.passive, ctx.inertia = chunk.dynamics(ctx.q, ctx.v)
        inputs = {name: col[k, rows] for name, col in data.inputs.items()}
        if k == 0:
            _put(buf.law_states, rows, start_laws(laws, ctx, chunk.values, inputs, constants))
        states = [{n: s[rows] for n, s in st.items()} for st in buf.law_states]
        run_laws(laws, ctx, chunk.values, states, inputs, constants)
        _put(buf.law_states, rows, states)
        after = buf.state[k, rows]
        start = time.perf_counter() if probe is not None else 0.0
        run(
            models,
            datas,
            x,
            step_control[:, None],
            control_spec=_CONTROL_SPEC,
            skip_checks=True,
            nstep=1,
            state=after[:, None],
            sensordata=buf.sensors[k, rows, None],
        )
        if probe is not None:
            end = time.perf_counter()
            probe.mujoco.append(end - start)
            probe.total.append(end - begin)
        x = after


def _put(law_states: list[State], rows: slice, states: list[State]) -> None:
    """Writes a chunk's law states into its rows of the whole batch's."""
    for whole, part in zip(law_states, states, strict=True):
        for name, value in part.items():
            whole[name][rows] = value


def reference_rollout(
    model: mujoco.MjModel,
    initial_state: np.ndarray,
    control: np.ndarray,
    laws: Sequence[ForceLaw],
    values: Sequence[Mapping[str, np.ndarray]],
    *,
    inputs: Mapping[str, np.ndarray] | None = None,
    constants: Mapping[str, float] | None = None,
    new_command: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A plain Python loop for one rollout (the laws through
    :class:`~mjsysid.sim.laws.runtime.LawRuntime`'s steps, ``data.ctrl`` and
    ``data.qfrc_applied`` written, ``mj_step``): the definition :class:`LockstepRollout`
    must match; ``(states after each step, sensordata)``. ``values[i][name]`` is ``(1,
    size)``, ``inputs[name]`` ``(nstep,)``, ``new_command`` ``(nstep,)`` (default: all
    ``True``)."""
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, np.asarray(initial_state, float), spec)
    bound = bind_laws(laws, model)
    nstep = control.shape[0]
    states = np.empty((nstep, state_size(model)))
    sensors = np.empty((nstep, model.nsensordata))
    consts = {k: np.array([float(v)]) for k, v in (constants or {}).items()}
    law_states: list[State] = []
    dynamics = any(law.dynamics for law in bound)
    for k in range(nstep):
        data.ctrl[:] = control[k]
        ctx = StepContext(
            data.qpos[None].copy(), data.qvel[None].copy(), data.act[None].copy(),
            data.ctrl[None].copy(), np.zeros((1, model.nv)), np.array([data.time]),
            float(model.opt.timestep),
            np.array([True if new_command is None else bool(new_command[k])]),
        )  # fmt: skip
        if dynamics:
            ctx.bias, ctx.passive, ctx.inertia = data_dynamics(model, data)
        now = {name: np.array([float(col[k])]) for name, col in (inputs or {}).items()}
        if k == 0:
            law_states = start_laws(bound, ctx, values, now, consts)
        run_laws(bound, ctx, values, law_states, now, consts)
        data.ctrl[:] = ctx.ctrl[0]
        data.qfrc_applied[:] = ctx.force[0]
        mujoco.mj_step(model, data)
        mujoco.mj_getState(model, data, states[k], spec)
        sensors[k] = data.sensordata
    return states, sensors
