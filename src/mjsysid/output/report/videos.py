"""The report's videos: one clip per predicted sequence, identified model vs a translucent ghost."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import mujoco

from mjsysid.data.sequences import ModelSequences
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


def _frames(job: _VideoJob, i: int, p1: Any, ms: ModelSequences) -> tuple[list[Any], Any, str]:
    """``(frames, shown states, caption)`` of prediction ``i``."""
    from mjsysid.output.plotting import render_rollout
    from mjsysid.output.report._video import crop_states, measured_qpos, states_from_qpos

    model_id = job.model(ms, "id")
    st1 = crop_states(p1.state, job.max_seconds)
    qpos, missing = measured_qpos(ms.model, p1.measured)
    if qpos is not None:
        sel = p1.measured.times <= p1.measured.times[0] + job.max_seconds + 1e-12
        ghost = states_from_qpos(model_id, st1[0], p1.measured.times[sel], qpos[sel])
        ghost_model = model_id
        caption = (
            "solid: identified model; translucent green: measured joint "
            "positions (replayed kinematically)"
        )
    elif job.preds0 is not None:
        ghost = crop_states(job.preds0[i].state, job.max_seconds)
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


def _clip(job: _VideoJob, label: str, p1: Any, frames: list[Any], st1: Any, caption: str) -> Any:
    """The encoded clip; the caption says when the sequence was cut."""
    from mjsysid.output.report._video import VideoClip, encode_gif

    duration = float(st1[-1, 0] - st1[0, 0])
    if float(p1.state[-1, 0] - p1.state[0, 0]) > duration + 1e-9:
        caption += f" (first {job.max_seconds:g} s)"
    return VideoClip(label, encode_gif(frames, job.fps), caption, len(frames))


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
    """Encoded clips and the reason text when some or all are missing; the sequences done
    are counted to ``progress(done, total)``."""
    from mjsysid.output.plotting import OffscreenRenderingError

    if videos is False:
        return [], "Videos are turned off (videos=False)."
    if not preds1:
        return [], "No videos: the predictions are not available (see the Signals section)."
    by_name = {ms.name: ms for ms in ms_list}
    job = _VideoJob(initial_params, opt_params, preds0, fps, size, max_seconds)
    clips: list[Any] = []
    problems: list[str] = []
    cap = get_limit("max_report_figures")  # (a 123-window fit: 24 clips, not 123)
    capped = ""
    if len(preds1) > cap:
        capped = (
            f"Only the first {cap} of {len(preds1)} sequences (or shooting windows) have a "
            f"video: the limit max_report_figures={cap} bounds the time a report takes."
        )
        preds1 = preds1[:cap]
    for i, p1 in enumerate(preds1):
        if progress is not None:
            progress(i, len(preds1))
        label = f"{p1.model_name}/{p1.sequence_name}"
        ms = by_name.get(p1.model_name)
        if ms is None:
            continue
        try:
            frames, st1, caption = _frames(job, i, p1, ms)
        except OffscreenRenderingError as e:
            if videos is True:
                logger.warning("default_report: no videos: %s", e)
            return clips, f"No videos: {e}."
        except Exception as e:  # a video must never break the report; the reason is shown
            logger.warning("default_report: video of %s failed: %s", label, e, exc_info=True)
            problems.append(f"{label}: {type(e).__name__}: {e}")
            continue
        if frames:
            clips.append(_clip(job, label, p1, frames, st1, caption))
    if progress is not None:
        progress(len(preds1), len(preds1))
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
