"""Box-constrained nonlinear least squares on the batched residual.

Minimise ``½‖r(θ)‖²`` subject to ``θ_min ≤ θ ≤ θ_max``. All backends use the Gauss-Newton
model ``H ≈ JᵀJ``, ``g = Jᵀr``; the Jacobian ``J = ∂r/∂θ`` is computed by forward finite
differences with step ``h_i = ε·max(1, |θ_i|)`` (pointing inwards at an upper bound), all
``p`` perturbed candidates in **one** batched residual call (:func:`fd_jacobian`).

Backends:

* ``"lm"`` (default): :func:`mjsysid.fit.lm.levenberg_marquardt`, the same projected
  Levenberg-Marquardt steps, but once the fit converges fast, Broyden updates replace the
  finite-difference Jacobians (each costs ``p`` evaluations) until they stop paying off; every
  convergence test uses a finite-difference Jacobian.
* ``"mujoco"``: ``mujoco.minimize.least_squares`` (Levenberg-Marquardt with projected steps
  and column scaling), one batched Jacobian per iteration.
* ``"scipy"``: ``scipy.optimize.least_squares`` (trust-region reflective) with its own
  sequential 2-point differences, one residual evaluation per column.
* ``"scipy_parallel_fd"``: the same TRF outer loop, Jacobians from :func:`fd_jacobian`; the
  residual at the current point is cached, so no evaluation is wasted.

Confidence intervals at the solution: :func:`mjsysid.fit.intervals.calculate_intervals` (also
importable from here, where the API specification places it).
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

import mujoco.minimize
import numpy as np
import numpy.typing as npt
import scipy.optimize

from mjsysid.fit.intervals import calculate_intervals as calculate_intervals  # re-export (spec)
from mjsysid.fit.lm import LMOptions, levenberg_marquardt
from mjsysid.objective.protocols import HorizonResidualFn
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import finite_real, must_be
from mjsysid.util.files import atomic_savez, load_npz

logger = logging.getLogger(__name__)

OPTIMIZERS = ("lm", "mujoco", "scipy", "scipy_parallel_fd")


class ResidualFn(Protocol):
    """``residual_fn(x, params)``: ``(p,) -> (n,)`` and ``(p, k) -> (n, k)``."""

    def __call__(self, x: np.ndarray, params: ParameterDict, /) -> np.ndarray: ...


class IterationCallback(Protocol):
    """Called after every accepted iteration with ``(iteration, x, cost)``."""

    def __call__(self, iteration: int, x: np.ndarray, cost: float, /) -> None: ...


@dataclass
class OptimizeResult:
    """What :func:`optimize` found.

    Attributes:
      x: ``(p,)`` solution vector (non-frozen parameters, vector order).
      cost: ``½‖r(x)‖²`` at the solution. initial_cost: the same at the start.
      fun: ``(n,)`` residual at the solution.
      jac: ``(n, p)`` Jacobian at the solution (used for confidence intervals).
      grad: ``(p,)`` gradient ``Jᵀr`` at the solution.
      status: ``"xtol"``, ``"gtol"``, ``"ftol"``, ``"stalled"`` (``"lm"``: a non-smooth cost
        stopped improving), ``"max_iters"``, ``"no_improvement"``, ``"factorization_failed"``
        or ``"interrupted"``.
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


class _Counted:
    """Wraps the residual: counts candidates and answers a single point from the last
    small batch (the trial steps) even after a larger call (a Jacobian) came in between."""

    _CACHED = 8  # batches up to this many candidates are remembered

    def __init__(self, residual_fn: ResidualFn, params: ParameterDict) -> None:
        self.residual_fn, self.params = residual_fn, params
        self.nfev = 0
        self.size: int | None = None  # residual length, from the first call
        # the last single evaluation (key 1) and the last batch of 2 to _CACHED (key 2)
        self._kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        flat = X.ndim == 1
        X2 = X[:, None] if flat else X
        if X2.shape[1] == 1:
            for Xk, Rk in self._kept.values():
                hit = np.flatnonzero(np.all(Xk == X2, axis=0)) if len(Xk) == len(X2) else ()
                if len(hit):
                    r = Rk[:, hit[:1]].copy()
                    return r[:, 0] if flat else r
        r = np.asarray(self.residual_fn(X2, self.params), dtype=np.float64)
        if r.ndim == 1:
            r = r[:, None]
        self._check(r, X2.shape[1])
        self.nfev += X2.shape[1]
        if X2.shape[1] <= self._CACHED:
            self._kept[min(X2.shape[1], 2)] = (X2.copy(), r.copy())
        return r[:, 0] if flat else r

    def _check(self, r: np.ndarray, k: int) -> None:
        """The residual of ``k`` candidates must be ``(n, k)``, ``n >= 1`` the same each call."""
        if r.ndim != 2 or r.shape[1] != k or r.shape[0] == 0:
            raise ValueError(
                must_be(
                    "residual_fn output",
                    f"shape (n, {k}) with n >= 1 for x of shape (p, {k})",
                    r,
                    f"got shape {r.shape}",
                )
            )
        if self.size is None:
            self.size = r.shape[0]
        elif r.shape[0] != self.size:
            raise ValueError(
                must_be(
                    "residual_fn output",
                    f"{self.size} residuals, as at the first call (the length must not depend "
                    "on the parameter values)",
                    f"{r.shape[0]} residuals",
                )
            )


