"""The library laws' step, compiled (Numba): one simulation, one step, no Python.

The same maths as each law's NumPy :meth:`step` (:mod:`~mjsysid.sim.laws.friction`,
:mod:`~mjsysid.sim.laws.motors`, :mod:`~mjsysid.sim.laws.servos`), written on the scalars of
one simulation in the same order of operations, so that the results are the NumPy ones
(the tests compare them with :func:`~mjsysid.sim.lockstep.reference_rollout`). The laws
come as the tables of :mod:`mjsysid.sim.laws.table`; a kernel's ``p`` is its law's slice of
the values table: parameter ``j`` of its kind's :data:`~mjsysid.sim.laws.table.SLOTS` at
``p[2j]`` (the positive direction's entry, or the only one) and ``p[2j + 1]`` (the negative
direction's), so ``p[6]`` of ``joint_friction`` is its ``stribeck_velocity``. Used by
:class:`mjsysid.sim.compiled.CompiledRollout`; importing this module imports Numba (the
``fast`` extra) and compiles, or loads from Numba's cache, the kernels.
"""

from __future__ import annotations

import numba
import numpy as np

from mjsysid.sim.laws import table as t
from mjsysid.sim.laws.motors import TORQUE_CLIP, VELOCITY_GATE

__all__ = ["start_laws", "step_laws"]

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _smooth_sign(v: float, width: float) -> float:
    return np.sign(v) if width <= 0 else np.tanh(v / width)


@_jit
def _split(x: float, pos: float, neg: float) -> float:
    return pos * np.maximum(x, 0.0) + neg * np.minimum(x, 0.0)


@_jit
def _clamp(x: float, lo: float, hi: float) -> float:
    return np.minimum(np.maximum(x, lo), hi)


@_jit
def _gate(x: float, width: float) -> float:
    if width <= 0:
        return 1.0 if x > 0 else 0.0
    return 0.5 * (1.0 + np.tanh(0.5 * x / width))


@_jit
def _budget(flags: int, p: np.ndarray, e: int, v: float, tau_m: float, tau_e: float) -> float:
    """:meth:`~mjsysid.sim.laws.friction.JointFriction.budget` in the pair's entry ``e``
    (0: the positive direction)."""
    level = abs(p[e]) if flags & t.F_COULOMB else 0.0
    if flags & t.F_STRIBECK:
        r = abs(v / p[6])
        drop = np.exp(-(r ** p[8] if flags & t.F_FIT_EXPONENT else r * r))
        level = level + abs(p[4 + e]) * drop
    if flags & t.F_LOAD:
        transmitted = abs(p[10 + e]) * tau_m
        if flags & t.F_LOAD_EXTERNAL:
            transmitted = transmitted - abs(p[16 + e]) * tau_e
        level = level + abs(transmitted)
        if flags & t.F_LOAD_QUADRATIC:
            level = level + abs(p[12 + e]) * tau_m * tau_m
    return level


@_jit
def _joint_friction(
    flags: int,
    width: float,
    p: np.ndarray,
    v: float,
    tau_m: float,
    tau_e: float,
    inertia: float,
    passive: float,
    dt: float,
) -> float:
    """:class:`~mjsysid.sim.laws.friction.JointFriction`: the torque it adds (``tau_m`` the
    torque of the laws before it; ``tau_e = -bias``, ``inertia`` and ``passive`` at the
    joint's dof, read only with ``load_external`` or ``stick``)."""
    if not flags & t.F_STICK:
        direction = np.sign(v) + (1.0 if v == 0 else 0.0)
        f = _budget(flags, p, 0 if direction > 0 else 1, v, tau_m, tau_e)
        f = f * _smooth_sign(v, width)
        if flags & t.F_VISCOUS:
            f = f + _split(v, p[2], p[3])
        if flags & t.F_DRAG:
            f = f + _split(v * abs(v), p[14], p[15])
        return -f
    stop = inertia * v / dt + tau_m + tau_e + passive
    direction = np.sign(stop) + (1.0 if stop == 0 else 0.0)
    e = 0 if direction > 0 else 1
    f = _budget(flags, p, e, v, tau_m, tau_e)
    if flags & t.F_VISCOUS:
        f = f + abs(p[2 + e]) * abs(v)
    if flags & t.F_DRAG:
        f = f + abs(p[14 + e]) * v * v
    return -direction * np.minimum(abs(stop), f)


@_jit
def _transform(u: float, width: float, p: np.ndarray) -> float:
    """:meth:`~mjsysid.sim.laws.motors.RobotYamlMotor.transform` (``p``: its values)."""
    mean = 0.5 * (p[0] + p[1])
    scale = ((p[0] if u >= 0 else p[1]) / mean) if mean > 1e-8 else 1.0
    if width > 0:
        edge = u - p[2] if u >= 0 else -u - p[3]
        return u * scale * _clamp(edge / width + 0.5, 0.0, 1.0)
    dead = (u >= 0 and u < p[2]) or (u < 0 and u > -p[3])
    return 0.0 if dead else u * scale


@_jit
def _motor_torque(v: float, held: float, p: np.ndarray) -> float:
    """:meth:`~mjsysid.sim.laws.motors.RobotYamlMotor.motor_torque`."""
    speed, ahead = abs(v), v > 0
    fric = p[6] if ahead else p[7]
    tau = -(np.sign(v) * fric if speed > VELOCITY_GATE else 0.0)
    tau = tau - (p[4] if ahead else p[5]) * v
    tau = tau - p[8] * v * speed
    tau = tau - (p[10] * v * np.sign(held) if abs(held) > VELOCITY_GATE else 0.0)
    return _clamp(tau, -TORQUE_CLIP, TORQUE_CLIP)


