"""Applying parameters to models, and small spec edits (gains, visuals).

:func:`apply_param_modifiers` is the default ``build_model``: it runs every non-frozen
parameter's modifier on a *copy* of the spec and compiles it, so the caller's spec is never
left modified. A modifier that raises, or values that make the spec fail to compile, raise a
:class:`ModifierError` naming the parameter and its value.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from mjsysid.params.parameter import Parameter, ParameterDict, check_modifiers_present
from mjsysid.params.targets import FieldWriter
from mjsysid.util.errors import must_be, short_repr


class ModifierError(ValueError):
    """A parameter's modifier raised, or its value made the spec fail to compile."""


def _check_spec(spec: object, where: str) -> mujoco.MjSpec:
    if isinstance(spec, mujoco.MjModel):
        raise TypeError(
            must_be(
                where,
                "an mujoco.MjSpec",
                "MjModel",
                "did you pass a compiled MjModel instead of an MjSpec? "
                "use mujoco.MjSpec.from_file / from_string",
            )
        )
    if not isinstance(spec, mujoco.MjSpec):
        raise TypeError(must_be(where, "an mujoco.MjSpec", type(spec).__name__))
    return spec


def _failure(p: Parameter, what: str, e: Exception) -> ModifierError:
    return ModifierError(
        f"the {what} of parameter {p.name!r} failed for value {short_repr(p.value)}: "
        f"{type(e).__name__}: {e}"
    )


def _call(p: Parameter, what: str, target: mujoco.MjSpec | mujoco.MjModel) -> None:
    """Runs ``p.modifier`` or ``p.model_modifier`` on ``target``, naming ``p`` on failure."""
    fn = getattr(p, what)
    try:
        fn(target, p)
    except Exception as e:  # re-raised with the parameter's name and value
        raise _failure(p, what, e) from e


def run_modifiers(params: ParameterDict, spec: mujoco.MjSpec) -> mujoco.MjSpec:
    """Runs the modifiers of all non-frozen parameters on ``spec`` itself (no copy)."""
    check_modifiers_present(params.values(), "apply modifiers")
    for p in params.non_frozen():
        if p.modifier is not None:
            _call(p, "modifier", spec)
    return spec


def compile_spec(spec: mujoco.MjSpec, params: ParameterDict | None = None) -> mujoco.MjModel:
    """Compiles ``spec``; on failure, the error lists the applied parameter values."""
    try:
        return spec.compile()
    except ValueError as e:
        active = [p for p in (params.non_frozen() if params else []) if p.modifier is not None]
        values = ", ".join(f"{p.name}={short_repr(p.value)}" for p in active)
        raise ModifierError(
            f"the spec failed to compile after applying parameters ({values or 'none'}): {e}"
        ) from e


def apply_param_modifiers_spec(params: ParameterDict, spec: mujoco.MjSpec) -> mujoco.MjSpec:
    """Applies every non-frozen parameter's modifier to ``spec`` itself and returns it.

    For a custom ``build_model``: ``apply_param_modifiers_spec(params, spec)``, further edits,
    ``spec.compile()``. Pass ``spec.copy()`` to keep the original (``apply_param_modifiers``,
    which also compiles, works on a copy).

    Args:
      params: The parameters; frozen ones are skipped (the spec keeps its own value).
      spec: The model spec, modified in place (up to the failing modifier on an error).

    Raises:
      ModifierError: A modifier raised (message names the parameter and value).
    """
    _check_spec(spec, "spec")
    return run_modifiers(params, spec)


def apply_param_modifiers(params: ParameterDict, spec: mujoco.MjSpec) -> mujoco.MjModel:
    """Applies every non-frozen modifier to a copy of ``spec`` and compiles it.

    This is the default ``build_model`` of :func:`mjsysid.build_residual_fn`.

    Raises:
      ModifierError: A modifier raised or the modified spec does not compile.
    """
    _check_spec(spec, "spec")
    return compile_spec(run_modifiers(params, spec.copy()), params)


def supports_model_edits(params: ParameterDict) -> bool:
    """Whether every active modifier has an exact compiled-model fast path."""
    return all(p.model_modifier is not None for p in params.non_frozen() if p.modifier is not None)


