"""Box-constrained nonlinear least squares on the batched residual: :func:`optimize`.

Minimise ``½‖r(θ)‖²`` subject to ``θ_min ≤ θ ≤ θ_max``. All backends use the Gauss-Newton
model ``H ≈ JᵀJ``, ``g = Jᵀr``; the Jacobian ``J = ∂r/∂θ`` is computed by forward finite
differences with step ``h_i = ε·max(1, |θ_i|)`` (pointing inwards at an upper bound), all
``p`` perturbed candidates in **one** batched residual call (:func:`fd_jacobian`).

The fit is split into modules named after what they hold: :mod:`~mjsysid.fit.options` (the
options, validated once), :mod:`~mjsysid.fit.backends` (``"lm"``, ``"mujoco"``, ``"scipy"``,
``"scipy_parallel_fd"``), :mod:`~mjsysid.fit.horizons` and :mod:`~mjsysid.fit.stage` (fitting
in stages on growing parts of the data), :mod:`~mjsysid.fit.status` (how a fit ended, in
words), :mod:`~mjsysid.fit.start` (checks of the start point), :mod:`~mjsysid.fit.checkpoints`
and :mod:`~mjsysid.fit.jacobian`; this module is the driver and re-exports their public names.

Confidence intervals at the solution: :func:`mjsysid.fit.intervals.calculate_intervals` (also
importable from here, where the API specification places it).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy.typing as npt

from mjsysid.fit.checkpoints import _checkpoint_horizon as _checkpoint_horizon
from mjsysid.fit.checkpoints import load_checkpoint as load_checkpoint
from mjsysid.fit.horizons import AUTO_HORIZONS as AUTO_HORIZONS
from mjsysid.fit.horizons import resolve_horizons as resolve_horizons
from mjsysid.fit.intervals import calculate_intervals as calculate_intervals  # re-export (spec)
from mjsysid.fit.jacobian import ResidualFn
from mjsysid.fit.jacobian import fd_jacobian as fd_jacobian
from mjsysid.fit.jacobian import sweep_parameter as sweep_parameter
from mjsysid.fit.local import OptimizeResult as OptimizeResult
from mjsysid.fit.local import run_fit
from mjsysid.fit.options import BACKEND_OPTIONS as BACKEND_OPTIONS
from mjsysid.fit.options import OPTIMIZERS as OPTIMIZERS
from mjsysid.fit.options import FitOptions, IterationCallback
from mjsysid.fit.prior import PriorResidual, with_prior
from mjsysid.fit.status import MessageContext
from mjsysid.fit.status import Status as Status
from mjsysid.fit.validation import check_holdout, holdout_table
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.rollout import RolloutDivergedError

__all__ = [
    "AUTO_HORIZONS",
    "BACKEND_OPTIONS",
    "OPTIMIZERS",
    "FitOptions",
    "IterationCallback",
    "OptimizeResult",
    "ResidualFn",
    "Status",
    "calculate_intervals",
    "fd_jacobian",
    "load_checkpoint",
    "optimize",
    "resolve_horizons",
    "run_fit",
    "sweep_parameter",
]

logger = logging.getLogger(__name__)


def optimize(
    initial_params: ParameterDict,
    residual_fn: ResidualFn,
    optimizer: str = "lm",
    verbose: bool = False,
    check_conditioning: bool = False,
    *,
    max_iters: int = 200,
    xtol: float = 1e-8,
    gtol: float = 1e-8,
    ftol: float = 1e-8,
    eps: float = 1.5e-8,
    mu_factor: float | None = None,
    secant: bool = True,
    trial_steps: int = 1,
    x_scale: str | float | npt.ArrayLike = "jac",
    horizons: Sequence[float] | str | None = "auto",
    allow_no_effect: bool = False,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    callback: IterationCallback | None = None,
    output: TextIO | None = None,
    messages: MessageContext | None = None,
    global_search: Any = None,
    starts: int | None = None,
    starts_seed: int = 0,
    executor: Any = None,
    holdout: Any = None,
    **optimizer_kwargs: Any,
) -> tuple[ParameterDict, OptimizeResult]:
    """Fits the non-frozen parameters to the data (positional order: ``mujoco.sysid``'s).

    Args:
      initial_params: Start point and bounds; never modified.
      residual_fn: From :func:`build_residual_fn`, or any ``(x, params)`` residual: an array,
        or ``mujoco.sysid``'s ``(residuals, predictions, records)`` (see
        :func:`~mjsysid.fit.jacobian.residual_array`).
      optimizer: ``"lm"``, ``"mujoco"``, ``"scipy"`` or ``"scipy_parallel_fd"`` (backends).
      verbose: Print one line per iteration and a summary to ``output`` (default stdout),
        and log (INFO) the table of :meth:`ParameterDict.compare_parameters`.
      check_conditioning: Compute one extra finite-difference Jacobian at the start and log
        a warning when ``cond(JᵀJ)`` is large (:mod:`~mjsysid.fit.conditioning`).
      max_iters, xtol, gtol, ftol, eps, mu_factor, secant, trial_steps, x_scale, horizons,
        allow_no_effect, checkpoint, resume, callback, output, messages: The options of the fit,
        each described at :class:`~mjsysid.fit.options.FitOptions`, which holds them
        (validated once; :func:`run_fit` takes one directly).
      global_search: A global stage before the local fit: ``"cmaes"``, ``True``, a mapping
        or a :class:`~mjsysid.fit.global_search.GlobalSearchOptions` (CMA-ES, each
        generation one batched call; the local fit starts from its best candidate; the
        ``global`` extra). See :func:`~mjsysid.fit.global_search.fit_global`.
      starts: Local fits from this many starts (the nominal and a Latin hypercube in the
        bounds; :func:`~mjsysid.fit.multistart.multistart`); ``result.extras["multistart"]``
        says how many reached the best cost and each parameter's spread over them.
        Not together with ``global_search``. starts_seed: Their random seed.
      executor: A ``dask.distributed.Client`` or a scheduler address: the candidates of
        every batched call are evaluated on that cluster
        (:func:`~mjsysid.fit.distributed.distribute`; ``residual_fn`` must then come from
        :func:`build_residual_fn`; the ``distributed`` extra).
      holdout: Data not fitted, simulated after the fit: ``result.extras["validation"]`` is
        :func:`~mjsysid.fit.validation.holdout_table` (docs/validation.md).
      **optimizer_kwargs: Options of the backend itself, passed on by name (``loss="soft_l1"``
        for ``"scipy"``; the names are :data:`~mjsysid.fit.options.BACKEND_OPTIONS`).

    A free parameter with a prior (:attr:`Parameter.prior
    <mjsysid.params.parameter.Parameter.prior>`) makes this a MAP fit: the residual gains the
    prior rows ``(θ_i − μ_i)/σ_i`` (:mod:`~mjsysid.fit.prior`), ``result.fun`` and
    ``result.jac`` end with them and ``result.extras["prior"]`` says which they are.

    Returns:
      ``(opt_params, result)``: a copy of ``initial_params`` at the solution; the result
      (attributes, and keys like a ``scipy.optimize.OptimizeResult``: ``result["x"]``).

    Raises:
      ValueError: Bad options, a start outside the bounds, a non-finite residual at the start
        (naming the sequence and signal), or a parameter without effect.
      TypeError: An option the chosen backend does not take (named in the message).
    """
    options = FitOptions(
        optimizer=optimizer, max_iters=max_iters, verbose=verbose, xtol=xtol, gtol=gtol,
        ftol=ftol, eps=eps, mu_factor=mu_factor, secant=secant, trial_steps=trial_steps,
        x_scale=x_scale, horizons=horizons, allow_no_effect=allow_no_effect,
        checkpoint=checkpoint, resume=resume, callback=callback, output=output,
        messages=messages, backend_options=optimizer_kwargs,
    )  # fmt: skip
    check_holdout(holdout)
    outer = _Outer(check_conditioning, global_search, starts, starts_seed)
    if executor is not None:
        opt_params, result = _on_cluster(initial_params, residual_fn, executor, options, outer)
    else:
        opt_params, result = _fit_map(initial_params, residual_fn, options, outer)
    if holdout is not None:
        result.extras["validation"] = _holdout(initial_params, opt_params, residual_fn, holdout)
    return opt_params, result


@dataclass(frozen=True)
class _Outer:
    """What :func:`optimize` does around the local fit: the conditioning check, a global
    stage, several starts."""

    check_conditioning: bool
    global_search: Any
    starts: int | None
    starts_seed: int

    def keywords(self) -> dict[str, Any]:
        """As :func:`optimize`'s keywords (shallow: ``global_search`` stays as given)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _fit_map(
    initial_params: ParameterDict, residual_fn: ResidualFn, options: FitOptions, outer: _Outer
) -> tuple[ParameterDict, OptimizeResult]:
    """:func:`_fit_here`, a MAP fit when a parameter has a prior (its rows said in
    ``result.extras["prior"]``)."""
    fn = with_prior(residual_fn, initial_params)
    opt_params, result = _fit_here(initial_params, fn, options, outer)
    if isinstance(fn, PriorResidual):
        result.extras["prior"] = fn.rows.to_dict()
    return opt_params, result


