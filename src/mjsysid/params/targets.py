"""Where parameters land in a model: named elements, and exact writes into compiled fields.

A leaf module (it imports nothing of mjsysid but the error helpers), shared by the parameter
kinds (:mod:`mjsysid.params.kinds`, :mod:`mjsysid.params.inertia`) and by the batched model
writes (:class:`mjsysid.params.apply.WritePlan`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import mujoco
import numpy as np

from mjsysid.util.errors import did_you_mean

_OBJ = {
    "joint": mujoco.mjtObj.mjOBJ_JOINT,
    "actuator": mujoco.mjtObj.mjOBJ_ACTUATOR,
    "geom": mujoco.mjtObj.mjOBJ_GEOM,
    "pair": mujoco.mjtObj.mjOBJ_PAIR,
    "body": mujoco.mjtObj.mjOBJ_BODY,
}


def element_id(model: mujoco.MjModel, element: str, name: str) -> int:
    """Id of the named element, or a ``KeyError`` listing the known names."""
    i = mujoco.mj_name2id(model, _OBJ[element], name)
    if i < 0:
        count = {
            "joint": model.njnt,
            "actuator": model.nu,
            "geom": model.ngeom,
            "pair": model.npair,
            "body": model.nbody,
        }[element]
        known = [n for k in range(count) if (n := mujoco.mj_id2name(model, _OBJ[element], k))]
        raise KeyError(
            f"the model has no {element} named {name!r}; known: {known}{did_you_mean(name, known)}"
        )
    return int(i)


def spec_element(spec: mujoco.MjSpec, element: str, name: str) -> Any:
    """The named element of ``spec`` (``spec.joint(name)`` etc.) or a clear ``KeyError``."""
    obj = getattr(spec, element)(name)
    if obj is None:
        raise KeyError(f"the spec has no {element} named {name!r}")
    return obj


@dataclass(frozen=True)
class FieldWrite:
    """A parameter's exact compiled-model write as an elementwise map, so that many
    parameters can be written with one array operation per model field:

        model.<field>.flat[index] = value[component] / divisor * factor

    A ``model_modifier`` that implements :class:`FieldWriter` returns these (``None`` where
    the map does not apply to this model); :class:`~mjsysid.params.apply.WritePlan` then
    writes the parameter without calling it. The result must equal the ``model_modifier``'s
    bit for bit.
    """

    field: str
    index: np.ndarray  # flat indices into model.<field>
    component: np.ndarray  # entry of the parameter value written to each index
    divisor: np.ndarray
    factor: np.ndarray


@runtime_checkable
class FieldWriter(Protocol):
    """A ``model_modifier`` whose write is also an elementwise map (:class:`FieldWrite`)."""

    def __call__(self, model: mujoco.MjModel, param: Any, /) -> None: ...

    def field_writes(self, model: mujoco.MjModel, /) -> list[FieldWrite] | None: ...


@dataclass(frozen=True)
class MappedModelWrite:
    """A ``model_modifier`` together with the :class:`FieldWrite` map of what it writes:
    a :class:`FieldWriter` built from two plain functions.

    Attributes:
      write: ``write(model, param)``, the ``model_modifier`` itself.
      writes: ``writes(model) -> list[FieldWrite] | None``.
    """

    write: Callable[[mujoco.MjModel, Any], None]
    writes: Callable[[mujoco.MjModel], list[FieldWrite] | None]

    def __call__(self, model: mujoco.MjModel, param: Any, /) -> None:
        self.write(model, param)

    def field_writes(self, model: mujoco.MjModel, /) -> list[FieldWrite] | None:
        return self.writes(model)
