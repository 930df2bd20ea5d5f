r"""Rigid-body inertia parameters: mass, centre of mass and a physically consistent full inertia.

:func:`body_inertia_param` makes a :class:`~mjsysid.Parameter` for one body, in one of
three parameterisations (:class:`InertiaType`):

========  ======  ====================================================  ===================
type      values  meaning                                               meta kind
========  ======  ====================================================  ===================
Mass      1       mass ``m`` [kg]                                       body_mass
MassIpos  4       ``[m, cx, cy, cz]``: mass, centre of mass (body)      body_mass_ipos
Pseudo    10      ``theta``: log-Cholesky factor of the pseudo-inertia  body_pseudo_inertia
========  ======  ====================================================  ===================

With ``Mass`` and ``MassIpos`` the rotational inertia about the centre of mass keeps its nominal
principal axes; with ``scale_rot_inertia=True`` it is scaled by ``m / m0`` (a body made of the
same shape, denser or lighter), otherwise it keeps its nominal value.

Nominal values (mass, centre of mass, full 3x3 inertia) are read **once** from the compiled
model, so bodies whose inertia MuJoCo inferred from geoms and bodies with rotated principal axes
(``body_iquat`` not the identity) work alike; the modifiers never compile.

The maths (pseudo-inertia, physical consistency, log-Cholesky parameters and their inverse)
is in :mod:`mjsysid.params.inertia_math`.

Default bounds of ``Pseudo`` (all finite, and every theta inside is consistent anyway):
:math:`\alpha_0 + \tfrac12 \ln(\text{mass\_bounds})` (the mass range of ``Mass``),
:math:`d_{i,0} \pm \ln f` (each principal "size" within a factor ``f = pseudo_bounds``),
:math:`s_{ij,0} \pm (f - 1)\,r` with :math:`r = \lVert A_0 \rVert_F =
\sqrt{\operatorname{tr}(I_c) / (2m)}` the body's nominal radius of gyration, and
:math:`t_0 \pm` ``com_bounds``.

How the value reaches MuJoCo
----------------------------
Both paths write the same numbers: mass, ``ipos = c``, principal moments :math:`\lambda` and the
principal-axes quaternion :math:`q` with :math:`I_c = R(q)\,\mathrm{diag}(\lambda)\,R(q)^\top`
(for ``Pseudo`` from ``mju_eig3`` of :math:`I_c`; for the other types the nominal
``body_inertia`` / ``body_iquat``).

* ``modifier(spec, p)`` sets ``explicitinertial = True``, ``mass``, ``ipos``, ``inertia``,
  ``iquat`` (orientation type quaternion) and marks ``fullinertia`` unset (``fullinertia[0] =
  NaN``: MuJoCo refuses a body with both a full and a diagonal inertia). ``iquat`` is always a
  finite unit quaternion.
* ``model_modifier(model, p)`` writes ``body_mass``, ``body_ipos``, ``body_inertia`` and
  ``body_iquat``, applies the compiler's ``boundmass`` / ``boundinertia`` clamps (recorded from
  the spec at creation), and re-derives ``body_sameframe`` and the ``geom_sameframe`` /
  ``site_sameframe`` of the body's geoms and sites with the compiler's rule (frames within 1e-6
  are the same). The caller then runs ``mj_setConst``. A body the compiler marked *simple*
  (inertial frame = body frame, e.g. a free sphere) cannot take an offset centre of mass or
  rotated axes in a compiled copy (the sparsity of the mass matrix would change), so
  ``MassIpos`` and ``Pseudo`` parameters of such a body have ``model_modifier = None`` and are
  applied by recompiling.

mujoco 4.0's ``mj_setConst`` does not refresh ``model.stat`` (``meanmass``, ``meaninertia``,
``meansize``), which the compiler sets; ``stat.meaninertia`` (the mean diagonal of the mass
matrix at ``qpos0``) scales the constraint solver's tolerances, so with active constraints a
fast-path model agrees with a recompiled one to solver tolerance unless the caller refreshes it.

Models compiled with ``settotalmass``, ``inertiafromgeom="true"`` or ``alignfree`` (for a free
body) are refused: there the compiler rescales or overrides what a modifier writes.

Reading and writing one spec body's inertia directly: the helpers of ``mujoco.sysid``.

These take and return an ``MjSpec`` (the peer's ``model_modifier`` functions, under its names)
and work on bodies with or without an explicit ``<inertial>``: a body whose inertia MuJoCo
infers from its geoms is first given the inertial the compiler infers, so what is written
afterwards is what a compiled model holds. Parameters for a fit come from
:func:`mjsysid.params.inertia.body_inertia_param`; the maths is
:mod:`mjsysid.params.inertia_math`.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.params.inertia_math import (
    inertial_from_pseudo_inertia,
    inertial_from_theta,
    mass_and_inertia,
    principal_axes,
    pseudo_inertia_from_inertial,
    pseudo_inertia_from_theta,
    quat_to_mat,
    theta_from_inertial,
    theta_from_pseudo_inertia,
)
from mjsysid.params.parameter import KindBinding, ModifierFn, Parameter, register_kind
from mjsysid.params.targets import FieldWrite, MappedModelWrite, element_id, spec_element
from mjsysid.util.cache import BoundedCache
from mjsysid.util.errors import element_ids_key, must_be, require_model

__all__ = [
    "InertiaType",
    "apply_body_inertia",
    "body_inertia_param",
    "full_inertia_from_model",
    "inertial_from_pseudo_inertia",
    "inertial_from_theta",
    "pseudo_inertia_from_inertial",
    "pseudo_inertia_from_theta",
    "theta_from_inertial",
    "theta_from_pseudo_inertia",
    "write_body_theta",
]


class InertiaType(enum.Enum):
    """How a body's inertia is parameterised (see the module docstring)."""

    Mass = "body_mass"
    """1 value: mass [kg]."""
    MassIpos = "body_mass_ipos"
    """4 values: mass [kg] and centre of mass in the body frame [m]."""
    Pseudo = "body_pseudo_inertia"
    """10 values: log-Cholesky factor ``theta`` of the 4x4 pseudo-inertia."""


