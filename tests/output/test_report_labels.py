"""Names from models and data files are shown as text in the report's plots, never as markup."""

from __future__ import annotations

import json

import numpy as np

from mjsysid.output.report.content import Trace
from mjsysid.output.report.figures import (
    controls_figure,
    correlation_figure,
    plot_text,
    trace_figures,
)

LINK = "<a href='https://example.com'>pos</a>"


def _strings(fig: dict) -> list[str]:
    """Every string of a figure's traces (names, labels, templates)."""
    found: list[str] = []

    def walk(v: object) -> None:
        if isinstance(v, str):
            found.append(v)
        elif isinstance(v, dict):
            for e in v.values():
                walk(e)
        elif isinstance(v, list):
            for e in v:
                walk(e)

    walk(fig["data"])
    return found


def test_plot_text_escapes_markup():
    assert plot_text(LINK) == "&lt;a href='https://example.com'&gt;pos&lt;/a&gt;"
    assert plot_text("box_pos [m]") == "box_pos [m]"


def test_no_figure_carries_a_name_as_markup():
    t = np.linspace(0, 1, 5)
    figs = [
        controls_figure(t, np.zeros((5, 1)), [LINK], 100),
        correlation_figure(np.eye(2), [LINK, "b%{x}"]),
    ]
    trace = Trace(
        iterations=np.arange(3),
        cost=np.array([3.0, 2.0, 1.0]),
        candidates=np.array([[0.0, 1.0], [0.5, 1.0], [1.0, 1.0]]),
    )
    cost, paths, _ = trace_figures(trace, [LINK, "b%{x}"], np.zeros(2), np.full(2, 2.0))
    assert paths is not None
    figs += [cost, paths]
    for fig in figs:
        texts = _strings(fig)
        assert not any("<a" in s for s in texts), texts
    assert any("&lt;a href=" in s for s in _strings(paths))
    templates = [tr["hovertemplate"] for tr in paths["data"]]
    assert all("b%{x}" not in tpl for tpl in templates)  # a name is never a template
    json.dumps(figs)
