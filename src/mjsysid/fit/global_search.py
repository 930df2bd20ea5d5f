"""A global search (CMA-ES) before the local fit, for starts far from the truth.

A local fit (:func:`mjsysid.fit.optimize.optimize`) follows the cost downhill from the start;
from a datasheet value 3x off, or a deadband started at 0, it can end in a wrong basin.
:func:`global_search` first runs the covariance-matrix-adaptation evolution strategy
(CMA-ES, Hansen 2016, "The CMA Evolution Strategy: A Tutorial", arXiv:1604.00772; the
``cmaes`` package) on the cost ``f(θ) = ½‖r(θ)‖²``, and :func:`fit_global` runs the local
fit from the best candidate.

The search runs in the box-normalised space ``u = (θ − θ_min) / (θ_max − θ_min) ∈ [0, 1]ᵖ``
(every parameter finitely bounded), so one step size ``σ`` fits all parameters. Each
generation's ``λ`` candidates are evaluated as **one** batched residual call, the population
as the ``(p, λ)`` columns (like a Jacobian), in one multithreaded rollout. Candidates are kept
in the box by ``cmaes``: a sample outside ``[0, 1]ᵖ`` is redrawn (up to 100 times) and then
clipped to the box, so every evaluated point is within the bounds. A diverged candidate (a
NaN column) costs ``+inf``. The first generation also evaluates the nominal, so the best
candidate is never worse than the start.

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
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import numpy as np

from mjsysid.fit.jacobian import ResidualFn
from mjsysid.fit.local import OptimizeResult, fit_local
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import finite_real, must_be
from mjsysid.util.files import atomic_savez, load_npz

if TYPE_CHECKING:
    from cmaes import CMA

logger = logging.getLogger(__name__)

METHODS = ("cmaes",)
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
            "pip install 'mjsysid[global]' (or pip install cmaes)"
        ) from e
    return CMA


def _positive_int(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(must_be(name, "a positive integer or None (the default)", value))
    return int(value)


@dataclass(frozen=True)
class GlobalSearchOptions:
    """Settings of :func:`global_search` (validated on creation).

    Attributes:
      method: ``"cmaes"`` (the only one so far).
      population: Candidates per generation ``λ``; default ``4 + ⌊3 ln p⌋`` (CMA-ES's), at
        least 2.
      budget: Residual evaluations (columns) of the whole search; default ``max(1000,
        200·p)``. Whole generations only: the search stops before one would exceed it.
      sigma: Initial step size as a fraction of the box (normalised coordinates); default
        0.3, at most 1.
      seed: Seed of the sampling (the same seed and options give the same search).
      tol_spread: Stop when the population's spread (``σ·√max diag C``, a fraction of the
        box) falls below this; 0 disables the test.
    """

    method: str = "cmaes"
    population: int | None = None
    budget: int | None = None
    sigma: float | None = None
    seed: int = 0
    tol_spread: float = 1e-3

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(
                must_be("global_search: method", f"one of {list(METHODS)}", self.method)
            )
        pop = _positive_int("global_search: population", self.population)
        if pop is not None and pop < 2:
            raise ValueError(must_be("global_search: population", "an integer >= 2", pop))
        _positive_int("global_search: budget", self.budget)
        if self.sigma is not None and not (finite_real(self.sigma) and 0 < self.sigma <= 1):
            raise ValueError(
                must_be(
                    "global_search: sigma",
                    "a fraction of the box in (0, 1] or None (default 0.3)",
                    self.sigma,
                )
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int | np.integer):
            raise ValueError(must_be("global_search: seed", "an integer", self.seed))
        if self.seed < 0:
            raise ValueError(must_be("global_search: seed", "an integer >= 0", self.seed))
        if not (finite_real(self.tol_spread) and 0 <= self.tol_spread < 1):
            raise ValueError(
                must_be("global_search: tol_spread", "a number in [0, 1)", self.tol_spread)
            )

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> GlobalSearchOptions:
        """From an experiment file's ``optimizer`` mapping: ``global`` (the method),
        ``population``, ``budget``, ``sigma``, ``seed``, ``tol_spread``."""
        known = {"global", "population", "budget", "sigma", "seed", "tol_spread"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(must_be("global_search options", f"keys of {sorted(known)}", unknown))
        kw = {k: v for k, v in options.items() if k != "global"}
        return cls(method=options.get("global", "cmaes"), **kw)

    def population_for(self, p: int) -> int:
        """``λ`` for ``p`` free parameters."""
        return self.population or max(2, 4 + math.floor(3 * math.log(p)))

    def budget_for(self, p: int) -> int:
        """The evaluation budget for ``p`` free parameters."""
        return self.budget or max(1000, 200 * p)

    def sigma0(self) -> float:
        """The initial step size (a fraction of the box)."""
        return 0.3 if self.sigma is None else float(self.sigma)


def as_global_options(value: object) -> GlobalSearchOptions:
    """What ``optimize(..., global_search=...)`` accepts, as :class:`GlobalSearchOptions`:
    the options themselves, a method name (``"cmaes"``), ``True`` (the defaults) or an
    experiment file's mapping (``{"global": "cmaes", "population": 12, ...}``)."""
    if isinstance(value, GlobalSearchOptions):
        return value
    if value is True:
        return GlobalSearchOptions()
    if isinstance(value, str):
        return GlobalSearchOptions(method=value)
    if isinstance(value, Mapping):
        return GlobalSearchOptions.from_mapping(value)
    raise TypeError(
        must_be(
            "global_search",
            "a GlobalSearchOptions, 'cmaes', True or a mapping such as {'global': 'cmaes', "
            "'budget': 2000}",
            value,
        )
    )


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
class GlobalResult:
    """What :func:`global_search` found.

    Attributes:
      x: ``(p,)`` best candidate (parameter units, vector order). cost: Its ``½‖r‖²``.
      start_cost: Cost at the nominal (evaluated in the first generation).
      generations: Generations run. evaluations: Residual columns evaluated.
      stop_reason: One of :data:`STOP_REASONS`. message: The same in words.
      population, budget, sigma: The settings used (``sigma`` a fraction of the box).
      history: Per generation ``(g,)`` arrays ``best_cost`` (so far), ``median_cost`` (that
        generation's) and ``spread``.
      wall_time: Seconds (of this call; a resumed search counts only its own time).
      parameter_names: Label of every entry of ``x``.
    """

    x: np.ndarray
    cost: float
    start_cost: float
    generations: int
    evaluations: int
    stop_reason: str
    message: str
    population: int
    budget: int
    sigma: float
    history: dict[str, np.ndarray]
    wall_time: float
    parameter_names: list[str]

    def summary(self) -> dict[str, Any]:
        """Plain scalars and lists (for ``result.extras["global"]`` and YAML)."""
        return {
            "method": "cmaes",
            "x": [float(v) for v in self.x],
            "cost": float(self.cost),
            "start_cost": float(self.start_cost),
            "generations": int(self.generations),
            "evaluations": int(self.evaluations),
            "stop_reason": self.stop_reason,
            "message": self.message,
            "population": int(self.population),
            "budget": int(self.budget),
            "sigma": float(self.sigma),
            "wall_time": float(self.wall_time),
            "history": {k: [float(v) for v in a] for k, a in self.history.items()},
        }


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


