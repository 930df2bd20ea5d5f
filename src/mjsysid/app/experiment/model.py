"""The ``model:`` key (the MJCF or URDF, loaded and compiled), the frozen parameters' values
written into it, and ``export: {urdf: FILE, assets: copy|absolute}``."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Annotated, Literal

import mujoco
from pydantic import Field

from mjsysid.app.experiment.nodes import ExperimentError, Keys, Loading, Must
from mjsysid.params.parameter import Parameter
from mjsysid.util.model_files import model_files

ModelFile = Annotated[str, Must("a path to an MJCF or URDF file")]
"""The ``model:`` key."""


class ExportKeys(Keys):
    """``export:`` what the results folder gets besides the identified MJCF, and how the
    written models name their asset files (:mod:`mjsysid.output.portable`)."""

    urdf: (
        Annotated[
            str,
            Field(pattern=r"\.[uU][rR][dD][fF]$"),
            Must("the URDF the model was made from", "a .urdf file"),
        ]
        | None
    ) = None
    assets: Literal["copy", "absolute"] = "copy"


def load_model_file(model: str, path: Path) -> Loading:
    source, base = str(path), path.parent
    model_file = base / model
    if not model_file.is_file():
        raise FileNotFoundError(f"{source}: model: no such file {str(model_file)!r}")
    try:
        spec = mujoco.MjSpec.from_file(str(model_file))
        model = spec.compile()
    except ValueError as e:
        raise ExperimentError(f"{source}: model: {str(model_file)!r} does not load: {e}") from e
    # Every file the model reads (includes, meshes, height fields, textures) is an input.
    return Loading(source, base, spec, model, [path, *model_files(model_file)])


def apply_fixed(ld: Loading, fixed: list[Parameter]) -> None:
    """Writes the frozen parameters' nominal values into the model and recompiles it."""
    for p in fixed:
        assert p.modifier is not None  # (fixed holds model parameters only)
        p.modifier(ld.spec, p)
    try:
        ld.model = ld.spec.compile()
    except ValueError as e:
        names = [p.name for p in fixed]
        raise ExperimentError(
            f"{ld.source}: parameters: the model does not compile with the frozen values of "
            f"{names}: {e}"
        ) from None


def export_urdf_file(keys: ExportKeys | None, ld: Loading) -> Path | None:
    """The ``export: {urdf: FILE}`` key, checked: a URDF whose moving joints are joints of
    the model (added to the files read)."""
    if keys is None or keys.urdf is None:
        return None
    file = ld.base / keys.urdf
    if not file.is_file():
        raise FileNotFoundError(f"{ld.source}: export.urdf: no such file {str(file)!r}")
    try:
        robot = ET.parse(file).getroot()
    except ET.ParseError as e:
        raise ExperimentError(f"{ld.source}: export.urdf: {str(file)!r} is not XML: {e}") from None
    moving = {j.get("name", "") for j in robot.iter("joint") if j.get("type") != "fixed"}
    missing = sorted(moving - {ld.model.joint(j).name for j in range(ld.model.njnt)})
    if robot.tag != "robot" or missing:
        got = f"joints {missing} the model lacks" if missing else f"a <{robot.tag}> root"
        raise ExperimentError(
            f"{ld.source}: export.urdf must be the URDF the model was made from (a <robot> "
            f"whose moving joints are the model's joints), got {got}"
        )
    ld.files.append(file)
    return file
