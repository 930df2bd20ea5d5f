"""The HTML report a user opens after a fit: :func:`default_report`.

One ``report.html`` plus a ``report_assets/`` folder (videos; plotly.js only for a standalone
report: by default the page reads the installed plotly package's copy, see
:mod:`~mjsysid.output.report.plotly_source`) that opens offline: no CDN and no network
request. It leads with the answer (``docs/report.md``): summary, warnings, the physical
parameters with their intervals and what the data determine, the initial states apart and
collapsed, the held-out fit, then the fit per signal, the signals, the correlation of the
physical parameters, the optimisation trace and one video per recording when an offscreen
OpenGL backend works (otherwise the section says why). Every figure is drawn on load, for
screenshots and print.

The data of every section is computed by small pure functions in
:mod:`~mjsysid.output.report.content` and :mod:`~mjsysid.output.report.warnings` (re-exported
here) and unit-tested separately;
:mod:`~mjsysid.output.report.build` assembles them (with :mod:`~.sections`, :mod:`~.videos`,
:mod:`~.format`) and :mod:`~mjsysid.output.report.html` renders and writes the files.

jinja2 and plotly are imported when a report is made (``pip install -e '.[report]'`` in the
mjsysid checkout).
"""

from __future__ import annotations

from mjsysid.output.report.build import default_report
from mjsysid.output.report.content import (
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
from mjsysid.output.report.deps import INSTALL_HINT, missing_dependencies
from mjsysid.output.report.sections import points_per_trace
from mjsysid.output.report.warnings import ReportWarning, collect_warnings
from mjsysid.util.results_files import REPORT_ASSETS, REPORT_HTML

__all__ = [
    "INSTALL_HINT",
    "REPORT_ASSETS",
    "REPORT_HTML",
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
