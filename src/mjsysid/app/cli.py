"""The ``mjsysid`` command: a thin layer over the library.

Subcommands: ``fit`` an experiment file, ``report`` a results folder, ``evaluate`` models on
recorded data (one-step and open-loop errors), ``simulate`` a synthetic
recording, ``examples`` to list the bundled examples, ``schema`` the JSON Schema of
experiment files, ``demo`` for the cart-pole planning demo.
Each lives in its own module of :mod:`mjsysid.app.commands` (see there for the convention a
command module follows); this module assembles the parser from :data:`COMMANDS` and turns the
errors a command raises into ``error: ...`` and exit status 1. Every command runs within
:func:`~mjsysid.util.mujoco_log.mujoco_log_in`: MuJoCo's log never lands in the working
directory, and its messages are summarised on stderr instead of printed one by one.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TextIO

from mjsysid.app.commands import (
    Command,
    audit,
    capture,
    check,
    compare,
    demo,
    design,
    device,
    evaluate,
    examples,
    fit,
    report,
    schema,
    simulate,
)
from mjsysid.app.commands.common import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK
from mjsysid.sim.rollout import RolloutDivergedError
from mjsysid.util.mujoco_log import mujoco_log_in

__all__ = ["COMMANDS", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "build_parser", "main"]

#: The command modules, in the order ``mjsysid --help`` lists them.
COMMANDS: tuple[Command, ...] = (
    fit,
    check,
    audit,
    design,
    report,
    compare,
    evaluate,
    simulate,
    capture,
    device,
    examples,
    schema,
    demo,
)

#: What a command may raise for the user: printed as ``error: <message>``, exit status 1.
# ImportError: an optional extra is missing (its message names the pip command)
_USER_ERRORS = (ValueError, KeyError, OSError, TypeError, ImportError, RolloutDivergedError)


def build_parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    """The top parser with one subparser per command module (``args.command`` is its NAME)."""
    from mjsysid._version import __version__

    parser = argparse.ArgumentParser(
        prog="mjsysid", description="System identification for MuJoCo models."
    )
    parser.add_argument("--version", action="version", version=f"mjsysid {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in commands:
        command.add_arguments(sub.add_parser(command.NAME, help=command.HELP))
    return parser


def _error_message(e: BaseException) -> str:
    """The user-facing text of an error (a ``KeyError``'s key without the quotes)."""
    return e.args[0] if isinstance(e, KeyError) and e.args else str(e)


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Runs the command line; returns the exit status (0 ok, 1 error, 130 interrupted)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=err,
    )
    command = {c.NAME: c for c in COMMANDS}[args.command]
    try:
        with mujoco_log_in(None):  # MuJoCo's messages: never MUJOCO_LOG.TXT here, nor stdout
            return int(command.run(args, out, err))
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return EXIT_INTERRUPTED
    except _USER_ERRORS as e:
        print(f"error: {_error_message(e)}", file=err)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
