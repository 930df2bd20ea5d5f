"""The command line for a newcomer: every command says what it does, examples copy out to a
folder of one's own and list whole descriptions, the install hints are true, and starting
the command line does not import Dask."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mjsysid.app.cli import COMMANDS, build_parser, main
from mjsysid.app.commands.examples import description
from mjsysid.app.experiment import bundled_examples

SRC = Path(__file__).resolve().parents[2] / "src"
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", [c.NAME for c in COMMANDS])
def test_every_command_has_a_help_description(name):
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    parser = sub.choices[name]
    text = parser.format_help()
    # usage, a blank line, then the description (argparse prints none without one)
    description_line = text.split("\n\n")[1].strip()
    assert parser.description and not description_line.startswith(
        ("positional arguments", "options")
    ), text
    assert len(parser.description) > 40


def test_examples_print_whole_descriptions():
    out = io.StringIO()
    assert main(["examples"], stdout=out, stderr=io.StringIO()) == 0
    text = " ".join(out.getvalue().split())
    for name, path in bundled_examples().items():
        assert description(path) in text
        assert f"(mjsysid fit example:{name})" in text
    assert "see make_recording.py)." in text  # the furuta sentence, to its end


def test_examples_copy_to_a_folder_of_ones_own(tmp_path):
    out = io.StringIO()
    target = tmp_path / "my-motor"
    assert main(["examples", "--copy", "dcmotor", str(target)], stdout=out) == 0
    assert sorted(p.name for p in target.iterdir()) >= ["dcmotor.xml", "device.yaml"]
    assert f"mjsysid fit {target / 'experiment.yaml'}" in out.getvalue()
    err = io.StringIO()
    assert main(["examples", "--copy", "dcmotor", str(target)], stderr=err) == 1
    assert "--copy DIR must be a new or empty folder" in err.getvalue()
    assert main(["examples", "--copy", "dcmotr", str(tmp_path / "x")], stderr=err) == 1
    assert "--copy NAME must be one of" in err.getvalue()


def test_no_hint_installs_mjsysid_from_a_registry():
    """mjsysid is not published: extras are installed from the checkout."""
    wrong = re.compile(r"pip\s+install\s+['\"]?mjsysid\[|^\s*['\"]?mjsysid\[\w+\]['\"]?`")
    found = [
        f"{path}:{n}"
        for root in (SRC, DOCS, SRC.parent / "README.md")
        for path in ([root] if root.is_file() else root.rglob("*"))
        if path.suffix in (".py", ".md", ".j2", ".yaml")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if wrong.search(line)
    ]
    assert found == []


def test_the_command_line_does_not_import_dask():
    """Dask is imported where a fit asks for it (executor:, --workers), not at every start:
    neither by the command line nor by loading an experiment file."""
    code = (
        "import sys, mjsysid.app.cli\n"
        "from mjsysid.app.experiment import load_experiment\n"
        "load_experiment('example:dcmotor')\n"
        "print(*(m in sys.modules for m in ('dask', 'distributed', 'mjsysid.fit.distributed')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]
