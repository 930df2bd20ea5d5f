"""The local fit: one (possibly staged) least-squares run from a start point.

:func:`run_fit` is :func:`mjsysid.fit.optimize.optimize` without its optional outer stages
(a global search, multi-start, a Dask cluster): the start checks, the horizon stages and the
backend, with every option in one validated :class:`~mjsysid.fit.options.FitOptions`, and
the one result type, :class:`OptimizeResult`. The outer stages
(:mod:`~mjsysid.fit.global_search`, :mod:`~mjsysid.fit.multistart`) call it through
:func:`fit_local`, so nothing below :mod:`mjsysid.fit.optimize` imports it.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from mjsysid.fit.checkpoints import (
    History,
    checkpoint_history,
    checkpoint_horizon,
    load_checkpoint,
    write_checkpoint,
)
from mjsysid.fit.conditioning import start_condition
from mjsysid.fit.horizons import StagedFit, resolve_horizons, run_stages
from mjsysid.fit.jacobian import ResidualFn
from mjsysid.fit.lm import LMOptions
from mjsysid.fit.options import FitOptions, check_x_scale
from mjsysid.fit.stage import StageSettings
from mjsysid.fit.start import check_start
from mjsysid.fit.status import CONVERGED, message
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

__all__ = ["OptimizeResult", "fit_local", "run_fit"]

logger = logging.getLogger("mjsysid.fit.optimize")  # the driver's logger, as before the split


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
        ``(p,)`` vectors only; memory does not grow with the residual size; after a resume
        they include the iterations before it, kept in the checkpoint). With horizon
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
    """Where the fit starts: ``x0``, the iterations already done, the horizon stages left
    and, when resuming, the checkpoint's history of the first of them."""

    x0: np.ndarray
    start_iter: int
    horizons: list[float]
    earlier: History | None = None


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
    earlier = checkpoint_history(ckpt, x0.size) if horizons[0] == written_in else None
    return _Start(x0, start_iter, horizons, earlier)


def _result(fit: StagedFit, s: StageSettings, start_iter: int, t_start: float) -> OptimizeResult:
    """Writes the last checkpoint, says how it ended, and collects the result."""
    done, opts = fit.stages, s.options
    stage = done[-1]
    assert stage.r is not None and stage.J is not None
    nit = sum(st.nit for st in done)
    if s.ckpt is not None:
        ended = next((st for st in reversed(done) if st.horizon == fit.stopped_in), stage)
        write_checkpoint(
            s.ckpt, stage.x, stage.cost, start_iter + nit, s.names, fit.stopped_in,
            History(ended.history_obj, ended.history_x),
        )  # fmt: skip
    text = message(stage.status, opts.max_iters, opts.messages)
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
            s.ckpt,
            start.x0,
            float("nan"),
            start.start_iter,
            s.names,
            start.horizons[0],
            start.earlier,  # (a fit killed again before its first iteration keeps it)
        )
    staged = run_stages(
        residual_fn, params, start.x0, s, start.horizons, start.start_iter, start.earlier
    )
    result = _result(staged, s, start.start_iter, t_start)
    opt_params = params.copy()
    opt_params.update_from_vector(result.x)
    if options.verbose:  # the table mujoco.sysid's verbose logs
        logger.info("%s", opt_params.compare_parameters(x0, result.x))
    return opt_params, result


_FIT_FIELDS = frozenset(f.name for f in dataclasses.fields(FitOptions))


def fit_local(
    initial_params: ParameterDict,
    residual_fn: ResidualFn,
    *,
    check_conditioning: bool = False,
    **options: Any,
) -> tuple[ParameterDict, OptimizeResult]:
    """:func:`run_fit` with its options as :func:`~mjsysid.fit.optimize.optimize`'s keywords
    (the backend's own options among them)."""
    known = {k: v for k, v in options.items() if k in _FIT_FIELDS}
    backend = {k: v for k, v in options.items() if k not in _FIT_FIELDS}
    if backend:
        known["backend_options"] = {**known.get("backend_options", {}), **backend}
    return run_fit(
        initial_params, residual_fn, FitOptions(**known), check_conditioning=check_conditioning
    )
