"""Smart-servo laws: a servo's own firmware loop and its DC motor, from recorded goals.

A smart servo (Dynamixel, Feetech, ...) closes its position loop itself: its firmware turns
the position error into a PWM duty cycle, the H-bridge puts ``duty·V`` volts on the motor, and
the motor's torque follows the DC-motor law. The log holds what the host asked (the goal
position, whether the torque was on) and what the servo measured, so the law reads the goal
and the torque-enable flag as recorded inputs, and the firmware gain register as a
per-recording constant.

:class:`PositionServo` (voltage-controlled, as such servos are):

``duty = clip(η·kp·(q_goal − q) − η_d·kd·v, −1, 1)``, ``V = duty·V_in``,
``τ = k_t·(V − k_t·v)/R`` while the torque is enabled; with the torque off the motor is
disconnected (``τ = 0``), or with ``off="short"`` its windings are shorted (``τ =
−k_t²·v/R``: the braking some drivers apply).

``kp`` (and ``kd``) are the firmware's register values, per recording; ``η`` (``gain``) is
what the firmware makes of one unit of ``kp`` (duty per radian; vendors do not document it,
so it is fitted), ``k_t`` the torque constant (N·m/A, also the back-EMF constant in V·s/rad),
``R`` the winding resistance. The supply ``V_in`` is the recorded voltage input when there
is one (``voltage_input``), else the per-recording constant ``vin``. The rotor's reflected
inertia is the joint's native ``armature``, and friction is a friction law on the same joint
(:class:`~mjsysid.sim.laws.friction.JointFriction`) placed after this one (its load term
reads this law's torque).

:class:`CurrentServo` (current or torque mode): ``τ = k_t·clip(i_goal, −i_max, i_max)`` from
a recorded current goal, off when the torque is disabled.

Reference: the servo models of Rhoban's "Better Actuator Models" (arXiv:2410.08650).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mjsysid.sim.laws.core import LawParameter, State, StepContext, clamp, register_law
from mjsysid.sim.laws.joint import JointLaw
from mjsysid.util.errors import must_be

__all__ = ["CurrentServo", "PositionServo"]

_OFF = ("open", "short")


@dataclass(frozen=True)
class PositionServo(JointLaw):
    """A voltage-controlled smart servo with its own position loop (module docstring).

    Attributes:
      goal_input: The recorded input holding the goal position (rad).
      enable_input: The recorded input holding the torque-enable flag (0/1); ``""``: always
        on.
      voltage_input: The recorded input holding the supply voltage (V); ``""``: the
        per-recording constant ``vin``.
      derivative: With the firmware's D term (``gain_d`` and the constant ``kd``).
      off: What the motor does with the torque disabled: ``"open"`` (disconnected) or
        ``"short"`` (windings shorted: back-EMF braking).
    """

    directional: bool = False
    goal_input: str = "goal_position"
    enable_input: str = "torque_enable"
    voltage_input: str = ""
    derivative: bool = False
    off: str = "open"
    options: ClassVar[tuple[str, ...]] = (
        "goal_input", "enable_input", "voltage_input", "derivative", "off",
    )  # fmt: skip

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.off not in _OFF:
            raise ValueError(
                must_be(f"force law {self.name!r}: off", f"one of {list(_OFF)}", self.off)
            )
        if not isinstance(self.goal_input, str) or not self.goal_input:
            raise ValueError(
                must_be(f"force law {self.name!r}: goal_input", "an input name", self.goal_input)
            )

    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        out = {
            "kt": LawParameter(1, "N·m/A", 1e-9, np.inf, "torque (and back-EMF) constant"),
            "resistance": LawParameter(1, "Ω", 1e-9, np.inf, "winding resistance"),
            "gain": LawParameter(1, "1/rad", 0.0, np.inf, "duty per radian per unit of kp"),
        }
        if self.derivative:
            out["gain_d"] = LawParameter(1, "s/rad", 0.0, np.inf, "duty per rad/s per unit of kd")
        return out

    @property
    def inputs(self) -> tuple[str, ...]:
        names = [self.goal_input, self.enable_input, self.voltage_input]
        return tuple(n for n in names if n)

    @property
    def constants(self) -> tuple[str, ...]:
        out = ["kp"] + (["kd"] if self.derivative else [])
        return (*out, "vin") if not self.voltage_input else tuple(out)

    def step(self, ctx: StepContext) -> State:
        vals = ctx.values
        v = self.velocity(ctx)
        error = ctx.inputs[self.goal_input] - self.position(ctx)
        u = vals["gain"][:, 0] * ctx.constants["kp"] * error
        if self.derivative:
            u = u - vals["gain_d"][:, 0] * ctx.constants["kd"] * v
        volts = ctx.inputs[self.voltage_input] if self.voltage_input else ctx.constants["vin"]
        kt, r = vals["kt"][:, 0], vals["resistance"][:, 0]
        on = kt * (clamp(u, -1.0, 1.0) * volts - kt * v) / r
        if self.enable_input:
            enabled = ctx.inputs[self.enable_input] > 0.5
            off = -kt * kt * v / r if self.off == "short" else 0.0
            on = np.where(enabled, on, off)
        self.add(ctx, on)
        return {}


@dataclass(frozen=True)
class CurrentServo(JointLaw):
    """A servo in current (torque) mode: ``τ = k_t·clip(i_goal, ±i_max)``.

    Attributes:
      current_input: The recorded input holding the current goal (A).
      enable_input: The recorded torque-enable flag; ``""``: always on.
    """

    directional: bool = False
    current_input: str = "goal_current"
    enable_input: str = "torque_enable"
    options: ClassVar[tuple[str, ...]] = ("current_input", "enable_input")

    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        return {
            "kt": LawParameter(1, "N·m/A", 1e-9, np.inf, "torque constant"),
            "max_current": LawParameter(1, "A", 1e-9, np.inf, "the driver's current limit"),
        }

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(n for n in (self.current_input, self.enable_input) if n)

    def step(self, ctx: StepContext) -> State:
        vals = ctx.values
        limit = vals["max_current"][:, 0]
        tau = vals["kt"][:, 0] * clamp(ctx.inputs[self.current_input], -limit, limit)
        if self.enable_input:
            tau = np.where(ctx.inputs[self.enable_input] > 0.5, tau, 0.0)
        self.add(ctx, tau)
        return {}


register_law("position_servo", PositionServo)
register_law("current_servo", CurrentServo)
