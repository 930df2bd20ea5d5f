"""Multi-start local fits: how many starts in the box reach the best cost, and where.

:func:`multistart` draws starting points in the parameter box (a Latin hypercube: every
parameter's range is cut into ``N`` equal strata and each stratum holds one start; McKay,
Beckman & Conover 1979), adds the nominal, evaluates all of them in **one** batched residual
call (a start whose simulation diverges is reported and not fitted), and runs the local fit
(:func:`mjsysid.fit.optimize.optimize`) from each, best initial cost first.

The summary says how many starts *reached* the best cost, ``cost_i ≤ best·(1 + rtol) +
atol``, and the spread (min, max, standard deviation) of every parameter over those: a
narrow spread says the best basin is found reliably and the parameters are identified; a
wide one at equal cost says the data do not tell them apart.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mjsysid.fit.global_search import batch_costs, check_box_params
from mjsysid.fit.jacobian import ResidualFn
from mjsysid.fit.local import OptimizeResult, fit_local
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import finite_real, must_be

logger = logging.getLogger(__name__)


def latin_hypercube(lo: np.ndarray, hi: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``(p, n)`` points in the box ``[lo, hi]``, one in each of the ``n`` strata of every
    parameter (stratum order shuffled independently per parameter, uniform within it)."""
    p = lo.size
    strata = np.stack([rng.permutation(n) for _ in range(p)])  # (p, n)
    u = (strata + rng.random((p, n))) / n
    return lo[:, None] + u * (hi - lo)[:, None]


@dataclass
class StartRecord:
    """One start of :func:`multistart`.

    Attributes:
      x0: ``(p,)`` start. initial_cost: Cost there (``inf``: diverged, not fitted).
      x: ``(p,)`` where its local fit ended (``x0`` when not fitted). cost: Final cost.
      status: The local fit's status, ``"diverged_at_start"`` or ``"failed"``.
      nfev: Evaluations of its local fit. nominal: Whether this is the nominal start.
      error: Why a fit failed (the ``ValueError`` of :func:`optimize`), else ``""``.
    """

    x0: np.ndarray
    initial_cost: float
    x: np.ndarray
    cost: float
    status: str
    nfev: int
    nominal: bool
    error: str = ""

    def summary(self) -> dict[str, Any]:
        return {
            "x0": [float(v) for v in self.x0],
            "initial_cost": float(self.initial_cost),
            "x": [float(v) for v in self.x],
            "cost": float(self.cost),
            "status": self.status,
            "nfev": int(self.nfev),
            "nominal": bool(self.nominal),
            "error": self.error,
        }


@dataclass
class MultistartSummary:
    """What the starts of :func:`multistart` found together.

    Attributes:
      starts: Every :class:`StartRecord`, in the order they were drawn (the nominal first).
      best: Index (into ``starts``) of the best fit. best_cost: Its cost.
      reached: Indices of the starts within tolerance of the best cost.
      rtol, atol: The tolerance: ``cost ≤ best·(1 + rtol) + atol``.
      spread: ``{name: {"min", "max", "std"}}`` of every parameter over the reached starts.
      evaluations: All residual columns (start batch and local fits).
      wall_time: Seconds.
    """

    starts: list[StartRecord]
    best: int
    best_cost: float
    reached: list[int]
    rtol: float
    atol: float
    spread: dict[str, dict[str, float]]
    evaluations: int
    wall_time: float

    @property
    def n_reached(self) -> int:
        """How many starts reached the best cost."""
        return len(self.reached)

    def summary(self) -> dict[str, Any]:
        """Plain scalars and lists (for ``result.extras["multistart"]`` and YAML)."""
        return {
            "starts": len(self.starts),
            "n_reached": self.n_reached,
            "reached": list(self.reached),
            "best": int(self.best),
            "best_cost": float(self.best_cost),
            "rtol": float(self.rtol),
            "atol": float(self.atol),
            "spread": self.spread,
            "final_costs": [float(s.cost) for s in self.starts],
            "evaluations": int(self.evaluations),
            "wall_time": float(self.wall_time),
            "records": [s.summary() for s in self.starts],
        }


