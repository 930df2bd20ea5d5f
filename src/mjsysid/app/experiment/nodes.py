"""What every key group of an experiment file shares: the base of their typed models
(:class:`Keys`: unknown keys refused, no type coercion), the words a key's mistakes are told
in (:class:`Must`), the errors a model's own checks raise (:func:`mistake`, :func:`said`),
:class:`ExperimentError`, and the checks that stay code (plain file names, sizes of numbers).

What loading an experiment gathers as it goes (:class:`Loading`) and the ``progress``
factory of :func:`~mjsysid.app.experiment.load_experiment` (:data:`ProgressFactory`).

The ``limits:`` key, and the checks of :mod:`mjsysid.util.limits` raising
:class:`~mjsysid.app.experiment.nodes.ExperimentError`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any

import mujoco
import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from mjsysid.util.errors import short_repr
from mjsysid.util.limits import check_limit, set_limits
from mjsysid.util.progress import Progress


class ExperimentError(ValueError):
    """A mistake in an experiment file; the message starts with the key path."""


@dataclass(frozen=True)
class Must:
    """What a key must be, in the words of its error messages (``Annotated`` metadata of a
    field of a :class:`Keys` model; the JSON Schema gets it as the key's description).

    Attributes:
      type: When the value has the wrong type (default: said from the type, ``"a number"``).
      value: When it has the right type but not an allowed value (default: ``type``, else
        said from the constraints, ``"a finite number > 0"``).
      required: When the key is missing (default: ``type``).
      whole: A mistake inside the value (an item of a list) is told as one of the whole key.
    """

    type: str | None = None
    value: str | None = None
    required: str | None = None
    whole: bool = False

    def merged(self, other: Must) -> Must:
        """``self`` with the fields ``other`` sets."""
        given = {f.name: getattr(other, f.name) for f in fields(other)}
        return replace(self, **{k: v for k, v in given.items() if v not in (None, False)})

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> Any:
        schema = handler(core_schema)
        text = self.required or self.type or self.value
        if text and isinstance(schema, dict) and "$ref" not in schema:
            schema.setdefault("description", text)
        return schema


class Keys(BaseModel):
    """A mapping of an experiment file: typed keys, unknown keys refused, values taken as
    YAML gives them (an integer is a number, but text is never a number or a bool)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def mistake(key: str, expected: str, got: Any) -> PydanticCustomError:
    """For a model's own checks: ``<path>.<key> must be <expected>, got <got>``."""
    return PydanticCustomError("mistake", "{key} must be {expected}", _ctx(key, expected, got))


def said(text: str) -> PydanticCustomError:
    """For a model's own checks: a message of its own; ``{path}`` in ``text`` is the key
    path of the mapping."""
    return PydanticCustomError("said", "{text}", {"text": text})


def _ctx(key: str, expected: str, got: Any) -> dict[str, Any]:
    return {"key": key, "expected": expected, "got": got}


def _not_nan(value: float) -> float:
    if math.isnan(value):
        raise PydanticCustomError("nan", "not NaN")
    return value


Number = Annotated[float, AfterValidator(_not_nan), Must("a number", "a number (not NaN)")]
"""A number (infinity allowed, for bounds), not NaN."""
Numbers = Annotated[Number | list[Number], Must("a number or a list of numbers")]
"""One number or a list of them (sizes are checked against the parameter's)."""
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A finite number > 0."""
PositiveInt = Annotated[int, Field(ge=1), Must("a positive integer")]


def type_name(value: Any) -> str:
    return type(value).__name__ if value is not None else "nothing"


def as_numbers(
    value: float | list[float] | None, where: str, size: int | None = None
) -> np.ndarray | None:
    """``value`` (validated :data:`Numbers`) as an array of 1 or ``size`` numbers."""
    if value is None:
        return None
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    if size is not None and arr.size not in (1, size):
        raise ExperimentError(
            f"{where} must be 1 or {size} numbers, got {type_name(value)} {short_repr(value)}"
        )
    return arr


_FILE_NAME = "a plain file name (non-empty, without '/', '\\', '..' or NUL)"


def check_file_name(source: str, key: str, value: str, default_from: str = "") -> None:
    """Rejects names that could leave the results folder once used as a file name."""
    bad = (
        not value
        or value.strip() in ("", ".")
        or any(c in value for c in ("/", "\\", "\0", os.sep))
        or ".." in value
    )
    if bad:
        origin = f" (taken from {default_from}; set {key}: explicitly)" if default_from else ""
        raise ExperimentError(
            f"{source}: {key} must be {_FILE_NAME}, got {type_name(value)} "
            f"{short_repr(value)}{origin}"
        )


ProgressFactory = Callable[[str], Progress | None]
"""``factory(label)``: the :data:`~mjsysid.util.progress.Progress` of one counted step of
loading (``label`` says what, e.g. ``"reading 'run.csv'"``), or ``None`` to count nothing.
What it returns may have a ``close()`` (as a :class:`~mjsysid.util.progress.ProgressBar`
has), called when the step ends, also after an error."""


@dataclass
class Loading:
    """What loading an experiment has gathered so far: the file's ``source`` (for messages)
    and folder (``base``), the model, the files read and the warnings."""

    source: str
    base: Path
    spec: mujoco.MjSpec
    model: mujoco.MjModel
    files: list[Path]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # facts, not problems (timing edges, ...)
    command_timing: dict[str, Any] = field(default_factory=dict)  # declared, by sequence name
    steps: float = 0.0  # simulated steps of the sequences read so far
    progress: ProgressFactory | None = None  # (load_experiment's progress)


def apply_limits(limits: dict[str, Any] | None, source: str) -> None:
    """The ``limits:`` key: raises (or lowers) named limits of :mod:`mjsysid.util.limits`
    for this process."""
    if limits is not None:
        try:
            set_limits(limits, f"{source}: limits")
        except ValueError as e:
            raise ExperimentError(str(e)) from None


def within_limit(name: str, value: float, what: str) -> None:
    """:func:`check_limit` raising an :class:`ExperimentError`."""
    try:
        check_limit(name, value, what)
    except ValueError as e:
        raise ExperimentError(str(e)) from None
