"""The report's validation section: fit percentages per sequence and signal, and overlays of
the held-out data (the :class:`~mjsysid.fit.validation.ValidationTable` of the fit)."""

from __future__ import annotations

import math
from typing import Any

from mjsysid.output.report.content import column_labels, column_signals
from mjsysid.output.report.units import column_units, named_signal_unit


def _cell(value: float, unit: str = "") -> str:
    return "—" if not math.isfinite(value) else f"{value:.4g}{unit}"


def _rows(validation: Any, models: dict[str, Any]) -> list[dict[str, Any]]:
    """The held-out rows (the fitted sequences' fit is the fit table's: not repeated)."""
    out = []
    for r in validation.rows:
        if not r.held_out:
            continue
        unit = named_signal_unit(models.get(r.model), r.signal)
        out.append(
            {
                "sequence": f"{r.model}/{r.sequence}",
                "signal": r.signal,
                "unit": unit or "?",
                "fit_start": _cell(r.fit_start, " %"),
                "fit_identified": _cell(r.fit_identified, " %"),
                "rms_start": _cell(r.rms_start),
                "rms_identified": _cell(r.rms_identified),
                "headline": f"{r.signal} {_cell(r.fit_identified, ' %')}",
            }
        )
    return out


def _overlays(
    validation: Any, max_points: int, figures: dict[str, Any], models: dict[str, Any]
) -> list[dict[str, Any]]:
    """One entry per held-out sequence: a figure per measured column (ids ``v<i>c<j>``)."""
    from mjsysid.output.report.figures import signal_figure

    out = []
    for i, (p0, p1) in enumerate(
        zip(validation.held_out_start, validation.held_out_identified, strict=True)
    ):
        meas, pred, init = p1.measured_used, p1.predicted_at_measured, p0.predicted_at_measured
        if pred.data.shape != meas.data.shape:
            continue
        same = init.data.shape == pred.data.shape
        labels, signals = column_labels(meas), column_signals(meas)
        units = column_units(meas, models.get(p1.model_name))
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
                unit=units[c],
            )
            figs.append({"id": fid, "label": f"{signals[c]}: {labels[c]}"})
        out.append({"label": f"{p1.model_name}/{p1.sequence_name}", "figs": figs})
    return out


def validation_section(
    validation: Any, max_points: int, figures: dict[str, Any], models: dict[str, Any]
) -> dict[str, Any] | None:
    """The template's ``validation`` variable (``None`` without held-out sequences): the
    held-out rows and their overlays (figures into ``figures``); ``models``: the compiled
    models by name (the signals' units)."""
    if validation is None or not any(r.held_out for r in validation.rows):
        return None
    rows = _rows(validation, models)
    by_sequence: dict[str, list[str]] = {}
    for r in rows:
        by_sequence.setdefault(r["sequence"], []).append(r["headline"])
    return {
        "rows": rows,
        "headline": "; ".join(f"{k}: {', '.join(v)}" for k, v in by_sequence.items()),
        "overlays": _overlays(validation, max_points, figures, models),
    }
