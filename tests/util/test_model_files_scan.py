"""The scan for the files a model reads: linear in the file size, and XML-exact where it matters."""

from __future__ import annotations

import time
from pathlib import Path

import mujoco

from mjsysid.util.model_files import model_files

BOX = "<geom type='box' size='.1 .1 .1'/>"


def _names(files: list[Path], root: Path) -> list[str]:
    return [f.relative_to(root.resolve()).as_posix() for f in files]


def test_tags_in_comments_and_cdata_are_not_read_and_entities_are(tmp_path):
    for name in ("a&b.stl", "real.stl", "ghost.stl", "cdata.stl", "q>q.png", "up.png", "inc.xml"):
        (tmp_path / "assets" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "assets" / name).write_text("x")
    (tmp_path / "inc.xml").write_text(
        "<mujocoinclude><asset><mesh name='inc' file=\"real.stl\"/></asset></mujocoinclude>"
    )
    (tmp_path / "top.xml").write_text(
        "\ufeff<?xml version='1.0'?>\n"
        "<!DOCTYPE mujoco>\n"
        "<mujoco>\n"
        "  <!-- <include file='ghost.xml'/> <mesh file='ghost.stl'/> -->\n"
        "  <compiler\n    meshdir=\"assets\" texturedir = 'assets'/>\n"
        "  <include file='inc.xml'/>\n"
        "  <asset>\n"
        "    <mesh name='amp' file='a&amp;b.stl' vertex='0 0 0 1 0 0 0 1 0 0 0 1'/>\n"
        "    <texture name='t' type='cube' fileup=\"up.png\" file='q&gt;q.png'/>\n"
        "    <![CDATA[ <mesh file='cdata.stl'/> ]]>\n"
        "  </asset>\n"
        "</mujoco>\n",
        encoding="utf-8",
    )
    got = _names(model_files(tmp_path / "top.xml"), tmp_path)
    assert got == [
        "top.xml",
        "inc.xml",
        "assets/a&b.stl",
        "assets/q>q.png",
        "assets/up.png",
        "assets/real.stl",
    ]


def test_urdf_meshes_and_a_foreign_include(tmp_path):
    (tmp_path / "m.stl").write_bytes(b"\x00\x01binary")
    (tmp_path / "r.urdf").write_text(
        "<robot name='r'><link name='a'><visual><geometry><mesh filename='m.stl'/>"
        "</geometry></visual></link></robot>"
    )
    assert _names(model_files(tmp_path / "r.urdf"), tmp_path) == ["r.urdf", "m.stl"]


def _model_with_inline_mesh(path: Path, megabytes: float) -> Path:
    """A valid MJCF whose mesh is given inline: one attribute of ``megabytes`` MB."""
    corners = "0 0 0 1 0 0 0 1 0 0 0 1 1 1 1 "  # a tetrahedron ...
    filler = "0.5 0.5 0.5 " * int(megabytes * 1e6 / 12)  # ... and points inside it
    with path.open("w") as f:
        f.write("<mujoco><compiler meshdir='meshes'/><asset><mesh name='m' vertex='")
        f.write(corners)
        f.write(filler)
        f.write(
            f"'/></asset><worldbody><body><freejoint/>{BOX}"
            "<geom type='mesh' mesh='m'/></body></worldbody></mujoco>"
        )
    return path


def test_a_huge_token_is_scanned_in_linear_time(tmp_path):
    """ElementTree took ~10 s on a 32 MB attribute (quadratic: expat rescans the unfinished
    token at every chunk); the scan takes a fraction of a second."""
    small = _model_with_inline_mesh(tmp_path / "small.xml", 2)
    mujoco.MjModel.from_xml_path(str(small))  # a valid model: MuJoCo loads it
    big = _model_with_inline_mesh(tmp_path / "big.xml", 32)
    t0 = time.perf_counter()
    assert model_files(big) == [big.resolve()]
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0, f"{elapsed:.2f} s for a 32 MB model"
