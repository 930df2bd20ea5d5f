"""``mjsysid simulate``: make a synthetic recording from a model."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import numpy as np

from mjsysid.app.commands.common import EXIT_OK, describe
from mjsysid.util.errors import must_be
from mjsysid.util.limits import check_limit, check_positive

if TYPE_CHECKING:
    import mujoco

    from mjsysid.lab.true_system import SetValue, TrueSystem
    from mjsysid.sim.rollout import SystemTrajectory

NAME = "simulate"
HELP = "make a synthetic recording from a model"

_SET_HELP = (
    "simulate a different 'true' system, e.g. body_mass:pole=0.8 (repeatable; "
    "VALUE,VALUE,... for a parameter of several values); sensor_delay, sensor_gain and "
    "sensor_bias with a sensor pattern change the written sensor columns: a sensor "
    "reports gain * value(t - delay) + bias, e.g. sensor_delay:*_pos=0.01; "
    "control_deadband, control_gain (V or V_POS,V_NEG) and control_offset with an "
    "actuator pattern change what the actuators receive, in the order given (the "
    "recording keeps the commands; use --signal multisine or chirp to identify them), "
    "e.g. control_deadband:motor=0.14,0.08"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The model, the output file, the excitation and the 'true' system's changes."""
    describe(
        parser,
        (
            "Simulate MODEL under an excitation signal and write a "
            "recording (.npz or .csv) that 'mjsysid fit' can read."
        ),
    )
    parser.add_argument("model", help="MJCF or URDF file")
    parser.add_argument("-o", "--out", required=True, help="output recording (.npz or .csv)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds (default 5)")
    parser.add_argument(
        "--signal",
        default="prbs",
        choices=["prbs", "chirp", "multisine", "steps"],
        help="excitation signal (default prbs)",
    )
    parser.add_argument(
        "--amplitude",
        type=float,
        help="peak control (default: 80 %% of each actuator's ctrlrange, else 1)",
    )
    parser.add_argument(
        "--noise", type=float, default=0.0, help="std of Gaussian sensor noise (default 0)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (>= 0, default 0)")
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="log rate in Hz, as a microcontroller would: commands held and sensors read "
        "every 1/rate s (must divide the simulation rate; default: every timestep)",
    )
    parser.add_argument("--qpos", type=float, nargs="+", help="initial joint positions")
    parser.add_argument("--set", action="append", metavar="KIND:TARGET=VALUE", help=_SET_HELP)


def check_args(args: argparse.Namespace) -> None:
    """Rejects bad numbers before anything is loaded or simulated."""
    check_positive(
        "max_duration_s", args.duration, "--duration", expected="a finite number of seconds > 0"
    )
    if args.amplitude is not None and not (math.isfinite(args.amplitude) and args.amplitude > 0):
        raise ValueError(must_be("--amplitude", "a finite number > 0", args.amplitude))
    if not (math.isfinite(args.noise) and args.noise >= 0):
        raise ValueError(must_be("--noise", "a finite standard deviation >= 0", args.noise))
    if args.seed < 0:
        raise ValueError(must_be("--seed", "an integer >= 0", args.seed))
    if args.rate is not None:
        check_positive("max_rate_hz", args.rate, "--rate", expected="a finite rate in Hz > 0")
    if Path(args.out).suffix.lower() not in (".npz", ".csv"):
        raise ValueError(must_be("--out", "a .npz or .csv file name", args.out))
    if not Path(args.model).is_file():
        raise FileNotFoundError(f"model: no such file {str(args.model)!r}")


def num_steps(duration: float, dt: float) -> int:
    """Simulation steps of ``--duration`` at the model's timestep ``dt`` [s] (at least 2,
    at most the limit ``max_steps``)."""
    check_limit("max_steps", duration / dt, f"--duration {duration:g} s at timestep {dt:g} s")
    n = round(duration / dt)
    if n < 2:
        raise ValueError(
            must_be(
                "--duration",
                f"at least 2 timesteps of the model ({2 * dt:g} s at timestep {dt:g} s)",
                duration,
            )
        )
    return n


def log_every(rate: float | None, dt: float) -> int:
    """Simulation steps per logged sample for ``--rate`` (1 without one)."""
    if rate is None:
        return 1
    every = round(1.0 / (rate * dt))
    if every < 1 or abs(every * dt * rate - 1.0) > 1e-6:
        raise ValueError(
            must_be(
                "--rate",
                f"the simulation rate {1 / dt:g} Hz divided by a whole number (e.g. "
                f"{1 / dt:g}, {0.5 / dt:g}, {0.1 / dt:g} Hz)",
                rate,
            )
        )
    return every