def _fd_steps(x: np.ndarray, hi: np.ndarray, eps: float) -> np.ndarray:
    """``h_i = ±ε·max(1, |x_i|)``, negative where the forward step would leave ``hi``."""
    h = eps * np.maximum(1.0, np.abs(x))
    return np.where(x + h > hi, -h, h)


def fd_jacobian(
    residual: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    r: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    eps: float = 1.5e-8,
) -> np.ndarray:
    """Forward-difference Jacobian, all columns in one batched call.

    ``J[:, i] = (r(x + h_i e_i) − r(x)) / h_i`` with ``h_i = ±ε·max(1, |x_i|)``, negative when
    the forward step would leave the upper bound. A column whose perturbed simulation is not
    finite is retried with the opposite step.

    Args:
      residual: Vectorised residual, ``(p, k) -> (n, k)``.
      x: ``(p,)`` point. r: ``(n,)`` residual at ``x``.
      bounds: ``(lower, upper)``, each ``(p,)``.
      eps: Relative step.

    Returns:
      ``(n, p)`` Jacobian (non-finite columns after the retry are set to 0 and logged).
    """
    lo, hi = bounds
    h = _fd_steps(x, hi, eps)
    X = x[:, None] + np.diag(h)
    J = np.subtract(residual(X), r[:, None], dtype=np.float64)
    J /= h[None, :]
    with np.errstate(over="ignore", invalid="ignore"):  # a column with inf or NaN sums to one
        bad = np.flatnonzero(~np.isfinite(J.sum(axis=0)))
    if bad.size:  # (or overflows: those are confirmed entry by entry)
        bad = bad[~np.all(np.isfinite(J[:, bad]), axis=0)]
    if bad.size:
        h2 = -h[bad]
        X2 = np.repeat(x[:, None], bad.size, axis=1)
        X2[bad, np.arange(bad.size)] += h2
        X2 = np.clip(X2, lo[:, None], hi[:, None])
        J[:, bad] = (residual(X2) - r[:, None]) / h2[None, :]
        still = bad[~np.all(np.isfinite(J[:, bad]), axis=0)]
        if still.size:
            logger.warning(
                "Jacobian columns %s are not finite (simulation diverged on both sides); using 0",
                still.tolist(),
            )
            J[:, still] = 0.0
    return J


def _describe_nonfinite(residual_fn: Any, r: np.ndarray) -> str:
    i = int(np.flatnonzero(~np.isfinite(r))[0])
    where = (
        residual_fn.describe_index(i) if hasattr(residual_fn, "describe_index") else f"entry {i}"
    )
    extra = getattr(residual_fn, "last_divergence", [])
    return f"{where}" + (f" ({'; '.join(extra[:3])})" if extra else "")


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
        arrays = {}
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
            arrays[field_name] = arr.astype(np.float64)
        x, lo, hi = arrays["value"], arrays["min_value"], arrays["max_value"]

        def label(i: int, name: str = p.name, size: int = p.size) -> str:
            return name if size == 1 else f"{name}[{i}]"

        for i in range(p.size):
            if np.isnan(lo[i]) or np.isnan(hi[i]):
                raise ValueError(
                    f"initial_params: {label(i)} must have bounds that are numbers (+-inf "
                    f"allowed), got [{float(lo[i])!r}, {float(hi[i])!r}]; fix min_value/max_value"
                )
            if not lo[i] < hi[i]:
                fix = (
                    "freeze it (frozen=True) to keep it fixed, or widen its bounds"
                    if lo[i] == hi[i]
                    else "fix the bounds"
                )
                raise ValueError(
                    f"initial_params: {label(i)} must have min_value < max_value to be "
                    f"optimized, got [{float(lo[i])!r}, {float(hi[i])!r}]; {fix}"
                )
            if not np.isfinite(x[i]):
                raise ValueError(
                    f"initial_params: {label(i)} must start at a finite value, got "
                    f"{float(x[i])!r}; set its value (or call reset())"
                )
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


