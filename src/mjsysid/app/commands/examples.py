"""``mjsysid examples``: list the bundled examples."""

from __future__ import annotations

import argparse
from typing import TextIO

from mjsysid.app.commands.common import EXIT_OK

NAME = "examples"
HELP = "list the bundled examples"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No arguments."""


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Prints each example's name, the first line of its file and how to fit it."""
    from mjsysid.app.experiment import bundled_examples

    for name, path in bundled_examples().items():
        first = path.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
        print(f"{name:<14} {first}   (mjsysid fit example:{name})", file=out)
    return EXIT_OK
