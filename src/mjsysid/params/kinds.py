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
joint_ref              joint        ``ref`` -> ``qpos0`` (hinge/slide): the angle at which the
                                    model's geometry is as written, i.e. an encoder's offset
                                    (the recorded angles, and a servo's goals, stay as logged;
                                    default bounds ±0.2 rad or m)
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

The :class:`Kind` record says how one quantity is read, written and bounded.

Native actuator kinds. MuJoCo 4's native actuator elements add kinds of their own: command
delay, actuator damping and armature, the ``dcmotor`` actuator's identifiable constants, and
``pid`` gains. They are in :data:`KINDS` too, so :func:`mjsysid.make_parameter` and experiment
files create them by name (``target`` is the actuator's name). Each has an exact
compiled-model fast path: the compiler copies these numbers into ``mjModel`` unchanged, so a
model write equals a recompile of the modified spec bit for bit.

Where MuJoCo 4.0.0 keeps them (``<dcmotor>`` compiles to ``gaintype = biastype = dyntype =
"dcmotor"``; the spec holds the same computed arrays as the model):

===========================  ==========  ==========================  ====================
kind                         unit        model field                 XML attribute
===========================  ==========  ==========================  ====================
actuator_delay               s           ``actuator_delay``          ``delay`` (any
                                                                     actuator; needs
                                                                     ``nsample > 0``)
actuator_damping             N·m·s/rad   ``actuator_damping``        ``damping``
actuator_armature            kg·m²       ``actuator_armature``       ``armature``
dcmotor_resistance           Ω           ``gainprm[0]`` (R)          ``resistance``
dcmotor_motorconst           N·m/A       ``gainprm[1]`` (K)          ``motorconst``
                                                                     (K = sqrt(Kt·Ke))
dcmotor_timeconst            s           ``dynprm[0]`` (L/R)         ``inductance``
dcmotor_cogging_amplitude    N·m         ``biasprm[0]``              ``cogging[0]``
dcmotor_cogging_phase        rad         ``biasprm[2]``              ``cogging[2]``
dcmotor_lugre_stiffness      N·m/rad     ``dynprm[5]`` (σ0)          ``lugre[0]``
dcmotor_lugre_damping        N·m·s/rad   ``dynprm[6]`` (σ1)          ``lugre[1]``
dcmotor_lugre_coulomb        N·m         ``biasprm[3]``              ``lugre[2]``
dcmotor_lugre_static         N·m         ``biasprm[4]``              ``lugre[3]``
dcmotor_lugre_stribeck       rad/s       ``biasprm[5]``              ``lugre[4]``
dcmotor_kp                   N·m/rad     ``gainprm[4]``              ``controller[0]``
dcmotor_ki                   N·m/(rad·s) ``gainprm[5]``              ``controller[1]``
dcmotor_kd                   N·m·s/rad   ``gainprm[6]``              ``controller[2]``
pid_kp                       N·m/rad     ``biasprm[1] = -kp``        ``kp`` of ``<pid>``
pid_kv                       N·m·s/rad   ``biasprm[2] = -kv``        ``kv`` of ``<pid>``
pid_ki                       N·m/(rad·s) ``gainprm[0]``              ``ki`` of ``<pid>``
===========================  ==========  ==========================  ====================

Notes. ``dcmotor_timeconst`` is the electrical time constant the compiled model keeps
(``inductance="L 0"`` is stored as ``L/R``): fitting resistance with it fixed changes the
implied inductance ``L = timeconst · R``. The electrical branch's constants require the
feature to be on in the model (``inductance``, ``lugre``, ``cogging`` poles, controller inputs):
switching a feature on adds an activation variable, a change of structure no fit can make.
``actuator_delay`` reads the command from the history buffer at ``time - delay``; give the
actuator ``interp="linear"`` (or ``"cubic"``) so the fit sees a smooth effect (with the default
zero-order hold the delay acts in whole timesteps and has no gradient), and ``nsample`` with
``nsample · timestep`` above the largest delay the bounds allow (default bounds
``[0, max(4·nominal, 0.05)]``). Lower limits: all kinds are >= 0 except the cogging phase.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.params.inertia import InertiaType
from mjsysid.params.parameter import (
    KindBinding,
    Parameter,
    as_number_vector,
    register_kind,
    registered_kind,
)
from mjsysid.params.targets import FieldWrite, MappedModelWrite, element_id, spec_element
from mjsysid.util.errors import element_ids_key, must_be, require_model


@dataclass(frozen=True)
class Kind:
    """How one kind of quantity is read, written and bounded.

    Attributes:
      element: Element type the target names (``"joint"``, ``"actuator"``, ...) or ``None``.
      read: ``read(model, id) -> nominal`` (1-D array).
      set_spec: ``set_spec(spec_element, value)``.
      set_model: ``set_model(model, id, value)``; exact equivalent of set_spec + compile.
      bounds: ``bounds(nominal) -> (lo, hi)`` defaults.
      unit: SI unit, for reports.
      fields: ``fields(model, id) -> [(field, flat indices, factor)]``: what ``set_model``
        writes, ``model.<field>.flat[index] = factor · value[0]`` (for batched writes, see
        :class:`mjsysid.params.apply.WritePlan`).
      lower: Physical lower limit of the quantity (``None``: a negative value has a meaning);
        see "Physical limits" in the module docstring.
      lower_reason: Why, for error messages.
      require: ``require(model, id, name)`` raises ``ValueError`` when the element cannot
        carry this kind (e.g. the wrong actuator type, or the feature is switched off).
    """

    element: str | None
    read: Callable[[mujoco.MjModel, int], np.ndarray] | None
    set_spec: Callable[[Any, np.ndarray], None] | None
    set_model: Callable[[mujoco.MjModel, int, np.ndarray], None] | None
    bounds: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    unit: str
    fields: Callable[[mujoco.MjModel, int], list[tuple[str, list[int], float]]] | None = None
    lower: float | None = None
    lower_reason: str = ""
    require: Callable[[mujoco.MjModel, int, str], None] | None = None


def flat_index(model: mujoco.MjModel, field: str, row: int, col: int = 0) -> int:
    """Flat index of ``model.<field>[row, col]`` (``row`` for a 1-D field)."""
    shape = getattr(model, field).shape
    return row if len(shape) == 1 else row * shape[1] + col


def nonneg_bounds(nominal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hi = np.maximum(10.0 * np.abs(nominal), 1.0)
    return np.zeros_like(nominal), hi


def positive_bounds(nominal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mag = np.maximum(np.abs(nominal), 1e-6)
    return 0.1 * mag, 10.0 * mag


def same_sign_bounds(nominal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """0.1x to 10x the nominal, on the nominal's side of 0 (a gear of -2 gets [-20, -0.2])."""
    lo, hi = positive_bounds(nominal)
    neg = nominal < 0
    return np.where(neg, -hi, lo), np.where(neg, -lo, hi)


def set_first(attr: str) -> Callable[[Any, np.ndarray], None]:
    def setter(obj: Any, value: np.ndarray) -> None:
        field = getattr(obj, attr)
        if isinstance(field, np.ndarray):
            field[0] = value[0]
        else:
            setattr(obj, attr, float(value[0]))

    return setter


Bounds = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
Require = Callable[[mujoco.MjModel, int, str], None]


def entry_kind(
    element: str,
    field: str,
    col: int | None,
    unit: str,
    bounds: Bounds,
    reason: str = "",
    require: Require | None = None,
    *,
    spec_attr: str | None = None,
    factor: float = 1.0,
) -> Kind:
    """A kind stored in one entry of a model field: ``model.<field>[i, col] = factor · value``
    (``model.<field>[i]`` when ``col`` is ``None``), and the spec element's attribute alike.

    Args:
      element: Element type of the target (``"joint"``, ``"actuator"``, ``"geom"``).
      field: Model field, e.g. ``"actuator_gainprm"``.
      col: Column of a 2-D field, ``None`` for a 1-D one.
      unit: SI unit of the value.
      bounds: Default bounds from the nominal.
      reason: Given: the quantity has the physical lower limit 0, and this says why.
      require: Raises when the element cannot carry the kind.
      spec_attr: Spec attribute (default: ``field`` without its ``"<element>_"`` prefix);
        entry ``col`` of it, or its first entry (or the scalar) when ``col`` is ``None``.
      factor: Model value per parameter value (``-1`` for a bias term ``-kv``).
    """
    attr = spec_attr or field.split("_", 1)[1]
    row = (lambda i: (i, col)) if col is not None else (lambda i: i)

    def read(m: mujoco.MjModel, i: int) -> np.ndarray:
        return np.array([factor * getattr(m, field)[row(i)]])

    def set_spec(obj: Any, v: np.ndarray) -> None:
        if col is None:
            set_first(attr)(obj, factor * v)
        else:
            getattr(obj, attr)[col] = factor * v[0]

    def set_model(m: mujoco.MjModel, i: int, v: np.ndarray) -> None:
        getattr(m, field)[row(i)] = factor * v[0]

    def fields(m: mujoco.MjModel, i: int) -> list[tuple[str, list[int], float]]:
        return [(field, [flat_index(m, field, i, col or 0)], factor)]

    lower = 0.0 if reason else None
    return Kind(element, read, set_spec, set_model, bounds, unit, fields, lower, reason, require)


_DCMOTOR = int(mujoco.mjtGain.mjGAIN_DCMOTOR)
_PID = int(mujoco.mjtGain.mjGAIN_PID)
_INPUT_POS = int(mujoco.mjtCtrlInput.mjINPUT_POS)
_INPUT_VEL = int(mujoco.mjtCtrlInput.mjINPUT_VEL)


def _require_gain(gain: int, element: str) -> Callable[[mujoco.MjModel, int, str], None]:
    def require(m: mujoco.MjModel, i: int, name: str) -> None:
        if int(m.actuator_gaintype[i]) != gain:
            raise ValueError(
                f"actuator {name!r} must be a <{element}> actuator (gaintype "
                f"{mujoco.mjtGain(gain).name}), got gaintype "
                f"{mujoco.mjtGain(int(m.actuator_gaintype[i])).name}; declare it "
                f"<{element} .../> in the model"
            )

    return require


def _require_feature(
    check: Callable[[mujoco.MjModel, int], bool], what: str
) -> Callable[[mujoco.MjModel, int, str], None]:
    """A dcmotor whose ``what`` feature is on (``check(model, id)``)."""
    is_dcmotor = _require_gain(_DCMOTOR, "dcmotor")

    def require(m: mujoco.MjModel, i: int, name: str) -> None:
        is_dcmotor(m, i, name)
        if not check(m, i):
            raise ValueError(
                f"dcmotor {name!r} must have {what} switched on in the model to identify it "
                "(it adds a state or a term the compiled model lacks); set it in the MJCF "
                "to a nominal value"
            )

    return require


def _require_history(m: mujoco.MjModel, i: int, name: str) -> None:
    if int(m.actuator_history[i, 0]) <= 0:
        raise ValueError(
            f"actuator {name!r} must have a control history (nsample > 0) to have a delay, "
            'got nsample 0; add nsample="N" interp="linear" with N·timestep above the '
            "largest delay"
        )


def _delay_bounds(nominal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros_like(nominal), np.maximum(4.0 * np.abs(nominal), 0.05)


def _phase_bounds(nominal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return nominal - np.pi, nominal + np.pi


def _prm(
    field: str,
    col: int,
    unit: str,
    bounds: Bounds,
    require: Require,
    reason: str = "",
    factor: float = 1.0,
) -> Kind:
    """``model.actuator_<field>[i, col] = factor · value`` (spec ``<field>[col]`` alike);
    ``reason`` given: a lower limit of 0."""
    field = f"actuator_{field}"
    return entry_kind("actuator", field, col, unit, bounds, reason, require, factor=factor)


def _scalar(
    field: str, unit: str, bounds: Bounds, reason: str, require: Require | None = None
) -> Kind:
    """``model.actuator_<field>[i]`` (spec attribute ``<field>``), lower limit 0."""
    return entry_kind("actuator", f"actuator_{field}", None, unit, bounds, reason, require)


_dcmotor = _require_gain(_DCMOTOR, "dcmotor")
_inductance = _require_feature(lambda m, i: m.actuator_dynprm[i, 0] > 0, "inductance")
_lugre = _require_feature(lambda m, i: m.actuator_dynprm[i, 5] > 0, "lugre")
_cogging = _require_feature(lambda m, i: m.actuator_biasprm[i, 1] > 0, "cogging (poles > 0)")
_controller = _require_feature(
    lambda m, i: bool(int(m.actuator_ctrlspec[i]) & (_INPUT_POS | _INPUT_VEL)),
    'a controller input (input="pos", "vel" or "pos vel")',
)
_pid = _require_gain(_PID, "pid")
_NEG = "a negative value adds energy or is not physical"

ACTUATOR_KINDS: dict[str, Kind] = {
    "actuator_delay": _scalar(
        "delay", "s", _delay_bounds, "a command cannot act before it is sent", _require_history
    ),
    "actuator_damping": _scalar(
        "damping", "N·m·s/rad", nonneg_bounds, "a negative damping adds energy"
    ),
    "actuator_armature": _scalar(
        "armature", "kg·m²", nonneg_bounds, "armature is a rotor inertia, never negative"
    ),
    "dcmotor_resistance": _prm(
        "gainprm", 0, "Ω", positive_bounds, _dcmotor, "a winding resistance is positive"
    ),
    "dcmotor_motorconst": _prm(
        "gainprm", 1, "N·m/A", positive_bounds, _dcmotor, "a motor constant is positive"
    ),
    "dcmotor_timeconst": _prm(
        "dynprm", 0, "s", positive_bounds, _inductance, "a time constant is positive"
    ),
    "dcmotor_cogging_amplitude": _prm(
        "biasprm",
        0,
        "N·m",
        nonneg_bounds,
        _cogging,
        "an amplitude is a magnitude (the phase carries the sign)",
    ),
    "dcmotor_cogging_phase": _prm("biasprm", 2, "rad", _phase_bounds, _cogging),
    "dcmotor_lugre_stiffness": _prm("dynprm", 5, "N·m/rad", positive_bounds, _lugre, _NEG),
    "dcmotor_lugre_damping": _prm("dynprm", 6, "N·m·s/rad", nonneg_bounds, _lugre, _NEG),
    "dcmotor_lugre_coulomb": _prm("biasprm", 3, "N·m", nonneg_bounds, _lugre, _NEG),
    "dcmotor_lugre_static": _prm("biasprm", 4, "N·m", nonneg_bounds, _lugre, _NEG),
    "dcmotor_lugre_stribeck": _prm("biasprm", 5, "rad/s", positive_bounds, _lugre, _NEG),
    "dcmotor_kp": _prm("gainprm", 4, "N·m/rad", nonneg_bounds, _controller, _NEG),
    "dcmotor_ki": _prm("gainprm", 5, "N·m/(rad·s)", nonneg_bounds, _controller, _NEG),
    "dcmotor_kd": _prm("gainprm", 6, "N·m·s/rad", nonneg_bounds, _controller, _NEG),
    "pid_kp": _prm("biasprm", 1, "N·m/rad", positive_bounds, _pid, _NEG, factor=-1.0),
    "pid_kv": _prm("biasprm", 2, "N·m·s/rad", nonneg_bounds, _pid, _NEG, factor=-1.0),
    "pid_ki": _prm("gainprm", 0, "N·m/(rad·s)", nonneg_bounds, _pid, _NEG),
}


def _dofs(model: mujoco.MjModel, joint: int) -> slice:
    adr = model.jnt_dofadr[joint]
    n = {0: 6, 1: 3}.get(int(model.jnt_type[joint]), 1)
    return slice(adr, adr + n)


def _require_hinge_or_slide(model: mujoco.MjModel, i: int, name: str) -> None:
    kind = int(model.jnt_type[i])
    if kind not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
        raise ValueError(
            f"joint {name!r} must be a hinge or slide joint for joint_ref, got "
            f"{mujoco.mjtJoint(kind).name}"
        )


def _ref_kind() -> Kind:
    """``joint_ref``: the joint's reference position (``ref`` -> ``qpos0``), where the
    encoder reads 0 relative to the model's geometry: an encoder offset, natively."""

    def read(m: mujoco.MjModel, i: int) -> np.ndarray:
        return np.array([m.qpos0[m.jnt_qposadr[i]]])

    def write(m: mujoco.MjModel, i: int, v: np.ndarray) -> None:
        m.qpos0[m.jnt_qposadr[i]] = v[0]

    def fields(m: mujoco.MjModel, i: int) -> list[tuple[str, list[int], float]]:
        return [("qpos0", [int(m.jnt_qposadr[i])], 1.0)]

    def bounds(nominal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return nominal - 0.2, nominal + 0.2

    def set_spec(joint: Any, v: np.ndarray) -> None:
        hinge = joint.type == mujoco.mjtJoint.mjJNT_HINGE
        joint.ref = float(np.degrees(v[0])) if hinge and joint.compiler.degree else float(v[0])

    return Kind(
        "joint", read, set_spec, write, bounds, "rad", fields,
        require=_require_hinge_or_slide,
    )  # fmt: skip


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
        return cast(np.ndarray, getattr(m, field)[_dofs(m, i)][:1].copy())

    def write(m: mujoco.MjModel, i: int, v: np.ndarray) -> None:
        getattr(m, field)[_dofs(m, i)] = v[0]

    def fields(m: mujoco.MjModel, i: int) -> list[tuple[str, list[int], float]]:
        d = _dofs(m, i)
        return [(field, list(range(d.start, d.stop)), 1.0)]

    return Kind(
        "joint", read, set_first(spec_attr), write, nonneg_bounds, unit, fields, 0.0, reason
    )


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
        "joint", "jnt_stiffness", None, "N·m/rad", nonneg_bounds, spec_attr="stiffness"
    ),
    "joint_ref": _ref_kind(),
    "actuator_kp": Kind(
        "actuator",
        lambda m, i: m.actuator_gainprm[i, :1].copy(),
        _set_kp_spec,
        _set_kp_model,
        positive_bounds,
        "N·m/rad",
        lambda m, i: [
            ("actuator_gainprm", [flat_index(m, "actuator_gainprm", i, 0)], 1.0),
            ("actuator_biasprm", [flat_index(m, "actuator_biasprm", i, 1)], -1.0),
        ],
        0.0,
        "a negative position gain drives away from the target",
    ),
    "actuator_kv": entry_kind(
        "actuator",
        "actuator_biasprm",
        2,
        "N·m·s/rad",
        nonneg_bounds,
        "a negative velocity gain adds energy",
        factor=-1.0,
    ),
    "actuator_gear": entry_kind("actuator", "actuator_gear", 0, "N·m/ctrl", same_sign_bounds),
    "actuator_filter_tau": entry_kind(
        "actuator", "actuator_dynprm", 0, "s", positive_bounds, "a time constant is positive"
    ),
    "geom_friction": entry_kind(
        "geom", "geom_friction", 0, "1", nonneg_bounds, "a friction coefficient is never negative"
    ),
    "pair_friction": Kind(
        "pair",
        lambda m, i: m.pair_friction[i, :1].copy(),
        _set_pair_friction_spec,
        _set_pair_friction_model,
        nonneg_bounds,
        "1",
        lambda m, i: [
            (
                "pair_friction",
                [flat_index(m, "pair_friction", i, 0), flat_index(m, "pair_friction", i, 1)],
                1.0,
            )
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
        key = element_ids_key(model)
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


#: The kinds of body inertia (:func:`mjsysid.body_inertia_param`) by their kind name.
INERTIA_KINDS = {
    "body_mass": InertiaType.Mass,
    "body_mass_ipos": InertiaType.MassIpos,
    "body_inertia": InertiaType.Pseudo,
}
#: The kinds that change no model: measurement (:class:`SignalTransform`) and command
#: (:class:`ControlTransform`) parameters.
SIGNAL_KINDS = ("sensor_delay", "sensor_gain", "sensor_bias")
CONTROL_KINDS = ("control_deadband", "control_gain", "control_offset")
#: Every kind name an experiment file or ``mjsysid simulate --set`` may give.
ALL_KINDS = sorted(set(KINDS) | set(INERTIA_KINDS))
