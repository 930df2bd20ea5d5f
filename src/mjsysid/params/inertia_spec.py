"""Reading and writing one spec body's inertia directly: the helpers of ``mujoco.sysid``.

These take and return an ``MjSpec`` (the peer's ``model_modifier`` functions, under its names)
and work on bodies with or without an explicit ``<inertial>``: a body whose inertia MuJoCo
infers from its geoms is first given the inertial the compiler infers, so what is written
afterwards is what a compiled model holds. Parameters for a fit come from
:func:`mjsysid.params.inertia.body_inertia_param`; the maths is
:mod:`mjsysid.params.inertia_math`.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.params.inertia import InertiaType, _make_compute, _write_spec, full_inertia_from_model
from mjsysid.params.inertia_math import pi_from_theta, theta_from_inertial
from mjsysid.params.targets import spec_element
from mjsysid.util.errors import must_be

__all__ = [
    "apply_body_mass_ipos",
    "apply_body_theta_inertia",
    "pi_from_body",
    "scale_body_inertia",
    "theta_inertia_from_body",
]


def _check_spec(spec: Any) -> mujoco.MjSpec:
    if not isinstance(spec, mujoco.MjSpec):
        raise TypeError(must_be("spec", "a mujoco.MjSpec", type(spec).__name__))
    return spec


def _compiled_inertial(spec: mujoco.MjSpec, body_name: str) -> tuple[float, np.ndarray, np.ndarray]:
    """``(m, c, I_c)`` of the body as the compiler makes it (from a copy of ``spec``)."""
    spec_element(spec, "body", body_name)  # KeyError listing the bodies
    model = spec.copy().compile()
    return full_inertia_from_model(model, body_name)


def _explicit_body(spec: mujoco.MjSpec, body_name: str) -> Any:
    """The spec body, with an explicit inertial (the compiler's inferred one if it had none)."""
    body = spec_element(spec, "body", body_name)
    if not body.explicitinertial:
        m, c, i_c = _compiled_inertial(spec, body_name)
        theta = theta_from_inertial(m, c, i_c)
        _write_spec(body, _make_compute(InertiaType.Pseudo, {})(theta))
    return body


def pi_from_body(spec: mujoco.MjSpec, body_name: str) -> np.ndarray:
    """``π`` of a body: ``(13,)`` ``[m, h = m c, Ī (3x3 row-major, about the body origin)]``.

    The layout of :func:`mjsysid.params.inertia_math.pi_from_theta` (what ``mujoco.sysid``
    returns). Read from a compiled copy of ``spec``, so inferred inertials count too.
    """
    return pi_from_theta(theta_inertia_from_body(spec, body_name))


def theta_inertia_from_body(spec: mujoco.MjSpec, body_name: str) -> np.ndarray:
    """Log-Cholesky ``theta`` ``(10,)`` of a body's inertia (read from a compiled copy)."""
    m, c, i_c = _compiled_inertial(_check_spec(spec), body_name)
    return theta_from_inertial(m, c, i_c)


def apply_body_theta_inertia(
    spec: mujoco.MjSpec, body_name: str, theta: npt.ArrayLike
) -> mujoco.MjSpec:
    """Writes the body inertia of log-Cholesky ``theta`` ``(10,)`` into ``spec`` and returns it.

    Mass, ``ipos`` and the principal moments and axes are written (``fullinertia`` unset), so
    the spec compiles (``mujoco.sysid``'s version leaves one that does not).
    """
    body = spec_element(_check_spec(spec), "body", body_name)
    th = np.asarray(theta, dtype=np.float64).reshape(-1)
    _write_spec(body, _make_compute(InertiaType.Pseudo, {})(th))
    return spec


def _positive(name: str, value: Any) -> float:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size != 1 or not (math.isfinite(arr[0]) and arr[0] > 0):
        raise ValueError(must_be(name, "one finite number > 0", value))
    return float(arr[0])


def _scale_rotational(body: Any, factor: float | np.ndarray) -> None:
    """Scales the body's rotational inertia (diagonal, or ``fullinertia`` when set)."""
    full = np.asarray(body.fullinertia, dtype=np.float64)
    if np.all(np.isfinite(full)):
        if np.ndim(factor) != 0:
            raise ValueError(must_be("value", "one number for a body with a fullinertia", factor))
        body.fullinertia = (full * factor).tolist()
        return
    body.inertia = (np.asarray(body.inertia, dtype=np.float64) * factor).tolist()


def apply_body_mass_ipos(
    spec: mujoco.MjSpec,
    body_name: str,
    mass: float | npt.ArrayLike | None = None,
    ipos: npt.ArrayLike | None = None,
    rot_inertia_scale: bool = False,
) -> mujoco.MjSpec:
    """Sets a body's mass [kg] and/or centre of mass ``ipos`` ``(3,)`` [m]; returns ``spec``.

    Args:
      mass: A number or a 1-element array, ``> 0``; ``None`` keeps the mass.
      ipos: ``(3,)``; ``None`` keeps it.
      rot_inertia_scale: Scale the rotational inertia by ``new mass / old mass``.
    """
    body = _explicit_body(_check_spec(spec), body_name)
    if mass is not None:
        m = _positive("mass", mass)
        if rot_inertia_scale:
            _scale_rotational(body, m / float(body.mass))
        body.mass = m
    if ipos is not None:
        c = np.asarray(ipos, dtype=np.float64).reshape(-1)
        if c.shape != (3,) or not np.all(np.isfinite(c)):
            raise ValueError(must_be("ipos", "3 finite numbers [m]", ipos))
        body.ipos = c.tolist()
    return spec


def scale_body_inertia(
    spec: mujoco.MjSpec, body_name: str, value: float | npt.ArrayLike
) -> mujoco.MjSpec:
    """Scales a body's rotational inertia by ``value`` (one factor ``> 0``, or 3, one per
    principal moment); the mass is unchanged. Returns ``spec``."""
    body = _explicit_body(_check_spec(spec), body_name)
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size not in (1, 3) or not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValueError(must_be("value", "1 or 3 finite factors > 0", value))
    _scale_rotational(body, float(arr[0]) if arr.size == 1 else arr)
    return spec
