"""``mjsysid schema``: the JSON Schema (draft 2020-12) of experiment files, for editors that
complete and check YAML against a schema (see docs/experiment-files.md)."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from mjsysid.app.commands.common import EXIT_OK

NAME = "schema"
HELP = "print (or write) the JSON Schema of experiment files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out FILE``."""
    parser.description = (
        "The JSON Schema (draft 2020-12) of experiment files: point an editor at it for "
        "completion and checks as you type, e.g. '# yaml-language-server: $schema=FILE' on "
        "the first line of the file (VS Code's YAML extension)."
    )
    parser.add_argument("-o", "--out", metavar="FILE", help="write it to FILE (default: print it)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Prints the schema, or writes it atomically to ``--out``."""
    from mjsysid.app.experiment.schema import json_schema
    from mjsysid.util.files import atomic_write_text

    text = json.dumps(json_schema(), indent=2) + "\n"
    if args.out is None:
        out.write(text)
    else:
        path = atomic_write_text(args.out, text)
        print(f"wrote {path}", file=err)
    return EXIT_OK
