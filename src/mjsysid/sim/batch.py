"""The lock-step rollout on MuJoCo's batch executor (:class:`mujoco.batch.Batch`).

The same contract as :class:`mjsysid.sim.lockstep.LockstepRollout` (the force laws run in
NumPy before every MuJoCo step of every rollout; the same arguments and results), stepped
differently: every rollout of the batch is one simulation of a ``Batch`` (each on its
candidate's model, ``set_models``), whose state rows stay in place between steps. Before
each step the laws read the state and write ``ctrl`` and ``qfrc_applied`` into the rows
(``bind``), then one ``Batch.step`` advances every simulation on MuJoCo's C++ thread pool
with the GIL released. A law that reads the joint-space dynamics
(:mod:`mjsysid.sim.laws.dynamics`) gets them from ``Batch.forward(stage=mjSTAGE_VEL)`` at
the state before the step, in the same pass over the batch.

Threads. The batch's pool runs the simulations of one step in parallel, but it is woken
once per step, which costs more than a step of a few cheap rollouts (tens of µs on a busy
2-core machine). Two batches are kept, one stepped on the calling thread and one on
``nthread`` threads: the first :data:`PROBE_STEPS` steps run on each, timed, and the rest on
the faster (results do not depend on it: every simulation's arithmetic is the same).

Difference from :class:`~mjsysid.sim.lockstep.LockstepRollout`: a simulation keeps its
``MjData`` state between steps, the constraint solver's warm start included, exactly as
:func:`~mjsysid.sim.lockstep.reference_rollout` (a plain ``mj_step`` loop) and the
built-in rollout do; the chunked lock step restarts the warm start at every step. Without
active constraints the two are bit-identical; with them this one equals the plain loop bit
for bit and the chunked one differs at the solver's tolerance.

A MuJoCo error in some simulations (``mujoco.batch.SimulationError``) marks those rollouts
as diverged (their states do not advance, which the clock check reports); the others go on.
"""

from __future__ import annotations

import importlib.util
import time
import warnings
from collections.abc import Mapping, Sequence

import mujoco
import mujoco.batch
import numpy as np

from mjsysid.data.states import full_physics_columns, state_size, state_slices
from mjsysid.sim.laws.core import ForceLaw, State, StepContext, run_laws, start_laws
from mjsysid.sim.laws.dynamics import damping_inertia
from mjsysid.sim.laws.table import has_kernel
from mjsysid.sim.lockstep import LawData, LawEngine, LawRun, LockstepRollout, merge_laws
from mjsysid.sim.model_key import ModelKey, model_key
from mjsysid.sim.rollout import BatchRollout
from mjsysid.util.errors import must_be

PROBE_STEPS = 6  # steps timed on each batch (one thread, the pool) before choosing
TRIALS = 4  # calls of one batch shape timed, alternately on each lock step, before choosing
_VEL = int(mujoco.mjtStage.mjSTAGE_VEL)
_NONE = int(mujoco.mjtStage.mjSTAGE_NONE)

__all__ = [
    "COMPILED_HINT",
    "BatchLockstep",
    "LawRollout",
    "full_physics_columns",
    "law_engine_note",
    "unconstrained",
]


class _Sims:
    """A ``Batch`` of ``nsim`` simulations on ``nthread`` threads and its bound arrays."""

    def __init__(self, model: mujoco.MjModel, nsim: int, nthread: int, dynamics: bool) -> None:
        self.batch = mujoco.batch.Batch(model, nsim=nsim, nthread=nthread)
        b = self.batch
        self.state = b.state
        self.ctrl, self.force = b.bind("ctrl"), b.bind("qfrc_applied")
        self.sensors = b.bind("sensordata")
        self.bias = b.bind("qfrc_bias") if dynamics else None
        self.passive = b.bind("qfrc_passive") if dynamics else None
        self.mass = b.bind("M") if dynamics else None
        self.models: tuple[int, ...] = ()

    def use(self, models: Sequence[mujoco.MjModel]) -> None:
        """Runs simulation ``i`` on ``models[i]`` (set again on every run: the candidate
        models are edited in place between calls)."""
        self.batch.set_models(models[0] if all(m is models[0] for m in models) else models)

    def step(self, failed: np.ndarray) -> None:
        """One ``mj_step`` of every simulation; MuJoCo errors marked in ``failed``."""
        try:
            self.batch.step()
        except mujoco.batch.SimulationError as e:
            failed[e.ids] = True

    def forward_vel(self, failed: np.ndarray) -> None:
        """Position and velocity stages at the current state (the laws' dynamics)."""
        try:
            self.batch.forward(stage=_VEL)
        except mujoco.batch.SimulationError as e:
            failed[e.ids] = True


