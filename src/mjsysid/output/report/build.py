"""The report's steps: check the arguments, compute every section, render and write the page."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.fit.audit import Audit
from mjsysid.fit.confidence import Confidence
from mjsysid.fit.result import OptimizeResult
from mjsysid.fit.status import FAR_ABOVE_NOISE, LANGUAGES, MessageContext, fit_context, reworded
from mjsysid.fit.validation import ValidationTable
from mjsysid.objective.predictions import SequencePrediction
from mjsysid.objective.protocols import ResidualFn
from mjsysid.objective.residual import ResidualFunction
from mjsysid.output.report.audit_section import audit_section, fit_audit
from mjsysid.output.report.content import (
    Direction,
    ParameterRow,
    SignalError,
    parameter_rows,
    residual_autocorrelation,
    signal_errors,
    with_verdicts,
)
from mjsysid.output.report.deps import require_report_dependencies
from mjsysid.output.report.format import error_rows, interval_method, table_rows, versions
from mjsysid.output.report.html import install, json_for_script, render_page
from mjsysid.output.report.plotly_source import PLOTLY_MODES, plotly_source
from mjsysid.output.report.sections import (
    CorrelationSection,
    correlation_section,
    jacobian_diagnostics,
    points_per_trace,
    signal_sections,
    summary,
    trace_section,
)
from mjsysid.output.report.stitching import headline_errors, whole_recording_errors
from mjsysid.output.report.validation_section import validation_section
from mjsysid.output.report.videos import video_clips, video_items
from mjsysid.output.report.warnings import ReportWarning, collect_warnings
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be
from mjsysid.util.limits import get_limit
from mjsysid.util.progress import Progress
from mjsysid.util.results_files import REPORT_ASSETS

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """The keyword options of :func:`~mjsysid.output.report.default_report` (see there)."""

    title: str | None
    videos: bool | str
    alpha: float
    max_points_per_trace: int
    max_total_points: int
    large_error: float
    large_interval: float
    cond_threshold: float
    correlation_threshold: float
    plotly_js: str
    video_fps: float
    video_size: tuple[int, int]
    max_video_seconds: float
    progress: Progress | None = None
    messages: str = "python"


@dataclass(frozen=True)
class FitInputs:
    """The fit a report shows (checked :func:`~mjsysid.output.report.default_report` arguments)."""

    ms_list: list[ModelSequences]
    initial_params: ParameterDict
    opt_params: ParameterDict
    opt_result: OptimizeResult
    residual_fn: ResidualFn | None
    names: list[str]
    validation: ValidationTable | None = None


# -- argument checks ------------------------------------------------------------------------------
def _check_report_numbers(**values: float) -> None:
    """Range checks of :func:`default_report`'s numeric options (named in the error)."""
    ranges = {
        "alpha": ("in (0, 1)", lambda v: 0 < v < 1),
        "large_error": ("> 0", lambda v: v > 0),
        "large_interval": ("> 0", lambda v: v > 0),
        "cond_threshold": ("> 1", lambda v: v > 1),
        "correlation_threshold": ("in (0, 1]", lambda v: 0 < v <= 1),
        "video_fps": ("> 0", lambda v: v > 0),
        "max_video_seconds": ("> 0", lambda v: v > 0),
    }
    for name, value in values.items():
        expected, ok = ranges[name]
        number = isinstance(value, int | float | np.floating) and not isinstance(value, bool)
        if not (number and math.isfinite(value) and ok(value)):
            raise ValueError(must_be(name, f"a finite number {expected}", value))


def check_options(opts: ReportOptions) -> None:
    """Raises ValueError for the first option out of range (none is changed)."""
    if not (isinstance(opts.videos, bool) or opts.videos == "auto"):
        raise ValueError(must_be("videos", "'auto', True or False", opts.videos))
    if opts.plotly_js not in PLOTLY_MODES:
        raise ValueError(must_be("plotly_js", f"one of {list(PLOTLY_MODES)}", opts.plotly_js))
    if opts.messages not in LANGUAGES:
        raise ValueError(must_be("messages", f"one of {list(LANGUAGES)}", opts.messages))
    _check_report_numbers(
        alpha=opts.alpha,
        large_error=opts.large_error,
        large_interval=opts.large_interval,
        cond_threshold=opts.cond_threshold,
        correlation_threshold=opts.correlation_threshold,
        video_fps=opts.video_fps,
        max_video_seconds=opts.max_video_seconds,
    )


