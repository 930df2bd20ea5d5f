"""The report's optional dependencies (jinja2, plotly, matplotlib, pillow), imported on use."""

from __future__ import annotations

from typing import Any

INSTALL_HINT = "pip install -e '.[report]' in the mjsysid checkout"


def missing_dependencies() -> list[str]:
    """Report dependencies that are not installed (``[]`` when a report can be made).

    Checks without importing them (cheap; for CLIs that want to say so up front).
    """
    import importlib.util

    return [
        m for m in ("jinja2", "plotly", "matplotlib", "PIL") if importlib.util.find_spec(m) is None
    ]


def require_report_dependencies() -> tuple[Any, Any]:
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
