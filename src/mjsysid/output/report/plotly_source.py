"""Where a report reads plotly.js from: :func:`plotly_source`.

plotly.js is 4.8 MB. A copy in every results folder made the report cost more disk than the
fit's own files, so by default (``"shared"``) a report holds no copy: it loads the one that
the installed ``plotly`` Python package already ships (``plotly/package_data/plotly.min.js``),
by its absolute ``file://`` address. That copy is on every machine that can make a report,
nothing is written outside the results folder, and the report opens offline wherever the
folder is moved on that machine. A report carried to another machine (or kept after the
Python environment is removed) needs its own copy: ``"copy"`` writes it into
``report_assets/`` (``mjsysid report FOLDER --standalone``), ``"inline"`` into ``report.html``
itself. The page tries, in order, the mode's own source and then the other local one (the
shared file, the folder's copy); when none loads, every figure says so and how to fix it.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mjsysid.util.results_files import REPORT_ASSETS

#: The ways a report can get plotly.js (see the module docstring).
PLOTLY_MODES = ("shared", "copy", "inline")

#: The name of the folder's copy in ``report_assets/`` (mode ``"copy"``).
PLOTLY_COPY = "plotly.min.js"


@dataclass(frozen=True)
class PlotlySource:
    """How the page gets plotly.js.

    Attributes:
      inline: plotly.js to put inside the page (``""``: none).
      sources: Script addresses the page tries in order (absolute ``file://`` or relative).
      assets: Files for ``report_assets/`` (name -> bytes).
      where: The footer's words on it.
    """

    inline: str = ""
    sources: list[str] = field(default_factory=list)
    assets: dict[str, bytes] = field(default_factory=dict)
    where: str = ""


def shared_plotly_file() -> Path | None:
    """The installed plotly package's own ``plotly.min.js`` as a file, ``None`` when it is
    not one (a zipped install)."""
    try:
        res = importlib.resources.files("plotly") / "package_data" / "plotly.min.js"
    except ModuleNotFoundError:
        return None
    path = Path(str(res))
    return path if path.is_file() else None


def plotly_source(mode: str, plotly_offline: Any) -> PlotlySource:
    """The :class:`PlotlySource` of ``mode`` (one of :data:`PLOTLY_MODES`); ``"shared"``
    becomes ``"copy"`` when the package's file cannot be addressed."""
    shared = shared_plotly_file() if mode != "inline" else None
    relative = f"{REPORT_ASSETS}/{PLOTLY_COPY}"
    if mode == "inline":
        js = str(plotly_offline.get_plotlyjs())
        return PlotlySource(
            inline=js.replace("</script", "<\\/script"),
            where="plotly.js is inside this file (self-contained).",
        )
    if mode == "shared" and shared is not None:
        return PlotlySource(
            sources=[shared.as_uri(), relative],
            where=f"plotly.js is read from the installed plotly package ({shared}); to open "
            "the report on another machine, write it with its own copy: mjsysid report "
            "FOLDER --standalone.",
        )
    return PlotlySource(
        sources=[relative] + ([shared.as_uri()] if shared is not None else []),
        assets={PLOTLY_COPY: str(plotly_offline.get_plotlyjs()).encode("utf-8")},
        where="keep the report_assets folder next to this file (it holds plotly.js).",
    )