def _check_sizes(opts: ReportOptions) -> None:
    if not isinstance(opts.max_points_per_trace, int) or opts.max_points_per_trace < 10:
        raise ValueError(
            must_be("max_points_per_trace", "an integer >= 10", opts.max_points_per_trace)
        )
    if not isinstance(opts.max_total_points, int) or opts.max_total_points < 1000:
        raise ValueError(must_be("max_total_points", "an integer >= 1000", opts.max_total_points))
    size = opts.video_size
    if not (
        isinstance(size, tuple | list)
        and len(size) == 2
        and all(isinstance(v, int) and v > 0 for v in size)
    ):
        raise ValueError(must_be("video_size", "(width, height) positive integers", size))


def _model_sequences_list(models_sequences: Any) -> list[ModelSequences]:
    ms_list = (
        [models_sequences]
        if isinstance(models_sequences, ModelSequences)
        else list(models_sequences)
    )
    if not ms_list or not all(isinstance(m, ModelSequences) for m in ms_list):
        raise TypeError(
            must_be(
                "models_sequences", "a ModelSequences or a non-empty list of them", models_sequences
            )
        )
    return ms_list


def check_fit(
    models_sequences: Any,
    initial_params: Any,
    opt_params: Any,
    opt_result: Any,
    residual_fn: Any,
    save_dir: Any,
    opts: ReportOptions,
) -> FitInputs:
    """The checked fit; TypeError/ValueError for the first bad argument."""
    if not isinstance(opt_result, OptimizeResult):
        raise TypeError(
            must_be(
                "opt_result", "the OptimizeResult of mjsysid.optimize", type(opt_result).__name__
            )
        )
    if not isinstance(save_dir, str | os.PathLike):
        raise TypeError(must_be("save_dir", "a str or os.PathLike folder", type(save_dir).__name__))
    ms_list = _model_sequences_list(models_sequences)
    for what, p in (("initial_params", initial_params), ("opt_params", opt_params)):
        if not isinstance(p, ParameterDict):
            raise TypeError(must_be(what, "a ParameterDict", type(p).__name__))
    _check_sizes(opts)
    names = list(opt_result.parameter_names or opt_params.get_non_frozen_parameter_names())
    if np.size(opt_result.x) != opt_params.size:
        raise ValueError(
            must_be(
                "opt_params",
                f"the fitted parameters of opt_result ({np.size(opt_result.x)} free values)",
                f"{opt_params.size} free values",
            )
        )
    return FitInputs(ms_list, initial_params, opt_params, opt_result, residual_fn, names)


# -- analysis -------------------------------------------------------------------------------------
def _confidence(
    fit: FitInputs, confidence: Confidence | None, alpha: float, notes: list[str]
) -> Confidence | None:
    """``confidence``, or computed at level ``1 − alpha`` (``None`` with a note if it fails)."""
    if confidence is not None:
        return confidence
    from mjsysid.fit.confidence import compute_confidence

    try:
        return compute_confidence(fit.opt_result, fit.residual_fn, alpha, fit.opt_params)
    except (ValueError, TypeError, AttributeError, np.linalg.LinAlgError) as e:
        notes.append(f"Confidence intervals could not be computed: {e}")
    return None


@dataclass(frozen=True)
class Predictions:
    """The predictions with the identified and initial parameters, and why some are missing."""

    identified: list[SequencePrediction] | None = None
    initial: list[SequencePrediction] | None = None
    reason: str = ""


def _predictions(fit: FitInputs, notes: list[str]) -> Predictions:
    """Both predictions (the initial one only after the identified one), failures as notes."""
    rf = fit.residual_fn
    if not isinstance(rf, ResidualFunction):
        return Predictions(
            reason="No signal plots: pass the ResidualFunction from build_residual_fn as "
            "residual_fn to draw measured vs predicted signals."
        )
    got: dict[str, list[SequencePrediction]] = {}
    reason = ""
    for which, params in (("identified", fit.opt_params), ("initial", fit.initial_params)):
        if which == "initial" and got.get("identified") is None:
            break
        try:
            got[which] = rf.predict(None, params)
        except Exception as e:  # shown in the report instead of failing it
            logger.warning("default_report: %s predictions failed: %s", which, e, exc_info=True)
            reason = (
                f"The predictions with the {which} parameters could not be "
                f"computed: {type(e).__name__}: {e}"
            )
            notes.append(reason)
    return Predictions(got.get("identified"), got.get("initial"), reason)


