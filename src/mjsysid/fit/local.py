"""The local fit: one (possibly staged) least-squares run from a start point.

:func:`run_fit` is :func:`mjsysid.fit.optimize.optimize` without its optional outer stages
(a global search, multi-start, a Dask cluster): the start checks, the horizon stages and the
backend, with every option in one validated :class:`~mjsysid.fit.options.FitOptions`, and
the one result type, :class:`~mjsysid.fit.result.OptimizeResult`. The outer stages
(:mod:`~mjsysid.fit.search`) call it.

How well a fit is posed at its start: ``cond(JᵀJ)`` (``FitOptions.check_conditioning``).

The Gauss-Newton model of every backend solves with ``H = JᵀJ``; its condition number
``κ(JᵀJ) = κ(J)² = (σ_max/σ_min)²`` (singular values of ``J``) says how many digits a step
can lose: about ``log10 κ`` of the 16 of double precision. Above :data:`CONDITION_WARN`
the start is reported with a logged warning, the advice of
``mujoco.sysid``'s check: scale the parameters (``x_scale='jac'``) or regularise.

Checks of a fit's start: the free parameters, entry by entry, before any simulation.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from mjsysid.fit.checkpoints import (
    History,
    check_checkpoint_cost,
    checkpoint_history,
    checkpoint_horizon,
    fit_fingerprint,
    load_checkpoint,
    write_checkpoint,
)
from mjsysid.fit.horizons import StagedFit, StageSettings, resolve_horizons, run_stages
from mjsysid.fit.jacobian import CountedResidual, residual_and_jacobian
from mjsysid.fit.lm import LMOptions
from mjsysid.fit.options import FitOptions, check_x_scale
from mjsysid.fit.result import FitHistory, OptimizeResult
from mjsysid.fit.status import CONVERGED, Diagnosis, Status, message
from mjsysid.fit.whiteness import residual_series, whiteness
from mjsysid.objective.protocols import DescribedResidualFn, HorizonResidualFn, ResidualFn
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import first_outside, must_be

__all__ = ["check_start", "run_fit", "start_condition"]


def _free_arrays(p: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(value, min_value, max_value)`` of a parameter as float arrays of its shape."""
    arrays = []
    for field_name in ("value", "min_value", "max_value"):
        arr = np.asarray(getattr(p, field_name))
        if arr.dtype.kind not in "iuf" or arr.shape != p.shape:
            raise ValueError(
                must_be(
                    f"initial_params: {p.name}.{field_name}",
                    f"a float array of shape {p.shape}",
                    arr,
                )
            )
        arrays.append(arr.astype(np.float64))
    return arrays[0], arrays[1], arrays[2]


def _check_entry(label: str, x: float, lo: float, hi: float) -> None:
    """One free entry: numeric bounds, ``lo < hi``, a finite start."""
    if np.isnan(lo) or np.isnan(hi):
        raise ValueError(
            f"initial_params: {label} must have bounds that are numbers (+-inf "
            f"allowed), got [{float(lo)!r}, {float(hi)!r}]; fix min_value/max_value"
        )
    if not lo < hi:
        fix = (
            "freeze it to keep it fixed (frozen: true in an experiment file, frozen=True in "
            "Python), or widen its bounds"
            if lo == hi
            else "fix the bounds"
        )
        raise ValueError(
            f"initial_params: {label} must have min_value < max_value to be "
            f"optimized, got [{float(lo)!r}, {float(hi)!r}]; {fix}"
        )
    if not np.isfinite(x):
        raise ValueError(
            f"initial_params: {label} must start at a finite value, got "
            f"{float(x)!r}; set its value (or call reset())"
        )


def _check_free_parameters(params: ParameterDict) -> None:
    """Checks what the optimizer will see of every non-frozen parameter, entry by entry.

    ``Parameter`` validates its bounds and nominal when it is created, but ``frozen``, the
    bound arrays and ``value`` can change afterwards (unfreezing a parameter whose bounds are
    equal, writing into ``p.min_value`` or ``p.value`` in place), and a backend handed such a
    point fails far from the cause (a MuJoCo ``FatalError`` for equal bounds, "converged"
    after 0 iterations, "x must be finite"). The error names the parameter, and the entry of
    a vector parameter. Checked for each entry: the bounds are numbers (``±inf`` allowed, not
    NaN), ``min_value < max_value``, the start is finite and within the bounds, and, for a
    kind with a physical lower limit (see :mod:`mjsysid.params.kinds`), ``min_value`` is not
    below it.
    """
    from mjsysid.params.kinds import KINDS  # local import: param_kinds builds on parameter

    for p in params.non_frozen():
        x, lo, hi = _free_arrays(p)

        def label(i: int, name: str = p.name, size: int = p.size) -> str:
            return name if size == 1 else f"{name}[{i}]"

        for i in range(p.size):
            _check_entry(label(i), x[i], lo[i], hi[i])
        kind_name = p.meta.get("kind")
        kind = KINDS.get(kind_name) if isinstance(kind_name, str) else None
        if kind is not None and kind.lower is not None:
            below = np.flatnonzero(lo < kind.lower)
            if below.size:
                i = int(below[0])
                raise ValueError(
                    f"initial_params: {label(i)} must have min_value >= {kind.lower!r} "
                    f"({kind_name}: {kind.lower_reason}), got {float(lo[i])!r}; a fit "
                    "must not reach values that are not physical, raise min_value"
                )


