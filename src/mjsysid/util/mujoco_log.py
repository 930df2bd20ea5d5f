"""Where MuJoCo writes its log: the results folder, not the user's working directory.

MuJoCo appends every warning and error it reports (an unstable simulation, say) to
``MUJOCO_LOG.TXT`` in the current directory. :func:`mujoco_log_in` points that log at a file
of the results folder for the duration of a run and restores MuJoCo's setting afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import mujoco

MUJOCO_LOG = "mujoco_log.txt"


@contextlib.contextmanager
def mujoco_log_in(folder: str | Path) -> Iterator[Path]:
    """``with mujoco_log_in(out):`` MuJoCo logs to ``out/mujoco_log.txt`` (yielded).

    The setting is process-wide (MuJoCo keeps one log configuration); it is restored on leaving.
    """
    path = (Path(folder) / MUJOCO_LOG).resolve()
    config = mujoco.MjLogConfig.get()
    previous = config.logfile
    config.logfile = str(path)
    config.set()
    try:
        yield path
    finally:
        config = mujoco.MjLogConfig.get()
        config.logfile = previous
        config.set()
