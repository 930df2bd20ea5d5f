"""The HTML report a user opens after a fit: :func:`default_report`.

One ``report.html`` plus a ``report_assets/`` folder (plotly.js copied from the installed plotly
package, and videos) that opens offline: no CDN and no network request. Sections: summary,
warnings in words, a sortable/filterable/paged parameter table (readable with hundreds of
parameters), fit per signal, interactive overlays of measured vs initial vs identified signals
with residuals and controls, the parameter correlation heatmap, the optimisation trace, and
videos when an offscreen OpenGL backend works (otherwise the section says why).

The data of every section is computed by small pure functions in :mod:`mjsysid.output.report._data`
(re-exported here) and unit-tested separately; this module only assembles them.

jinja2 and plotly are imported when a report is made (``pip install 'mjsysid[report]'``).
"""

from __future__ import annotations

import datetime as _dt
import importlib.resources
import json
import logging
import math
import os
import platform
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.output.report._data import (
    Direction,
    ParameterRow,
    ReportWarning,
    ResidualCorrelation,
    SignalError,
    StageTrace,
    Trace,
    at_bound_flags,
    collect_warnings,
    column_labels,
    column_signals,
    condition_number,
    correlation_from_covariance,
    decimate_indices,
    nrmse,
    optimisation_trace,
    parameter_rows,
    relative_change,
    residual_autocorrelation,
    signal_errors,
    strong_correlations,
    unidentifiable_directions,
)
from mjsysid.util.errors import must_be

logger = logging.getLogger(__name__)

REPORT_FILE = "report.html"
ASSETS_DIR = "report_assets"
INSTALL_HINT = "pip install 'mjsysid[report]'"


def missing_dependencies() -> list[str]:
    """Report dependencies that are not installed (``[]`` when a report can be made).

    Checks without importing them (cheap; for CLIs that want to say so up front).
    """
    import importlib.util

    return [
        m for m in ("jinja2", "plotly", "matplotlib", "PIL") if importlib.util.find_spec(m) is None
    ]


def _require_report_dependencies() -> tuple[Any, Any]:
    """``(jinja2, plotly.offline)`` or an ImportError saying how to install them."""
    try:
        import jinja2
        import plotly.offline
    except ImportError as e:
        raise ImportError(
            f"default_report needs the optional report dependencies (jinja2, plotly, "
            f"matplotlib), missing {e.name!r}: {INSTALL_HINT}"
        ) from e
    return jinja2, plotly.offline


# -- formatting -----------------------------------------------------------------------------------
def _fmt(v: float, digits: int = 6) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{digits}g}"


def _num_attr(v: float) -> str:
    """Sort key for the table (``""`` sorts last)."""
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "1e308" if v > 0 else "-1e308"
    return repr(float(v))


def _percent(v: float) -> str:
    return "—" if not math.isfinite(v) else f"{100.0 * v:+.3g} %"


_FLAG_CSS = {
    "frozen": "frozen",
    "at lower bound": "bound",
    "at upper bound": "bound",
    "unidentifiable": "unident",
    "large interval": "large",
}


def _table_rows(rows: Sequence[ParameterRow]) -> list[dict[str, Any]]:
    sizes: dict[str, int] = {}
    for r in rows:
        sizes[r.group] = sizes.get(r.group, 0) + 1
    out = []
    prev = None
    for r in rows:
        hw = r.half_width
        if math.isnan(hw):
            interval = "—"
        elif math.isinf(hw):
            interval = "(−∞, ∞)"
        else:
            interval = f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]"
        flags = [{"text": f, "css": _FLAG_CSS.get(f, "")} for f in r.flags]
        out.append(
            {
                "group": r.group,
                "name": r.name,
                "kind": r.kind,
                "group_start": prev is not None
                and r.group != prev
                and (sizes[r.group] > 1 or sizes[prev] > 1),
                "flags": flags,
                "search": " ".join([r.group, r.name, r.kind, *r.flags]).lower(),
                "v": {
                    k: _num_attr(getattr(r, k))
                    for k in (
                        "nominal",
                        "initial",
                        "identified",
                        "lower",
                        "upper",
                        "half_width",
                        "ci_low",
                        "rel_change",
                    )
                },
                "s": {
                    "nominal": _fmt(r.nominal),
                    "initial": _fmt(r.initial),
                    "identified": _fmt(r.identified),
                    "lower": _fmt(r.lower),
                    "upper": _fmt(r.upper),
                    "half_width": "—"
                    if math.isnan(hw)
                    else ("∞" if math.isinf(hw) else _fmt(hw, 3)),
                    "interval": interval,
                    "rel_change": _percent(r.rel_change),
                },
            }
        )
        prev = r.group
    return out


