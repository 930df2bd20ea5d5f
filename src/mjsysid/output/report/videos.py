"""The report's videos: one clip per recording (a windowed recording's windows joined), the
identified motion overlaid on the measured (or initial) one as a translucent ghost.

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
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import state_slices
from mjsysid.data.timeseries import SignalType, TimeSeries, signal_source_indices
from mjsysid.util.limits import get_limit
from mjsysid.util.progress import Progress

logger = logging.getLogger(__name__)


@dataclass
class _VideoJob:
    """What every clip shares, and the models made so far (one per model and parameter set)."""

    initial_params: Any
    opt_params: Any
    preds0: Sequence[Any] | None
    fps: float
    size: tuple[int, int]
    max_seconds: float
    models: dict[tuple[str, str], mujoco.MjModel] = field(default_factory=dict)

    def model(self, ms: ModelSequences, which: str) -> mujoco.MjModel:
        """The model of ``ms`` with the identified (``"id"``) or initial parameters."""
        from mjsysid.params.apply import apply_param_modifiers

        key = (ms.name, which)
        if key not in self.models:
            self.models[key] = apply_param_modifiers(
                self.opt_params if which == "id" else self.initial_params, ms.spec
            )
        return self.models[key]


@dataclass(frozen=True)
class _Motion:
    """What one clip shows: a recording's identified states ``(N, nstate)`` (the windows of
    a windowed recording joined in time order), the same with the initial parameters (or
    ``None``), and the measurements (``times``, ``data``, ``signal_mapping``)."""

    label: str
    model_name: str
    state: np.ndarray
    state0: np.ndarray | None
    measured: Any


def _joined_states(preds: Sequence[Any]) -> np.ndarray:
    """The states of time-ordered windows joined, each row past the previous window's end."""
    from mjsysid.output.report.stitching import join_parts

    return join_parts([(np.asarray(p.state)[:, 0], np.asarray(p.state)) for p in preds])[1]


def motions(preds0: Sequence[Any] | None, preds1: Sequence[Any]) -> list[_Motion]:
    """One motion per recording (:func:`~.stitching.recordings`): a windowed recording is
    one clip of its windows joined, not a clip per window."""
    from mjsysid.output.report.stitching import recordings

    out = []
    for rec in recordings(preds0, preds1):
        label = f"{rec.p1.model_name}/{rec.p1.sequence_name}"
        if not rec.windows:
            st0 = None if rec.p0 is None else np.asarray(rec.p0.state)
            out.append(_Motion(label, rec.p1.model_name, rec.p1.state, st0, rec.p1.measured))
            continue
        w0 = [w for w, _ in rec.windows]
        st0 = None if any(w is None for w in w0) else _joined_states(w0)
        state = _joined_states([w for _, w in rec.windows])
        out.append(_Motion(label, rec.p1.model_name, state, st0, rec.p1.measured_used))
    return out


def _frames(job: _VideoJob, m: _Motion, ms: ModelSequences) -> tuple[list[Any], Any, str]:
    """``(frames, shown states, caption)`` of motion ``m``."""
    from mjsysid.output.plotting import render_rollout
    from mjsysid.output.report.videos import crop_states, measured_qpos, states_from_qpos

    model_id = job.model(ms, "id")
    st1 = crop_states(m.state, job.max_seconds)
    qpos, missing = measured_qpos(ms.model, m.measured)
    if qpos is not None:
        sel = m.measured.times <= m.measured.times[0] + job.max_seconds + 1e-12
        ghost = states_from_qpos(model_id, st1[0], m.measured.times[sel], qpos[sel])
        ghost_model = model_id
        caption = (
            "solid: identified model; translucent green: measured joint "
            "positions (replayed kinematically)"
        )
    elif m.state0 is not None:
        ghost = crop_states(m.state0, job.max_seconds)
        ghost_model = job.model(ms, "init")
        caption = (
            "solid: identified model; translucent green: initial parameters. The "
            "measured motion is not shown: the recording does not hold the "
            f"positions of joints {missing}"
        )
    else:
        ghost, ghost_model, caption = None, None, "identified model"
    state = [st1] if ghost is None else [st1, ghost]
    model = [model_id] if ghost_model is None else [model_id, ghost_model]
    width, height = job.size
    frames = render_rollout(model, None, state, job.fps, width=width, height=height)
    return frames, st1, caption


