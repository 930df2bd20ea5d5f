"""The three-axis evaluation as a table, a JSON file and a standalone HTML page.

:func:`format_table` prints one line per model: the normalised one-step error, the
normalised open-loop error at each horizon, the growth factor (open-loop error over the whole
recording divided by the one-step error) and the downstream success. A model whose small
one-step error compounds into a large open-loop error is flagged (``<- compounds``) and named
in a note under the table. :func:`report_dict` is the JSON content (:func:`write_json`);
:func:`write_html` draws the multi-step prediction's scores and the error-versus-horizon curves
with plotly (imported only there, plotly.js inlined: the page works offline).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mjsysid.lab.evaluate import EvaluationReport, HorizonErrors, ModelEvaluation
from mjsysid.lab.prediction import PairVerdict, PredictionScore, format_scores
from mjsysid.util.files import atomic_write_text

__all__ = [
    "COMPOUNDS_FACTOR",
    "compounding_models",
    "format_table",
    "prediction_dict",
    "report_dict",
    "write_html",
    "write_json",
]

#: Growth (open-loop over the whole recording / one-step) from which a model is flagged.
COMPOUNDS_FACTOR = 10.0
#: ... provided its open-loop error is at least this (normalised) large.
_NOTICEABLE = 0.05


def _number(x: float) -> float | str | None:
    """A JSON-able number: ``None`` for NaN, ``"inf"`` for infinities."""
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _numbers(a: np.ndarray) -> list[Any]:
    return [_numbers(row) if np.ndim(row) else _number(row) for row in np.asarray(a)]


def compounding_models(report: EvaluationReport) -> list[ModelEvaluation]:
    """The models whose open-loop error over the whole recording is at least
    :data:`COMPOUNDS_FACTOR` times their one-step error (and noticeable)."""
    return [
        m
        for m in report.models
        if m.growth >= COMPOUNDS_FACTOR and float(m.open_loop.normalised[-1]) >= _NOTICEABLE
    ]


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else ("-" if math.isnan(x) else f"{x:.2e}")


def _horizon_label(h: float) -> str:
    return f"{h:.3g} s"


def format_table(report: EvaluationReport) -> str:
    """The report as text: one line per model, notes on compounding errors underneath."""
    horizons = report.models[0].open_loop.horizons
    name_w = max(8, *(len(m.name) for m in report.models)) + 2
    head = f"{'model':<{name_w}}{'one-step':>10}"
    head += "".join(f"{_horizon_label(h):>10}" for h in horizons)
    head += f"{'growth':>10}{'downstream':>12}"
    flagged = {m.name for m in compounding_models(report)}
    lines = [
        "normalised state error (1 = the spread of the recorded signal); columns after "
        "one-step: open-loop error at each horizon (the last one: the whole recording)",
        head,
    ]
    for m in report.models:
        row = f"{m.name:<{name_w}}{_fmt(m.one_step_error):>10}"
        row += "".join(f"{_fmt(float(e)):>10}" for e in m.open_loop.normalised)
        growth = "inf" if math.isinf(m.growth) else f"x{m.growth:.3g}"
        row += f"{growth:>10}"
        d = m.downstream
        row += f"{f'{d.successes}/{d.trials}' if d is not None else '-':>12}"
        if m.name in flagged:
            row += "  <- compounds"
        lines.append(row)
    for m in report.models:
        if m.name in flagged:
            lines.append(
                f"note: {m.name!r}: one-step error {_fmt(m.one_step_error)} but "
                f"{_fmt(float(m.open_loop.normalised[-1]))} open loop over "
                f"{_horizon_label(float(horizons[-1]))} (x{m.growth:.3g}): its errors compound; "
                "a small one-step error does not make a good multi-step predictor"
            )
    return "\n".join(lines)


def _errors_dict(e: HorizonErrors, components: tuple[str, ...]) -> dict[str, Any]:
    return {
        "horizons_s": _numbers(e.horizons),
        "normalised": _numbers(e.normalised),
        "starts": [int(n) for n in e.starts],
        "rms": {c: _numbers(e.rms[:, k]) for k, c in enumerate(components)},
    }


def report_dict(report: EvaluationReport) -> dict[str, Any]:
    """The JSON content: per model, the one-step and open-loop errors (normalised and per
    state component, with the starts that count), the growth and the downstream result."""
    models = []
    for m in report.models:
        d = m.downstream
        models.append(
            {
                "name": m.name,
                "one_step": _errors_dict(m.one_step, report.components),
                "open_loop": _errors_dict(m.open_loop, report.components),
                "growth": _number(m.growth),
                "compounds": m in compounding_models(report),
                "downstream": None
                if d is None
                else {"successes": d.successes, "trials": d.trials, "rate": _number(d.rate)},
            }
        )
    return {
        "kind": "mjsysid.evaluation",
        "version": 1,
        "recordings": list(report.recordings),
        "starts_per_recording": report.starts,
        "components": list(report.components),
        "scales": {c: _number(s) for c, s in zip(report.components, report.scales, strict=True)},
        "models": models,
    }


def prediction_dict(
    scores: Sequence[PredictionScore], verdicts: Sequence[PairVerdict] = ()
) -> dict[str, Any]:
    """The multi-step prediction's JSON content: per model and horizon the mean window error,
    its standard error, the effective sample size and AIC/BIC; the verdicts."""
    return {
        "models": [
            s.as_dict()
            | {"horizons": [{k: _number(v) for k, v in h.as_dict().items()} for h in s.horizons]}
            for s in scores
        ],
        "verdicts": [
            {"a": v.a, "b": v.b, "better": v.better, "sentence": v.sentence()} for v in verdicts
        ],
    }


def write_json(
    report: EvaluationReport | None,
    path: str | Path,
    *,
    prediction: Sequence[PredictionScore] = (),
    verdicts: Sequence[PairVerdict] = (),
) -> Path:
    """Writes :func:`report_dict` (``{}`` without a state-space report) with the multi-step
    prediction (:func:`prediction_dict`, under ``"prediction"``) to ``path`` (atomically);
    returns the path."""
    path = Path(path)
    empty = {"kind": "mjsysid.evaluation", "version": 1, "models": []}
    content = report_dict(report) if report is not None else empty
    if prediction:
        content["prediction"] = prediction_dict(prediction, verdicts)
    atomic_write_text(path, json.dumps(content, indent=2) + "\n")
    return path


def _figure(report: EvaluationReport) -> dict[str, Any]:
    """Error against horizon (log-log), one curve per model; the one-step error a marker."""
    data = []
    for i, m in enumerate(report.models):
        color = _color(i)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{m.name}: open loop",
                "x": _numbers(m.open_loop.horizons),
                "y": [float(v) if np.isfinite(v) else None for v in m.open_loop.normalised],
                "line": {"color": color},
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{m.name}: one step",
                "x": _numbers(m.one_step.horizons),
                "y": [_number(m.one_step_error)],
                "marker": {"color": color, "symbol": "diamond", "size": 11},
            }
        )
    return _log_log(data, "horizon [s]", "normalised error", 460)


def _prediction_figure(scores: Sequence[PredictionScore]) -> dict[str, Any]:
    """Mean window score against horizon (log-log), one curve per model, with its
    standard error as error bars."""
    data = []
    for i, s in enumerate(scores):
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": s.label,
                "x": [h.horizon for h in s.horizons],
                "y": [_number(h.mean) for h in s.horizons],
                "error_y": {"type": "data", "array": [_number(h.se) for h in s.horizons]},
                "line": {"color": _color(i)},
            }
        )
    return _log_log(data, "window [s]", "mean window score (weighted residual²)", 420)


def _color(i: int) -> str:
    """The ``i``-th model's colour (golden-angle hues: neighbours differ)."""
    return f"hsl({(i * 137) % 360}, 65%, 45%)"