@_jit
def start_laws(
    ints: np.ndarray,
    reals: np.ndarray,
    values: np.ndarray,
    start: np.ndarray,
    ctrl: np.ndarray,
    state: np.ndarray,
) -> None:
    """Writes every law's initial internal state into ``state`` (``(nstate,)``): the given
    ``start`` where finite, else the law's own (the first step, before any law ran).

    Args:
      ints, reals: The laws' tables. values: ``(nvalue,)`` this simulation's values.
      start: ``(nstate,)`` the given initial states (NaN: none). ctrl: ``(nu,)``.
    """
    for i in range(ints.shape[0]):
        if ints[i, t.CODE] == t.ROBOT_YAML_MOTOR:
            s = ints[i, t.STATE]
            p = values[ints[i, t.VALUE] :]
            held = _transform(ctrl[ints[i, t.CTRL]], reals[i, t.WIDTH], p)
            state[s] = start[s] if np.isfinite(start[s]) else held


@_jit
def step_laws(
    ints: np.ndarray,
    reals: np.ndarray,
    values: np.ndarray,
    q: np.ndarray,
    v: np.ndarray,
    ctrl: np.ndarray,
    force: np.ndarray,
    new_command: bool,
    inputs: np.ndarray,
    constants: np.ndarray,
    state: np.ndarray,
    bias: np.ndarray,
    passive: np.ndarray,
    inertia: np.ndarray,
    dt: float,
) -> None:
    """One step of every law, in order: adds their torques to ``force`` and writes the
    commands they change into ``ctrl`` and their next states into ``state``.

    Args:
      ints, reals: The laws' tables. values: ``(nvalue,)`` this simulation's values.
      q, v: ``(nq,)``, ``(nv,)`` the state before the step. ctrl: ``(nu,)`` the controls.
      force: ``(nv,)`` the applied forces (the laws' sum). new_command: Whether a command
        row starts at this step. inputs: ``(ninput,)`` the recorded inputs at this step.
      constants: ``(nconstant,)``. state: ``(nstate,)`` the laws' internal states.
      bias, passive, inertia: ``(nv,)`` the joint-space dynamics at the state
        (:mod:`~mjsysid.sim.laws.dynamics`; read only by laws that say they read them).
      dt: The timestep (s).
    """
    for i in range(ints.shape[0]):
        code, flags, dof = ints[i, t.CODE], ints[i, t.FLAGS], ints[i, t.DOF]
        p = values[ints[i, t.VALUE] :]
        width = reals[i, t.WIDTH]
        vel = v[dof]
        if code == t.VISCOUS:
            tau = -_split(vel, p[0], p[1])
        elif code == t.COULOMB:
            tau = -_split(_smooth_sign(vel, width), p[0], p[1])
        elif code == t.STRIBECK:
            r = vel / p[4]
            level = p[0] + (p[2] - p[0]) * np.exp(-(r * r))
            tau = -(level * _smooth_sign(vel, width) + p[6] * vel)
        elif code == t.QUADRATIC_DRAG:
            tau = -_split(vel * abs(vel), p[0], p[1])
        elif code == t.JOINT_FRICTION:
            tau = _joint_friction(
                flags, width, p, vel, force[dof], -bias[dof], inertia[dof], passive[dof], dt
            )
        elif code == t.COMMAND_TORQUE:
            u = ctrl[ints[i, t.CTRL]]
            if flags & t.F_DEADZONE:
                u = u * (_gate(u - p[0], width) + _gate(-u - p[1], width))
            tau = _split(u, p[2], p[3])
            if flags & t.F_BACK_EMF:
                tau = tau - p[4] * vel
            if flags & t.F_SATURATION:
                tau = p[6] * np.tanh(tau / p[6])
        elif code == t.ROBOT_YAML_MOTOR:
            s, c = ints[i, t.STATE], ints[i, t.CTRL]
            held = _transform(ctrl[c], width, p) if new_command else state[s]
            tau = _motor_torque(vel, held, p)
            if flags & t.F_LIMIT_SWITCH and flags & t.F_LIMITED:
                pos, push = q[ints[i, t.QPOS]], reals[i, t.GEAR_SIGN] * held
                if (pos >= reals[i, t.HIGH] and push > 0) or (pos <= reals[i, t.LOW] and push < 0):
                    held = 0.0
            ctrl[c] = held
            state[s] = held
        elif code == t.POSITION_SERVO:
            error = inputs[ints[i, t.INPUT]] - q[ints[i, t.QPOS]]
            u = p[4] * constants[ints[i, t.CONSTANT]] * error
            if flags & t.F_DERIVATIVE:
                u = u - p[6] * constants[ints[i, t.CONSTANT + 1]] * vel
            if flags & t.F_VOLTAGE_INPUT:
                volts = inputs[ints[i, t.INPUT + (2 if flags & t.F_ENABLE else 1)]]
            else:
                volts = constants[ints[i, t.CONSTANT + (2 if flags & t.F_DERIVATIVE else 1)]]
            kt, r = p[0], p[2]
            tau = kt * (_clamp(u, -1.0, 1.0) * volts - kt * vel) / r
            if flags & t.F_ENABLE and not inputs[ints[i, t.INPUT + 1]] > 0.5:
                tau = -kt * kt * vel / r if flags & t.F_SHORT else 0.0
        else:  # CURRENT_SERVO
            limit = p[2]
            tau = p[0] * _clamp(inputs[ints[i, t.INPUT]], -limit, limit)
            if flags & t.F_ENABLE and not inputs[ints[i, t.INPUT + 1]] > 0.5:
                tau = 0.0
        force[dof] = force[dof] + tau
