"""The common part of laws that act on one single-dof joint (and read one actuator's
command): binding to the model, direction-dependent pairs, smooth signs.

Pairs. A parameter of size 2 is ``(positive direction, negative direction)``:
``split(x, p, n) = p·max(x, 0) + n·min(x, 0)``; the direction is the sign of the velocity
for friction and of the command for a motor. A law built with ``directional=False`` declares
size 1 and uses the one value both ways.

Smoothing. ``smooth_sign(v, w) = tanh(v / w)`` keeps a finite-difference gradient through a
sign change; ``w = 0`` is the hard sign (what a real stiction or deadzone does, and what the
source document's motor model does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import mujoco
import numpy as np

from mjsysid.sim.laws.core import LawParameter, State, StepContext, law_name
from mjsysid.util.errors import must_be

__all__ = ["JointLaw", "directional", "smooth_sign", "split"]


def smooth_sign(v: np.ndarray, width: float) -> np.ndarray:
    """``tanh(v / width)`` (``sign(v)`` for ``width == 0``)."""
    return np.sign(v) if width <= 0 else np.tanh(v / width)


def split(x: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """``pos·max(x, 0) + neg·min(x, 0)``: a direction-dependent gain."""
    return pos * np.maximum(x, 0.0) + neg * np.minimum(x, 0.0)


def directional(values: Mapping[str, np.ndarray], key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(positive, negative)`` of a parameter of size 1 or 2, each ``(batch,)`` (or
    ``(batch, ndof)`` for a law merged over several dofs)."""
    p = values[key]
    return p[:, 0], p[:, -1]


@dataclass(frozen=True)
class JointLaw:
    """A law on one single-dof joint (hinge or slide), optionally reading one actuator.

    Subclasses declare :attr:`parameters` (and :attr:`states`, :attr:`inputs`,
    :attr:`constants` when they have any) and implement :meth:`step`.

    Attributes:
      name: Law name (parameter prefix).
      joint: The joint's name.
      directional: Separate values for the positive and negative direction (pairs).
      width: Smoothing width of signs (rad/s or m/s; 0: hard).
      dof: The joint's dof (set by :meth:`bind`; an index array when merged over joints).
      qpos: Its position's index in ``qpos`` (set by :meth:`bind`).
      nv: The model's ``nv`` (set by :meth:`bind`).
    """

    name: str
    joint: str
    directional: bool = True
    width: float = 0.0
    dof: Any = field(default=-1, compare=False)
    qpos: Any = field(default=-1, compare=False)
    nv: int = field(default=0, compare=False)
    options: ClassVar[tuple[str, ...]] = ("directional", "width")

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(must_be("force law name", "a non-empty string", self.name))
        w = self.width
        if not (
            isinstance(w, int | float) and not isinstance(w, bool) and np.isfinite(w) and w >= 0
        ):
            raise ValueError(must_be(f"force law {self.name!r}: width", "a finite number >= 0", w))

    # -- the protocol ---------------------------------------------------------------------
    @property
    def parameters(self) -> Mapping[str, LawParameter]:
        return {}

    @property
    def states(self) -> Mapping[str, int]:
        return {}

    @property
    def inputs(self) -> tuple[str, ...]:
        return ()

    @property
    def constants(self) -> tuple[str, ...]:
        return ()

    @property
    def dynamics(self) -> bool:
        return False

    def bind(self, model: mujoco.MjModel) -> Any:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, self.joint)
        if jid < 0:
            raise KeyError(f"force law {self.name!r}: no joint {self.joint!r} in the model")
        kind = int(model.jnt_type[jid])
        if kind not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            what = f"joint {self.joint!r} of force law {self.name!r}"
            raise ValueError(must_be(what, "a hinge or slide joint", mujoco.mjtJoint(kind).name))
        return dataclasses.replace(
            self, dof=int(model.jnt_dofadr[jid]), qpos=int(model.jnt_qposadr[jid]), nv=int(model.nv)
        )

    def initial_state(self, ctx: StepContext) -> State:
        return {}

    def step(self, ctx: StepContext) -> State:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"law": law_name(type(self)), "name": self.name, "joint": self.joint}
        for key in self.options:
            value = getattr(self, key)
            out[key] = float(value) if isinstance(value, float) else value
        return out

    # -- helpers --------------------------------------------------------------------------
    def pair(self, unit: str, doc: str, lower: float = 0.0, upper: float = np.inf) -> LawParameter:
        """A parameter of size 2 (``directional``) or 1."""
        return LawParameter(2 if self.directional else 1, unit, lower, upper, doc)

    def bound_check(self) -> None:
        if self.nv == 0:
            raise RuntimeError(f"force law {self.name!r} is not bound: call bind(model) first")

    def velocity(self, ctx: StepContext) -> np.ndarray:
        """``(batch,)`` (or ``(batch, ndof)``) the joint's velocity."""
        self.bound_check()
        return ctx.v[:, self.dof]

    def position(self, ctx: StepContext) -> np.ndarray:
        """``(batch,)`` the joint's position (a hinge's angle, a slide's displacement)."""
        self.bound_check()
        return ctx.q[:, self.qpos]

    def add(self, ctx: StepContext, torque: np.ndarray) -> None:
        """Adds ``torque`` (``(batch,)`` or ``(batch, ndof)``) on the joint's dof."""
        ctx.force[:, self.dof] += torque


@dataclass(frozen=True)
class ActuatedLaw(JointLaw):
    """A :class:`JointLaw` that reads (and may change) one actuator's command.

    Attributes:
      actuator: The actuator's name (``ctrl_index`` its index, set by :meth:`bind`).
    """

    actuator: str = ""
    ctrl_index: Any = field(default=-1, compare=False)
    options: ClassVar[tuple[str, ...]] = ("directional", "width", "actuator")

    def bind(self, model: mujoco.MjModel) -> Any:
        bound = super().bind(model)
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, self.actuator)
        if aid < 0:
            raise KeyError(f"force law {self.name!r}: no actuator {self.actuator!r} in the model")
        return dataclasses.replace(bound, ctrl_index=int(aid))
