"""Rollouts with the library's force laws, compiled: the plain loop without Python.

:class:`CompiledRollout` runs what :func:`~mjsysid.sim.lockstep.reference_rollout` runs, a
simulator's loop per simulation (the recorded controls into ``data.ctrl``, the laws, their
forces into ``data.qfrc_applied``, ``mj_step``, the state and sensors read back), as one
Numba-compiled function that calls MuJoCo's C library directly: the laws' step is the
library's kernel of each law (:mod:`mjsysid.sim.laws.compiled`, from the tables of
:mod:`mjsysid.sim.laws.table`), so no step returns to Python and none holds the GIL. The
batch is cut into one contiguous block of simulations per thread of the runner; each thread
steps its simulations one after the other on its own ``MjData``, reset and set to the
initial state for each.

Why: the lock steps (:mod:`mjsysid.sim.lockstep`) run the laws in NumPy between MuJoCo steps
of the whole batch, about 15-20 µs of Python per step whatever the batch's size, which is
several times a step of a few rollouts of a cheap model (``bench/force_laws.py``).

Results. Every simulation is the plain loop: bit-identical to
:func:`~mjsysid.sim.lockstep.reference_rollout` (the tests check it), so the constraint
solver's warm start carries from step to step as in a user's simulator (the chunked lock step
restarts it at every step: with constraints the two differ at the solver's tolerance; without,
they are identical).

Needs Numba (``pip install -e '.[fast]'`` in the checkout); only laws that
:func:`~mjsysid.sim.laws.table.has_kernel` run here (the library's own). When a law reads
the joint-space dynamics, each step is split: ``mj_step1`` computes MuJoCo's position and
velocity stages at the state, the laws read them, and ``mj_step2`` finishes the step from
them (the same numbers as :func:`~mjsysid.sim.laws.dynamics.data_dynamics` then
``mj_step`` in the reference loop, which compute those stages twice; with the RK4
integrator, which ``mj_step2`` does not run, the loop does just that). A MuJoCo
*fatal* error inside the loop (out of the arena's memory) ends the process with MuJoCo's
message, as in a C program, where the lock steps raise it as a Python exception.
"""

from __future__ import annotations

import glob
import itertools
import os
from collections.abc import Sequence
from functools import partial
from typing import Any

import llvmlite.binding
import mujoco
import numba
import numpy as np
from numba import types

from mjsysid.data.states import STATE_SPEC, state_size
from mjsysid.sim.laws import compiled as kernels
from mjsysid.sim.laws.core import ForceLaw
from mjsysid.sim.laws.dynamics import damping_inertia, mass_diagonal
from mjsysid.sim.laws.table import LawTable, has_kernel
from mjsysid.sim.lockstep import LawEngine, LawRun, in_threads
from mjsysid.sim.rollout import BatchRollout

__all__ = ["CompiledRollout"]


def _mujoco_library() -> str:
    """The path of the MuJoCo shared library the Python bindings load."""
    here = os.path.dirname(mujoco.__file__)
    found = sorted(
        glob.glob(os.path.join(here, "libmujoco.so*"))
        + glob.glob(os.path.join(here, "libmujoco*.dylib"))
        + glob.glob(os.path.join(here, "mujoco*.dll"))
    )
    if not found:
        raise ImportError(f"the MuJoCo shared library was not found in {here}")
    return found[0]


def _check_addresses() -> None:
    """The compiled loop hands MuJoCo the addresses of ``mjModel`` and ``mjData``, which the
    bindings give as ``_address``; a MuJoCo whose bindings do not is refused here, so that
    :class:`~mjsysid.sim.batch.LawRollout` runs the lock steps instead."""
    model = mujoco.MjModel.from_xml_string("<mujoco/>")
    for obj in (model, mujoco.MjData(model)):
        if not isinstance(getattr(obj, "_address", None), int):
            raise ImportError(
                f"mujoco {mujoco.__version__}'s bindings do not give {type(obj).__name__}."
                "_address, which the compiled force laws need"
            )


_check_addresses()
llvmlite.binding.load_library_permanently(_mujoco_library())
_PTR = types.uintp
# MuJoCo's C functions, called from compiled code (pointers as unsigned integers)
_mj_step: Any = types.ExternalFunction("mj_step", types.void(_PTR, _PTR))
_mj_reset_data: Any = types.ExternalFunction("mj_resetData", types.void(_PTR, _PTR))
_mj_set_state: Any = types.ExternalFunction(
    "mj_setState", types.void(_PTR, _PTR, _PTR, types.int32)
)
_mj_get_state: Any = types.ExternalFunction(
    "mj_getState", types.void(_PTR, _PTR, _PTR, types.int32)
)
_mj_fwd_position: Any = types.ExternalFunction("mj_fwdPosition", types.void(_PTR, _PTR))
_mj_fwd_velocity: Any = types.ExternalFunction("mj_fwdVelocity", types.void(_PTR, _PTR))
_mj_step1: Any = types.ExternalFunction("mj_step1", types.void(_PTR, _PTR))
_mj_step2: Any = types.ExternalFunction("mj_step2", types.void(_PTR, _PTR))


