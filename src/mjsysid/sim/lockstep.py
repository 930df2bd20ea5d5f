"""The lock-step batched rollout: force laws applied as ``qfrc_applied`` before each step.

Every rollout of the batch advances one MuJoCo step at a time (``mujoco.rollout`` with
``nstep=1``, the previous step's states as initial states); before each step NumPy evaluates
the force laws for the rollouts at once. The control vector of each step is
``[ctrl, qfrc_applied]`` (``control_spec = mjSTATE_CTRL | mjSTATE_QFRC_APPLIED``). This is
what a simulator that writes ``data.qfrc_applied`` and calls ``mj_step`` does, step by step.

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
from mjsysid.sim.force_laws import CommandTorque, ForceLaw, JointLaw
from mjsysid.sim.rollout import BatchRollout, align_states, clock_ok

CHUNK_WORK = 20e-6  # s of MuJoCo work per step a chunk needs for a thread (bench/force_laws.py)
PROBE_STEPS = 8  # steps run as one chunk to time the MuJoCo and Python work per step
TRIAL_STEPS = 32  # steps run in chunks to see whether the threads pay (a loaded machine)
_CONTROL_SPEC = int(mujoco.mjtState.mjSTATE_CTRL | mujoco.mjtState.mjSTATE_QFRC_APPLIED)


def bind_laws(laws: Sequence[ForceLaw], model: mujoco.MjModel) -> list[ForceLaw]:
    """The laws bound to ``model`` (joints and actuators resolved)."""
    return [law.bind(model) for law in laws]


def _merge_key(law: ForceLaw) -> tuple[object, ...] | None:
    """Laws with equal keys differ only in their joint (and actuator)."""
    if not isinstance(law, JointLaw):
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
        if isinstance(first, CommandTorque):
            extra["ctrl_index"] = np.array([law.ctrl_index for law in same])
        out_laws.append(dataclasses.replace(first, dof=np.array(dofs), **extra))
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
        and the laws add theirs.
      state: ``(nstep, nbatch, nstate)`` states after each step.
      sensors: ``(nstep, nbatch, nsensordata)``.
    """

    control: np.ndarray
    state: np.ndarray
    sensors: np.ndarray

    @classmethod
    def of(cls, m0: mujoco.MjModel, control: np.ndarray) -> _StepBuffers:
        nbatch, nstep, nu = control.shape
        step_control = np.zeros((nstep, nbatch, nu + m0.nv))
        step_control[:, :, :nu] = control.transpose(1, 0, 2)
        return cls(
            step_control,
            np.empty((nstep, nbatch, state_size(m0))),
            np.empty((nstep, nbatch, m0.nsensordata)),
        )


@dataclasses.dataclass
class _Chunk:
    """A contiguous block of the batch, stepped through the whole horizon by one thread.

    Attributes:
      rows: Its rows of the batch.
      models: Its models.
      data: Its scratch ``MjData``.
      engine: A rollout without a pool (runs on the calling thread, GIL released).
      values: Per law, its rows of the law's values.
    """

    rows: slice
    models: list[mujoco.MjModel]
    data: mujoco.MjData
    engine: mujoco.rollout.Rollout
    values: Sequence[Mapping[str, np.ndarray]]


@dataclasses.dataclass
class _Probe:
    """Seconds of the steps of one chunk: in MuJoCo, and in all (laws and Python included)."""

    mujoco: list[float] = dataclasses.field(default_factory=list)
    total: list[float] = dataclasses.field(default_factory=list)

    def python(self) -> float:
        """The Python work of a step (least total minus least MuJoCo, at least 0)."""
        return max(0.0, min(self.total) - min(self.mujoco))


