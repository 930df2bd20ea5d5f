"""``mujoco.sysid._src.model_modifier``: applying parameters to a spec, actuator gains,
visuals, and the peer's body-inertia helpers.

``apply_param_modifiers``, ``apply_param_modifiers_spec``, the gain setters and
``remove_visuals`` are mjsysid's own (:mod:`mjsysid.params.apply`). The inertia helpers here
are the peer's names and layouts over mjsysid's maths (:mod:`mjsysid.params.inertia_math`):
``π`` in the peer's 13-number layout ``[m, h, Ī row-major]``, the pseudo-inertia's upper
Cholesky factor, and spec edits that keep the spec compilable (the peer's
``apply_body_theta_inertia`` leaves one that does not). :func:`body_inertia_param` has the
peer's defaults (``InertiaType.MassIpos``, no scaling) and bound keywords.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.compat._src.parameter import InertiaType, Parameter, ParameterDict
from mjsysid.params.apply import (
    apply_dgain,
    apply_param_modifiers,
    apply_param_modifiers_spec,
    apply_pdgain,
    apply_pgain,
    remove_visuals,
)
from mjsysid.params.inertia import apply_body_inertia, full_inertia_from_model, write_body_theta
from mjsysid.params.inertia import body_inertia_param as _core_body_inertia_param
from mjsysid.params.inertia_math import (
    inertial_from_theta,
    pseudo_inertia_from_inertial,
    quat_to_mat,
    theta_from_inertial,
    theta_from_pseudo_inertia,
    upper_cholesky,
)
from mjsysid.params.parameter import ModifierFn
from mjsysid.params.parameter import Parameter as CoreParameter
from mjsysid.params.targets import element_id, spec_element
from mjsysid.util.errors import must_be, require_model

__all__ = [
    "InertiaType",
    "Parameter",
    "ParameterDict",
    "apply_body_inertia",
    "apply_body_mass_ipos",
    "apply_body_theta_inertia",
    "apply_dgain",
    "apply_param_modifiers",
    "apply_param_modifiers_spec",
    "apply_pdgain",
    "apply_pgain",
    "body_inertia_param",
    "cholesky_decompose_upper",
    "get_actuator_pd_gains",
    "inertia_to_fullinertia",
    "is_position_actuator",
    "pi_from_body",
    "pi_from_theta",
    "pseudoinertia_from_pi",
    "remove_visuals",
    "scale_body_inertia",
    "skew",
    "theta_from_pseudoinertia",
    "theta_inertia_from_body",
]


def body_inertia_param(
    spec: mujoco.MjSpec,
    model: mujoco.MjModel,
    body_name: str,
    inertia_type: InertiaType | str = InertiaType.MassIpos,
    scale_rot_inertia: bool = False,
    mass_bound_mult: npt.ArrayLike | None = None,
    ipos_bound_off: float | npt.ArrayLike | None = None,
    stretch_bound_mult: float | None = None,
    shear_bound_off: float | npt.ArrayLike | None = None,
    param_name: str | None = None,
    modifier: ModifierFn | None = None,
) -> CoreParameter:
    """:func:`mjsysid.body_inertia_param` with the peer's defaults and keywords:
    ``mass_bound_mult`` (mass range as factors of the nominal, ``(low, high)``),
    ``ipos_bound_off`` (half-width of the centre-of-mass box [m]), ``stretch_bound_mult``
    (``Pseudo``: the factor ``f``) and ``shear_bound_off`` (``Pseudo``: half-width of
    ``s_ij``)."""
    return _core_body_inertia_param(
        spec,
        model,
        body_name,
        inertia_type,
        scale_rot_inertia,
        mass_bounds=None
        if mass_bound_mult is None
        else tuple(np.asarray(mass_bound_mult).tolist()),
        com_bounds=ipos_bound_off,
        pseudo_bounds=stretch_bound_mult,
        shear_bounds=shear_bound_off,
        param_name=param_name,
        modifier=modifier,
    )


def _vector(name: str, value: npt.ArrayLike, n: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise ValueError(must_be(name, f"a finite array of shape ({n},)", arr))
    return arr


def _positive_mass(mass: float) -> float:
    m = float(mass)
    if not (math.isfinite(m) and m > 0.0):
        raise ValueError(must_be("mass", "a finite number > 0 [kg]", mass))
    return m


def skew(v: npt.ArrayLike) -> np.ndarray:
    """The ``(3, 3)`` cross-product matrix of ``v`` (``skew(v) @ w == np.cross(v, w)``):
    ``[[0, -z, y], [z, 0, -x], [-y, x, 0]]``."""
    x, y, z = _vector("v", v, 3)
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def inertia_to_fullinertia(q: npt.ArrayLike, inertia: npt.ArrayLike) -> np.ndarray:
    """Full ``(3, 3)`` inertia ``R(q) diag(inertia) R(q)ᵀ`` [kg·m²] from principal moments
    ``(3,)`` and the principal-axes quaternion ``q`` ``(4,)`` (``w, x, y, z``; normalised
    here)."""
    rot = quat_to_mat(_vector("q", q, 4))
    full = rot @ np.diag(_vector("inertia", inertia, 3)) @ rot.T
    return 0.5 * (full + full.T)


def cholesky_decompose_upper(J: npt.ArrayLike) -> np.ndarray:
    """Upper-triangular ``U`` with ``U Uᵀ = J`` (the upper-lower Cholesky factor; see the
    module docstring: ``U = P L P`` with ``P J P = L Lᵀ``).

    Args:
      J: Symmetric positive-definite matrix, shape ``(k, k)`` (a pseudo-inertia: ``(4, 4)``).

    Raises:
      ValueError: ``J`` is not square, finite and positive definite.
    """
    arr = np.asarray(J, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or not np.all(np.isfinite(arr)):
        raise ValueError(must_be("J", "a finite square array", arr))
    return upper_cholesky(0.5 * (arr + arr.T), "J")


def theta_from_pseudoinertia(J: npt.ArrayLike) -> np.ndarray:
    """:func:`theta_from_pseudo_inertia` under the name (and argument name) ``mujoco.sysid``
    uses."""
    return theta_from_pseudo_inertia(J)


def pi_from_theta(theta: npt.ArrayLike) -> np.ndarray:
    """Inertial parameters ``π`` from log-Cholesky ``theta``, in the layout
    ``mujoco.sysid`` returns: 13 numbers ``[m, h (3), Ī (3x3, row-major)]``.

    ``h = m c`` is the first moment [kg·m] and ``Ī`` the rotational inertia about the
    body-frame origin [kg·m²] (parallel-axis theorem, module docstring). (``mujoco.sysid``'s
    docstring promises the 10-number layout ``[m, h, Ixx, Iyy, Izz, Ixy, Iyz, Ixz]`` but
    returns these 13; :func:`pseudoinertia_from_pi` takes either.)

    Args:
      theta: ``(10,)`` ``[α, d1, d2, d3, s12, s23, s13, t1, t2, t3]``.

    Returns:
      ``(13,)`` array.
    """
    m, c, i_c = inertial_from_theta(theta)
    i_origin = i_c + m * (float(c @ c) * np.eye(3) - np.outer(c, c))
    return np.concatenate([[m], m * c, i_origin.reshape(-1)])


def _origin_inertia(pi: np.ndarray) -> np.ndarray:
    """``Ī`` ``(3, 3)`` from the 13-number or the 10-number ``π`` layout."""
    if pi.size == 13:
        return pi[4:].reshape(3, 3)
    ixx, iyy, izz, ixy, iyz, ixz = pi[4:]
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def pseudoinertia_from_pi(pi: npt.ArrayLike) -> np.ndarray:
    """Pseudo-inertia ``J = [[½ tr(Ī) 𝟙 − Ī, h], [hᵀ, m]]`` ``(4, 4)`` from ``π``.

    Args:
      pi: ``(13,)`` ``[m, h, Ī row-major]`` (what :func:`pi_from_theta` returns) or ``(10,)``
        ``[m, hx, hy, hz, Ixx, Iyy, Izz, Ixy, Iyz, Ixz]``; ``Ī`` about the body-frame origin.

    Raises:
      ValueError: ``pi`` has another length, is not finite, or ``m <= 0``.
    """
    arr = np.asarray(pi, dtype=np.float64).reshape(-1)
    if arr.size not in (10, 13) or not np.all(np.isfinite(arr)):
        raise ValueError(must_be("pi", "10 or 13 finite numbers", arr))
    m = _positive_mass(arr[0])
    return pseudo_inertia_from_inertial(m, arr[1:4] / m, _origin_inertia(arr), about="origin")


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
        write_body_theta(body, theta)
    return body


def pi_from_body(spec: mujoco.MjSpec, body_name: str) -> np.ndarray:
    """``π`` of a body: ``(13,)`` ``[m, h = m c, Ī (3x3 row-major, about the body origin)]``.

    The layout of :func:`pi_from_theta` (what ``mujoco.sysid`` returns). Read from a compiled
    copy of ``spec``, so inferred inertials count too.
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
    write_body_theta(body, th)
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


