"""Pieces every command shares: exit codes and the report step."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from mjsysid.params.parameter import ParameterDict

EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130


def report_available() -> bool:
    """Whether the report extra (its optional dependencies) is installed."""
    from mjsysid.output.report import missing_dependencies

    return not missing_dependencies()


def write_report(
    exp_or_seqs: Any,
    params: ParameterDict,
    opt_params: ParameterDict,
    result: Any,
    rf: Any,
    out: Path,
    err: TextIO,
) -> None:
    """Writes the default HTML report into ``out``, or says on ``err`` why it is skipped."""
    if not report_available():
        print("report skipped: install the report extra (pip install 'mjsysid[report]')", file=err)
        return
    from mjsysid.output.report import default_report

    try:
        path = default_report([exp_or_seqs], params, opt_params, result, rf, out)
    except ImportError as e:
        print(f"report skipped: {e}", file=err)
        return
    print(f"report: {path}", file=err)
