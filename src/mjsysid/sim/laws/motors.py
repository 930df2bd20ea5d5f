"""DC-motor laws: a motor's torque from its command, as hobby drivers and ``robot.yaml``
files describe it.

:class:`CommandTorque` is a motor whose whole torque is the law's: the actuator in the model
has no force of its own (``gear="0"``) and ``u`` is its command,

``u_d = u·σ((u − d⁺)/w) + u·σ((−u − d⁻)/w)`` (a cut-off deadzone per direction, ``σ`` the
logistic, hard for ``w = 0``), ``τ = k⁺·max(u_d, 0) + k⁻·min(u_d, 0) − k_e·v``, and an
optional saturation ``τ_max·tanh(τ/τ_max)``.

:class:`RobotYamlMotor` is the DC-motor model of a ``robot.yaml`` actuator (the model of the
hobby Furuta pendulum this project's users come with), exactly as that file's simulator runs
it. The actuator in the model is MuJoCo's own first-order filter (``<general
dyntype="filter" dynprm="filter_tau" gear="(g⁺ + g⁻)/2" ctrlrange=...>``: native, fitted as
``actuator_filter_tau`` and ``actuator_gear``), and the law does what the file's simulator
does around it, once per recorded command and then at every physics step:

* per command row: ``h = 0`` inside the deadzone (``0 ≤ u < d⁺`` or ``−d⁻ < u < 0``), else
  ``h = u·g_dir/ḡ`` with ``g_dir = g⁺`` for ``u ≥ 0`` and ``g⁻`` otherwise, ``ḡ = (g⁺ + g⁻)/2``
  (the command rescaled so that the filter's ``ḡ·act`` gives each direction its own gain);
  ``h`` is held until the next row. With ``width = w > 0`` the deadzone's edge is a ramp
  instead of a cut: ``h`` is scaled by ``clip((|u| − d_dir)/w + 1/2, 0, 1)``, so that a fit
  can move ``d`` between the discrete command levels of a log (integer PWM: steps of 1/255);
  ``w`` about two levels keeps the model within those levels of the file's (which is ``w =
  0``, the default);
* per physics step, with ``v`` the joint velocity: ``τ = −F_dir·sign(v)`` for ``|v| > 10⁻⁶``
  (``F⁺`` for ``v > 0``), ``− b_dir·v`` (``b⁺`` for ``v > 0``, else ``b⁻``), ``− c·v·|v|``, and
  for ``|h| > 10⁻⁶`` the back-EMF ``− k_e·v·sign(h)``; ``τ`` clipped to ``±10`` N·m and
  applied to the joint;
* the limit switch (``limit_switch``): where the joint is at a limit of its range and the
  command pushes further (``sign(gear)·h`` towards it), ``h`` becomes 0 for the rest of the
  command period;
* ``ctrl = h``.

Its parameters keep the file's names: ``gear``, ``deadzone``, ``damping`` and
``frictionloss`` (pairs), ``viscous_quadratic`` and ``back_emf_gain``; ``gear`` also writes the
actuator's native gear (their mean), so the identified MJCF is the file's simulator's model.
:func:`mjsysid.output.export.robot_yaml` writes them back in the file's own schema.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import mujoco
import numpy as np

from mjsysid.sim.laws.core import LawParameter, State, StepContext, clamp, register_law
from mjsysid.sim.laws.joint import ActuatedLaw, directional, split

__all__ = ["CommandTorque", "RobotYamlMotor"]


def _gate(x: np.ndarray, width: float) -> np.ndarray:
    """Logistic ``σ(x / width)`` (the step ``x > 0`` for ``width == 0``)."""
    if width <= 0:
        return (x > 0).astype(np.float64)
    return 0.5 * (1.0 + np.tanh(0.5 * x / width))


@dataclass(frozen=True)
class CommandTorque(ActuatedLaw):
    """A motor's torque from its command (module docstring).

    Attributes:
      deadzone: With a cut-off deadzone per direction (``deadzone``, 2 values).
      back_emf: With back-EMF ``k_e·v`` (``back_emf``).
      saturation: With a smooth saturation (``saturation``).
    """

    deadzone: bool = True
    back_emf: bool = True
    saturation: bool = False
    options: ClassVar[tuple[str, ...]] = (
        "directional", "width", "actuator", "deadzone", "back_emf", "saturation",
    )  # fmt: skip

    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        threshold = LawParameter(2, "1", doc="command threshold (+, -)", command_threshold=True)
        out = {"deadzone": threshold} if self.deadzone else {}
        out["torque_constant"] = self.pair("N·m", "torque per unit command", -np.inf)
        if self.back_emf:
            out["back_emf"] = LawParameter(1, "N·m·s/rad", doc="back-EMF torque per velocity")
        if self.saturation:
            out["saturation"] = LawParameter(1, "N·m", 1e-9, np.inf, "largest torque")
        return out

    def step(self, ctx: StepContext) -> State:
        u = ctx.ctrl[:, self.ctrl_index]
        vals = ctx.values
        if self.deadzone:
            d = vals["deadzone"]
            u = u * (_gate(u - d[:, 0], self.width) + _gate(-u - d[:, 1], self.width))
        tau = split(u, *directional(vals, "torque_constant"))
        if self.back_emf:
            tau = tau - vals["back_emf"][:, 0] * self.velocity(ctx)
        if self.saturation:
            limit = vals["saturation"][:, 0]
            tau = limit * np.tanh(tau / limit)
        self.add(ctx, tau)
        return {}


TORQUE_CLIP = 10.0  # N·m: the robot.yaml simulator clips the motor model's torque here
VELOCITY_GATE = 1e-6  # rad/s and command units: below this a sign counts as zero


@dataclass(frozen=True)
class RobotYamlMotor(ActuatedLaw):
    """The DC-motor model of a ``robot.yaml`` actuator (module docstring).

    Attributes:
      width: The deadzone edge's ramp (command units; 0: the file's cut).
      limit_switch: Cut the command at the joint's range limits (the joint must be limited).
      limited, low, high, gear_sign: Set by :meth:`bind` from the model.
    """

    limit_switch: bool = True
    limited: bool = field(default=False, compare=False)
    low: float = field(default=0.0, compare=False)
    high: float = field(default=0.0, compare=False)
    gear_sign: float = field(default=1.0, compare=False)
    options: ClassVar[tuple[str, ...]] = ("directional", "width", "actuator", "limit_switch")

    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        return {
            "gear": LawParameter(
                2, "N·m", 1e-9, np.inf, "torque constant (+, -)", actuator_field=("gear", 0)
            ),
            "deadzone": LawParameter(
                2, "1", doc="smallest |command| that drives (+, -)", command_threshold=True
            ),
            "damping": LawParameter(2, "N·m·s/rad", doc="viscous damping (+, -)"),
            "frictionloss": LawParameter(2, "N·m", doc="Coulomb friction (+, -)"),
            "viscous_quadratic": LawParameter(1, "N·m·s²/rad²", doc="velocity² drag"),
            "back_emf_gain": LawParameter(1, "N·m·s/rad", doc="back-EMF torque reduction"),
        }

    @property
    def states(self) -> Mapping[str, int]:
        return {"held": 1}

    def bind(self, model: mujoco.MjModel) -> Any:
        bound = super().bind(model)
        jid = int(model.dof_jntid[bound.dof])
        return dataclasses.replace(
            bound,
            limited=bool(model.jnt_limited[jid]),
            low=float(model.jnt_range[jid, 0]),
            high=float(model.jnt_range[jid, 1]),
            gear_sign=float(np.sign(model.actuator_gear[bound.ctrl_index, 0]) or 1.0),
        )

    def transform(self, u: np.ndarray, vals: Mapping[str, np.ndarray]) -> np.ndarray:
        """``(batch,)`` the held command of a recorded command ``u`` (deadzone, then the
        per-direction gear rescaled by the mean gear)."""
        dz, g = vals["deadzone"], vals["gear"]
        mean = 0.5 * (g[:, 0] + g[:, 1])
        scale = np.where(
            mean > 1e-8, np.where(u >= 0, g[:, 0], g[:, 1]) / np.where(mean > 1e-8, mean, 1.0), 1.0
        )
        if self.width > 0:
            edge = np.where(u >= 0, u - dz[:, 0], -u - dz[:, 1])
            return u * scale * clamp(edge / self.width + 0.5, 0.0, 1.0)
        dead = ((u >= 0) & (u < dz[:, 0])) | ((u < 0) & (u > -dz[:, 1]))
        return np.where(dead, 0.0, u * scale)

    def initial_state(self, ctx: StepContext) -> State:
        return {"held": self.transform(ctx.ctrl[:, self.ctrl_index], ctx.values)[:, None]}

    def motor_torque(
        self, v: np.ndarray, held: np.ndarray, vals: Mapping[str, np.ndarray]
    ) -> np.ndarray:
        """``(batch,)`` the model's torque at velocity ``v`` with the held command ``held``."""
        speed, ahead = np.abs(v), v > 0
        fric = np.where(ahead, vals["frictionloss"][:, 0], vals["frictionloss"][:, 1])
        tau = -np.where(speed > VELOCITY_GATE, np.sign(v) * fric, 0.0)
        tau = tau - np.where(ahead, vals["damping"][:, 0], vals["damping"][:, 1]) * v
        tau = tau - vals["viscous_quadratic"][:, 0] * v * speed
        driven = np.abs(held) > VELOCITY_GATE
        tau = tau - np.where(driven, vals["back_emf_gain"][:, 0] * v * np.sign(held), 0.0)
        return clamp(tau, -TORQUE_CLIP, TORQUE_CLIP)

    def step(self, ctx: StepContext) -> State:
        vals = ctx.values
        u = ctx.ctrl[:, self.ctrl_index]
        held = ctx.state["held"][:, 0]
        # a command row starts at 1 step in 10 (50 Hz commands, 2 ms steps): transform then
        held = (
            np.where(ctx.new_command, self.transform(u, vals), held)
            if ctx.new_command.any()
            else held.copy()
        )
        self.add(ctx, self.motor_torque(self.velocity(ctx), held, vals))
        if self.limit_switch and self.limited:
            q = self.position(ctx)
            push = self.gear_sign * held
            held = np.where(
                ((q >= self.high) & (push > 0)) | ((q <= self.low) & (push < 0)), 0.0, held
            )
        ctx.ctrl[:, self.ctrl_index] = held
        return {"held": held[:, None]}


register_law("command_torque", CommandTorque)
register_law("robot_yaml_motor", RobotYamlMotor)
