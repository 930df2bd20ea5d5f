"""Search before the local fit: a global stage (CMA-ES), or several starts.

:func:`fit_with_search` is what :func:`mjsysid.fit.optimize.optimize` runs: with neither
``FitOptions.global_search`` nor ``FitOptions.starts``, the local fit
(:func:`mjsysid.fit.local.run_fit`); with ``global_search``, :func:`fit_global`; with
``starts``, :func:`multistart`.

Multi-start local fits: how many starts in the box reach the best cost, and where.

:func:`multistart` draws starting points in the parameter box (a Latin hypercube: every
parameter's range is cut into ``N`` equal strata and each stratum holds one start; McKay,
Beckman & Conover 1979; initial states stay at their nominal, the recorded states, as in the
global stage), adds the nominal, evaluates all of them in **one** batched residual
call (a start whose simulation diverges is reported and not fitted), and runs the local fit
(:func:`mjsysid.fit.optimize.optimize`) from each, best initial cost first.

The summary says how many starts *reached* the best cost, ``cost_i ≤ best·(1 + rtol) +
atol``, and the spread (min, max, standard deviation) of every parameter over those: a
narrow spread says the best basin is found reliably and the parameters are identified; a
wide one at equal cost says the data do not tell them apart.

A global search (CMA-ES) before the local fit, for starts far from the truth.

A local fit (:func:`mjsysid.fit.optimize.optimize`) follows the cost downhill from the start;
from a datasheet value 3x off, or a deadband started at 0, it can end in a wrong basin.
:func:`global_search` first runs the covariance-matrix-adaptation evolution strategy
(CMA-ES, Hansen 2016, "The CMA Evolution Strategy: A Tutorial", arXiv:1604.00772; the
``cmaes`` package) on the cost ``f(θ) = ½‖r(θ)‖²``, and :func:`fit_global` runs the local
fit from the best candidate.

The search runs over the **physics only**: the initial states of recorded sequences and of
shooting windows (kinds :data:`~mjsysid.objective.initial_state.INITIAL_KINDS`, one per
window, joint and part: 200 of 214 values on 20 s in 0.5 s windows) are nuisance values,
held at their start values, the states recorded at each window's start, as the local fit
starts from them; the local fit then estimates them. The defaults (population, budget) scale
with the ``s`` searched values, never with the number of windows.

The search space is the unit box ``u ∈ [0, 1]ˢ`` between the bounds (every searched
parameter finitely bounded), linear ``u = (θ − θ_min) / (θ_max − θ_min)``, or ``u =
log(θ/θ_min) / log(θ_max/θ_min)`` for positive bounds spanning two decades or more
(``GlobalSearchOptions.scale``), so one step size ``σ`` fits all parameters. CMA-ES samples
without bounds; every sample is mirrored into the box (:func:`reflect`, one draw per
candidate, never a redraw) and the mirrored point is what is evaluated and told. Each
generation's ``λ`` candidates are evaluated as **one** batched residual call, the population
as the ``(p, λ)`` columns (like a Jacobian), in one multithreaded rollout; the candidates in
parameter units are clipped to ``[θ_min, θ_max]`` (``θ_min + 1·(θ_max − θ_min)`` can round
one ulp above ``θ_max``), so every value evaluated or handed on is within its bounds. A
diverged candidate (a NaN column) costs ``+inf``. The first generation also evaluates the
nominal, so the best candidate is never worse than the start.

Stops: the evaluation budget is spent (no generation goes over it), the population's spread
``σ·√max(diag C)`` (a fraction of the box) falls below ``tol_spread`` (the search has
settled in one basin; the local fit does the fine work), or ``cmaes``'s own termination
tests (flat cost history, a degenerate covariance).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, cast

import numpy as np
from scipy.stats import qmc

from mjsysid.fit.jacobian import column_costs
from mjsysid.fit.local import run_fit
from mjsysid.fit.options import FitOptions, GlobalSearchOptions
from mjsysid.fit.result import GlobalResult, MultistartSummary, OptimizeResult, StartRecord
from mjsysid.fit.status import Status
from mjsysid.fit.thresholds import refine_thresholds
from mjsysid.objective.initial_state import nuisance_mask
from mjsysid.objective.protocols import DescribedResidualFn, DeviceResidualFn, ResidualFn
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import finite_real, must_be
from mjsysid.util.files import atomic_savez, load_npz

if TYPE_CHECKING:
    from cmaes import CMA

logger = logging.getLogger(__name__)

STOP_REASONS = ("budget", "spread", "cmaes", "interrupted")
_SCHEMA = 1

_MESSAGES = {
    "budget": "the evaluation budget ({budget}) was spent",
    "spread": "the population's spread fell below tol_spread={tol:g} of the box",
    "cmaes": "CMA-ES's own termination tests stopped it (a flat cost history or a "
    "degenerate covariance)",
    "interrupted": "interrupted by the user; the best candidate so far is kept",
}


def _import_cma() -> type[CMA]:
    """``cmaes.CMA``, or an ``ImportError`` that says how to install it."""
    try:
        from cmaes import CMA
    except ImportError as e:
        raise ImportError(
            "global search with method 'cmaes' needs the 'cmaes' package: "
            "pip install -e '.[global]' in the mjsysid checkout (or pip install cmaes)"
        ) from e
    return cast(type[CMA], CMA)


@dataclass(frozen=True)
class GenerationInfo:
    """What a generation found, for progress output and callbacks.

    Attributes:
      generation: 1-based generation count. evaluations: Residual columns so far.
      best_cost: Best cost seen so far. median_cost: Median cost of this generation.
      spread: The population's spread, a fraction of the box.
      best_x: ``(p,)`` the best candidate so far (parameter units).
    """

    generation: int
    evaluations: int
    best_cost: float
    median_cost: float
    spread: float
    best_x: np.ndarray


class GenerationCallback(Protocol):
    """Called after every generation with its :class:`GenerationInfo`."""

    def __call__(self, info: GenerationInfo, /) -> None: ...


@dataclass
class _Progress:
    """The search's running state (besides CMA-ES's own), as checkpointed."""

    x_best: np.ndarray
    cost_best: float = math.inf
    start_cost: float = math.nan
    generation: int = 0
    evaluations: int = 0
    best: list[float] = field(default_factory=list)
    median: list[float] = field(default_factory=list)
    spread: list[float] = field(default_factory=list)
    stop_reason: str = ""


#: A searched entry with bounds ``0 < lo`` and ``hi ≥ LOG_RATIO·lo`` is searched in ``log θ``.
LOG_RATIO = 100.0


@dataclass(frozen=True)
class _Box:
    """The map between parameter units and the unit box: ``u = (θ − lo) / (hi − lo)``, or
    ``u = log(θ/lo) / log(hi/lo)`` for the ``log`` entries (positive bounds spanning
    decades: a damping in ``[1e-5, 0.1]`` whose truth is 0.002 sits at ``u = 0.02`` on the
    linear scale, at ``u = 0.58`` on the log scale)."""

    lo: np.ndarray
    hi: np.ndarray
    log: np.ndarray | None = None

    def _col(self, a: np.ndarray, u: np.ndarray) -> np.ndarray:
        return a if u.ndim == 1 else a[:, None]

    def _logs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The mask and the linear coordinates' bounds (``log lo``, ``log hi`` where log)."""
        log = np.zeros(self.lo.shape, bool) if self.log is None else self.log
        lo = np.where(log, np.log(np.where(log, self.lo, 1.0)), self.lo)
        hi = np.where(log, np.log(np.where(log, self.hi, 1.0)), self.hi)
        return log, lo, hi

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        log, lo, hi = self._logs()
        c = self._col
        L = c(log, x)
        y = np.where(L, np.log(np.where(L, np.maximum(x, c(self.lo, x)), 1.0)), x)
        return cast(np.ndarray, (y - c(lo, x)) / (c(hi, x) - c(lo, x)))

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        """``(p,)`` or ``(p, k)`` unit coordinates (clipped to the box) to parameter units,
        clipped to ``[lo, hi]`` again: ``lo + 1·(hi − lo)`` can round one ulp above ``hi``."""
        log, ylo, yhi = self._logs()
        c = self._col
        y = c(ylo, u) + np.clip(u, 0.0, 1.0) * (c(yhi, u) - c(ylo, u))
        L = c(log, u)
        x = np.where(L, np.exp(np.where(L, y, 0.0)), y)
        return np.asarray(np.clip(x, c(self.lo, u), c(self.hi, u)))


