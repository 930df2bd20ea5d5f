"""The data of the report's sections, ready for the template (figures go into one dict)."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.fit.audit import audit_jacobian
from mjsysid.fit.result import OptimizeResult
from mjsysid.fit.status import MessageContext
from mjsysid.output.report.content import (
    Direction,
    ParameterRow,
    column_labels,
    column_signals,
    condition_number,
    correlation_from_covariance,
    gram_spectrum,
    optimisation_trace,
    strong_correlations,
    unidentifiable_directions,
)
from mjsysid.output.report.format import fmt, raise_limit
from mjsysid.output.report.stitching import WINDOW_NAME, Recording, recordings
from mjsysid.output.report.units import column_units, control_unit
from mjsysid.util.limits import get_limit


# -- summary --------------------------------------------------------------------------------------
def _model_summary(ms: ModelSequences) -> dict[str, Any]:
    """The model and its recordings, the shooting windows of a recording counted, not
    listed (``"run1: 20 windows, 19.98 s, 2 signals"``)."""
    m = ms.model
    spans: dict[str, list[Any]] = {}
    for name, _, _, meas in ms.sequences():
        w = WINDOW_NAME.match(str(name))
        spans.setdefault(w["base"] if w else str(name), []).append(meas)
    seqs = []
    for base, parts in spans.items():
        t0 = min(float(p.times[0]) for p in parts)
        t1 = max(float(p.times[-1]) for p in parts)
        meas = parts[0]
        n_signals = max(meas.n_signals, 1) if meas.signal_mapping else meas.dim
        windows = f"{len(parts)} shooting windows, " if len(parts) > 1 else ""
        samples = sum(int(p.times.size) for p in parts)
        seqs.append(
            {
                "name": base,
                "detail": f"{windows}{samples} samples, {t1 - t0:.4g} s, {n_signals} signals",
            }
        )
    return {
        "name": ms.name,
        "sequences": seqs,
        "detail": (
            f"{len(spans)} recording(s); {m.nq} qpos, {m.nv} dofs, {m.nu} actuators, "
            f"{m.nsensor} sensors, timestep {m.opt.timestep:g} s"
        ),
    }


def _result_summary(opt_result: OptimizeResult) -> dict[str, Any]:
    cost0, cost = float(opt_result.initial_cost), float(opt_result.cost)
    reduction = ""
    if math.isfinite(cost0) and cost0 > 0 and math.isfinite(cost):
        reduction = f"{100.0 * (1.0 - cost / cost0):.4g} % lower"
    wall = float(opt_result.wall_time)
    return {
        "status": str(opt_result.status),
        "success": bool(opt_result.success),
        "message": opt_result.message,
        "optimizer": opt_result.optimizer,
        "initial_cost": fmt(cost0),
        "cost": fmt(cost),
        "reduction": reduction,
        "nit": opt_result.nit,
        "nfev": opt_result.nfev,
        "njev": opt_result.njev,
        "stages": [
            f"{100.0 * st.horizon:g} %: {st.nit} iterations, {st.nfev} evaluations, "
            f"cost {fmt(st.cost)}" + ("" if st.two_starts is None else f" ({st.two_starts.text()})")
            for st in opt_result.stages
        ],
        "wall_time": "—" if not math.isfinite(wall) else f"{wall:.3g} s",
        "n_residuals": int(np.asarray(opt_result.fun).size),
        "threshold_profile": (
            "" if opt_result.threshold_profile is None else opt_result.threshold_profile.text()
        ),
    }


def summary(
    ms_list: Sequence[ModelSequences],
    rows: Sequence[ParameterRow],
    opt_result: Any,
    condition: float,
    alpha: float | None,
    versions: dict[str, str],
    intervals: str = "",
) -> dict[str, Any]:
    """The summary section: the fit's result, the parameters, the data and the versions;
    ``intervals`` says how the intervals were computed
    (:func:`~mjsysid.output.report.format.interval_method`)."""
    out = _result_summary(opt_result)
    out.update(
        {
            "n_free": sum(1 for r in rows if not r.frozen and not r.nuisance),
            "n_frozen": sum(1 for r in rows if r.frozen and not r.nuisance),
            "n_groups": len({r.group for r in rows if not r.nuisance}),
            "n_nuisance": sum(1 for r in rows if r.nuisance and not r.frozen),
            "condition": "—"
            if math.isnan(condition)
            else ("∞" if math.isinf(condition) else f"{condition:.3g}"),
            "confidence": "—" if alpha is None else f"{100.0 * (1.0 - alpha):g} %",
            "intervals": intervals,
            "models": [_model_summary(ms) for ms in ms_list],
            "versions": versions,
            "generated": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        }
    )
    return out


# -- signals --------------------------------------------------------------------------------------
def points_per_trace(
    preds: Sequence[Any], max_points: int, max_total_points: int, max_signals: int | None = None
) -> int:
    """Samples per plotted line so that all signal figures together stay within budget.

    Every measured column draws up to 5 lines (measured, initial, identified and two
    residuals), at most ``max_signals`` columns are drawn, and every actuator draws one
    line; the result lies in ``[min(100, max_points), max_points]``.
    """
    columns = sum(p.measured_used.data.shape[1] for p in preds)
    if max_signals is not None:
        columns = min(columns, max_signals)
    lines = 5 * columns + sum(p.control.shape[1] for p in preds)
    if lines == 0:
        return max_points
    return int(min(max_points, max(min(100, max_points), max_total_points // lines)))


def _controls_figure(
    fid: str,
    p1: Any,
    ms: ModelSequences | None,
    max_points: int,
    figures: dict[str, Any],
    marks: Sequence[float] = (),
) -> str | None:
    """Adds the controls figure of ``p1`` to ``figures`` as ``fid``; its id (``None``: none)."""
    from mjsysid.output.report.figures import controls_figure

    if not (p1.control.shape[1] and p1.control.shape[0] == p1.predicted.times.size):
        return None
    known = ms is not None and ms.model.nu == p1.control.shape[1]
    nu = p1.control.shape[1]
    names = (
        [ms.model.actuator(k).name or f"actuator {k}" for k in range(nu)]
        if ms is not None and known
        else [f"u{k}" for k in range(nu)]
    )
    units = [control_unit(ms.model, k) for k in range(nu)] if ms is not None and known else []
    figures[fid] = controls_figure(p1.predicted.times, p1.control, names, max_points, marks, units)
    return fid


def _signal_groups(
    prefix: str,
    p0: Any,
    p1: Any,
    draw: _Drawing,
    marks: Sequence[float] = (),
) -> dict[str, list[dict[str, str]]]:
    """Adds one overlay per measured column to ``figures`` (ids ``<prefix>c<j>``); their
    ids by signal."""
    from mjsysid.output.report.figures import signal_figure

    meas = p1.measured_used
    pred = p1.predicted_at_measured
    init = p0.predicted_at_measured if p0 is not None else None
    if init is not None and init.data.shape != pred.data.shape:
        init = None
    groups: dict[str, list[dict[str, str]]] = {}
    labels = column_labels(meas)
    sigs = column_signals(meas)
    ms = draw.by_name.get(p1.model_name)
    units = column_units(meas, None if ms is None else ms.model)
    for c in draw.columns(meas.data.shape[1]):
        fid = f"{prefix}c{c}"
        draw.figures[fid] = signal_figure(
            labels[c],
            meas.times,
            meas.data[:, c],
            pred.data[:, c],
            None if init is None else init.data[:, c],
            draw.max_points,
            marks,
            unit=units[c],
        )
        groups.setdefault(sigs[c], []).append({"id": fid, "label": labels[c]})
    return groups


@dataclass
class _Drawing:
    """What every sequence's figures share: the models by name, the samples per line, the
    figures dict to add to, and the signal figures still allowed (``max_report_signals``)
    and those left out."""

    by_name: dict[str, ModelSequences]
    max_points: int
    figures: dict[str, Any]
    signals_left: int = 1 << 62
    left_out: int = 0

    def columns(self, n: int) -> range:
        """The first of ``n`` columns that the budget still allows (counted against it)."""
        k = max(min(n, self.signals_left), 0)
        self.signals_left -= k
        self.left_out += n - k
        return range(k)


def _sequence_section(
    prefix: str, p0: Any, p1: Any, draw: _Drawing, marks: Sequence[float] = ()
) -> dict[str, Any]:
    """The template's entry of one (or one stitched) sequence, its figures added."""
    meas = p1.measured_used
    pred = p1.predicted_at_measured
    model = draw.by_name.get(p1.model_name)
    controls_fig = _controls_figure(f"{prefix}u", p1, model, draw.max_points, draw.figures, marks)
    note = getattr(p1, "note", "")
    groups: dict[str, list[dict[str, str]]] = {}
    if pred.data.shape == meas.data.shape:
        groups = _signal_groups(prefix, p0, p1, draw, marks)
    else:
        note = (
            f"The prediction the residual compared ({pred.data.shape[1]} columns) does not "
            f"match the measured series ({meas.data.shape[1]} columns) column by column (a "
            "custom residual), so no per-signal overlay is drawn."
        )
    t0, t1 = float(meas.times[0]), float(meas.times[-1])
    return {
        "label": f"{p1.model_name}/{p1.sequence_name}",
        "detail": f"{meas.times.size} samples over {t1 - t0:.4g} s, {len(groups)} signals",
        "span": f"{t0:.4g}–{t1:.4g} s",
        "controls_fig": controls_fig,
        "note": note,
        "groups": [{"name": k, "figs": v} for k, v in groups.items()],
        "windows": None,
    }