@dataclass(frozen=True)
class _Box:
    """The map between parameter units and the unit box ``u = (θ − lo) / (hi − lo)``."""

    lo: np.ndarray
    hi: np.ndarray

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        return (x - self.lo) / (self.hi - self.lo)

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        """``(p,)`` or ``(p, k)`` unit coordinates (clipped to the box) to parameter units."""
        span = self.hi - self.lo
        lo, span = (self.lo, span) if u.ndim == 1 else (self.lo[:, None], span[:, None])
        return lo + np.clip(u, 0.0, 1.0) * span


def check_box_params(params: ParameterDict) -> tuple[np.ndarray, _Box, list[str]]:
    """The nominal ``(p,)``, the box and the names; the box must be finite and hold x0."""
    if not isinstance(params, ParameterDict):
        raise TypeError(must_be("params", "a ParameterDict", type(params).__name__))
    if params.size == 0:
        raise ValueError(must_be("params", "a ParameterDict with a non-frozen parameter", params))
    x0 = np.asarray(params.as_vector(), dtype=np.float64)
    lo, hi = (np.asarray(b, dtype=np.float64) for b in params.get_bounds())
    names = params.get_non_frozen_parameter_names()
    for i, name in enumerate(names):
        if not (np.isfinite(lo[i]) and np.isfinite(hi[i]) and lo[i] < hi[i]):
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
    return x0, _Box(lo, hi), names


def costs(R: np.ndarray) -> np.ndarray:
    """``(k,)`` costs ``½‖r_j‖²`` of the ``(n, k)`` residual columns; ``+inf`` where a column
    is not finite (a diverged candidate)."""
    R = np.asarray(R, dtype=np.float64)
    c = 0.5 * np.sum(R * R, axis=0)
    return np.where(np.isfinite(c), c, np.inf)


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
    return costs(R)


def _spread(cma: CMA) -> float:
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
    """The fixed inputs of one search."""

    residual_fn: ResidualFn
    params: ParameterDict
    box: _Box
    x0: np.ndarray
    options: GlobalSearchOptions
    population: int
    budget: int
    callback: GenerationCallback | None
    checkpoint: Path | None
    names: list[str]
    settings: dict[str, float]
    out: TextIO | None


