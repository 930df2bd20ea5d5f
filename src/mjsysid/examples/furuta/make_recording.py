"""How run1.csv, run2.csv and check.csv were made: the "true" Furuta pendulum captured the
way the hobby project's capture script does it, logged as its firmware sends it.

* The firmware ticks at 50 Hz and prints the tick's time in whole milliseconds and both
  encoder angles (motor: 1320 counts per turn, 11 pulses x 30:1 gearbox x 4; pendulum: 2400
  counts per turn). It reads the encoders a little off its tick (JITTER).
* Each tick the capture script picks its PRBS-style command: an integer PWM uniform in
  [-150, 150], held for a random 50-300 ms. Near the arm's limit it lets only commands that
  point back to the centre through, and past 90 % of it it brakes (its safety logic: the
  command depends on the measured arm angle). The logged command is the PWM the motor got
  during the tick, over 255.
* The true motor (TRUTH) behind the L298N, through qfrc_applied (mjsysid's force laws and
  LawRuntime): a cut-off deadzone per direction with smoothed edges, a weaker reverse
  torque constant, back-EMF, and Coulomb and viscous friction per direction; the rotor's
  armature is the model file's (from a motor-only identification). The pendulum's damping
  differs from the URDF's. An unmodelled torque disturbance (slowly varying noise,
  DISTURBANCE) acts on the arm.

It also writes truth.yaml: the true values by parameter name of experiment.yaml. Its
viscous friction holds the back-EMF too: -k_e·v acts like viscous friction in both
directions, so only the sums can be identified.
Run from this folder: python make_recording.py
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
import yaml

import mjsysid as ms
from mjsysid.sim.laws.core import force_law_params
from mjsysid.sim.laws.friction import CoulombFriction, ViscousFriction
from mjsysid.sim.laws.motors import CommandTorque
from mjsysid.sim.laws.runtime import LawRuntime

TRUTH: dict[str, Any] = {
    "deadzone": [0.14, 0.08],  # duty cycle the L298N swallows (forward, reverse)
    "torque_constant": [0.42, 0.34],  # N·m per unit duty (reverse is weaker)
    "back_emf": 0.0068,  # N·m·s/rad
    "friction": [0.057, 0.045],  # N·m, Coulomb (forward, reverse)
    "damping": [0.002, 0.0147],  # N·m·s/rad, viscous (forward, reverse)
    "pendulum_damping": 0.000119,  # N·m·s/rad (the URDF says 0.0001)
}
DEADZONE_WIDTH = 0.02  # duty, smoothing of the deadzone's edges
FRICTION_WIDTH = 0.2  # rad/s, smoothing of the friction's sign
DISTURBANCE = 0.0002  # N·m, standard deviation of the unmodelled torque
JITTER = 0.002  # s, standard deviation of the encoder reads' timing (the stamp is the tick's)
COUNTS = {"motor_angle": 1320, "pendulum_angle": 2400}  # encoder counts per turn
RUNS = {"run1": (20.0, 1), "run2": (20.0, 2), "check": (8.0, 3)}  # name: (duration s, seed)
TICK = 0.02  # s, the firmware's 50 Hz period
LIMIT = np.radians(60.0)  # rad, the capture script's --motor-angle-limit (the stops are at 90°)


def true_laws() -> tuple[CommandTorque, CoulombFriction, ViscousFriction]:
    """The motor laws of the true system (as experiment.yaml declares them, plus back-EMF)."""
    return (
        CommandTorque("motor", "motor_joint", actuator="motor", width=DEADZONE_WIDTH),
        CoulombFriction("arm_friction", "motor_joint", width=FRICTION_WIDTH),
        ViscousFriction("arm_viscous", "motor_joint"),
    )


def law_runtime() -> LawRuntime:
    """The true laws with the TRUTH values, to apply before every step."""
    motor, friction, viscous = true_laws()
    nominal = {k: TRUTH[k] for k in ("deadzone", "torque_constant")}
    params = ms.ParameterDict(
        force_law_params(motor, nominal | {"back_emf": [TRUTH["back_emf"]]})
        + force_law_params(friction, {"friction": TRUTH["friction"]})
        + force_law_params(viscous, {"damping": TRUTH["damping"]})
    )
    return LawRuntime([motor, friction, viscous], params)


@dataclass
class Prbs:
    """The capture script's excitation: an integer PWM held for a random time."""

    rng: np.random.Generator
    amplitude: int = 150
    hold_ms: tuple[int, int] = (50, 300)
    value: int = 0
    until: float = -1.0

    def __call__(self, t: float) -> int:
        if t >= self.until:
            self.value = int(self.rng.integers(-self.amplitude, self.amplitude + 1))
            self.until = t + int(self.rng.integers(*self.hold_ms, endpoint=True)) / 1000
        return self.value