def _n_figures(p1: Any) -> int:
    """The figures :func:`_sequence_section` draws for ``p1`` (one per column, controls)."""
    meas, pred = p1.measured_used, p1.predicted_at_measured
    columns = meas.data.shape[1] if pred.data.shape == meas.data.shape else 0
    controls = bool(p1.control.shape[1] and p1.control.shape[0] == p1.predicted.times.size)
    return columns + int(controls)


@dataclass
class _WindowBudget:
    """Per-window figures still to draw over the report (``max_report_figures``)."""

    cap: int
    left: int
    hint: str = ""


def _window_details(i: int, rec: Recording, budget: _WindowBudget, draw: _Drawing) -> dict:
    """The collapsed per-window detail of stitched recording ``i``: its windows in time
    order while their figures fit in ``budget`` (ids ``s<i>w<k>...``), a note when the limit
    left some out."""
    items = []
    for k, (w0, w1) in enumerate(rec.windows):
        n = _n_figures(w1)
        if n > budget.left:
            break
        budget.left -= n
        items.append(_sequence_section(f"s{i}w{k}", w0, w1, draw))
    note = ""
    if len(items) < len(rec.windows):
        note = (
            f"Only the first {len(items)} of {len(rec.windows)} windows are drawn in detail: "
            f"the limit max_report_figures={budget.cap} bounds the per-window figures of a "
            f"report (raise it to draw every window: {budget.hint}; the whole recording is "
            "drawn above)."
        )
    return {"n": len(rec.windows), "note": note, "items": items}


