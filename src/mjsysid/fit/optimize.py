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

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from mjsysid.fit.checkpoints import _checkpoint_horizon as _checkpoint_horizon
from mjsysid.fit.checkpoints import checkpoint_horizon, load_checkpoint, write_checkpoint
from mjsysid.fit.conditioning import start_condition
from mjsysid.fit.horizons import AUTO_HORIZONS as AUTO_HORIZONS
from mjsysid.fit.horizons import StagedFit, resolve_horizons, run_stages
from mjsysid.fit.intervals import calculate_intervals as calculate_intervals  # re-export (spec)
from mjsysid.fit.jacobian import ResidualFn
from mjsysid.fit.jacobian import fd_jacobian as fd_jacobian
from mjsysid.fit.jacobian import sweep_parameter as sweep_parameter
from mjsysid.fit.lm import LMOptions
from mjsysid.fit.options import BACKEND_OPTIONS as BACKEND_OPTIONS
from mjsysid.fit.options import OPTIMIZERS as OPTIMIZERS
from mjsysid.fit.options import FitOptions, IterationCallback, check_x_scale
from mjsysid.fit.stage import StageSettings
from mjsysid.fit.start import check_start
from mjsysid.fit.status import CONVERGED, Status, message
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

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
    "sweep_parameter",
]

logger = logging.getLogger(__name__)


@dataclass
class OptimizeResult:
    """What :func:`optimize` found.

    Read by attribute or, like a ``scipy.optimize.OptimizeResult`` (what ``mujoco.sysid``
    returns), by key: ``result["x"] is result.x``, ``"jac" in result``, ``keys()``,
    ``items()``, ``get()``.

    Attributes:
      x: ``(p,)`` solution vector (non-frozen parameters, vector order).
      cost: ``½‖r(x)‖²`` at the solution. initial_cost: the same at the start.
      fun: ``(n,)`` residual at the solution.
      jac: ``(n, p)`` Jacobian at the solution (used for confidence intervals).
      grad: ``(p,)`` gradient ``Jᵀr`` at the solution.
      status: A :class:`~mjsysid.fit.status.Status` value, as a plain string: ``"xtol"``,
        ``"gtol"``, ``"ftol"``, ``"stalled"`` (``"lm"``: a non-smooth cost stopped
        improving), ``"max_iters"``, ``"no_improvement"``, ``"factorization_failed"`` or
        ``"interrupted"``.
      success: Whether a convergence test was met.
      message: What happened and what to do next, in words.
      nfev: Candidate evaluations (columns of residual calls, Jacobian columns included).
      njev: Jacobian evaluations. nit: iterations.
      wall_time: Seconds spent in :func:`optimize`.
      parameter_names: Label of every entry of ``x``.
      optimizer: Backend name.
      extras: ``{"objective": [...], "candidate": [...]}`` per iteration (scalars and
        ``(p,)`` vectors only; memory does not grow with the residual size). With horizon
        stages these are the last (whole-data) stage's, like ``cost``; ``extras["stages"]``
        holds every stage's summary, its costs per iteration (on its part of the data) in
        ``"objective"``.
    """

    x: np.ndarray
    cost: float
    fun: np.ndarray
    jac: np.ndarray
    grad: np.ndarray
    status: str
    success: bool
    message: str
    nfev: int
    njev: int
    nit: int
    initial_cost: float
    wall_time: float
    parameter_names: list[str]
    optimizer: str
    extras: dict[str, Any] = field(default_factory=dict)

    # -- read like a scipy.optimize.OptimizeResult (a dict with attribute access) ---------------
    def keys(self) -> list[str]:
        """The field names (``x``, ``cost``, ``fun``, ``jac``, ``grad``, ...)."""
        return [f.name for f in fields(self)]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self.keys()]

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(f"OptimizeResult has no field {key!r}; fields: {self.keys()}")
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.keys() else default


def _settings(
    opts: FitOptions, params: ParameterDict, lo: np.ndarray, hi: np.ndarray
) -> StageSettings:
    x_scale = opts.x_scale
    lm = LMOptions(
        max_iters=int(opts.max_iters),
        xtol=float(opts.xtol),
        gtol=float(opts.gtol),
        mu_factor=float(opts.damping_growth),
        secant=opts.secant,
        trial_steps=opts.trial_steps,
        x_scale=None if isinstance(x_scale, str) else np.asarray(x_scale, dtype=np.float64),
    )
    out = opts.output if opts.output is not None else sys.stdout
    names = params.get_non_frozen_parameter_names()
    return StageSettings(opts, lm, names, (lo, hi), out, opts.checkpoint_path)


@dataclass
class _Start:
    """Where the fit starts: ``x0``, the iterations already done, the horizon stages left."""

    x0: np.ndarray
    start_iter: int
    horizons: list[float]


