"""``mujoco.sysid._src.optimize``: ``optimize`` and ``calculate_intervals``, the peer's way.

:func:`optimize` takes the peer's arguments (``optimizer="mujoco"`` by default, ``verbose``
logging the parameter table, the backend's own options as keywords: ``max_iters``,
``verbose``, ``loss``, ``x_scale``, ``diff_step``, ...) and returns
``(opt_params, scipy.optimize.OptimizeResult)`` with at least ``x``, ``jac``, ``grad`` and
``extras``, as the peer does; underneath it is :func:`mjsysid.optimize`, and the result also
holds mjsysid's own (``result["result"]``: :class:`mjsysid.OptimizeResult`, with ``cost``,
``status``, ``message``, ...). Like the peer it reports an ill-conditioned start
(``check_conditioning=True``) instead of refusing it, keeps going with a parameter that has
no effect, warns about free parameters that start on a bound, and keeps a parameter whose
bounds are equal at its value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.optimize

from mjsysid.compat._src.residual import PeerResidual
from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.local import start_condition
from mjsysid.fit.optimize import optimize as _core_optimize
from mjsysid.fit.result import FitHistory, OptimizeResult
from mjsysid.fit.status import Status
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

__all__ = ["as_core_result", "calculate_intervals", "optimize"]

logger = logging.getLogger(__name__)

#: The peer's keywords that are one of :func:`mjsysid.optimize`'s under another name.
_RENAMED = {"diff_step": "eps"}
#: The peer's keywords that :func:`mjsysid.optimize` takes under the same name.
_SAME = ("max_iters", "x_scale")


def _array_residual(residual_fn: Callable[..., Any]) -> Callable[..., Any]:
    """A residual returning one array: mjsysid's batched residual of a
    :func:`build_residual_fn`, or the peer-style ``(residuals, ...)`` triple of any other
    function stacked (each sequence's residual ``(n_i,)`` or ``(n_i, k)``)."""
    if isinstance(residual_fn, PeerResidual):
        return residual_fn.residual_function

    def stacked(x: np.ndarray, params: ParameterDict) -> np.ndarray:
        out = residual_fn(x, params)
        parts = out[0] if isinstance(out, tuple) and len(out) == 3 else out
        return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts], axis=0)

    return stacked


def _warn_at_bound(params: ParameterDict) -> None:
    """The peer's warning about free entries that start (almost) on a bound."""
    x0 = params.as_vector()
    lo, hi = params.get_bounds()
    span = hi - lo
    near = ((x0 - lo) <= 1e-3 * span) | ((hi - x0) <= 1e-3 * span)
    at = int(np.count_nonzero(near & (span > 0) & (x0 >= lo) & (x0 <= hi)))
    if at:
        logger.warning(
            "%d of %d free parameter entries start at (or essentially at) a bound; the fit can "
            "stall there on an ill-conditioned problem: call initial_params.move_off_bounds() "
            "before optimize()",
            at,
            x0.size,
        )


def _pinned(params: ParameterDict) -> list[str]:
    """Free parameters whose bounds are all equal: frozen for the fit (kept at their value)."""
    return [p.name for p in params.non_frozen() if np.all(p.min_value == p.max_value)]


def _fit_options(optimizer: str, backend: dict[str, Any]) -> dict[str, Any]:
    """:func:`mjsysid.optimize` keywords from the peer's backend keywords."""
    out: dict[str, Any] = {"optimizer": optimizer, "verbose": bool(backend.pop("verbose", True))}
    for peer, ours in _RENAMED.items():
        if peer in backend:
            out[ours] = backend.pop(peer)
    for name in _SAME:
        if name in backend:
            out[name] = backend.pop(name)
    return {**out, **backend}


