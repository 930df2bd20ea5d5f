"""``mjsysid examples``: list the bundled examples, or copy one into a folder of your own."""

from __future__ import annotations

import argparse
import re
import shutil
import textwrap
from pathlib import Path
from typing import TextIO

from mjsysid.app.commands.common import EXIT_OK, describe

NAME = "examples"
HELP = "list the bundled examples, or copy one into a folder of your own (--copy)"

_WIDTH = 88
_INDENT = 16
_SENTENCE = re.compile(r"^(.*?[.!?])(?:\s|$)", re.DOTALL)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--copy NAME DIR``."""
    describe(
        parser,
        "List the examples shipped with mjsysid (each is fitted with 'mjsysid fit "
        "example:NAME'), or copy one's files (experiment, model, recordings, device "
        "description) into a folder of your own to change them and write beside them.",
    )
    parser.add_argument(
        "--copy",
        nargs=2,
        metavar=("NAME", "DIR"),
        help="copy example NAME into the new (or empty) folder DIR",
    )


def description(experiment: Path) -> str:
    """The first sentence of the comment the experiment file opens with (whole, however
    many lines it takes)."""
    lines = []
    for line in experiment.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(lines)
    m = _SENTENCE.match(text)
    return m.group(1) if m else text


def copy_example(name: str, folder: Path) -> Path:
    """Copies example ``name``'s files into ``folder`` (created; it must be new or empty).

    Raises:
      ValueError: No such example (the names are listed) or ``folder`` is not empty.
    """
    from mjsysid.app.experiment import bundled_examples

    examples = bundled_examples()
    if name not in examples:
        raise ValueError(f"--copy NAME must be one of {sorted(examples)}, got {name!r}")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValueError(f"--copy DIR must be a new or empty folder, got {str(folder)!r}")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(examples[name].parent, folder, ignore=ignore, dirs_exist_ok=True)
    return folder / "experiment.yaml"


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Prints each example's name, its description and how to fit it; or copies one."""
    from mjsysid.app.experiment import bundled_examples

    if args.copy:
        name, folder = args.copy
        experiment = copy_example(name, Path(folder))
        print(f"copied example:{name} to {folder}; fit it with: mjsysid fit {experiment}", file=out)
        return EXIT_OK
    for name, path in bundled_examples().items():
        text = f"{description(path)} (mjsysid fit example:{name})"
        lines = textwrap.wrap(text, _WIDTH - _INDENT) or [""]
        print(f"{name:<{_INDENT - 1}} {lines[0]}", file=out)
        for line in lines[1:]:
            print(" " * _INDENT + line, file=out)
    return EXIT_OK
