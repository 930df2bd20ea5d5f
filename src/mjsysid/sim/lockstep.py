"""The lock-step batched rollout: force laws applied as ``qfrc_applied`` before each step.

Every candidate and sequence of a batch advances one step per multithreaded call of
MuJoCo's rollout (``nstep=1``, the previous call's states as initial states). Between calls
NumPy evaluates the force laws for the whole batch at once; the control vector of each step
is ``[ctrl, qfrc_applied]`` (``control_spec = mjSTATE_CTRL | mjSTATE_QFRC_APPLIED``). This is
what a simulator that writes ``data.qfrc_applied`` and calls ``mj_step`` does, step by step.

Difference from a plain loop: each call starts from a reset ``MjData`` set to the
full-physics state, so the constraint solver's warm start (``qacc_warmstart``, not part of
``mjSTATE_FULLPHYSICS``) is zero at every step. Without active constraints (no contacts, limits
or equalities) the result is bit-identical to the loop; with them it differs at the solver's
tolerance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.states import state_size, state_slices
from mjsysid.sim.force_laws import CommandTorque, ForceLaw, JointLaw
from mjsysid.sim.rollout import BatchRollout, align_states, clock_ok

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


class LockstepRollout:
    """Rolls out a batch with force laws, one multithreaded MuJoCo call per step.

    Args:
      runner: The persistent rollout whose threads and ``MjData`` are used.
      laws: The force laws (bound on first use to each model signature).
    """

    def __init__(self, runner: BatchRollout, laws: Sequence[ForceLaw]) -> None:
        self.runner = runner
        self.laws = list(laws)
        self._bound: dict[int, list[ForceLaw]] = {}

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
        nbatch, nstep, _ = control.shape
        raw_state = np.empty((nbatch, nstep, state_size(m0)))
        sensordata = np.empty((nbatch, nstep, m0.nsensordata))
        self._steps(list(models), initial_states, control, values, raw_state, sensordata)
        dt = np.array([m.opt.timestep for m in models])
        t0 = np.array(initial_states[:, 0], dtype=np.float64)
        ok = clock_ok(raw_state, t0, dt, scan=True)
        with np.errstate(over="ignore", invalid="ignore"):
            ok &= np.isfinite(sensordata.sum(axis=(1, 2)))
        if not align:
            return raw_state, sensordata, ok
        return align_states(raw_state, initial_states), sensordata, ok

    def _steps(
        self,
        models: list[mujoco.MjModel],
        initial_states: np.ndarray,
        control: np.ndarray,
        values: Sequence[Mapping[str, np.ndarray]],
        raw_state: np.ndarray,
        sensordata: np.ndarray,
    ) -> None:
        """Fills ``raw_state`` and ``sensordata`` step by step: the laws' forces of the batch,
        then one multithreaded MuJoCo step of every rollout."""
        m0 = models[0]
        laws, values = merge_laws(self.bound(m0), values)
        nbatch, nstep, nu = control.shape
        sl = state_slices(m0)
        step_ctrl = np.zeros((nbatch, 1, nu + m0.nv))
        step_state = np.empty((nbatch, 1, raw_state.shape[2]))
        step_sensors = np.empty((nbatch, 1, m0.nsensordata))
        datas = self.runner.datas_for(m0)
        pool = self.runner._runner
        run = mujoco.rollout.rollout if pool is None else pool.rollout
        thread_datas = datas[0] if pool is None else datas
        x = np.ascontiguousarray(initial_states, dtype=np.float64)
        # one chunk per thread: a step is short, the pool's dispatch is not
        chunk = -(-nbatch // self.runner.nthread)
        for k in range(nstep):
            step_ctrl[:, 0, :nu] = control[:, k]
            forces = step_ctrl[:, 0, nu:]
            forces[:] = 0.0
            q, v, act = x[:, sl["qpos"]], x[:, sl["qvel"]], x[:, sl["act"]]
            for law, vals in zip(laws, values, strict=True):
                forces += law.forces(q, v, control[:, k], act, vals)
            run(
                models,
                thread_datas,
                x,
                step_ctrl,
                control_spec=_CONTROL_SPEC,
                skip_checks=True,
                nstep=1,
                chunk_size=chunk,
                state=step_state,
                sensordata=step_sensors,
            )
            raw_state[:, k] = step_state[:, 0]
            sensordata[:, k] = step_sensors[:, 0]
            x = step_state[:, 0].copy()


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
