"""An independent implementation of BAM's servo and friction models, and its reference MAE.

BAM ("Better Actuator Models", Rhoban, github.com/Rhoban/bam; Duclusaud, Passault, Padois,
Ly, "Extended Friction Models for the Physics Simulation of Servo Actuators", arXiv
2410.08650) identifies friction models M1-M6 of servo actuators from pendulum-bench logs. This
module re-implements its published equations in its own code (numpy, vectorised over a batch
of parameter sets), loads its JSON logs, and computes the figure BAM reports for a parameter
file: the mean absolute position error of an open-loop simulation of each log.

Data: ``bench/data/bam_sts3250/`` holds four real logs of a Feetech STS3250 and BAM's M6 fit
for it, published by the BAM project under the Apache License 2.0 (origin and ``LICENSE``
there). Run ``python bench/bam_reference.py`` for the table.

Equations (symbols → names in BAM's parameter files)
-----------------------------------------------------
Pendulum bench (BAM's ``Pendulum`` test bench; θ = 0 hangs down)::

    J θ̈ = τ_m + τ_e + τ_f,   J = m l² + J_s,   τ_e = −m g l sin θ,   g = 9.80665 m/s²

``m`` = log ``mass`` [kg] at ``l`` = log ``length`` [m] (BAM adds ``arm_mass``/3 · l² and
``arm_mass``/2 to these when a log has an arm mass; these logs have none); ``J_s`` [kg·m²] the
servo's own apparent inertia (``inertia`` in the STS3250 file, ``armature`` elsewhere).

Servo torque τ_m [N·m], ``E`` = ``torque_enable`` (False: the motor is disconnected, τ_m = 0),
``e = θ* − θ`` the position error to the goal θ* = ``goal_position``:

* voltage-controlled servo (BAM's ``VoltageControlledActuator``; Dynamixel MX, Feetech STS3215),
  firmware P loop → PWM duty → DC motor::

      d = clip(k_p η e, −d_max, d_max),  V = v_in d,  τ_m = E (k_t V / R − k_t² ω / R)

  ``k_p`` = log ``kp`` (firmware units), ``η`` = BAM's ``error_gain`` (firmware gain scaling,
  per model: 0.158 MX, 0.166 STS3215), ``d_max`` = ``max_pwm``, ``v_in`` = log ``vin`` [V],
  ``k_t`` [N·m/A] = ``kt``, ``R`` [Ω] = ``R``.
* stiffness servo (BAM's ``sts3250`` class, the parameterisation of ``bam_params_m6.json``)::

      τ_m = E · [|ω| ≤ ω_max] · clip(K e − D ω, −τ_max, τ_max),  τ_max = 4.9 N·m,
      ω_max = 7.853 rad/s

  ``K`` [N·m/rad] = ``stiffness``, ``D`` [N·m·s/rad] = ``damping``. Below saturation it is the
  voltage servo with ``K = k_t v_in k_p η / R`` and ``D = k_t² / R`` (back-EMF damping), see
  :func:`voltage_to_stiffness`.

Friction budget τ_fm = F_s(τ_m, τ_e, ω) + K_v |ω| [N·m] (``s = exp(−|ω/ω_s|^α)``, the Stribeck
factor: 1 at rest, → 0 when sliding)::

    M1  F_s = K_c
    M2  F_s = K_c + s K_cs
    M3  F_s = K_c + K_l |τ_e − τ_m|
    M4  F_s = K_c + K_l |τ_e − τ_m| + s (K_cs + K_ls |τ_e − τ_m|)
    M5  F_s = K_c + |K_e τ_e − K_m τ_m| + s (K_cs + |K_es τ_e − K_ms τ_m|)
    M6  F_s = M5 + s [sgn τ_e ≠ sgn τ_m] ([|τ_e| < |τ_m|] K_eq τ_e² + [|τ_e| > |τ_m|] K_mq τ_m²)

K_c ``friction_base``, K_v ``friction_viscous``, K_cs ``friction_stribeck``, ω_s
``dtheta_stribeck`` [rad/s], α ``alpha``, K_l ``load_friction_base``, K_ls
``load_friction_stribeck``, K_m ``load_friction_motor``, K_e ``load_friction_external``, K_ms
``load_friction_motor_stribeck``, K_es ``load_friction_external_stribeck``, K_mq
``load_friction_motor_quad`` [1/(N·m)], K_eq ``load_friction_external_quad`` [1/(N·m)].
(M6's quadratic term: when the motor drives, |τ_m| > |τ_e|, the load's torque squared weighs
with K_eq; when the load back-drives, the motor's with K_mq; BAM's code pairs them so.)

BAM's integration step (``dt``) and stiction::

    τ_stop = J ω / dt + τ_m + τ_e             (the friction that would stop the joint in dt)
    τ_f    = −sgn(τ_stop) min(|τ_stop|, τ_fm)
    θ̈     = (τ_m + τ_e + τ_f) / J
    ω     ← clip(ω + θ̈ dt, −100, 100)
    θ     ← θ + ω dt + θ̈ dt² / 2             (with the updated ω)

When the budget covers τ_stop the joint stops exactly (ω = 0): static friction. A rollout
starts at the first entry's ``position`` and ``speed`` and records θ *before* each step.

The reported figure (BAM's ``mae``): the log is first resampled to a uniform 5 ms grid by
linear interpolation between the two bracketing rows (BAM's ``process``; ``torque_enable``
interpolated and thresholded at 0.5; the grid starts at t = 0, before the first row, which is
extrapolated), simulated on that grid with ``simulate_control`` (the servo sees the simulated
θ), and ``MAE = mean_k |θ_sim,k − θ_log,k|`` over the grid. ``mode="rows"`` instead evaluates
at the log's own rows (substeps of at most 5 ms between them, goal interpolated the same way).
BAM's explicit step cannot be run on the raw ~20 ms intervals: with D/J ≈ 136 1/s the velocity
update ``ω ← ω (1 − D dt / J)`` is unstable for dt > 2J/D ≈ 15 ms.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "data" / "bam_sts3250"
PARAMS_M6 = DATA_DIR / "bam_params_m6.json"

G = 9.80665  # m/s², BAM's gravity
BAM_DT = 0.005  # s, BAM's default resampling step
SPEED_LIMIT = 100.0  # rad/s, BAM clips the simulated speed
STS3250_MAX_TORQUE = 4.9  # N·m, BAM's sts3250 class
STS3250_MAX_SPEED = 7.853  # rad/s, BAM's sts3250 class: no torque above this speed

# Which parameters each friction model reads (BAM's model flags: load-dependent, directional,
# Stribeck, quadratic).
MODEL_PARAMS: dict[str, tuple[str, ...]] = {
    "m1": ("friction_base", "friction_viscous"),
    "m2": ("friction_base", "friction_viscous", "friction_stribeck", "dtheta_stribeck", "alpha"),
    "m3": ("friction_base", "friction_viscous", "load_friction_base"),
    "m4": (
        "friction_base",
        "friction_viscous",
        "load_friction_base",
        "friction_stribeck",
        "load_friction_stribeck",
        "dtheta_stribeck",
        "alpha",
    ),
    "m5": (
        "friction_base",
        "friction_viscous",
        "friction_stribeck",
        "load_friction_motor",
        "load_friction_external",
        "load_friction_motor_stribeck",
        "load_friction_external_stribeck",
        "dtheta_stribeck",
        "alpha",
    ),
}
MODEL_PARAMS["m6"] = (
    *MODEL_PARAMS["m5"],
    "load_friction_motor_quad",
    "load_friction_external_quad",
)
SERVO_PARAMS = {"stiffness": ("stiffness", "damping", "inertia"), "voltage": ("kt", "R", "inertia")}

# Feetech STS3215 firmware constants in BAM (the only Feetech voltage model it ships).
FEETECH_ERROR_GAIN = 0.166
FEETECH_MAX_PWM = 0.97

LOG_FIELDS = ("timestamp", "position", "speed", "load", "input_volts", "temp", "goal_position")


# ── Logs ───────────────────────────────────────────────────────────────────────────────────


@dataclasses.dataclass
class BamLog:
    """One BAM pendulum log. Arrays have shape (N,); SI units (s, rad, rad/s, V, °C)."""

    name: str
    trajectory: str
    mass: float  # kg
    length: float  # m
    kp: float  # firmware gain
    vin: float  # V
    motor: str
    timestamp: np.ndarray
    position: np.ndarray
    speed: np.ndarray
    load: np.ndarray
    input_volts: np.ndarray
    temp: np.ndarray
    goal_position: np.ndarray
    torque_enable: np.ndarray  # bool
    arm_mass: float = 0.0  # kg
    dt: float | None = None  # s, set on a resampled (uniform) log

    @property
    def rows(self) -> int:
        return len(self.timestamp)

    def torque_off_segments(self) -> list[tuple[int, int]]:
        """``[start, stop)`` row ranges where ``torque_enable`` is False."""
        off = np.r_[False, ~self.torque_enable, False].astype(np.int8)
        edges = np.flatnonzero(np.diff(off))
        return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def load_log(path: str | Path) -> BamLog:
    """Read one BAM JSON log (``mass``, ``length``, ``kp``, ``vin``, ``motor``,
    ``trajectory``, ``entries``). Raises ``ValueError`` on missing fields or non-increasing
    time stamps."""
    path = Path(path)
    raw = json.loads(path.read_text())
    entries = raw.get("entries")
    if not entries:
        raise ValueError(f"{path.name}: no entries")
    missing = [k for k in (*LOG_FIELDS, "torque_enable") if k not in entries[0]]
    if missing:
        raise ValueError(f"{path.name}: entries lack {missing}")
    cols = {k: np.array([float(e[k]) for e in entries]) for k in LOG_FIELDS}
    if not (np.diff(cols["timestamp"]) > 0).all():
        raise ValueError(f"{path.name}: time stamps are not increasing")
    return BamLog(
        name=path.stem,
        trajectory=str(raw.get("trajectory", "")),
        mass=float(raw["mass"]),
        length=float(raw["length"]),
        kp=float(raw["kp"]),
        vin=float(raw.get("vin", 12.0)),
        motor=str(raw.get("motor", "")),
        torque_enable=np.array([bool(e["torque_enable"]) for e in entries]),
        arm_mass=float(raw.get("arm_mass", 0.0)),
        **cols,
    )


def load_logs(directory: str | Path = DATA_DIR) -> list[BamLog]:
    """All ``*.json`` logs of ``directory`` with ``entries`` (sorted by file name)."""
    paths = sorted(p for p in Path(directory).glob("*.json") if p.name != PARAMS_M6.name)
    return [load_log(p) for p in paths]


def resample(log: BamLog, dt: float = BAM_DT) -> BamLog:
    """BAM's ``process`` step: the log on the grid ``t = 0, dt, …`` (< last stamp).

    Each value is linear between the two rows bracketing ``t`` (row j, j+1 with ``j`` the
    number of stamps after the first that are ``< t``; before the first stamp that is the
    extrapolation of rows 0 and 1); ``torque_enable`` is interpolated as 0/1 and kept where
    > 0.5.
    """
    ts = log.timestamp
    grid = np.arange(0.0, ts[-1], dt)
    j = np.searchsorted(ts[1:], grid, side="left")
    w = (grid - ts[j]) / (ts[j + 1] - ts[j])

    def lerp(v: np.ndarray) -> np.ndarray:
        return v[j] + (v[j + 1] - v[j]) * w

    cols = {k: lerp(getattr(log, k)) for k in LOG_FIELDS if k != "timestamp"}
    return dataclasses.replace(
        log,
        timestamp=grid,
        torque_enable=lerp(log.torque_enable.astype(float)) > 0.5,
        dt=dt,
        **cols,
    )


def load_params(path: str | Path = PARAMS_M6) -> dict:
    """A BAM parameter file: ``model`` (m1-m6), ``actuator`` and the float parameters."""
    raw = json.loads(Path(path).read_text())
    if raw.get("model") not in MODEL_PARAMS:
        raise ValueError(f"{path}: unknown model {raw.get('model')!r}")
    return raw


# ── Models ─────────────────────────────────────────────────────────────────────────────────


def stribeck(omega: np.ndarray, p: Mapping) -> np.ndarray:
    """``s(ω) = exp(−|ω / ω_s|^α)``: 1 at rest, → 0 when sliding. Shapes broadcast."""
    return np.exp(-(np.abs(np.asarray(omega) / p["dtheta_stribeck"]) ** p["alpha"]))


def friction_budget(
    model: str, p: Mapping, tau_m: np.ndarray, tau_e: np.ndarray, omega: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(F_s, K_v)``: the velocity-independent budget and the viscous coefficient, so that
    ``τ_fm = F_s + K_v |ω|`` [N·m]. ``tau_m``, ``tau_e`` [N·m], ``omega`` [rad/s] and the
    parameters broadcast together (parameters may be (B,) arrays of a batch)."""
    tau_m, tau_e, omega = np.asarray(tau_m), np.asarray(tau_e), np.asarray(omega)
    f = p["friction_base"] + 0.0 * (tau_m + tau_e + omega)
    s = stribeck(omega, p) if model in ("m2", "m4", "m5", "m6") else None
    if model == "m2":
        f = f + s * p["friction_stribeck"]
    elif model in ("m3", "m4"):
        gearbox = np.abs(tau_e - tau_m)
        f = f + p["load_friction_base"] * gearbox
        if model == "m4":
            f = f + s * (p["friction_stribeck"] + p["load_friction_stribeck"] * gearbox)
    elif model in ("m5", "m6"):
        f = f + np.abs(p["load_friction_external"] * tau_e - p["load_friction_motor"] * tau_m)
        f = f + s * (
            p["friction_stribeck"]
            + np.abs(
                p["load_friction_external_stribeck"] * tau_e
                - p["load_friction_motor_stribeck"] * tau_m
            )
        )
        if model == "m6":
            f = f + s * quadratic_term(p, tau_m, tau_e)
    elif model != "m1":
        raise ValueError(f"unknown friction model {model!r}")
    return f, p["friction_viscous"] + 0.0 * f