def check_start(params: ParameterDict, optimizer: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x0, lo, hi)``, each ``(p,)``, of a valid start (``ValueError``/``TypeError``
    naming the parameter otherwise; ``"mujoco"`` needs finite bounds)."""
    if not isinstance(params, ParameterDict):
        raise TypeError(must_be("initial_params", "a ParameterDict", type(params).__name__))
    if len(params) == 0:
        raise ValueError(must_be("initial_params", "a non-empty ParameterDict", "an empty one"))
    if params.size == 0:
        raise ValueError(
            f"initial_params must have at least one non-frozen parameter, got "
            f"{len(params)} parameters, all frozen: {params.keys()}"
        )
    _check_free_parameters(params)
    x0 = params.as_vector()
    lo, hi = params.get_bounds()
    names = params.get_non_frozen_parameter_names()
    i = first_outside(x0, lo, hi)
    if i is not None:
        raise ValueError(
            f"initial_params: {names[i]} must start within its bounds "
            f"[{float(lo[i])!r}, {float(hi[i])!r}], got "
            f"{float(x0[i])!r}; mjsysid does not clip silently, fix the value or the bounds"
        )
    if optimizer == "mujoco":
        inf = np.flatnonzero(~(np.isfinite(lo) & np.isfinite(hi)))
        if inf.size:
            raise ValueError(
                f"optimizer 'mujoco' needs finite bounds, got infinite bounds for "
                f"{[names[i] for i in inf]}; give them finite bounds or use optimizer='scipy'"
            )
    return x0, lo, hi


logger = logging.getLogger("mjsysid.fit.optimize")

CONDITION_WARN = 1e10  # cond(JᵀJ) above this is reported


def start_condition(
    residual_fn: ResidualFn,
    params: ParameterDict,
    x0: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    eps: float,
) -> float:
    """``cond(JᵀJ)`` at ``x0`` from one forward-difference Jacobian (``p + 1`` candidates),
    logged at WARNING when it exceeds :data:`CONDITION_WARN` (``inf`` for a singular one).

    Args:
      residual_fn: The fit's residual. params: Its parameters (not modified).
      x0: ``(p,)`` start. bounds: ``(lo, hi)``, each ``(p,)``. eps: Relative step.
    """
    fn = CountedResidual(residual_fn, params.copy())
    r0, J = residual_and_jacobian(fn, x0, bounds, eps)
    if not np.all(np.isfinite(r0)):
        return float("nan")  # the fit itself reports where
    sv = np.linalg.svd(J, compute_uv=False)  # descending, min(n, p) of them
    singular = J.shape[0] < J.shape[1] or sv[-1] == 0
    cond = float("inf") if singular else float((sv[0] / sv[-1]) ** 2)
    if not cond <= CONDITION_WARN:
        logger.warning(
            "cond(J^T J) ~ %.1e at the starting point; the problem may be ill-conditioned. "
            "Consider x_scale='jac' or regularizing (or freeze parameters the data do not "
            "determine).",
            cond,
        )
    return cond


logger = logging.getLogger("mjsysid.fit.optimize")  # the driver's logger, as before the split


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
    out = opts.stream
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


def _resume(
    start: _Start, s: StageSettings, params: ParameterDict, residual_fn: Any = None
) -> _Start:
    """The start read from the checkpoint (``resume=True`` and it exists), in its stage,
    checked against the present inputs, options and data (see
    :mod:`~mjsysid.fit.checkpoints`)."""
    ckpt = s.ckpt
    if not s.options.resume or ckpt is None or not ckpt.exists():
        return start
    x0, start_iter = load_checkpoint(ckpt, params, fit_fingerprint(s.options))
    lo, hi = s.bounds
    i = first_outside(x0, lo, hi)
    if i is not None:
        raise ValueError(
            f"checkpoint {str(ckpt)!r}: {s.names[i]} must lie within its bounds "
            f"[{float(lo[i])!r}, {float(hi[i])!r}], got {float(x0[i])!r}; the bounds "
            "changed since it was written: widen them or start afresh (resume=False)"
        )
    written_in = checkpoint_horizon(ckpt)
    if residual_fn is not None:
        _check_cost(ckpt, residual_fn, params, x0, written_in)
    horizons = [h for h in start.horizons if h >= written_in] or [1.0]
    logger.info("resuming from %s at iteration %d", ckpt, start_iter)
    earlier = checkpoint_history(ckpt, x0.size) if horizons[0] == written_in else None
    return _Start(x0, start_iter, horizons, earlier)


# the whole data's cost may end this much above its start value before the fit says it rose
COST_ROSE_RTOL = 1e-9


def _diagnosis(stage: Any, residual_fn: Any, cost0: float) -> Diagnosis:
    """The end point's :class:`~mjsysid.fit.status.Diagnosis`: the step left, and how far
    the residual is above its sample-to-sample noise (Durbin-Watson)."""
    r = stage.r
    w = whiteness(r, residual_series(residual_fn, r.size), cost0)
    ratio = w.noise_ratio if w.judged else float("nan")
    return Diagnosis(stage.step, ratio, w.text(), stage.trial)


def _check_cost(
    ckpt: Any, residual_fn: Any, params: ParameterDict, x: np.ndarray, horizon: float
) -> None:
    """The cost at the checkpoint's point on its stage's data, against the recorded one."""
    fn = residual_fn
    if horizon < 1.0:
        if not isinstance(residual_fn, HorizonResidualFn):
            return
        fn = residual_fn.head(horizon)
    r = CountedResidual(fn, params.copy())(x)
    if np.all(np.isfinite(r)):
        check_checkpoint_cost(ckpt, 0.5 * float(r @ r))


def _result(
    fit: StagedFit, s: StageSettings, start_iter: int, t_start: float, residual_fn: Any = None
) -> OptimizeResult:
    """Writes the last checkpoint, says how it ended, and collects the result."""
    done, opts = fit.stages, s.options
    stage = done[-1]
    assert stage.r is not None and stage.J is not None
    cost0 = stage.cost0 if fit.full is None else fit.initial_cost
    scale = max([cost0, *(st.cost0 for st in done)])  # round-off at an exact fit is no rise
    rose = stage.cost - cost0 > max(COST_ROSE_RTOL * cost0, 1e-12 * scale)
    if rose and stage.status != Status.INTERRUPTED:
        stage.status = Status.COST_ROSE
    nit = sum(st.nit for st in done)
    if s.ckpt is not None:
        ended = next((st for st in reversed(done) if st.horizon == fit.stopped_in), stage)
        write_checkpoint(  # the cost on the data of the stage it is resumed in
            s.ckpt, stage.x, ended.cost, start_iter + nit, s.names, fit.stopped_in,
            History(ended.history_obj, ended.history_x), fit_fingerprint(opts),
        )  # fmt: skip
    text = message(
        stage.status, opts.max_iters, opts.messages, _diagnosis(stage, residual_fn, cost0)
    )
    if opts.verbose:
        print(f"{text} cost {cost0:.6e} -> {stage.cost:.6e} in {nit} iterations", file=s.out)
    history = FitHistory(stage.history_obj, stage.history_x, sum(st.nsecant for st in done))
    return OptimizeResult(
        x=stage.x,
        cost=stage.cost,
        fun=stage.r,
        jac=stage.J,
        grad=stage.J.T @ stage.r,
        status=stage.status,
        success=stage.status in CONVERGED,
        message=text,
        nfev=sum(st.nfev for st in done) + (fit.full.nfev if fit.full is not None else 0),
        njev=sum(st.njev for st in done),
        nit=nit,
        initial_cost=cost0,
        wall_time=time.perf_counter() - t_start,
        parameter_names=s.names,
        optimizer=opts.optimizer,
        history=history,
        stages=[st.summary() for st in done] if len(done) > 1 else [],
        step_trial=stage.trial,
    )


def run_fit(
    initial_params: ParameterDict, residual_fn: ResidualFn, options: FitOptions
) -> tuple[ParameterDict, OptimizeResult]:
    """The local fit: start checks, the horizon stages and the backend, with ``options``
    (its outer stages, ``global_search`` and ``starts``, are :mod:`~mjsysid.fit.search`'s)."""
    t_start = time.perf_counter()
    if not callable(residual_fn):
        raise TypeError(must_be("residual_fn", "callable residual_fn(x, params)", residual_fn))
    params = initial_params.copy() if isinstance(initial_params, ParameterDict) else initial_params
    x0, lo, hi = check_start(params, options.optimizer)
    check_x_scale(options.x_scale, x0.shape)
    s = _settings(options, params, lo, hi)
    if isinstance(residual_fn, DescribedResidualFn):
        residual_fn.check_params(params)
    if options.check_conditioning:
        start_condition(residual_fn, params, x0, (lo, hi), float(options.eps))
    horizons = list(resolve_horizons(options.horizons, residual_fn, options.optimizer, params))
    start = _resume(_Start(x0, 0, horizons), s, params, residual_fn)
    if s.ckpt is not None:  # fail now, not after the first iteration, if it cannot be written
        write_checkpoint(
            s.ckpt,
            start.x0,
            float("nan"),
            start.start_iter,
            s.names,
            start.horizons[0],
            start.earlier,  # (a fit killed again before its first iteration keeps it)
            fit_fingerprint(options),
        )
    staged = run_stages(
        residual_fn, params, start.x0, s, start.horizons, start.start_iter, start.earlier
    )
    result = _result(staged, s, start.start_iter, t_start, residual_fn)
    opt_params = params.copy()
    opt_params.update_from_vector(result.x)
    if options.verbose:  # the table mujoco.sysid's verbose logs
        logger.info("%s", opt_params.compare_parameters(x0, result.x))
    return opt_params, result
