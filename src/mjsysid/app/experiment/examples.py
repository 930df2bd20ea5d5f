"""The examples shipped with mjsysid (``src/mjsysid/examples/<name>/experiment.yaml``) and
``example:<name>`` paths."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from mjsysid.app.experiment.nodes import ExperimentError


def bundled_examples() -> dict[str, Path]:
    """Names and experiment files of the examples shipped with mjsysid."""
    root = Path(str(resources.files("mjsysid") / "examples"))
    return {p.parent.name: p for p in sorted(root.glob("*/experiment.yaml"))}


def resolve_experiment_path(name: str | Path) -> Path:
    """A file path, or ``example:<name>`` for a bundled example."""
    text = str(name)
    if text.startswith("example:"):
        examples = bundled_examples()
        key = text.split(":", 1)[1]
        if key not in examples:
            raise ExperimentError(f"example must be one of {sorted(examples)}, got {key!r}")
        return examples[key]
    return Path(name)