def is_position_actuator(actuator: object) -> bool:
    """Whether ``actuator`` (``spec.actuator(name)`` or ``model.actuator(name)``) is a
    position servo: fixed gain, affine bias with ``biasprm[1] == -gainprm[0]`` (what
    ``<position>`` makes). Works on compiled models too (``mujoco.sysid``'s answers ``False``
    for every model actuator)."""
    try:
        gaintype = int(np.asarray(actuator.gaintype).reshape(-1)[0])  # type: ignore[attr-defined]
        biastype = int(np.asarray(actuator.biastype).reshape(-1)[0])  # type: ignore[attr-defined]
        gain = np.asarray(actuator.gainprm, dtype=np.float64).reshape(-1)  # type: ignore[attr-defined]
        bias = np.asarray(actuator.biasprm, dtype=np.float64).reshape(-1)  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError(
            must_be("actuator", "a spec or model actuator (spec.actuator(name))", actuator)
        ) from None
    return (
        gaintype == int(mujoco.mjtGain.mjGAIN_FIXED)
        and biastype == int(mujoco.mjtBias.mjBIAS_AFFINE)
        and bool(bias[1] == -gain[0])
    )


def get_actuator_pd_gains(model: mujoco.MjModel, actuator_name: str) -> tuple[float, float]:
    """``(kp, kv)`` of position actuator ``actuator_name`` of a compiled model: ``gainprm[0]``
    and ``-biasprm[2]``.

    Raises:
      KeyError: No such actuator (the message lists them).
      ValueError: It is not a position actuator (:func:`is_position_actuator`).
    """
    require_model(model)
    i = element_id(model, "actuator", actuator_name)
    act = model.actuator(i)
    if not is_position_actuator(act):
        raise ValueError(
            f"actuator {actuator_name!r} must be a position actuator (fixed gain, affine bias "
            f"with biasprm[1] = -gainprm[0]) to have P/D gains, got gainprm[0]="
            f"{float(act.gainprm[0])!r}, biasprm[:3]={act.biasprm[:3].tolist()}"
        )
    return float(act.gainprm[0]), float(-act.biasprm[2])