def _log_log(data: list[dict[str, Any]], x: str, y: str, height: int) -> dict[str, Any]:
    """A plotly figure of ``data`` on log-log axes titled ``x`` and ``y``."""
    layout = {
        "xaxis": {"title": {"text": x}, "type": "log"},
        "yaxis": {"title": {"text": y}, "type": "log"},
        "margin": {"t": 30},
        "height": height,
    }
    return {"data": data, "layout": layout}


def _plot(div: str, figure: dict[str, Any]) -> str:
    """A ``<div>`` and the script drawing ``figure`` into it."""
    fig = json.dumps(figure).replace("</", "<\\/")
    return (
        f'<div id="{div}"></div>\n<script>(function () {{ var f = {fig}; '
        f'Plotly.newPlot("{div}", f.data, f.layout); }})();</script>'
    )


def write_html(
    report: EvaluationReport | None,
    path: str | Path,
    *,
    title: str = "Evaluation",
    prediction: Sequence[PredictionScore] = (),
    verdicts: Sequence[PairVerdict] = (),
    data: str = "",
) -> Path:
    """A standalone page (plotly.js inlined: it works offline): the multi-step prediction
    (``prediction``: table, verdicts and score-versus-window curves, on the recordings
    ``data`` names, e.g. ``"the held-out sequences: up_and_down"``) where given, and the
    state-space table and error-versus-horizon curves of ``report`` where there is one.

    Raises:
        ValueError: Neither ``report`` nor ``prediction``.
        ImportError: plotly is missing (``pip install -e '.[report]'`` in the mjsysid checkout).
    """
    if report is None and not prediction:
        raise ValueError("write_html needs a state-space report or prediction scores, got neither")
    try:
        from plotly import offline
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(
            f"the HTML page needs plotly ({e}): pip install -e '.[report]' in the mjsysid checkout"
        ) from None
    js = offline.get_plotlyjs().replace("</script", "<\\/script")
    parts = []
    if prediction:
        said = "".join(f"<li>{html.escape(v.sentence())}</li>" for v in verdicts)
        parts.append(
            "<h2>Multi-step prediction</h2>\n<p>"
            + (f"On {html.escape(data)}. " if data else "")
            + "Each model simulated in windows of each length, "
            "each window started from the recorded state, under the recorded commands; a "
            "window's score is its mean squared weighted residual, a model's the mean over "
            "windows (± its standard error).</p>\n"
            f"<pre>{html.escape(format_scores(prediction))}</pre>\n"
            + (f"<ul>{said}</ul>\n" if said else "")
            + _plot("prediction", _prediction_figure(prediction))
        )
    if report is not None:
        parts.append(
            "<h2>One step, open loop, downstream</h2>\n<p>Three separate axes: the one-step "
            "error (diamonds), the open-loop error against horizon under the recorded commands "
            "(lines), and the downstream task's success (table). Errors are normalised by each "
            "state component's spread in the recordings.</p>\n"
            f"<pre>{html.escape(format_table(report))}</pre>\n" + _plot("curves", _figure(report))
        )
    body = "\n".join(parts)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<script>{js}</script></head>
<body style="font-family: sans-serif; max-width: 70em; margin: auto">
<h1>{html.escape(title)}</h1>
{body}
</body></html>
"""
    path = Path(path)
    atomic_write_text(path, page)
    return path
