"""A model with meshes, textures, a height field and an include: its results folder loads
where it is written and after it is moved (``--assets copy``), or from anywhere with the
source assets in place (``--assets absolute``)."""

from __future__ import annotations

import io
import shutil
import struct
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import mujoco
import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.output.portable import PortableAssets, check_asset_mode, resolve_asset

_TET = "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"

_MODEL = """<mujoco model="pend">
  <compiler meshdir="assets" texturedir="textures"/>
  <option timestep="0.002"/>
  <include file="parts.xml"/>
  <asset><hfield name="ground" file="ground.png" size="1 1 0.1 0.1"/></asset>
  <worldbody>
    <geom type="hfield" hfield="ground" pos="0 0 -2" contype="0" conaffinity="0"/>
    <body name="pend">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
      <inertial pos="0 0 -0.5" mass="1" diaginertia="0.01 0.01 0.01"/>
      <geom type="mesh" mesh="tet" material="skin" contype="0" conaffinity="0" mass="0"/>
    </body>
  </worldbody>
  <actuator><motor name="torque" joint="hinge" ctrlrange="-2 2"/></actuator>
  <sensor><jointpos name="angle" joint="hinge"/><jointvel name="rate" joint="hinge"/></sensor>
</mujoco>
"""
_PARTS = """<mujoco>
  <asset>
    <mesh name="tet" file="tet.obj"/>
    <texture name="checker" type="2d" file="checker.png"/>
    <material name="skin" texture="checker"/>
  </asset>
</mujoco>
"""
_EXPERIMENT = """schema_version: 1
name: pend
model: pend.xml
sequences:
  - {name: swing, file: swing.csv}
parameters:
  - {kind: body_mass, target: pend, min: 0.5, max: 2.0}
optimizer: {method: lm, max_iters: 3}
"""


