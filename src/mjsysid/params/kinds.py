"""Ready-made parameter kinds: the common physical quantities, with modifiers and bounds.

``make_parameter("joint_damping", model, "hinge1")`` returns a :class:`Parameter` whose
nominal value is read once from the compiled model, with physically sensible default bounds,
a spec modifier (for :func:`apply_param_modifiers`) and an exact compiled-model fast path.
Its ``meta`` records ``{"kind": ..., "target": ...}``, so a saved parameter file re-creates the
modifiers on load (:meth:`ParameterDict.load_from_disk`).

Kinds (``target`` is the element name):

=====================  ===========  ===============================================
kind                   element      quantity (spec field -> model field)
=====================  ===========  ===============================================
joint_damping          joint        ``damping[0]`` -> ``dof_damping`` (every dof)
joint_armature         joint        ``armature`` -> ``dof_armature``
joint_frictionloss     joint        ``frictionloss`` -> ``dof_frictionloss``
joint_stiffness        joint        ``stiffness[0]`` -> ``jnt_stiffness``
actuator_kp            actuator     position gain (``gainprm[0]``, ``biasprm[1] = -kp``)
actuator_kv            actuator     velocity gain of an affine-bias actuator (``biasprm[2] = -kv``):
                                    a position servo's kv, or a DC motor's back-EMF damping
                                    (``<general ... biastype="affine" biasprm="0 0 -kv">``)
actuator_gear          actuator     ``gear[0]`` (motor constant / transmission ratio)
actuator_filter_tau    actuator     time constant ``dynprm[0]`` of a filter actuator (s)
geom_friction          geom         sliding friction ``friction[0]``
pair_friction          pair         sliding friction ``friction[0:2]`` (both tangent axes)
body_mass / ...        body         see :mod:`mjsysid.params.inertia`
sensor_delay           sensor glob  no model change; used by :class:`SignalTransform`
sensor_gain            sensor glob  no model change; used by :class:`SignalTransform`
sensor_bias            sensor glob  no model change; used by :class:`SignalTransform`
control_deadband       actuator     no model change; used by :class:`ControlTransform`
                       glob         (``deadband``: a command's threshold, >= 0; default
                                    bounds ``[0, s/2]``, offset ``±s/2``, ``s`` the largest
                                    ``|ctrlrange|`` of the matched actuators, else 1)
control_gain           actuator     no model change; :class:`ControlTransform` ``gain``
control_offset         actuator     no model change; :class:`ControlTransform` ``offset``
=====================  ===========  ===============================================

Every kind here has one value (a joint quantity is written to all dofs of its joint), so
``nominal``, ``min_value`` and ``max_value`` are single numbers.

Physical limits. A kind whose quantity cannot be negative without being nonsense has a lower
limit of 0 (:attr:`Kind.lower`): ``joint_damping``, ``joint_armature``, ``joint_frictionloss``,
``actuator_kp``, ``actuator_kv``, ``actuator_filter_tau``, ``geom_friction`` and
``pair_friction``. Their default bounds start at 0 or above, a ``min_value`` below 0 is
rejected by :func:`make_parameter`, and :func:`mjsysid.fit.optimize` refuses to fit such a
parameter whose bounds reach below 0 (also one loaded from a file, or whose bounds were changed
in place). ``min_value=-inf`` (no bound at all) stays accepted by :func:`make_parameter`, to
write any value into a model (a simulated truth), but not by ``optimize``. Kinds where a
negative value has a meaning have no limit: ``joint_stiffness`` (a negative spring is a
destabilising one), ``actuator_gear`` (the sign is the motor's direction), and the signal kinds
(``sensor_delay`` may be negative, ``sensor_gain`` may flip a sign). Body masses and inertias
are bounded by :func:`mjsysid.body_inertia_param`.
"""

from __future__ import annotations