def _check_start(
    params: ParameterDict, optimizer: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    out = np.flatnonzero((x0 < lo) | (x0 > hi))
    if out.size:
        i = out[0]
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


_MJ_STATUS = (
    ("factorization failed", "factorization_failed"),
    ("insufficient reduction", "no_improvement"),
    ("maximum iterations", "max_iters"),
    ("norm(dx) < tol", "xtol"),
    ("norm(gradient) < tol", "gtol"),
)

_MESSAGES = {
    "xtol": "Converged: the parameter step fell below xtol.",
    "gtol": "Converged: the projected gradient fell below gtol.",
    "ftol": "Converged: the relative cost reduction stayed below ftol.",
    "stalled": (
        "Stopped: the cost stalled (three steps in a row were accepted only at a large "
        "damping and gained under 0.1 %): no nearby point is clearly better. Typical of a "
        "non-smooth cost (contacts, dry friction) or of a long simulation that drifts from "
        "the data; if the fit is poor, try another start, shorter horizons or multiple "
        "shooting (split_windows with initial_state_params). Impacts early in a recording "
        "(a robot set down or landing) do the most harm: start the data once the contacts "
        "have settled (time_range in an experiment file)."
    ),
    "max_iters": (
        "Stopped after max_iters={n} iterations before converging; raise max_iters or "
        "restart from this result (optimize accepts the returned parameters)."
    ),
    "no_improvement": (
        "Stopped: no step reduced the cost further. This is a local minimum or a "
        "non-smooth residual (contacts, friction); check the fit, try another start "
        "or a larger finite-difference step (eps)."
    ),
    "factorization_failed": (
        "Stopped: the Gauss-Newton system could not be factorised; some "
        "parameters are probably unidentifiable (see the confidence "
        "intervals) or badly scaled."
    ),
    "interrupted": "Interrupted by the user; the best parameters found so far are returned.",
}


_FTOL_ITERS = 3


class _Converged(Exception):
    """Raised from the iteration callback to end a stage early: ``reason`` ``"ftol"`` (a cost
    plateau) or ``"slowed"`` (an early horizon stage gaining less than 10 % per iteration)."""

    def __init__(self, iteration: int, reason: str) -> None:
        super().__init__(iteration, reason)
        self.iteration, self.reason = iteration, reason


def _checkpoint_write(
    path: Path, x: np.ndarray, cost: float, it: int, names: list[str], horizon: float = 1.0
) -> None:
    atomic_savez(
        path,
        {
            "x": x,
            "cost": np.array(cost),
            "iteration": np.array(it),
            "horizon": np.array(horizon),
            "parameter_names": np.array(names),
            "schema_version": np.array(1),
        },
    )


def load_checkpoint(path: str | Path, params: ParameterDict) -> tuple[np.ndarray, int]:
    """Reads ``(x, iteration)`` from a checkpoint written by :func:`optimize`.

    Raises:
      ValueError: The checkpoint belongs to other parameters.
    """
    z = load_npz(path, required=("x", "iteration", "parameter_names"))
    names = [str(n) for n in np.atleast_1d(z["parameter_names"])]
    if names != params.get_non_frozen_parameter_names():
        raise ValueError(
            f"checkpoint {str(path)!r} must hold the same parameters as initial_params, got "
            f"{names} vs {params.get_non_frozen_parameter_names()}"
        )
    x = np.asarray(z["x"])
    where = f"checkpoint {str(path)!r}"
    if x.dtype.kind not in "iuf" or x.shape != (params.size,) or not np.all(np.isfinite(x)):
        raise ValueError(
            must_be(f"{where}: x", f"{params.size} finite numbers (one per free entry)", x)
        )
    it = np.asarray(z["iteration"])
    if it.shape != () or it.dtype.kind not in "iu" or int(it) < 0:
        raise ValueError(must_be(f"{where}: iteration", "an integer >= 0", it))
    horizon = np.asarray(z.get("horizon", 1.0))
    if horizon.shape != () or horizon.dtype.kind != "f" or not 0.0 < float(horizon) <= 1.0:
        raise ValueError(must_be(f"{where}: horizon", "a fraction in (0, 1]", horizon))
    return x.astype(np.float64), int(it)


_STAGE_SLOW = 0.9  # an early horizon stage ends after a step that cut its cost by < 10 %
# An early stage whose data holds less than this share of the whole data's cost at its start
# is skipped: it barely sees the misfit (a push whose first part is the box at rest), so
# fitting it can only lead the fit astray. (Benchmark and example stages hold 0.5-60 %.)
_UNINFORMATIVE = 1e-3


def _checkpoint_horizon(path: Path) -> float:
    """The horizon stage a checkpoint was written in (1.0: the whole data, or older files)."""
    z = load_npz(path)
    return float(z["horizon"]) if "horizon" in z else 1.0


# horizons="auto": the early stages, each used only if every sequence keeps this many samples
AUTO_HORIZONS = (0.1, 0.3)
_AUTO_MIN_SAMPLES = 20


def resolve_horizons(
    horizons: Sequence[float] | str | None,
    residual_fn: Any,
    optimizer: str = "lm",
    params: ParameterDict | None = None,
) -> tuple[float, ...]:
    """The horizon stages :func:`optimize` runs: increasing fractions ending with 1.0.

    ``None``: one stage. A sequence: validated, 1.0 appended when missing. ``"auto"``: the
    fractions of :data:`AUTO_HORIZONS` at which every sequence keeps at least 20 measured
    samples (:meth:`~mjsysid.objective.protocols.HorizonResidualFn.horizon_samples`), then
    1.0, when the fit can use them: ``residual_fn`` is a
    :class:`~mjsysid.objective.protocols.HorizonResidualFn` whose ``supports_horizons(params)``
    says so (custom code never receives shortened series unasked), the backend is ``"lm"``
    or ``"mujoco"`` (an early stage ends on a slow iteration, which the scipy backends do
    not report); otherwise one stage.

    Raises:
      TypeError: ``horizons`` is not ``"auto"``, ``None`` or a sequence of numbers, or stages
        are asked of a residual without ``head``.
      ValueError: The fractions are not strictly increasing in ``(0, 1]``.
    """
    if horizons is None:
        return (1.0,)
    if isinstance(horizons, str):
        if horizons != "auto":
            raise TypeError(
                must_be("horizons", "'auto', None or a sequence of fractions in (0, 1]", horizons)
            )
        if (
            optimizer not in ("lm", "mujoco")
            or not isinstance(residual_fn, HorizonResidualFn)
            or not residual_fn.supports_horizons(params)
        ):
            return (1.0,)
        early = [
            h
            for h in AUTO_HORIZONS
            if min(residual_fn.horizon_samples(h, params)) >= _AUTO_MIN_SAMPLES
        ]
        return (*early, 1.0)
    if not isinstance(horizons, Sequence | np.ndarray):
        raise TypeError(
            must_be("horizons", "'auto', None or a sequence of fractions in (0, 1]", horizons)
        )
    hs = []
    for h in horizons:
        if isinstance(h, bool) or not isinstance(h, int | float | np.floating):
            raise TypeError(must_be("horizons", "a sequence of numbers in (0, 1]", horizons))
        hs.append(float(h))
    if (
        not hs
        or not all(0.0 < h <= 1.0 for h in hs)
        or any(b <= a for a, b in itertools.pairwise(hs))
    ):
        raise ValueError(
            must_be(
                "horizons", "strictly increasing fractions in (0, 1], e.g. (0.3, 1.0)", horizons
            )
        )
    if hs[-1] < 1.0:
        hs.append(1.0)
    if len(hs) > 1 and not isinstance(residual_fn, HorizonResidualFn):
        raise TypeError(
            must_be(
                "residual_fn",
                "a residual with a head(fraction) method (build_residual_fn makes one) when "
                "horizons are given",
                type(residual_fn).__name__,
            )
        )
    return tuple(hs)


@dataclass(frozen=True)
class _Settings:
    """The validated options of one :func:`optimize` call, shared by its horizon stages."""

    optimizer: str
    max_iters: int
    xtol: float
    gtol: float
    ftol: float
    eps: float
    mu_factor: float
    x_scale: Any
    lm_options: LMOptions
    verbose: bool
    out: TextIO
    callback: IterationCallback | None
    names: list[str]
    bounds: tuple[np.ndarray, np.ndarray]


@dataclass
class _Stage:
    """What one horizon stage ended with (``r`` and ``J`` only for the last stage)."""

    horizon: float
    x: np.ndarray
    cost0: float
    cost: float
    status: str
    nit: int
    nfev: int
    njev: int
    nsecant: int
    history_obj: list[float]
    history_x: list[np.ndarray]
    r: np.ndarray | None = None
    J: np.ndarray | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "horizon": self.horizon,
            "status": self.status,
            "nit": self.nit,
            "nfev": self.nfev,
            "initial_cost": self.cost0,
            "cost": self.cost,
            "objective": [float(c) for c in self.history_obj],  # on this stage's data
        }