@dataclass(frozen=True)
class Analysis:
    """Everything the report computes from the fit before drawing the trace and videos."""

    conf: Confidence | None
    rows: list[ParameterRow]
    correlation: CorrelationSection
    condition: float
    directions: list[Direction]
    preds: Predictions
    errors: list[SignalError]
    sequences: list[dict[str, Any]]
    warnings: list[ReportWarning]
    context: MessageContext
    whole_errors: list[SignalError] = dataclasses.field(default_factory=list)
    audit: Audit | None = None
    audit_reason: str = ""


def message_context(fit: FitInputs, language: str) -> MessageContext:
    """What the report's advice may name: the reader's ``language`` and the causes and
    remedies that can apply to this fit (its models, windows, stages, outer stages)."""
    names = [str(n) for ms in fit.ms_list for n in ms.sequence_name]
    res = fit.opt_result
    return fit_context(
        [ms.model for ms in fit.ms_list], names, language, staged=len(res.stages) > 1,
        searched=res.global_search is not None or res.multistart is not None,
    )  # fmt: skip


def analyse(
    fit: FitInputs, confidence: Any, opts: ReportOptions, figures: dict[str, Any]
) -> Analysis:
    """Intervals, audit, correlation, identifiability, signals and warnings (figures into
    ``figures``). Every figure the page shows more than once is computed here once: κ, the
    audit (read by the table's verdicts and the audit section), the signal errors the fit
    table leads with (read by the warnings too)."""
    notes: list[str] = []
    context = message_context(fit, opts.messages)
    conf = _confidence(fit, confidence, opts.alpha, notes)
    audit, audit_reason = fit_audit(fit.opt_result, fit.opt_params, fit.names, opts.alpha, context)
    rows = parameter_rows(
        fit.initial_params, fit.opt_params, conf, large_interval=opts.large_interval,
        models={ms.name: ms.model for ms in fit.ms_list},
    )  # fmt: skip
    rows = with_verdicts(rows, audit)
    nuisance = frozenset(r.name for r in rows if r.nuisance)
    correlation = correlation_section(
        conf, notes, opts.correlation_threshold, figures, context, nuisance
    )
    condition, directions = jacobian_diagnostics(fit.opt_result, fit.names)
    preds = _predictions(fit, notes)
    p0, p1 = preds.initial, preds.identified
    errors = signal_errors(p0, p1) if p1 else []
    whole = whole_recording_errors(p0, p1) if p1 else []
    sequences = []
    if p1:
        n_points = points_per_trace(
            p1, opts.max_points_per_trace, opts.max_total_points, get_limit("max_report_signals")
        )
        sequences = signal_sections(fit.ms_list, p0, p1, n_points, figures, context)
    warnings = collect_warnings(
        sorted(rows, key=lambda r: r.nuisance),  # the physical parameters named first
        context=context,
        opt_result=fit.opt_result,
        condition=condition,
        directions=directions,
        correlations=correlation.pairs,
        errors=headline_errors(errors, whole),
        large_error=opts.large_error,
        cond_threshold=opts.cond_threshold,
        notes=notes,
        autocorrelation=residual_autocorrelation(p1) if p1 else (),
        interval_method="linear" if conf is None else conf.method,
    )
    return Analysis(
        conf, rows, correlation, condition, directions, preds, errors, sequences, warnings,
        context, whole, audit, audit_reason,
    )  # fmt: skip


