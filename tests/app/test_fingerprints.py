"""``mjsysid report`` notices a change in any file the model reads, not only the top files."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from mjsysid.app.cli import main
from mjsysid.app.experiment import bundled_examples
from mjsysid.util.model_files import model_files

HFIELD = np.array([2, 2], np.int32).tobytes() + np.array([0, 0.1, 0.2, 0.3], np.float32).tobytes()


def _box_with_includes(tmp_path: Path) -> Path:
    """The box example with its sensors in an included file (which includes its actuator),
    and a height field in the asset folder named by <compiler>."""
    src = Path(bundled_examples()["box"]).parent
    folder = tmp_path / "box"
    shutil.copytree(src, folder)
    xml = (folder / "box.xml").read_text()
    start, end = xml.index("  <actuator>"), xml.index("</mujoco>")
    (folder / "parts").mkdir()
    (folder / "parts" / "sensors.xml").write_text(
        "<mujoco>\n"
        + xml[start:end].split("  <sensor>")[1].join(["  <sensor>", ""])
        + '  <include file="parts/actuator.xml"/>\n</mujoco>\n'
    )
    (folder / "parts" / "actuator.xml").write_text(
        "<mujoco>\n" + xml[start:end].split("  <sensor>")[0] + "</mujoco>\n"
    )
    (folder / "terrain").mkdir()
    (folder / "terrain" / "bumps.bin").write_bytes(HFIELD)
    assets = (
        '  <compiler meshdir="terrain" texturedir="terrain"/>\n'
        '  <asset><hfield name="bumps" file="bumps.bin" size="1 1 0.01 0.1"/></asset>\n'
    )
    body = xml[:start].replace(
        '  <option timestep="0.002"/>\n', '  <option timestep="0.002"/>\n' + assets
    )
    (folder / "box.xml").write_text(body + '  <include file="parts/sensors.xml"/>\n</mujoco>\n')
    return folder / "experiment.yaml"


def test_model_files_lists_includes_and_assets(tmp_path: Path):
    exp = _box_with_includes(tmp_path)
    names = [
        f.relative_to(exp.parent.resolve()).as_posix() for f in model_files(exp.parent / "box.xml")
    ]
    assert names == ["box.xml", "parts/sensors.xml", "parts/actuator.xml", "terrain/bumps.bin"]


@pytest.mark.parametrize("changed", ["parts/actuator.xml", "terrain/bumps.bin"])
def test_report_refuses_after_an_included_file_changed(tmp_path: Path, capsys, changed: str):
    exp = _box_with_includes(tmp_path)
    out = tmp_path / "res"
    assert main(["fit", str(exp), "--out", str(out), "-q", "--no-report"]) == 0
    path = exp.parent / changed
    if path.suffix == ".xml":
        path.write_text(path.read_text().replace("-20 20", "-10 10"))
    else:
        path.write_bytes(HFIELD[:-4] + np.array([0.4], np.float32).tobytes())
    capsys.readouterr()
    assert main(["report", str(out)]) == 1
    err = capsys.readouterr().err
    assert "the inputs of this fit changed since it ran" in err
    assert changed.split("/")[-1] in err
