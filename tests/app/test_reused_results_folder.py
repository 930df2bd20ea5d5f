"""A results folder used again: the new run removes the per-model files of the earlier one it
did not write again (they described another model), and nothing that is not its own."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import yaml

import mjsysid
from mjsysid.app.cli import main

BOX = Path(mjsysid.__file__).parent / "examples" / "box"


def _box(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(BOX, folder)
    exp = yaml.safe_load((folder / "experiment.yaml").read_text())
    exp["name"] = name
    (folder / "experiment.yaml").write_text(yaml.safe_dump(exp))
    return folder / "experiment.yaml"


def _fit(exp: Path, out: Path) -> str:
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["fit", str(exp), "--out", str(out), "-q", "--no-report"]
    assert main(argv, stdout=stdout, stderr=stderr) == 0, stderr.getvalue()
    return stderr.getvalue()


def test_a_reused_folder_keeps_no_model_of_the_earlier_run(tmp_path):
    out = tmp_path / "res"
    _fit(_box(tmp_path, "first"), out)
    assert (out / "first.xml").is_file()
    (out / "notes.txt").write_text("mine")  # not the run's: stays
    (out / "report.html").write_text("<html>the first fit</html>")  # an earlier report
    (out / "report_assets").mkdir()
    (out / "report_assets" / "plot.png").write_bytes(b"png")
    err = _fit(_box(tmp_path, "second"), out)
    assert (out / "second.xml").is_file()
    assert not (out / "first.xml").exists()  # was kept: 'evaluate res' could pick it
    assert not (out / "report.html").exists() and not (out / "report_assets").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert "removed what an earlier run left" in err and "first.xml" in err
    summary = yaml.safe_load((out / "result.yaml").read_text())
    assert summary["models"] == {"second": "second.xml"}
    assert set(summary["files"]) <= {p.name for p in out.iterdir()}


def test_a_linked_stale_model_is_unlinked_not_followed(tmp_path):
    out = tmp_path / "res"
    _fit(_box(tmp_path, "first"), out)
    elsewhere = tmp_path / "elsewhere.xml"
    (out / "first.xml").rename(elsewhere)
    (out / "first.xml").symlink_to(elsewhere)
    _fit(_box(tmp_path, "second"), out)
    assert not (out / "first.xml").is_symlink() and elsewhere.is_file()


def test_the_same_experiment_again_removes_nothing(tmp_path):
    out = tmp_path / "res"
    exp = _box(tmp_path, "first")
    _fit(exp, out)
    err = _fit(exp, out)
    assert "removed what an earlier run left" not in err
    assert (out / "first.xml").is_file() and (out / "robot.yaml").is_file()