def _generation(run: _Run, cma: CMA, prog: _Progress) -> None:
    """Samples, evaluates (one batched call) and tells one generation; updates ``prog``."""
    cma.reseed_rng(_generation_seed(run.options.seed, prog.generation))
    U = np.stack([cma.ask() for _ in range(run.population)], axis=1)  # (p, λ)
    X = run.box.from_unit(U)
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
    # cmaes sorts by value; +inf (diverged) goes last, ties stay in sample order
    cma.tell([(U[:, j].copy(), float(c[j])) for j in range(run.population)])
    j = int(np.argmin(c))
    if c[j] < prog.cost_best:
        prog.cost_best, prog.x_best = float(c[j]), X[:, j].copy()
    prog.generation += 1
    prog.best.append(prog.cost_best)
    prog.median.append(float(np.median(c)))
    prog.spread.append(_spread(cma))


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
    x0, box, names = check_box_params(params)
    p = x0.size
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
    }
    check_params = getattr(residual_fn, "check_params", None)
    if callable(check_params):
        check_params(params)
    ckpt = Path(checkpoint) if checkpoint is not None else None
    return _Run(
        residual_fn,
        params,
        box,
        x0,
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
        cma = cma_class(
            mean=run.box.to_unit(run.x0),
            sigma=options.sigma0(),
            bounds=np.array([[0.0, 1.0]] * run.x0.size),
            seed=options.seed,
            population_size=run.population,
        )
        prog = _Progress(x_best=run.x0.copy())
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
            f"{prog.evaluations} evaluations): {msg}; best cost {prog.cost_best:.6e} "
            f"(nominal {prog.start_cost:.6e})."
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


def _local_stage(
    params: ParameterDict,
    residual_fn: ResidualFn,
    g: GlobalResult,
    checkpoint: str | Path | None,
    resume: bool,
    verbose: bool,
    output: TextIO | None,
    optimize_kwargs: dict[str, Any],
) -> tuple[ParameterDict, OptimizeResult]:
    """The local fit from the best candidate (none after an interrupted search: the best
    candidate, evaluated)."""
    start = params.copy()
    start.update_from_vector(g.x)
    if g.stop_reason == "interrupted":
        kw = {**optimize_kwargs, "max_iters": 0, "horizons": None}
        opt_params, local = fit_local(start, residual_fn, verbose=False, **kw)
        return opt_params, dataclasses.replace(
            local, status="interrupted", success=False, message=_LOCAL_SKIPPED
        )
    return fit_local(
        start,
        residual_fn,
        checkpoint=checkpoint,
        resume=resume,
        verbose=verbose,
        output=output,
        **optimize_kwargs,
    )


_LOCAL_SKIPPED = (
    "Interrupted in the global stage: no local fit; the best candidate so far is returned "
    "(resume=True continues the search from its checkpoint)."
)


def _merge(g: GlobalResult, local: OptimizeResult, wall: float) -> OptimizeResult:
    """The local result, counting both stages, with the global one in its extras."""
    return dataclasses.replace(
        local,
        nfev=local.nfev + g.evaluations,
        wall_time=wall,
        initial_cost=g.start_cost if np.isfinite(g.start_cost) else local.initial_cost,
        message=f"{g.message} {local.message}",
        extras={**local.extras, "global": g.summary()},
    )


def global_checkpoint_path(checkpoint: str | Path) -> Path:
    """Where :func:`fit_global` keeps the global stage's checkpoint, beside the local one's
    (``fit.npz`` -> ``fit.global.npz``)."""
    path = Path(checkpoint)
    return path.with_name(f"{path.stem}.global.npz")


def fit_global(
    params: ParameterDict,
    residual_fn: ResidualFn,
    global_options: GlobalSearchOptions | None = None,
    *,
    global_callback: Callable[[GenerationInfo], None] | None = None,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    verbose: bool = False,
    output: TextIO | None = None,
    **optimize_kwargs: Any,
) -> tuple[ParameterDict, OptimizeResult]:
    """:func:`global_search`, then the local :func:`~mjsysid.fit.optimize.optimize` from
    its best candidate.

    Args:
      params, residual_fn: As for :func:`optimize` (every free entry finitely bounded).
      global_options: :class:`GlobalSearchOptions` (default: all defaults).
      global_callback: ``callback(info)`` after every generation.
      checkpoint: The local stage's checkpoint (as for :func:`optimize`); the global stage's
        is written beside it (:func:`global_checkpoint_path`).
      resume: Resume both stages from their checkpoints (a finished global stage is not
        rerun). Interrupted (Ctrl-C) in the global stage, no local fit runs: the result is
        the best candidate so far, status ``"interrupted"``.
      verbose, output: Progress lines of both stages (``output`` default: the local stage's
        stdout, the global's stderr unless ``output`` is given).
      **optimize_kwargs: Passed to :func:`optimize` (``optimizer``, ``max_iters``,
        ``horizons``, ``callback``, ...).

    Returns:
      ``(opt_params, result)`` as :func:`optimize`'s, with the global stage in
      ``result.extras["global"]`` (:meth:`GlobalResult.summary`); ``nfev`` and
      ``wall_time`` count both stages, ``initial_cost`` is the nominal's and ``message``
      tells both stages' outcome.
    """
    t0 = time.perf_counter()
    gckpt = global_checkpoint_path(checkpoint) if checkpoint is not None else None
    g = global_search(
        params,
        residual_fn,
        global_options,
        callback=global_callback,
        checkpoint=gckpt,
        resume=resume and gckpt is not None,
        verbose=verbose,
        output=output,
    )
    opt_params, local = _local_stage(
        params, residual_fn, g, checkpoint, resume, verbose, output, optimize_kwargs
    )
    return opt_params, _merge(g, local, time.perf_counter() - t0)
