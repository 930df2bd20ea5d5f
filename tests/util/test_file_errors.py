"""Refused files are described, never echoed; a failed write names its file."""

from __future__ import annotations

import errno
import re
import uuid
from pathlib import Path

import pytest

import mjsysid
from mjsysid.app.cli import main
from mjsysid.util import files
from mjsysid.util.files import atomic_write_text, read_yaml

SECRET = "s3cr3t-" + uuid.uuid4().hex[:8]


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# a system file, a YAML syntax error, a binary, a list: each refused without its contents
REFUSED_FILES_BAD_INPUTS = [
    ("passwd", f"root:x:0:0:{SECRET}:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin\n", "plain text"),
    ("syntax", f"password: {SECRET}: x\nother: 1\n", r"not valid YAML at line 1, column"),
    ("tab", f"key:\n\t- {SECRET}\n", r"not valid YAML at line 2, column 1"),
    ("list", f"- {SECRET}\n- two\n", r"a list of 2 items"),
    ("binary", b"\x89PNG\r\n\x1a\n" + SECRET.encode() + b"\xff\xfe", r"must be a UTF-8 text file"),
    ("nested", "a: " + "[" * 3000 + "]" * 3000 + f"\n# {SECRET}\n", r"nested at most"),
    ("flow", "{" + f"{SECRET}: [1, 2" + "\n", r"not valid YAML at line 2"),
]


@pytest.mark.parametrize(
    ("name", "content", "match"),
    REFUSED_FILES_BAD_INPUTS,
    ids=[c[0] for c in REFUSED_FILES_BAD_INPUTS],
)
@pytest.mark.parametrize("command", ["check", "audit", "fit", "capture"])
def test_refused_files_are_never_echoed(tmp_path, capsys, name, content, match, command):
    path = tmp_path / f"{name}.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    argv = [command, str(path)]
    if command == "fit":
        argv += ["--out", str(tmp_path / "res")]
    if command == "capture":
        argv += [str(tmp_path / "run.csv")]
    code, out, err = _run(argv, capsys)
    assert code == (2 if command == "check" else 1)  # (check: 2 for errors, 1 for warnings)
    assert SECRET not in out + err
    assert f"error: {str(path)!r}" in err or f"error: {path} " in err
    assert "Traceback" not in err
    assert re.search(match, err), err


def test_read_yaml_keeps_mappings_and_empty_files(tmp_path):
    (tmp_path / "a.yaml").write_text("a: 1\nb: [1, 2]\n")
    assert read_yaml(tmp_path / "a.yaml") == {"a": 1, "b": [1, 2]}
    (tmp_path / "empty.yaml").write_text("")
    assert read_yaml(tmp_path / "empty.yaml") is None


def test_a_full_device_names_the_file(tmp_path):
    """``/dev/full`` answers every write with ENOSPC: the real error of a full disk."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "wb") as f, pytest.raises(OSError) as info:
        files.write_synced(f, b"x" * 10_000, "/dev/full")
    assert info.value.errno == errno.ENOSPC
    assert str(info.value) == "[Errno 28] cannot write '/dev/full': No space left on device"


def test_a_small_tmpfs_names_the_file_and_leaves_no_temporary(small_tmpfs):
    target = small_tmpfs / "result.yaml"
    with pytest.raises(OSError) as info:
        atomic_write_text(target, "x" * 200_000)
    assert info.value.errno == errno.ENOSPC
    assert f"cannot write {str(target)!r}: No space left on device" in str(info.value)
    assert list(small_tmpfs.iterdir()) == []  # the temporary file is removed


def test_simulate_on_a_small_tmpfs_says_which_file(small_tmpfs, capsys):
    out_file = small_tmpfs / "run.csv"
    model = Path(mjsysid.__file__).parent / "examples" / "dcmotor" / "dcmotor.xml"
    code, _, err = _run(
        ["simulate", str(model), "--out", str(out_file), "--duration", "20"], capsys
    )
    assert code == 1
    assert f"cannot write {str(out_file)!r}: No space left on device" in err
