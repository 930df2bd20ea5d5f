"""What loading an experiment gathers as it goes (:class:`_Loading`) and the ``progress``
factory of :func:`~mjsysid.app.experiment.load_experiment` (:data:`ProgressFactory`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import mujoco

from mjsysid.util.progress import Progress

ProgressFactory = Callable[[str], Progress | None]
"""``factory(label)``: the :data:`~mjsysid.util.progress.Progress` of one counted step of
loading (``label`` says what, e.g. ``"reading 'run.csv'"``), or ``None`` to count nothing.
What it returns may have a ``close()`` (as a :class:`~mjsysid.util.progress.ProgressBar`
has), called when the step ends, also after an error."""


@dataclass
class _Loading:
    """What loading an experiment has gathered so far: the file's ``source`` (for messages)
    and folder (``base``), the model, the files read and the warnings."""

    source: str
    base: Path
    spec: mujoco.MjSpec
    model: mujoco.MjModel
    files: list[Path]
    warnings: list[str] = field(default_factory=list)
    steps: float = 0.0  # simulated steps of the sequences read so far
    progress: ProgressFactory | None = None  # (load_experiment's progress)
