"""Every file a model reads: the MJCF ``<include>`` tree and the asset files it names.

MuJoCo resolves ``<include file=...>`` relative to the top model file's folder, mesh and
height-field files relative to ``<compiler meshdir=...>`` (else ``assetdir``, else the model's
folder) and textures relative to ``texturedir`` (else ``assetdir``). URDF meshes
(``<mesh filename=...>``) are relative to the URDF file. Fingerprinting all of them tells a
later ``mjsysid report`` that an included file or a mesh changed since the fit.

The scan is linear in the file size. A model may hold huge tokens (a mesh given inline as a
``vertex`` attribute of hundreds of megabytes); ElementTree, fed in chunks by expat, re-scans
an unfinished token at every chunk, which is quadratic in its length (a valid 200 MB model took
minutes where MuJoCo loads it in 0.4 s). Only the start tags of a few elements matter here, so
one regular expression over the bytes finds them: comments, CDATA sections, processing
instructions and declarations are matched as wholes (so a tag inside a comment is not read),
and attribute values are quoted runs scanned once.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_TEXTURE_FILES = ("file", "fileright", "fileleft", "fileup", "filedown", "filefront", "fileback")
_WANTED = ("include", "compiler", "mesh", "hfield", "skin", "texture")
_NEEDED = frozenset(("file", "filename", "meshdir", "texturedir", "assetdir", *_TEXTURE_FILES))

_TOKEN = re.compile(
    rb"<!--.*?-->"  # a comment (its tags are not read)
    rb"|<!\[CDATA\[.*?\]\]>"
    rb"|<\?.*?\?>"  # a processing instruction or the XML declaration
    rb"|<![^>]*>"  # a declaration (DOCTYPE without an internal subset)
    rb"|<(?P<tag>[A-Za-z_][\w.:-]*)(?P<attrs>(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*/?>",
    re.DOTALL,
)
_ATTR = re.compile(rb"([^\s=/>]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")


@dataclass(frozen=True)
class _Element:
    """A start tag: its name and attributes (entities decoded)."""

    tag: str
    attrib: dict[str, str]

    def get(self, name: str) -> str:
        """The attribute ``name`` ('' when absent)."""
        return self.attrib.get(name, "")


def _decode(raw: bytes) -> str:
    return html.unescape(raw.decode("utf-8", errors="replace"))


def _elements(data: bytes) -> Iterator[_Element]:
    """The start tags named in :data:`_WANTED`, in document order (one linear pass; only the
    attributes in :data:`_NEEDED` are decoded, so a huge ``vertex`` value is never copied)."""
    for m in _TOKEN.finditer(data):
        tag = m.group("tag")
        if tag is None:
            continue
        name = tag.decode("ascii", errors="replace")
        if name not in _WANTED:
            continue
        attrib = {}
        for a in _ATTR.finditer(data, m.start("attrs"), m.end("attrs")):
            key = a.group(1).decode("ascii", errors="replace")
            if key in _NEEDED:
                attrib[key] = _decode(a.group(2) if a.group(2) is not None else a.group(3))
        yield _Element(name, attrib)


def _parse(path: Path) -> list[_Element] | None:
    try:
        data = path.read_bytes()
    except OSError:  # MuJoCo has loaded it; an unreadable include is reported by MuJoCo
        return None
    if not data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
        return None  # a foreign format (a binary, a mesh) is not ours
    return list(_elements(data))


def _include_tree(top: Path) -> list[tuple[Path, list[_Element]]]:
    """``(file, its relevant start tags)`` of the top file and every file it includes."""
    found: list[tuple[Path, list[_Element]]] = []
    todo, seen = [top], set()
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        elements = _parse(path)
        if elements is None:
            continue
        found.append((path, elements))
        for el in elements:
            name = el.get("file") if el.tag == "include" else None
            if name:
                todo.append((top.parent / name).resolve())
    return found


def _dirs(tree: list[tuple[Path, list[_Element]]], base: Path) -> tuple[Path, Path]:
    """The mesh (and height-field) folder and the texture folder of the ``<compiler>``s."""
    attrs: dict[str, str] = {}
    for _, elements in tree:
        for el in elements:
            if el.tag == "compiler":
                attrs.update(el.attrib)
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
    for _, elements in tree:
        for el in elements:
            if el.tag in ("mesh", "hfield", "skin") and el.get("file"):
                files.append(meshdir / el.get("file"))
            elif el.tag == "texture":
                files.extend(texturedir / el.get(a) for a in _TEXTURE_FILES if el.get(a))
            elif el.tag == "mesh" and el.get("filename"):  # URDF
                files.append(top.parent / el.get("filename"))
    unique = dict.fromkeys(f.resolve() for f in files)
    return [f for f in unique if f.is_file()] or [top]