def optimize(
    initial_params: ParameterDict,
    residual_fn: Callable[..., Any],
    optimizer: str = "mujoco",
    verbose: bool = True,
    check_conditioning: bool = False,
    **optimizer_kwargs: Any,
) -> tuple[ParameterDict, scipy.optimize.OptimizeResult]:
    """Fits ``initial_params`` to the data of ``residual_fn`` (module docstring).

    Returns:
      ``(opt_params, opt_result)``: a copy of ``initial_params`` at the solution and a
      ``scipy.optimize.OptimizeResult`` (``x``, ``jac``, ``grad``, ``extras``, ``fun``,
      ``cost``, ``status``, ``message``, ``success``, ``nfev``, ``njev``, ``nit`` and
      ``result``, mjsysid's :class:`~mjsysid.OptimizeResult`).
    """
    fn = _array_residual(residual_fn)
    opt_params = initial_params.copy()
    if opt_params.size == 0:
        logger.warning(
            "The ParameterDict is empty or holds only frozen parameters: declare the "
            "parameters to optimize"
        )
        x0 = opt_params.as_vector()
        empty = np.zeros((0, x0.size))
        return opt_params, scipy.optimize.OptimizeResult(x=x0, jac=empty, grad=np.zeros(0))
    pinned = _pinned(opt_params)
    for name in pinned:
        opt_params[name].frozen = True
    if check_conditioning:
        lo, hi = opt_params.get_bounds()
        eps = float(optimizer_kwargs.get("diff_step", np.finfo(np.float64).eps ** 0.5))
        start_condition(fn, opt_params, opt_params.as_vector(), (lo, hi), eps)
    _warn_at_bound(opt_params)
    keywords = _fit_options(optimizer, dict(optimizer_kwargs))
    fitted, result = _core_optimize(opt_params, fn, allow_no_effect=True, **keywords)
    for name in pinned:
        fitted[name].frozen = False
    if verbose:
        logger.info(
            "\n%s",
            fitted.compare_parameters(initial_params.as_vector(), fitted.as_vector()),
        )
    return fitted, _scipy_result(result, fitted)


def _scipy_result(result: Any, fitted: ParameterDict) -> scipy.optimize.OptimizeResult:
    """The peer's result type holding mjsysid's result's fields; ``x``, ``jac`` and ``grad``
    cover every free parameter of ``fitted`` (a pinned one's column is zero)."""
    names = fitted.get_non_frozen_parameter_names()
    cols = [names.index(n) for n in result.parameter_names]
    jac = np.zeros((result.jac.shape[0], len(names)))
    jac[:, cols] = result.jac
    grad = np.zeros(len(names))
    grad[cols] = result.grad
    copied = {field: getattr(result, field) for field in _SCIPY_FIELDS}
    return scipy.optimize.OptimizeResult(
        x=fitted.as_vector(), jac=jac, grad=grad, result=result, **copied
    )


# the fields of mjsysid's result the peer's result holds under the same names
_SCIPY_FIELDS = ("extras", "fun", "cost", "status", "message", "success", "nfev", "njev", "nit")


def as_core_result(
    opt_result: Any, opt_params: ParameterDict, residual_fn: Callable[..., Any] | None = None
) -> OptimizeResult:
    """mjsysid's :class:`~mjsysid.OptimizeResult` of a peer-style result: the one
    :func:`optimize` keeps in ``opt_result["result"]`` when it still describes ``opt_params``'s
    free entries, else one built from ``x``, ``jac`` and ``grad`` (the residual at ``x``
    from ``residual_fn`` when the result holds none).

    Raises:
      TypeError: ``opt_result`` has no ``x``.
    """
    names = opt_params.get_non_frozen_parameter_names()
    kept = opt_result.get("result") if isinstance(opt_result, dict) else None
    if isinstance(kept, OptimizeResult) and kept.parameter_names == names:
        return kept
    get = (
        opt_result.get
        if isinstance(opt_result, dict)
        else lambda k, d=None: getattr(opt_result, k, d)
    )
    if get("x") is None:
        raise TypeError(
            must_be("opt_result", "an optimize() result (x, jac, grad)", type(opt_result).__name__)
        )
    x = np.asarray(get("x"), dtype=np.float64).reshape(-1)
    fun = get("fun")
    if fun is None and residual_fn is not None:
        fun = _array_residual(residual_fn)(x, opt_params)
    fun = np.zeros(0) if fun is None else np.asarray(fun, dtype=np.float64).reshape(-1)
    jac = get("jac")
    jac = np.zeros((fun.size, x.size)) if jac is None else np.asarray(jac, dtype=np.float64)
    grad = get("grad")
    grad = jac.T @ fun if grad is None else np.asarray(grad, dtype=np.float64)
    cost = 0.5 * float(fun @ fun)
    status = Status(str(get("status", Status.MAX_ITERS.value)))
    return OptimizeResult(
        x=x, cost=cost, fun=fun, jac=jac, grad=grad, status=status,
        success=bool(get("success", True)), message=str(get("message", "")),
        nfev=int(get("nfev", 0) or 0), njev=int(get("njev", 0) or 0),
        nit=int(get("nit", 0) or 0), initial_cost=float(get("initial_cost", cost)),
        wall_time=0.0, parameter_names=names, optimizer=str(get("optimizer", "mujoco")),
        history=_history(get("extras", {}) or {}),
    )  # fmt: skip


def _history(extras: dict[str, Any]) -> FitHistory:
    """The per-iteration record of the peer's ``extras`` (``objective``, ``candidate``)."""
    objective = [float(c) for c in extras.get("objective", [])]
    candidate = [np.asarray(c, dtype=np.float64).reshape(-1) for c in extras.get("candidate", [])]
    return FitHistory(objective, candidate)