_SIZE = {InertiaType.Mass: 1, InertiaType.MassIpos: 4, InertiaType.Pseudo: 10}
_SUFFIX = {
    InertiaType.Mass: "mass",
    InertiaType.MassIpos: "mass_ipos",
    InertiaType.Pseudo: "inertia",
}
_BY_KIND = {t.value: t for t in InertiaType}

_FRAME_EPS = 1e-6  # MuJoCo compiler: frames closer than this are "the same" (kFrameEps)
_SAME_NONE = int(mujoco.mjtSameFrame.mjSAMEFRAME_NONE)
_SAME_BODY = int(mujoco.mjtSameFrame.mjSAMEFRAME_BODY)
_SAME_INERTIA = int(mujoco.mjtSameFrame.mjSAMEFRAME_INERTIA)
_SAME_BODYROT = int(mujoco.mjtSameFrame.mjSAMEFRAME_BODYROT)
_SAME_INERTIAROT = int(mujoco.mjtSameFrame.mjSAMEFRAME_INERTIAROT)
_QUNIT = (1.0, 0.0, 0.0, 0.0)
_ZERO3 = (0.0, 0.0, 0.0)


def full_inertia_from_model(
    model: mujoco.MjModel, body: int | str
) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, centre of mass and full inertia tensor of a compiled body.

    Args:
      model: Compiled model.
      body: Body id or name.

    Returns:
      ``(m, c, I_c)``: ``body_mass`` [kg], ``body_ipos`` ``(3,)`` [m] and the inertia about the
      centre of mass in the body frame ``R(q) diag(body_inertia) R(q)ᵀ`` ``(3, 3)`` [kg·m²]
      with ``q = body_iquat``.
    """
    require_model(model)
    if isinstance(body, str):
        b = element_id(model, "body", body)
    else:
        b = int(body)
        if not 0 <= b < model.nbody:
            raise ValueError(must_be("body", f"a body id in [0, {model.nbody})", body))
    rot = quat_to_mat(model.body_iquat[b])
    i_c = rot @ np.diag(model.body_inertia[b]) @ rot.T
    return float(model.body_mass[b]), model.body_ipos[b].copy(), 0.5 * (i_c + i_c.T)


# ------------------------------------------------------------------------------------------------
# Writing values into a spec / a compiled model
# ------------------------------------------------------------------------------------------------
Inertial = tuple[float, np.ndarray, np.ndarray, np.ndarray]  # mass, ipos, inertia(3), iquat(4)


def _meta_vec(meta: dict[str, Any], key: str, n: int) -> np.ndarray:
    value = meta.get(key)
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        arr = np.zeros(0)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise ValueError(must_be(f"meta[{key!r}]", f"a list of {n} finite numbers", value))
    return arr


def _meta_float(meta: dict[str, Any], key: str, default: float | None = None) -> float:
    value = meta.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(must_be(f"meta[{key!r}]", "a finite number", value))
    return float(value)


_PSEUDO_CACHE = 32  # pseudo-inertia values whose inertial a parameter remembers


def _make_compute(kind: InertiaType, meta: dict[str, Any]) -> Callable[[np.ndarray], Inertial]:
    """``value -> (mass, ipos, principal inertia, iquat)`` for one kind, from ``meta`` only."""
    if kind is InertiaType.Pseudo:
        # by value: a finite-difference Jacobian writes each body's base value into every
        # column but the body's own (the eigen-decomposition costs more than the write)
        known: BoundedCache[bytes, Inertial] = BoundedCache(_PSEUDO_CACHE)

        def compute_pseudo(value: np.ndarray) -> Inertial:
            key = np.asarray(value, dtype=np.float64).tobytes()
            hit = known.get(key)
            if hit is not None:
                m, ipos, eigval, quat = hit
                return m, ipos.copy(), eigval.copy(), quat.copy()
            th = value.tolist()
            if len(th) != 10 or not all(map(math.isfinite, th)):
                raise ValueError(must_be("theta", "10 finite values", value))
            m, i_c = mass_and_inertia(th)
            eigval, quat = principal_axes(np.array(i_c))
            out = m, value[7:10].copy(), eigval, quat
            known.put(key, (m, out[1].copy(), eigval.copy(), quat.copy()))
            return out

        return compute_pseudo

    mass0 = _meta_float(meta, "mass0")
    if not mass0 > 0:
        raise ValueError(must_be("meta['mass0']", "> 0", mass0))
    ipos0 = _meta_vec(meta, "ipos0", 3)
    inertia0 = _meta_vec(meta, "inertia0", 3)
    iquat0 = _meta_vec(meta, "iquat0", 4)
    scale = meta.get("scale_rot_inertia", True)
    if not isinstance(scale, bool):
        raise ValueError(must_be("meta['scale_rot_inertia']", "true or false", scale))
    with_ipos = kind is InertiaType.MassIpos

    def compute(value: np.ndarray) -> Inertial:
        m = float(value[0])
        inertia = inertia0 * (m / mass0) if scale else inertia0.copy()
        ipos = np.array(value[1:4], dtype=np.float64) if with_ipos else ipos0.copy()
        return m, ipos, inertia, iquat0.copy()

    return compute


def write_body_theta(body: Any, theta: npt.ArrayLike) -> None:
    """Writes the inertia of log-Cholesky ``theta`` ``(10,)`` into spec body ``body``: mass,
    ``ipos`` and the principal moments and axes (``fullinertia`` unset, so it compiles)."""
    th = np.asarray(theta, dtype=np.float64).reshape(-1)
    _write_spec(body, _make_compute(InertiaType.Pseudo, {})(th))


def _write_spec(body: Any, values: Inertial) -> None:
    mass, ipos, inertia, iquat = values
    body.explicitinertial = True
    body.mass = float(mass)
    body.ipos = [float(v) for v in ipos]
    body.inertia = [float(v) for v in inertia]
    body.iquat = [float(v) for v in iquat]
    body.ialt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT
    body.fullinertia = [math.nan, 0.0, 0.0, 0.0, 0.0, 0.0]  # unset: diagonal + iquat rule


# Plain floats (finite: model fields): for 3-4 values NumPy's per-call cost is several times
# the comparison's.
def _same_vec(a: Sequence[float], b: Sequence[float]) -> bool:
    return bool(max(map(abs, map(operator.sub, a, b))) < _FRAME_EPS)


def _same_quat(a: Sequence[float], b: Sequence[float]) -> bool:
    return _same_vec(a, b) or max(map(abs, map(operator.add, a, b))) < _FRAME_EPS


def _sameframe(
    pos: Sequence[float],
    quat: Sequence[float],
    ipos: Sequence[float] | None = None,
    iquat: Sequence[float] | None = None,
) -> int:
    """The compiler's ``*_sameframe`` rule for a frame ``(pos, quat)`` in its body frame."""
    if _same_vec(pos, _ZERO3) and _same_quat(quat, _QUNIT):
        return _SAME_BODY
    if _same_quat(quat, _QUNIT):
        return _SAME_BODYROT
    if ipos is None or iquat is None:
        return _SAME_NONE
    if _same_vec(pos, ipos) and _same_quat(quat, iquat):
        return _SAME_INERTIA
    if _same_quat(quat, iquat):
        return _SAME_INERTIAROT
    return _SAME_NONE