class LockstepRollout:
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
        self.runner = runner
        self.laws = list(laws)
        self.chunk_work = float(chunk_work)
        self.last_chunk_count = 0  # chunks of the last run's last steps (diagnostics)
        self._bound: dict[int, list[ForceLaw]] = {}
        self._engines = [mujoco.rollout.Rollout(nthread=0) for _ in range(runner.nthread)]

    def bound(self, model: mujoco.MjModel) -> list[ForceLaw]:
        """The laws bound to models shaped like ``model``."""
        key = int(model.signature)
        if key not in self._bound:
            self._bound[key] = bind_laws(self.laws, model)
        return self._bound[key]

    def run(
        self,
        models: Sequence[mujoco.MjModel],
        initial_states: np.ndarray,
        control: np.ndarray,
        values: Sequence[Mapping[str, np.ndarray]],
        *,
        align: bool = True,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rolls out ``nbatch`` models with the laws, like :meth:`BatchRollout.run`.

        Args:
          models: ``nbatch`` models with the same sizes.
          initial_states: ``(nbatch, nstate)`` full-physics states at ``t_0``.
          control: ``(nbatch, nstep, nu)`` controls.
          values: Per law, ``{parameter: (nbatch, size)}`` values of every rollout.
          align: As in :meth:`BatchRollout.run`.

        Returns:
          ``(state, sensordata, ok)`` in :meth:`BatchRollout.run`'s layout.
        """
        m0 = models[0]
        x0 = np.ascontiguousarray(initial_states, dtype=np.float64)
        buf = _StepBuffers.of(m0, np.asarray(control, dtype=np.float64))
        laws, merged = merge_laws(self.bound(m0), values)
        self._step_all(list(models), laws, merged, x0, buf)
        raw_state = np.ascontiguousarray(buf.state.transpose(1, 0, 2))
        sensordata = np.ascontiguousarray(buf.sensors.transpose(1, 0, 2))
        dt = np.array([m.opt.timestep for m in models])
        ok = clock_ok(raw_state, x0[:, 0].copy(), dt, scan=True)
        with np.errstate(over="ignore", invalid="ignore"):
            ok &= np.isfinite(sensordata.sum(axis=(1, 2)))
        if not align:
            return raw_state, sensordata, ok
        return align_states(raw_state, initial_states), sensordata, ok

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
        out = []
        for i, (a, b) in enumerate(itertools.pairwise(bounds)):
            rows = slice(int(a), int(b))
            vals = [{k: v[rows] for k, v in law_vals.items()} for law_vals in values]
            out.append(_Chunk(rows, models[rows], datas[i], self._engines[i], vals))
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


class _ChunkThread(threading.Thread):
    """Steps one chunk; keeps the exception it raised for the calling thread."""

    def __init__(self, step: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.step = step
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.step()
        except BaseException as exc:  # re-raised by the calling thread
            self.error = exc


def _step_chunks(
    chunks: list[_Chunk],
    laws: list[ForceLaw],
    buf: _StepBuffers,
    x0: np.ndarray,
    steps: range,
) -> None:
    """Steps the first chunk on this thread and each other on a thread of its own; MuJoCo
    releases the GIL, and the chunks never wait for each other."""
    threads = [_ChunkThread(partial(_step_chunk, c, laws, buf, x0, steps)) for c in chunks[1:]]
    for t in threads:
        t.start()
    try:
        _step_chunk(chunks[0], laws, buf, x0, steps)
    finally:
        for t in threads:
            t.join()
    for t in threads:
        if t.error is not None:
            raise t.error


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
    pairs = list(zip(laws, chunk.values, strict=True))
    run, models, datas = chunk.engine.rollout, chunk.models, [chunk.data]
    x = (x0 if steps.start == 0 else buf.state[steps.start - 1])[rows]
    for k in steps:
        begin = time.perf_counter() if probe is not None else 0.0
        step_control = buf.control[k, rows]
        forces, ctrl = step_control[:, nu:], step_control[:, :nu]
        q, v, act = x[:, sq], x[:, sv], x[:, sa]
        for law, vals in pairs:
            forces += law.forces(q, v, ctrl, act, vals)
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


def reference_rollout(
    model: mujoco.MjModel,
    initial_state: np.ndarray,
    control: np.ndarray,
    laws: Sequence[ForceLaw],
    values: Sequence[Mapping[str, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """A plain Python loop (``qfrc_applied`` then ``mj_step``) for one rollout: the
    definition :class:`LockstepRollout` must match; ``(states after each step, sensordata)``
    with ``values[i][name]`` of shape ``(1, size)``."""
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, np.asarray(initial_state, float), spec)
    bound = bind_laws(laws, model)
    nstep = control.shape[0]
    states = np.empty((nstep, state_size(model)))
    sensors = np.empty((nstep, model.nsensordata))
    for k in range(nstep):
        data.ctrl[:] = control[k]
        q, v, act = data.qpos[None].copy(), data.qvel[None].copy(), data.act[None].copy()
        data.qfrc_applied[:] = sum(
            (
                law.forces(q, v, data.ctrl[None].copy(), act, vals)[0]
                for law, vals in zip(bound, values, strict=True)
            ),
            np.zeros(model.nv),
        )
        mujoco.mj_step(model, data)
        mujoco.mj_getState(model, data, states[k], spec)
        sensors[k] = data.sensordata
    return states, sensors