import fnmatch
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.params.actuator_kinds import ACTUATOR_KINDS
from mjsysid.params.kind_type import Kind, entry_kind
from mjsysid.params.kind_type import flat_index as _at
from mjsysid.params.kind_type import nonneg_bounds as _nonneg
from mjsysid.params.kind_type import positive_bounds as _positive
from mjsysid.params.kind_type import same_sign_bounds as _same_sign
from mjsysid.params.kind_type import set_first as _set0
from mjsysid.params.parameter import (
    KindBinding,
    Parameter,
    as_number_vector,
    register_kind,
    registered_kind,
)
from mjsysid.params.targets import FieldWrite, MappedModelWrite, element_id, spec_element
from mjsysid.util.errors import model_key, must_be, require_model


def _dofs(model: mujoco.MjModel, joint: int) -> slice:
    adr = model.jnt_dofadr[joint]
    n = {0: 6, 1: 3}.get(int(model.jnt_type[joint]), 1)
    return slice(adr, adr + n)


def _require_position_actuator(model: mujoco.MjModel, i: int, name: str) -> None:
    if (
        model.actuator_gaintype[i] != mujoco.mjtGain.mjGAIN_FIXED
        or model.actuator_biastype[i] != mujoco.mjtBias.mjBIAS_AFFINE
    ):
        raise ValueError(
            f"actuator {name!r} must be a position-type actuator (fixed gain, affine bias) to "
            "have kp/kv gains, got a different gain/bias type; for a motor use actuator_gear, "
            'and for its back-EMF declare it <general ... biastype="affine" '
            'biasprm="0 0 -kv"> (then actuator_kv is that damping)'
        )


def _require_filter_actuator(model: mujoco.MjModel, i: int, name: str) -> None:
    filters = (int(mujoco.mjtDyn.mjDYN_FILTER), int(mujoco.mjtDyn.mjDYN_FILTEREXACT))
    if int(model.actuator_dyntype[i]) not in filters:
        raise ValueError(
            f'actuator {name!r} must have first-order filter dynamics (dyntype="filter" or '
            f'"filterexact", dynprm="tau") to have a filter time constant, got dyntype '
            f"{mujoco.mjtDyn(int(model.actuator_dyntype[i])).name}"
        )


def _set_kp_spec(act: Any, v: np.ndarray) -> None:
    act.gainprm[0] = v[0]
    act.biasprm[1] = -v[0]


def _set_kp_model(m: mujoco.MjModel, i: int, v: np.ndarray) -> None:
    m.actuator_gainprm[i, 0] = v[0]
    m.actuator_biasprm[i, 1] = -v[0]


def _set_pair_friction_spec(pair: Any, v: np.ndarray) -> None:
    pair.friction[0] = v[0]
    pair.friction[1] = v[0]


def _set_pair_friction_model(m: mujoco.MjModel, i: int, v: np.ndarray) -> None:
    m.pair_friction[i, 0:2] = v[0]


def _dof_kind(field: str, spec_attr: str, unit: str, reason: str) -> Kind:
    """A joint quantity stored once per dof (``model.<field>``), the same for all its dofs."""

    def read(m: mujoco.MjModel, i: int) -> np.ndarray:
        return getattr(m, field)[_dofs(m, i)][:1].copy()

    def write(m: mujoco.MjModel, i: int, v: np.ndarray) -> None:
        getattr(m, field)[_dofs(m, i)] = v[0]

    def fields(m: mujoco.MjModel, i: int) -> list[tuple[str, list[int], float]]:
        d = _dofs(m, i)
        return [(field, list(range(d.start, d.stop)), 1.0)]

    return Kind("joint", read, _set0(spec_attr), write, _nonneg, unit, fields, 0.0, reason)


