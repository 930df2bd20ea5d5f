"""Numbers and table rows as the report's page shows them."""

from __future__ import annotations

import math
import platform
import re
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from mjsysid.fit.confidence import Confidence
from mjsysid.fit.status import MessageContext
from mjsysid.output.report.content import ParameterRow, SignalError
from mjsysid.output.report.stitching import is_window_of


def raise_limit(name: str, context: MessageContext | None = None) -> str:
    """How to raise the limit ``name`` (:mod:`mjsysid.util.limits`) in the reader's words:
    ``"limits: {name: N}"`` (experiment file) or ``"limits_set(name=N)"`` (Python)."""
    c = context or MessageContext()
    return c.say(f"mjsysid.util.limits.limits_set({name}=N)", f"limits: {{{name}: N}}")


_DRAWS = re.compile(r"^bootstrap: (\d+) draws\b")


def interval_method(confidence: Confidence | None) -> str:
    """How the intervals were computed, in words: ``"95 % block-bootstrap interval, 100
    draws"``, ``"95 % Newey-West (HAC) interval"`` or ``"95 % linearised interval"`` (``""``:
    no intervals).

    The draws come from the bootstrap's note (:attr:`Confidence.notes
    <mjsysid.fit.confidence.Confidence.notes>`, ``"bootstrap: 100 draws over ..."``), which a
    saved results folder keeps too.
    """
    if confidence is None:
        return ""
    level = f"{100.0 * (1.0 - float(confidence.alpha)):g} %"
    if confidence.method == "hac":
        return f"{level} Newey-West (HAC) interval"
    if confidence.method != "bootstrap":
        return f"{level} linearised interval"
    draws = [m[1] for n in confidence.notes if (m := _DRAWS.match(str(n)))]
    return f"{level} block-bootstrap interval" + (f", {draws[-1]} draws" if draws else "")


_FLAG_CSS = {
    "frozen": "frozen",
    "at lower bound": "bound",
    "at upper bound": "bound",
    "unidentifiable": "unident",
    "not determined": "unident",
    "weak combination": "large",
    "large interval": "large",
    "set by prior": "prior",
    "prior and data": "prior",
}

_NUMBER_COLUMNS = (
    "nominal",
    "initial",
    "identified",
    "lower",
    "upper",
    "half_width",
    "ci_low",
    "rel_change",
    "sensitivity",
)

_VERDICT_CSS = {"determined": "ok", "only jointly": "joint", "not determined": "bad"}


def fmt(v: float, digits: int = 6) -> str:
    """``v`` with ``digits`` significant digits; ``—`` for NaN/None, ``±∞`` for infinities."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{digits}g}"


def num_attr(v: float) -> str:
    """Sort key for the table (``""`` sorts last)."""
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "1e308" if v > 0 else "-1e308"
    return repr(float(v))


def _percent(v: float) -> str:
    return "—" if not math.isfinite(v) else f"{100.0 * v:+.3g} %"


def _half_width(r: ParameterRow) -> str:
    """The ``± interval`` cell: ``±h`` as a number, or ``−a / +b`` for an asymmetric interval
    (a bootstrap's percentiles: the distances of its ends from the identified value)."""
    hw = r.half_width
    if math.isnan(hw):
        return "—"
    if math.isinf(hw):
        return "∞"
    if r.ends is None:
        return fmt(hw, 3)
    return f"−{fmt(r.identified - r.ci_low, 3)} / +{fmt(r.ci_high - r.identified, 3)}"


def _table_row(r: ParameterRow, group_start: bool) -> dict[str, Any]:
    hw = r.half_width
    if math.isnan(hw):
        interval = "—"
    elif math.isinf(hw):
        interval = "(−∞, ∞)"
    else:
        interval = f"[{fmt(r.ci_low)}, {fmt(r.ci_high)}]"
    return {
        "group": r.group,
        "name": r.name,
        "kind": r.kind,
        "group_start": group_start,
        "unit": r.unit,
        "verdict": r.verdict,
        "verdict_css": _VERDICT_CSS.get(r.verdict, ""),
        "why": r.why,
        "flags": [{"text": f, "css": _FLAG_CSS.get(f, "")} for f in r.flags],
        "search": " ".join([r.group, r.name, r.kind, r.verdict, *r.flags]).lower(),
        "v": {k: num_attr(getattr(r, k)) for k in _NUMBER_COLUMNS},
        "s": {
            "nominal": fmt(r.nominal),
            "initial": fmt(r.initial),
            "identified": fmt(r.identified),
            "lower": fmt(r.lower),
            "upper": fmt(r.upper),
            "half_width": _half_width(r),
            "interval": interval,
            "rel_change": _percent(r.rel_change),
            "sensitivity": fmt(r.sensitivity, 3),
        },
    }


def table_rows(rows: Sequence[ParameterRow]) -> list[dict[str, Any]]:
    """The parameter table's rows; a group of several parameters starts with a rule."""
    sizes: dict[str, int] = {}
    for r in rows:
        sizes[r.group] = sizes.get(r.group, 0) + 1
    out = []
    prev = None
    for r in rows:
        start = prev is not None and r.group != prev and (sizes[r.group] > 1 or sizes[prev] > 1)
        out.append(_table_row(r, start))
        prev = r.group
    return out


def error_rows(
    errors: Sequence[SignalError], large_error: float, whole: Sequence[SignalError] = ()
) -> list[dict[str, Any]]:
    """The rows of the fit-per-signal table (flagged above ``large_error`` or not finite):
    the windowed recordings as a whole first (``whole``), then every fitted sequence; the
    rows of shooting windows are detail (``"detail"``: shown on request) when ``whole``
    covers them."""
    joined = {e.sequence for e in whole}
    return [
        {
            "detail": is_window_of(e.sequence, joined),
            "sequence": f"{e.sequence} ({e.windows} windows joined)" if e.windows else e.sequence,
            "column": e.column,
            "flagged": e.flagged(large_error),
            "noise_only": e.noise_only,
            "search": f"{e.sequence} {e.column}".lower(),
            "initial": fmt(e.initial, 3),
            "identified": fmt(e.identified, 3),
            "fit": "—" if not np.isfinite(e.identified) else f"{e.fit_percent:.1f}",
            "v_initial": num_attr(e.initial),
            "v_identified": num_attr(e.identified),
            "v_fit": num_attr(e.fit_percent),
        }
        for e in [*whole, *errors]
    ]


def versions(plotly_js_version: str) -> dict[str, str]:
    """The versions the summary lists."""
    from mjsysid._version import __version__

    return {
        "mjsysid": __version__,
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "plotly.js": plotly_js_version,
    }
