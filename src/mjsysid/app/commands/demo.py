"""``mjsysid demo``: the cart-pole demo (identification makes a planner succeed)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from mjsysid.app.commands.common import EXIT_OK, add_no_report, add_quiet, describe, results_folder

NAME = "demo"
HELP = "cart-pole: identification makes a planner succeed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's size, results folder and report switch."""
    describe(
        parser,
        (
            "A predictive-sampling planner with a wrong pole mass fails "
            "to swing up the real cart-pole; mjsysid identifies the mass "
            "from an excitation run and the planner succeeds again."
        ),
    )
    parser.add_argument("--quick", action="store_true", help="fewer starts and shorter episodes")
    parser.add_argument("-o", "--out", default="results/demo", help="results folder")
    add_no_report(parser)
    add_quiet(parser, "progress lines on stderr (models, episodes)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Runs :func:`mjsysid.lab.demo.run_demo`, printing its tables on ``out`` and its progress
    (a line per model and per planner episode) on ``err`` unless ``--quiet``."""
    from mjsysid.lab.demo import run_demo

    with results_folder(Path(args.out), err):
        run_demo(
            quick=args.quick,
            out=Path(args.out),
            stream=out,
            report=not args.no_report,
            progress=None if args.quiet else err,
        )
    return EXIT_OK