KINDS: dict[str, Kind] = {
    "joint_damping": _dof_kind(
        "dof_damping", "damping", "N·m·s/rad", "a negative damping adds energy"
    ),
    "joint_armature": _dof_kind(
        "dof_armature", "armature", "kg·m²", "armature is a rotor inertia, never negative"
    ),
    "joint_frictionloss": _dof_kind(
        "dof_frictionloss", "frictionloss", "N·m", "a friction loss is a magnitude, never negative"
    ),
    "joint_stiffness": entry_kind(
        "joint", "jnt_stiffness", None, "N·m/rad", _nonneg, spec_attr="stiffness"
    ),
    "actuator_kp": Kind(
        "actuator",
        lambda m, i: m.actuator_gainprm[i, :1].copy(),
        _set_kp_spec,
        _set_kp_model,
        _positive,
        "N·m/rad",
        lambda m, i: [
            ("actuator_gainprm", [_at(m, "actuator_gainprm", i, 0)], 1.0),
            ("actuator_biasprm", [_at(m, "actuator_biasprm", i, 1)], -1.0),
        ],
        0.0,
        "a negative position gain drives away from the target",
    ),
    "actuator_kv": entry_kind(
        "actuator",
        "actuator_biasprm",
        2,
        "N·m·s/rad",
        _nonneg,
        "a negative velocity gain adds energy",
        factor=-1.0,
    ),
    "actuator_gear": entry_kind("actuator", "actuator_gear", 0, "N·m/ctrl", _same_sign),
    "actuator_filter_tau": entry_kind(
        "actuator", "actuator_dynprm", 0, "s", _positive, "a time constant is positive"
    ),
    "geom_friction": entry_kind(
        "geom", "geom_friction", 0, "1", _nonneg, "a friction coefficient is never negative"
    ),
    "pair_friction": Kind(
        "pair",
        lambda m, i: m.pair_friction[i, :1].copy(),
        _set_pair_friction_spec,
        _set_pair_friction_model,
        _nonneg,
        "1",
        lambda m, i: [
            ("pair_friction", [_at(m, "pair_friction", i, 0), _at(m, "pair_friction", i, 1)], 1.0)
        ],
        0.0,
        "a friction coefficient is never negative",
    ),
    "sensor_delay": Kind(
        None, None, None, None, lambda n: (np.full_like(n, -0.05), np.full_like(n, 0.1)), "s"
    ),
    "sensor_gain": Kind(
        None, None, None, None, lambda n: (np.full_like(n, 0.5), np.full_like(n, 2.0)), "1"
    ),
    "sensor_bias": Kind(
        None,
        None,
        None,
        None,
        lambda n: (np.full_like(n, -1.0), np.full_like(n, 1.0)),
        "sensor unit",
    ),
    "control_deadband": Kind(
        None,
        None,
        None,
        None,
        lambda n: (np.zeros_like(n), np.full_like(n, 0.5)),
        "ctrl",
        None,
        0.0,
        "a deadband is a width, never negative",
    ),
    "control_gain": Kind(
        None, None, None, None, lambda n: (np.full_like(n, 0.5), np.full_like(n, 2.0)), "1"
    ),
    "control_offset": Kind(
        None, None, None, None, lambda n: (np.full_like(n, -0.5), np.full_like(n, 0.5)), "ctrl"
    ),
    **ACTUATOR_KINDS,
}
_SIGNAL_NOMINAL = {
    "sensor_delay": 0.0,
    "sensor_gain": 1.0,
    "sensor_bias": 0.0,
    "control_deadband": 0.0,
    "control_gain": 1.0,
    "control_offset": 0.0,
}