def safe(pwm: int, angle: float, amplitude: int = 150, limit: float = LIMIT) -> int:
    """The capture script's safety logic near the arm's limits (``limit`` rad)."""
    ratio = angle / limit
    if abs(ratio) > 0.9:
        brake = int(amplitude * (0.5 + 0.5 * min(1.0, (abs(ratio) - 0.9) / 0.1)))
        return -brake if ratio > 0 else brake
    if abs(ratio) > 0.7 and ratio * pwm > 0:
        return -pwm
    return pwm


def capture(model: mujoco.MjModel, duration: float, seed: int) -> list[list[str]]:
    """Rows ``[time_ms, ctrl.motor, motor_angle, pendulum_angle]`` of one capture."""
    rng, noise = np.random.default_rng(seed), np.random.default_rng(seed + 100)
    runtime, prbs = law_runtime(), Prbs(rng)
    data = mujoco.MjData(model)
    data.qpos[1] = 0.05743  # rad: the pendulum hangs still here (not at the URDF's zero)
    mujoco.mj_forward(model, data)
    steps = round(TICK / model.opt.timestep)
    a = np.exp(-model.opt.timestep / 0.05)  # disturbance: noise low-passed at 0.05 s
    disturbance, rows = 0.0, []
    for k in range(round(duration / TICK)):
        late = JITTER * noise.standard_normal()  # s, when the firmware read the encoders
        angles = [
            _encoder(data.qpos[i] + late * data.qvel[i], c) for i, c in enumerate(COUNTS.values())
        ]
        pwm = safe(prbs(k * TICK), angles[0])
        data.ctrl[0] = pwm / 255
        rows.append([f"{1000 * k * TICK:.0f}", f"{pwm / 255:.6f}"] + [f"{x:.6f}" for x in angles])
        for _ in range(steps):
            disturbance = a * disturbance + np.sqrt(1 - a * a) * DISTURBANCE * noise.normal()
            runtime.apply(model, data)
            data.qfrc_applied[0] += disturbance
            mujoco.mj_step(model, data)
    return rows


def _encoder(angle: float, counts: int) -> float:
    """A quadrature encoder's reading (rad): the angle in whole counts."""
    step = 2 * np.pi / counts
    return float(np.round(angle / step) * step)


def truth_in_experiment_terms() -> dict[str, list[float]]:
    """The true values by parameter name of experiment.yaml."""
    kv = TRUTH["back_emf"]
    return {
        "motor_deadzone": TRUTH["deadzone"],
        "motor_torque_constant": TRUTH["torque_constant"],
        "arm_friction_friction": TRUTH["friction"],
        "arm_viscous_damping": [round(b + kv, 9) for b in TRUTH["damping"]],
        "pendulum_joint_damping": [TRUTH["pendulum_damping"]],
    }


def main() -> None:
    spec = mujoco.MjSpec.from_file("furuta.xml")
    spec.joint("pendulum_joint").damping[0] = TRUTH["pendulum_damping"]
    model = spec.compile()
    for name, (duration, seed) in RUNS.items():
        with open(f"{name}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time_ms", "ctrl.motor", *COUNTS])
            w.writerows(capture(model, duration, seed))
    with open("truth.yaml", "w") as f:
        f.write("# The true values of make_recording.py, named as in experiment.yaml.\n")
        yaml.safe_dump(truth_in_experiment_terms(), f, sort_keys=False)


if __name__ == "__main__":
    main()
