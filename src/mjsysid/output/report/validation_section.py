"""The report's validation section: fit percentages per sequence and signal, and overlays of
the held-out data (the :class:`~mjsysid.output.validation.ValidationTable` of the fit)."""

from __future__ import annotations

import math
from typing import Any

from mjsysid.output.report._data import column_labels, column_signals


def _cell(value: float, unit: str = "") -> str:
    return "—" if not math.isfinite(value) else f"{value:.4g}{unit}"


def _rows(validation: Any) -> list[dict[str, Any]]:
    return [
        {
            "sequence": f"{r.model}/{r.sequence}",
            "signal": r.signal,
            "held_out": r.held_out,
            "fit_start": _cell(r.fit_start, " %"),
            "fit_identified": _cell(r.fit_identified, " %"),
            "rms_start": _cell(r.rms_start),
            "rms_identified": _cell(r.rms_identified),
        }
        for r in validation.rows
    ]


def _overlays(validation: Any, max_points: int, figures: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per held-out sequence: a figure per measured column (ids ``v<i>c<j>``)."""
    from mjsysid.output.report._figures import signal_figure

    out = []
    for i, (p0, p1) in enumerate(
        zip(validation.held_out_start, validation.held_out_identified, strict=True)
    ):
        meas, pred, init = p1.measured_used, p1.predicted_at_measured, p0.predicted_at_measured
        if pred.data.shape != meas.data.shape:
            continue
        same = init.data.shape == pred.data.shape
        labels, signals = column_labels(meas), column_signals(meas)
        figs = []
        for c in range(meas.data.shape[1]):
            fid = f"v{i}c{c}"
            figures[fid] = signal_figure(
                labels[c],
                meas.times,
                meas.data[:, c],
                pred.data[:, c],
                init.data[:, c] if same else None,
                max_points,
            )
            figs.append({"id": fid, "label": f"{signals[c]}: {labels[c]}"})
        out.append({"label": f"{p1.model_name}/{p1.sequence_name}", "figs": figs})
    return out


def validation_section(
    validation: Any, max_points: int, figures: dict[str, Any]
) -> dict[str, Any] | None:
    """The template's ``validation`` variable (``None`` without a validation table): the
    table rows and the overlays of the held-out sequences (figures into ``figures``)."""
    if validation is None:
        return None
    return {
        "rows": _rows(validation),
        "n_held_out": sum(1 for r in validation.rows if r.held_out),
        "overlays": _overlays(validation, max_points, figures),
    }
