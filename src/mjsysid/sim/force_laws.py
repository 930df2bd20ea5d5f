"""Force laws: generalized forces MuJoCo cannot express, computed for a whole batch.

A force law maps the state and controls of every candidate of a batch to generalized forces,
``(q, v, ctrl, act, values) -> (batch, nv)``, applied at each step exactly as a simulator
that writes ``data.qfrc_applied`` before ``mj_step`` would (see
:mod:`mjsysid.sim.lockstep`). Its parameters are declared by name and size
(:attr:`ForceLaw.parameters`); their values per candidate arrive as ``values[name]`` of
shape ``(batch, size)``.

The library acts on one single-dof joint (hinge or slide) each:

* :class:`ViscousFriction` ``f = -(b⁺·max(v, 0) + b⁻·min(v, 0))``.
* :class:`CoulombFriction` ``f = -(F⁺·max(s, 0) + F⁻·min(s, 0))`` with ``s = sign(v)``, or
  the smooth ``s = tanh(v / width)``.
* :class:`StribeckFriction` ``f = -[(F_c + (F_s - F_c)·exp(-(v/v_s)²))·s + b·v]``
  (Armstrong-Hélouvry, *Control of machines with friction*, 1991).
* :class:`QuadraticDrag` ``f = -(c⁺·max(v, 0)² - c⁻·min(v, 0)²)``.
* :class:`CommandTorque` (command side, reads an actuator's ``ctrl``): a cut-off deadzone
  per direction with a smoothing width, a direction-dependent torque constant, back-EMF and
  saturation: ``τ = sat(k⁺·max(u_d, 0) + k⁻·min(u_d, 0) - k_e·v)``.

Smooth forms keep a gradient for finite differences; a width of 0 gives the hard forms.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

import mujoco
import numpy as np

from mjsysid.util.errors import must_be

Values = Mapping[str, np.ndarray]


@runtime_checkable
class ForceLaw(Protocol):
    """A vectorised force law (see the module docstring).

    Attributes:
      name: Unique name; its parameters are called ``f"{name}_{parameter}"``.
      parameters: ``{parameter: size}`` of the values :meth:`forces` reads.
    """

    @property
    def name(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, int]: ...

    def bind(self, model: mujoco.MjModel) -> ForceLaw:
        """The law with its joints and actuators resolved in ``model`` (a copy)."""
        ...

    def forces(
        self, q: np.ndarray, v: np.ndarray, ctrl: np.ndarray, act: np.ndarray, values: Values
    ) -> np.ndarray:
        """``(batch, nv)`` generalized forces from ``q (batch, nq)``, ``v (batch, nv)``,
        ``ctrl (batch, nu)``, ``act (batch, na)`` and ``values[name] (batch, size)``."""
        ...

    def config(self) -> dict[str, Any]:
        """JSON-able description that :func:`law_from_config` turns back into the law."""
        ...


def smooth_sign(v: np.ndarray, width: float) -> np.ndarray:
    """``tanh(v / width)`` (``sign(v)`` for ``width == 0``)."""
    return np.sign(v) if width <= 0 else np.tanh(v / width)


def split(x: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """``pos·max(x, 0) + neg·min(x, 0)``: a direction-dependent gain."""
    return pos * np.maximum(x, 0.0) + neg * np.minimum(x, 0.0)


def _directional(values: Values, key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(positive, negative)`` columns of a parameter of size 1 or 2, ``(batch,)`` each."""
    p = values[key]
    return p[:, 0], p[:, -1]