def _bind(param: Parameter, kind_name: str, target: str) -> None:
    kind = KINDS[kind_name]
    if kind.set_spec is None or kind.set_model is None:
        return
    set_spec, set_model, element = kind.set_spec, kind.set_model, kind.element
    assert element is not None

    def modifier(spec: mujoco.MjSpec, p: Parameter) -> None:
        set_spec(spec_element(spec, element, target), p.value)

    ids: dict[tuple[int, int], int] = {}  # element id per model structure

    def model_modifier(model: mujoco.MjModel, p: Parameter) -> None:
        key = model_key(model)
        if key not in ids:
            ids[key] = element_id(model, element, target)
        set_model(model, ids[key], p.value)

    fields = kind.fields
    if fields is not None:

        def field_writes(model: mujoco.MjModel) -> list[FieldWrite]:
            out = []
            for field, index, factor in fields(model, element_id(model, element, target)):
                n = len(index)
                one = np.ones(n)
                out.append(FieldWrite(field, np.array(index), np.zeros(n, int), one, factor * one))
            return out

        param.modifier = modifier
        param.model_modifier = MappedModelWrite(model_modifier, field_writes)
        return
    param.modifier = modifier
    param.model_modifier = model_modifier


def _command_scale(model: mujoco.MjModel, pattern: str) -> float:
    """Largest ``|ctrlrange|`` of the limited actuators ``pattern`` matches (1 without any):
    the command unit the default deadband and offset bounds are measured in."""
    require_model(model)
    limits = [
        float(np.max(np.abs(model.actuator_ctrlrange[i])))
        for i in range(model.nu)
        if fnmatch.fnmatchcase(model.actuator(i).name, pattern) and model.actuator_ctrllimited[i]
    ]
    return max(limits) if limits else 1.0


def make_parameter(
    kind: str,
    model: mujoco.MjModel | None,
    target: str,
    *,
    name: str | None = None,
    nominal: npt.ArrayLike | None = None,
    min_value: npt.ArrayLike | None = None,
    max_value: npt.ArrayLike | None = None,
    frozen: bool = False,
) -> Parameter:
    """Creates a parameter of a known kind.

    Args:
      kind: One of :data:`KINDS` (see the module docstring).
      model: Compiled model to read the nominal value from (may be ``None`` for sensor kinds
        or when ``nominal`` is given).
      target: Element name (joint, actuator, geom, pair) or sensor glob for sensor kinds.
      name: Parameter name; default ``f"{target}_{quantity}"`` (e.g. ``hinge1_damping``).
      nominal: Override the value read from the model; a single number.
      min_value, max_value: Override the kind's default bounds; single numbers. For a kind
        with a physical lower limit (damping, armature, friction loss, kp, kv, friction; see
        the module docstring) ``min_value`` must not lie below it, except ``-inf``.
      frozen: Create the parameter frozen (``True`` or ``False``).

    Raises:
      TypeError: ``kind`` or ``target`` is not a string, ``model`` is not an ``MjModel``,
        ``frozen`` is not a bool.
      ValueError: Unknown kind, kind not applicable to the element (e.g. kp of a motor),
        ``nominal``/``min_value``/``max_value`` not a single number, or ``min_value`` below
        the kind's physical limit.
      KeyError: ``target`` is not an element of the model.
    """
    spec_kind = _check_kind(kind, target)
    read = _read_nominal(kind, spec_kind, model, target, nominal)
    given = _given_values(kind, spec_kind, read, nominal, min_value, max_value)
    nom = given.get("nominal", read)
    lo, hi = spec_kind.bounds(np.asarray(nom, dtype=np.float64))
    if kind in ("control_deadband", "control_offset") and model is not None:
        lo, hi = lo * _command_scale(model, target), hi * _command_scale(model, target)
    lo = given.get("min_value", lo)
    hi = given.get("max_value", hi)
    if "min_value" in given:
        _check_lower_limit(kind, spec_kind, lo)
    quantity = kind.split("_", 1)[1]
    param = Parameter(
        name or f"{target}_{quantity}",
        nom,
        lo,
        hi,
        frozen=frozen,
        meta={"kind": kind, "target": target},
    )
    _bind(param, kind, target)
    return param


