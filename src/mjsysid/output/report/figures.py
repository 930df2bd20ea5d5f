"""Plotly figure specifications (plain ``{"data": [...], "layout": {...}}`` dicts).

The figures are built as JSON-able dicts, drawn in the browser by plotly.js; the plotly Python
package is only needed for the plotly.js bundle. SVG traces (``scatter``, ``heatmap``) are used
instead of WebGL so the report draws on machines without a GPU. Every series is decimated
(:func:`~mjsysid.output.report.content.decimate_indices`) to bound the file size.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mjsysid.output.report.content import Trace, decimate_indices
from mjsysid.output.report.units import axis_title

MEASURED = "#222222"
INITIAL = "#ff7f0e"
IDENTIFIED = "#1f77b4"
PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#ff7f0e",
)

#: Diverging scale for ρ in [−1, 1]: blue negative, near-white 0, red positive.
CORRELATION_SCALE = [
    [0.0, "#2166ac"],
    [0.25, "#67a9cf"],
    [0.5, "#f7f7f7"],
    [0.75, "#ef8a62"],
    [1.0, "#b2182b"],
]
#: Cells whose correlation is undefined (a parameter is unidentifiable).
UNDEFINED = "#404040"

_BASE_LAYOUT: dict[str, Any] = {
    "margin": {"l": 60, "r": 20, "t": 30, "b": 40},
    "hovermode": "x unified",
    "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0, "xanchor": "left"},
    "font": {"size": 12},
    "paper_bgcolor": "white",
    "plot_bgcolor": "white",
}


def numbers(values: Any) -> list[float | None]:
    """A JSON-able list: 7 significant digits, ``None`` (JSON null) for NaN and inf."""
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    return [float(f"{v:.7g}") if math.isfinite(v) else None for v in arr.tolist()]


def plot_text(text: str) -> str:
    """``text`` as plotly.js shows it literally: plotly reads labels as a subset of HTML
    (``<a href>``, ``<b>``, ``<br>``), so ``&``, ``<`` and ``>`` become entities. Every name
    from a model or a data file goes through here (a sensor named ``<a href=...>`` must not
    become a live link in the report)."""
    return html.escape(text, quote=False)


def _axis(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "gridcolor": "#e5e5e5",
        "zerolinecolor": "#cccccc",
        "automargin": True,
        **extra,
    }


def _line(
    x: Any,
    y: Any,
    name: str,
    color: str,
    *,
    dash: str = "solid",
    width: float = 1.5,
    yaxis: str = "y",
    group: str = "",
    show: bool = True,
) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "x": numbers(x),
        "y": numbers(y),
        "name": plot_text(name),
        "line": {"color": color, "dash": dash, "width": width},
        "yaxis": yaxis,
        "legendgroup": plot_text(group or name),
        "showlegend": show,
        "hovertemplate": "%{y:.6g}",
    }


def marks_shapes(marks: Sequence[float]) -> list[dict[str, Any]]:
    """Dotted vertical lines at the times ``marks`` [s] (window starts), across all panels."""
    return [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": x,
            "x1": x,
            "y0": 0,
            "y1": 1,
            "line": {"color": "#999999", "width": 1, "dash": "dot"},
        }
        for x in numbers(marks)
        if x is not None
    ]


def signal_figure(
    title: str,
    times: np.ndarray,
    measured: np.ndarray,
    identified: np.ndarray,
    initial: np.ndarray | None,
    max_points: int,
    marks: Sequence[float] = (),
    *,
    unit: str = "",
) -> dict[str, Any]:
    """Measured vs initial vs identified (top) and the residual ``measured − predicted`` (bottom).

    Args:
      title: Column label. times: ``(N,)`` s. measured, identified, initial: ``(N,)`` values.
      max_points: Decimation target per trace.
      marks: Times [s] marked by dotted vertical lines (the window starts of a stitched view).
      unit: The signal's unit (:mod:`~mjsysid.output.report.units`; ``""``: unknown, the
        axis says so).
    """
    series = [measured, identified] + ([initial] if initial is not None else [])
    idx = decimate_indices(np.stack(series, axis=1), max_points)
    t = times[idx]
    data = [_line(t, measured[idx], "measured", MEASURED, width=1.8)]
    if initial is not None:
        data.append(_line(t, initial[idx], "initial", INITIAL, dash="dash"))
    data.append(_line(t, identified[idx], "identified", IDENTIFIED))
    if initial is not None:
        data.append(
            _line(
                t,
                (measured - initial)[idx],
                "initial",
                INITIAL,
                dash="dash",
                yaxis="y2",
                show=False,
            )
        )
    data.append(
        _line(t, (measured - identified)[idx], "identified", IDENTIFIED, yaxis="y2", show=False)
    )
    layout = {
        **_BASE_LAYOUT,
        "meta": {"title": title},
        "height": 360,
        "xaxis": _axis("time [s]", anchor="y2"),
        "yaxis": _axis(plot_text(axis_title(title, unit)), domain=[0.36, 1.0]),
        "yaxis2": _axis(plot_text(axis_title("residual", unit)), domain=[0.0, 0.27]),
    }
    if len(marks):
        layout["shapes"] = marks_shapes(marks)
    return {"data": data, "layout": layout}


def controls_figure(
    times: np.ndarray,
    control: np.ndarray,
    names: Sequence[str],
    max_points: int,
    marks: Sequence[float] = (),
    units: Sequence[str] = (),
) -> dict[str, Any]:
    """Every actuator's control on the simulation grid, ``(nstep, nu)`` (``marks``: times [s]
    of dotted vertical lines, the window starts of a stitched view; ``units``: each
    actuator's control unit, in the legend, and on the axis when they agree)."""
    idx = decimate_indices(control, max_points)
    units = list(units) or [""] * control.shape[1]
    shared = units[0] if len(set(units)) == 1 else None
    data = [
        {
            **_line(
                times[idx],
                control[idx, j],
                names[j] if shared is not None else f"{names[j]} [{units[j] or '?'}]",
                PALETTE[j % len(PALETTE)],
            ),
            "line": {"color": PALETTE[j % len(PALETTE)], "shape": "hv", "width": 1.3},
        }
        for j in range(control.shape[1])
    ]
    ytitle = axis_title("control", shared) if shared is not None else "control [see legend]"
    layout = {
        **_BASE_LAYOUT,
        "height": 300,
        "xaxis": _axis("time [s]"),
        "yaxis": _axis(plot_text(ytitle)),
    }
    if len(marks):
        layout["shapes"] = marks_shapes(marks)
    return {"data": data, "layout": layout}


