"""How run1.csv was made: the "true" motor of experiment.yaml driven by a multisine duty
cycle, its encoder (1320 counts per turn) logged every 20 ms with the time in milliseconds,
as the hobby firmware sends it. Run from this folder: python make_recording.py"""

import csv

import mujoco
import numpy as np

import mjsysid as ms
from mjsysid.data.excitation import multisine

DEADBAND = [0.14, 0.08]  # duty cycle the driver swallows (forward, reverse)
GAIN = [1.0, 0.85]  # reverse is weaker
FILTER_TAU = 0.03  # s, the winding's lag
KV = 0.003  # N·m·s/rad, back-EMF damping (the shaft's own damping stays the model's 0.002)


def main() -> None:
    spec = mujoco.MjSpec.from_file("dcmotor.xml")
    model = spec.compile()
    truth = ms.ParameterDict(
        [
            ms.make_parameter("actuator_filter_tau", model, "motor"),
            ms.make_parameter("actuator_kv", model, "motor"),
        ]
    )
    truth.update_from_vector([FILTER_TAU, KV])
    true_model = ms.apply_param_modifiers(truth, spec)
    dt, n, every = float(model.opt.timestep), 10_000, 10  # 20 s, logged and commanded at 50 Hz
    duty = 0.8 * multisine(n // every, 1, every * dt, amplitude=1.0, f0=0.1, f1=3.0, seed=7)
    duty = np.repeat(duty, every, axis=0)  # the firmware holds each duty cycle for 20 ms
    commands = ms.ParameterDict(
        [
            ms.Parameter("dz", DEADBAND, [0, 0], [1, 1]),
            ms.Parameter("g", GAIN, [0, 0], [2, 2]),
        ]
    )
    driver = ms.ControlTransform().deadband("motor", "dz").gain("motor", "g")
    x0 = ms.create_initial_state(model)
    (traj,) = ms.sysid_rollout(true_model, None, driver.apply(commands, duty, model), x0)
    count = 2 * np.pi / 1320
    with open("run1.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time_ms", "ctrl.motor", "encoder"])
        for k in range(0, n, every):
            angle = np.round(traj.sensordata[k, 0] / count) * count
            w.writerow([f"{1000 * traj.times[k]:.0f}", f"{duty[k, 0]:.4f}", f"{angle:.6f}"])


if __name__ == "__main__":
    main()