def _clip(job: _VideoJob, m: _Motion, frames: list[Any], st1: Any, caption: str) -> Any:
    """The encoded clip; the caption says when the sequence was cut."""
    from mjsysid.output.report.videos import VideoClip, encode_gif

    duration = float(st1[-1, 0] - st1[0, 0])
    if float(m.state[-1, 0] - m.state[0, 0]) > duration + 1e-9:
        caption += f" (first {job.max_seconds:g} s)"
    return VideoClip(m.label, encode_gif(frames, job.fps), caption, len(frames))


def video_clips(
    ms_list: Sequence[ModelSequences],
    initial_params: Any,
    opt_params: Any,
    preds0: Sequence[Any] | None,
    preds1: Sequence[Any] | None,
    videos: bool | str,
    fps: float,
    size: tuple[int, int],
    max_seconds: float,
    progress: Progress | None = None,
) -> tuple[list[Any], str]:
    """Encoded clips, one per recording (a windowed recording's windows joined), and the
    reason text when some or all are missing; the clips done are counted to
    ``progress(done, total)``."""
    from mjsysid.output.plotting import OffscreenRenderingError

    if videos is False:
        return [], "Videos are turned off (videos=False, or --no-videos)."
    if not preds1:
        return [], "No videos: the predictions are not available (see the Signals section)."
    by_name = {ms.name: ms for ms in ms_list}
    job = _VideoJob(initial_params, opt_params, preds0, fps, size, max_seconds)
    clips: list[Any] = []
    problems: list[str] = []
    todo = motions(preds0, preds1)
    cap = get_limit("max_report_figures")
    capped = ""
    if len(todo) > cap:
        capped = (
            f"Only the first {cap} of {len(todo)} recordings have a video: the limit "
            f"max_report_figures={cap} bounds the time a report takes."
        )
        todo = todo[:cap]
    for i, m in enumerate(todo):
        if progress is not None:
            progress(i, len(todo))
        ms = by_name.get(m.model_name)
        if ms is None:
            continue
        try:
            frames, st1, caption = _frames(job, m, ms)
        except OffscreenRenderingError as e:
            if videos is True:
                logger.warning("default_report: no videos: %s", e)
            return clips, f"No videos: {e}."
        except Exception as e:  # a video must never break the report; the reason is shown
            logger.warning("default_report: video of %s failed: %s", m.label, e, exc_info=True)
            problems.append(f"{m.label}: {type(e).__name__}: {e}")
            continue
        if frames:
            clips.append(_clip(job, m, frames, st1, caption))
    if progress is not None:
        progress(len(todo), len(todo))
    reason = "Some videos could not be rendered: " + "; ".join(problems) if problems else ""
    return clips, " ".join(x for x in (capped, reason) if x)


def video_items(
    clips: Sequence[Any], size: tuple[int, int], assets_dir: str
) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """The videos section's entries and their files (``video-<k>.gif``)."""
    assets: dict[str, bytes] = {}
    items = []
    for k, clip in enumerate(clips):
        fname = f"video-{k}.gif"
        assets[fname] = clip.gif
        items.append(
            {
                "label": clip.label,
                "caption": clip.caption,
                "src": f"{assets_dir}/{fname}",
                "width": size[0],
                "height": size[1],
            }
        )
    return items, assets


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
        raise ImportError(
            "videos need Pillow: pip install -e '.[report]' in the mjsysid checkout"
        ) from e

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