def _png(width: int, height: int) -> bytes:
    """A grey-level checker PNG, written with the standard library."""
    rows = b"".join(
        b"\x00" + bytes(255 * ((x + y) % 2) for x in range(width)) for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's folder: the model, its include, a mesh, a texture, a height field, a
    recording of a heavier pendulum (1.3 kg) and the experiment file."""
    folder = tmp_path / "project"
    (folder / "assets").mkdir(parents=True)
    (folder / "textures").mkdir()
    (folder / "pend.xml").write_text(_MODEL)
    (folder / "parts.xml").write_text(_PARTS)
    (folder / "assets" / "tet.obj").write_text(_TET)
    (folder / "assets" / "ground.png").write_bytes(_png(8, 8))
    (folder / "textures" / "checker.png").write_bytes(_png(4, 4))
    (folder / "experiment.yaml").write_text(_EXPERIMENT)
    argv = ["simulate", str(folder / "pend.xml"), "--out", str(folder / "swing.csv")]
    argv += ["--duration", "0.6", "--set", "body_mass:pend=1.3", "--signal", "multisine"]
    err = io.StringIO()
    assert main(argv, stdout=io.StringIO(), stderr=err) == 0, err.getvalue()
    return folder


def _fit(project: Path, out: Path, *extra: str) -> None:
    err = io.StringIO()
    argv = ["fit", str(project / "experiment.yaml"), "--out", str(out), "-q", "--no-report"]
    code = main([*argv, "--no-timing-check", *extra], stdout=io.StringIO(), stderr=err)
    assert code == 0, err.getvalue()


def test_the_results_folder_loads_after_it_is_moved(project, tmp_path):
    out = tmp_path / "results"
    _fit(project, out)
    for name in ("pend.xml", "pend.robot.xml"):
        model = mujoco.MjModel.from_xml_path(str(out / name))
        assert model.nmesh == 1 and model.ntex == 1 and model.nhfield == 1
    assert sorted(p.name for p in (out / "assets").iterdir()) == [
        "checker.png",
        "ground.png",
        "tet.obj",
    ]
    mass = mujoco.MjModel.from_xml_path(str(out / "pend.xml")).body("pend").mass[0]
    assert mass != pytest.approx(1.0, abs=1e-3)  # the identified value, not the nominal
    moved = shutil.move(str(out), str(tmp_path / "elsewhere" / "kept"))
    shutil.rmtree(project / "assets")  # the source assets are gone too
    shutil.rmtree(project / "textures")
    model = mujoco.MjModel.from_xml_path(str(Path(moved) / "pend.xml"))
    assert model.body("pend").mass[0] == pytest.approx(mass, rel=1e-12)
    assert model.nmesh == 1
    listed = yaml.safe_load((Path(moved) / "result.yaml").read_text())["files"]
    assert "assets/tet.obj" in listed


def test_evaluate_reads_the_moved_folder(project, tmp_path):
    out = tmp_path / "results"
    _fit(project, out)
    moved = shutil.move(str(out), str(tmp_path / "moved"))
    err, stdout = io.StringIO(), io.StringIO()
    argv = ["evaluate", str(project / "experiment.yaml"), f"fit={moved}", "--starts", "2", "-q"]
    assert main(argv, stdout=stdout, stderr=err) == 0, err.getvalue()
    assert "fit" in stdout.getvalue()


def test_absolute_paths_name_the_source_files(project, tmp_path):
    out = tmp_path / "results"
    _fit(project, out, "--assets", "absolute")
    assert not (out / "assets").exists()
    mesh = ET.parse(out / "pend.xml").find("asset/mesh")
    assert mesh is not None
    assert mesh.get("file") == str((project / "assets" / "tet.obj").resolve())
    moved = shutil.move(str(out), str(tmp_path / "moved"))
    assert mujoco.MjModel.from_xml_path(str(Path(moved) / "pend.xml")).nmesh == 1


def test_resolve_asset_follows_mujoco(project):
    spec = mujoco.MjSpec.from_file(str(project / "pend.xml"))
    assert resolve_asset(spec, "tet.obj") == project / "assets" / "tet.obj"
    assert resolve_asset(spec, "checker.png", texture=True) == project / "textures" / "checker.png"
    spec.strippath = True
    assert resolve_asset(spec, "x/y/tet.obj") == project / "assets" / "tet.obj"


def test_two_assets_of_one_name_keep_both(tmp_path):
    a, b = tmp_path / "a" / "m.obj", tmp_path / "b" / "m.obj"
    for path, scale in ((a, "1"), (b, "2")):
        path.parent.mkdir()
        path.write_text(_TET.replace("0.1", scale))
    spec = mujoco.MjSpec()
    for path in (a, b, a):
        spec.add_mesh(file=str(path))
    portable = PortableAssets("copy")
    out = portable.spec(spec)
    assert [m.file for m in out.meshes] == ["assets/m.obj", "assets/m_2.obj", "assets/m.obj"]
    assert sorted(portable.files) == ["assets/m.obj", "assets/m_2.obj"]


def test_a_missing_asset_and_a_bad_mode_are_named(tmp_path):
    spec = mujoco.MjSpec()
    spec.add_mesh(file=str(tmp_path / "gone.obj"))
    with pytest.raises(FileNotFoundError, match=r"gone\.obj.*assets='absolute'"):
        PortableAssets("copy").spec(spec)
    with pytest.raises(
        ValueError, match=r"assets must be one of \['copy', 'absolute'\], got 'abs'"
    ):
        check_asset_mode("abs")


def test_the_urdf_meshes_are_copied(tmp_path):
    (tmp_path / "meshes").mkdir()
    (tmp_path / "meshes" / "link.stl").write_bytes(b"solid x\nendsolid x\n")
    urdf = tmp_path / "r.urdf"
    urdf.write_text(
        '<robot name="r"><link name="a"><visual><geometry>'
        '<mesh filename="package://r/meshes/link.stl"/></geometry></visual></link>'
        '<mujoco><compiler meshdir="meshes"/></mujoco></robot>'
    )
    root = ET.parse(urdf).getroot()
    portable = PortableAssets("copy")
    portable.urdf(root, urdf)
    mesh = root.find("link/visual/geometry/mesh")
    assert mesh is not None and mesh.get("filename") == "assets/link.stl"
    compiler = root.find("mujoco/compiler")
    assert compiler is not None and compiler.attrib == {"strippath": "false"}
    assert list(portable.files) == ["assets/link.stl"]


def test_a_rerun_with_absolute_paths_removes_the_old_copies(project, tmp_path):
    out = tmp_path / "results"
    _fit(project, out)
    assert (out / "assets" / "tet.obj").is_file()
    _fit(project, out, "--assets", "absolute")
    assert not (out / "assets").exists()


def test_the_experiment_file_chooses_absolute_paths(project, tmp_path):
    path = project / "experiment.yaml"
    path.write_text(path.read_text() + "export: {assets: absolute}\n")
    out = tmp_path / "results"
    _fit(project, out)
    assert not (out / "assets").exists()
    _fit(project, out, "--assets", "copy")  # the command line overrides the file
    assert (out / "assets" / "tet.obj").is_file()
    path.write_text(path.read_text().replace("absolute}", "absolut}"))
    err = io.StringIO()
    assert main(["fit", str(path), "--out", str(out)], stdout=io.StringIO(), stderr=err) == 1
    assert "export.assets" in err.getvalue() and "'copy'" in err.getvalue()