def _fit_stage(
    residual_fn: ResidualFn,
    params: ParameterDict,
    x0: np.ndarray,
    s: _Settings,
    *,
    horizon: float,
    last: bool,
    start_iter: int,
    ckpt: Path | None,
    check_effect: str | None,
    skip_below: float | None = None,
) -> _Stage:
    """Runs the backend on ``residual_fn`` from ``x0``.

    An early stage (``last=False``) also ends after an iteration that cut its cost by less
    than ``1 − _STAGE_SLOW``, and is skipped (status ``"skipped"``, nothing but its residual
    at ``x0`` evaluated) when its cost there is below ``skip_below``; only the last stage
    computes the residual and Jacobian at its solution. ``check_effect``: ``"error"``,
    ``"warn"`` or ``None`` (no check) for parameters without effect at ``x0``.
    """
    lo, hi = s.bounds
    names, optimizer, eps = s.names, s.optimizer, s.eps
    fn = _Counted(residual_fn, params)
    r0 = fn(x0)
    if not np.all(np.isfinite(r0)):
        raise ValueError(
            f"the residual must be finite at the start point, got a non-finite value at "
            f"{_describe_nonfinite(residual_fn, r0)}; check the data and the initial parameters"
        )
    cost0 = 0.5 * float(r0 @ r0)
    if skip_below is not None and cost0 < skip_below:
        return _Stage(horizon, x0, cost0, cost0, "skipped", 0, fn.nfev, 0, 0, [cost0], [x0])
    J0 = fd_jacobian(fn, x0, r0, (lo, hi), eps)
    njev = 1
    if check_effect is not None:
        dead = np.flatnonzero(~np.any(J0 != 0.0, axis=0))
        if dead.size:
            msg = (
                f"parameters {[names[i] for i in dead.tolist()]} have no effect on the "
                "residual at the start point (zero Jacobian column): check their modifiers and "
                "that the data excite them, or freeze them"
            )
            if check_effect == "error":
                raise ValueError(msg)
            logger.warning(msg)

    history_obj: list[float] = [cost0]
    history_x: list[np.ndarray] = [x0.copy()]
    best = {"x": x0.copy(), "cost": cost0}
    small = {"n": 0}  # consecutive iterations with a relative reduction below ftol
    done = {"it": 0}  # iterations completed (for an interrupted fit)
    ftol = s.ftol
    label = "" if horizon == 1.0 else f"first {100.0 * horizon:g} %  "

    steps = optimizer in ("lm", "mujoco")  # on_iter follows accepted steps (not scipy's calls)

    def on_iter(it: int, x: np.ndarray, cost: float) -> None:
        done["it"] = it
        previous = history_obj[-1]
        if steps and ftol > 0 and np.isfinite(previous) and previous > 0:
            small["n"] = small["n"] + 1 if (previous - cost) <= ftol * previous else 0
        history_obj.append(cost)
        history_x.append(x.copy())
        if cost <= best["cost"]:
            best["x"], best["cost"] = x.copy(), cost
        if ckpt is not None:
            _checkpoint_write(ckpt, best["x"], best["cost"], start_iter + it, names, horizon)
        if s.verbose:
            print(f"{label}iter {start_iter + it:4d}  cost {cost:.6e}", file=s.out)
        if s.callback is not None:
            s.callback(start_iter + it, x, cost)
        if small["n"] >= _FTOL_ITERS:
            raise _Converged(it, "ftol")
        if steps and not last and cost > _STAGE_SLOW * previous:
            raise _Converged(it, "slowed")

    jac_cache: dict[bytes, np.ndarray] = {x0.tobytes(): J0}

    def jacobian(x: np.ndarray, r: np.ndarray) -> np.ndarray:
        nonlocal njev
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        key = x.tobytes()
        if key not in jac_cache:
            jac_cache.clear()
            jac_cache[key] = fd_jacobian(fn, x, np.asarray(r).reshape(-1), (lo, hi), eps)
            njev += 1
        return jac_cache[key]

    status, nit, nsecant = "max_iters", 0, 0
    remaining = max(s.max_iters - start_iter, 0)
    x_hat = x0
    try:
        if remaining == 0:
            status = "max_iters"
        elif optimizer == "mujoco":
            capture = io.StringIO()

            def mj_callback(trace: list[Any]) -> None:
                if len(trace) > 1:  # trace[0] is the start point, already recorded
                    log = trace[-1]
                    on_iter(
                        len(trace) - 1, np.asarray(log.candidate).reshape(-1), float(log.objective)
                    )

            x_hat, trace = mujoco.minimize.least_squares(
                x0,
                fn,
                bounds=(lo, hi),
                jacobian=jacobian,
                xtol=s.xtol,
                gtol=s.gtol,
                max_iter=remaining,
                verbose=mujoco.minimize.Verbosity.FINAL,
                output=capture,
                iter_callback=mj_callback,
                x_scale=s.x_scale,
                mu_factor=s.mu_factor,
            )
            x_hat = np.asarray(x_hat, dtype=np.float64).reshape(-1)
            text = capture.getvalue()
            status = next(
                (st for frag, st in _MJ_STATUS if frag in text),
                "gtol" if "Zero gradient" in text else "max_iters",
            )
            nit = max(len(trace) - 1, 0)
        elif optimizer == "lm":
            lm_result = levenberg_marquardt(
                fn,
                jacobian,
                x0,
                r0,
                J0,
                (lo, hi),
                dataclasses.replace(s.lm_options, max_iters=remaining),
                on_iter,
            )
            x_hat, status, nit = lm_result.x, lm_result.status, lm_result.nit
            nsecant = lm_result.nsecant
        else:
            it_counter = {"n": 0}

            def fun(x: np.ndarray) -> np.ndarray:
                r = fn(x)
                cost = 0.5 * float(r @ r)
                if optimizer == "scipy" and np.isfinite(cost) and cost < best["cost"]:
                    it_counter["n"] += 1
                    on_iter(it_counter["n"], x, cost)
                return r

            def jac_scipy(x: np.ndarray) -> np.ndarray:
                r = fn(x)
                J = jacobian(x, r)
                it_counter["n"] += 1
                on_iter(it_counter["n"], x, 0.5 * float(r @ r))
                return J

            scale: Any = "jac" if isinstance(s.x_scale, str) else s.x_scale
            res = scipy.optimize.least_squares(
                fun,
                x0,
                jac="2-point" if optimizer == "scipy" else jac_scipy,
                bounds=(lo, hi),
                method="trf",
                xtol=s.xtol,
                gtol=s.gtol,
                ftol=max(ftol, np.finfo(float).eps),
                x_scale=scale,
                max_nfev=max(remaining, 1),
                verbose=0,
            )
            x_hat = np.asarray(res.x, dtype=np.float64)
            status = {0: "max_iters", 1: "gtol", 2: "ftol", 3: "xtol", 4: "xtol"}.get(
                res.status, "max_iters"
            )
            nit = int(res.nfev) if optimizer == "scipy" else it_counter["n"]
            if optimizer == "scipy":
                njev += int(res.njev or 0)
    except _Converged as stop:
        status, nit, x_hat = stop.reason, stop.iteration, best["x"]
    except KeyboardInterrupt:
        status, nit = "interrupted", done["it"]
        x_hat = best["x"]
        logger.warning("optimisation interrupted; returning the best parameters found so far")
    stage = _Stage(
        horizon, x_hat, cost0, best["cost"], status, nit, 0, njev, nsecant, history_obj, history_x
    )
    if last:
        r_hat = fn(x_hat)
        if not np.all(np.isfinite(r_hat)):  # cannot happen for accepted steps; be explicit
            x_hat, r_hat = best["x"], fn(best["x"])
        stage.x, stage.r = x_hat, r_hat
        stage.cost = 0.5 * float(r_hat @ r_hat)
        stage.J = jacobian(x_hat, r_hat)
    stage.nfev, stage.njev = fn.nfev, njev
    return stage


