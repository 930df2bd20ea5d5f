"""The ``mjsysid`` subcommands, one module per command.

Every command module follows one convention, so that :mod:`mjsysid.app.cli` can assemble the
top parser from a list of modules and nothing else:

- ``NAME: str``: the subcommand as typed (``"fit"``).
- ``HELP: str``: one line, shown in ``mjsysid --help``.
- ``def add_arguments(parser: argparse.ArgumentParser) -> None``: adds the command's
  positional arguments and flags to its subparser; it may also set ``parser.description``
  (the longer text of ``mjsysid NAME --help``).
- ``def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int``: runs the command
  and returns its exit status (:data:`~mjsysid.app.commands.common.EXIT_OK`, ...). Results
  for the user go to ``out``, progress and warnings to ``err``. It may raise ``ValueError``,
  ``KeyError``, ``OSError``, ``TypeError`` or ``RolloutDivergedError`` with a message for the
  user: the command line prints ``error: <message>`` and exits with status 1.

To add a command, write such a module here and add it to ``COMMANDS`` in
:mod:`mjsysid.app.cli` (the order there is the order of ``mjsysid --help``). Shared pieces
(exit codes, the report step) live in :mod:`mjsysid.app.commands.common`. Heavy imports
(MuJoCo, the optimizers, the report) belong inside ``run`` or its helpers, so that
``mjsysid --help`` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Protocol, TextIO

__all__ = ["Command"]


class Command(Protocol):
    """The form of a command module (a module satisfies it by its module-level names)."""

    NAME: str
    HELP: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Adds the command's arguments to its subparser."""

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Runs the command; returns its exit status."""