# -- the page -------------------------------------------------------------------------------------
def page(
    fit: FitInputs, confidence: Any, opts: ReportOptions, plotly_offline: Any
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The template's context and the files of ``report_assets/`` (name -> bytes)."""
    figures: dict[str, Any] = {}
    a = analyse(fit, confidence, opts, figures)
    trace = trace_section(
        fit.opt_result, fit.opt_params, fit.names, figures,
        start=fit.initial_params.as_vector() if fit.initial_params.size == len(fit.names) else None,
        nuisance=frozenset(r.name for r in a.rows if r.nuisance),
    )  # fmt: skip
    clips, videos_reason = video_clips(
        fit.ms_list,
        fit.initial_params,
        fit.opt_params,
        a.preds.initial,
        a.preds.identified,
        opts.videos,
        opts.video_fps,
        (int(opts.video_size[0]), int(opts.video_size[1])),
        opts.max_video_seconds,
        progress=opts.progress,
    )
    videos, assets = video_items(clips, opts.video_size, REPORT_ASSETS)
    plotly = plotly_source(opts.plotly_js, plotly_offline)
    assets.update(plotly.assets)
    plotly_version = str(plotly_offline.get_plotlyjs_version())
    alpha_used = a.conf.alpha if a.conf is not None else None
    context = _context(fit, opts, a, figures)
    said = summary(
        fit.ms_list,
        a.rows,
        fit.opt_result,
        a.condition,
        alpha_used,
        versions(plotly_version),
        interval_method(a.conf),
    )
    said["message"] = reworded(said["message"], said["status"], a.context)
    said["bootstrap"] = a.conf is not None and a.conf.method == "bootstrap"
    # a converged fit whose residual is far above its noise is no fit of the data: its badge
    # warns, as its message says (mjsysid.fit.status: FAR_ABOVE_NOISE)
    white = a.conf.whiteness if a.conf is not None else None
    far = white is not None and white.judged and white.noise_ratio > FAR_ABOVE_NOISE
    said["reproduces"] = bool(said["success"]) and not far
    context.update(
        summary=said,
        plotly_inline=plotly.inline,
        plotly_sources_json=json_for_script(plotly.sources),
        plotly_where=plotly.where,
        trace_figs=trace.figs,
        trace_note=trace.note,
        trace_reason=trace.reason,
        videos=videos,
        videos_reason=videos_reason,
    )
    return context, assets


def _context(
    fit: FitInputs, opts: ReportOptions, a: Analysis, figures: dict[str, Any]
) -> dict[str, Any]:
    """The template variables of the title, warnings, tables, signals and correlation."""
    physical = [r for r in a.rows if not r.nuisance]
    nuisance = [r for r in a.rows if r.nuisance]
    table = table_rows(physical)
    errors = error_rows(a.errors, opts.large_error, a.whole_errors)
    headline = [e for e in errors if not e["detail"]]
    return {
        "title": opts.title or ("System identification: " + ", ".join(m.name for m in fit.ms_list)),
        "warnings": a.warnings,
        "param_rows": table,
        "n_flagged": sum(1 for r in table if any(f["css"] != "frozen" for f in r["flags"])),
        "nuisance_rows": table_rows(nuisance),
        "n_nuisance_flagged": sum(1 for r in nuisance if r.flags),
        "nuisance_pairs": len(a.correlation.nuisance_pairs),
        "interval_notes": (
            [*a.conf.whiteness_caveats(), *(str(n) for n in a.conf.notes)]
            if a.conf is not None
            else []
        ),
        "error_rows": errors,
        "n_error_flagged": sum(1 for e in headline if e["flagged"]),
        "n_error_detail": len(errors) - len(headline),
        "large_error": opts.large_error,
        "signals_reason": a.preds.reason,
        "sequences": a.sequences,
        "correlation_fig": a.correlation.fig,
        "correlation_reason": a.correlation.reason,
        "correlation_note": a.correlation.note,
        "validation": validation_section(
            fit.validation,
            opts.max_points_per_trace,
            figures,
            {m.name: m.model for m in fit.ms_list},
        ),
        "audit": audit_section(a.audit, a.audit_reason, a.rows, opts.alpha),
        "figures_json": json_for_script(figures),
    }


def write_report(
    jinja2: Any,
    plotly_offline: Any,
    fit: FitInputs,
    confidence: Any,
    opts: ReportOptions,
    save_dir: str | os.PathLike[str],
) -> Path:
    """Computes, renders and atomically writes the report; the path of ``report.html``."""
    context, assets = page(fit, confidence, opts, plotly_offline)
    return install(Path(save_dir), render_page(jinja2, context), assets)


# -- the report -----------------------------------------------------------------------------------
def default_report(
    models_sequences: Sequence[ModelSequences] | ModelSequences,
    initial_params: ParameterDict,
    opt_params: ParameterDict,
    opt_result: OptimizeResult,
    residual_fn: ResidualFn | None,
    save_dir: str | os.PathLike[str],
    *,
    title: str | None = None,
    videos: bool | str = "auto",
    confidence: Confidence | None = None,
    alpha: float = 0.05,
    max_points_per_trace: int = 1000,
    max_total_points: int = 2_000_000,
    large_error: float = 0.2,
    large_interval: float = 0.5,
    cond_threshold: float = 1e6,
    correlation_threshold: float = 0.95,
    inline_plotly: bool = False,
    plotly_js: str = "shared",
    video_fps: float = 15.0,
    video_size: tuple[int, int] = (320, 240),
    max_video_seconds: float = 10.0,
    validation: ValidationTable | None = None,
    progress: Progress | None = None,
    messages: str = "python",
) -> Path:
    """Writes ``save_dir/report.html`` (and ``save_dir/report_assets/``) for a fit.

    Args:
      models_sequences: The data of the fit (a list, or one :class:`ModelSequences`).
      initial_params, opt_params: ``ParameterDict`` before and after :func:`mjsysid.fit.optimize`.
      opt_result: The :class:`~mjsysid.fit.result.OptimizeResult`.
      residual_fn: The :class:`~mjsysid.objective.residual.ResidualFunction` used for the fit; its
        ``predict`` draws the signals. ``None`` (or a plain callable) leaves the signal
        sections out, with a note.
      save_dir: Folder (``str`` or path), created if missing.
      title: Page title (default: ``"System identification: <model names>"``).
      videos: ``"auto"`` (default): render videos when an offscreen OpenGL backend works, and
        say why not otherwise; ``True``: the same, and log a warning when none works;
        ``False``: no videos. Rendering problems never fail the report.
      confidence: A :class:`~mjsysid.output.results.Confidence`; default: computed with
        :func:`mjsysid.fit.confidence.compute_confidence` at level ``1 − alpha``.
      alpha: Significance level of the intervals when they are computed here.
      max_points_per_trace: Samples kept per plotted line (min-max decimation keeps peaks).
      max_total_points: Budget of plotted samples over all signal figures (bounds the file
        size for many long sequences); lines get fewer samples, but at least 100 each.
      large_error: Signals with NRMSE above this are flagged.
      large_interval: Parameters with ``half_width > large_interval·|value|`` are flagged.
      cond_threshold: Warn when κ(JᵀJ) (unit-norm columns) exceeds this.
      correlation_threshold: Warn about parameter pairs with ``|ρ|`` at least this.
      inline_plotly: Put plotly.js inside ``report.html`` (one file, larger by plotly.js):
        the same as ``plotly_js="inline"``.
      plotly_js: Where the page reads plotly.js from (:mod:`.plotly_source`): ``"shared"``
        (default: the installed plotly package's own copy, by its absolute path; nothing
        copied), ``"copy"`` (into ``report_assets/``: the folder opens on any machine) or
        ``"inline"`` (inside ``report.html``).
      video_fps, video_size, max_video_seconds: Frames per second, ``(width, height)`` in
        pixels, and the length of simulated time shown per sequence.
      validation: A :class:`~mjsysid.fit.validation.ValidationTable` (from
        :func:`~mjsysid.fit.validation.validate`): a section with its fit percentages and
        overlays of the held-out sequences (``None``: no such section).
      progress: Called as ``progress(videos done, videos)`` as the sequences' videos are
        rendered (the slow part of a report); e.g. a
        :class:`~mjsysid.util.progress.ProgressBar`. The report itself never prints.
      messages: The advice's words: ``"python"`` (default), ``"file"`` (experiment-file
        keys and flags, as ``mjsysid fit`` writes it) or ``"both"``; only causes and
        remedies that can apply are named (:class:`~mjsysid.fit.status.MessageContext`).

    Returns:
      Path of ``report.html``.

    Raises:
      ImportError: jinja2 or plotly is missing (``pip install -e '.[report]'`` in the mjsysid
        checkout).
      TypeError, ValueError: Bad arguments.
      OSError: The folder cannot be created or written. Writing is atomic: after an error
        no partial ``report.html`` is left (a previous complete report stays).
    """
    jinja2, plotly_offline = require_report_dependencies()
    opts = ReportOptions(
        title=title,
        videos=videos,
        alpha=alpha,
        max_points_per_trace=max_points_per_trace,
        max_total_points=max_total_points,
        large_error=large_error,
        large_interval=large_interval,
        cond_threshold=cond_threshold,
        correlation_threshold=correlation_threshold,
        plotly_js="inline" if inline_plotly is True else plotly_js,
        video_fps=video_fps,
        video_size=video_size,
        max_video_seconds=max_video_seconds,
        progress=progress,
        messages=messages,
    )
    check_options(opts)
    fit = check_fit(
        models_sequences, initial_params, opt_params, opt_result, residual_fn, save_dir, opts
    )
    if validation is not None:
        fit = dataclasses.replace(fit, validation=validation)
    return write_report(jinja2, plotly_offline, fit, confidence, opts, save_dir)