def optimize(
    initial_params: ParameterDict,
    residual_fn: ResidualFn,
    optimizer: str = "lm",
    max_iters: int = 200,
    verbose: bool = False,
    *,
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
) -> tuple[ParameterDict, OptimizeResult]:
    """Fits the non-frozen parameters to the data.

    Args:
      initial_params: Start point and bounds; never modified.
      residual_fn: From :func:`build_residual_fn` (or any ``(x, params)`` residual).
      optimizer: ``"lm"`` (default: :func:`mjsysid.fit.lm.levenberg_marquardt`, finite-difference
        Jacobians far from the solution and free secant updates while it converges),
        ``"mujoco"`` (``mujoco.minimize.least_squares``), ``"scipy"`` or
        ``"scipy_parallel_fd"``.
      max_iters: Iteration limit, of all horizon stages together (for the scipy backends:
        residual evaluations).
      verbose: Print one line per iteration to ``output`` (default stdout); silent otherwise.
      xtol, gtol: Termination tolerances on the relative step and the gradient.
      ftol: Termination tolerance on the relative cost reduction: the fit stops when the cost
        fell by less than ``ftol·cost`` in each of 3 consecutive iterations (a plateau, e.g.
        with contacts; raise it, say to 1e-4, to stop stalled contact-rich fits early: on the
        frictional-contact benchmark problem 4 that saves a third of the rollouts at the same
        final cost).
      eps: Relative finite-difference step.
      mu_factor: ``"lm"`` and ``"mujoco"`` backends: factor by which the Levenberg-Marquardt
        damping grows after a rejected step (default 4 for ``"lm"``, 2 for ``"mujoco"``;
        MuJoCo's own ``10**0.1`` spends many single-candidate trial evaluations per
        iteration: 2 needed 25-45 % fewer residual evaluations on the benchmark problems).
      secant: ``"lm"`` backend: Broyden Jacobian updates instead of finite differences while
        the fit converges fast (convergence is still always confirmed with a
        finite-difference Jacobian); ``False`` computes one every iteration.
      trial_steps: ``"lm"`` backend: damping values tried per batched call (see
        :mod:`mjsysid.fit.lm`); more than 1 can pay off when threads outnumber the rollouts of
        one candidate (its sequences), but it changes the path of the fit (on the benchmark
        quadruped it led to another local minimum), so the default stays 1.
      x_scale: ``"jac"`` (scale by Jacobian column norms, default), a scalar or ``(p,)`` array.
      horizons: Fit in stages on growing parts of the data, e.g. ``(0.3, 1.0)``: first on the
        first 30 % of every sequence (:meth:`ResidualFunction.head`), then, from there, on all
        of it (``1.0`` is appended when missing). A short horizon costs less per evaluation
        and its cost landscape has fewer local minima (a trajectory drifts less), so the
        stage brings the fit near the solution cheaply; an early stage ends when it converges
        or (``"lm"``, ``"mujoco"``) when an iteration cuts its cost by less than 10 % (status
        ``"slowed"``), and is skipped when its data hold less than 0.1 % of the whole data's
        cost at its start (status ``"skipped"``: it would barely see the misfit).
        ``result`` describes the last stage (``extras["stages"]`` lists them all; ``nfev``
        and ``nit`` count every stage).
        ``"auto"`` (default): ``(0.1, 0.3, 1.0)`` with the built-in residual and the
        ``"lm"``/``"mujoco"`` backends, leaving out a fraction at which a sequence would
        keep fewer than 20 samples (see :func:`resolve_horizons`). It changes the path of a
        fit: on smooth problems it reaches the same solution for fewer full-length rollouts
        (the benchmark's fits ran 1.2-3x faster); where the landscape is rugged (stick-slip
        contacts) or flat along unidentifiable directions, where a fit ends depends on its
        path either way.
        ``None``: one stage on the whole data (``mjsysid fit --horizons none``).
      allow_no_effect: Continue (with a logged warning) when a parameter has no effect on the
        residual at the start of the fit on the whole data (after the early horizon stages,
        where a parameter the first part of the data does not excite is fitted later); by
        default that is an error naming the parameter.
      checkpoint: ``.npz`` path written atomically after every iteration (best ``x`` so far,
        and the horizon stage it belongs to).
      resume: Start from ``checkpoint`` if it exists (in the stage it was written in).
      callback: ``callback(iteration, x, cost)`` after each iteration (``cost`` on the
        current stage's horizon; iterations are counted across stages).
      output: Stream for ``verbose``.

    Returns:
      ``(opt_params, result)``: a copy of ``initial_params`` holding the solution, and an
      :class:`OptimizeResult`.

    Raises:
      ValueError: Bad options, a start outside the bounds, a non-finite residual at the start
        (naming the sequence and signal), or a parameter without effect.
    """
    t_start = time.perf_counter()
    if optimizer not in OPTIMIZERS:
        raise ValueError(must_be("optimizer", f"one of {list(OPTIMIZERS)}", optimizer))
    if not isinstance(max_iters, int | np.integer) or isinstance(max_iters, bool) or max_iters < 0:
        raise ValueError(must_be("max_iters", "a non-negative integer", max_iters))
    if not callable(residual_fn):
        raise TypeError(must_be("residual_fn", "callable residual_fn(x, params)", residual_fn))
    if callback is not None and not callable(callback):
        raise TypeError(
            must_be("callback", "callable callback(iteration, x, cost) or None", callback)
        )
    if not (finite_real(eps) and eps > 0):
        raise ValueError(must_be("eps", "a finite number > 0", eps))
    if mu_factor is None:
        mu_factor = 4.0 if optimizer == "lm" else 2.0
    if not (finite_real(mu_factor) and mu_factor > 1):
        raise ValueError(must_be("mu_factor", "a finite number > 1", mu_factor))
    for tol_name, tol in (("xtol", xtol), ("gtol", gtol), ("ftol", ftol)):
        if not (finite_real(tol) and tol >= 0):
            raise ValueError(must_be(tol_name, "a finite number >= 0", tol))
    for flag_name, flag in (
        ("verbose", verbose),
        ("secant", secant),
        ("allow_no_effect", allow_no_effect),
        ("resume", resume),
    ):
        if not isinstance(flag, bool | np.bool_):
            raise TypeError(must_be(flag_name, "True or False", flag))
    if output is not None and not callable(getattr(output, "write", None)):
        raise TypeError(
            must_be("output", "a text stream with write() (e.g. sys.stdout or open(...))", output)
        )
    params = initial_params.copy() if isinstance(initial_params, ParameterDict) else initial_params
    x0, lo, hi = _check_start(params, optimizer)
    names = params.get_non_frozen_parameter_names()
    if not (isinstance(x_scale, str) and x_scale == "jac"):
        xs = None
        if not isinstance(x_scale, str | bool | np.bool_):
            try:
                xs = np.asarray(x_scale, dtype=np.float64)
            except (TypeError, ValueError):
                xs = None
        if xs is None or xs.shape not in ((), x0.shape) or not np.all(np.isfinite(xs) & (xs > 0)):
            raise ValueError(
                must_be(
                    "x_scale",
                    f"'jac', a positive number or an array of shape {x0.shape}",
                    xs if xs is not None else x_scale,
                )
            )
    settings = _Settings(
        optimizer=optimizer,
        max_iters=int(max_iters),
        xtol=float(xtol),
        gtol=float(gtol),
        ftol=float(ftol),
        eps=float(eps),
        mu_factor=float(mu_factor),
        x_scale=x_scale,
        lm_options=LMOptions(
            max_iters=int(max_iters),
            xtol=float(xtol),
            gtol=float(gtol),
            mu_factor=float(mu_factor),
            secant=secant,
            trial_steps=trial_steps,
            x_scale=None if isinstance(x_scale, str) else np.asarray(x_scale, dtype=np.float64),
        ),
        verbose=verbose,
        out=output if output is not None else sys.stdout,
        callback=callback,
        names=names,
        bounds=(lo, hi),
    )
    check_params = getattr(residual_fn, "check_params", None)
    if callable(check_params):
        check_params(params)
    stages = list(resolve_horizons(horizons, residual_fn, optimizer, params))
    ckpt = Path(checkpoint) if checkpoint is not None else None
    start_iter = 0
    if resume:
        if ckpt is None:
            raise ValueError(must_be("checkpoint", "a path when resume=True", None))
        if ckpt.exists():
            x0, start_iter = load_checkpoint(ckpt, params)
            out = np.flatnonzero((x0 < lo) | (x0 > hi))
            if out.size:
                i = int(out[0])
                raise ValueError(
                    f"checkpoint {str(ckpt)!r}: {names[i]} must lie within its bounds "
                    f"[{float(lo[i])!r}, {float(hi[i])!r}], got {float(x0[i])!r}; the bounds "
                    "changed since it was written: widen them or start afresh (resume=False)"
                )
            written_in = _checkpoint_horizon(ckpt)
            stages = [h for h in stages if h >= written_in] or [1.0]
            logger.info("resuming from %s at iteration %d", ckpt, start_iter)
    if ckpt is not None:  # fail now, not after the first iteration, if it cannot be written
        _checkpoint_write(ckpt, x0, float("nan"), start_iter, names, stages[0])

    # every head is made (and a too-short sequence reported) before anything is simulated
    heads = (
        [residual_fn.head(h) for h in stages[:-1]]
        if isinstance(residual_fn, HorizonResidualFn)
        else []
    )
    fns: list[ResidualFn] = [*heads, residual_fn]
    full = _Counted(residual_fn, params) if len(stages) > 1 else None
    # the whole data at the start: the result's initial cost, the first stage's yardstick
    r_start = full(x0) if full is not None else None
    initial_cost = float("nan") if r_start is None else 0.5 * float(r_start @ r_start)
    done: list[_Stage] = []
    x, it0 = x0, start_iter
    stopped_in = 1.0  # the stage the fit ended in (an early one if interrupted there)
    for k, h in enumerate(stages):
        last = k == len(stages) - 1
        skip_below = None
        if not last:
            assert full is not None
            r_here = full(x)  # (remembered by _Counted when a stage ends where it began)
            skip_below = _UNINFORMATIVE * 0.5 * float(r_here @ r_here)
        stage = _fit_stage(
            fns[k],
            params,
            x,
            settings,
            horizon=h,
            last=last,
            start_iter=it0,
            ckpt=ckpt,
            # parameters without effect are looked for on the whole data: on a head a
            # parameter may have none yet (the part of the data that excites it comes later)
            check_effect=("warn" if allow_no_effect else "error") if last else None,
            skip_below=skip_below,
        )
        done.append(stage)
        x, it0 = stage.x, 0 if last else it0 + stage.nit
        if stage.status == "interrupted" and not last:  # the whole data at this point, no fit
            stopped_in = h
            final = dataclasses.replace(settings, max_iters=0)
            end = _fit_stage(
                residual_fn,
                params,
                x,
                final,
                horizon=1.0,
                last=True,
                start_iter=0,
                ckpt=ckpt,
                check_effect=None,
            )
            end.status = "interrupted"
            done.append(end)
            break
    stage = done[-1]
    assert stage.r is not None and stage.J is not None
    x_hat, r_hat, J, cost, status = stage.x, stage.r, stage.J, stage.cost, stage.status
    nit = sum(st.nit for st in done)
    if ckpt is not None:
        _checkpoint_write(ckpt, x_hat, cost, start_iter + nit, names, stopped_in)
    opt_params = params.copy()
    opt_params.update_from_vector(x_hat)
    message = _MESSAGES[status].format(n=max_iters)
    cost0 = stage.cost0 if full is None else initial_cost
    if verbose:
        print(f"{message} cost {cost0:.6e} -> {cost:.6e} in {nit} iterations", file=settings.out)
    extras: dict[str, Any] = {
        "objective": stage.history_obj,
        "candidate": stage.history_x,
        "secant_steps": sum(st.nsecant for st in done),
    }
    if len(done) > 1:
        extras["stages"] = [st.summary() for st in done]
    result = OptimizeResult(
        x=x_hat,
        cost=cost,
        fun=r_hat,
        jac=J,
        grad=J.T @ r_hat,
        status=status,
        success=status in ("xtol", "gtol", "ftol", "stalled"),
        message=message,
        nfev=sum(st.nfev for st in done) + (full.nfev if full is not None else 0),
        njev=sum(st.njev for st in done),
        nit=nit,
        initial_cost=cost0,
        wall_time=time.perf_counter() - t_start,
        parameter_names=names,
        optimizer=optimizer,
        extras=extras,
    )
    return opt_params, result


def sweep_parameter(
    params: ParameterDict,
    name: str,
    values: npt.ArrayLike,
    residual_fn: ResidualFn,
) -> np.ndarray:
    """Cost ``½‖r‖²`` as one parameter entry varies, all values in one batched call.

    Args:
      params: Current values of every parameter (not modified).
      name: A scalar parameter's name, or ``"name[i]"`` for entry ``i`` of an array parameter.
      values: ``(m,)`` values to try (need not respect the bounds).
      residual_fn: The residual function.

    Returns:
      ``(m,)`` costs.
    """
    labels = params.get_non_frozen_parameter_names()
    if name not in labels:
        raise KeyError(
            f"sweep_parameter: {name!r} must be one of the free parameter entries {labels}"
        )
    vals = np.asarray(values, dtype=np.float64).reshape(-1)
    if vals.size == 0 or not np.all(np.isfinite(vals)):
        raise ValueError(must_be("sweep_parameter: values", "a non-empty finite array", vals))
    X = np.repeat(params.as_vector()[:, None], vals.size, axis=1)
    X[labels.index(name)] = vals
    R = np.asarray(residual_fn(X, params), dtype=np.float64)
    return 0.5 * np.sum(R**2, axis=0)
