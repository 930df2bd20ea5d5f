"""``mjsysid device``: a MuJoCo model served as a serial device on a pseudo-terminal.

``--set KIND:TARGET=VALUE`` (the syntax of ``mjsysid simulate --set``) makes the simulated
device differ from the nominal model, so that a capture rehearsal has something real to
identify: the device runs the changed "true" model, the experiment file fits the nominal.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TextIO

import mujoco

from mjsysid.app.commands.common import describe
from mjsysid.lab.capture.device import load_device
from mjsysid.lab.simdevice import SimOptions, SimulatedDevice
from mjsysid.lab.true_system import parse_set, true_system
from mjsysid.util.limits import check_positive

NAME = "device"
HELP = "simulate a serial device (rehearse a capture without hardware)"

_SET_HELP = (
    "simulate a device that differs from the model, e.g. actuator_kv:motor=0.004 "
    "(repeatable; the model parameters of 'mjsysid simulate --set', KIND:TARGET=VALUE or "
    "VALUE,VALUE,...): a capture then records this truth and a fit of the nominal model "
    "identifies it"
)


def _field_values(items: list[str], flag: str, zero: bool) -> dict[str, float]:
    """``{field: number}`` of ``FIELD=NUMBER`` items: finite, ``>= 0`` (``zero``) or ``> 0``."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise ValueError(f"{flag} must be FIELD=NUMBER, got {item!r}")
        if not (math.isfinite(number) and (number >= 0 if zero else number > 0)):
            bound = ">= 0" if zero else "> 0"
            raise ValueError(f"{flag} {name} must be a finite number {bound}, got {value!r}")
        out[name] = number
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The device description, the model, what differs from it, the readings' flaws."""
    describe(
        parser,
        "Serve a MuJoCo model in real time behind a pseudo-terminal that speaks the device "
        "description's serial protocol, so that 'mjsysid capture' can be rehearsed without "
        "the hardware. Prints the port name; stops on Ctrl-C or after --duration.",
    )
    parser.add_argument("device", type=Path, help="device description (YAML)")
    parser.add_argument("--model", type=Path, help="MJCF model (default: the description's)")
    parser.add_argument(
        "--noise",
        action="append",
        default=[],
        metavar="FIELD=STD",
        help="Gaussian noise on a field, in its units (repeatable)",
    )
    parser.add_argument(
        "--quantize",
        action="append",
        default=[],
        metavar="FIELD=STEP",
        help="quantize a field to multiples of STEP, in its units (repeatable)",
    )
    parser.add_argument("--seed", type=int, default=0, help="noise seed")
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    parser.add_argument("--lockstep", action="store_true", help="wait for each command")
    parser.add_argument("--set", action="append", metavar="KIND:TARGET=VALUE", help=_SET_HELP)


def true_model(path: Path, sets: list[str]) -> tuple[mujoco.MjModel, list[str]]:
    """The model the device simulates: the file at ``path`` with the ``--set`` values
    written in, and one line per change (``"actuator_kv:motor = 0.004 (nominal 0.002)"``).

    Raises:
      ValueError: A malformed ``--set``, an unknown kind or target (with the model's names),
        or a sensor or control effect (``sensor_*``, ``control_*``: the device reads the
        model's own signals; ``mjsysid simulate --set`` has them).
    """
    from mjsysid.params.apply import apply_param_modifiers

    items = parse_set(sets)  # (malformed items are reported before the model is loaded)
    spec = mujoco.MjSpec.from_file(str(path))
    model = spec.compile()
    system = true_system(items, spec, model)
    effects = [k for k, _, _ in system.effects] + list(system.command_values.keys())
    if effects:
        raise ValueError(
            f"--set: the simulated device changes model parameters only, got {effects}; "
            "sensor and control effects belong to 'mjsysid simulate --set'"
        )
    if not len(system.truth):
        return model, []
    changed = apply_param_modifiers(system.truth, spec)
    lines = []
    for s, p in zip(items, system.truth.values(), strict=True):
        value = ", ".join(f"{v:g}" for v in p.value)
        nominal = ", ".join(f"{v:g}" for v in p.nominal)
        lines.append(f"{s.kind}:{s.target} = {value} (the model's: {nominal})")
    return changed, lines


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Serves until Ctrl-C (or ``--duration``); prints the port name first."""
    if args.duration is not None:
        check_positive("max_duration_s", args.duration, "--duration")
    device = load_device(args.device)
    path = args.model or device.model
    if path is None:
        raise ValueError(f"{device.source}: no model: give model: in the file or --model")
    model, changes = true_model(Path(path), args.set or [])
    for line in changes:
        print(f"truth differs from the model: {line}", file=err)
    options = SimOptions(
        noise=_field_values(args.noise, "--noise", zero=True),
        quantize=_field_values(args.quantize, "--quantize", zero=False),
        seed=args.seed,
        lockstep=args.lockstep,
    )
    unknown = sorted((set(options.noise) | set(options.quantize)) - set(device.fields))
    if unknown:
        raise ValueError(f"--noise/--quantize name fields {unknown}; fields: {list(device.fields)}")
    sim = SimulatedDevice(device, model, options)
    print(f"{Path(path).name} at {device.rate:g} Hz on {sim.path} (Ctrl-C to stop)", file=out)
    out.flush()
    try:
        sim.serve(args.duration)
    except KeyboardInterrupt:
        print("stopped", file=err)
    finally:
        sim.stop()
    print(f"{len(sim.received)} lines received, {sim.stops} stop(s)", file=err)
    return 0