def signal_sections(
    ms_list: Sequence[ModelSequences],
    preds0: Sequence[Any] | None,
    preds1: Sequence[Any],
    max_points: int,
    figures: dict[str, Any],
    context: MessageContext | None = None,
) -> list[dict[str, Any]]:
    """One section per recording: controls and measured vs predicted signals.

    The shooting windows ``"<name>#k"`` of a recording are stitched into one
    whole-recording view with the window starts marked (:mod:`.stitching`), the windows
    themselves kept as collapsed detail. At most ``max_report_figures``
    (:mod:`mjsysid.util.limits`) sections are drawn, and as many per-window figures over all
    recordings (a note says what was left out): the report's size and the time to draw it
    stay bounded however many windows the fit has.
    """
    cap = get_limit("max_report_figures")
    recs = recordings(preds0, preds1)
    cap_note = ""
    if len(recs) > cap:
        cap_note = (
            f"{len(recs)} sequences exceed the limit max_report_figures={cap} of per-sequence "
            f"figures: only the first {cap} are drawn (raise the limit to draw them all: "
            f"{raise_limit('max_report_figures', context)})."
        )
        recs = recs[:cap]
    signals_cap = get_limit("max_report_signals")
    draw = _Drawing({ms.name: ms for ms in ms_list}, max_points, figures, signals_cap)
    out = [
        _sequence_section(f"s{i}", rec.p0, rec.p1, draw, rec.starts.tolist())
        for i, rec in enumerate(recs)
    ]
    # the per-window detail after every whole view, bounded by max_report_figures alone
    detail = dataclasses.replace(draw, signals_left=1 << 62, left_out=0)
    budget = _WindowBudget(cap, cap, raise_limit("max_report_figures", context))
    for i, (rec, section) in enumerate(zip(recs, out, strict=True)):
        if rec.windows:
            section["windows"] = _window_details(i, rec, budget, detail)
            section["detail"] += f", {len(rec.windows)} shooting windows"
    if draw.left_out:
        drawn = signals_cap - max(draw.signals_left, 0)
        cap_note += (
            f" {drawn} of {drawn + draw.left_out} signal figures are drawn, "
            f"{draw.left_out} left out: the limit max_report_signals={signals_cap} bounds the "
            f"report's size (raise it to draw them all: "
            f"{raise_limit('max_report_signals', context)}); the fit of every signal is in "
            "the Fit per signal table."
        )
    if out and cap_note.strip():
        out[0]["note"] = " ".join(x for x in (cap_note.strip(), out[0]["note"]) if x)
    return out


