"""The recordings of a report's signal section: the shooting windows of a recording joined
into one whole-recording view (window starts kept), every other sequence as it is.

A windowed fit (:func:`~mjsysid.objective.windows.split_windows`) predicts each window
``"<name>#k"`` from its own start; the report shows the recording once, the windows stitched
in time order with their starts marked, and the windows themselves as collapsed detail.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mjsysid.output.report.content import SignalError, signal_errors

WINDOW_NAME = re.compile(r"^(?P<base>.*)#(?P<k>\d+)$")
"""The name :func:`~mjsysid.objective.windows.split_windows` gives window ``k`` of ``base``."""


@dataclass(frozen=True)
class Series:
    """Samples for the figures: ``times (N,)`` [s], ``data (N, D)``, the signal mapping."""

    times: np.ndarray
    data: np.ndarray
    signal_mapping: Any = None


@dataclass(frozen=True)
class Stitched:
    """The windows of one recording joined in time order (overlaps kept once), shaped like
    a prediction (``measured_used``, ``predicted_at_measured``, ``predicted``, ``control``)."""

    model_name: str
    sequence_name: str
    measured_used: Series
    predicted_at_measured: Series
    predicted: Series
    control: np.ndarray
    note: str


@dataclass(frozen=True)
class Recording:
    """One entry of the signal section.

    Attributes:
      p0, p1: The initial-parameter (or ``None``) and identified predictions to draw: a
        :class:`Stitched` view for a windowed recording.
      windows: ``(p0, p1)`` of every window of the recording, in time order (empty: the
        sequence was not split into windows).
      starts: ``(W,)`` start times of the windows after the first [s] (marked in the view).
    """

    p0: Any
    p1: Any
    windows: list[tuple[Any, Any]] = field(default_factory=list)
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0))


def join_parts(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``(times, data)`` of time-ordered ``parts``, each sample past the previous part's end."""
    times: list[np.ndarray] = []
    data: list[np.ndarray] = []
    last = -np.inf
    for t, d in parts:
        keep = t > last
        times.append(t[keep])
        data.append(d[keep])
        last = max(last, float(t[-1])) if t.size else last
    return np.concatenate(times), np.concatenate(data, axis=0)


def stitch(windows: Sequence[Any], label: str) -> Stitched:
    """The time-ordered ``windows`` (predictions) of one recording as one :class:`Stitched`."""
    order = sorted(windows, key=lambda p: float(p.measured_used.times[0]))
    t, md = join_parts([(p.measured_used.times, p.measured_used.data) for p in order])
    same = all(p.predicted_at_measured.data.shape == p.measured_used.data.shape for p in order)
    pd = (
        join_parts([(p.measured_used.times, p.predicted_at_measured.data) for p in order])[1]
        if same
        else np.zeros((t.size, 0))
    )
    fits = all(p.control.shape[0] == p.predicted.times.size for p in order)
    ct, cd = (
        join_parts([(p.predicted.times, p.control) for p in order])
        if fits
        else (t, np.zeros((t.size, 0)))
    )
    mapping = order[0].measured_used.signal_mapping
    return Stitched(
        order[0].model_name,
        label,
        Series(t, md, mapping),
        Series(t, pd, mapping),
        Series(ct, cd),
        cd,
        f"{len(order)} shooting windows stitched into 1 whole-recording view; dotted lines "
        "mark the window starts (each window's prediction starts from its own initial state, "
        "so the prediction may jump there).",
    )


def _groups(preds1: Sequence[Any]) -> list[list[int]]:
    """Indices of ``preds1`` per entry, in order of first appearance: the windows
    ``"<base>#k"`` of one model's recording together (two or more), every other alone."""
    keyed: dict[tuple[str, str], list[int]] = {}
    out: list[list[int]] = []
    for i, p in enumerate(preds1):
        m = WINDOW_NAME.match(str(p.sequence_name))
        if m is None:
            out.append([i])
            continue
        key = (str(p.model_name), m["base"])
        if key not in keyed:
            keyed[key] = []
            out.append(keyed[key])
        keyed[key].append(i)
    return out


def _window_order(preds1: Sequence[Any], idx: list[int]) -> list[int]:
    return sorted(idx, key=lambda i: float(preds1[i].measured_used.times[0]))


def recordings(preds0: Sequence[Any] | None, preds1: Sequence[Any]) -> list[Recording]:
    """The entries of the signal section: one per recording, windows stitched (a
    :class:`Recording` with its ``windows``), every other prediction as it is.

    Args:
      preds0: The predictions with the initial parameters, parallel to ``preds1`` (or
        ``None``; a list of another length is ignored).
      preds1: The predictions with the identified parameters.
    """
    if preds0 is not None and len(preds0) != len(preds1):
        preds0 = None
    out = []
    for idx in _groups(preds1):
        if len(idx) == 1:
            out.append(Recording(None if preds0 is None else preds0[idx[0]], preds1[idx[0]]))
            continue
        idx = _window_order(preds1, idx)
        base = WINDOW_NAME.match(str(preds1[idx[0]].sequence_name))
        label = base["base"] if base is not None else str(preds1[idx[0]].sequence_name)
        w1 = [preds1[i] for i in idx]
        w0 = [None if preds0 is None else preds0[i] for i in idx]
        starts = np.array([float(p.measured_used.times[0]) for p in w1[1:]])
        out.append(
            Recording(
                None if preds0 is None else stitch(w0, label),
                stitch(w1, label),
                list(zip(w0, w1, strict=True)),
                starts,
            )
        )
    return out


def whole_recording_errors(
    preds0: Sequence[Any] | None, preds1: Sequence[Any]
) -> list[SignalError]:
    """The NRMSE of every windowed recording as a whole, its windows joined (one
    :class:`~mjsysid.output.report.content.SignalError` per measured column, its ``windows``
    the number joined); none without windows."""
    joined = [r for r in recordings(preds0, preds1) if r.windows]
    if not joined:
        return []
    p0 = [r.p0 for r in joined] if all(r.p0 is not None for r in joined) else None
    count = {f"{r.p1.model_name}/{r.p1.sequence_name}": len(r.windows) for r in joined}
    return [
        dataclasses.replace(e, windows=count[e.sequence])
        for e in signal_errors(p0, [r.p1 for r in joined])
    ]


def headline_errors(
    errors: Sequence[SignalError], whole: Sequence[SignalError]
) -> list[SignalError]:
    """The errors the report leads with, the fit table's default rows and the warnings'
    source alike: every windowed recording as a whole (``whole``), then every sequence that
    is not one of their windows."""
    joined = {e.sequence for e in whole}
    return [*whole, *(e for e in errors if not is_window_of(e.sequence, joined))]


def is_window_of(sequence: str, joined: set[str]) -> bool:
    """Whether ``sequence`` (``"model/name#k"``) is a shooting window of a recording in
    ``joined`` (``"model/name"``)."""
    w = WINDOW_NAME.match(sequence)
    return w is not None and w["base"] in joined