@dataclass(frozen=True)
class JointLaw:
    """Common part of the laws on one single-dof joint.

    Attributes:
      name: Law name (parameter prefix).
      joint: The joint's name (hinge or slide).
      directional: Separate values for positive and negative velocity (size 2 instead of 1).
      width: Smoothing width of the sign (m/s or rad/s; 0: hard sign).
    """

    name: str
    joint: str
    directional: bool = True
    width: float = 0.0
    dof: int = field(default=-1, compare=False)
    nv: int = field(default=0, compare=False)
    law: ClassVar[str] = ""

    def bind(self, model: mujoco.MjModel) -> Any:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, self.joint)
        if jid < 0:
            raise KeyError(f"force law {self.name!r}: no joint {self.joint!r} in the model")
        kind = int(model.jnt_type[jid])
        if kind not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            what = f"joint {self.joint!r} of force law {self.name!r}"
            raise ValueError(must_be(what, "a hinge or slide joint", mujoco.mjtJoint(kind).name))
        return dataclasses.replace(self, dof=int(model.jnt_dofadr[jid]), nv=int(model.nv))

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"law": self.law, "name": self.name, "joint": self.joint}
        out |= {"directional": self.directional, "width": float(self.width)}
        return out

    def _on_dof(self, v: np.ndarray, f: np.ndarray) -> np.ndarray:
        if self.nv == 0:  # set by bind
            raise RuntimeError(f"force law {self.name!r} is not bound: call bind(model) first")
        out = np.zeros((v.shape[0], self.nv))
        out[:, self.dof] = f
        return out

    def _size(self) -> int:
        return 2 if self.directional else 1


@dataclass(frozen=True)
class ViscousFriction(JointLaw):
    """``f = -(b⁺·max(v, 0) + b⁻·min(v, 0))``; parameter ``damping`` (N·s/m or N·m·s/rad)."""

    law: ClassVar[str] = "viscous"

    @property
    def parameters(self) -> Mapping[str, int]:
        return {"damping": self._size()}

    def forces(self, q: Any, v: np.ndarray, ctrl: Any, act: Any, values: Values) -> np.ndarray:
        vd = v[:, self.dof]
        return self._on_dof(v, -split(vd, *_directional(values, "damping")))


@dataclass(frozen=True)
class CoulombFriction(JointLaw):
    """``f = -(F⁺·max(s, 0) + F⁻·min(s, 0))``, ``s = tanh(v/width)``; parameter
    ``friction`` (N or N·m)."""

    law: ClassVar[str] = "coulomb"

    @property
    def parameters(self) -> Mapping[str, int]:
        return {"friction": self._size()}

    def forces(self, q: Any, v: np.ndarray, ctrl: Any, act: Any, values: Values) -> np.ndarray:
        s = smooth_sign(v[:, self.dof], self.width)
        return self._on_dof(v, -split(s, *_directional(values, "friction")))


@dataclass(frozen=True)
class StribeckFriction(JointLaw):
    """``f = -[(F_c + (F_s - F_c)·exp(-(v/v_s)²))·s + b·v]``; parameters ``coulomb``,
    ``static``, ``stribeck_velocity`` (> 0) and ``viscous`` (size 1 each)."""

    directional: bool = False
    law: ClassVar[str] = "stribeck"

    @property
    def parameters(self) -> Mapping[str, int]:
        return {"coulomb": 1, "static": 1, "stribeck_velocity": 1, "viscous": 1}

    def forces(self, q: Any, v: np.ndarray, ctrl: Any, act: Any, values: Values) -> np.ndarray:
        vd = v[:, self.dof]
        fc, fs = values["coulomb"][:, 0], values["static"][:, 0]
        vs, b = values["stribeck_velocity"][:, 0], values["viscous"][:, 0]
        level = fc + (fs - fc) * np.exp(-((vd / vs) ** 2))
        return self._on_dof(v, -(level * smooth_sign(vd, self.width) + b * vd))


@dataclass(frozen=True)
class QuadraticDrag(JointLaw):
    """``f = -(c⁺·max(v, 0)² - c⁻·min(v, 0)²)``; parameter ``drag`` (N·s²/m²)."""

    law: ClassVar[str] = "quadratic_drag"

    @property
    def parameters(self) -> Mapping[str, int]:
        return {"drag": self._size()}

    def forces(self, q: Any, v: np.ndarray, ctrl: Any, act: Any, values: Values) -> np.ndarray:
        vd = v[:, self.dof]
        return self._on_dof(v, -split(vd * np.abs(vd), *_directional(values, "drag")))