class WritePlan:
    """Writes the free parameters of one structure into models of one structure.

    Parameters whose ``model_modifier`` is a :class:`~mjsysid.params.targets.FieldWriter` are
    written as one gather and one scatter per model field, straight from the parameter vector
    ``x``; the others through their ``model_modifier``, and only when their value changed.

    Args:
      model: A model of the structure the plan is for (element ids are read from it).
      free: The non-frozen parameters, in vector order.
    """

    def __init__(self, model: mujoco.MjModel, free: Sequence[Parameter]) -> None:
        sizes = [p.size for p in free]
        starts = np.cumsum([0, *sizes])[:-1]
        parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.other: list[int] = []  # indices into free written by their model_modifier
        for k, p in enumerate(free):
            if p.modifier is None:
                continue
            mm = p.model_modifier
            try:
                writes = mm.field_writes(model) if isinstance(mm, FieldWriter) else None
            except Exception as e:  # reported as the model_modifier's own failure would be
                raise _failure(p, "model_modifier", e) from e
            if writes is None:
                self.other.append(k)
                continue
            for w in writes:
                parts.setdefault(w.field, []).append(
                    (w.index, starts[k] + w.component, w.divisor, w.factor)
                )
        # (field, flat indices, entries of x, divisors, factors), one per model field
        self.fields: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = [
            (
                field,
                np.concatenate([q[0] for q in qs]),
                np.concatenate([q[1] for q in qs]),
                np.concatenate([q[2] for q in qs]),
                np.concatenate([q[3] for q in qs]),
            )
            for field, qs in parts.items()
        ]

    def write(self, model: mujoco.MjModel, x: np.ndarray, changed: Sequence[Parameter]) -> None:
        """Writes ``x`` (the free vector) and the ``changed`` other parameters into ``model``
        (then call :func:`refresh_constants`)."""
        for field, index, src, divisor, factor in self.fields:
            values = x[src] / divisor
            values *= factor
            getattr(model, field).reshape(-1)[index] = values
        for p in changed:
            _call(p, "model_modifier", model)


def refresh_constants(
    model: mujoco.MjModel, data: mujoco.MjData, diag: np.ndarray | None = None
) -> None:
    """``mj_setConst`` plus the statistics MuJoCo 4.0's ``mj_setConst`` leaves stale
    (``stat.meaninertia = tr M(qpos0) / nv`` and ``stat.meanmass``, which scale the
    constraint solver's tolerances), after fields of ``model`` were written. The statistics
    equal the compiler's bit for bit.

    Args:
      diag: :func:`mass_diagonal_index` of ``model`` (computed when omitted; it only depends
        on the model's structure, so callers that refresh many candidates pass it).
    """
    mujoco.mj_setConst(model, data)
    data.qpos[:] = model.qpos0
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    mujoco.mj_crb(model, data)
    # Summed in order, as the compiler does (NumPy's pairwise sum differs in the last bit;
    # Python's sum adds left to right).
    stat = model.stat
    if model.nv:
        index = mass_diagonal_index(model) if diag is None else diag
        stat.meaninertia = sum(data.M[index].tolist()) / model.nv
    if model.nbody > 1:
        stat.meanmass = sum(model.body_mass[1:].tolist()) / (model.nbody - 1)


def mass_diagonal_index(model: mujoco.MjModel) -> np.ndarray:
    """``(nv,)`` positions of the diagonal of M in ``MjData.M``: the diagonal closes each row
    of its sparse (CSR) storage."""
    return np.asarray(model.M_rowadr + model.M_rownnz - 1)


def write_model_params(
    model: mujoco.MjModel, params: Sequence[Parameter], data: mujoco.MjData | None = None
) -> mujoco.MjModel:
    """Writes ``params`` into ``model`` in place, then refreshes its derived constants.

    Runs each parameter's ``model_modifier``, then ``mj_setConst`` and the statistics MuJoCo
    4.0's ``mj_setConst`` leaves stale (``stat.meaninertia = tr M(qpos0) / nv`` and
    ``stat.meanmass``, which scale the constraint solver's tolerances). Every other field keeps
    its value, so ``model`` must already hold the right values of all parameters not given.

    Args:
      model: The compiled model to modify.
      params: Parameters with a ``model_modifier``.
      data: Scratch ``MjData`` for ``model`` (created when omitted).
    """
    if not params:
        return model
    for p in params:
        if p.model_modifier is None:
            raise ValueError(
                f"parameter {p.name!r} has no model_modifier; use apply_param_modifiers"
            )
        _call(p, "model_modifier", model)
    refresh_constants(model, mujoco.MjData(model) if data is None else data)
    return model


