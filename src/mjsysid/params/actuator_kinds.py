"""Parameter kinds for MuJoCo 4's native actuator elements: command delay, actuator damping
and armature, the ``dcmotor`` actuator's identifiable constants, and ``pid`` gains.

They join :data:`mjsysid.params.kinds.KINDS`, so :func:`mjsysid.make_parameter` and experiment
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

from collections.abc import Callable

import mujoco
import numpy as np

from mjsysid.params.kind_type import (
    Bounds,
    Kind,
    Require,
    entry_kind,
    nonneg_bounds,
    positive_bounds,
)

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