def quadratic_term(p: Mapping, tau_m: np.ndarray, tau_e: np.ndarray) -> np.ndarray:
    """M6's piecewise quadratic load term (before the Stribeck factor), [N·m]:
    ``[sgn τ_e ≠ sgn τ_m] ([|τ_e| < |τ_m|] K_eq τ_e² + [|τ_e| > |τ_m|] K_mq τ_m²)``."""
    opposed = np.sign(tau_e) != np.sign(tau_m)
    driving = np.abs(tau_e) < np.abs(tau_m)
    back_driven = np.abs(tau_e) > np.abs(tau_m)
    term = np.where(driving, p["load_friction_external_quad"] * tau_e**2, 0.0)
    term = term + np.where(back_driven, p["load_friction_motor_quad"] * tau_m**2, 0.0)
    return np.where(opposed, term, 0.0)


def stiffness_servo_torque(
    p: Mapping, goal: np.ndarray, q: np.ndarray, omega: np.ndarray, enable: np.ndarray
) -> np.ndarray:
    """BAM's STS3250 servo: ``E [|ω| ≤ ω_max] clip(K (θ* − θ) − D ω, ±τ_max)`` [N·m]."""
    tau = np.clip(
        p["stiffness"] * (goal - q) - p["damping"] * omega, -STS3250_MAX_TORQUE, STS3250_MAX_TORQUE
    )
    return np.where(np.asarray(enable) & (np.abs(omega) <= STS3250_MAX_SPEED), tau, 0.0)


