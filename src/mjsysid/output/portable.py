"""Model files that load anywhere: the asset paths of an exported model.

A model names its asset files (meshes, height fields, skins, textures) relative to its own
folder, through ``<compiler meshdir texturedir assetdir>`` (``<include>`` files are merged
into the spec when it is read, so an exported model has none). Written unchanged into a
results folder, ``meshdir="assets"`` points at ``<results>/assets`` and the model no longer
loads. :class:`PortableAssets` rewrites those paths in one of two ways (``mode``):

- ``"copy"`` (the default): every asset file is copied into the results folder's
  :data:`~mjsysid.util.results_files.ASSETS_DIR` folder and named relative to the model
  file (``assets/tet.obj``), with ``meshdir``/``texturedir`` cleared and ``strippath`` off.
  The folder loads where it is and wherever it is moved or copied, with its own copy of the
  assets (a later edit of the source mesh does not change the identified model).
- ``"absolute"``: every asset is named by its absolute path (no copy). The model file loads
  from any folder of this machine, as long as the source assets stay where they are.

How MuJoCo finds a file (``user_model.cc``): with ``strippath`` only the file's name is
kept; an absolute path is used as it is; otherwise meshes, height fields and skins are
looked up under ``meshdir`` and textures under ``texturedir`` (``assetdir`` sets both when
the model is read), each relative to the model file's folder (``spec.modelfiledir``). A
file given in memory (``spec.assets``) is copied from there.

A URDF names its meshes in ``<mesh filename=...>``; :meth:`PortableAssets.urdf` rewrites
them the same way (``package://`` names are resolved as MuJoCo does: by their file name
under the URDF's ``<mujoco><compiler meshdir>``).
"""

from __future__ import annotations

import logging
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import mujoco

from mjsysid.util.errors import must_be
from mjsysid.util.results_files import ASSETS_DIR

log = logging.getLogger(__name__)

AssetMode = Literal["copy", "absolute"]
ASSET_MODES: tuple[AssetMode, ...] = ("copy", "absolute")
"""The choices of ``assets=`` / ``--assets``; the first is the default."""

_MESH_LISTS = ("meshes", "hfields", "skins")  # looked up under meshdir
_CUBE_FACES = 6


def check_asset_mode(mode: object, name: str = "assets") -> AssetMode:
    """``mode`` when it is one of :data:`ASSET_MODES`, else a ``ValueError``."""
    if mode not in ASSET_MODES:
        raise ValueError(must_be(name, f"one of {list(ASSET_MODES)}", mode))
    return mode


def resolve_asset(spec: mujoco.MjSpec, file: str, texture: bool = False) -> Path:
    """Where MuJoCo reads the asset ``file`` of ``spec`` from (see the module docstring)."""
    name = os.path.basename(file) if spec.strippath else file
    if os.path.isabs(name):
        return Path(name)
    folder = spec.texturedir if texture else spec.meshdir
    return Path(spec.modelfiledir or ".") / (folder or "") / name


@dataclass
class PortableAssets:
    """The asset files of the models written into one results folder, and their new names.

    Attributes:
      mode: ``"copy"`` or ``"absolute"`` (see the module docstring).
      files: ``{name relative to the results folder: bytes}``, the copies to write (empty
        with ``"absolute"``).
    """

    mode: AssetMode = "copy"
    files: dict[str, bytes] = field(default_factory=dict)
    _names: dict[Path, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.mode = check_asset_mode(self.mode)

    def _name(self, source: Path, memory: dict[str, bytes], file: str) -> str:
        """The new name of the asset at ``source`` (copied on first sight with ``"copy"``)."""
        if self.mode == "absolute":
            return str(source.resolve())
        key = source.resolve() if source.is_file() else source
        if key in self._names:
            return self._names[key]
        if source.is_file():
            data = source.read_bytes()
        elif file in memory:
            data = memory[file]
        else:
            raise FileNotFoundError(
                f"asset file {str(source)!r} (named {file!r} by the model) must exist to be "
                "copied into the results folder; got no such file (or write the model with "
                "assets='absolute')"
            )
        stem, suffix, n = Path(file).stem, Path(file).suffix, 1
        name = f"{ASSETS_DIR}/{stem}{suffix}"
        while name in self.files and self.files[name] != data:
            n += 1
            name = f"{ASSETS_DIR}/{stem}_{n}{suffix}"
        self.files[name] = data
        self._names[key] = name
        return name

    def spec(self, spec: mujoco.MjSpec) -> mujoco.MjSpec:
        """A copy of ``spec`` whose asset files are named as ``mode`` says; it compiles (the
        copies are also given in memory, ``spec.assets``) and its ``to_xml`` text loads from
        the results folder."""
        out = spec.copy()
        memory = dict(spec.assets or {})
        for kind in _MESH_LISTS:
            for element in getattr(out, kind):
                if element.file:
                    element.file = self._name(
                        resolve_asset(spec, element.file), memory, element.file
                    )
        for texture in out.textures:
            if texture.file:
                texture.file = self._name(
                    resolve_asset(spec, texture.file, True), memory, texture.file
                )
            faces = list(texture.cubefiles)
            if any(faces):
                texture.cubefiles = [
                    self._name(resolve_asset(spec, f, True), memory, f) if f else ""
                    for f in faces[:_CUBE_FACES]
                ]
        out.meshdir, out.texturedir, out.strippath = "", "", False
        if self.mode == "copy":
            out.assets = {**memory, **self.files}
        return out

    def urdf(self, root: ET.Element, urdf_file: Path) -> None:
        """Renames the ``<mesh filename>`` files of URDF ``root`` (read from ``urdf_file``)
        in place; the ``<mujoco><compiler>`` element, made where missing, gets
        ``strippath="false"`` and no ``meshdir`` (MuJoCo strips URDF paths by default)."""
        base = urdf_file.resolve().parent
        compiler = root.find("mujoco/compiler")
        meshdir = (
            compiler.get("meshdir", compiler.get("assetdir", "")) if compiler is not None else ""
        )
        strip = compiler is None or compiler.get("strippath", "true") != "false"
        renamed = 0
        for mesh in root.iter("mesh"):
            file = mesh.get("filename")
            if not file:
                continue
            source = _urdf_source(base, meshdir, file, strip)
            if source is None:
                log.warning("URDF mesh %r not found under %s: its name is kept", file, base)
                continue
            mesh.set("filename", self._name(source, {}, Path(file).name))
            renamed += 1
        if not renamed:
            return
        if compiler is None:
            mujoco_el = root.find("mujoco")
            if mujoco_el is None:
                mujoco_el = ET.SubElement(root, "mujoco")
            compiler = ET.SubElement(mujoco_el, "compiler")
        for attribute in ("meshdir", "texturedir", "assetdir"):
            compiler.attrib.pop(attribute, None)
        compiler.set("strippath", "false")


def _urdf_source(base: Path, meshdir: str, file: str, strip: bool) -> Path | None:
    """The file a URDF ``<mesh filename>`` names: where MuJoCo reads it, else relative to
    the URDF (as ROS tools read a relative name); ``None`` when neither exists."""
    name = file.removeprefix("file://")
    candidates = []
    if strip or name.startswith("package://"):
        candidates.append(base / meshdir / os.path.basename(name))
    if not name.startswith("package://"):
        candidates.append(Path(name) if os.path.isabs(name) else base / meshdir / name)
        candidates.append(base / name)
    return next((c for c in candidates if c.is_file()), None)