def _write_model(
    model: mujoco.MjModel,
    element: tuple[int, np.ndarray, np.ndarray],
    values: Inertial,
    boundmass: float,
    boundinertia: float,
    target: str,
) -> None:
    b, geoms, sites = element
    mass, ipos, inertia, iquat = values
    if boundmass > 0:
        mass = max(mass, boundmass)
    if boundinertia > 0:
        inertia = np.maximum(inertia, boundinertia)
    quat = np.asarray(iquat, dtype=np.float64)
    quat = quat / math.sqrt(float(quat @ quat))
    ipos = np.asarray(ipos, dtype=np.float64)
    model.body_mass[b] = mass
    model.body_inertia[b] = inertia
    # (element-wise on lists: np.array_equal costs more than the whole write for 3-4 values)
    ipos_l, quat_l = ipos.tolist(), quat.tolist()
    if model.body_ipos[b].tolist() == ipos_l and model.body_iquat[b].tolist() == quat_l:
        return  # same inertial frame (always for InertiaType.Mass): frame flags are unchanged
    frame = _sameframe(ipos_l, quat_l)
    if model.body_simple[b] and frame != _SAME_BODY:
        raise RuntimeError(
            f"body {target!r} is 'simple' in this compiled model (its inertial frame is its body "
            "frame), so its centre of mass or principal axes cannot change without recompiling; "
            "apply this parameter with its spec modifier instead of model_modifier"
        )
    model.body_ipos[b] = ipos
    model.body_iquat[b] = quat
    model.body_sameframe[b] = frame
    for kind, rows in (("geom", geoms), ("site", sites)):
        if rows.size:
            pos, quats = getattr(model, f"{kind}_pos"), getattr(model, f"{kind}_quat")
            getattr(model, f"{kind}_sameframe")[rows] = [
                _sameframe(p, q, ipos_l, quat_l)
                for p, q in zip(pos[rows].tolist(), quats[rows].tolist(), strict=True)
            ]