def _correlation_layout(p: int) -> dict[str, Any]:
    """The heatmap's layout for ``p`` parameters (square cells, tick labels up to 60)."""
    side = int(min(900, max(420, 200 + 14 * p)))
    ticks = p <= 60
    layout = {
        **_BASE_LAYOUT,
        "hovermode": "closest",
        "height": side,
        "margin": {"l": 60, "r": 20, "t": 10, "b": 40},
        "xaxis": {
            "showticklabels": ticks,
            "ticks": "outside" if ticks else "",
            "tickangle": -45,
            "automargin": True,
            "showgrid": False,
        },
        "yaxis": {
            "showticklabels": ticks,
            "ticks": "outside" if ticks else "",
            "autorange": "reversed",
            "automargin": True,
            "showgrid": False,
            "scaleanchor": "x",
        },
    }
    if side + 240 <= 1000:  # small matrices: keep the colour bar next to the cells
        layout["width"] = side + 240
    return layout


def correlation_figure(
    corr: np.ndarray, names: Sequence[str], at_bound: Sequence[bool] | None = None
) -> dict[str, Any]:
    """Heatmap of ``ρ`` in ``[−1, 1]``; undefined entries drawn grey and labelled on hover
    (a parameter held at its bound, ``at_bound``, as such; any other as unidentifiable)."""
    p = len(names)
    undefined = ~np.isfinite(corr)
    held = [False] * p if at_bound is None else list(at_bound)
    why = [" (at its bound)" if h else " (unidentifiable)" for h in held]
    labels = [
        plot_text(n) + (why[i] if undefined[i].all() and p > 0 else "") for i, n in enumerate(names)
    ]
    z = [numbers(row) for row in corr]
    data: list[dict[str, Any]] = [
        {
            "type": "heatmap",
            "z": z,
            "x": labels,
            "y": labels,
            "zmin": -1,
            "zmax": 1,
            "colorscale": CORRELATION_SCALE,
            "xgap": 1 if p <= 40 else 0,
            "ygap": 1 if p <= 40 else 0,
            "colorbar": {"title": {"text": "ρ [1]"}},
            "hovertemplate": "%{y}<br>%{x}<br>ρ = %{z:.3f}<extra></extra>",
        }
    ]
    if p <= 12:  # few cells: print ρ in each (readable on paper, without hovering)
        data[0]["texttemplate"] = "%{z:.2f}"
        data[0]["textfont"] = {"size": 11}
    if undefined.any():
        data.append(
            {
                "type": "heatmap",
                "z": [[1 if u else None for u in row] for row in undefined],
                "x": labels,
                "y": labels,
                "showscale": False,
                "colorscale": [[0, UNDEFINED], [1, UNDEFINED]],
                "xgap": 1 if p <= 40 else 0,
                "ygap": 1 if p <= 40 else 0,
                "hovertemplate": "%{y}<br>%{x}<br>undefined: a parameter is unidentifiable"
                "<extra></extra>",
                "name": "undefined",
            }
        )
    return {"data": data, "layout": _correlation_layout(p)}