# -- correlation and identifiability --------------------------------------------------------------
@dataclass(frozen=True)
class CorrelationSection:
    """The correlation heatmap's figure id (or why there is none), the strong pairs that
    involve a physical parameter (``pairs``) and those among initial states only
    (``nuisance_pairs``, counted in their own section)."""

    fig: str | None = None
    reason: str = ""
    note: str = ""
    pairs: list[tuple[str, str, float]] = field(default_factory=list)
    nuisance_pairs: list[tuple[str, str, float]] = field(default_factory=list)


def correlation_section(
    conf: Any,
    notes: Sequence[str],
    threshold: float,
    figures: dict[str, Any],
    context: MessageContext | None = None,
    nuisance: frozenset[str] = frozenset(),
) -> CorrelationSection:
    """The heatmap of the correlation of the physical parameters (added to ``figures``)
    when ``conf`` has a covariance; ``nuisance`` names the initial-state parameters, left
    out of the map (their covariance block is marginalised: the map is the correlation of
    the physical parameters' own submatrix)."""
    from mjsysid.output.report.figures import correlation_figure

    if not (
        conf is not None
        and np.asarray(conf.covariance).shape == (len(conf.names),) * 2
        and len(conf.names) > 0
    ):
        return CorrelationSection(
            reason="No correlation matrix: confidence intervals are not available"
            + (f" ({notes[-1]})" if notes else ".")
        )
    corr = correlation_from_covariance(conf.covariance)
    every = strong_correlations(corr, conf.names, threshold)
    pairs = [p for p in every if not (p[0] in nuisance and p[1] in nuisance)]
    rest = [p for p in every if p[0] in nuisance and p[1] in nuisance]
    keep = [i for i, n in enumerate(conf.names) if n not in nuisance]
    if not keep:
        return CorrelationSection(
            reason="No correlation map: every fitted parameter is an initial state.",
            pairs=pairs,
            nuisance_pairs=rest,
        )
    names = [conf.names[i] for i in keep]
    cap = get_limit("max_heatmap_parameters")
    if len(names) > cap:  # p² cells: 3000 parameters would be 9 million
        return CorrelationSection(
            reason=f"No correlation map: {len(names)} parameters exceed the limit "
            f"max_heatmap_parameters={cap} (raise it to draw the map: "
            f"{raise_limit('max_heatmap_parameters', context)}); the strong "
            "correlations are listed in the warnings.",
            pairs=pairs,
            nuisance_pairs=rest,
        )
    at_bound = None
    if conf.at_bound is not None:
        at_bound = [bool(np.asarray(conf.at_bound)[i]) for i in keep]
    figures["corr"] = correlation_figure(corr[np.ix_(keep, keep)], names, at_bound)
    note = ""
    if len(names) > 60:
        note = "With this many parameters the axis labels are hidden; hover a cell."
    if len(keep) < len(conf.names):
        note = (
            f"The {len(conf.names) - len(keep)} initial-state parameters are left out of the "
            f"map. {note}"
        ).strip()
    return CorrelationSection("corr", "", note, pairs, rest)


