"""Truth simulator of the hobby project's Furuta pendulum, motor model and capture, as documented.

Source: ``/work/shared/seeds/001_de73a2b16bdaa551.txt`` (a hobby project's diff). This module
follows that document's equations and conventions literally, in its own code; it imports
nothing from mjsysid. Section references below name the document's files.

Plant
-----
``rotary_cartpole.xml`` beside this file: the URDF's inertials and joints (meshes replaced by
primitive geoms), robot.yaml's joint overrides, and the ``<general dyntype="filter">`` actuator
with ``gear = (gear_pos + gear_neg) / 2`` and ``ctrlrange = ±ctrl_limit``. MuJoCo's filter
dynamics, with the Euler integrator, are ``act ← act + h (clamp(ctrl) − act) / filter_tau``
and the joint torque is ``gear · act`` (the force uses ``act`` before its update).

One control period (``DT_CONTROL`` = ``SUBSTEPS`` × ``DT_PHYSICS`` = 10 × 0.002 s = 20 ms,
configs/runner/mujoco_single.yaml, the serial firmware's 50 Hz tick) with integer PWM ``u``:

1. action ``a = u / 255`` (src/sysid/capture.py normalises the applied PWM this way);
2. ``c = T(a)`` (src/core/robot.py ``transform_ctrl``), per-direction deadzone then gear
   compensation::

       T(a) = 0                                   if 0 ≤ a < dz₊  or  −dz₋ < a < 0
       T(a) = a · g_dir / ḡ,  g_dir = g₊ (a ≥ 0) or g₋ (a < 0),  ḡ = (g₊ + g₋) / 2

   ``data.ctrl ← c`` (MuJoCo clamps it to ``ctrlrange`` when it computes the actuator);
3. ``SUBSTEPS`` times (src/runners/mujoco.py ``MuJoCoRunner._sim_step``):

   a. ``qfrc_applied[motor] = F(ω, data.ctrl)`` (``compute_motor_force``)::

          F = clamp(−C_dir(ω) sgn ω · [|ω| > 1e-6] − b_dir(ω) ω − k_q ω |ω|
                    − k_e ω sgn(ctrl) · [|ctrl| > 1e-6],  −10, 10)      [N·m]

      with ``C_dir = C₊`` if ω > 0 else ``C₋`` (Coulomb) and ``b_dir = b₊`` if ω > 0 else
      ``b₋`` (viscous); ω is the motor joint velocity [rad/s];
   b. limit switch (``ActuatorLimits.enforce``): ``data.ctrl ← 0`` when the motor joint is at
      or past its upper limit with ``sgn(gear)·ctrl > 0``, or at or past its lower limit with
      ``sgn(gear)·ctrl < 0``. Nothing restores it before the next period, so once cut the
      control (and the back-EMF term gated by it) stays zero for the remaining substeps;
   c. ``mj_step``.

Capture (src/sysid/capture.py, src/runners/serial.py, assets/rotary_cartpole/hardware.yaml)
---------------------------------------------------------------------------------------------
The firmware ticks every 20 ms; at each tick it sends one state line with the encoder angles,
its own finite-difference velocities and the PWM it applied during the period that just
ended. The host then picks the next PWM and sends it; it is applied from the next tick on. So
**row k of a capture holds the state at tick k and the PWM that acted during the period
ending at tick k** (row 0: the state at rest, PWM 0, nothing applied yet). The host stamps a
row with its own clock when it reads the line (``time``, seconds since the capture started,
rounded to the millisecond here, with USB-serial latency and scheduling jitter). Encoders:
``ppr × gear_ratio × 4 = 11 × 30 × 4 = 1320`` counts per revolution for the motor
(hardware.yaml); the document gives no figure for the pendulum's encoder, 1320 is used for it
too (``PENDULUM_COUNTS_PER_REV``). The pendulum angle is reported wrapped to ``[−π, π)`` (the
document's sysid masks "encoder-wrap artefacts" in the pendulum velocity), so its firmware
velocity spikes when the pendulum passes upright. With ``safety_limit_deg`` set, commands are
shaped as the capture does near the motor's travel limit, from the *measured* motor angle of
the row just received (above 70 % of the limit only commands back toward the centre pass;
above 90 % a brake command of ``int(A (0.5 + 0.5 min(1, (|r| − 0.9)/0.1)))`` toward the centre
replaces it, ``r`` = angle / limit, ``A`` = amplitude).

CSV columns (``make_capture``): ``time`` [s, host clock], ``firmware_ms`` [ms, firmware clock,
exact 20 ms ticks], ``pwm`` [integer, −255..255, applied during the period ending at this
row], ``action`` [= pwm / 255], ``motor_angle`` [rad], ``motor_vel`` [rad/s, firmware finite
difference], ``pendulum_angle`` [rad, 0 = hanging down, wrapped], ``pendulum_vel`` [rad/s,
firmware finite difference of the wrapped angle]. A ``*_truth.csv`` beside it holds the
unquantised states, the control and the actuator state; a ``*_meta.json`` the parameters and
conventions.

CLI: ``python -m bench.truth.furuta_doc --out DIR [--seed 0] [--duration 20] [--kind all]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

import mujoco
import numpy as np

__all__ = [
    "DT_CONTROL",
    "DT_PHYSICS",
    "INITIAL_GUESSES",
    "MEASURED_COLUMNS",
    "SEARCH_BOUNDS",
    "SUBSTEPS",
    "TRUE_PARAMS",
    "TRUTH_COLUMNS",
    "build_mjcf",
    "build_model",
    "chirp_pwm",
    "commands_for",
    "firmware_velocity",
    "host_clock",
    "limit_switch_cut",
    "make_capture",
    "motor_force",
    "multisine_pwm",
    "params_with",
    "prbs_pwm",
    "quantize_angle",
    "safety_shape",
    "simulate",
    "transform_ctrl",
    "wrap_angle",
]

MJCF_PATH = Path(__file__).with_name("rotary_cartpole.xml")

# ── Timing (configs/runner/mujoco_single.yaml, configs/sysid.yaml) ─────────────────────────
DT_PHYSICS = 0.002  # s, MuJoCo timestep
SUBSTEPS = 10  # physics steps per control period
DT_CONTROL = DT_PHYSICS * SUBSTEPS  # s, 50 Hz: the firmware's tick and the runner's period

# ── Serial protocol and hardware (src/runners/serial.py, assets/.../hardware.yaml) ─────────
PWM_FULL_SCALE = 255  # firmware PWM range is −255..255; action = pwm / 255
MAX_MOTOR_SPEED = 150  # firmware MAX_MOTOR_SPEED = the capture's default PRBS amplitude
ENCODER_PPR = 11
ENCODER_GEAR_RATIO = 30.0
MOTOR_COUNTS_PER_REV = int(ENCODER_PPR * ENCODER_GEAR_RATIO * 4)  # 1320 (quadrature)
PENDULUM_COUNTS_PER_REV = MOTOR_COUNTS_PER_REV  # not in the document: an assumption
SAFETY_LIMIT_DEG = 90.0  # capture's --motor-angle-limit default

# ── Motor-model constants (src/core/robot.py) ─────────────────────────────────────────────
FORCE_CLAMP = 10.0  # N·m, |qfrc_applied| bound
COULOMB_VEL_GATE = 1e-6  # rad/s, Coulomb acts only above this speed
BACK_EMF_CTRL_GATE = 1e-6  # back-EMF acts only when |ctrl| exceeds this

MEASURED_COLUMNS = (
    "time",
    "firmware_ms",
    "pwm",
    "action",
    "motor_angle",
    "motor_vel",
    "pendulum_angle",
    "pendulum_vel",
)
TRUTH_COLUMNS = (
    "time",
    "true_motor_angle",
    "true_motor_vel",
    "true_pendulum_angle",
    "true_pendulum_vel",
    "ctrl",
    "ctrl_end",
    "act",
    "limit_cut",
)

# The "true" parameters: assets/rotary_cartpole/robot.yaml and rotary_cartpole.urdf as the
# document shows them. Names follow the document's own sysid parameter names
# (src/sysid/motor/rollout.py MOTOR_PARAMS, src/sysid/rollout.py ROTARY_CARTPOLE_PARAMS).
TRUE_PARAMS: dict[str, float] = {
    # actuator (robot.yaml `actuators:`)
    "actuator_gear_pos": 0.424182,  # N·m per unit ctrl, ctrl ≥ 0
    "actuator_gear_neg": 0.425031,  # N·m per unit ctrl, ctrl < 0
    "ctrl_limit": 0.592,  # ctrl_range = [−ctrl_limit, ctrl_limit]
    "motor_deadzone_pos": 0.141291,  # unit ctrl
    "motor_deadzone_neg": 0.078015,  # unit ctrl
    "motor_damping_pos": 0.002027,  # N·m·s/rad, ω > 0
    "motor_damping_neg": 0.014665,  # N·m·s/rad, ω ≤ 0
    "motor_frictionloss_pos": 0.057328,  # N·m, ω > 0
    "motor_frictionloss_neg": 0.053355,  # N·m, ω < 0
    "actuator_filter_tau": 0.005035,  # s
    "viscous_quadratic": 0.000285,  # N·m·s²/rad²
    "back_emf_gain": 0.006758,  # N·m·s/rad
    # joints (robot.yaml `joints:`)
    "motor_armature": 0.002773,  # kg·m²
    "pendulum_damping": 0.000119,  # N·m·s/rad
    "pendulum_frictionloss": 1.0e-05,  # N·m
    # links (URDF inertials)
    "arm_mass": 0.02110029934220782,  # kg
    "arm_com_x": -0.0071030505291264975,  # m, arm frame
    "arm_com_y": 0.0008511826488989179,
    "arm_com_z": 0.007952020186701035,
    "pendulum_mass": 0.03936742845036306,  # kg
    "pendulum_com_x": 0.060245187591695615,  # m, pendulum frame
    "pendulum_com_y": -0.07601707109312682,
    "pendulum_com_z": -0.0034636702158137786,
    "pendulum_ixx": 6.202768755990066e-05,  # kg·m², about the COM, pendulum frame
    "pendulum_iyy": 3.70078470430685e-05,
    "pendulum_izz": 7.827356811788924e-05,
    "pendulum_ixy": -6.925117819616428e-06,
}

# The document's own starting points for its fits (the "wrong initial guesses"): the
# `default` of each ParamSpec in src/sysid/motor/rollout.py (motor-only fit, MOTOR_PARAMS) and
# src/sysid/rollout.py (pendulum fit, ROTARY_CARTPOLE_PARAMS; motor_armature from
# EXTENDED_PARAMS). The motor guesses are far from the truth (gear 0.064 vs 0.424); the link
# guesses are the CAD values rounded to 3-4 digits, i.e. the truth, as the document fits them
# from the CAD export. ctrl_limit's guess is MAX_MOTOR_SPEED / 255 = 0.588.
INITIAL_GUESSES: dict[str, float] = {
    "actuator_gear_pos": 0.064,
    "actuator_gear_neg": 0.064,
    "ctrl_limit": 0.588,
    "motor_deadzone_pos": 0.08,
    "motor_deadzone_neg": 0.08,
    "motor_damping_pos": 0.003,
    "motor_damping_neg": 0.003,
    "motor_frictionloss_pos": 0.03,
    "motor_frictionloss_neg": 0.03,
    "actuator_filter_tau": 0.03,
    "viscous_quadratic": 0.0,
    "back_emf_gain": 0.0,
    "motor_armature": 0.0001,  # motor-only fit's guess (the pendulum fit's is 0.00277)
    "pendulum_damping": 0.0001,
    "pendulum_frictionloss": 0.0001,
    "arm_mass": 0.02110,
    "arm_com_x": -0.00710,
    "arm_com_y": 0.00085,
    "arm_com_z": 0.00795,
    "pendulum_mass": 0.03937,
    "pendulum_com_x": 0.06025,
    "pendulum_com_y": -0.07602,
    "pendulum_com_z": -0.00346,
    "pendulum_ixx": 6.20e-05,
    "pendulum_iyy": 3.70e-05,
    "pendulum_izz": 7.83e-05,
    "pendulum_ixy": -6.93e-06,
}

# The document's search boxes for the same parameters (lower, upper), same sources.
SEARCH_BOUNDS: dict[str, tuple[float, float]] = {
    "actuator_gear_pos": (0.005, 0.5),
    "actuator_gear_neg": (0.005, 0.5),
    "ctrl_limit": (0.45, 0.70),
    "motor_deadzone_pos": (0.0, 0.30),
    "motor_deadzone_neg": (0.0, 0.30),
    "motor_damping_pos": (1e-5, 0.1),
    "motor_damping_neg": (1e-5, 0.1),
    "motor_frictionloss_pos": (0.001, 0.2),
    "motor_frictionloss_neg": (0.001, 0.2),
    "actuator_filter_tau": (0.001, 0.20),
    "viscous_quadratic": (0.0, 0.005),
    "back_emf_gain": (0.0, 0.05),
    "motor_armature": (1e-6, 0.01),
    "pendulum_damping": (1e-6, 0.05),
    "pendulum_frictionloss": (1e-6, 0.05),
    "arm_mass": (0.005, 0.08),
    "arm_com_x": (-0.03, 0.03),
    "arm_com_y": (-0.02, 0.02),
    "arm_com_z": (-0.02, 0.02),
    "pendulum_mass": (0.010, 0.10),
    "pendulum_com_x": (0.01, 0.15),
    "pendulum_com_y": (-0.20, 0.0),
    "pendulum_com_z": (-0.05, 0.05),
    "pendulum_ixx": (1e-07, 1e-03),
    "pendulum_iyy": (1e-07, 1e-03),
    "pendulum_izz": (1e-07, 1e-03),
    "pendulum_ixy": (-1e-03, 1e-03),
}


def params_with(base: Mapping[str, float] | None = None, **overrides: float) -> dict[str, float]:
    """A full parameter dict: ``base`` (default ``TRUE_PARAMS``) with ``overrides`` applied.

    Raises ``KeyError`` for a name that is not a parameter of this model.
    """
    out = dict(TRUE_PARAMS if base is None else base)
    unknown = (set(out) | set(overrides)) - set(TRUE_PARAMS)
    if unknown:
        raise KeyError(f"not parameters of the Furuta truth: {sorted(unknown)}")
    missing = set(TRUE_PARAMS) - set(out)
    if missing:
        raise KeyError(f"parameters missing: {sorted(missing)}")
    out.update({k: float(v) for k, v in overrides.items()})
    return out


# ── Model ──────────────────────────────────────────────────────────────────────────────────


def _num(x: float) -> str:
    return repr(float(x))


def build_mjcf(params: Mapping[str, float] | None = None) -> str:
    """The MJCF text of ``rotary_cartpole.xml`` with ``params`` written into it.

    Only the attributes the parameters own are rewritten (actuator gear, ctrlrange and
    dynprm; joint damping, frictionloss and armature; the arm's and pendulum's inertials);
    everything else is the file's. The arm's inertia tensor is the URDF's, always.
    """
    p = params_with(params)
    root = ET.parse(MJCF_PATH).getroot()
    gear_avg = (p["actuator_gear_pos"] + p["actuator_gear_neg"]) / 2.0
    (act,) = root.iter("general")
    act.set("gear", _num(gear_avg))
    act.set("ctrlrange", f"{_num(-p['ctrl_limit'])} {_num(p['ctrl_limit'])}")
    act.set("dynprm", _num(p["actuator_filter_tau"]))
    for jnt in root.iter("joint"):
        if jnt.get("name") == "motor_joint":
            jnt.set("armature", _num(p["motor_armature"]))
        elif jnt.get("name") == "pendulum_joint":
            jnt.set("damping", _num(p["pendulum_damping"]))
            jnt.set("frictionloss", _num(p["pendulum_frictionloss"]))
    for body in root.iter("body"):
        inertial = body.find("inertial")
        if body.get("name") == "arm":
            inertial.set("mass", _num(p["arm_mass"]))
            inertial.set("pos", " ".join(_num(p[f"arm_com_{a}"]) for a in "xyz"))
        elif body.get("name") == "pendulum":
            inertial.set("mass", _num(p["pendulum_mass"]))
            inertial.set("pos", " ".join(_num(p[f"pendulum_com_{a}"]) for a in "xyz"))
            full = [p["pendulum_ixx"], p["pendulum_iyy"], p["pendulum_izz"], p["pendulum_ixy"]]
            inertial.set("fullinertia", " ".join(_num(v) for v in [*full, 0.0, 0.0]))
    return ET.tostring(root, encoding="unicode")


def build_model(params: Mapping[str, float] | None = None) -> mujoco.MjModel:
    """Compile :func:`build_mjcf` (timestep ``DT_PHYSICS``, Euler)."""
    model = mujoco.MjModel.from_xml_string(build_mjcf(params))
    model.opt.timestep = DT_PHYSICS
    return model


# ── The document's motor model, vectorised ─────────────────────────────────────────────────


def transform_ctrl(action: np.ndarray | float, params: Mapping[str, float]) -> np.ndarray:
    """``T(a)``: per-direction deadzone, then per-direction gear compensation.

    ``action`` [unit ctrl], any shape; returns the same shape (float64). Zero inside
    ``[0, dz₊)`` and ``(−dz₋, 0)``; elsewhere ``a · g_dir / ḡ`` with ``g_dir`` the gear of
    the sign of ``a`` (``a = 0`` counts as positive) and ``ḡ`` their mean (no rescaling when
    ``ḡ ≤ 1e-8``).
    """
    a = np.asarray(action, dtype=np.float64)
    dz_pos, dz_neg = params["motor_deadzone_pos"], params["motor_deadzone_neg"]
    g_pos, g_neg = params["actuator_gear_pos"], params["actuator_gear_neg"]
    dead = ((a >= 0) & (a < dz_pos)) | ((a < 0) & (a > -dz_neg))
    g_avg = (g_pos + g_neg) / 2.0
    if g_avg > 1e-8:
        scale = np.where(a >= 0, g_pos / g_avg, g_neg / g_avg)
        a = a * scale
    return np.where(dead, 0.0, a)


def motor_force(
    vel: np.ndarray | float, ctrl: np.ndarray | float, params: Mapping[str, float]
) -> np.ndarray:
    """``F(ω, ctrl)`` [N·m], the torque the motor model adds through ``qfrc_applied``.

    ``vel``: motor joint velocity ω [rad/s]; ``ctrl``: the current ``data.ctrl`` (after the
    transform, possibly zeroed by the limit switch); broadcast together. Terms, subtracted in
    this order: Coulomb ``C_dir sgn ω`` (only when ``|ω| > 1e-6``; ``C₊`` for ω > 0, ``C₋``
    otherwise), viscous ``b_dir ω`` (``b₊`` for ω > 0, ``b₋`` otherwise), quadratic drag
    ``k_q ω |ω|`` (when ``k_q > 0``), back-EMF ``k_e ω sgn(ctrl)`` (when ``k_e > 0`` and
    ``|ctrl| > 1e-6``); the sum is clamped to ``±10``.
    """
    w = np.asarray(vel, dtype=np.float64)
    c = np.asarray(ctrl, dtype=np.float64)
    torque = np.zeros(np.broadcast(w, c).shape)
    coulomb = np.where(w > 0, params["motor_frictionloss_pos"], params["motor_frictionloss_neg"])
    torque = torque - np.where(np.abs(w) > COULOMB_VEL_GATE, coulomb * np.sign(w), 0.0)
    damping = np.where(w > 0, params["motor_damping_pos"], params["motor_damping_neg"])
    torque = torque - damping * w
    k_q = params["viscous_quadratic"]
    if k_q > 0:
        torque = torque - k_q * w * np.abs(w)
    k_e = params["back_emf_gain"]
    if k_e > 0:
        torque = torque - np.where(np.abs(c) > BACK_EMF_CTRL_GATE, k_e * w * np.sign(c), 0.0)
    return np.clip(torque, -FORCE_CLAMP, FORCE_CLAMP)


def limit_switch_cut(
    qpos: np.ndarray | float,
    ctrl: np.ndarray | float,
    lo: float,
    hi: float,
    gear_sign: float = 1.0,
    limited: bool = True,
) -> np.ndarray:
    """True where the limit switch cuts the control: joint at/past ``hi`` and
    ``gear_sign · ctrl > 0``, or at/past ``lo`` and ``gear_sign · ctrl < 0`` [rad, unit ctrl]."""
    q = np.asarray(qpos, dtype=np.float64)
    s = gear_sign * np.asarray(ctrl, dtype=np.float64)
    return limited & (((q >= hi) & (s > 0)) | ((q <= lo) & (s < 0)))


# ── Capture side ───────────────────────────────────────────────────────────────────────────


def quantize_angle(angle: np.ndarray | float, counts_per_rev: int) -> np.ndarray:
    """An incremental encoder's reading: ``round(θ N / 2π) · 2π / N`` [rad], N counts/rev
    (the count is zeroed at the start, at θ = 0)."""
    step = 2.0 * math.pi / counts_per_rev
    return np.floor(np.asarray(angle, dtype=np.float64) / step + 0.5) * step


def wrap_angle(angle: np.ndarray | float) -> np.ndarray:
    """``θ`` wrapped to ``[−π, π)`` [rad]."""
    return np.remainder(np.asarray(angle, dtype=np.float64) + math.pi, 2.0 * math.pi) - math.pi


def firmware_velocity(angle: np.ndarray, dt: float = DT_CONTROL) -> np.ndarray:
    """The firmware's velocity: ``(θ_k − θ_{k−1}) / dt`` of the reported angles, 0 at row 0.
    ``angle`` shape (N,) [rad]; returns (N,) [rad/s]."""
    out = np.zeros_like(angle, dtype=np.float64)
    out[1:] = np.diff(angle) / dt
    return out


def host_clock(rng: np.random.Generator, n_rows: int) -> np.ndarray:
    """Host time stamps [s] of ``n_rows`` rows read from a 50 Hz serial stream.

    ``t_k = φ + k·DT_CONTROL + latency_k``, rounded to the millisecond, non-decreasing. ``φ``
    (capture start to first tick) ~ U[0, 20) ms; ``latency_k`` = 0.5 ms + Gamma(2, 0.75 ms)
    (USB-serial transfer and polling, mean 2 ms) plus, on 2 % of rows, an OS scheduling
    delay ~ U[3, 12] ms.
    """
    phase = rng.uniform(0.0, DT_CONTROL)
    latency = 0.0005 + rng.gamma(2.0, 0.00075, size=n_rows)
    hiccup = rng.random(n_rows) < 0.02
    latency = latency + np.where(hiccup, rng.uniform(0.003, 0.012, size=n_rows), 0.0)
    t = phase + np.arange(n_rows) * DT_CONTROL + latency
    return np.maximum.accumulate(np.round(t * 1000.0)) / 1000.0


def safety_shape(pwm: int, motor_angle: float, amplitude: int, limit_deg: float) -> int:
    """The capture's travel guard applied to the next PWM, given the measured motor angle [rad].

    ``r = motor_angle / limit``: ``|r| > 0.9`` → brake ``∓int(A (0.5 + 0.5 min(1,
    (|r| − 0.9) / 0.1)))`` toward the centre; ``0.7 < |r| ≤ 0.9`` → a command pushing
    outward is turned around (``u ↦ −u``); otherwise ``pwm`` unchanged.
    """
    if limit_deg <= 0:
        return int(pwm)
    r = motor_angle / math.radians(limit_deg)
    if abs(r) > 0.9:
        brake = int(amplitude * (0.5 + 0.5 * min(1.0, (abs(r) - 0.9) / 0.1)))
        return -brake if r > 0 else brake
    if abs(r) > 0.7 and r * pwm > 0:
        return -int(pwm)
    return int(pwm)


def prbs_pwm(
    n: int,
    rng: np.random.Generator,
    amplitude: int = MAX_MOTOR_SPEED,
    hold_min_ms: int = 50,
    hold_max_ms: int = 300,
) -> np.ndarray:
    """The capture's random-hold ("PRBS-style") excitation on the 20 ms tick grid.

    A level ~ U{−A..A} is held for ~ U{hold_min..hold_max} ms; a new level is drawn at the
    first tick at or after the hold ends. Returns ``n`` integer PWM commands.
    """
    out = np.empty(n, dtype=np.int64)
    level, switch_at = 0, -1.0
    for k in range(n):
        t = k * DT_CONTROL
        if t >= switch_at:
            level = int(rng.integers(-amplitude, amplitude, endpoint=True))
            switch_at = t + int(rng.integers(hold_min_ms, hold_max_ms, endpoint=True)) / 1000.0
        out[k] = level
    return out


def multisine_pwm(
    n: int,
    rng: np.random.Generator,
    amplitude: int = MAX_MOTOR_SPEED,
    f_min: float = 0.2,
    f_max: float = 4.0,
    n_tones: int = 12,
) -> np.ndarray:
    """A random-phase multisine, ``n_tones`` log-spaced tones in ``[f_min, f_max]`` Hz, scaled
    to peak ``amplitude`` and rounded to integer PWM. Shape (n,)."""
    t = np.arange(n) * DT_CONTROL
    f = np.geomspace(f_min, f_max, n_tones)
    phase = rng.uniform(0.0, 2.0 * math.pi, n_tones)
    x = np.sin(2.0 * math.pi * f[:, None] * t[None, :] + phase[:, None]).sum(axis=0)
    return np.round(amplitude * x / np.max(np.abs(x))).astype(np.int64)


def chirp_pwm(
    n: int, amplitude: int = MAX_MOTOR_SPEED, f0: float = 0.2, f1: float = 3.0
) -> np.ndarray:
    """A logarithmic chirp from ``f0`` to ``f1`` Hz over the ``n`` ticks, integer PWM."""
    t = np.arange(n) * DT_CONTROL
    duration = max(n * DT_CONTROL, DT_CONTROL)
    k = (f1 / f0) ** (1.0 / duration)
    phase = 2.0 * math.pi * f0 * (k**t - 1.0) / math.log(k)
    return np.round(amplitude * np.sin(phase)).astype(np.int64)


def commands_for(kind: str, n: int, seed: int) -> np.ndarray:
    """``n`` integer PWM commands of ``kind`` (``prbs``, ``multisine`` or ``chirp``)."""
    rng = np.random.default_rng([seed, 0])
    if kind == "prbs":
        return prbs_pwm(n, rng)
    if kind == "multisine":
        return multisine_pwm(n, rng)
    if kind == "chirp":
        return chirp_pwm(n)
    raise ValueError(f"unknown kind {kind!r}: use prbs, multisine or chirp")


# ── Simulation ─────────────────────────────────────────────────────────────────────────────


def simulate(
    params: Mapping[str, float] | None,
    commands: Sequence[int] | np.ndarray,
    *,
    seed: int = 0,
    q0: tuple[float, float] = (0.0, 0.0),
    qd0: tuple[float, float] = (0.0, 0.0),
    safety_limit_deg: float | None = SAFETY_LIMIT_DEG,
    amplitude: int = MAX_MOTOR_SPEED,
    limit_switch: bool = True,
    motor_counts_per_rev: int = MOTOR_COUNTS_PER_REV,
    pendulum_counts_per_rev: int = PENDULUM_COUNTS_PER_REV,
) -> dict[str, np.ndarray]:
    """Run the plant from ``(q0, qd0)`` at rest state under integer PWM ``commands``.

    ``commands`` (N,): the PWM asked for each control period (after the safety shaping when
    ``safety_limit_deg`` is set; ``None`` turns it off). ``seed`` drives the host clock only.
    ``limit_switch=False`` leaves the document's limit switch out (for tests).

    Returns a dict of (N + 1,) arrays, row k = tick k (row 0 the initial state): the
    ``MEASURED_COLUMNS`` and ``TRUTH_COLUMNS`` (``ctrl``: the transformed control written at the
    start of the period ending at row k; ``ctrl_end``: ``data.ctrl`` at its end, 0 if the limit
    switch cut it; ``act``: the actuator's filter state; ``limit_cut``: the switch fired).
    """
    p = params_with(params)
    u = np.asarray(commands)
    if u.ndim != 1 or not np.issubdtype(u.dtype, np.integer):
        raise ValueError("commands must be a 1-D array of integer PWM values")
    model = build_model(p)
    data = mujoco.MjData(model)
    jm = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "motor_joint")
    jp = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "pendulum_joint")
    qm, qp = model.jnt_qposadr[jm], model.jnt_qposadr[jp]
    vm, vp = model.jnt_dofadr[jm], model.jnt_dofadr[jp]
    lo, hi = model.jnt_range[jm]
    limited = bool(model.jnt_limited[jm])
    gear_sign = float(np.sign(model.actuator_gear[0, 0]))
    data.qpos[[qm, qp]] = q0
    data.qvel[[vm, vp]] = qd0
    mujoco.mj_forward(model, data)

    n = len(u)
    pwm = np.zeros(n + 1, dtype=np.int64)
    ctrl = np.zeros(n + 1)
    ctrl_end = np.zeros(n + 1)
    state = np.zeros((n + 1, 5))  # motor q, motor ω, pendulum q, pendulum ω, act
    cut = np.zeros(n + 1, dtype=bool)
    state[0] = data.qpos[qm], data.qvel[vm], data.qpos[qp], data.qvel[vp], data.act[0]
    measured_motor = float(quantize_angle(state[0, 0], motor_counts_per_rev))
    for k in range(n):
        u_k = int(u[k])
        if safety_limit_deg is not None:
            u_k = safety_shape(u_k, measured_motor, amplitude, safety_limit_deg)
        u_k = max(-PWM_FULL_SCALE, min(PWM_FULL_SCALE, u_k))
        c_k = float(transform_ctrl(u_k / PWM_FULL_SCALE, p))
        data.ctrl[0] = c_k
        for _ in range(SUBSTEPS):
            data.qfrc_applied[vm] = motor_force(data.qvel[vm], data.ctrl[0], p)
            if limit_switch and limit_switch_cut(
                data.qpos[qm], data.ctrl[0], lo, hi, gear_sign, limited
            ):
                data.ctrl[0] = 0.0
                cut[k + 1] = True
            mujoco.mj_step(model, data)
        pwm[k + 1], ctrl[k + 1], ctrl_end[k + 1] = u_k, c_k, data.ctrl[0]
        state[k + 1] = data.qpos[qm], data.qvel[vm], data.qpos[qp], data.qvel[vp], data.act[0]
        measured_motor = float(quantize_angle(state[k + 1, 0], motor_counts_per_rev))

    motor_angle = quantize_angle(state[:, 0], motor_counts_per_rev)
    pendulum_angle = wrap_angle(quantize_angle(state[:, 2], pendulum_counts_per_rev))
    clock = np.random.default_rng([seed, 1])
    return {
        "time": host_clock(clock, n + 1),
        "firmware_ms": int(clock.integers(2_000, 60_000)) + 20 * np.arange(n + 1),
        "pwm": pwm,
        "action": pwm / PWM_FULL_SCALE,
        "motor_angle": motor_angle,
        "motor_vel": firmware_velocity(motor_angle),
        "pendulum_angle": pendulum_angle,
        "pendulum_vel": firmware_velocity(pendulum_angle),
        "true_motor_angle": state[:, 0],
        "true_motor_vel": state[:, 1],
        "true_pendulum_angle": state[:, 2],
        "true_pendulum_vel": state[:, 3],
        "ctrl": ctrl,
        "ctrl_end": ctrl_end,
        "act": state[:, 4],
        "limit_cut": cut,
    }


# ── Files and CLI ──────────────────────────────────────────────────────────────────────────


def _write_csv(path: Path, columns: Sequence[str], out: Mapping[str, np.ndarray]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for row in zip(*(out[c] for c in columns), strict=True):
            w.writerow(
                [
                    int(v) if isinstance(v, (bool, np.bool_, np.integer)) else f"{float(v):.17g}"
                    for v in row
                ]
            )


def make_capture(
    seed: int,
    duration: float,
    kind: str,
    out_dir: str | Path = ".",
    params: Mapping[str, float] | None = None,
) -> Path:
    """Simulate a ``kind`` capture of ``duration`` s and write it; returns the measured CSV.

    Files in ``out_dir``: ``furuta_doc_{kind}_s{seed}.csv`` (``MEASURED_COLUMNS``),
    ``..._truth.csv`` (``TRUTH_COLUMNS``) and ``..._meta.json`` (parameters, conventions).
    """
    p = params_with(params)
    n = round(duration / DT_CONTROL)
    out = simulate(p, commands_for(kind, n, seed), seed=seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"furuta_doc_{kind}_s{seed}"
    measured = out_dir / f"{stem}.csv"
    _write_csv(measured, MEASURED_COLUMNS, out)
    _write_csv(out_dir / f"{stem}_truth.csv", TRUTH_COLUMNS, out)
    meta = {
        "source": "bench/truth/furuta_doc.py (hobby-project Furuta pendulum, seed 001)",
        "kind": kind,
        "seed": seed,
        "duration_s": n * DT_CONTROL,
        "rows": n + 1,
        "dt_control_s": DT_CONTROL,
        "dt_physics_s": DT_PHYSICS,
        "substeps": SUBSTEPS,
        "pwm_full_scale": PWM_FULL_SCALE,
        "amplitude": MAX_MOTOR_SPEED,
        "safety_limit_deg": SAFETY_LIMIT_DEG,
        "motor_counts_per_rev": MOTOR_COUNTS_PER_REV,
        "pendulum_counts_per_rev": PENDULUM_COUNTS_PER_REV,
        "row_convention": "row k: state at tick k; pwm acted during the period ending at row k",
        "params": p,
        "initial_guesses": INITIAL_GUESSES,
        "mujoco": mujoco.__version__,
    }
    (out_dir / f"{stem}_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return measured


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--duration", type=float, default=20.0, help="seconds (document: 20)")
    ap.add_argument("--kind", default="all", choices=["all", "prbs", "multisine", "chirp"])
    args = ap.parse_args(argv)
    kinds = ["prbs", "multisine", "chirp"] if args.kind == "all" else [args.kind]
    for kind in kinds:
        print(make_capture(args.seed, args.duration, kind, args.out))


if __name__ == "__main__":
    main()