def _error_rows(errors: Sequence[SignalError], large_error: float) -> list[dict[str, Any]]:
    return [
        {
            "sequence": e.sequence,
            "column": e.column,
            "flagged": bool(not np.isfinite(e.identified) or e.identified > large_error),
            "search": f"{e.sequence} {e.column}".lower(),
            "initial": _fmt(e.initial, 3),
            "identified": _fmt(e.identified, 3),
            "fit": "—" if not np.isfinite(e.identified) else f"{e.fit_percent:.1f}",
            "v_initial": _num_attr(e.initial),
            "v_identified": _num_attr(e.identified),
            "v_fit": _num_attr(e.fit_percent),
        }
        for e in errors
    ]


def _json_for_script(obj: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _versions(plotly_js_version: str) -> dict[str, str]:
    from mjsysid._version import __version__

    return {
        "mjsysid": __version__,
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "plotly.js": plotly_js_version,
    }


# -- sections -------------------------------------------------------------------------------------
def _summary(
    ms_list: Sequence[ModelSequences],
    rows: Sequence[ParameterRow],
    opt_result: Any,
    condition: float,
    alpha: float | None,
    versions: dict[str, str],
) -> dict[str, Any]:
    models = []
    for ms in ms_list:
        m = ms.model
        seqs = []
        for name, _, _, meas in ms.sequences():
            t0, t1 = float(meas.times[0]), float(meas.times[-1])
            seqs.append(
                {
                    "name": name,
                    "detail": f"{meas.times.size} samples, {t1 - t0:.4g} s, "
                    f"{max(meas.n_signals, 1) if meas.signal_mapping else meas.dim} signals",
                }
            )
        models.append(
            {
                "name": ms.name,
                "sequences": seqs,
                "detail": (
                    f"{len(ms)} sequence(s); {m.nq} qpos, {m.nv} dofs, {m.nu} actuators, "
                    f"{m.nsensor} "
                    f"sensors, timestep {m.opt.timestep:g} s"
                ),
            }
        )
    cost0 = float(getattr(opt_result, "initial_cost", math.nan))
    cost = float(getattr(opt_result, "cost", math.nan))
    reduction = ""
    if math.isfinite(cost0) and cost0 > 0 and math.isfinite(cost):
        reduction = f"{100.0 * (1.0 - cost / cost0):.4g} % lower"
    wall = float(getattr(opt_result, "wall_time", math.nan))
    fun = getattr(opt_result, "fun", None)
    return {
        "status": str(getattr(opt_result, "status", "?")),
        "success": bool(getattr(opt_result, "success", False)),
        "message": str(getattr(opt_result, "message", "")),
        "optimizer": str(getattr(opt_result, "optimizer", "?")),
        "initial_cost": _fmt(cost0),
        "cost": _fmt(cost),
        "reduction": reduction,
        "nit": getattr(opt_result, "nit", "?"),
        "nfev": getattr(opt_result, "nfev", "?"),
        "njev": getattr(opt_result, "njev", "?"),
        "stages": [
            f"{100.0 * float(st['horizon']):g} %: {st['nit']} iterations, "
            f"{st['nfev']} evaluations, cost {_fmt(float(st['cost']))}"
            for st in (getattr(opt_result, "extras", None) or {}).get("stages", [])
        ],
        "wall_time": "—" if not math.isfinite(wall) else f"{wall:.3g} s",
        "n_free": sum(1 for r in rows if not r.frozen),
        "n_frozen": sum(1 for r in rows if r.frozen),
        "n_groups": len({r.group for r in rows}),
        "n_residuals": "—" if fun is None else int(np.asarray(fun).size),
        "condition": "—"
        if math.isnan(condition)
        else ("∞" if math.isinf(condition) else f"{condition:.3g}"),
        "confidence": "—" if alpha is None else f"{100.0 * (1.0 - alpha):g} %",
        "models": models,
        "versions": versions,
        "generated": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def points_per_trace(preds: Sequence[Any], max_points: int, max_total_points: int) -> int:
    """Samples per plotted line so that all signal figures together stay within budget.

    Every measured column draws up to 5 lines (measured, initial, identified and two
    residuals) and every actuator one; the result lies in ``[min(100, max_points),
    max_points]``.
    """
    lines = sum(5 * p.measured_used.data.shape[1] + p.control.shape[1] for p in preds)
    if lines == 0:
        return max_points
    return int(min(max_points, max(min(100, max_points), max_total_points // lines)))


def _signal_sections(
    ms_list: Sequence[ModelSequences],
    preds0: Sequence[Any] | None,
    preds1: Sequence[Any],
    max_points: int,
    figures: dict[str, Any],
) -> list[dict[str, Any]]:
    from mjsysid.output.report._figures import controls_figure, signal_figure

    by_name = {ms.name: ms for ms in ms_list}
    out = []
    for i, p1 in enumerate(preds1):
        p0 = preds0[i] if preds0 is not None else None
        meas = p1.measured_used
        pred = p1.predicted_at_measured
        init = p0.predicted_at_measured if p0 is not None else None
        if init is not None and init.data.shape != pred.data.shape:
            init = None
        ms = by_name.get(p1.model_name)
        controls_fig = None
        if p1.control.shape[1] and p1.control.shape[0] == p1.predicted.times.size:
            names = (
                [ms.model.actuator(k).name or f"actuator {k}" for k in range(ms.model.nu)]
                if ms is not None and ms.model.nu == p1.control.shape[1]
                else [f"u{k}" for k in range(p1.control.shape[1])]
            )
            controls_fig = f"s{i}u"
            figures[controls_fig] = controls_figure(
                p1.predicted.times, p1.control, names, max_points
            )
        groups: dict[str, list[dict[str, str]]] = {}
        labels = column_labels(meas)
        sigs = column_signals(meas)
        same = pred.data.shape == meas.data.shape
        note = (
            ""
            if same
            else (
                f"The prediction the residual compared ({pred.data.shape[1]} columns) does not "
                "match "
                f"the measured series ({meas.data.shape[1]} columns) column by column (a custom "
                "residual), so no per-signal overlay is drawn."
            )
        )
        for c in range(meas.data.shape[1] if same else 0):
            fid = f"s{i}c{c}"
            figures[fid] = signal_figure(
                labels[c],
                meas.times,
                meas.data[:, c],
                pred.data[:, c],
                None if init is None else init.data[:, c],
                max_points,
            )
            groups.setdefault(sigs[c], []).append({"id": fid, "label": labels[c]})
        t0, t1 = float(meas.times[0]), float(meas.times[-1])
        out.append(
            {
                "label": f"{p1.model_name}/{p1.sequence_name}",
                "detail": f"{meas.times.size} samples over {t1 - t0:.4g} s, {len(groups)} signals",
                "controls_fig": controls_fig,
                "note": note,
                "groups": [{"name": k, "figs": v} for k, v in groups.items()],
            }
        )
    return out


def _videos(
    ms_list: Sequence[ModelSequences],
    initial_params: Any,
    opt_params: Any,
    preds0: Sequence[Any] | None,
    preds1: Sequence[Any] | None,
    videos: bool | str,
    fps: float,
    size: tuple[int, int],
    max_seconds: float,
) -> tuple[list[Any], str]:
    """Encoded clips and the reason text when some or all are missing."""
    from mjsysid.output.plotting import OffscreenRenderingError, render_rollout
    from mjsysid.output.report._video import (
        VideoClip,
        crop_states,
        encode_gif,
        measured_qpos,
        states_from_qpos,
    )
    from mjsysid.params.apply import apply_param_modifiers

    if videos is False:
        return [], "Videos are turned off (videos=False)."
    if not preds1:
        return [], "No videos: the predictions are not available (see the Signals section)."
    by_name = {ms.name: ms for ms in ms_list}
    clips: list[VideoClip] = []
    problems: list[str] = []
    width, height = size
    models: dict[tuple[str, str], mujoco.MjModel] = {}

    def model_for(ms: ModelSequences, which: str) -> mujoco.MjModel:
        key = (ms.name, which)
        if key not in models:
            models[key] = apply_param_modifiers(
                opt_params if which == "id" else initial_params, ms.spec
            )
        return models[key]

    for i, p1 in enumerate(preds1):
        label = f"{p1.model_name}/{p1.sequence_name}"
        ms = by_name.get(p1.model_name)
        if ms is None:
            continue
        try:
            model_id = model_for(ms, "id")
            st1 = crop_states(p1.state, max_seconds)
            qpos, missing = measured_qpos(ms.model, p1.measured)
            if qpos is not None:
                sel = p1.measured.times <= p1.measured.times[0] + max_seconds + 1e-12
                ghost = states_from_qpos(model_id, st1[0], p1.measured.times[sel], qpos[sel])
                ghost_model = model_id
                caption = (
                    "solid: identified model; translucent green: measured joint "
                    "positions (replayed kinematically)"
                )
            elif preds0 is not None:
                ghost = crop_states(preds0[i].state, max_seconds)
                ghost_model = model_for(ms, "init")
                caption = (
                    "solid: identified model; translucent green: initial parameters. The "
                    "measured motion is not shown: the recording does not hold the "
                    f"positions of joints {missing}"
                )
            else:
                ghost, ghost_model, caption = None, None, "identified model"
            state = [st1] if ghost is None else [st1, ghost]
            model = [model_id] if ghost_model is None else [model_id, ghost_model]
            frames = render_rollout(model, None, state, fps, width=width, height=height)
        except OffscreenRenderingError as e:
            if videos is True:
                logger.warning("default_report: no videos: %s", e)
            return clips, f"No videos: {e}."
        except Exception as e:  # a video must never break the report; the reason is shown
            logger.warning("default_report: video of %s failed: %s", label, e, exc_info=True)
            problems.append(f"{label}: {type(e).__name__}: {e}")
            continue
        if not frames:
            continue
        duration = float(st1[-1, 0] - st1[0, 0])
        cut = float(p1.state[-1, 0] - p1.state[0, 0]) > duration + 1e-9
        if cut:
            caption += f" (first {max_seconds:g} s)"
        clips.append(VideoClip(label, encode_gif(frames, fps), caption, len(frames)))
    reason = ""
    if problems:
        reason = "Some videos could not be rendered: " + "; ".join(problems)
    return clips, reason


# -- writing --------------------------------------------------------------------------------------
def _write_file(path: Path, payload: bytes) -> None:
    """Writes and flushes one file (a seam for tests that simulate a failing disk)."""
    with open(path, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())


def _install(folder: Path, html: str, assets: dict[str, bytes]) -> Path:
    """Writes everything into a private temporary folder, then moves it into place.

    ``report.html`` is moved last and atomically (``os.replace``): after an error there is
    either the previous complete report or none, never a partial file.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(f"cannot create the report folder {str(folder)!r}: {e}") from e
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=folder))
    final_assets = folder / ASSETS_DIR
    old_assets = tmp / "previous_assets"
    moved_old = False
    try:
        new_assets = tmp / ASSETS_DIR
        new_assets.mkdir()
        for name, payload in assets.items():
            _write_file(new_assets / name, payload)
        tmp_html = tmp / REPORT_FILE
        _write_file(tmp_html, html.encode("utf-8"))
        if final_assets.exists():
            os.replace(final_assets, old_assets)
            moved_old = True
        os.replace(new_assets, final_assets)
        moved_old = False
        os.replace(tmp_html, folder / REPORT_FILE)
    except BaseException:
        if moved_old and not final_assets.exists():
            os.replace(old_assets, final_assets)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder / REPORT_FILE


def _template_text(name: str) -> str:
    return (importlib.resources.files("mjsysid.output.report") / name).read_text(encoding="utf-8")


# -- the report -----------------------------------------------------------------------------------
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


def default_report(
    models_sequences: Sequence[ModelSequences] | ModelSequences,
    initial_params: Any,
    opt_params: Any,
    opt_result: Any,
    residual_fn: Any,
    save_dir: str | os.PathLike[str],
    *,
    title: str | None = None,
    videos: bool | str = "auto",
    confidence: Any = None,
    alpha: float = 0.05,
    max_points_per_trace: int = 1000,
    max_total_points: int = 2_000_000,
    large_error: float = 0.2,
    large_interval: float = 0.5,
    cond_threshold: float = 1e6,
    correlation_threshold: float = 0.95,
    inline_plotly: bool = False,
    video_fps: float = 30.0,
    video_size: tuple[int, int] = (320, 240),
    max_video_seconds: float = 10.0,
) -> Path:
    """Writes ``save_dir/report.html`` (and ``save_dir/report_assets/``) for a fit.

    Args:
      models_sequences: The data of the fit (a list, or one :class:`ModelSequences`).
      initial_params, opt_params: ``ParameterDict`` before and after :func:`mjsysid.fit.optimize`.
      opt_result: The :class:`~mjsysid.fit.optimize.OptimizeResult`.
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
        size, about 20 bytes per sample, for many long sequences); lines get fewer samples,
        but at least 100 each.
      large_error: Signals with NRMSE above this are flagged.
      large_interval: Parameters with ``half_width > large_interval·|value|`` are flagged.
      cond_threshold: Warn when κ(JᵀJ) (unit-norm columns) exceeds this.
      correlation_threshold: Warn about parameter pairs with ``|ρ|`` at least this.
      inline_plotly: Put plotly.js inside ``report.html`` (one file, ~5 MB larger) instead
        of ``report_assets/``.
      video_fps, video_size, max_video_seconds: Frames per second, ``(width, height)`` in
        pixels, and the length of simulated time shown per sequence.

    Returns:
      Path of ``report.html``.

    Raises:
      ImportError: jinja2 or plotly is missing (``pip install 'mjsysid[report]'``).
      TypeError, ValueError: Bad arguments.
      OSError: The folder cannot be created or written. Writing is atomic: after an error
        no partial ``report.html`` is left (a previous complete report stays).
    """
    jinja2, plotly_offline = _require_report_dependencies()
    if not (isinstance(videos, bool) or videos == "auto"):
        raise ValueError(must_be("videos", "'auto', True or False", videos))
    _check_report_numbers(
        alpha=alpha,
        large_error=large_error,
        large_interval=large_interval,
        cond_threshold=cond_threshold,
        correlation_threshold=correlation_threshold,
        video_fps=video_fps,
        max_video_seconds=max_video_seconds,
    )
    for what, value in (("opt_result", opt_result),):
        if not all(hasattr(value, a) for a in ("x", "fun", "jac", "success", "message")):
            raise TypeError(
                must_be(what, "the OptimizeResult of mjsysid.optimize", type(value).__name__)
            )
    if not isinstance(save_dir, str | os.PathLike):
        raise TypeError(must_be("save_dir", "a str or os.PathLike folder", type(save_dir).__name__))
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
    for what, p in (("initial_params", initial_params), ("opt_params", opt_params)):
        if not (hasattr(p, "items") and hasattr(p, "get_non_frozen_parameter_names")):
            raise TypeError(must_be(what, "a ParameterDict", type(p).__name__))
    if not isinstance(max_points_per_trace, int) or max_points_per_trace < 10:
        raise ValueError(must_be("max_points_per_trace", "an integer >= 10", max_points_per_trace))
    if not isinstance(max_total_points, int) or max_total_points < 1000:
        raise ValueError(must_be("max_total_points", "an integer >= 1000", max_total_points))
    if not (
        isinstance(video_size, tuple | list)
        and len(video_size) == 2
        and all(isinstance(v, int) and v > 0 for v in video_size)
    ):
        raise ValueError(must_be("video_size", "(width, height) positive integers", video_size))
    folder = Path(save_dir)
    names = list(
        getattr(opt_result, "parameter_names", None) or opt_params.get_non_frozen_parameter_names()
    )
    if np.size(opt_result.x) != opt_params.size:
        raise ValueError(
            must_be(
                "opt_params",
                f"the fitted parameters of opt_result ({np.size(opt_result.x)} free values)",
                f"{opt_params.size} free values",
            )
        )
    notes: list[str] = []

    # Confidence intervals and correlation.
    conf = confidence
    if conf is None:
        from mjsysid.fit.confidence import compute_confidence

        try:
            conf = compute_confidence(opt_result, residual_fn, alpha)
        except (ValueError, TypeError, AttributeError, np.linalg.LinAlgError) as e:
            notes.append(f"Confidence intervals could not be computed: {e}")
    rows = parameter_rows(initial_params, opt_params, conf, large_interval=large_interval)
    correlation_fig = None
    correlation_reason = ""
    correlation_note = ""
    corr_pairs: list[tuple[str, str, float]] = []
    figures: dict[str, Any] = {}
    from mjsysid.output.report._figures import correlation_figure, trace_figures

    if (
        conf is not None
        and np.asarray(conf.covariance).shape == (len(conf.names),) * 2
        and len(conf.names) > 0
    ):
        corr = correlation_from_covariance(conf.covariance)
        corr_pairs = strong_correlations(corr, conf.names, correlation_threshold)
        figures["corr"] = correlation_figure(corr, conf.names)
        correlation_fig = "corr"
        if len(conf.names) > 60:
            correlation_note = "With this many parameters the axis labels are hidden; hover a cell."
    else:
        correlation_reason = "No correlation matrix: confidence intervals are not available" + (
            f" ({notes[-1]})" if notes else "."
        )

    # Jacobian diagnostics.
    condition = math.nan
    directions: list[Direction] = []
    jac = getattr(opt_result, "jac", None)
    if (
        jac is not None
        and np.ndim(jac) == 2
        and np.shape(jac)[1] == len(names)
        and np.all(np.isfinite(jac))
    ):
        condition = condition_number(jac)
        directions = unidentifiable_directions(jac, names)

    # Predictions.
    preds0 = preds1 = None
    signals_reason = ""
    if residual_fn is None or not hasattr(residual_fn, "predict"):
        signals_reason = (
            "No signal plots: pass the ResidualFunction from build_residual_fn as "
            "residual_fn to draw measured vs predicted signals."
        )
    else:
        for which, params in (("identified", opt_params), ("initial", initial_params)):
            if which == "initial" and preds1 is None:
                break
            try:
                pred = residual_fn.predict(None, params)
            except Exception as e:  # shown in the report instead of failing it
                logger.warning("default_report: %s predictions failed: %s", which, e, exc_info=True)
                signals_reason = (
                    f"The predictions with the {which} parameters could not be "
                    f"computed: {type(e).__name__}: {e}"
                )
                notes.append(signals_reason)
                continue
            if which == "identified":
                preds1 = pred
            else:
                preds0 = pred
    errors = signal_errors(preds0, preds1) if preds1 else []
    sequences = (
        _signal_sections(
            ms_list,
            preds0,
            preds1,
            points_per_trace(preds1, max_points_per_trace, max_total_points),
            figures,
        )
        if preds1
        else []
    )

    warnings = collect_warnings(
        rows,
        opt_result=opt_result,
        condition=condition,
        directions=directions,
        correlations=corr_pairs,
        errors=errors,
        large_error=large_error,
        cond_threshold=cond_threshold,
        notes=notes,
        autocorrelation=residual_autocorrelation(preds1) if preds1 else (),
    )

    # Optimisation trace.
    trace = optimisation_trace(opt_result)
    trace_figs: list[dict[str, str]] = []
    trace_note = ""
    trace_reason = (
        "No optimisation trace: the result has no per-iteration history (extras['objective'])."
    )
    if trace is not None:
        lower, upper = opt_params.get_bounds()
        if lower.size != len(names):
            lower, upper = np.full(len(names), -np.inf), np.full(len(names), np.inf)
        cost_fig, paths_fig, trace_note = trace_figures(trace, names, lower, upper)
        if trace.early:
            trace_note = (
                "The fit ran in horizon stages: the dotted costs are on the first part of "
                "every sequence only; the parameter paths are those of the stage on the whole "
                f"data. {trace_note}"
            ).strip()
        figures["trace_cost"] = cost_fig
        trace_figs.append({"id": "trace_cost", "label": "cost ½‖r‖² per iteration"})
        if paths_fig is not None:
            figures["trace_paths"] = paths_fig
            trace_figs.append({"id": "trace_paths", "label": "parameter paths"})

    # Videos.
    clips, videos_reason = _videos(
        ms_list,
        initial_params,
        opt_params,
        preds0,
        preds1,
        videos,
        video_fps,
        (int(video_size[0]), int(video_size[1])),
        max_video_seconds,
    )
    assets: dict[str, bytes] = {}
    video_items = []
    for k, clip in enumerate(clips):
        fname = f"video-{k}.gif"
        assets[fname] = clip.gif
        video_items.append(
            {
                "label": clip.label,
                "caption": clip.caption,
                "src": f"{ASSETS_DIR}/{fname}",
                "width": video_size[0],
                "height": video_size[1],
            }
        )

    plotly_js = plotly_offline.get_plotlyjs()
    plotly_version = str(plotly_offline.get_plotlyjs_version())
    plotly_name = f"plotly-{plotly_version}.min.js"
    if not inline_plotly:
        assets[plotly_name] = plotly_js.encode("utf-8")

    alpha_used = getattr(conf, "alpha", None) if conf is not None else None
    summary = _summary(ms_list, rows, opt_result, condition, alpha_used, _versions(plotly_version))
    error_rows = _error_rows(errors, large_error)
    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    template = env.from_string(_template_text("templates/report.html.j2"))
    table = _table_rows(rows)
    html = template.render(
        title=title or ("System identification: " + ", ".join(ms.name for ms in ms_list)),
        css=_template_text("assets/report.css"),
        js=_template_text("assets/report.js"),
        plotly_inline=plotly_js.replace("</script", "<\\/script") if inline_plotly else "",
        plotly_src=f"{ASSETS_DIR}/{plotly_name}",
        summary=summary,
        warnings=warnings,
        param_rows=table,
        n_flagged=sum(1 for r in table if r["flags"]),
        error_rows=error_rows,
        n_error_flagged=sum(1 for e in error_rows if e["flagged"]),
        large_error=large_error,
        signals_reason=signals_reason,
        sequences=sequences,
        correlation_fig=correlation_fig,
        correlation_reason=correlation_reason,
        correlation_note=correlation_note,
        trace_figs=trace_figs,
        trace_note=trace_note,
        trace_reason=trace_reason,
        videos=video_items,
        videos_reason=videos_reason,
        figures_json=_json_for_script(figures),
    )
    return _install(folder, html, assets)


__all__ = [
    "Direction",
    "ParameterRow",
    "ReportWarning",
    "ResidualCorrelation",
    "SignalError",
    "StageTrace",
    "Trace",
    "at_bound_flags",
    "collect_warnings",
    "column_labels",
    "condition_number",
    "correlation_from_covariance",
    "decimate_indices",
    "default_report",
    "missing_dependencies",
    "nrmse",
    "optimisation_trace",
    "parameter_rows",
    "points_per_trace",
    "relative_change",
    "residual_autocorrelation",
    "signal_errors",
    "strong_correlations",
    "unidentifiable_directions",
]
