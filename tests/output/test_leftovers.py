"""What a run killed while saving leaves behind is cleaned by the next run in that folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from mjsysid.app.cli import main
from mjsysid.util.lock import LOCK_FILE

SRC = Path(__file__).resolve().parents[1] / "src"

# Takes the folder's lock, then dies by SIGKILL in the middle of saving: a temporary file of an
# atomic write and the report's private folder are on disk, nothing is renamed into place.
KILLED_SAVE = """
import os, signal, sys, tempfile
from pathlib import Path
from mjsysid.util.files import _write_temp
from mjsysid.util.lock import acquire

folder = Path(sys.argv[1])
acquire(folder)
_write_temp(folder / "params_x_0.yaml", b"half: [")
_write_temp(folder / "run.yaml", b"experiment: ")
report = Path(tempfile.mkdtemp(prefix=".report-", dir=folder))
(report / "report.html").write_bytes(b"<html>" * 100_000)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _litter(folder: Path) -> list[str]:
    return sorted(
        p.name for p in folder.iterdir() if p.name.endswith(".tmp") or p.name.startswith(".report-")
    )


def test_a_run_after_a_sigkill_during_saving_leaves_no_litter(tmp_path: Path, capsys):
    out = tmp_path / "res"
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_SAVE, str(out)],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    litter = _litter(out)
    assert len(litter) == 3, litter
    assert (out / LOCK_FILE).exists()  # the killed run's lock, now stale

    assert main(["fit", "example:box", "--out", str(out), "-q"]) == 0
    err = capsys.readouterr().err
    assert "took over the stale lock" in err
    assert "removed the leftovers of an interrupted save" in err
    assert _litter(out) == []
    assert not (out / LOCK_FILE).exists()
    assert (out / "result.yaml").is_file()


def test_a_clean_folder_gets_no_notes(tmp_path: Path, capsys):
    out = tmp_path / "res"
    assert main(["fit", "example:box", "--out", str(out), "-q", "--no-report"]) == 0
    err = capsys.readouterr().err
    assert "note:" not in err
    assert _litter(out) == [] and not (out / LOCK_FILE).exists()
