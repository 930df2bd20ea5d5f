"""Every file a model reads: the MJCF ``<include>`` tree and the asset files it names.

MuJoCo resolves ``<include file=...>`` relative to the top model file's folder, mesh and
height-field files relative to ``<compiler meshdir=...>`` (else ``assetdir``, else the model's
folder) and textures relative to ``texturedir`` (else ``assetdir``). URDF meshes
(``<mesh filename=...>``) are relative to the URDF file. Fingerprinting all of them tells a
later ``mjsysid report`` that an included file or a mesh changed since the fit.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

_TEXTURE_FILES = ("file", "fileright", "fileleft", "fileup", "filedown", "filefront", "fileback")


def _parse(path: Path) -> ET.Element | None:
    try:
        return ET.parse(path).getroot()
    except (OSError, ET.ParseError):  # MuJoCo has loaded it; a foreign format is not ours
        return None


def _include_tree(top: Path) -> list[tuple[Path, ET.Element]]:
    """``(file, root element)`` of the top file and of every file it includes, recursively."""
    found: list[tuple[Path, ET.Element]] = []
    todo, seen = [top], set()
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        root = _parse(path)
        if root is None:
            continue
        found.append((path, root))
        for inc in root.iter("include"):
            name = inc.get("file")
            if name:
                todo.append((top.parent / name).resolve())
    return found


def _dirs(tree: list[tuple[Path, ET.Element]], base: Path) -> tuple[Path, Path]:
    """The mesh (and height-field) folder and the texture folder of the ``<compiler>``s."""
    attrs: dict[str, str] = {}
    for _, root in tree:
        for compiler in root.iter("compiler"):
            attrs.update(compiler.attrib)
    asset = attrs.get("assetdir", "")
    return base / attrs.get("meshdir", asset), base / attrs.get("texturedir", asset)


def model_files(model_file: str | Path) -> list[Path]:
    """The model file, the files it includes and the asset files they name (existing ones).

    Args:
      model_file: An MJCF or URDF file.

    Returns:
      Absolute paths, the model file first, without duplicates.
    """
    top = Path(model_file).resolve()
    tree = _include_tree(top)
    meshdir, texturedir = _dirs(tree, top.parent)
    files = [path for path, _ in tree]
    for _, root in tree:
        for el in root.iter():
            if el.tag in ("mesh", "hfield", "skin") and el.get("file"):
                files.append(meshdir / el.get("file", ""))
            elif el.tag == "texture":
                files.extend(texturedir / el.get(a, "") for a in _TEXTURE_FILES if el.get(a))
            elif el.tag == "mesh" and el.get("filename"):  # URDF
                files.append(top.parent / el.get("filename", ""))
    unique = dict.fromkeys(f.resolve() for f in files)
    return [f for f in unique if f.is_file()] or [top]