def voltage_servo_torque(
    p: Mapping,
    goal: np.ndarray,
    q: np.ndarray,
    omega: np.ndarray,
    enable: np.ndarray,
    kp: float,
    vin: float,
    error_gain: float = FEETECH_ERROR_GAIN,
    max_pwm: float = FEETECH_MAX_PWM,
) -> np.ndarray:
    """BAM's voltage-controlled servo: ``d = clip(k_p η e, ±d_max)``, ``V = v_in d``,
    ``τ_m = E (k_t V − k_t² ω) / R`` [N·m]; ``p`` holds ``kt`` [N·m/A] and ``R`` [Ω]."""
    duty = np.clip(kp * error_gain * (goal - q), -max_pwm, max_pwm)
    tau = (p["kt"] * vin * duty - p["kt"] ** 2 * omega) / p["R"]
    return np.where(enable, tau, 0.0)


def voltage_to_stiffness(
    kt: float,
    R: float,
    vin: float,
    kp: float,
    error_gain: float = FEETECH_ERROR_GAIN,
    max_pwm: float = FEETECH_MAX_PWM,
) -> dict[str, float]:
    """The voltage servo's unsaturated law as a stiffness servo: ``stiffness = k_t v_in k_p η
    / R`` [N·m/rad], ``damping = k_t² / R`` [N·m·s/rad], ``stall_torque = k_t v_in d_max / R``
    [N·m] (its saturation at rest), ``error_at_saturation = d_max / (k_p η)`` [rad]."""
    return {
        "stiffness": kt * vin * kp * error_gain / R,
        "damping": kt**2 / R,
        "stall_torque": kt * vin * max_pwm / R,
        "error_at_saturation": max_pwm / (kp * error_gain),
    }


