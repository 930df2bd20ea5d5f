"""``mjsysid device``: a MuJoCo model served as a serial device on a pseudo-terminal."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TextIO

import mujoco

from mjsysid.lab.capture.device import load_device
from mjsysid.lab.simdevice import SimOptions, SimulatedDevice
from mjsysid.util.limits import check_positive

NAME = "device"
HELP = "simulate a serial device (rehearse a capture without hardware)"


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


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Serves until Ctrl-C (or ``--duration``); prints the port name first."""
    if args.duration is not None:
        check_positive("max_duration_s", args.duration, "--duration")
    device = load_device(args.device)
    path = args.model or device.model
    if path is None:
        raise ValueError(f"{device.source}: no model: give model: in the file or --model")
    model = mujoco.MjModel.from_xml_path(str(path))
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