class BatchLockstep(LawEngine):
    """Rolls out a batch with force laws on :class:`mujoco.batch.Batch` (module docstring).

    Args:
      runner: The persistent rollout whose thread count is used.
      laws: The force laws (bound on first use to each model signature).
      threads: Step on this many threads (1, or the runner's count); ``None``: the faster
        of the two, timed on the first steps of every run.
    """

    def __init__(
        self, runner: BatchRollout, laws: Sequence[ForceLaw], threads: int | None = None
    ) -> None:
        if threads is not None and threads not in (1, runner.nthread):
            raise ValueError(must_be("threads", f"None, 1 or {runner.nthread}", threads))
        super().__init__(laws)
        self.runner = runner
        self.threads = threads
        self.last_threads = 0  # threads of the last run's last steps (diagnostics)
        self._sims: dict[tuple[ModelKey, int, int], _Sims] = {}
        self._dynamics = any(law.dynamics for law in self.laws)

    def _batch(self, model: mujoco.MjModel, nsim: int, nthread: int) -> _Sims:
        key = (model_key(model), nsim, nthread)
        sims = self._sims.get(key)
        if sims is None:
            if len(self._sims) >= 8:
                self._sims.clear()
            sims = self._sims[key] = _Sims(model, nsim, nthread, self._dynamics)
        return sims

    def rollout(self, run: LawRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`~mjsysid.sim.lockstep.LawEngine.run` on :class:`mujoco.batch.Batch`."""
        models, m0 = run.models, run.models[0]
        nbatch, nstep = run.control.shape[0], run.control.shape[1]
        laws, merged = merge_laws(self.bound(m0), run.values)
        work = _Run(m0, laws, merged, run.initial_states, run.control, run.data)
        nthread = min(self.runner.nthread, nbatch)
        one = self._batch(m0, nbatch, 1)
        one.use(models)
        work.start(one)
        if nthread == 1 or self.threads == 1 or (self.threads is None and nstep <= 2 * PROBE_STEPS):
            work.steps(one, range(nstep))
            self.last_threads = 1
        elif self.threads is not None:
            pool = self._batch(m0, nbatch, nthread)
            pool.use(models)
            work.move(one, pool)
            work.steps(pool, range(nstep))
            self.last_threads = nthread
        else:
            pool = self._batch(m0, nbatch, nthread)
            pool.use(models)
            t_one = work.steps(one, range(PROBE_STEPS))
            work.move(one, pool)
            t_pool = work.steps(pool, range(PROBE_STEPS, 2 * PROBE_STEPS))
            best = pool if t_pool < t_one else one
            if best is one:
                work.move(pool, one)
            work.steps(best, range(2 * PROBE_STEPS, nstep))
            self.last_threads = nthread if best is pool else 1
        state, sensordata, ok = run.checked(work.state, work.sensors)
        return state, sensordata, ok & ~work.failed


class _Run:
    """One run's buffers (time-major, as the chunked lock step's) and its laws' states."""

    def __init__(
        self,
        m0: mujoco.MjModel,
        laws: list[ForceLaw],
        values: Sequence[Mapping[str, np.ndarray]],
        x0: np.ndarray,
        control: np.ndarray,
        data: LawData,
    ) -> None:
        nbatch, nstep, _ = control.shape
        self.laws, self.values, self.x0 = laws, values, x0
        self.control = control.transpose(1, 0, 2).copy()  # the laws may write the controls
        self.state = np.empty((nstep, nbatch, state_size(m0)))
        self.sensors = np.empty((nstep, nbatch, m0.nsensordata))
        self.data = data.time_major(nbatch, nstep)
        self.failed = np.zeros(nbatch, dtype=bool)
        self.cols = full_physics_columns(m0)
        sl = state_slices(m0)
        self.sq, self.sv, self.sa = sl["qpos"], sl["qvel"], sl["act"]
        self.dt = float(m0.opt.timestep)
        self.nv = m0.nv
        self.diag = np.asarray(m0.M_rowadr + m0.M_rownnz - 1, dtype=np.intp)
        self.damping = damping_inertia(m0)
        self.law_states: list[State] = []

    def start(self, sims: _Sims) -> None:
        """Every simulation reset (the model's defaults) and set to its initial state."""
        sims.batch.reset(stage=_NONE)
        sims.state[:, self.cols] = self.x0
        if sims.mass is not None:  # per-candidate damping (dt·d_i) of the laws' inertia
            models = sims.batch.models
            ms = [sims.batch.model] * len(self.x0) if models is None else models
            ms = [ms] * len(self.x0) if isinstance(ms, mujoco.MjModel) else ms
            self.damping = np.array([damping_inertia(m) for m in ms])

    def move(self, src: _Sims, dst: _Sims) -> None:
        """The simulations' whole state rows from one batch to the other."""
        np.copyto(dst.state, src.state)

    def steps(self, sims: _Sims, steps: range) -> float:
        """Steps ``steps`` on ``sims``; the least seconds of one step."""
        best = np.inf
        data = self.data
        assert data.new_command is not None  # (time_major fills it)
        for k in steps:
            begin = time.perf_counter()
            x = self.x0 if k == 0 else self.state[k - 1]
            ctrl = self.control[k]
            force = np.zeros((x.shape[0], self.nv))
            ctx = StepContext(
                x[:, self.sq], x[:, self.sv], x[:, self.sa], ctrl, force, x[:, 0], self.dt,
                data.new_command[k],
            )  # fmt: skip
            if sims.mass is not None:
                sims.forward_vel(self.failed)
                assert sims.bias is not None and sims.passive is not None
                ctx.bias, ctx.passive = sims.bias.copy(), sims.passive.copy()
                ctx.inertia = sims.mass[:, self.diag] + self.damping
            inputs = {name: col[k] for name, col in data.inputs.items()}
            if k == 0:
                self.law_states = start_laws(self.laws, ctx, self.values, inputs, data.constants)
            run_laws(self.laws, ctx, self.values, self.law_states, inputs, data.constants)
            sims.ctrl[:] = ctx.ctrl
            sims.force[:] = force
            sims.step(self.failed)
            np.take(sims.state, self.cols, axis=1, out=self.state[k])
            self.sensors[k] = sims.sensors
            best = min(best, time.perf_counter() - begin)
        return best