def jacobian_diagnostics(
    opt_result: OptimizeResult, names: Sequence[str]
) -> tuple[float, list[Direction]]:
    """``(κ, unidentifiable directions)`` of the final Jacobian (``(nan, [])`` without a
    usable one)."""
    jac = opt_result.jac
    if np.ndim(jac) == 2 and np.shape(jac)[1] == len(names) and np.all(np.isfinite(jac)):
        spectrum = gram_spectrum(jac)
        directions = unidentifiable_directions(jac, names, spectrum=spectrum)
        kappa = condition_number(jac, spectrum=spectrum)
        return kappa, _named(directions, jac, names, opt_result)
    return math.nan, []


def _named(
    directions: list[Direction], jac: Any, names: Sequence[str], opt_result: OptimizeResult
) -> list[Direction]:
    """The directions with the audit's words (sum, difference, product, ratio) where it
    names the same parameters (:func:`mjsysid.fit.audit.audit_jacobian`, structural)."""
    x = np.asarray(opt_result.x, dtype=np.float64).reshape(-1)
    if not directions or x.size != len(names) or np.shape(jac)[0] <= len(names):
        return directions
    nan = np.full(x.size, np.nan)
    combos = audit_jacobian(jac, names, x, nan, nan, rtol=1e-5).combinations
    words = {frozenset(c.names): c.text for c in combos if c.kind != "weighted"}
    return [dataclasses.replace(d, meaning=words.get(frozenset(d.names), "")) for d in directions]


# -- optimisation trace ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceSection:
    """The optimisation trace's figures (id and label), a note, and why there is none."""

    figs: list[dict[str, str]] = field(default_factory=list)
    note: str = ""
    reason: str = "No optimisation trace: the result has no per-iteration history (result.history)."


def trace_section(
    opt_result: Any,
    opt_params: Any,
    names: Sequence[str],
    figures: dict[str, Any],
    *,
    start: Any = None,
    nuisance: frozenset[str] = frozenset(),
) -> TraceSection:
    """The cost and parameter paths per iteration (added to ``figures``) when recorded;
    ``start``: the fitted values the fit started from ``(p,)``; the paths of ``nuisance``
    parameters (initial states) are left out."""
    from mjsysid.output.report.figures import trace_figures

    trace = optimisation_trace(opt_result)
    if trace is None:
        return TraceSection()
    lower, upper = opt_params.get_bounds()
    if lower.size != len(names):
        lower, upper = np.full(len(names), -np.inf), np.full(len(names), np.inf)
    keep = [i for i, n in enumerate(names) if n not in nuisance]
    x0 = None if start is None else np.asarray(start, dtype=np.float64).reshape(-1)
    if x0 is not None and x0.size != len(names):
        x0 = None
    cost_fig, paths_fig, note = trace_figures(trace, names, lower, upper, start=x0, keep=keep)
    if trace.early:
        note = (
            "The fit ran in horizon stages, each on a longer part of every sequence: the "
            "dotted costs are on the first part only, so the cost jumps up where a stage "
            f"starts (marked). {note}"
        ).strip()
    if len(keep) < len(names):
        note = f"{note} The {len(names) - len(keep)} initial-state parameters are not drawn."
    figures["trace_cost"] = cost_fig
    figs = [{"id": "trace_cost", "label": "cost ½‖r‖² per iteration"}]
    if paths_fig is not None:
        figures["trace_paths"] = paths_fig
        figs.append({"id": "trace_paths", "label": "parameter paths"})
    return TraceSection(figs, note.strip())