def bam_step(
    q: np.ndarray,
    omega: np.ndarray,
    tau_m: np.ndarray,
    tau_e: np.ndarray,
    static: np.ndarray,
    viscous: np.ndarray,
    inertia: np.ndarray,
    dt: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One BAM step; returns ``(θ, ω, τ_f)`` after ``dt``. Shapes broadcast (batch (B,))."""
    tau_stop = inertia / dt * omega + tau_m + tau_e
    tau_f = -np.sign(tau_stop) * np.minimum(np.abs(tau_stop), static + viscous * np.abs(omega))
    acc = (tau_m + tau_e + tau_f) / inertia
    omega = np.clip(omega + acc * dt, -SPEED_LIMIT, SPEED_LIMIT)
    return q + omega * dt + 0.5 * acc * dt**2, omega, tau_f


def _batch(params: Mapping | Sequence[Mapping]) -> tuple[dict, int | None]:
    """Parameters as a dict of floats or of (B,) arrays (a list of dicts is stacked)."""
    if isinstance(params, Mapping):
        return dict(params), None
    keys = [k for k, v in params[0].items() if isinstance(v, (int, float))]
    return {k: np.array([float(p[k]) for p in params]) for k in keys}, len(params)


def simulate(
    times: np.ndarray,
    goal: np.ndarray,
    enable: np.ndarray,
    q0: float,
    omega0: float,
    log: BamLog,
    params: Mapping | Sequence[Mapping],
    model: str = "m6",
    servo: str = "stiffness",
) -> np.ndarray:
    """Roll BAM's simulator over the time grid ``times`` (M,) with inputs held at its points.

    ``goal`` [rad] and ``enable`` (M,) are the inputs at each grid point; the step from
    ``times[k]`` to ``times[k+1]`` uses them (the last point's step uses the previous
    interval's length, as BAM steps after recording every row). ``params``: one dict, or a
    list of B dicts simulated together. Returns θ at each grid point, recorded before its
    step: shape (M,) or (B, M).
    """
    p, batch = _batch(params)
    if servo not in SERVO_PARAMS:
        raise ValueError(f"unknown servo {servo!r}: use stiffness or voltage")
    arm = log.length
    gravity_mass = log.mass + log.arm_mass / 2.0
    inertia = (log.mass + log.arm_mass / 3.0) * arm**2 + p["inertia"]
    shape = () if batch is None else (batch,)
    q = np.full(shape, float(q0))
    w = np.full(shape, float(omega0))
    out = np.empty((*shape, len(times)))
    steps = np.diff(times, append=2 * times[-1] - times[-2])
    for k in range(len(times)):
        out[..., k] = q
        if servo == "stiffness":
            tau_m = stiffness_servo_torque(p, goal[k], q, w, enable[k])
        else:
            tau_m = voltage_servo_torque(p, goal[k], q, w, enable[k], log.kp, log.vin)
        tau_e = -gravity_mass * G * arm * np.sin(q)
        static, viscous = friction_budget(model, p, tau_m, tau_e, w)
        q, w, _ = bam_step(q, w, tau_m, tau_e, static, viscous, inertia, steps[k])
    return out


def rollout(
    log: BamLog,
    params: Mapping | Sequence[Mapping],
    model: str = "m6",
    mode: str = "bam",
    dt: float = BAM_DT,
) -> tuple[np.ndarray, np.ndarray]:
    """Simulate ``log`` open loop; returns ``(θ_sim, θ_log)`` at the evaluated rows.

    ``mode="bam"``: BAM's way (resampled to ``dt``, evaluated on that grid). ``mode="rows"``:
    evaluated at the log's own rows, each interval split into ``ceil(Δt / dt)`` equal
    substeps whose inputs are interpolated as :func:`resample` would.
    """
    if mode == "bam":
        grid = log if log.dt is not None else resample(log, dt)
        sim = simulate(
            grid.timestamp,
            grid.goal_position,
            grid.torque_enable,
            grid.position[0],
            grid.speed[0],
            log,
            params,
            model,
        )
        return sim, grid.position
    if mode != "rows":
        raise ValueError(f"unknown mode {mode!r}: use bam or rows")
    ts = log.timestamp
    n_sub = np.maximum(1, np.ceil(np.diff(ts) / dt - 1e-9).astype(int))
    fine = np.concatenate(
        [ts[k] + (ts[k + 1] - ts[k]) * np.arange(n) / n for k, n in enumerate(n_sub)] + [ts[-1:]]
    )
    row_at = np.r_[0, np.cumsum(n_sub)]
    j = np.minimum(np.searchsorted(ts[1:], fine, side="left"), len(ts) - 2)
    w = (fine - ts[j]) / (ts[j + 1] - ts[j])
    goal = log.goal_position[j] + (log.goal_position[j + 1] - log.goal_position[j]) * w
    te = log.torque_enable.astype(float)
    enable = te[j] + (te[j + 1] - te[j]) * w > 0.5
    sim = simulate(fine, goal, enable, log.position[0], log.speed[0], log, params, model)
    return sim[..., row_at], log.position


def mae(
    log: BamLog,
    params: Mapping | Sequence[Mapping],
    model: str | None = None,
    mode: str = "bam",
) -> np.ndarray:
    """Mean absolute position error [rad] of the open-loop rollout (scalar, or (B,))."""
    model = model or (params["model"] if isinstance(params, Mapping) else params[0]["model"])
    sim, ref = rollout(log, params, model, mode)
    return np.mean(np.abs(sim - ref), axis=-1)


# ── The reference table ────────────────────────────────────────────────────────────────────


def reference_table(
    data_dir: str | Path = DATA_DIR, params_path: str | Path = PARAMS_M6
) -> list[dict]:
    """Per log: rows, and the MAE [mrad] of the M6 file (BAM's way and at the log's rows) and
    of its M1 terms alone (K_c, K_v: not a fit; BAM ships no M1 fit for the STS3250)."""
    params = load_params(params_path)
    table = []
    for log in load_logs(data_dir):
        table.append(
            {
                "log": log.name,
                "trajectory": log.trajectory,
                "rows": log.rows,
                "m6_mrad": 1e3 * float(mae(log, params, "m6", "bam")),
                "m6_rows_mrad": 1e3 * float(mae(log, params, "m6", "rows")),
                "m1_terms_mrad": 1e3 * float(mae(log, params, "m1", "bam")),
            }
        )
    return table


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="BAM's reference MAE on the STS3250 logs")
    ap.add_argument("--data", default=str(DATA_DIR), help="directory of BAM JSON logs")
    ap.add_argument("--params", default=str(PARAMS_M6), help="BAM parameter file (M6)")
    ap.add_argument("--json", action="store_true", help="print JSON lines too")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    table = reference_table(args.data, args.params)
    wall = time.perf_counter() - t0
    head = f"{'log':26s} {'trajectory':16s} {'rows':>5s} {'M6':>9s} {'M6@rows':>9s} {'M1*':>9s}"
    print(head)
    for r in table:
        print(
            f"{r['log']:26s} {r['trajectory']:16s} {r['rows']:5d} {r['m6_mrad']:9.2f} "
            f"{r['m6_rows_mrad']:9.2f} {r['m1_terms_mrad']:9.2f}"
        )
    mean = {k: np.mean([r[k] for r in table]) for k in ("m6_mrad", "m6_rows_mrad", "m1_terms_mrad")}
    print(
        f"{'mean':26s} {'':16s} {'':5s} {mean['m6_mrad']:9.2f} {mean['m6_rows_mrad']:9.2f} "
        f"{mean['m1_terms_mrad']:9.2f}"
    )
    print(
        "MAE in mrad. M6: BAM's figure (5 ms resampling, open loop from the first row, "
        "servo fed the logged goal_position and torque_enable). M6@rows: the same model "
        "evaluated at the log's own rows (<= 5 ms substeps). M1*: the M6 file's friction_base "
        "and friction_viscous alone (BAM ships no M1 fit for the STS3250; not a fit). "
        f"numpy {np.__version__}, {platform.machine()}, {wall:.1f} s."
    )
    if args.json:
        for r in table:
            print("JSON " + json.dumps(r))


if __name__ == "__main__":
    main()