def unconstrained(model: mujoco.MjModel) -> bool:
    """Whether no constraint of ``model`` can ever be active: no equality, joint or tendon
    limit, friction loss, contact pair, nor two geoms of different bodies whose
    ``contype``/``conaffinity`` let them collide (contacts not disabled). Then the
    constraint solver never runs, its warm start is irrelevant, and :class:`BatchLockstep`
    and the chunked lock step are bit-identical (conservative: geoms that never meet count
    as possible contacts)."""
    if model.neq or model.npair or model.jnt_limited.any() or model.tendon_limited.any():
        return False
    if (model.dof_frictionloss > 0).any() or (model.tendon_frictionloss > 0).any():
        return False
    if model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT:
        return True
    ct, ca, body = model.geom_contype, model.geom_conaffinity, model.geom_bodyid
    meet = ((ct[:, None] & ca[None, :]) | (ca[:, None] & ct[None, :])) != 0
    meet &= body[:, None] != body[None, :]
    return not meet.any()


class LawRollout(LawEngine):
    """The engine a residual function runs its force laws with: the compiled loops
    (:class:`~mjsysid.sim.compiled.CompiledRollout`) where they apply, else the chunked lock
    step (:class:`~mjsysid.sim.lockstep.LockstepRollout`) or :class:`BatchLockstep`, whichever
    was faster, measured.

    The compiled loops run when Numba is installed (the ``fast`` extra) and every law is one
    of the library's with a kernel (:func:`~mjsysid.sim.laws.table.has_kernel`): no step
    returns to Python, the fastest at every batch size (``bench/force_laws.py``). They are
    the plain ``mj_step`` loop, as :class:`BatchLockstep` is.

    Otherwise, for a model without constraints (:func:`unconstrained`), where the lock steps
    give the same bits, the first :data:`TRIALS` calls of each batch shape (model, rollouts,
    steps) alternate between the chunked lock step and the batch, timed (the first call of
    each also pays its set-up: the least time of each counts); later calls of that shape take
    the faster. A model with constraints runs on the chunked lock step, so that the results
    of a fit never depend on a timing (the two differ at the solver's tolerance).

    Args:
      runner: The persistent rollout whose thread count and ``MjData`` are used.
      laws: The force laws.
      compiled: Run the compiled loops: ``None`` (default) when they apply, ``False`` never,
        ``True`` always (an error when Numba is missing or a law has no kernel).

    Raises:
      ImportError: ``compiled=True`` without Numba (says how to install it).
      ValueError: ``compiled=True`` and a law without a kernel (named).
    """

    def __init__(
        self, runner: BatchRollout, laws: Sequence[ForceLaw], compiled: bool | None = None
    ) -> None:
        super().__init__(laws)
        self.chunked = LockstepRollout(runner, laws)
        self.batch = BatchLockstep(runner, laws)
        self.compiled = _compiled_engine(runner, laws, compiled)
        self._free: dict[ModelKey, bool] = {}
        self._times: dict[tuple[ModelKey, int, int], list[float]] = {}

    def engine(self, model: mujoco.MjModel, nbatch: int, nstep: int) -> str:
        """``"compiled"``, ``"chunked"`` or ``"batch"``: the engine the next call of this shape
        runs."""
        if self.compiled is not None:
            return "compiled"
        sig = model_key(model)
        if sig not in self._free:
            self._free[sig] = unconstrained(model)
        if not self._free[sig]:
            return "chunked"
        times = self._times.get((sig, nbatch, nstep), [])
        if len(times) < TRIALS:
            return ("chunked", "batch")[len(times) % 2]
        return "chunked" if min(times[0::2]) <= min(times[1::2]) else "batch"

    def rollout(self, run: LawRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`~mjsysid.sim.lockstep.LawEngine.run` on the engine :meth:`engine` names."""
        if self.compiled is not None:
            return self.compiled.rollout(run)
        nbatch, nstep = run.control.shape[0], run.control.shape[1]
        name = self.engine(run.models[0], nbatch, nstep)
        engine = self.chunked if name == "chunked" else self.batch
        key = (model_key(run.models[0]), nbatch, nstep)
        times = self._times.get(key)
        if (times is not None and len(times) >= TRIALS) or not self._free[key[0]]:
            return engine.rollout(run)
        start = time.perf_counter()
        out = engine.rollout(run)
        if len(self._times) >= 64:
            self._times.clear()
        self._times.setdefault(key, []).append(time.perf_counter() - start)
        return out


COMPILED_HINT = "pip install -e '.[fast]' in the mjsysid checkout (installs Numba)"


def law_engine_note(laws: Sequence[ForceLaw]) -> str | None:
    """Why ``laws`` will not run compiled by default (a sentence with what to do), or
    ``None`` when they will (or there are none)."""
    if not laws:
        return None
    missing = [law.name for law in laws if not has_kernel(law)]
    if missing:
        return (
            f"force laws {missing} are not the library's own, so every law runs on the NumPy "
            "lock step (slower than the library's compiled laws on small batches)"
        )
    if importlib.util.find_spec("numba") is None:
        return (
            f"the force laws run on the NumPy lock step: {COMPILED_HINT} runs them compiled "
            "with MuJoCo's step (example:servo fits 5x faster)"
        )
    return None


def _compiled_engine(
    runner: BatchRollout, laws: Sequence[ForceLaw], compiled: bool | None
) -> LawEngine | None:
    """The compiled loops for ``laws`` as :class:`LawRollout`'s ``compiled`` asks, or
    ``None``. When they would apply but Numba fails to import, a warning says why and the
    lock steps run."""
    if compiled is False or not laws:
        return None
    if compiled is None and law_engine_note(laws) is not None:  # (not every law, or no Numba)
        return None
    try:
        from mjsysid.sim.compiled import CompiledRollout
    except ImportError as exc:
        if compiled:
            raise ImportError(f"compiled force laws need Numba: {COMPILED_HINT} ({exc})") from exc
        warnings.warn(
            f"Numba is installed but failed to import ({exc}): the force laws run on the "
            "NumPy lock step (slower on small batches)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return CompiledRollout(runner, laws)
