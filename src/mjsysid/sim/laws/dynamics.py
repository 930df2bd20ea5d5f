"""The joint-space dynamics a law may read: bias and passive forces and the velocity-update
inertia at the step's state.

A law that says :attr:`~mjsysid.sim.laws.core.ForceLaw.dynamics` reads, besides the state,

* ``bias``: ``(b, nv)`` MuJoCo's ``qfrc_bias`` (gravity, Coriolis and centrifugal forces;
  ``-bias`` is the torque the load exerts on a joint, what load-dependent friction grows with);
* ``passive``: ``(b, nv)`` ``qfrc_passive`` (springs, joint damping, fluid forces);
* ``inertia``: ``(b, nv)`` the inertia that relates a force to the velocity change of one
  step: ``J_i = M_ii + dt·d_i`` with ``M`` the joint-space inertia (armature included) and
  ``d_i`` the joint damping, which the Euler and implicit integrators treat implicitly
  (RK4: ``d_i = 0``). A generalized force ``f`` on dof ``i`` alone changes its velocity by
  ``dt·f/J_i`` in the next step when ``i`` is the only dof of its tree (exact for a single
  hinge, an approximation in a chain, where the other dofs move too).

These are computed at the state before the step, the same way in the batched engine
(MuJoCo's :class:`mujoco.batch.Batch`, position and velocity stages only, in C++) and in a
plain loop (:func:`data_dynamics`, ``mj_fwdPosition`` and ``mj_fwdVelocity``); only when a law
needs them, as they cost a partial forward pass per step.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import mujoco.batch
import numpy as np

__all__ = ["BatchDynamics", "damping_inertia", "data_dynamics", "mass_diagonal"]


def mass_diagonal(model: mujoco.MjModel) -> np.ndarray:
    """Indices of the diagonal of MuJoCo's sparse joint-space inertia ``M`` (each row holds
    its columns up to the diagonal, which comes last)."""
    return np.asarray(model.M_rowadr + model.M_rownnz - 1, dtype=np.intp)


def damping_inertia(model: mujoco.MjModel) -> np.ndarray:
    """``(nv,)`` ``dt·d_i``, the joint damping the integrator applies implicitly."""
    implicit = model.opt.integrator != int(mujoco.mjtIntegrator.mjINT_RK4)
    return model.opt.timestep * model.dof_damping if implicit else np.zeros(model.nv)


def data_dynamics(
    model: mujoco.MjModel, data: mujoco.MjData
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(bias, passive, inertia)``, each ``(1, nv)``, at ``data``'s state (computes its
    position and velocity stages)."""
    mujoco.mj_fwdPosition(model, data)
    mujoco.mj_fwdVelocity(model, data)
    inertia = data.M[mass_diagonal(model)] + damping_inertia(model)
    return data.qfrc_bias[None].copy(), data.qfrc_passive[None].copy(), inertia[None]


class BatchDynamics:
    """``(bias, passive, inertia)`` of a batch of simulations, one model each (compiled from
    one spec), at given states: one :class:`mujoco.batch.Batch` call per step.

    Args:
      models: The simulations' models.
    """

    def __init__(self, models: Sequence[mujoco.MjModel]) -> None:
        m0 = models[0]
        self._batch = mujoco.batch.Batch(m0, nsim=len(models), nthread=1)
        if any(m is not m0 for m in models):
            self._batch.set_models(list(models))
        self._qpos = self._batch.bind("qpos")
        self._qvel = self._batch.bind("qvel")
        self._bias = self._batch.bind("qfrc_bias")
        self._passive = self._batch.bind("qfrc_passive")
        self._mass = self._batch.bind("M")
        self._diag = mass_diagonal(m0)
        self._damping = np.array([damping_inertia(m) for m in models])

    def __call__(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """At states ``q`` ``(b, nq)``, ``v`` ``(b, nv)``."""
        self._qpos[:] = q
        self._qvel[:] = v
        self._batch.forward(stage=int(mujoco.mjtStage.mjSTAGE_VEL))
        inertia = self._mass[:, self._diag] + self._damping
        return self._bias.copy(), self._passive.copy(), inertia