def _kind_of(param: Parameter) -> InertiaType:
    kind = param.meta.get("kind")
    if kind not in _BY_KIND:
        raise ValueError(
            must_be(
                f"parameter {param.name!r}: meta['kind']",
                f"one of {sorted(_BY_KIND)} (made by body_inertia_param)",
                kind,
            )
        )
    t = _BY_KIND[kind]
    if param.size != _SIZE[t]:
        raise ValueError(
            f"parameter {param.name!r}: value must have length {_SIZE[t]} for kind {kind!r}, "
            f"got length {param.size}"
        )
    return t


def apply_body_inertia(spec: mujoco.MjSpec, name: str, param: Parameter) -> None:
    """Writes a parameter made by :func:`body_inertia_param` into the spec body ``name``.

    Args:
      spec: Spec to modify in place (not compiled here).
      name: Body name in ``spec`` (usually ``param.meta["target"]``).
      param: Parameter of kind ``body_mass``, ``body_mass_ipos`` or ``body_pseudo_inertia``;
        its current ``value`` is written.

    Raises:
      ValueError: Unknown kind, wrong number of values or malformed ``meta``.
      KeyError: ``spec`` has no body ``name``.
    """
    _require_spec(spec)
    kind = _kind_of(param)
    body = spec_element(spec, "body", name)
    _write_spec(body, _make_compute(kind, param.meta)(param.value))


def _meta_target(param: Parameter) -> str:
    target = param.meta.get("target")
    if not isinstance(target, str) or not target:
        raise ValueError(
            must_be(f"parameter {param.name!r}: meta['target']", "a body name", target)
        )
    return target