def _check_kind(kind: Any, target: Any) -> Kind:
    """The :class:`Kind` named ``kind``; type checks of ``kind`` and ``target``."""
    if not isinstance(kind, str):
        raise TypeError(must_be("kind", f"a string, one of {sorted(KINDS)}", kind))
    if kind not in KINDS:
        if registered_kind(kind) is not None or kind.startswith("body_"):
            raise ValueError(f"kind {kind!r} is created with mjsysid.body_inertia_param")
        raise ValueError(must_be("kind", f"one of {sorted(KINDS)}", kind))
    spec_kind = KINDS[kind]
    if not isinstance(target, str):
        element = spec_kind.element
        raise TypeError(
            must_be(
                "target",
                f"the {element}'s name (a string)" if element else "a sensor name pattern",
                target,
            )
        )
    return spec_kind


def _read_nominal(
    kind: str,
    spec_kind: Kind,
    model: mujoco.MjModel | None,
    target: str,
    nominal: npt.ArrayLike | None,
) -> np.ndarray:
    """The model's value of ``kind`` for element ``target`` (a signal kind's fixed nominal)."""
    if spec_kind.element is None:
        return np.array([_SIGNAL_NOMINAL[kind]])
    if model is None:
        raise ValueError(must_be("model", f"a compiled MjModel to read {kind} from", model))
    require_model(model)
    i = element_id(model, spec_kind.element, target)
    if kind in ("actuator_kp", "actuator_kv"):
        _require_position_actuator(model, i, target)
    if kind == "actuator_kp" and model.actuator_biasprm[i, 1] != -model.actuator_gainprm[i, 0]:
        raise ValueError(
            f"actuator {target!r} must be a position servo (biasprm[1] = -gainprm[0]) to "
            "have a kp: writing one would add a spring to it; for a motor's strength use "
            "actuator_gear"
        )
    if kind == "actuator_filter_tau":
        _require_filter_actuator(model, i, target)
    if spec_kind.require is not None:
        spec_kind.require(model, i, target)
    assert spec_kind.read is not None
    read = spec_kind.read(model, i)
    if kind == "actuator_filter_tau" and read[0] <= 0 and nominal is None:
        raise ValueError(
            f"actuator {target!r} has a filter time constant of {float(read[0])!r} in the "
            "model (dynprm[0]); give nominal, min_value and max_value"
        )
    return read


def _given_values(
    kind: str,
    spec_kind: Kind,
    read: np.ndarray,
    nominal: npt.ArrayLike | None,
    min_value: npt.ArrayLike | None,
    max_value: npt.ArrayLike | None,
) -> dict[str, np.ndarray]:
    """The overrides that were given, each checked to have the size of ``read``."""
    given = {}
    for field, value in (("nominal", nominal), ("min_value", min_value), ("max_value", max_value)):
        if value is None:
            continue
        arr = as_number_vector(field, value)
        if arr.size != read.size:
            per = " (one value for the whole joint, written to each of its dofs)"
            raise ValueError(
                must_be(
                    field,
                    f"a single number for {kind}{per if spec_kind.element == 'joint' else ''}",
                    value,
                )
            )
        given[field] = arr
    return given


def _check_lower_limit(kind: str, spec_kind: Kind, lo: np.ndarray) -> None:
    """A given ``min_value`` must not lie below the kind's physical limit (``-inf`` may)."""
    limit = spec_kind.lower
    if limit is None:
        return
    below = np.flatnonzero((lo < limit) & np.isfinite(lo))
    if below.size:
        raise ValueError(
            must_be(
                "min_value",
                f">= {limit!r} for {kind} ({spec_kind.lower_reason})",
                float(lo[below[0]]),
                hint="A lower bound below it lets the fit reach values that are not physical",
            )
        )


def _register(name: str, kind: Kind) -> None:
    element = kind.element or "sensor pattern"
    register_kind(name, KindBinding(element, lambda p: _bind(p, name, p.meta["target"])))


for _name, _kind in KINDS.items():
    _register(_name, _kind)