def log_scaled(lo: np.ndarray, hi: np.ndarray, scale: str) -> np.ndarray:
    """``(s,)`` the entries searched in ``log θ``: with ``scale="auto"``, those with
    ``0 < lo`` and ``hi ≥`` :data:`LOG_RATIO` ``· lo``; none with ``"linear"``."""
    if scale == "linear":
        return np.zeros(lo.shape, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        return cast(np.ndarray, (lo > 0) & (hi >= LOG_RATIO * lo))


def reflect(u: np.ndarray) -> np.ndarray:
    """Unbounded coordinates folded into the unit box by mirroring at its faces.

    ``reflect(u) = 1 − |(u mod 2) − 1|``: the identity on ``[0, 1]``, mirrored at 0 and 1
    and periodic with period 2, so continuous everywhere; a sample just outside a face lands
    just inside it (the "mirror" boundary handling of evolution strategies, e.g. Hansen,
    "The CMA Evolution Strategy: A Tutorial", arXiv:1604.00772, appendix on boundaries).
    Every sample costs one draw, however many coordinates sit on a face; rejection
    sampling (redraw until all coordinates are inside) needs ~2ᵖ draws for a mean on a
    corner of the box.

    Args:
      u: ``(p,)`` or ``(p, k)`` unit coordinates, any real values.

    Returns:
      The same shape, every entry in ``[0, 1]``.
    """
    u = np.asarray(u, dtype=np.float64)
    folded = np.clip(1.0 - np.abs(np.mod(u, 2.0) - 1.0), 0.0, 1.0)
    return np.asarray(np.where((u >= 0.0) & (u <= 1.0), u, folded))  # (inside: exact)


def check_box_params(
    params: ParameterDict, searched: np.ndarray | None = None
) -> tuple[np.ndarray, _Box, list[str]]:
    """The nominal ``(p,)``, the box of the searched entries and the names of all ``p``.

    Every free entry must start within its bounds; the ``searched`` entries (``(p,)`` bool,
    default all) must have finite bounds (the search samples their box).
    """
    if not isinstance(params, ParameterDict):
        raise TypeError(must_be("params", "a ParameterDict", type(params).__name__))
    if params.size == 0:
        raise ValueError(must_be("params", "a ParameterDict with a non-frozen parameter", params))
    x0 = np.asarray(params.as_vector(), dtype=np.float64)
    lo, hi = (np.asarray(b, dtype=np.float64) for b in params.get_bounds())
    names = params.get_non_frozen_parameter_names()
    sel = np.ones(x0.size, dtype=bool) if searched is None else np.asarray(searched, bool)
    for i, name in enumerate(names):
        if sel[i] and not (np.isfinite(lo[i]) and np.isfinite(hi[i]) and lo[i] < hi[i]):
            raise ValueError(
                f"global search: {name} must have finite bounds min_value < max_value (the "
                f"search samples the box), got [{float(lo[i])!r}, {float(hi[i])!r}]; give "
                "it finite bounds"
            )
        if not lo[i] <= x0[i] <= hi[i]:
            raise ValueError(
                f"global search: {name} must start within its bounds [{float(lo[i])!r}, "
                f"{float(hi[i])!r}], got {float(x0[i])!r}; fix the value or the bounds"
            )
    return x0, _Box(lo[sel], hi[sel]), names


def population_fn(residual_fn: ResidualFn, rollout: str) -> ResidualFn:
    """The residual that evaluates populations (a generation, the starts): ``residual_fn``
    with its rollouts on ``rollout`` (``FitOptions.rollout``; ``"cpu"``: itself).

    Raises:
      ValueError: Another backend for a residual function that cannot change its rollouts.
    """
    if rollout == "cpu":
        return residual_fn
    if not isinstance(residual_fn, DeviceResidualFn):
        raise ValueError(
            must_be(
                f"residual_fn with rollout={rollout!r}",
                "the built-in residual function (build_residual_fn)",
                type(residual_fn).__name__,
            )
        )
    return residual_fn.on_backend(rollout)


def batch_costs(residual_fn: ResidualFn, params: ParameterDict, X: np.ndarray) -> np.ndarray:
    """One batched call for the ``(p, k)`` candidates; their ``(k,)`` costs."""
    R = np.asarray(residual_fn(X, params), dtype=np.float64)
    if R.ndim != 2 or R.shape[1] != X.shape[1]:
        raise ValueError(
            must_be(
                "residual_fn output",
                f"shape (n, {X.shape[1]}) for {X.shape[1]} candidates as columns",
                f"shape {R.shape}",
            )
        )
    return column_costs(R)


def _cma_spread(cma: CMA) -> float:
    """``σ·√max(diag C)``: the widest standard deviation of the sampling, a fraction of the
    box. (``C`` is rebuilt from the public pickling state: ``cmaes`` keeps it private.)"""
    state = cma.__getstate__()
    n = cma.dim
    c1d = np.asarray(state["_c_1d"])
    diag = c1d[np.cumsum(np.r_[0, np.arange(n, 1, -1)])]
    return float(state["_sigma"]) * math.sqrt(float(np.max(diag)))


def _generation_seed(seed: int, generation: int) -> int:
    """The sampling seed of one generation (so a resumed search draws the same points)."""
    return int(np.random.SeedSequence([seed, generation]).generate_state(1)[0])


# --- checkpoints -------------------------------------------------------------------------


def _state_arrays(cma: CMA) -> dict[str, np.ndarray]:
    """CMA-ES's whole state (its pickling state: numbers and arrays) as npz entries."""
    out: dict[str, np.ndarray] = {}
    none = []
    for key, value in cma.__getstate__().items():
        if value is None:
            none.append(key)
        else:
            out[f"cma{key}"] = np.asarray(value)
    out["cma_none"] = np.array(none, dtype=str)
    return out


def _restore_cma(z: Mapping[str, np.ndarray], cma_class: type[CMA]) -> CMA:
    state: dict[str, Any] = {
        k[3:]: (v.item() if v.ndim == 0 else v)
        for k, v in z.items()
        if k.startswith("cma_") and k != "cma_none"
    }
    state.update({str(k): None for k in np.atleast_1d(z["cma_none"])})
    cma: CMA = object.__new__(cma_class)
    cma.__setstate__(state)
    return cma


def _write_checkpoint(
    path: Path, cma: CMA, prog: _Progress, names: list[str], settings: dict[str, float]
) -> None:
    import cmaes

    arrays = {
        "schema_version": np.array(_SCHEMA),
        "cmaes_version": np.array(cmaes.__version__),
        "parameter_names": np.array(names, dtype=str),
        "settings": np.array([settings[k] for k in sorted(settings)]),
        "settings_keys": np.array(sorted(settings), dtype=str),
        "generation": np.array(prog.generation),
        "evaluations": np.array(prog.evaluations),
        "x_best": prog.x_best,
        "cost_best": np.array(prog.cost_best),
        "start_cost": np.array(prog.start_cost),
        "history_best": np.array(prog.best, dtype=np.float64),
        "history_median": np.array(prog.median, dtype=np.float64),
        "history_spread": np.array(prog.spread, dtype=np.float64),
        "stop_reason": np.array(prog.stop_reason),
        "mean": np.asarray(cma.mean),
        **_state_arrays(cma),
    }
    atomic_savez(path, arrays)


def _read_checkpoint(
    path: Path, names: list[str], settings: dict[str, float], cma_class: type[CMA]
) -> tuple[CMA, _Progress]:
    """The search state of ``path``; it must belong to the same parameters and settings."""
    import cmaes

    z = load_npz(path, required=("schema_version", "parameter_names", "generation", "x_best"))
    where = f"global-search checkpoint {str(path)!r}"
    got = [str(n) for n in np.atleast_1d(z["parameter_names"])]
    if got != names:
        raise ValueError(must_be(f"{where}: parameters", f"those being fitted {names}", got))
    old = dict(zip((str(k) for k in z["settings_keys"]), z["settings"].tolist(), strict=True))
    if old != settings:
        raise ValueError(
            must_be(
                f"{where}: settings",
                f"the same as this run's {settings}",
                old,
                "start afresh (resume=False) or use the settings it was written with",
            )
        )
    if str(z["cmaes_version"]) != cmaes.__version__:
        raise ValueError(
            must_be(
                f"{where}: cmaes version",
                f"the installed {cmaes.__version__}",
                str(z["cmaes_version"]),
                "start afresh (resume=False)",
            )
        )
    prog = _Progress(
        x_best=np.asarray(z["x_best"], dtype=np.float64),
        cost_best=float(z["cost_best"]),
        start_cost=float(z["start_cost"]),
        generation=int(z["generation"]),
        evaluations=int(z["evaluations"]),
        best=z["history_best"].tolist(),
        median=z["history_median"].tolist(),
        spread=z["history_spread"].tolist(),
        stop_reason=str(z["stop_reason"]),
    )
    return _restore_cma(z, cma_class), prog


# --- the search --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    """The fixed inputs of one search.

    Attributes:
      x0: ``(p,)`` the start, every free entry. searched: Indices into ``x0`` of the entries
        searched (the physics; ``box`` is theirs); the others are held at ``x0``.
      names: Labels of ``x0``'s entries.
    """

    residual_fn: ResidualFn
    params: ParameterDict
    box: _Box
    x0: np.ndarray
    searched: np.ndarray
    options: GlobalSearchOptions
    population: int
    budget: int
    callback: GenerationCallback | None
    checkpoint: Path | None
    names: list[str]
    settings: dict[str, float]
    out: TextIO | None

    @property
    def searched_names(self) -> list[str]:
        return [self.names[i] for i in self.searched]

    def candidates(self, U: np.ndarray) -> np.ndarray:
        """``(p, k)`` candidates: the ``(s, k)`` unit coordinates of the searched entries in
        parameter units, the held entries at the start."""
        X = np.repeat(self.x0[:, None], U.shape[1], axis=1)
        X[self.searched] = self.box.from_unit(U)
        return X


def _ask(run: _Run, cma: CMA) -> np.ndarray:
    """``(s, λ)`` one generation's samples, mirrored into the unit box (:func:`reflect`):
    one draw per candidate (the search has no bounds of its own to reject by)."""
    return reflect(np.stack([cma.ask() for _ in range(run.population)], axis=1))


def _generation(run: _Run, cma: CMA, prog: _Progress) -> None:
    """Samples, evaluates (one batched call) and tells one generation; updates ``prog``."""
    cma.reseed_rng(_generation_seed(run.options.seed, prog.generation))
    U = _ask(run, cma)  # (s, λ)
    X = run.candidates(U)
    first = prog.generation == 0
    if first:  # the nominal rides along in the first batch
        X = np.concatenate([X, run.x0[:, None]], axis=1)
    c = batch_costs(run.residual_fn, run.params, X)
    if first:
        prog.start_cost, c, X = float(c[-1]), c[:-1], X[:, :-1]
        if prog.start_cost < prog.cost_best:
            prog.cost_best, prog.x_best = prog.start_cost, run.x0.copy()
        prog.evaluations += 1
    prog.evaluations += run.population
    # cmaes sorts by value; +inf (diverged) goes last, ties stay in sample order. It is told
    # the mirrored points it was evaluated at (so its mean stays in the box).
    cma.tell([(U[:, j].copy(), float(c[j])) for j in range(run.population)])
    # the state as a checkpoint holds it (``cmaes`` keeps one triangle of C): a resumed
    # search then goes on exactly as an uninterrupted one
    cma.__setstate__(cma.__getstate__())
    j = int(np.argmin(c))
    if c[j] < prog.cost_best:
        prog.cost_best, prog.x_best = float(c[j]), X[:, j].copy()
    prog.generation += 1
    prog.best.append(prog.cost_best)
    prog.median.append(float(np.median(c)))
    prog.spread.append(_cma_spread(cma))


def _report(run: _Run, prog: _Progress) -> None:
    info = GenerationInfo(
        generation=prog.generation,
        evaluations=prog.evaluations,
        best_cost=prog.cost_best,
        median_cost=prog.median[-1],
        spread=prog.spread[-1],
        best_x=prog.x_best.copy(),
    )
    line = (
        f"global {info.generation:4d}  evals {info.evaluations:6d}  best {info.best_cost:.6e}"
        f"  median {info.median_cost:.6e}  spread {info.spread:.3g}"
    )
    logger.info(line)
    if run.out is not None:
        print(line, file=run.out)
    if run.callback is not None:
        run.callback(info)


def _stop_reason(run: _Run, cma: CMA, prog: _Progress) -> str:
    """Why the search ends now, or ``""`` to go on."""
    if prog.evaluations + run.population > run.budget:
        return "budget"
    if prog.spread and prog.spread[-1] < run.options.tol_spread:
        return "spread"
    if cma.should_stop():
        return "cmaes"
    return ""


def _loop(run: _Run, cma: CMA, prog: _Progress) -> None:
    """Generations until a stop reason; a checkpoint after each."""
    try:
        while not prog.stop_reason:
            if (reason := _stop_reason(run, cma, prog)) and prog.generation > 0:
                prog.stop_reason = reason
                break
            _generation(run, cma, prog)
            if run.checkpoint is not None:
                _write_checkpoint(run.checkpoint, cma, prog, run.names, run.settings)
            _report(run, prog)
    except KeyboardInterrupt:
        if prog.generation == 0:
            raise
        prog.stop_reason = "interrupted"
        return
    if run.checkpoint is not None:  # the finished state: a resume returns it as it is
        _write_checkpoint(run.checkpoint, cma, prog, run.names, run.settings)


def _make_run(
    params: ParameterDict,
    residual_fn: ResidualFn,
    options: GlobalSearchOptions,
    callback: GenerationCallback | None,
    checkpoint: str | Path | None,
    out: TextIO | None,
) -> _Run:
    if not isinstance(options, GlobalSearchOptions):
        raise TypeError(must_be("options", "a GlobalSearchOptions", type(options).__name__))
    if not callable(residual_fn):
        raise TypeError(must_be("residual_fn", "callable residual_fn(X, params)", residual_fn))
    if callback is not None and not callable(callback):
        raise TypeError(must_be("callback", "callable callback(info) or None", callback))
    held = nuisance_mask(params)
    x0, box, names = check_box_params(params, ~held)
    searched = np.flatnonzero(~held)
    if searched.size == 0:
        raise ValueError(
            must_be(
                "global search: params",
                "at least one free physical parameter (initial states are not searched: the "
                "global stage holds them at their recorded values)",
                f"only initial states {names[:3]}{' ...' if len(names) > 3 else ''}",
            )
        )
    box = _Box(box.lo, box.hi, log_scaled(box.lo, box.hi, options.scale))
    p = searched.size  # the physics: the defaults scale with it, not with the windows
    population, budget = options.population_for(p), options.budget_for(p)
    if budget < population + 1:
        raise ValueError(
            must_be(
                "global_search: budget",
                f"at least one generation: population + 1 = {population + 1} evaluations",
                budget,
            )
        )
    settings = {
        "population": float(population),
        "budget": float(budget),
        "sigma": options.sigma0(),
        "seed": float(options.seed),
        "tol_spread": float(options.tol_spread),
        "searched": float(p),
        "log_scaled": float(0 if box.log is None else np.count_nonzero(box.log)),
    }
    if isinstance(residual_fn, DescribedResidualFn):
        residual_fn.check_params(params)
    ckpt = Path(checkpoint) if checkpoint is not None else None
    return _Run(
        residual_fn,
        params,
        box,
        x0,
        searched,
        options,
        population,
        budget,
        callback,
        ckpt,
        names,
        settings,
        out,
    )


def global_search(
    params: ParameterDict,
    residual_fn: ResidualFn,
    options: GlobalSearchOptions | None = None,
    callback: GenerationCallback | None = None,
    checkpoint: str | Path | None = None,
    *,
    resume: bool = False,
    verbose: bool = False,
    output: TextIO | None = None,
) -> GlobalResult:
    """CMA-ES on ``½‖r(θ)‖²`` in the box-normalised parameter space (see the module notes).

    Args:
      params: Nominal (the search's initial mean) and bounds (finite for every free entry);
        not modified.
      residual_fn: ``residual_fn(X, params)``: ``(p, k) -> (n, k)``, NaN columns for
        diverged candidates (:func:`mjsysid.build_residual_fn` makes one).
      options: :class:`GlobalSearchOptions` (default: all defaults).
      callback: ``callback(info)`` after every generation (a :class:`GenerationInfo`).
      checkpoint: ``.npz`` path written atomically after every generation (CMA-ES's whole
        state and the best candidate; no pickle).
      resume: Continue from ``checkpoint`` if it exists (same parameters and settings); a
        finished search is returned as it was, without evaluating anything.
      verbose: One line per generation on ``output`` (default stderr); progress is always
        logged (``logging``, level INFO).

    Returns:
      A :class:`GlobalResult`.

    Raises:
      ImportError: ``cmaes`` is not installed. TypeError, ValueError: Bad arguments, a
        parameter without finite bounds, a checkpoint of another problem.
    """
    t0 = time.perf_counter()
    cma_class = _import_cma()
    options = options if options is not None else GlobalSearchOptions()
    out = (output if output is not None else sys.stderr) if verbose else None
    run = _make_run(params, residual_fn, options, callback, checkpoint, out)
    if resume and run.checkpoint is None:
        raise ValueError(must_be("checkpoint", "a path when resume=True", None))
    if resume and run.checkpoint is not None and run.checkpoint.exists():
        cma, prog = _read_checkpoint(run.checkpoint, run.names, run.settings, cma_class)
        logger.info(
            "resuming the global search from %s at generation %d", run.checkpoint, prog.generation
        )
    else:
        cma = cma_class(  # no bounds: samples are mirrored into the box (reflect)
            mean=run.box.to_unit(run.x0[run.searched]),
            sigma=options.sigma0(),
            seed=options.seed,
            population_size=run.population,
        )
        prog = _Progress(x_best=run.x0.copy())
    if out is not None:  # the stage switch, labelled
        print(
            f"global stage: CMA-ES, population {run.population}, budget {run.budget} evaluations",
            file=out,
            flush=True,
        )
    _loop(run, cma, prog)
    return _result(run, prog, time.perf_counter() - t0)


def _result(run: _Run, prog: _Progress, wall: float) -> GlobalResult:
    reason = prog.stop_reason
    msg = _MESSAGES[reason].format(budget=run.budget, tol=run.options.tol_spread)
    return GlobalResult(
        x=prog.x_best.copy(),
        cost=prog.cost_best,
        start_cost=prog.start_cost,
        generations=prog.generation,
        evaluations=prog.evaluations,
        stop_reason=reason,
        message=(
            f"Global search (CMA-ES, {prog.generation} generations of {run.population}, "
            f"{prog.evaluations} evaluations, {run.searched.size} of {run.x0.size} values "
            f"searched{_held_note(run)}): {msg}; best cost {prog.cost_best:.6e} (nominal "
            f"{prog.start_cost:.6e})."
        ),
        population=run.population,
        budget=run.budget,
        sigma=run.options.sigma0(),
        history={
            "best_cost": np.array(prog.best),
            "median_cost": np.array(prog.median),
            "spread": np.array(prog.spread),
        },
        wall_time=wall,
        parameter_names=list(run.names),
    )


def _held_note(run: _Run) -> str:
    held = run.x0.size - run.searched.size
    return f", {held} initial states held at their recorded values" if held else ""


def _local_stage(
    params: ParameterDict, residual_fn: ResidualFn, g: GlobalResult, options: FitOptions
) -> tuple[ParameterDict, OptimizeResult]:
    """The local fit from the best candidate (none after an interrupted search: the best
    candidate, evaluated); a parameter without effect there is a warning (``allow_no_effect``)."""
    start = params.copy()
    lo, hi = params.get_bounds()  # (a checkpoint of an older version may hold hi + 1 ulp)
    start.update_from_vector(np.clip(g.x, lo, hi))
    # a parameter without effect at the best candidate (a deadzone above every command) is
    # a logged warning, not an error that throws the search's minutes away: the local fit
    # keeps it (its interval infinite)
    local = options.replace(global_search=None, check_conditioning=False, allow_no_effect=True)
    if g.stop_reason == "interrupted":
        skip = local.replace(
            max_iters=0, horizons=None, verbose=False, checkpoint=None, resume=False
        )
        opt_params, res = run_fit(start, residual_fn, skip)
        return opt_params, dataclasses.replace(
            res, status=Status.INTERRUPTED, success=False, message=_LOCAL_SKIPPED
        )
    return run_fit(start, residual_fn, local)


_LOCAL_SKIPPED = (
    "Interrupted in the global stage: no local fit; the best candidate so far is returned "
    "(resume=True continues the search from its checkpoint)."
)


def _merge(g: GlobalResult, local: OptimizeResult, wall: float) -> OptimizeResult:
    """The local result, counting both stages, with the global one in ``global_search``."""
    return dataclasses.replace(
        local,
        nfev=local.nfev + g.evaluations,
        wall_time=wall,
        initial_cost=g.start_cost if np.isfinite(g.start_cost) else local.initial_cost,
        message=f"{g.message} {local.message}",
        global_search=g,
    )


def global_checkpoint_path(checkpoint: str | Path) -> Path:
    """Where :func:`fit_global` keeps the global stage's checkpoint, beside the local one's
    (``fit.npz`` -> ``fit.global.npz``)."""
    path = Path(checkpoint)
    return path.with_name(f"{path.stem}.global.npz")


def fit_global(
    params: ParameterDict,
    residual_fn: ResidualFn,
    options: FitOptions,
    *,
    global_callback: Callable[[GenerationInfo], None] | None = None,
) -> tuple[ParameterDict, OptimizeResult]:
    """:func:`global_search` with ``options.global_search``, then the local fit from its best
    candidate with the other ``options``.

    Args:
      params, residual_fn: As for :func:`~mjsysid.fit.optimize.optimize` (every free entry
        finitely bounded).
      options: The fit's options; ``global_search`` (default: all defaults) sets the search,
        ``checkpoint`` is the local stage's checkpoint (the global stage's is written beside
        it, :func:`global_checkpoint_path`), ``resume`` resumes both stages (a finished global
        stage is not rerun; interrupted (Ctrl-C) in the global stage, no local fit runs: the
        result is the best candidate so far, status ``"interrupted"``), ``verbose`` and
        ``output`` show both stages' progress.
      global_callback: ``callback(info)`` after every generation.

    Returns:
      ``(opt_params, result)`` as :func:`optimize`'s, the global stage in
      ``result.global_search``; ``nfev`` and ``wall_time`` count both stages,
      ``initial_cost`` is the nominal's and ``message`` tells both stages' outcome.
    """
    t0 = time.perf_counter()
    ckpt = options.checkpoint
    gckpt = global_checkpoint_path(ckpt) if ckpt is not None else None
    g = global_search(
        params,
        population_fn(residual_fn, options.rollout),
        options.global_search or GlobalSearchOptions(),
        callback=global_callback,
        checkpoint=gckpt,
        resume=options.resume and gckpt is not None,
        verbose=options.verbose,
        output=options.output,
    )
    if options.verbose and g.stop_reason != "interrupted":
        print(
            f"local stage: {options.optimizer} from the global stage's best candidate "
            f"(cost {g.cost:.6e})",
            file=options.stream,
            flush=True,
        )
    opt_params, local = _local_stage(params, residual_fn, g, options)
    return opt_params, _merge(g, local, time.perf_counter() - t0)


logger = logging.getLogger(__name__)


def latin_hypercube(lo: np.ndarray, hi: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``(p, n)`` points in the box ``[lo, hi]``, one in each of the ``n`` strata of every
    parameter (stratum order shuffled independently per parameter, uniform within it).

    The points of :class:`scipy.stats.qmc.LatinHypercube` (``d = p``, drawn from ``rng``),
    scaled from the unit cube to the box.

    Args:
      lo, hi: ``(p,)`` finite bounds. n: Number of points. rng: Their random source.
    """
    u = qmc.LatinHypercube(d=lo.size, rng=rng).random(n).T  # (p, n) in [0, 1)
    return cast(np.ndarray, lo[:, None] + u * (hi - lo)[:, None])


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
    options: FitOptions,
) -> tuple[StartRecord, tuple[ParameterDict, OptimizeResult] | None]:
    """The local fit from ``x0`` (not run when it diverged there)."""
    if not np.isfinite(c0):
        return StartRecord(x0, c0, x0, c0, "diverged_at_start", 0, nominal), None
    start = params.copy()
    start.update_from_vector(x0)
    try:
        fit = run_fit(start, residual_fn, options)
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