def _meta_fast_path(param: Parameter) -> bool:
    fast = param.meta.get("fast_path", True)
    if not isinstance(fast, bool):
        raise ValueError(
            must_be(f"parameter {param.name!r}: meta['fast_path']", "true or false", fast)
        )
    return fast


def _make_model_modifier(
    target: str,
    compute: Callable[[np.ndarray], Inertial],
    boundmass: float,
    boundinertia: float,
) -> Callable[[mujoco.MjModel, Parameter], None]:
    """``model_modifier(model, p)`` writing ``compute(p.value)`` into body ``target``."""
    # Element ids per model structure (name lookups cost more than the write itself).
    ids: dict[tuple[int, int], tuple[int, np.ndarray, np.ndarray]] = {}

    def model_modifier(model: mujoco.MjModel, p: Parameter) -> None:
        key = element_ids_key(model)
        if key not in ids:
            b = element_id(model, "body", target)
            ids[key] = (
                b,
                np.flatnonzero(model.geom_bodyid == b),
                np.flatnonzero(model.site_bodyid == b),
            )
        _write_model(model, ids[key], compute(p.value), boundmass, boundinertia, target)

    return model_modifier


def _make_mass_field_writes(
    meta: dict[str, Any], target: str, boundmass: float, boundinertia: float
) -> Callable[[mujoco.MjModel], list[FieldWrite] | None]:
    """The batched-write description of a scaled ``Mass`` parameter's ``model_modifier``."""
    mass0 = _meta_float(meta, "mass0")
    inertia0 = _meta_vec(meta, "inertia0", 3)
    ipos0 = _meta_vec(meta, "ipos0", 3)
    iquat0 = _meta_vec(meta, "iquat0", 4)
    iquat0 = iquat0 / math.sqrt(float(iquat0 @ iquat0))  # as _write_model normalises it

    def field_writes(model: mujoco.MjModel) -> list[FieldWrite] | None:
        """``body_mass = m``, ``body_inertia = (m / mass0)·inertia0``: what
        ``model_modifier`` writes while no bound is active and the frame is unchanged."""
        b = element_id(model, "body", target)
        same_frame = (
            model.body_ipos[b].tolist() == ipos0.tolist()
            and model.body_iquat[b].tolist() == iquat0.tolist()
        )
        if boundmass > 0 or boundinertia > 0 or not same_frame:
            return None
        return [
            FieldWrite("body_mass", np.array([b]), np.zeros(1, int), np.ones(1), np.ones(1)),
            FieldWrite(
                "body_inertia",
                3 * b + np.arange(3),
                np.zeros(3, int),
                np.full(3, mass0),
                inertia0.copy(),
            ),
        ]

    return field_writes


def _bind(param: Parameter) -> None:
    """Re-creates ``param.modifier`` and ``param.model_modifier`` from ``param.meta`` only."""
    kind = _kind_of(param)
    meta = param.meta
    target = _meta_target(param)
    compute = _make_compute(kind, meta)
    boundmass = _meta_float(meta, "boundmass", 0.0)
    boundinertia = _meta_float(meta, "boundinertia", 0.0)
    fast = _meta_fast_path(param)

    def modifier(spec: mujoco.MjSpec, p: Parameter) -> None:
        _write_spec(spec_element(spec, "body", target), compute(p.value))

    model_modifier = _make_model_modifier(target, compute, boundmass, boundinertia)
    param.modifier = modifier
    if kind is InertiaType.Mass and meta.get("scale_rot_inertia", True):
        field_writes = _make_mass_field_writes(meta, target, boundmass, boundinertia)
        param.model_modifier = MappedModelWrite(model_modifier, field_writes) if fast else None
        return
    param.model_modifier = model_modifier if fast else None


for _kind in _BY_KIND:
    register_kind(_kind, KindBinding("body", _bind))


# ------------------------------------------------------------------------------------------------
# Parameter factory
# ------------------------------------------------------------------------------------------------
def _require_spec(spec: Any) -> None:
    if not isinstance(spec, mujoco.MjSpec):
        hint = (
            "did you swap spec and model? pass the MjSpec the model was compiled from"
            if isinstance(spec, mujoco.MjModel)
            else ""
        )
        raise TypeError(must_be("spec", "a mujoco.MjSpec", type(spec).__name__, hint))