@numba.njit(cache=True, nogil=True)
def _roll(
    models: np.ndarray,
    data: int,
    views: tuple[np.ndarray, ...],
    x0: np.ndarray,
    control: np.ndarray,
    table: tuple[np.ndarray, ...],
    dynamics: tuple[np.ndarray, np.ndarray, float, bool],
    spec: int,
    out_state: np.ndarray,
    out_sensors: np.ndarray,
) -> None:
    """Rolls out simulations ``b`` of ``models`` (addresses) one after the other on one
    ``mjData`` (``data``, an address).

    Args:
      views: ``data``'s arrays ``qpos, qvel, ctrl, qfrc_applied, sensordata, qfrc_bias,
        qfrc_passive, M``.
      x0: ``(nb, nstate)``. control: ``(nb, nstep, nu)``.
      table: The :class:`~mjsysid.sim.laws.table.LawTable`'s arrays, rows of these ``nb``.
      dynamics: ``(diagonal, damping, dt, split)``: the indices of ``M``'s diagonal
        ``(nv,)``, the implicit damping ``dt·d`` per simulation ``(nb, nv)``, the timestep,
        and whether the step is split (``mj_step1``, the laws, ``mj_step2``: the position
        and velocity stages computed once, not again by ``mj_step``; not for RK4);
        ``diagonal`` empty when no law reads the joint-space dynamics.
      out_state, out_sensors: ``(nb, nstep, nstate)``, ``(nb, nstep, nsensordata)``.
    """
    qpos, qvel, ctrl, force, sensordata, bias, passive, mass = views
    ints, reals, values, start, inputs, constants, new_command = table
    diagonal, damping, dt, split = dynamics
    law_state = np.empty(start.shape[1])
    inertia = np.zeros(qvel.shape[0])
    for b in range(models.shape[0]):
        m = models[b]
        _mj_reset_data(m, data)
        _mj_set_state(m, data, x0[b].ctypes.data, spec)
        for k in range(control.shape[1]):
            ctrl[:] = control[b, k]
            force[:] = 0.0
            if diagonal.shape[0]:
                if split:
                    _mj_step1(m, data)
                else:
                    _mj_fwd_position(m, data)
                    _mj_fwd_velocity(m, data)
                for j in range(diagonal.shape[0]):
                    inertia[j] = mass[diagonal[j]] + damping[b, j]
            if k == 0:
                kernels.start_laws(ints, reals, values[b], start[b], ctrl, law_state)
            kernels.step_laws(
                ints, reals, values[b], qpos, qvel, ctrl, force, new_command[b, k] != 0,
                inputs[b, k], constants[b], law_state, bias, passive, inertia, dt,
            )  # fmt: skip
            if split and diagonal.shape[0]:
                _mj_step2(m, data)
            else:
                _mj_step(m, data)
            _mj_get_state(m, data, out_state[b, k].ctypes.data, spec)
            out_sensors[b, k] = sensordata


class CompiledRollout(LawEngine):
    """Rolls out a batch with library force laws in compiled loops (module docstring).

    Args:
      runner: The persistent rollout whose thread count and ``MjData`` are used.
      laws: The force laws; each must :func:`~mjsysid.sim.laws.table.has_kernel`.

    Raises:
      ValueError: A law without a kernel (named).
    """

    def __init__(self, runner: BatchRollout, laws: Sequence[ForceLaw]) -> None:
        super().__init__(laws)
        missing = [law.name for law in self.laws if not has_kernel(law)]
        if missing:
            raise ValueError(
                f"force laws {missing} have no compiled kernel (a user's law or a subclass of "
                "a library law): run them on LockstepRollout"
            )
        self.runner = runner

    def rollout(self, run: LawRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`~mjsysid.sim.lockstep.LawEngine.run`, each block of rollouts on a thread."""
        m0, laws = run.models[0], self.bound(run.models[0])
        nbatch, nstep = run.control.shape[:2]
        data = run.data
        table = LawTable.pack(
            laws, run.values, data.inputs, data.constants, data.new_command, nbatch, nstep
        )
        arrays = (
            table.ints, table.reals, table.values, table.state_start, table.inputs,
            table.constants, table.new_command,
        )  # fmt: skip
        if any(law.dynamics for law in laws):
            diagonal = mass_diagonal(m0)
            damping = np.array([damping_inertia(m) for m in run.models])
        else:
            diagonal, damping = np.zeros(0, dtype=np.intp), np.zeros((nbatch, 0))
        split = m0.opt.integrator != int(mujoco.mjtIntegrator.mjINT_RK4)
        state = np.empty((nbatch, nstep, state_size(m0)))
        sensors = np.empty((nbatch, nstep, m0.nsensordata))
        models = np.array([m._address for m in run.models], dtype=np.uintp)
        control = np.ascontiguousarray(run.control)
        spec = int(STATE_SPEC.value)
        datas = self.runner.datas_for(m0)
        count = max(1, min(self.runner.nthread, nbatch, len(datas)))
        bounds = np.linspace(0, nbatch, count + 1).round().astype(int)

        def block(i: int, rows: slice) -> None:
            d = datas[i]
            views = (
                d.qpos, d.qvel, d.ctrl, d.qfrc_applied, d.sensordata, d.qfrc_bias,
                d.qfrc_passive, d.M,
            )  # fmt: skip
            sub = arrays[:2] + tuple(a[rows] for a in arrays[2:])
            dyn = (diagonal, damping[rows], float(m0.opt.timestep), split)
            _roll(
                models[rows], d._address, views, run.initial_states[rows], control[rows], sub,
                dyn, spec, state[rows], sensors[rows],
            )  # fmt: skip

        blocks = [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        in_threads([partial(block, i, rows) for i, rows in enumerate(blocks)])
        return run.finished(state, sensors)