def _start_options(options: FitOptions, j: int) -> FitOptions:
    """The local fit's options for start ``j``: no outer stage, and its own checkpoint (so
    that ``resume`` resumes every start from its own file)."""
    local = options.replace(starts=None, check_conditioning=False)
    ckpt = options.checkpoint
    return local if ckpt is None else local.replace(checkpoint=start_checkpoint_path(ckpt, j))


def _draw_starts(
    x_nom: np.ndarray, held: np.ndarray, box: _Box, starts: int, seed: int, nominal: bool
) -> np.ndarray:
    """``(p, starts)``: the nominal (when ``nominal``) then Latin-hypercube points in the box
    of the entries not ``held`` (the initial states stay at their nominal, as in the global
    stage)."""
    drawn = starts - int(nominal)
    rng = np.random.default_rng(seed)
    X0 = np.repeat(x_nom[:, None], drawn, axis=1)
    if drawn and box.lo.size:
        X0[~held] = np.clip(latin_hypercube(box.lo, box.hi, drawn, rng), box.lo[:, None],
                            box.hi[:, None])  # fmt: skip
    return np.concatenate([x_nom[:, None], X0], axis=1) if nominal else X0


def multistart(
    params: ParameterDict,
    residual_fn: ResidualFn,
    options: FitOptions,
    *,
    rtol: float = 1e-3,
    atol: float | None = None,
    include_nominal: bool = True,
) -> tuple[ParameterDict, OptimizeResult]:
    """Local fits from ``options.starts`` points in the box (default 8, seeded by
    ``options.starts_seed``); the best one and what they all found.

    Args:
      params: Nominal and bounds (finite for every free entry); not modified.
      residual_fn: ``residual_fn(X, params)``, ``(p, k) -> (n, k)``.
      options: The fit's options: ``starts`` local fits, the nominal included
        (``include_nominal``), the others Latin-hypercube points in the box; every local fit
        runs with the other options, a ``checkpoint`` becoming one per start
        (:func:`start_checkpoint_path`), so that ``resume=True`` resumes each from its own.
      rtol, atol: A start *reached* the best cost when ``cost ≤ best·(1 + rtol) + atol``;
        ``atol`` default ``1e-12·`` the median initial cost (noise-free data fit to ~0).
      include_nominal: Whether the first start is the nominal.

    Returns:
      ``(opt_params, result)`` of the best fit; ``result.multistart`` holds the
      :class:`~mjsysid.fit.result.MultistartSummary`, ``result.nfev`` and ``wall_time``
      count all starts.

    Raises:
      ValueError: Bad options, a parameter without finite bounds, or every start failed
        (the first failure's message).
    """
    t0 = time.perf_counter()
    starts = 8 if options.starts is None else int(options.starts)
    _check_options(starts, rtol, atol)
    held = nuisance_mask(params)
    x_nom, box, names = check_box_params(params, ~held)
    X0 = _draw_starts(x_nom, held, box, starts, options.starts_seed, include_nominal)
    c0 = batch_costs(population_fn(residual_fn, options.rollout), params, X0)  # one call
    by_start: dict[int, StartRecord] = {}
    fits: dict[int, tuple[ParameterDict, OptimizeResult]] = {}
    for j in np.argsort(c0, kind="stable"):
        opts = _start_options(options, int(j))
        rec, fit = _fit_one(
            params, residual_fn, X0[:, j], float(c0[j]), include_nominal and j == 0, opts
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
    """The best fit, with the statistics over all starts in ``multistart``."""
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
        multistart=summary,
    )
    return opt_params, result


def fit_with_search(
    initial_params: ParameterDict, residual_fn: ResidualFn, options: FitOptions
) -> tuple[ParameterDict, OptimizeResult]:
    """The local fit (:func:`~mjsysid.fit.local.run_fit`), after a global stage
    (``options.global_search``: :func:`fit_global`) or from several starts
    (``options.starts``: :func:`multistart`), and the profile of the force laws' command
    thresholds after it (``options.threshold_profile``:
    :func:`~mjsysid.fit.thresholds.refine_thresholds`)."""
    if options.global_search is not None:
        fitted = fit_global(initial_params, residual_fn, options)
    elif options.starts is not None:
        fitted = multistart(initial_params, residual_fn, options)
    else:
        fitted = run_fit(initial_params, residual_fn, options)
    return refine_thresholds(initial_params, residual_fn, fitted, options)
