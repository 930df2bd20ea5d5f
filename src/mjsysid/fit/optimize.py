"""Box-constrained nonlinear least squares on the batched residual: :func:`optimize`.

Minimise ``½‖r(θ)‖²`` subject to ``θ_min ≤ θ ≤ θ_max``. All backends use the Gauss-Newton
model ``H ≈ JᵀJ``, ``g = Jᵀr``; the Jacobian ``J = ∂r/∂θ`` is computed by forward finite
differences with step ``h_i = ε·max(1, |θ_i|)`` (pointing inwards at an upper bound), all
``p`` perturbed candidates in **one** batched residual call
(:func:`~mjsysid.fit.jacobian.fd_jacobian`).

This module is the driver: the options (:mod:`~mjsysid.fit.options`, validated once), the
outer stages (:mod:`~mjsysid.fit.search`: a global stage or several starts), the local fit
(:mod:`~mjsysid.fit.local`, in horizon stages: :mod:`~mjsysid.fit.horizons`), a MAP fit's
prior rows (:mod:`~mjsysid.fit.prior`), a Dask cluster (:mod:`~mjsysid.fit.distributed`) and
held-out validation (:mod:`~mjsysid.fit.validation`); the result is
:class:`~mjsysid.fit.result.OptimizeResult`.
"""

from __future__ import annotations

import logging
from typing import Any

from mjsysid.fit.options import FitOptions
from mjsysid.fit.prior import PriorResidual, with_prior
from mjsysid.fit.result import OptimizeResult
from mjsysid.fit.search import fit_with_search
from mjsysid.fit.validation import ValidationTable, check_holdout, holdout_table
from mjsysid.objective.protocols import ResidualFn
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.rollout import RolloutDivergedError
from mjsysid.util.mujoco_log import quietly

__all__ = ["optimize"]

logger = logging.getLogger(__name__)


@quietly  # a diverging candidate: one warning, not a printed line each
def optimize(
    initial_params: ParameterDict,
    residual_fn: ResidualFn,
    optimizer: str | None = None,
    *,
    options: FitOptions | None = None,
    holdout: Any = None,
    executor: Any = None,
    **option_keywords: Any,
) -> tuple[ParameterDict, OptimizeResult]:
    """Fits the non-frozen parameters to the data.

    ``optimize(params, residual_fn)`` fits with the defaults; the options of the fit are one
    validated :class:`~mjsysid.fit.options.FitOptions`, given as ``options=`` or as keywords
    (``optimize(params, fn, max_iters=50, horizons=None)``, ``optimizer="scipy",
    loss="soft_l1"`` for a backend's own option), or both (the keywords change ``options``).

    Args:
      initial_params: Start point and bounds; never modified.
      residual_fn: From :func:`build_residual_fn`, or any ``(x, params)`` residual returning an
        array (:class:`~mjsysid.fit.jacobian.ResidualFn`).
      optimizer: ``"lm"`` (default), ``"mujoco"``, ``"scipy"`` or ``"scipy_parallel_fd"``
        (:mod:`~mjsysid.fit.backends`); the same as ``FitOptions.optimizer``.
      options: The fit's options (:class:`~mjsysid.fit.options.FitOptions`: tolerances,
        horizon stages, checkpoints, a global stage, multi-start, ...).
      holdout: Data not fitted, simulated after the fit: ``result.validation`` is its
        :func:`~mjsysid.fit.validation.holdout_table` (docs/validation.md).
      executor: A ``dask.distributed.Client`` or a scheduler address: the candidates of
        every batched call are evaluated on that cluster
        (:func:`~mjsysid.fit.distributed.distribute`; ``residual_fn`` must then come from
        :func:`build_residual_fn`; the ``distributed`` extra).
      **option_keywords: Fields of :class:`~mjsysid.fit.options.FitOptions`, or options of the
        chosen backend (:data:`~mjsysid.fit.options.BACKEND_OPTIONS`).

    A free parameter with a prior (:attr:`Parameter.prior
    <mjsysid.params.parameter.Parameter.prior>`) makes this a MAP fit: the residual gains the
    prior rows ``(θ_i − μ_i)/σ_i`` (:mod:`~mjsysid.fit.prior`), ``result.fun`` and
    ``result.jac`` end with them and ``result.prior`` says which they are.

    Returns:
      ``(opt_params, result)``: a copy of ``initial_params`` at the solution, and the
      :class:`~mjsysid.fit.result.OptimizeResult`.

    Raises:
      ValueError: Bad options, a start outside the bounds, a non-finite residual at the start
        (naming the sequence and signal), or a parameter without effect.
      TypeError: An option name neither :class:`FitOptions` nor the backend takes (named,
        with the closest known names).
    """
    if optimizer is not None:
        option_keywords["optimizer"] = optimizer
    opts = FitOptions.with_keywords(options, **option_keywords)
    check_holdout(holdout)
    if executor is not None:
        opt_params, result = _on_cluster(initial_params, residual_fn, executor, opts)
    else:
        opt_params, result = _fit_map(initial_params, residual_fn, opts)
    if holdout is not None:
        result.validation = _holdout(initial_params, opt_params, residual_fn, holdout)
    return opt_params, result


def _fit_map(
    initial_params: ParameterDict, residual_fn: ResidualFn, options: FitOptions
) -> tuple[ParameterDict, OptimizeResult]:
    """:func:`fit_with_search`, a MAP fit when a parameter has a prior (its rows in
    ``result.prior``)."""
    fn = with_prior(residual_fn, initial_params)
    opt_params, result = fit_with_search(initial_params, fn, options)
    if isinstance(fn, PriorResidual):
        result.prior = fn.rows
    return opt_params, result


def _holdout(
    initial_params: ParameterDict, opt_params: ParameterDict, residual_fn: Any, holdout: Any
) -> ValidationTable | None:
    """The validation table of ``holdout`` (``None`` with a warning when a simulation
    fails: the fit itself is kept)."""
    try:
        return holdout_table(initial_params, opt_params, residual_fn, holdout)
    except (RolloutDivergedError, ValueError, KeyError) as e:
        logger.warning("optimize: the holdout validation failed: %s", e)
        return None


def _on_cluster(
    initial_params: ParameterDict, residual_fn: ResidualFn, executor: Any, options: FitOptions
) -> tuple[ParameterDict, OptimizeResult]:
    """:func:`optimize` with every batched call on the Dask cluster of ``executor``."""
    from mjsysid.fit.distributed import distribute  # the distributed extra

    remote = distribute(residual_fn, executor)  # type: ignore[arg-type]
    try:
        return _fit_map(initial_params, remote, options)
    finally:
        remote.close()