def _holdout(
    initial_params: ParameterDict, opt_params: ParameterDict, residual_fn: Any, holdout: Any
) -> Any:
    """The validation table of ``holdout`` (``None`` with a warning when a simulation
    fails: the fit itself is kept)."""
    try:
        return holdout_table(initial_params, opt_params, residual_fn, holdout)
    except (RolloutDivergedError, ValueError, KeyError) as e:
        logger.warning("optimize: the holdout validation failed: %s", e)
        return None


def _fit_here(
    initial_params: ParameterDict, residual_fn: ResidualFn, options: FitOptions, outer: _Outer
) -> tuple[ParameterDict, OptimizeResult]:
    """:func:`optimize` on this machine: the local fit, after a global stage or from many
    starts."""
    if outer.global_search is None and outer.starts is None:
        return run_fit(
            initial_params, residual_fn, options, check_conditioning=outer.check_conditioning
        )
    from mjsysid.fit.search import fit_with_search  # the outer stages (optional extras)

    return fit_with_search(initial_params, residual_fn, **outer.keywords(), **options.as_keywords())


def _on_cluster(
    initial_params: ParameterDict,
    residual_fn: ResidualFn,
    executor: Any,
    options: FitOptions,
    outer: _Outer,
) -> tuple[ParameterDict, OptimizeResult]:
    """:func:`optimize` with every batched call on the Dask cluster of ``executor``."""
    from mjsysid.fit.distributed import distribute  # the distributed extra

    remote = distribute(residual_fn, executor)  # type: ignore[arg-type]
    try:
        return optimize(initial_params, remote, **outer.keywords(), **options.as_keywords())
    finally:
        remote.close()
