"""Friction laws of a joint: Coulomb, viscous, Stribeck, quadratic drag and load-dependent
friction, per direction.

What MuJoCo expresses natively stays native: the symmetric dry friction of a joint is its
``frictionloss`` (:func:`mjsysid.make_parameter` kind ``joint_frictionloss``), which MuJoCo's
constraint solver handles implicitly, so the joint *sticks* at any timestep a real log uses
(5-20 ms); viscous damping is ``damping``, integrated implicitly. These laws add, as
``qfrc_applied``, what those cannot express (the sign ``s`` is ``tanh(v/width)``, the hard
sign for ``width = 0``):

* :class:`ViscousFriction` ``f = -(b⁺·max(v, 0) + b⁻·min(v, 0))``.
* :class:`CoulombFriction` ``f = -(F⁺·max(s, 0) + F⁻·min(s, 0))``.
* :class:`StribeckFriction` ``f = -[(F_c + (F_s - F_c)·exp(-(v/v_s)²))·s + b·v]``
  (Armstrong-Hélouvry, *Control of machines with friction*, 1991).
* :class:`QuadraticDrag` ``f = -(c⁺·max(v, 0)² - c⁻·min(v, 0)²)``.
* :class:`JointFriction`, the actuator-modelling family (Coulomb-viscous up to load-dependent
  and quadratic terms, each per direction when ``directional``): with ``τ`` the torque the
  laws before it applied to the joint this step (a motor's, through its gearbox), the friction
  level is

  ``F = F_c + F_s·exp(-|v/v_s|^α) + k_τ·|τ| + k_q·τ²``

  and ``f = -(F·s + b·v + c·v·|v|)``. ``F_c`` is what the joint's native ``frictionloss``
  does not already hold (its per-direction part), ``F_s`` the Stribeck excess at rest,
  ``k_τ`` and ``k_q`` the gearbox's load-dependent friction growing with the transmitted
  torque (Rhoban's "Better Actuator Models" study, arXiv:2410.08650, models M1-M6: the same
  terms, on the motor side of the gearbox, and on the load side with ``load_external``). Each
  term is switched by an option, so the parameters are only the ones fitted.

Friction that sticks. An explicit friction force larger than what stops the joint within one
step makes it chatter around zero velocity (``width = 0``), and a smoothed sign lets it creep.
Two ways make it stick at the 5-20 ms steps of real logs: the native ``frictionloss``
(symmetric, a constant level), or ``JointFriction(stick=True)``, which computes the force that
would stop the joint in the step (from the joint-space dynamics,
:mod:`mjsysid.sim.laws.dynamics`) and applies it up to the friction budget, per direction and
load-dependent (the implicit scheme of the BAM study's simulator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mjsysid.sim.laws.core import LawParameter, State, StepContext, register_law
from mjsysid.sim.laws.joint import JointLaw, directional, smooth_sign, split
from mjsysid.util.errors import must_be

__all__ = [
    "CoulombFriction",
    "JointFriction",
    "QuadraticDrag",
    "StribeckFriction",
    "ViscousFriction",
]


@dataclass(frozen=True)
class ViscousFriction(JointLaw):
    """``f = -(b⁺·max(v, 0) + b⁻·min(v, 0))``; parameter ``damping``."""

    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        return {"damping": self.pair("N·m·s/rad", "viscous friction coefficient")}

    def step(self, ctx: StepContext) -> State:
        v = self.velocity(ctx)
        self.add(ctx, -split(v, *directional(ctx.values, "damping")))
        return {}


@dataclass(frozen=True)
class CoulombFriction(JointLaw):
    """``f = -(F⁺·max(s, 0) + F⁻·min(s, 0))``, ``s = tanh(v/width)``; parameter
    ``friction``."""

    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        return {"friction": self.pair("N·m", "dry (Coulomb) friction torque")}

    def step(self, ctx: StepContext) -> State:
        s = smooth_sign(self.velocity(ctx), self.width)
        self.add(ctx, -split(s, *directional(ctx.values, "friction")))
        return {}


@dataclass(frozen=True)
class StribeckFriction(JointLaw):
    """``f = -[(F_c + (F_s - F_c)·exp(-(v/v_s)²))·s + b·v]``; parameters ``coulomb``,
    ``static``, ``stribeck_velocity`` (> 0) and ``viscous`` (one value each)."""

    directional: bool = False

    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        return {
            "coulomb": LawParameter(1, "N·m", doc="dry friction while sliding"),
            "static": LawParameter(1, "N·m", doc="dry friction at rest"),
            "stribeck_velocity": LawParameter(1, "rad/s", 1e-6, np.inf, "Stribeck velocity"),
            "viscous": LawParameter(1, "N·m·s/rad", doc="viscous friction coefficient"),
        }

    def step(self, ctx: StepContext) -> State:
        v, vals = self.velocity(ctx), ctx.values
        fc, fs = vals["coulomb"][:, 0], vals["static"][:, 0]
        vs, b = vals["stribeck_velocity"][:, 0], vals["viscous"][:, 0]
        level = fc + (fs - fc) * np.exp(-((v / vs) ** 2))
        self.add(ctx, -(level * smooth_sign(v, self.width) + b * v))
        return {}


@dataclass(frozen=True)
class QuadraticDrag(JointLaw):
    """``f = -(c⁺·max(v, 0)² - c⁻·min(v, 0)²)``; parameter ``drag``."""

    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        return {"drag": self.pair("N·m·s²/rad²", "quadratic (velocity²) drag")}

    def step(self, ctx: StepContext) -> State:
        v = self.velocity(ctx)
        self.add(ctx, -split(v * np.abs(v), *directional(ctx.values, "drag")))
        return {}


def _magnitude(ahead: np.ndarray, vals: Mapping[str, np.ndarray], key: str) -> np.ndarray:
    """``|split(d, k⁺, k⁻)|`` for a direction ``d = ±1`` (``ahead``: ``d > 0``) of parameter
    ``key``: ``|k⁺|`` or ``|k⁻|``, the same values by one selection instead of
    :func:`split`'s four operations (``k·1 + k'·0`` is ``k`` exactly for finite values)."""
    pos, neg = directional(vals, key)
    return np.abs(np.where(ahead, pos, neg))


@dataclass(frozen=True)
class JointFriction(JointLaw):
    """The friction family of actuator-modelling work (module docstring), its terms chosen
    by options.

    Attributes:
      coulomb: Per-direction dry friction beyond the native ``frictionloss`` (``coulomb``).
      viscous: Viscous friction (``viscous``).
      stribeck: The Stribeck excess at rest and its velocity (``stribeck``,
        ``stribeck_velocity``), with the exponent ``stribeck_exponent`` (``α``; fitted when
        ``fit_exponent``, else 2).
      load: Friction growing with the motor's torque ``τ_m`` (what the laws before this one
        applied): linear (``load``) and quadratic (``load_quadratic``, with
        ``load_quadratic=True``).
      load_external: Friction growing with the torque the load exerts, ``τ_e = -qfrc_bias``
        (gravity and inertial forces) too: the linear term becomes ``|k_m·τ_m - k_e·τ_e|``
        (``load``, ``load_external``), the gearbox's transmitted torque as the BAM study
        writes it (its M5).
      stick: Implicit dry friction: the whole friction (dry, Stribeck, load, viscous and
        drag terms) is the budget ``F`` of a force that opposes what the joint would do in
        the step without it, ``τ_stop = J·v/dt + τ_m + τ_e + τ_passive``, and stops the
        joint exactly when it can: ``f = -sign(τ_stop)·min(|τ_stop|, F)`` (``J`` the
        step's inertia, :mod:`mjsysid.sim.laws.dynamics`). The joint sticks and slips
        without chattering at any timestep; the direction of a pair is that of ``τ_stop``.
        ``width`` is not used. Exact for a joint that is the only dof of its tree and not
        driven by native actuators (their force is not in the balance).
    """

    coulomb: bool = True
    viscous: bool = True
    stribeck: bool = False
    fit_exponent: bool = False
    load: bool = False
    load_quadratic: bool = False
    load_external: bool = False
    drag: bool = False
    stick: bool = False
    options: ClassVar[tuple[str, ...]] = (
        "directional", "width", "coulomb", "viscous", "stribeck", "fit_exponent", "load",
        "load_quadratic", "load_external", "drag", "stick",
    )  # fmt: skip

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in self.options[2:]:
            if not isinstance(getattr(self, key), bool):
                raise ValueError(
                    must_be(f"force law {self.name!r}: {key}", "true or false", getattr(self, key))
                )
        for key in ("load_quadratic", "load_external"):
            if getattr(self, key) and not self.load:
                raise ValueError(
                    must_be(f"force law {self.name!r}: {key}", "false without load", True)
                )

    @property
    def dynamics(self) -> bool:
        return self.stick or self.load_external

    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        out: dict[str, LawParameter] = {}
        if self.coulomb:
            out["coulomb"] = self.pair("N·m", "dry friction beyond the joint's frictionloss")
        if self.viscous:
            out["viscous"] = self.pair("N·m·s/rad", "viscous friction coefficient")
        if self.stribeck:
            out["stribeck"] = self.pair("N·m", "extra dry friction at rest (Stribeck)")
            out["stribeck_velocity"] = LawParameter(1, "rad/s", 1e-4, np.inf, "Stribeck velocity")
            if self.fit_exponent:
                out["stribeck_exponent"] = LawParameter(1, "1", 0.2, 5.0, "Stribeck exponent α")
        if self.load:
            out["load"] = self.pair("1", "friction per unit motor torque")
            if self.load_external:
                out["load_external"] = self.pair("1", "friction per unit load torque")
            if self.load_quadratic:
                out["load_quadratic"] = self.pair("1/(N·m)", "friction per motor torque²")
        if self.drag:
            out["drag"] = self.pair("N·m·s²/rad²", "quadratic (velocity²) drag")
        return out

    def budget(
        self,
        direction: np.ndarray,
        v: np.ndarray,
        tau_m: np.ndarray,
        tau_e: np.ndarray | None,
        vals: Mapping[str, np.ndarray],
    ) -> np.ndarray:
        """The dry-friction level ``F ≥ 0`` in ``direction`` (±1 per simulation) at velocity
        ``v``, motor torque ``tau_m`` and load torque ``tau_e`` (with ``load_external``)."""
        ahead = direction > 0

        def gain(key: str) -> np.ndarray:
            return _magnitude(ahead, vals, key)

        level = gain("coulomb") if self.coulomb else np.zeros_like(v)
        if self.stribeck:
            alpha = vals["stribeck_exponent"][:, 0] if self.fit_exponent else 2.0
            drop = np.exp(-(np.abs(v / vals["stribeck_velocity"][:, 0]) ** alpha))
            level = level + gain("stribeck") * drop
        if self.load:
            transmitted = gain("load") * tau_m
            if tau_e is not None:
                transmitted = transmitted - gain("load_external") * tau_e
            level = level + np.abs(transmitted)
            if self.load_quadratic:
                level = level + gain("load_quadratic") * tau_m * tau_m
        return level

    def step(self, ctx: StepContext) -> State:
        v, vals = self.velocity(ctx), ctx.values
        tau_m = ctx.force[:, self.dof]  # the torque the laws before it applied (a motor's)
        tau_e = None
        if self.dynamics:
            assert ctx.bias is not None and ctx.passive is not None and ctx.inertia is not None
            tau_e = -ctx.bias[:, self.dof]
        if not self.stick:
            direction = np.sign(v) + (v == 0)
            f = self.budget(direction, v, tau_m, tau_e if self.load_external else None, vals)
            f = f * smooth_sign(v, self.width)
            if self.viscous:
                f = f + split(v, *directional(vals, "viscous"))
            if self.drag:
                f = f + split(v * np.abs(v), *directional(vals, "drag"))
            self.add(ctx, -f)
            return {}
        assert tau_e is not None and ctx.passive is not None and ctx.inertia is not None
        stop = ctx.inertia[:, self.dof] * v / ctx.dt + tau_m + tau_e + ctx.passive[:, self.dof]
        direction = np.sign(stop) + (stop == 0)
        f = self.budget(direction, v, tau_m, tau_e if self.load_external else None, vals)
        ahead = direction > 0
        if self.viscous:
            f = f + _magnitude(ahead, vals, "viscous") * np.abs(v)
        if self.drag:
            f = f + _magnitude(ahead, vals, "drag") * v * v
        self.add(ctx, -direction * np.minimum(np.abs(stop), f))
        return {}


for _name, _cls in (
    ("viscous", ViscousFriction),
    ("coulomb", CoulombFriction),
    ("stribeck", StribeckFriction),
    ("quadratic_drag", QuadraticDrag),
    ("joint_friction", JointFriction),
):
    register_law(_name, _cls)