def _resume(start: _Start, s: StageSettings, params: ParameterDict) -> _Start:
    """The start read from the checkpoint (``resume=True`` and it exists), in its stage."""
    ckpt = s.ckpt
    if not s.options.resume or ckpt is None or not ckpt.exists():
        return start
    x0, start_iter = load_checkpoint(ckpt, params)
    lo, hi = s.bounds
    out = np.flatnonzero((x0 < lo) | (x0 > hi))
    if out.size:
        i = int(out[0])
        raise ValueError(
            f"checkpoint {str(ckpt)!r}: {s.names[i]} must lie within its bounds "
            f"[{float(lo[i])!r}, {float(hi[i])!r}], got {float(x0[i])!r}; the bounds "
            "changed since it was written: widen them or start afresh (resume=False)"
        )
    written_in = checkpoint_horizon(ckpt)
    horizons = [h for h in start.horizons if h >= written_in] or [1.0]
    logger.info("resuming from %s at iteration %d", ckpt, start_iter)
    return _Start(x0, start_iter, horizons)


def _result(fit: StagedFit, s: StageSettings, start_iter: int, t_start: float) -> OptimizeResult:
    """Writes the last checkpoint, says how it ended, and collects the result."""
    done, opts = fit.stages, s.options
    stage = done[-1]
    assert stage.r is not None and stage.J is not None
    nit = sum(st.nit for st in done)
    if s.ckpt is not None:
        write_checkpoint(s.ckpt, stage.x, stage.cost, start_iter + nit, s.names, fit.stopped_in)
    text = message(stage.status, opts.max_iters)
    cost0 = stage.cost0 if fit.full is None else fit.initial_cost
    if opts.verbose:
        print(f"{text} cost {cost0:.6e} -> {stage.cost:.6e} in {nit} iterations", file=s.out)
    extras: dict[str, Any] = {
        "objective": stage.history_obj,
        "candidate": stage.history_x,
        "secant_steps": sum(st.nsecant for st in done),
    }
    if len(done) > 1:
        extras["stages"] = [st.summary() for st in done]
    return OptimizeResult(
        x=stage.x,
        cost=stage.cost,
        fun=stage.r,
        jac=stage.J,
        grad=stage.J.T @ stage.r,
        status=stage.status.value,
        success=stage.status in CONVERGED,
        message=text,
        nfev=sum(st.nfev for st in done) + (fit.full.nfev if fit.full is not None else 0),
        njev=sum(st.njev for st in done),
        nit=nit,
        initial_cost=cost0,
        wall_time=time.perf_counter() - t_start,
        parameter_names=s.names,
        optimizer=opts.optimizer,
        extras=extras,
    )


def run_fit(
    initial_params: ParameterDict,
    residual_fn: ResidualFn,
    options: FitOptions,
    *,
    check_conditioning: bool = False,
) -> tuple[ParameterDict, OptimizeResult]:
    """:func:`optimize` with its options given as one :class:`FitOptions`."""
    t_start = time.perf_counter()
    if not isinstance(check_conditioning, bool | np.bool_):
        raise TypeError(must_be("check_conditioning", "True or False", check_conditioning))
    if not callable(residual_fn):
        raise TypeError(must_be("residual_fn", "callable residual_fn(x, params)", residual_fn))
    params = initial_params.copy() if isinstance(initial_params, ParameterDict) else initial_params
    x0, lo, hi = check_start(params, options.optimizer)
    check_x_scale(options.x_scale, x0.shape)
    s = _settings(options, params, lo, hi)
    check_params = getattr(residual_fn, "check_params", None)
    if callable(check_params):
        check_params(params)
    if check_conditioning:
        start_condition(residual_fn, params, x0, (lo, hi), float(options.eps))
    horizons = list(resolve_horizons(options.horizons, residual_fn, options.optimizer, params))
    start = _resume(_Start(x0, 0, horizons), s, params)
    if s.ckpt is not None:  # fail now, not after the first iteration, if it cannot be written
        write_checkpoint(
            s.ckpt, start.x0, float("nan"), start.start_iter, s.names, start.horizons[0]
        )
    staged = run_stages(residual_fn, params, start.x0, s, start.horizons, start.start_iter)
    result = _result(staged, s, start.start_iter, t_start)
    opt_params = params.copy()
    opt_params.update_from_vector(result.x)
    if options.verbose:  # the table mujoco.sysid's verbose logs
        logger.info("%s", opt_params.compare_parameters(x0, result.x))
    return opt_params, result


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
      max_iters, xtol, gtol, ftol, eps, mu_factor, secant, trial_steps, x_scale,
        horizons, allow_no_effect, checkpoint, resume, callback, output: The options of the
        fit, each described at :class:`~mjsysid.fit.options.FitOptions`, which holds them
        (validated once; :func:`run_fit` takes one directly).
      **optimizer_kwargs: Options of the backend itself, passed on by name (``loss="soft_l1"``
        for ``"scipy"``; the names are :data:`~mjsysid.fit.options.BACKEND_OPTIONS`).

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
        backend_options=optimizer_kwargs,
    )  # fmt: skip
    return run_fit(initial_params, residual_fn, options, check_conditioning=check_conditioning)
