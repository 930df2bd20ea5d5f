"""One entry for the three ways to fit: the local fit, a global stage first, multi-start.

:func:`fit_with_search` is what ``optimize(..., global_search=..., starts=...)`` does: with
neither, :func:`mjsysid.fit.optimize.optimize`; with ``global_search``,
:func:`mjsysid.fit.global_search.fit_global`; with ``starts``,
:func:`mjsysid.fit.multistart.multistart`. (It sits above all three modules, so none of
them imports another in a cycle.)
"""

from __future__ import annotations

from typing import Any

from mjsysid.fit.global_search import as_global_options, fit_global
from mjsysid.fit.jacobian import ResidualFn
from mjsysid.fit.local import OptimizeResult, fit_local
from mjsysid.fit.multistart import multistart
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be


def fit_with_search(
    initial_params: ParameterDict,
    residual_fn: ResidualFn,
    *,
    global_search: object = None,
    starts: int | None = None,
    starts_seed: int = 0,
    **optimize_kwargs: Any,
) -> tuple[ParameterDict, OptimizeResult]:
    """The local fit, after a global stage (``global_search``) or from ``starts`` points.

    Args:
      initial_params, residual_fn: As for :func:`~mjsysid.fit.optimize.optimize`.
      global_search: ``None`` (no global stage), a
        :class:`~mjsysid.fit.global_search.GlobalSearchOptions`, ``"cmaes"``, ``True`` or an
        experiment mapping (see :func:`~mjsysid.fit.global_search.as_global_options`).
      starts: ``None`` or the number of multi-start local fits (the nominal included).
      starts_seed: Seed of the multi-start points.
      **optimize_kwargs: The local fit's options (``optimizer``, ``max_iters``,
        ``checkpoint``, ``resume``, ...).

    Raises:
      ValueError: Both ``global_search`` and ``starts`` are given.
    """
    if global_search is not None and global_search is not False and starts is not None:
        raise ValueError(
            must_be(
                "global_search and starts",
                "one or the other (a global stage, or multi-start local fits)",
                {"global_search": global_search, "starts": starts},
            )
        )
    if global_search is not None and global_search is not False:
        return fit_global(
            initial_params, residual_fn, as_global_options(global_search), **optimize_kwargs
        )
    if starts is not None:
        return multistart(
            initial_params, residual_fn, starts=starts, seed=starts_seed, **optimize_kwargs
        )
    return fit_local(initial_params, residual_fn, **optimize_kwargs)