def _commands(args: argparse.Namespace, model: mujoco.MjModel, n: int, every: int) -> np.ndarray:
    """The excitation, shape ``(n, nu)``: each logged command held until the next."""
    from mjsysid.data.excitation import make_excitation

    amp = np.ones(model.nu) * (args.amplitude if args.amplitude is not None else 1.0)
    if args.amplitude is None:
        limited = model.actuator_ctrllimited.astype(bool)
        half = 0.5 * (model.actuator_ctrlrange[:, 1] - model.actuator_ctrlrange[:, 0])
        amp[limited] = 0.8 * half[limited]
    n_log = -(-n // every)
    dt = model.opt.timestep
    ctrl_log = make_excitation(
        args.signal, n_log, model.nu, dt * every, amplitude=1.0, seed=args.seed
    )
    ctrl_log = ctrl_log * amp
    return np.repeat(ctrl_log, every, axis=0)[:n]


def _initial_state(args: argparse.Namespace, model: mujoco.MjModel) -> np.ndarray:
    """The initial state from ``--qpos`` (the model's default without it)."""
    from mjsysid.data.states import create_initial_state

    try:
        return create_initial_state(model, np.array(args.qpos, dtype=float) if args.qpos else None)
    except (KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        raise ValueError(f"--qpos: {msg}") from None


def _rollout(
    args: argparse.Namespace,
    true_model: mujoco.MjModel,
    applied: np.ndarray,
    x0: np.ndarray,
) -> SystemTrajectory:
    """Simulates the true model under the applied controls (a divergence is a user error)."""
    from mjsysid.sim.rollout import RolloutDivergedError, sysid_rollout

    try:
        return sysid_rollout(true_model, None, applied, x0)[0]
    except RolloutDivergedError as e:
        given = f" with --set {' '.join(args.set)}" if args.set else ""
        raise ValueError(
            f"the simulation of {str(args.model)!r}{given} diverged, nothing written: {e}"
        ) from None


def _report_delays(traj: SystemTrajectory, delays: dict[str, float], err: TextIO) -> None:
    """Says how many samples at either end repeat a reading because of a sensor delay."""
    for d in sorted(set(delays.values())):
        names = [k for k, v in delays.items() if v == d]
        held = int(np.count_nonzero(traj.times - d < traj.times[0]))
        held += int(np.count_nonzero(traj.times - d > traj.times[-1]))
        print(
            f"  {names} delayed by {d:g} s: {held} samples at the "
            f"{'start' if d > 0 else 'end'} repeat the {'first' if d > 0 else 'last'} reading "
            "(a fit whose delay bounds include the delay does not use them)",
            file=err,
        )


def _true_system(
    sets: list[SetValue], spec: mujoco.MjSpec, model: mujoco.MjModel, n: int
) -> TrueSystem:
    """The ``--set`` changes, the sensor effects' patterns and values checked on ``n`` steps."""
    from mjsysid.lab.true_system import true_system
    from mjsysid.sim.sensor_effects import apply_sensor_effects

    system = true_system(sets, spec, model)
    dt = model.opt.timestep
    try:  # the sensor effects' patterns and values, checked before simulating
        zeros = np.zeros((n, model.nsensordata))
        apply_sensor_effects(model, np.arange(n) * dt, zeros, system.effects)
    except ValueError as e:
        raise ValueError(f"--set {e}") from None
    return system


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Simulates the (changed) model under the excitation and writes the recording."""
    import mujoco

    from mjsysid.data.recording import write_recording
    from mjsysid.lab.true_system import parse_set
    from mjsysid.params.apply import apply_param_modifiers
    from mjsysid.sim.sensor_effects import apply_sensor_effects

    check_args(args)
    sets = parse_set(args.set or [])  # (malformed items are reported before loading the model)
    spec = mujoco.MjSpec.from_file(str(args.model))
    model = spec.compile()
    n = num_steps(args.duration, model.opt.timestep)
    system = _true_system(sets, spec, model, n)
    true_model = apply_param_modifiers(system.truth, spec) if len(system.truth) else model
    every = log_every(args.rate, model.opt.timestep)
    if -(-n // every) < 2:
        raise ValueError(
            must_be("--rate", f"at least 2 samples over --duration {args.duration:g} s", args.rate)
        )
    ctrl = _commands(args, model, n, every)
    x0 = _initial_state(args, model)
    applied = system.commands.apply(system.command_values, ctrl, model)  # what actuators get
    traj = _rollout(args, true_model, applied, x0)
    sens, delays = apply_sensor_effects(model, traj.times, traj.sensordata, system.effects)
    times, sens, ctrl = traj.times[::every], sens[::every], ctrl[::every]
    if args.noise:
        sens = sens + args.noise * np.random.default_rng(args.seed + 1).standard_normal(sens.shape)
    path = write_recording(
        args.out, model, times, ctrl, sens, initial_qpos=traj.qpos()[0], initial_qvel=traj.qvel()[0]
    )
    span = float(times[-1] - times[0])
    print(
        f"wrote {times.size} samples ({span:g} s, {args.signal}) of {model.nsensor} sensors and "
        f"{model.nu} controls to {path}",
        file=err,
    )
    _report_delays(traj, delays, err)
    return EXIT_OK
