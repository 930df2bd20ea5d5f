"""``mujoco.sysid.report.defaults``: ``default_report`` in the peer's argument order,
returning a report object with ``save(path)`` and ``build()`` as the peer's
``ReportBuilder`` has.

The report is mjsysid's (:func:`mjsysid.default_report`: fit summary, parameters with their
intervals, signals, videos, warnings). Nothing is rendered until :meth:`Report.save` or
:meth:`Report.build` is called.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mjsysid.compat._src.optimize import as_core_result
from mjsysid.compat._src.residual import PeerResidual
from mjsysid.data.sequences import ModelSequences
from mjsysid.output.report import default_report as _core_default_report
from mjsysid.params.apply import apply_param_modifiers
from mjsysid.params.parameter import ParameterDict

__all__ = ["Report", "default_report"]


@dataclass
class Report:
    """A report ready to be written: :meth:`save` writes it, :meth:`build` returns its HTML."""

    models_sequences: Sequence[ModelSequences]
    initial_params: ParameterDict
    opt_params: ParameterDict
    residual_fn: Any
    opt_result: Any
    title: str
    videos: bool

    def _write(self, folder: Path, *, inline: bool) -> Path:
        fn = self.residual_fn
        fn = fn.residual_function if isinstance(fn, PeerResidual) else fn
        result = as_core_result(self.opt_result, self.opt_params, fn)
        return _core_default_report(
            self.models_sequences, self.initial_params, self.opt_params, result, fn, folder,
            title=self.title, videos=self.videos, inline_plotly=inline,
        )  # fmt: skip

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Writes the page to ``path`` (its assets and videos beside it) and returns it."""
        target = Path(path)
        written = self._write(target.parent, inline=False)
        if written != target:
            written.replace(target)
        return target

    def build(self) -> str:
        """The page as one self-contained HTML string (plotly inlined, no videos)."""
        with tempfile.TemporaryDirectory(prefix="mjsysid-report-") as tmp:
            videos, self.videos = self.videos, False
            try:
                return self._write(Path(tmp), inline=True).read_text(encoding="utf-8")
            finally:
                self.videos = videos
                shutil.rmtree(tmp, ignore_errors=True)


def default_report(
    models_sequences: Sequence[ModelSequences],
    initial_params: ParameterDict,
    opt_params: ParameterDict,
    residual_fn: Any,
    opt_result: Any,
    title: str = "SysID",
    save_path: str | os.PathLike[str] | None = None,
    build_model: Callable[..., Any] | None = apply_param_modifiers,
    generate_videos: bool = True,
) -> Report:
    """The peer's ``default_report``: a :class:`Report` (call ``.save(path)``).

    ``build_model`` is accepted as the peer's (the residual function builds the models);
    ``save_path`` is checked as the peer checks it (videos need a folder).

    Raises:
      ValueError: ``generate_videos`` without ``save_path`` or ``build_model``, as in the peer.
    """
    if generate_videos and save_path is None:
        raise ValueError("save_path is required when generate_videos=True")
    if generate_videos and build_model is None:
        raise ValueError("build_model is required when generate_videos=True")
    ms = [models_sequences] if isinstance(models_sequences, ModelSequences) else models_sequences
    return Report(
        list(ms), initial_params, opt_params, residual_fn, opt_result, title, bool(generate_videos)
    )
