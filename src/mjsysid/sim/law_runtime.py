"""The runtime companion of identified force laws, for a user's own simulator.

Call :meth:`LawRuntime.apply` before each ``mj_step``; it writes the laws' forces into
``data.qfrc_applied`` (overwriting it), exactly as the fit's lock-step rollout did::

    runtime = LawRuntime.from_results("results/run1")
    while running:
        data.ctrl[:] = command
        runtime.apply(model, data)
        mujoco.mj_step(model, data)

A force the simulator applies itself must be added after :meth:`apply`.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.force_laws import ForceLaw
from mjsysid.sim.law_params import law_values, laws_from_params

RESULT_PARAMS = "params_x_hat.yaml"  # the identified parameters of a results folder


class LawRuntime:
    """Applies force laws with fixed parameter values.

    Args:
      laws: The force laws.
      params: Holds every law's parameters (e.g. the identified ones).
    """

    def __init__(self, laws: list[ForceLaw], params: ParameterDict) -> None:
        self.laws = list(laws)
        self.values = [law_values(law, params) for law in self.laws]
        self._bound: dict[int, list[ForceLaw]] = {}

    @classmethod
    def from_params(cls, params: ParameterDict) -> LawRuntime:
        """The laws described by the law parameters of ``params`` (from their ``meta``)."""
        return cls(laws_from_params(params), params)

    @classmethod
    def from_results(cls, folder: str | Path) -> LawRuntime:
        """The laws and identified values of a results folder (``params_x_hat.yaml``)."""
        return cls.from_params(ParameterDict.load_from_disk(Path(folder) / RESULT_PARAMS))

    def forces(self, model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
        """``(nv,)`` the laws' generalized forces at ``data``'s state and controls."""
        key = int(model.signature)
        if key not in self._bound:
            self._bound[key] = [law.bind(model) for law in self.laws]
        q, v = data.qpos[None].copy(), data.qvel[None].copy()
        ctrl, act = data.ctrl[None].copy(), data.act[None].copy()
        out = np.zeros(model.nv)
        for law, vals in zip(self._bound[key], self.values, strict=True):
            out += law.forces(q, v, ctrl, act, vals)[0]
        return out

    def apply(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Writes :meth:`forces` into ``data.qfrc_applied`` (call before ``mj_step``)."""
        data.qfrc_applied[:] = self.forces(model, data)
