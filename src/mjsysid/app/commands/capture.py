"""``mjsysid capture``: record an identification run from a microcontroller over serial."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TextIO

from mjsysid.app.commands.common import describe
from mjsysid.lab.capture.device import load_device
from mjsysid.lab.capture.output import check_no_journal
from mjsysid.lab.capture.serialport import open_port
from mjsysid.lab.capture.session import CaptureResult, CaptureSession, EndReason, recover
from mjsysid.util.limits import check_limit, check_positive

NAME = "capture"
HELP = "capture a recording from a serial device (needs pyserial: the capture extra)"

EXIT_OK, EXIT_ENDED_EARLY, EXIT_INTERRUPTED = 0, 1, 130
"""Exit status: completed, ended early (a limit, the watchdog, the reset, the port), and
interrupted by SIGINT; another stop signal gives 128 + its number (SIGHUP 129, SIGTERM 143)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The device description, the recording and how the capture runs."""
    describe(
        parser,
        "Record an identification run from a microcontroller over a serial port: move it "
        "to its start (the reset phase), send the description's excitation one command per "
        "state line, stop it on every way out, and write a recording that 'mjsysid fit' "
        "reads, with a <stem>.capture.yaml summary. Rehearse it against 'mjsysid device'. "
        "Needs pyserial: pip install -e '.[capture]' in the mjsysid checkout.",
    )
    parser.add_argument("device", type=Path, help="device description (YAML)")
    parser.add_argument("recording", type=Path, help="output recording (.npz or .csv)")
    parser.add_argument("--port", help="serial port (default: the description's port)")
    parser.add_argument("--duration", type=float, help="excitation length in s")
    parser.add_argument("--no-reset", action="store_true", help="skip the reset phase")
    parser.add_argument(
        "--recover",
        action="store_true",
        help="finish RECORDING from the rows a killed capture left in <stem>.partial.csv "
        "(opens no port)",
    )


def _say(stream: TextIO, text: str) -> None:
    """Prints a line, if the terminal is still there: after SIGHUP (the terminal closed) a
    write fails, and the sidecar holds the same words."""
    try:
        print(text, file=stream, flush=True)
    except OSError:
        pass  # no terminal to tell; the files say it


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Captures; 0 when it completed, 1 when it ended early (limit, watchdog, reset, port),
    128 + the signal's number when a signal stopped it (130 for Ctrl-C). The recording keeps
    what was captured in every case; the stop command goes out first on every way out."""
    device = load_device(args.device)
    if args.recover:
        return _report(recover(device, args.recording), out, err)
    if args.no_reset:
        device = dataclasses.replace(device, reset=None)
    if args.duration is not None:
        check_positive("max_duration_s", args.duration, "--duration")
        check_limit("max_rows", args.duration * device.rate, "--duration x rate: rows")
    if args.recording.suffix.lower() not in (".npz", ".csv"):
        raise ValueError(f"recording must be a .npz or .csv file name, got {str(args.recording)!r}")
    check_no_journal(args.recording)  # before the port: nothing is sent
    try:
        port = open_port(device, args.port)
    except ImportError as e:  # pyserial missing: the message says what to install
        _say(err, f"error: {e}")
        return EXIT_ENDED_EARLY
    try:
        session = CaptureSession(
            device, port, duration=args.duration, reopen=lambda: open_port(device, args.port)
        )
        result = session.run(args.recording)
    finally:
        port.close()
    return _report(result, out, err)


def _report(result: CaptureResult, out: TextIO, err: TextIO) -> int:
    """Says how the capture went; returns the exit status."""
    where = result.recording if result.recording is not None else "no recording (< 2 rows)"
    dropped = f", {result.dropped} samples dropped" if result.dropped else ""
    _say(out, f"{result.rows} rows{dropped}: {where}; summary: {result.sidecar}")
    if result.reason is EndReason.KILLED:
        _say(err, f"recovered: {result.message}")
    elif result.reason is not EndReason.COMPLETED or result.signal is not None:
        stop = "stop sent" if result.stop_sent else "THE STOP COMMAND COULD NOT BE SENT"
        _say(err, f"capture ended early ({result.reason.value}): {result.message} [{stop}]")
    if result.stop_sent is False:
        _say(err, f"THE STOP COMMAND COULD NOT BE SENT: {result.stop_error}")
    if result.signal is not None:
        return 128 + int(result.signal)
    if result.reason in (EndReason.COMPLETED, EndReason.KILLED):
        return EXIT_OK
    return EXIT_INTERRUPTED if result.reason is EndReason.INTERRUPTED else EXIT_ENDED_EARLY
