"""Videos for the report: identified motion overlaid on the measured (or initial) one.

The measured motion can be shown when the recording holds every joint position: joint-state
signals (``MjStateQPos``) and ``jointpos`` / ``ballquat`` sensors are mapped back to ``qpos``.
Otherwise the identified motion is overlaid on the prediction with the initial parameters.
Frames come from :func:`mjsysid.output.plotting.render_rollout` and are encoded as animated GIF with
Pillow (a matplotlib dependency), which every browser plays offline.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from mjsysid.data.states import state_slices
from mjsysid.data.timeseries import SignalType, TimeSeries, signal_source_indices

logger = logging.getLogger(__name__)


def measured_qpos(
    model: mujoco.MjModel, measured: TimeSeries
) -> tuple[np.ndarray | None, list[str]]:
    """Joint positions ``(N, nq)`` reconstructed from a recording, or ``None``.

    Returns:
      ``(qpos or None, joints whose positions are not measured)``.
    """
    qpos = np.full((measured.times.size, model.nq), np.nan)
    if measured.signal_mapping is not None:
        for name, (stype, cols) in measured.signal_mapping.items():
            cols = np.asarray(cols)
            if stype == SignalType.MjStateQPos:
                src = signal_source_indices(model, name, stype)
            elif stype == SignalType.MjSensor:
                sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
                if sid < 0:
                    continue
                stype_id = int(model.sensor_type[sid])
                if stype_id not in (
                    int(mujoco.mjtSensor.mjSENS_JOINTPOS),
                    int(mujoco.mjtSensor.mjSENS_BALLQUAT),
                ):
                    continue
                if int(model.sensor_objtype[sid]) != int(mujoco.mjtObj.mjOBJ_JOINT):
                    continue
                adr = int(model.jnt_qposadr[int(model.sensor_objid[sid])])
                src = np.arange(adr, adr + cols.size)
            else:
                continue
            if src.size == cols.size:
                qpos[:, src] = measured.data[:, cols]
    missing = []
    for j in range(model.njnt):
        adr = int(model.jnt_qposadr[j])
        width = {0: 7, 1: 4}.get(int(model.jnt_type[j]), 1)
        if np.isnan(qpos[:, adr : adr + width]).any():
            missing.append(model.joint(j).name or f"joint {j}")
    return (None if missing else qpos), missing


def states_from_qpos(
    model: mujoco.MjModel, template: np.ndarray, times: np.ndarray, qpos: np.ndarray
) -> np.ndarray:
    """Full-physics states ``(N, nstate)`` with the given times and ``qpos``, zero velocities."""
    sl = state_slices(model)
    out = np.tile(np.asarray(template, dtype=np.float64), (times.size, 1))
    out[:, sl["time"]] = times[:, None]
    out[:, sl["qpos"]] = qpos
    out[:, sl["qvel"]] = 0.0
    return out


@dataclass
class VideoClip:
    """One encoded video. ``caption`` says what the colours are."""

    label: str
    gif: bytes
    caption: str
    nframes: int


def encode_gif(frames: Sequence[np.ndarray], fps: float) -> bytes:
    """Animated GIF (looping) of ``(H, W, 3)`` uint8 frames.

    One 255-colour palette is computed from a few frames spread over the clip and shared by
    all frames (no dithering): faster than a palette per frame, and smaller.
    """
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError("videos need Pillow: pip install 'mjsysid[report]'") from e

    if not frames:
        raise ValueError("encode_gif needs at least one frame, got none")
    picks = np.linspace(0, len(frames) - 1, min(6, len(frames))).astype(int)
    montage = Image.fromarray(np.concatenate([np.asarray(frames[i]) for i in picks], axis=0))
    palette = montage.quantize(colors=255, method=Image.Quantize.MEDIANCUT)
    images = [
        Image.fromarray(np.ascontiguousarray(f)).quantize(palette=palette, dither=Image.Dither.NONE)
        for f in frames
    ]
    buf = io.BytesIO()
    images[0].save(
        buf,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=max(round(1000.0 / fps), 20),
        loop=0,
    )
    return buf.getvalue()


def crop_states(state: np.ndarray, seconds: float) -> np.ndarray:
    """The first ``seconds`` of a state trajectory (by its time column)."""
    t = state[:, 0]
    return state[t <= t[0] + seconds + 1e-12]
