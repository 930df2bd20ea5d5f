"""The experiment file as one typed model (:class:`ExperimentFile`), assembled from the
models of the key groups, and its JSON Schema (:func:`json_schema`, ``mjsysid schema``).

The schema is the one statement of an experiment file's structure: which keys each mapping
has, their types, ranges, choices and defaults, unknown keys refused. :func:`read_file`
validates a file's data against it and tells the first mistake in the house's words
(:mod:`~mjsysid.app.experiment.messages`); what needs the model or the recordings (a joint
exists, a column is in the file) is checked after it, as each key group is loaded.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, ValidationError

from mjsysid.app.experiment.messages import schema_error
from mjsysid.app.experiment.model import ExportKeys, ModelFile
from mjsysid.app.experiment.nodes import ExperimentError, Keys, Must
from mjsysid.app.experiment.options import (
    ConfidenceKeys,
    Executor,
    ForceLaws,
    OptimizerKeys,
    ResidualKeys,
)
from mjsysid.app.experiment.parameters import Parameters
from mjsysid.app.experiment.sequences import Sequences
from mjsysid.app.experiment.shooting import ShootingKeys
from mjsysid.util.limits import LIMITS

EXPERIMENT_SCHEMA_VERSION = 1

Limits = Annotated[
    dict[str, Annotated[int | float, Must("a number")]],
    Field(json_schema_extra={"propertyNames": {"enum": sorted(LIMITS)}}),
    Must("a mapping of limit names to numbers"),
]


class ExperimentFile(Keys):
    """An experiment file: a whole identification problem (see :mod:`mjsysid.app.experiment`;
    paths are relative to the file)."""

    schema_version: Annotated[int, Field(ge=1, le=EXPERIMENT_SCHEMA_VERSION)] = (
        EXPERIMENT_SCHEMA_VERSION
    )
    name: str | None = None
    limits: Limits | None = None
    shooting: ShootingKeys | None = None
    model: ModelFile
    parameters: Parameters
    sequences: Sequences
    residual: ResidualKeys | None = None
    force_laws: ForceLaws | None = None
    optimizer: OptimizerKeys | None = None
    executor: Executor | None = None
    export: ExportKeys | None = None
    confidence: ConfidenceKeys | None = None


def read_file(data: Any, source: str) -> ExperimentFile:
    """``data`` (a file's YAML) as an :class:`ExperimentFile`.

    Raises:
      ExperimentError: The first mistake, with its key path (a newer ``schema_version``
        first: its keys may be ones this version does not know).
    """
    check_version(data, source)
    try:
        return ExperimentFile.model_validate(data)
    except ValidationError as e:
        raise schema_error(e, ExperimentFile, data, source) from None


def check_version(data: Any, source: str) -> None:
    """Refuses a file written for a newer mjsysid (before its keys are read)."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and version > EXPERIMENT_SCHEMA_VERSION:
        raise ExperimentError(
            f"{source}: schema_version must be <= {EXPERIMENT_SCHEMA_VERSION}, "
            f"got {version}; upgrade mjsysid"
        )


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of experiment files."""
    schema = ExperimentFile.model_json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": "mjsysid experiment file",
    }