def apply_param_model_modifiers(
    params: ParameterDict, base: mujoco.MjModel, data: mujoco.MjData | None = None
) -> mujoco.MjModel:
    """Fast path: a copy of the compiled ``base`` with every active parameter written in.

    Equals a recompile of the modified spec (see :func:`write_model_params`). Every
    non-frozen parameter with a ``modifier`` must have a ``model_modifier``
    (:func:`supports_model_edits`).
    """
    active = [p for p in params.non_frozen() if p.modifier is not None]
    return write_model_params(base.__copy__(), active, data)


# -- actuator gains ---------------------------------------------------------------------------
def _position_actuator(spec: mujoco.MjSpec, name: str) -> mujoco.MjsActuator:
    _check_spec(spec, "spec")
    act = spec.actuator(name)
    if act is None:
        known = [a.name for a in spec.actuators]
        raise KeyError(f"the spec has no actuator named {name!r}; known: {known}")
    if act.gaintype != mujoco.mjtGain.mjGAIN_FIXED or act.biastype != mujoco.mjtBias.mjBIAS_AFFINE:
        raise ValueError(
            f"actuator {name!r} must be a position actuator (fixed gain, affine bias) to set "
            f"P/D gains, got gaintype={act.gaintype.name}, biastype={act.biastype.name}"
        )
    return act


def _scalar(value: object, what: str) -> float:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size != 1 or not np.isfinite(arr[0]):
        raise ValueError(must_be(what, "one finite number", value))
    return float(arr[0])


def apply_pgain(
    spec: mujoco.MjSpec, actuator_name: str, value: float | np.ndarray
) -> mujoco.MjSpec:
    """Sets the proportional gain ``kp`` of position actuator ``actuator_name`` (N/m or
    N·m/rad) and returns ``spec``.

    MuJoCo's position actuator computes ``force = kp·ctrl - kp·q - kv·qdot``, so ``kp`` lives
    in ``gainprm[0]`` and ``-kp`` in ``biasprm[1]``.
    """
    act = _position_actuator(spec, actuator_name)
    kp = _scalar(value, f"apply_pgain({actuator_name!r}): value")
    act.gainprm[0] = kp
    act.biasprm[1] = -kp
    return spec


def apply_dgain(
    spec: mujoco.MjSpec, actuator_name: str, value: float | np.ndarray
) -> mujoco.MjSpec:
    """Sets the derivative gain ``kv`` of position actuator ``actuator_name``
    (``biasprm[2] = -kv``) and returns ``spec``."""
    act = _position_actuator(spec, actuator_name)
    act.biasprm[2] = -_scalar(value, f"apply_dgain({actuator_name!r}): value")
    return spec


def apply_pdgain(spec: mujoco.MjSpec, actuator_name: str, value: object) -> mujoco.MjSpec:
    """Sets both gains of position actuator ``actuator_name`` from ``value = (kp, kv)`` and
    returns ``spec``."""
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size != 2:
        raise ValueError(
            must_be(f"apply_pdgain({actuator_name!r}): value", "two numbers (kp, kv)", value)
        )
    apply_pgain(spec, actuator_name, arr[0])
    apply_dgain(spec, actuator_name, arr[1])
    return spec


# -- visuals ----------------------------------------------------------------------------------
def remove_visuals(in_spec: mujoco.MjSpec) -> mujoco.MjSpec:
    """Strips what only matters for rendering, in place: textures, materials, visual geoms.

    A geom is removed only when it cannot affect the physics: it collides with nothing
    (``contype == conaffinity == 0``, in no contact pair) and adds no mass (its body has an
    explicit inertial, or the geom has zero mass/density). Meshes left unused are removed too.
    Returns ``in_spec`` (the same object, modified) for chaining.
    """
    spec = _check_spec(in_spec, "in_spec")
    paired = {p.geomname1 for p in spec.pairs} | {p.geomname2 for p in spec.pairs}
    from_geoms = spec.compiler.inertiafromgeom
    for geom in list(spec.geoms):
        body = geom.parent
        massless = geom.mass == 0 or geom.density == 0
        inertia_explicit = (
            body.explicitinertial and from_geoms != mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE
        ) or from_geoms == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
        if (
            geom.contype == 0
            and geom.conaffinity == 0
            and geom.name not in paired
            and (massless or inertia_explicit)
            and not geom.name.startswith("_")
        ):
            spec.delete(geom)
    for geom in spec.geoms:
        geom.material = ""
    for site in spec.sites:
        site.material = ""
    for mat in list(spec.materials):
        spec.delete(mat)
    for tex in list(spec.textures):
        spec.delete(tex)
    used = {g.meshname for g in spec.geoms}
    for mesh in list(spec.meshes):
        if mesh.name not in used:
            spec.delete(mesh)
    return spec