def stage_marks(trace: Trace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(shapes, annotations)``: a dotted vertical line at every horizon-stage switch,
    labelled with the stage that starts there (``"→ first 30 %"``, ``"→ whole data"``)."""
    starts = [(float(st.iterations[0]), st.label) for st in trace.early[1:]]
    if trace.early:
        starts.append((float(trace.iterations[0]), "whole data"))
    shapes = [
        {
            "type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
            "line": {"color": "#777777", "width": 1, "dash": "dot"},
        }
        for x, _ in starts
    ]  # fmt: skip
    notes = [
        {
            "x": x, "y": 1.0, "xref": "x", "yref": "paper", "yanchor": "bottom",
            "text": f"→ {label}", "showarrow": False, "font": {"size": 10, "color": "#555555"},
        }
        for x, label in starts
    ]  # fmt: skip
    return shapes, notes


def _cost_figure(trace: Trace) -> dict[str, Any]:
    """Cost per iteration (log axis when all positive, powers of ten), every horizon stage
    in its own colour and labelled where it starts (a stage fits more data, so the cost
    jumps up there)."""
    costs = [trace.cost, *(st.cost for st in trace.early)]
    positive = all(bool(np.all(c[np.isfinite(c)] > 0)) for c in costs)
    stages = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "x": numbers(st.iterations),
            "y": numbers(st.cost),
            "name": f"{st.label} of the data",
            "marker": {"size": 4},
            "line": {"color": PALETTE[(k + 1) % len(PALETTE)], "dash": "dot"},
            "hovertemplate": f"{st.label}<br>iteration %{{x}}<br>cost %{{y:.6g}}<extra></extra>",
        }
        for k, st in enumerate(trace.early)
    ]
    shapes, notes = stage_marks(trace)
    yaxis = _axis("cost ½‖r‖²", type="log" if positive else "linear")
    if positive:
        finite = np.concatenate([c[np.isfinite(c)] for c in costs])
        decades = float(np.log10(finite.max() / finite.min())) if finite.size else 0.0
        # powers of ten only when they give at least three ticks (no 2-5 clutter)
        yaxis.update(exponentformat="power", **({"dtick": 1} if decades >= 2 else {}))
    return {
        "data": [
            *stages,
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": numbers(trace.iterations),
                "y": numbers(trace.cost),
                "name": "whole data" if stages else "cost",
                "marker": {"size": 4},
                "line": {"color": IDENTIFIED},
                "hovertemplate": "iteration %{x}<br>cost %{y:.6g}<extra></extra>",
            },
        ],
        "layout": {
            **_BASE_LAYOUT,
            "hovermode": "closest",
            "height": 340,
            "margin": {"l": 70, "r": 20, "t": 40, "b": 40},
            "xaxis": _axis("iteration (counted over all stages)"),
            "yaxis": yaxis,
            "shapes": shapes,
            "annotations": notes,
        },
    }


def _paths_figure(
    trace: Trace,
    names: Sequence[str],
    lower: np.ndarray,
    upper: np.ndarray,
    max_paths: int,
    start: np.ndarray | None = None,
) -> tuple[dict[str, Any], str]:
    """Paths of the ``max_paths`` parameters that moved most (normalised to their bounds),
    over every stage: the recorded path of the last stage (solid) and, when there were
    earlier horizon stages, a dotted line from the ``start`` values at iteration 0 to where
    the last stage began (the early stages keep no per-iteration parameters)."""
    cand = trace.candidates
    first = trace.iterations[0]
    early = bool(trace.early) and start is not None and start.shape == cand[0].shape
    finite = np.isfinite(lower) & np.isfinite(upper) & (upper > lower)
    span = np.where(finite, upper - lower, np.maximum(np.abs(cand[0]), 1e-12))
    base = np.where(finite, lower, 0.0)
    norm = (cand - base) / span
    norm0 = (start - base) / span if early and start is not None else norm[0]
    moved = np.max(np.abs(norm - norm0), axis=0)
    order = np.argsort(-moved, kind="stable")[:max_paths]
    note = ""
    if len(names) > max_paths:
        note = (
            f"Showing the {max_paths} of {len(names)} parameters that moved most, relative to "
            "their bound range."
        )
    data: list[dict[str, Any]] = []
    for k, i in enumerate(order):
        color = PALETTE[k % len(PALETTE)]
        if early and start is not None:
            data.append(
                {
                    "type": "scatter", "mode": "lines+markers",
                    "x": [0, int(first)], "y": numbers([norm0[i], norm[0, i]]),
                    "name": plot_text(names[i]), "legendgroup": plot_text(names[i]),
                    "showlegend": False, "marker": {"size": 5, "color": color},
                    "line": {"color": color, "width": 1, "dash": "dot"},
                    "customdata": numbers([start[i], cand[0, i]]),
                    "hovertemplate": "%{fullData.name}<br>iteration %{x} (early stages: path "
                    "not recorded)<br>value %{customdata:.6g}<extra></extra>",
                }
            )  # fmt: skip
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": numbers(first + np.arange(cand.shape[0])),
                "y": numbers(norm[:, i]),
                "name": plot_text(names[i]),
                "legendgroup": plot_text(names[i]),
                "line": {"color": color, "width": 1.3},
                "customdata": numbers(cand[:, i]),
                # (the name by reference: a '%{' in it is not a template)
                "hovertemplate": "%{fullData.name}<br>iteration %{x}<br>value %{customdata:.6g}"
                "<extra></extra>",
            }
        )
    if early:
        note = (
            f"{note} Dotted: from the start to where the last stage began (the early horizon "
            "stages keep no per-iteration parameters)."
        ).strip()
    ylabel = (
        "position in bounds [1] (0 = lower, 1 = upper)" if finite.all() else "normalised value [1]"
    )
    shapes, notes = stage_marks(trace)
    paths = {
        "data": data,
        "layout": {
            **_BASE_LAYOUT,
            "hovermode": "closest",
            "height": 360,
            "margin": {"l": 70, "r": 20, "t": 40, "b": 40},
            "legend": {"font": {"size": 10}},
            "xaxis": _axis("iteration (counted over all stages)"),
            "yaxis": _axis(ylabel),
            "shapes": shapes,
            "annotations": notes,
        },
    }
    return paths, note


def trace_figures(
    trace: Trace,
    names: Sequence[str],
    lower: np.ndarray,
    upper: np.ndarray,
    max_paths: int = 30,
    *,
    start: np.ndarray | None = None,
    keep: Sequence[int] | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """Cost per iteration and parameter paths (normalised to their bounds).

    Args:
      trace: From :func:`~mjsysid.output.report.content.optimisation_trace`.
      names, lower, upper: The fitted parameters' names and bounds ``(p,)``.
      max_paths: Most paths drawn (those that moved most).
      start: ``(p,)`` the values the fit started from (the dotted early-stage segment).
      keep: Indices of the parameters whose paths may be drawn (default all; the report
        leaves the initial states out).

    Returns:
      ``(cost figure, paths figure or None, note)``; with more than ``max_paths`` parameters,
      only those that moved most are drawn and ``note`` says so.
    """
    cost = _cost_figure(trace)
    if trace.candidates.shape[0] == 0:
        return cost, None, ""
    idx = np.arange(len(names)) if keep is None else np.asarray(keep, dtype=np.int64)
    if idx.size == 0:
        return cost, None, ""
    sub = dataclasses.replace(trace, candidates=trace.candidates[:, idx])
    paths, note = _paths_figure(
        sub, [names[i] for i in idx], lower[idx], upper[idx], max_paths,
        None if start is None else np.asarray(start, dtype=np.float64)[idx],
    )  # fmt: skip
    return cost, paths, note
