"""Frames of full-physics state trajectories, with MuJoCo's own ``mujoco.Renderer``.

The small core :meth:`~mjsysid.sim.trajectory.SystemTrajectory.render` needs; the overlaid,
multi-model videos of reports are :func:`mjsysid.output.plotting.render_rollout`.
"""

from __future__ import annotations

import mujoco
import numpy as np

from mjsysid.data.states import STATE_SPEC
from mjsysid.util.errors import must_be


def frame_rows(times: np.ndarray, fps: float) -> np.ndarray:
    """Row of ``times`` shown by each frame at ``fps`` frames per simulated second: the
    last row at or before each frame time."""
    if not (np.isfinite(fps) and fps > 0):
        raise ValueError(must_be("fps", "a positive number of frames per second", fps))
    frame_t = times[0] + np.arange(int(np.floor((times[-1] - times[0]) * fps + 1e-9)) + 1) / fps
    return np.clip(np.searchsorted(times, frame_t + 1e-12, side="right") - 1, 0, times.size - 1)


def render_states(
    model: mujoco.MjModel,
    states: np.ndarray,
    fps: float = 30,
    width: int = 320,
    height: int = 240,
    camera: int | str = -1,
) -> list[np.ndarray]:
    """``(height, width, 3)`` uint8 frames of ``(nstep, nstate)`` full-physics states
    (column 0 is the time), ``camera`` -1 for the free camera.

    Raises:
      RuntimeError: From MuJoCo when no OpenGL context can be made (set ``MUJOCO_GL``).
    """
    data = mujoco.MjData(model)
    out = []
    with mujoco.Renderer(model, height=height, width=width) as renderer:
        for row in frame_rows(np.asarray(states[:, 0], dtype=np.float64), fps):
            mujoco.mj_setState(model, data, np.asarray(states[row], np.float64), STATE_SPEC.value)
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera=camera)
            out.append(renderer.render().copy())
    return out
