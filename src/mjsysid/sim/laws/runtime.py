"""The runtime companion of identified force laws, for a user's own simulator.

Call :meth:`LawRuntime.apply` before each ``mj_step``; it runs the laws exactly as the fit's
rollouts did (the compiled loops of :mod:`mjsysid.sim.compiled` are this very loop; the lock
steps of :mod:`mjsysid.sim.lockstep` equal it without active constraints): it writes
``data.ctrl`` (a law may transform the command) and ``data.qfrc_applied`` (overwriting it),
and keeps the laws' internal states between calls::

    runtime = LawRuntime.from_results("results/run1", constants={"kp": 32, "vin": 12.0})
    runtime.reset()
    while running:
        data.ctrl[:] = command
        runtime.apply(model, data, inputs={"goal_position": goal, "torque_enable": 1.0})
        mujoco.mj_step(model, data)

:meth:`LawRuntime.rollout` runs the same loop for many starts in one batched call.

``new_command`` says whether a new command row starts at this step (default ``True``: the
command changes at every physics step); a simulator stepping several physics steps per
command passes it ``True`` only at the first. A force the simulator applies itself must be
added after :meth:`apply`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.batch import LawRollout
from mjsysid.sim.laws.core import (
    ForceLaw,
    State,
    StepContext,
    law_values,
    laws_from_params,
    run_laws,
    start_laws,
)
from mjsysid.sim.laws.dynamics import data_dynamics
from mjsysid.sim.lockstep import LawData
from mjsysid.sim.model_key import ModelKey, model_key
from mjsysid.sim.rollout import BatchRollout
from mjsysid.util.errors import must_be
from mjsysid.util.files import read_yaml
from mjsysid.util.results_files import IDENTIFIED_YAML, PARAMS_X_HAT

__all__ = ["LawRuntime"]


class LawRuntime:
    """Runs force laws with fixed parameter values in a user's simulator (module docstring).

    Args:
      laws: The force laws.
      params: Holds every law's parameters (e.g. the identified ones).
      constants: The per-recording constants the laws read (``{"kp": 32}``), for this
        simulation.

    Raises:
      KeyError: A constant a law reads is missing (the laws' needs are named).
    """

    def __init__(
        self,
        laws: Sequence[ForceLaw],
        params: ParameterDict,
        constants: Mapping[str, float] | None = None,
    ) -> None:
        self.laws = list(laws)
        self.values = [law_values(law, params) for law in self.laws]
        self.constants = {k: np.array([float(v)]) for k, v in (constants or {}).items()}
        missing = sorted({c for law in self.laws for c in law.constants} - set(self.constants))
        if missing:
            raise KeyError(
                f"LawRuntime: the laws read the per-recording constants {missing}; pass "
                "constants={...}"
            )
        self._bound: dict[ModelKey, list[ForceLaw]] = {}
        self._states: list[State] | None = None

    @classmethod
    def from_params(
        cls, params: ParameterDict, constants: Mapping[str, float] | None = None
    ) -> LawRuntime:
        """The laws described by the law parameters of ``params`` (from their ``meta``)."""
        return cls(laws_from_params(params), params, constants)

    @classmethod
    def from_results(
        cls, folder: str | Path, constants: Mapping[str, float] | None = None
    ) -> LawRuntime:
        """The laws and identified values of a results folder (``params_x_hat.yaml``).

        Raises:
          KeyError: A constant a law reads is missing; the message names the values the
            fitted recordings had (``identified.yaml``, ``constants``).
        """
        params = ParameterDict.load_from_disk(Path(folder) / PARAMS_X_HAT)
        try:
            return cls.from_params(params, constants)
        except KeyError as e:
            fitted = _fitted_constants(Path(folder))
            if not fitted:
                raise
            raise KeyError(f"{e.args[0]}; the fitted recordings had {fitted}") from None

    @property
    def inputs(self) -> tuple[str, ...]:
        """The recorded inputs the laws read (to pass to :meth:`apply`)."""
        return tuple(dict.fromkeys(k for law in self.laws for k in law.inputs))

    def reset(self) -> None:
        """Starts a new rollout: the next :meth:`apply` sets the laws' initial states."""
        self._states = None

    def bound(self, model: mujoco.MjModel) -> list[ForceLaw]:
        """The laws bound to models shaped like ``model``."""
        key = model_key(model)
        if key not in self._bound:
            self._bound[key] = [law.bind(model) for law in self.laws]
        return self._bound[key]

    def apply(
        self,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        inputs: Mapping[str, Any] | None = None,
        *,
        new_command: bool = True,
    ) -> None:
        """Runs the laws at ``data``'s state: writes ``data.ctrl`` and ``data.qfrc_applied``.

        Args:
          model, data: The simulation (``data.ctrl`` holds the command of this step).
          inputs: ``{name: value}`` the recorded inputs the laws read (:attr:`inputs`).
          new_command: Whether a new command row starts at this step.

        Raises:
          KeyError: An input the laws read is missing.
        """
        given = {k: np.array([float(v)]) for k, v in (inputs or {}).items()}
        missing = sorted(set(self.inputs) - set(given))
        if missing:
            raise KeyError(
                f"LawRuntime.apply: the laws read the inputs {list(self.inputs)}; missing {missing}"
            )
        laws = self.bound(model)
        ctx = StepContext(
            q=data.qpos[None].copy(),
            v=data.qvel[None].copy(),
            act=data.act[None].copy(),
            ctrl=data.ctrl[None].copy(),
            force=np.zeros((1, model.nv)),
            time=np.array([data.time]),
            dt=float(model.opt.timestep),
            new_command=np.array([bool(new_command) or self._states is None]),
        )
        if any(law.dynamics for law in laws):
            ctx.bias, ctx.passive, ctx.inertia = data_dynamics(model, data)
        if self._states is None:
            self._states = start_laws(laws, ctx, self.values, given, self.constants)
        run_laws(laws, ctx, self.values, self._states, given, self.constants)
        data.ctrl[:] = ctx.ctrl[0]
        data.qfrc_applied[:] = ctx.force[0]

    def rollout(
        self,
        model: mujoco.MjModel,
        initial_state: npt.ArrayLike,
        control: npt.ArrayLike,
        inputs: Mapping[str, npt.ArrayLike] | None = None,
        *,
        new_command: npt.ArrayLike | None = None,
        nthread: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Simulations of ``model`` with the laws, in one batched call: what :meth:`apply`
        then ``mj_step`` at every step give, from each initial state (the fit's engine: the
        library's laws compiled with MuJoCo's step when Numba is installed, docs/backends.md).
        The states of :meth:`apply` are neither read nor changed.

        Args:
          model: The model (e.g. the identified MJCF).
          initial_state: ``(nstate,)`` or ``(nbatch, nstate)`` full-physics states
            (``mjSTATE_FULLPHYSICS``).
          control: ``(nstep, nu)`` or ``(nbatch, nstep, nu)`` the commands written to
            ``data.ctrl`` before each step.
          inputs: ``{name: (nstep,) or (nbatch, nstep)}`` the recorded inputs the laws read
            (:attr:`inputs`) at each step.
          new_command: ``(nstep,)`` or ``(nbatch, nstep)`` whether a command row starts at
            each step (default: at every step).
          nthread: Threads (default: all CPUs).

        Returns:
          ``(state, sensordata)``: ``(nbatch, nstep, nstate)`` the states after each step and
          ``(nbatch, nstep, nsensordata)`` the sensor values of each step, as
          ``mujoco.rollout`` returns them. A simulation that diverged holds what MuJoCo made
          of it (its clock jumps back at MuJoCo's reset).

        Raises:
          KeyError: An input the laws read is missing.
          ValueError: A shape that does not fit the model or the others (named).
        """
        x0 = np.asarray(initial_state, dtype=np.float64)
        x0 = x0[None] if x0.ndim == 1 else x0
        nstate = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        if x0.ndim != 2 or x0.shape[1] != nstate:
            raise ValueError(
                must_be(
                    "LawRuntime.rollout: initial_state",
                    f"({nstate},) or (nbatch, {nstate})",
                    x0.shape,
                )
            )
        ctrl = np.asarray(control, dtype=np.float64)
        ctrl = ctrl[None] if ctrl.ndim == 2 else ctrl
        if ctrl.ndim != 3 or ctrl.shape[2] != model.nu:
            raise ValueError(
                must_be(
                    "LawRuntime.rollout: control",
                    f"(nstep, {model.nu}) or (nbatch, nstep, {model.nu})",
                    ctrl.shape,
                )
            )
        nbatch, nstep = max(len(x0), len(ctrl)), ctrl.shape[1]
        if {len(x0), len(ctrl)} - {1, nbatch}:
            raise ValueError(
                must_be(
                    "LawRuntime.rollout: initial_state and control",
                    "as many rollouts each (or one, for all)",
                    (x0.shape, ctrl.shape),
                )
            )
        given = dict(inputs or {})
        missing = sorted(set(self.inputs) - set(given))
        if missing:
            raise KeyError(
                f"LawRuntime.rollout: the laws read the inputs {list(self.inputs)}; "
                f"missing {missing}"
            )
        data = LawData(
            {k: _per_step(f"inputs[{k!r}]", v, nbatch, nstep) for k, v in given.items()},
            {k: np.repeat(v, nbatch) for k, v in self.constants.items()},
            None if new_command is None else _per_step("new_command", new_command, nbatch, nstep),
        )
        values = [
            {k: np.repeat(np.asarray(v), nbatch, axis=0) for k, v in vals.items()}
            for vals in self.values
        ]
        with BatchRollout(nthread) as runner:
            state, sensordata, _ = LawRollout(runner, self.laws).run(
                [model] * nbatch,
                np.broadcast_to(x0, (nbatch, nstate)),
                np.broadcast_to(ctrl, (nbatch, nstep, model.nu)),
                values,
                data=data,
                align=False,
            )
        return state, sensordata


def _per_step(what: str, value: npt.ArrayLike, nbatch: int, nstep: int) -> np.ndarray:
    """``value`` as ``(nbatch, nstep)`` from ``(nstep,)`` or ``(nbatch, nstep)``."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape not in ((nstep,), (nbatch, nstep)):
        raise ValueError(
            must_be(f"LawRuntime.rollout: {what}", f"({nstep},) or ({nbatch}, {nstep})", arr.shape)
        )
    return np.ascontiguousarray(np.broadcast_to(arr, (nbatch, nstep)))


def _fitted_constants(folder: Path) -> str:
    """The per-recording constants of a results folder's fitted recordings, each named with
    its value (one value) or range (``identified.yaml``, ``constants``); ``""`` without any."""
    values: dict[str, list[float]] = {}
    for path in sorted(folder.glob(f"*{IDENTIFIED_YAML}")):
        try:
            recordings = (read_yaml(path) or {}).get("constants")
        except (OSError, ValueError):
            continue  # (only the message is at stake: the error it adds to stands)
        for consts in recordings.values() if isinstance(recordings, dict) else ():
            for name, v in consts.items() if isinstance(consts, dict) else ():
                if isinstance(v, int | float):
                    values.setdefault(str(name), []).append(float(v))
    said = [
        f"{name} = {vs[0]:g}" if min(vs) == max(vs) else f"{name} from {min(vs):g} to {max(vs):g}"
        for name, vs in sorted(values.items())
    ]
    return ", ".join(said) + f" ({IDENTIFIED_YAML}, constants)" if said else ""
