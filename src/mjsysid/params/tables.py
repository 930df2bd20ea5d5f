"""Plain-text tables of parameters (no colours, no extra dependency).

:meth:`~mjsysid.params.parameter.ParameterDict.get_parameter_info` and
:meth:`~mjsysid.params.parameter.ParameterDict.compare_parameters` format their rows here;
this module knows numbers and strings only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from mjsysid.util.errors import must_be

COMPARISON_COLUMNS = (
    "Parameter",
    "Initial",
    "Nominal",
    "Identified",
    "Lower",
    "Upper",
    "Abs Err",
    "Abs Del",
    "Rel Err",
    "Rel Del",
)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, a dashed rule under the header."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def _column(name: str, value: npt.ArrayLike | None, n: int) -> np.ndarray:
    if value is None:
        raise ValueError(must_be(f"compare_parameters: {name}", f"{n} values", value))
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size != n:
        raise ValueError(must_be(f"compare_parameters: {name}", f"{n} values (one per row)", arr))
    return arr


def _fmt(value: float, digits: int) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}g}"


def _rms(values: np.ndarray) -> float:
    return float(np.sqrt(np.mean(values**2))) if values.size else math.nan


def comparison_table(
    labels: Sequence[str], columns: Mapping[str, npt.ArrayLike | None], sig_digits: int
) -> str:
    """The table of :meth:`~mjsysid.params.parameter.ParameterDict.compare_parameters`.

    Args:
      labels: ``(n,)`` row labels.
      columns: ``init``, ``nominal``, ``predicted``, ``lower``, ``upper`` (each ``(n,)``) and
        ``measured`` (``(n,)`` or ``None``).
      sig_digits: Significant digits, ``>= 1``.

    Returns:
      The table, then ``RMSE: <x>`` (``Identified − measured``; empty without ``measured``) and
      ``RMS Delta: <x>`` (``Identified − Initial``).
    """
    if isinstance(sig_digits, bool) or not isinstance(sig_digits, int) or sig_digits < 1:
        raise ValueError(must_be("compare_parameters: sig_digits", "an integer >= 1", sig_digits))
    n = len(labels)
    init, nominal, pred, lower, upper = (
        _column(k, columns[k], n) for k in ("init", "nominal", "predicted", "lower", "upper")
    )
    raw = columns.get("measured")
    measured = None if raw is None else _column("measured_params", raw, n)
    delta = np.abs(pred - init)
    err = np.abs(pred - measured) if measured is not None else np.full(n, math.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_del = np.where(init != 0, delta / np.abs(init), math.nan)
        rel_err = (
            np.where(measured != 0, err / np.abs(measured), math.nan)
            if measured is not None
            else np.full(n, math.nan)
        )
    rows = [
        [labels[i]]
        + [
            _fmt(float(c[i]), sig_digits)
            for c in (init, nominal, pred, lower, upper, err, delta, rel_err, rel_del)
        ]
        for i in range(n)
    ]
    rmse = "" if measured is None else _fmt(_rms(err), sig_digits)
    footer = f"RMSE: {rmse}".rstrip() + f"\nRMS Delta: {_fmt(_rms(delta), sig_digits)}"
    return text_table(COMPARISON_COLUMNS, rows) + "\n" + footer