def _check_options(starts: object, rtol: object, atol: object) -> None:
    if isinstance(starts, bool) or not isinstance(starts, int | np.integer) or starts < 1:
        raise ValueError(must_be("multistart: starts", "a positive integer", starts))
    if not (finite_real(rtol) and float(rtol) >= 0):  # type: ignore[arg-type]
        raise ValueError(must_be("multistart: rtol", "a finite number >= 0", rtol))
    if atol is not None and not (finite_real(atol) and float(atol) >= 0):  # type: ignore[arg-type]
        raise ValueError(must_be("multistart: atol", "a finite number >= 0 or None", atol))


def _fit_one(
    params: ParameterDict,
    residual_fn: ResidualFn,
    x0: np.ndarray,
    c0: float,
    nominal: bool,
    optimize_kwargs: dict[str, Any],
) -> tuple[StartRecord, tuple[ParameterDict, OptimizeResult] | None]:
    """The local fit from ``x0`` (not run when it diverged there)."""
    if not np.isfinite(c0):
        return StartRecord(x0, c0, x0, c0, "diverged_at_start", 0, nominal), None
    start = params.copy()
    start.update_from_vector(x0)
    try:
        fit = fit_local(start, residual_fn, **optimize_kwargs)
    except ValueError as e:  # e.g. a parameter without effect at this start
        logger.warning("multistart: the fit from start %s failed: %s", x0, e)
        return StartRecord(x0, c0, x0, np.inf, "failed", 0, nominal, str(e)), None
    res = fit[1]
    return StartRecord(x0, c0, res.x.copy(), res.cost, res.status, res.nfev, nominal), fit


def _spread(
    records: list[StartRecord], reached: list[int], names: list[str]
) -> dict[str, dict[str, float]]:
    X = np.stack([records[i].x for i in reached], axis=1)  # (p, m)
    return {
        name: {"min": float(X[k].min()), "max": float(X[k].max()), "std": float(X[k].std())}
        for k, name in enumerate(names)
    }


def start_checkpoint_path(checkpoint: str | Path, j: int) -> Path:
    """Start ``j``'s checkpoint beside the given one (``fit.npz`` -> ``fit.start3.npz``)."""
    path = Path(checkpoint)
    return path.with_name(f"{path.stem}.start{j}{path.suffix}")


def _start_kwargs(optimize_kwargs: dict[str, Any], j: int) -> dict[str, Any]:
    """The local fit's options for start ``j``: its own checkpoint (so that ``resume``
    resumes every start from its own file)."""
    ckpt = optimize_kwargs.get("checkpoint")
    if ckpt is None:
        return optimize_kwargs
    return {**optimize_kwargs, "checkpoint": start_checkpoint_path(ckpt, j)}


def _draw_starts(
    x_nom: np.ndarray, lo: np.ndarray, hi: np.ndarray, starts: int, seed: int, nominal: bool
) -> np.ndarray:
    """``(p, starts)``: the nominal (when ``nominal``) then Latin-hypercube points."""
    drawn = starts - int(nominal)
    rng = np.random.default_rng(seed)
    X0 = latin_hypercube(lo, hi, drawn, rng) if drawn else np.zeros((x_nom.size, 0))
    return np.concatenate([x_nom[:, None], X0], axis=1) if nominal else X0


