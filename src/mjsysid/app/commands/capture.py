"""``mjsysid capture``: record an identification run from a microcontroller over serial."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TextIO

from mjsysid.data.capture.device import load_device
from mjsysid.data.capture.serialport import open_port
from mjsysid.data.capture.session import CaptureSession, EndReason

NAME = "capture"
HELP = "capture a recording from a serial device (needs pyserial: the capture extra)"

EXIT_OK, EXIT_ENDED_EARLY, EXIT_INTERRUPTED = 0, 1, 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("device", type=Path, help="device description (YAML)")
    parser.add_argument("recording", type=Path, help="output recording (.npz or .csv)")
    parser.add_argument("--port", help="serial port (default: the description's port)")
    parser.add_argument("--duration", type=float, help="excitation length in s")
    parser.add_argument("--no-reset", action="store_true", help="skip the reset phase")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Captures; 0 when it completed, 1 when it ended early (limit, watchdog, reset, port),
    130 when interrupted. The recording keeps what was captured in every case."""
    device = load_device(args.device)
    if args.no_reset:
        device = dataclasses.replace(device, reset=None)
    if args.duration is not None and not args.duration > 0:
        raise ValueError(f"--duration must be > 0 s, got {args.duration}")
    try:
        port = open_port(device, args.port)
    except ImportError as e:  # pyserial missing: the message says what to install
        print(f"error: {e}", file=err)
        return EXIT_ENDED_EARLY
    try:
        result = CaptureSession(device, port, duration=args.duration).run(args.recording)
    finally:
        port.close()
    where = result.recording if result.recording is not None else "no recording (< 2 rows)"
    print(f"{result.rows} rows: {where}; summary: {result.sidecar}", file=out)
    if result.reason is EndReason.COMPLETED:
        return EXIT_OK
    stop = "stop sent" if result.stop_sent else "THE STOP COMMAND COULD NOT BE SENT"
    print(f"capture ended early ({result.reason.value}): {result.message} [{stop}]", file=err)
    return EXIT_INTERRUPTED if result.reason is EndReason.INTERRUPTED else EXIT_ENDED_EARLY
