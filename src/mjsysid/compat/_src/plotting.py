"""``mujoco.sysid._src.plotting``: ``render_rollout`` with the peer's defaults (640 x 480
pixels, the free camera -1)."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.output.plotting import render_rollout as _render_rollout

__all__ = ["render_rollout"]


def render_rollout(
    model: mujoco.MjModel | Sequence[mujoco.MjModel],
    data: mujoco.MjData | Sequence[mujoco.MjData] | None,
    state: npt.ArrayLike | Sequence[npt.ArrayLike],
    framerate: float,
    camera: str | int = -1,
    width: int = 640,
    height: int = 480,
    light_pos: Sequence[float] | None = None,
) -> list[np.ndarray]:
    """:func:`mjsysid.render_rollout` in the peer's signature: ``(height, width, 3)`` uint8
    frames of the state trajectories, the first model drawn as it is and the others as
    ghosts."""
    return _render_rollout(model, data, state, framerate, camera, width, height, light_pos)
