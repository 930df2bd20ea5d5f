"""The HTML report a user opens after a fit: :func:`default_report`.

One ``report.html`` plus a ``report_assets/`` folder (plotly.js copied from the installed plotly
package, and videos) that opens offline: no CDN and no network request. Sections: summary,
warnings in words, a sortable/filterable/paged parameter table (readable with hundreds of
parameters), fit per signal, interactive overlays of measured vs initial vs identified signals
with residuals and controls, the parameter correlation heatmap, the optimisation trace, and
videos when an offscreen OpenGL backend works (otherwise the section says why).

The data of every section is computed by small pure functions in :mod:`mjsysid.output.report._data`
and :mod:`~mjsysid.output.report.warnings` (re-exported here) and unit-tested separately;
:mod:`~mjsysid.output.report.build` assembles them (with :mod:`~.sections`, :mod:`~.videos`,
:mod:`~.format`) and :mod:`~mjsysid.output.report.html` renders and writes the files.

:func:`default_report` also takes ``mujoco.sysid``'s argument order and keywords
(:mod:`~mjsysid.output.report.compat`).

jinja2 and plotly are imported when a report is made (``pip install 'mjsysid[report]'``).
"""

from __future__ import annotations

from mjsysid.output.report._data import (
    Direction,
    ParameterRow,
    ResidualCorrelation,
    SignalError,
    StageTrace,
    Trace,
    at_bound_flags,
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
from mjsysid.output.report.compat import default_report
from mjsysid.output.report.deps import INSTALL_HINT, missing_dependencies
from mjsysid.output.report.html import ASSETS_DIR, REPORT_FILE
from mjsysid.output.report.sections import points_per_trace
from mjsysid.output.report.warnings import ReportWarning, collect_warnings

__all__ = [
    "ASSETS_DIR",
    "INSTALL_HINT",
    "REPORT_FILE",
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
    "column_signals",
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