def _check_compiler(spec: mujoco.MjSpec, model: mujoco.MjModel, b: int, name: str) -> None:
    comp = spec.compiler
    if comp.settotalmass > 0:
        raise ValueError(
            must_be(
                "spec.compiler.settotalmass",
                "<= 0 (off) to identify a body's inertia",
                comp.settotalmass,
                "the compiler rescales every mass to that total; remove settotalmass",
            )
        )
    if comp.inertiafromgeom == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE:
        raise ValueError(
            must_be(
                "spec.compiler.inertiafromgeom",
                "'auto' or 'false' to identify a body's inertia",
                "true",
                "with 'true' the compiler ignores explicit inertials",
            )
        )
    free = int(mujoco.mjtJoint.mjJNT_FREE)
    joints = range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b])
    if comp.alignfree and any(int(model.jnt_type[j]) == free for j in joints):
        raise ValueError(
            must_be(
                "spec.compiler.alignfree",
                f"False for the free body {name!r}",
                True,
                "alignfree moves the body frame to the centre of mass, so the compiled "
                "inertial frame is not the spec's",
            )
        )


def _bounds_pair(mass_bounds: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in mass_bounds)
    except (TypeError, ValueError):
        raise ValueError(
            must_be("mass_bounds", "a pair (low, high) of relative factors", mass_bounds)
        ) from None
    if not (0 < lo <= 1 <= hi < math.inf and lo < hi):
        raise ValueError(
            must_be("mass_bounds", "factors with 0 < low <= 1 <= high, low < high", mass_bounds)
        )
    return lo, hi