@dataclass(frozen=True)
class CommandTorque(JointLaw):
    """A motor's torque from its command: deadzone, torque constant, back-EMF, saturation.

    ``u`` is the ``ctrl`` of ``actuator`` (give it no force of its own in the model, e.g. a
    motor with ``gear="0"``). Cut-off deadzone per direction, smoothed by ``width``:
    ``u_d = u·σ((u - d⁺)/w) + u·σ((-u - d⁻)/w)`` (``σ`` the logistic; hard for ``w = 0``);
    ``τ = k⁺·max(u_d, 0) + k⁻·min(u_d, 0) - k_e·v``; saturation ``τ_max·tanh(τ/τ_max)``.

    Parameters: ``deadzone`` (2, with ``deadzone``), ``torque_constant`` (2 with
    ``directional``, else 1), ``back_emf`` (1, with ``back_emf``), ``saturation`` (1, with
    ``saturation``).
    """

    actuator: str = ""
    deadzone: bool = True
    back_emf: bool = True
    saturation: bool = False
    ctrl_index: int = field(default=-1, compare=False)
    law: ClassVar[str] = "command_torque"

    def bind(self, model: mujoco.MjModel) -> Any:
        bound = super().bind(model)
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, self.actuator)
        if aid < 0:
            raise KeyError(f"force law {self.name!r}: no actuator {self.actuator!r} in the model")
        return dataclasses.replace(bound, ctrl_index=aid)

    def config(self) -> dict[str, Any]:
        flags = {"deadzone": self.deadzone, "back_emf": self.back_emf}
        return super().config() | {"actuator": self.actuator, "saturation": self.saturation} | flags

    @property
    def parameters(self) -> Mapping[str, int]:
        out = {"deadzone": 2} if self.deadzone else {}
        out["torque_constant"] = self._size()
        if self.back_emf:
            out["back_emf"] = 1
        if self.saturation:
            out["saturation"] = 1
        return out

    def forces(
        self, q: Any, v: np.ndarray, ctrl: np.ndarray, act: Any, values: Values
    ) -> np.ndarray:
        u = ctrl[:, self.ctrl_index]
        if self.deadzone:
            d = values["deadzone"]
            u = u * (_gate(u - d[:, 0], self.width) + _gate(-u - d[:, 1], self.width))
        tau = split(u, *_directional(values, "torque_constant"))
        if self.back_emf:
            tau = tau - values["back_emf"][:, 0] * v[:, self.dof]
        if self.saturation:
            limit = values["saturation"][:, 0]
            tau = limit * np.tanh(tau / limit)
        return self._on_dof(v, tau)


def _gate(x: np.ndarray, width: float) -> np.ndarray:
    """Logistic ``σ(x / width)`` (the step ``x > 0`` for ``width == 0``)."""
    if width <= 0:
        return (x > 0).astype(np.float64)
    return 0.5 * (1.0 + np.tanh(0.5 * x / width))


LAWS: dict[str, type[JointLaw]] = {
    cls.law: cls
    for cls in (ViscousFriction, CoulombFriction, StribeckFriction, QuadraticDrag, CommandTorque)
}


def law_from_config(config: Mapping[str, Any]) -> ForceLaw:
    """The library law that ``config`` (from :meth:`ForceLaw.config`) describes.

    Raises:
      KeyError: ``config["law"]`` names no library law.
    """
    kind = config.get("law")
    if kind not in LAWS:
        raise KeyError(f"unknown force law {kind!r}; known: {sorted(LAWS)}")
    args = {k: v for k, v in config.items() if k != "law"}
    law: Any = LAWS[str(kind)](**args)
    return cast(ForceLaw, law)


def total_forces(
    laws: list[ForceLaw],
    q: np.ndarray,
    v: np.ndarray,
    ctrl: np.ndarray,
    act: np.ndarray,
    values: list[Values],
) -> np.ndarray:
    """``(batch, nv)`` sum of the forces of bound ``laws`` (``values[i]``: law ``i``'s)."""
    out = np.zeros_like(v)
    for law, vals in zip(laws, values, strict=True):
        out += law.forces(q, v, ctrl, act, vals)
    return out
