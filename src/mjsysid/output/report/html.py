"""The report's files: the page rendered from its template, and written atomically."""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mjsysid.util.results_files import REPORT_ASSETS, REPORT_HTML


def template_text(name: str) -> str:
    """A file of the package (``templates/...`` or ``assets/...``) as text."""
    return (importlib.resources.files("mjsysid.output.report") / name).read_text(encoding="utf-8")


def json_for_script(obj: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(jinja2: Any, context: dict[str, Any]) -> str:
    """``report.html`` from its template, the page's CSS and JS and ``context``."""
    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    template = env.from_string(template_text("templates/report.html.j2"))
    return str(
        template.render(
            css=template_text("assets/report.css"), js=template_text("assets/report.js"), **context
        )
    )


def _write_file(path: Path, payload: bytes) -> None:
    """Writes and flushes one file (a seam for tests that simulate a failing disk)."""
    with open(path, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())


def install(folder: Path, html: str, assets: dict[str, bytes]) -> Path:
    """Writes everything into a private temporary folder, then moves it into place.

    ``report.html`` is moved last and atomically (``os.replace``): after an error there is
    either the previous complete report or none, never a partial file.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(f"cannot create the report folder {str(folder)!r}: {e}") from e
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=folder))
    final_assets = folder / REPORT_ASSETS
    old_assets = tmp / "previous_assets"
    moved_old = False
    try:
        new_assets = tmp / REPORT_ASSETS
        new_assets.mkdir()
        for name, payload in assets.items():
            _write_file(new_assets / name, payload)
        tmp_html = tmp / REPORT_HTML
        _write_file(tmp_html, html.encode("utf-8"))
        if final_assets.exists():
            os.replace(final_assets, old_assets)
            moved_old = True
        os.replace(new_assets, final_assets)
        moved_old = False
        os.replace(tmp_html, folder / REPORT_HTML)
    except BaseException:
        if moved_old and not final_assets.exists():
            os.replace(old_assets, final_assets)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder / REPORT_HTML