def multistart(
    params: ParameterDict,
    residual_fn: ResidualFn,
    starts: int = 8,
    *,
    seed: int = 0,
    rtol: float = 1e-3,
    atol: float | None = None,
    include_nominal: bool = True,
    **optimize_kwargs: Any,
) -> tuple[ParameterDict, OptimizeResult]:
    """Local fits from ``starts`` points in the box; the best one and what they all found.

    Args:
      params: Nominal and bounds (finite for every free entry); not modified.
      residual_fn: ``residual_fn(X, params)``, ``(p, k) -> (n, k)``.
      starts: Number of local fits, the nominal included (``include_nominal``); the others
        are Latin-hypercube points in the box.
      seed: Seed of the drawn starts.
      rtol, atol: A start *reached* the best cost when ``cost ≤ best·(1 + rtol) + atol``;
        ``atol`` default ``1e-12·`` the median initial cost (noise-free data fit to ~0).
      include_nominal: Whether the first start is the nominal.
      **optimize_kwargs: Passed to every :func:`optimize` (``max_iters``, ``horizons``, ...);
        a ``checkpoint`` becomes one per start (:func:`start_checkpoint_path`), so that
        ``resume=True`` resumes each start from its own.

    Returns:
      ``(opt_params, result)`` of the best fit; ``result.extras["multistart"]`` holds the
      :meth:`MultistartSummary.summary`, ``result.nfev`` and ``wall_time`` count all starts.

    Raises:
      ValueError: Bad options, a parameter without finite bounds, or every start failed
        (the first failure's message).
    """
    t0 = time.perf_counter()
    _check_options(starts, rtol, atol)
    x_nom, box, names = check_box_params(params)
    X0 = _draw_starts(x_nom, box.lo, box.hi, int(starts), seed, include_nominal)
    c0 = batch_costs(residual_fn, params, X0)  # one batched call for all starts
    by_start: dict[int, StartRecord] = {}
    fits: dict[int, tuple[ParameterDict, OptimizeResult]] = {}
    for j in np.argsort(c0, kind="stable"):
        kw = _start_kwargs(optimize_kwargs, int(j))
        rec, fit = _fit_one(
            params, residual_fn, X0[:, j], float(c0[j]), include_nominal and j == 0, kw
        )
        by_start[int(j)] = rec
        if fit is not None:
            fits[int(j)] = fit
        logger.info(
            "multistart: start %d: cost %.6e -> %.6e (%s)",
            j,
            rec.initial_cost,
            rec.cost,
            rec.status,
        )
    records = [by_start[j] for j in range(X0.shape[1])]
    if not fits:
        raise _all_failed(records)
    return _assemble(records, fits, names, c0, X0.shape[1], rtol, atol, t0)


def _all_failed(records: list[StartRecord]) -> ValueError:
    errors = [r.error for r in records if r.error]
    why = f"the first error: {errors[0]}" if errors else "every simulation diverged at its start"
    return ValueError(f"multistart: every start diverged or failed; {why} (narrow the bounds?)")


def _assemble(
    records: list[StartRecord],
    fits: dict[int, tuple[ParameterDict, OptimizeResult]],
    names: list[str],
    c0: np.ndarray,
    n_starts: int,
    rtol: float,
    atol: float | None,
    t0: float,
) -> tuple[ParameterDict, OptimizeResult]:
    """The best fit, with the statistics over all starts in its extras."""
    best = min(fits, key=lambda j: records[j].cost)
    best_cost = records[best].cost
    finite0 = c0[np.isfinite(c0)]
    a = float(atol) if atol is not None else 1e-12 * float(np.median(finite0))
    limit = best_cost * (1 + float(rtol)) + a
    reached = [j for j in sorted(fits) if records[j].cost <= limit]
    evaluations = n_starts + sum(r.nfev for r in records)
    summary = MultistartSummary(
        starts=records,
        best=best,
        best_cost=best_cost,
        reached=reached,
        rtol=float(rtol),
        atol=a,
        spread=_spread(records, reached, names),
        evaluations=evaluations,
        wall_time=time.perf_counter() - t0,
    )
    opt_params, res = fits[best]
    message = (
        f"Multi-start: {summary.n_reached} of {n_starts} starts reached the best cost "
        f"{best_cost:.6e} (within rtol={rtol:g}); best from start {best}. {res.message}"
    )
    result = dataclasses.replace(
        res,
        nfev=evaluations,
        wall_time=summary.wall_time,
        message=message,
        extras={**res.extras, "multistart": summary.summary()},
    )
    return opt_params, result