def _com_margin(com_bounds: Any) -> np.ndarray:
    arr = np.asarray(com_bounds, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(3, float(arr))
    if arr.shape != (3,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(must_be("com_bounds", "a half-width >= 0 [m] or 3 of them", com_bounds))
    return arr


def _check_arguments(
    inertia_type: InertiaType | str, scale_rot_inertia: Any, body_name: Any
) -> InertiaType:
    """``inertia_type`` as an :class:`InertiaType`; type checks of the plain arguments."""
    if isinstance(inertia_type, str) and inertia_type in InertiaType.__members__:
        inertia_type = InertiaType[inertia_type]
    if not isinstance(inertia_type, InertiaType):
        raise TypeError(
            must_be(
                "inertia_type", f"an InertiaType ({list(InertiaType.__members__)})", inertia_type
            )
        )
    if not isinstance(scale_rot_inertia, bool):
        raise TypeError(must_be("scale_rot_inertia", "True or False", scale_rot_inertia))
    if not isinstance(body_name, str):
        raise TypeError(must_be("body_name", "a body name (str)", body_name))
    return inertia_type


def _moving_body_id(model: mujoco.MjModel, body_name: str) -> int:
    """Id of body ``body_name``; the world body is refused (the message lists moving bodies)."""
    b = element_id(model, "body", body_name)
    if b == 0:
        moving = [
            mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i)
            for i in range(1, model.nbody)
            if model.body_weldid[i] != 0
        ]
        raise ValueError(
            must_be(
                "body_name",
                "a moving body",
                body_name,
                f"the world body does not move, so its inertia is not identifiable; "
                f"moving bodies: {[n for n in moving if n]}",
            )
        )
    return b


Box = tuple[np.ndarray, np.ndarray, np.ndarray]  # nominal, lower, upper


def _nominal_meta(model: mujoco.MjModel, b: int, m0: float) -> dict[str, Any]:
    """The nominal values ``Mass`` / ``MassIpos`` modifiers keep (JSON-able)."""
    return {
        "mass0": m0,
        "ipos0": [float(v) for v in model.body_ipos[b]],
        "inertia0": [float(v) for v in model.body_inertia[b]],
        "iquat0": [float(v) for v in model.body_iquat[b]],
    }


def _pseudo_box(
    m0: float,
    c0: np.ndarray,
    i_c0: np.ndarray,
    mass_factors: tuple[float, float],
    com_margin: np.ndarray,
    pseudo_bounds: float,
    shear_margin: np.ndarray | None = None,
) -> Box:
    """Nominal ``theta`` and its default bounds (see the module docstring); ``shear_margin``
    ``(3,)`` replaces the default half-width ``(f − 1) r`` of ``s_ij``."""
    f = float(pseudo_bounds)
    if not (math.isfinite(f) and f > 1.0):
        raise ValueError(must_be("pseudo_bounds", "a finite factor > 1", pseudo_bounds))
    nominal = theta_from_inertial(m0, c0, i_c0)
    r = math.sqrt(np.trace(i_c0) / (2.0 * m0))
    shear = np.full(3, (f - 1.0) * r) if shear_margin is None else shear_margin
    margin = np.concatenate([[0.0], np.full(3, math.log(f)), shear, com_margin])
    lo, hi = nominal - margin, nominal + margin
    lo_f, hi_f = mass_factors
    lo[0], hi[0] = nominal[0] + 0.5 * math.log(lo_f), nominal[0] + 0.5 * math.log(hi_f)
    return nominal, lo, hi


@dataclass(frozen=True)
class _Bounds:
    """The bound options of :func:`body_inertia_param`."""

    mass: tuple[float, float]
    com: np.ndarray
    pseudo: float
    shear: np.ndarray | None


def _resolve_bounds(
    mass_bounds: Any, com_bounds: Any, pseudo_bounds: Any, shear_bounds: Any
) -> _Bounds:
    """The bound options of :func:`body_inertia_param`, defaults filled in and checked."""
    mass = (0.1, 10.0) if mass_bounds is None else mass_bounds
    com = 0.05 if com_bounds is None else com_bounds
    stretch = 2.0 if pseudo_bounds is None else pseudo_bounds
    if np.ndim(stretch) != 0:
        raise ValueError(must_be("pseudo_bounds", "one factor f > 1 (d_i within ± ln f)", stretch))
    shear = shear_bounds
    if shear is not None:
        shear = np.broadcast_to(np.asarray(shear, dtype=np.float64), (3,)).copy()
        if not np.all(np.isfinite(shear) & (shear >= 0)):
            raise ValueError(must_be("shear_bounds", "a half-width >= 0 [m] or 3 of them", shear))
    return _Bounds(_bounds_pair(mass), _com_margin(com), float(stretch), shear)


def _mass_box(
    inertia_type: InertiaType,
    m0: float,
    c0: np.ndarray,
    mass_factors: tuple[float, float],
    com_margin: np.ndarray,
) -> Box:
    """Nominal value and bounds of a ``Mass`` (``[m]``) or ``MassIpos`` (``[m, c]``) parameter."""
    lo_f, hi_f = mass_factors
    if inertia_type is InertiaType.Mass:
        return np.array([m0]), np.array([lo_f * m0]), np.array([hi_f * m0])
    nominal = np.concatenate([[m0], c0])
    lo = np.concatenate([[lo_f * m0], c0 - com_margin])
    hi = np.concatenate([[hi_f * m0], c0 + com_margin])
    return nominal, lo, hi


def body_inertia_param(
    spec: mujoco.MjSpec,
    model: mujoco.MjModel,
    body_name: str,
    inertia_type: InertiaType | str = InertiaType.Mass,
    scale_rot_inertia: bool = True,
    *,
    mass_bounds: tuple[float, float] | None = None,
    com_bounds: float | npt.ArrayLike | None = None,
    pseudo_bounds: float | None = None,
    shear_bounds: float | npt.ArrayLike | None = None,
    param_name: str | None = None,
    modifier: ModifierFn | None = None,
    frozen: bool = False,
) -> Parameter:
    """A parameter for the inertia of one body (see the module docstring for the maths).

    (``mujoco.sysid``'s function of this name defaults to ``InertiaType.MassIpos`` without
    scaling and names its bounds ``mass_bound_mult``, ``ipos_bound_off``,
    ``stretch_bound_mult`` and ``shear_bound_off``: :mod:`mjsysid.compat` has that one.)

    Args:
      spec: The spec ``model`` was compiled from (its compiler settings are checked and
        ``boundmass`` / ``boundinertia`` recorded; it is not modified).
      model: Compiled model; nominal mass, centre of mass and full inertia are read from it once.
      body_name: Name of a moving body.
      inertia_type: :class:`InertiaType` (or its name, e.g. ``"Pseudo"``).
      scale_rot_inertia: ``Mass`` / ``MassIpos``: scale the rotational inertia about the centre
        of mass by ``m / m0``; otherwise keep it. Ignored (recorded only) for ``Pseudo``.
      param_name: Default ``f"{body_name}_mass"``, ``f"{body_name}_mass_ipos"`` or
        ``f"{body_name}_inertia"``.
      mass_bounds: Mass range as factors of the nominal mass, ``(low, high)``; for ``Pseudo``
        it bounds ``α`` to the same mass range.
      com_bounds: Half-width [m] of the box around the nominal centre of mass (scalar or
        ``(3,)``); for ``Pseudo`` it bounds ``t``.
      pseudo_bounds: ``Pseudo`` only, a factor ``f > 1``: ``d_i`` within ``± ln f`` and
        ``s_ij`` within ``± (f − 1) r`` of nominal, ``r = sqrt(tr(I_c) / (2 m))``.
      shear_bounds: ``Pseudo`` only: the half-width [m] of ``s_ij`` around nominal instead of
        ``(f − 1) r`` (scalar or ``(3,)``).
      modifier: A spec modifier of your own instead of the built-in one (the parameter then
        has no compiled-model fast path).
      frozen: Create the parameter frozen.

    Returns:
      A :class:`Parameter` with size 1, 4 or 10, ``modifier``, ``model_modifier`` (``None``
      where no exact fast path exists, see the module docstring) and JSON-able ``meta``.

    Raises:
      TypeError: ``spec`` / ``model`` of the wrong type, or a bad ``inertia_type``.
      KeyError: No body ``body_name`` in the model or the spec (the message lists known names).
      ValueError: The world body, a massless body, a compiler setting that overrides explicit
        inertias, or bad bounds.
    """
    _require_spec(spec)
    require_model(model)
    inertia_type = _check_arguments(inertia_type, scale_rot_inertia, body_name)
    b = _moving_body_id(model, body_name)
    spec_element(spec, "body", body_name)
    _check_compiler(spec, model, b, body_name)
    bounds = _resolve_bounds(mass_bounds, com_bounds, pseudo_bounds, shear_bounds)
    meta, box = _meta_and_box(spec, model, b, inertia_type, scale_rot_inertia, bounds)
    name = param_name or f"{body_name}_{_SUFFIX[inertia_type]}"
    param = Parameter(name, *box, frozen=frozen, meta=meta)
    _bind(param)
    if modifier is not None:
        _use_modifier(param, modifier)
    return param


def _meta_and_box(
    spec: mujoco.MjSpec,
    model: mujoco.MjModel,
    b: int,
    inertia_type: InertiaType,
    scale_rot_inertia: bool,
    bounds: _Bounds,
) -> tuple[dict[str, Any], Box]:
    """The ``meta`` and ``(nominal, lower, upper)`` of the parameter of body ``b``."""
    name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
    m0, c0, i_c0 = full_inertia_from_model(model, b)
    if not m0 > 0:
        raise ValueError(must_be(f"body {name!r}: mass", "> 0 to be identified", m0))
    meta: dict[str, Any] = {
        "kind": inertia_type.value,
        "target": name,
        "scale_rot_inertia": scale_rot_inertia,
    }
    if inertia_type is InertiaType.Pseudo:
        box = _pseudo_box(m0, c0, i_c0, bounds.mass, bounds.com, bounds.pseudo, bounds.shear)
    else:
        meta.update(_nominal_meta(model, b, m0))
        box = _mass_box(inertia_type, m0, c0, bounds.mass, bounds.com)
    meta.update(
        boundmass=float(spec.compiler.boundmass),
        boundinertia=float(spec.compiler.boundinertia),
        # a 'simple' body takes no offset centre of mass or rotated axes in a compiled copy
        fast_path=inertia_type is InertiaType.Mass or not bool(model.body_simple[b]),
    )
    return meta, box


def _use_modifier(param: Parameter, modifier: Any) -> None:
    """Replaces the built-in modifiers of ``param`` by a spec modifier of the user's own."""
    if not callable(modifier):
        raise TypeError(must_be("modifier", "callable modifier(spec, param) or None", modifier))
    param.modifier, param.model_modifier = modifier, None
    # saved as a custom modifier (a loaded file must not bind the built-in one instead)
    param.meta["inertia_kind"] = param.meta.pop("kind")
    param.meta["modifier"] = "custom"
