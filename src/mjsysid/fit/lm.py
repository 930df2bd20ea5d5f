"""Box-constrained Levenberg-Marquardt with secant Jacobian updates in the converging phase.

Minimise ``c(x) = ½‖r(x)‖²`` subject to ``lo ≤ x ≤ hi``. With the Jacobian ``J`` and the
column scaling ``D = diag(1 / ‖J_:,i‖)`` (computed from every finite-difference Jacobian,
kept between them), the step in scaled coordinates ``z = D⁻¹x`` solves the box QP

    dz = argmin  gᵀdz + ½ dzᵀ(H + μI)dz   s.t.  lo ≤ x + D·dz ≤ hi,
    H = (JD)ᵀ(JD),  g = (JD)ᵀr,

(``mujoco.mju_boxQP``). A trial point ``x + D·dz`` is accepted when the cost decreases by at
least ``-c₁·gᵀdz`` (Armijo, ``c₁ = 10⁻²``); the reduction ratio
``ρ = (c(x) − c(x + D·dz)) / (−gᵀdz − ½dzᵀH dz)`` then moves ``μ``: divided by
``mu_factor²`` for ``ρ > 3/4`` (by ``mu_factor`` if trials were rejected before; to 0 below
``mu_min``), multiplied by ``mu_factor`` for ``ρ < 1/4``. A rejected trial's ``μ`` is multiplied
by ``mu_factor`` until the step is at least 3 % shorter than the rejected one (from ``μ = 0``
the first values barely change it, and each trial costs an evaluation).

**Secant phase.** A finite-difference Jacobian costs ``p`` candidate evaluations, a trial
step one. Once an iteration with a fresh Jacobian shows the Gauss-Newton model to be accurate
and convergence to be fast (``|ρ − 1| ≤ 1/4`` and the cost falling tenfold or more), the next
Jacobians are Broyden updates instead,

    J₊ = J + (Δr − J s) sᵀ / (sᵀs),   s = x₊ − x,  Δr = r(x₊) − r(x),

which cost nothing. A secant iteration is kept only while its ``ρ`` stays within ``(1/2, 2)``
and it gains at least as much, in ``ln(c_old / c_new)`` per candidate evaluation, as a
finite-difference iteration (``p + 1`` evaluations) would gain now if convergence is quadratic:
fitting ``ln c₊ = 2 ln c + const`` to the last finite-difference step ``c₀ → c₁``, that gain
from the current cost ``c`` is ``ln(c₀/c₁) + ln(c₀/c)``. Otherwise, and before any
convergence test is allowed to end the fit, the Jacobian is recomputed by finite differences.
So the gradient and step tests always use a finite-difference Jacobian, and far from the
solution (where the Jacobian changes quickly and a secant step could lead into another basin)
every iteration uses one. With ``confirm_stop=False`` (an early horizon stage, whose end the
next stage's own finite-difference Jacobian judges) a stop found on a Broyden update is taken
as it is: where the secant would not be kept the update is still made, the gradient test is
made on it, and the finite-difference Jacobian is computed only when that test does not stop
the fit.

**Batched trials.** ``trial_steps = m > 1`` evaluates the steps for ``μ, μ·16, …, μ·16^(m−1)``
in one batched call and keeps the first (smallest ``μ``) acceptable one: on a machine with
more threads than the rollouts of one candidate need, the extra candidates run in otherwise
idle threads and save the sequential retries of rejected steps.

Termination: ``"gtol"`` (``‖g_free‖ ≤ gtol``, the scaled gradient over the entries not held
by an active bound), ``"xtol"`` (``‖Δx‖ < xtol·(xtol + ‖x‖)``), ``"stalled"`` (three steps
in a row accepted only at ``μ ≥ 100``, where a step is a short steepest-descent step, each
gaining less than 0.1 % of the cost: the cost is non-smooth there, as with contacts, and the
fit would crawl along it for many more Jacobians; a smooth cost near its minimum takes
Gauss-Newton steps at a small ``μ``), ``"max_iters"``,
``"no_improvement"`` (``μ`` exceeded ``mu_max`` without an acceptable step) and
``"factorization_failed"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Protocol, cast

import mujoco
import numpy as np
import scipy.linalg.blas

from mjsysid.util.errors import must_be

_ARMIJO = 1e-2
_TAIL_REDUCTION = 0.1  # enter the secant phase after a fresh step that cut the cost 10x ...
_TAIL_RHO = 0.25  # ... with |rho - 1| below this
_SECANT_RHO = (0.5, 2.0)  # a secant step outside this range ends the secant phase
_LADDER = 16.0
_SHORTER = 0.97  # after a rejection, the next trial step is at most this long (relative)
# A fit stalls against a non-smooth cost (contacts) when its steps are accepted only at a
# damping this large (scaled: steepest-descent steps far shorter than Gauss-Newton's) ...
_STALL_MU = 100.0
_STALL_GAIN = 1e-3  # ... and gain less than this share of the cost ...
_STALL_ITERS = 3  # ... this many times in a row.


class BatchResidual(Protocol):
    """``residual(X)``: ``(p, k)`` candidates -> ``(n, k)`` residuals (NaN where diverged)."""

    def __call__(self, X: np.ndarray, /) -> np.ndarray: ...


class JacobianFn(Protocol):
    """``jacobian(x, r)``: ``(n, p)`` finite-difference Jacobian at ``x`` with ``r = r(x)``."""

    def __call__(self, x: np.ndarray, r: np.ndarray, /) -> np.ndarray: ...


class StepCallback(Protocol):
    """Called after every accepted step with ``(iteration, x, cost)``; may raise to stop."""

    def __call__(self, iteration: int, x: np.ndarray, cost: float, /) -> None: ...


@dataclass(frozen=True)
class LMOptions:
    """Settings of :func:`levenberg_marquardt`.

    Attributes:
      max_iters: Accepted steps at most.
      xtol: Relative step tolerance. gtol: Scaled projected-gradient tolerance.
      mu_min, mu_max: Smallest non-zero and largest damping (scaled problem: ``H`` has a unit
        diagonal, so ``μ = 1`` halves the Gauss-Newton step along a well-scaled direction).
      mu_factor: Growth of ``μ`` after a rejected or poor step (> 1).
      secant: Use Broyden updates in the converging phase (see the module docstring).
      trial_steps: Trial steps evaluated per batched call (>= 1).
      x_scale: Fixed scaling ``D`` (scalar or ``(p,)``, positive) instead of the Jacobian
        column norms.
      confirm_stop: A stop found on a Broyden-updated Jacobian (gtol, xtol) is confirmed on
        a finite-difference one first; ``False`` takes it as it is (an early horizon stage,
        whose end the next stage's own Jacobian judges).
    """

    max_iters: int = 200
    xtol: float = 1e-8
    gtol: float = 1e-8
    mu_min: float = 1e-6
    mu_max: float = 1e8
    mu_factor: float = 4.0
    secant: bool = True
    trial_steps: int = 1
    x_scale: float | np.ndarray | None = None
    confirm_stop: bool = True

    def __post_init__(self) -> None:
        for name in ("xtol", "gtol"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(must_be(f"LMOptions.{name}", "a finite number >= 0", v))
        if not (0 < self.mu_min < self.mu_max and math.isfinite(self.mu_max)):
            raise ValueError(
                must_be(
                    "LMOptions.mu_min, mu_max",
                    "0 < mu_min < mu_max < inf",
                    (self.mu_min, self.mu_max),
                )
            )
        if not (math.isfinite(self.mu_factor) and self.mu_factor > 1):
            raise ValueError(must_be("LMOptions.mu_factor", "a finite number > 1", self.mu_factor))
        for name in ("secant", "confirm_stop"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise ValueError(must_be(f"LMOptions.{name}", "True or False", getattr(self, name)))
        for name in ("max_iters", "trial_steps"):
            v = getattr(self, name)
            low = 0 if name == "max_iters" else 1
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(must_be(f"LMOptions.{name}", f"an integer >= {low}", v))


@dataclass
class LMResult:
    """What :func:`levenberg_marquardt` ended with.

    Attributes:
      x: ``(p,)`` last accepted point. r: ``(n,)`` residual there. cost: ``½‖r‖²``.
      status: See the module docstring. nit: Accepted steps.
      njev: Finite-difference Jacobians computed (the one given at the start excluded).
      nsecant: Accepted steps taken with a Broyden-updated Jacobian.
      mu: Damping at the end.
    """

    x: np.ndarray
    r: np.ndarray
    cost: float
    status: str
    nit: int
    njev: int
    nsecant: int
    mu: float


def _norm(v: np.ndarray) -> float:
    """``‖v‖₂`` of a 1-D array: ``np.linalg.norm``'s value (``√(v·v)``), without its overhead."""
    return math.sqrt(float(v @ v))


def _box_step(
    H: np.ndarray, g: np.ndarray, mu: float, lower: np.ndarray, upper: np.ndarray
) -> np.ndarray | None:
    """``argmin gᵀd + ½dᵀ(H + μI)d`` within ``[lower, upper]``, or ``None`` if singular.

    An entry whose box has no width (``upper <= lower``: a value pinned for the stage) is
    ``d_i = lower_i``; the others solve the reduced problem, with ``g`` shifted by the pinned
    entries' coupling ``H[:, pinned]·d_pinned`` (``mju_boxQP`` wants every box open)."""
    pinned = upper <= lower
    if pinned.any():
        d = np.where(pinned, lower, 0.0)
        free = ~pinned
        if free.any():
            sub = _box_step(
                H[np.ix_(free, free)], g[free] + H[np.ix_(free, pinned)] @ d[pinned], mu,
                lower[free], upper[free],
            )  # fmt: skip
            if sub is None:
                return None
            d[free] = sub
        return d
    p = g.size
    d = np.zeros((p, 1))
    scratch = np.zeros((p, p + 7))
    Hmu = H.copy()
    Hmu.flat[:: p + 1] += mu  # H + μI
    nfree = mujoco.mju_boxQP(
        d, scratch, None, Hmu, g.reshape(p, 1), lower.reshape(p, 1), upper.reshape(p, 1)
    )
    return d.reshape(-1) if nfree >= 0 else None


def _damping_after(mu: float, rho: float, first_call: bool, opt: LMOptions) -> float:
    """``μ`` for the next step after a step accepted at ``μ`` with reduction ratio ``ρ``.

    ``ρ > 3/4``: divided by ``mu_factor²``, or by ``mu_factor`` when the step was not found
    by the first trial call (the accepted damping is then about what the model needs, and a
    full decrease would be rejected again next time); below ``mu_min`` it becomes 0.
    ``ρ < 1/4``: multiplied by ``mu_factor`` (at least ``mu_min``). Otherwise unchanged.
    """
    if rho > 0.75:
        cut = opt.mu_factor ** (2 if first_call else 1)
        return mu / cut if mu / cut >= opt.mu_min else 0.0
    if rho < 0.25:
        return max(mu * opt.mu_factor, opt.mu_min)
    return mu


def _broyden(J: np.ndarray, JtJ: np.ndarray | None, s: np.ndarray, dr: np.ndarray) -> np.ndarray:
    """``J ← J + u vᵀ`` in place (``u = Δr − J s``, ``v = s / sᵀs``, Broyden's update) and the
    matching ``JᵀJ``, updated in ``O(np)``: ``JᵀJ + Jᵀu vᵀ + v uᵀJ + (uᵀu) v vᵀ``.

    ``J`` must be Fortran- or C-contiguous and writable; returns the new ``JᵀJ`` (computed
    afresh when ``JtJ`` is ``None``).
    """
    u = dr - J @ s
    v = s / float(s @ s)
    Jtu = J.T @ u if JtJ is not None else None
    a = J if J.flags.f_contiguous else J.T  # a Fortran-ordered view for BLAS
    x_, y_ = (u, v) if a is J else (v, u)
    out = scipy.linalg.blas.dger(1.0, x_, y_, a=a, overwrite_a=True)
    if not np.shares_memory(out, a):  # the wrapper had to copy: write the result back
        a[...] = out
    if JtJ is None or Jtu is None:
        return cast(np.ndarray, J.T @ J)
    # (outer products by broadcasting: np.outer's values, without its per-call overhead)
    return cast(
        np.ndarray, JtJ + Jtu[:, None] * v + v[:, None] * Jtu + float(u @ u) * (v[:, None] * v)
    )


@dataclass
class _LMState:
    """The iterate of :func:`levenberg_marquardt` and what it keeps between iterations.

    ``JtJ`` and ``Jtr`` are kept while ``J`` and ``r`` stay (a rejected step changes
    neither): for a tall Jacobian they cost more than everything else in an iteration.
    """

    x: np.ndarray  # (p,) current point
    r: np.ndarray  # (n,) residual there
    cost: float
    J: np.ndarray  # (n, p) Jacobian: finite-difference (the caller's) or Broyden (own copy)
    D: np.ndarray  # (p,) column scaling
    fresh_base: float  # the cost at the start of the last fresh step
    spent: int  # evaluations spent on the current step (its Jacobian included)
    JtJ: np.ndarray | None = None
    Jtr: np.ndarray | None = None
    owned: bool = False  # J is this function's own copy (finite-difference ones are the caller's)
    fresh: bool = True  # J is a finite-difference Jacobian
    mu: float = 0.0
    njev: int = 0
    nit: int = 0
    nsecant: int = 0
    fresh_gain: float = 0.0  # ln-cost reduction of the last fresh step
    trials: int = 0  # trial candidates evaluated for the current step
    stalled: int = 0  # consecutive accepted steps that stalled (see _STALL_MU)
    status: str = "max_iters"
    stale: bool = False  # J is a Broyden update kept only to test for a stop (confirm_stop)

    def refresh(self, jacobian: JacobianFn) -> None:
        """A finite-difference Jacobian at the current point."""
        self.J = np.asarray(jacobian(self.x, self.r), dtype=np.float64)
        self.fresh, self.njev, self.spent, self.owned = True, self.njev + 1, self.x.size, False
        self.JtJ = self.Jtr = None
        self.stale = False


@dataclass
class _Trials:
    """Trial steps ``Z`` ``(p, m)`` (scaled) at dampings ``mus``, their points ``X``, residuals
    ``R``, costs, model slopes ``gᵀdz`` and predicted reductions; ``ok``: acceptable ones."""

    steps: list[np.ndarray]
    mus: list[float]
    Z: np.ndarray
    X: np.ndarray
    R: np.ndarray
    costs: np.ndarray
    predicted: np.ndarray
    ok: np.ndarray


def _check_inputs(
    x0: np.ndarray, r0: np.ndarray, J0: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x, r, J, lo, hi)`` as float arrays; raises ``ValueError`` for bad inputs."""
    x = np.array(x0, dtype=np.float64)
    r = np.array(r0, dtype=np.float64)
    J = np.asarray(J0, dtype=np.float64)  # not written to: Broyden updates work on a copy
    p = x.size
    if x.ndim != 1 or p == 0 or not np.all(np.isfinite(x)):
        raise ValueError(must_be("x0", "a non-empty finite 1-D array", x))
    if r.ndim != 1 or not np.all(np.isfinite(r)):
        raise ValueError(must_be("r0", "a finite 1-D array (the residual at x0)", r))
    if J.shape != (r.size, p):
        raise ValueError(must_be("J0", f"shape ({r.size}, {p}) (residuals x parameters)", J.shape))
    if len(bounds) != 2:
        raise ValueError(must_be("bounds", "a pair (lower, upper)", bounds))
    lo, hi = (np.broadcast_to(np.asarray(b, dtype=np.float64), (p,)) for b in bounds)
    if np.any(x < lo) or np.any(x > hi):
        raise ValueError(must_be("x0", f"within bounds [{lo}, {hi}]", x))
    return x, r, J, lo, hi


def _scaled_model(st: _LMState, opt: LMOptions) -> tuple[np.ndarray, np.ndarray]:
    """``(H, g)`` of the scaled problem, ``H = (JD)ᵀ(JD)``, ``g = (JD)ᵀr``."""
    if st.JtJ is None:
        st.JtJ = st.J.T @ st.J
    if st.Jtr is None:
        st.Jtr = st.J.T @ st.r
    if st.fresh and opt.x_scale is None:  # column norms of J
        st.D = 1.0 / np.maximum(np.sqrt(np.maximum(np.diag(st.JtJ), 0.0)), 1e-12)
    return st.JtJ * (st.D[:, None] * st.D), st.D * st.Jtr


def _ladder(
    H: np.ndarray, g: np.ndarray, mu: float, dlo: np.ndarray, dhi: np.ndarray, opt: LMOptions
) -> tuple[list[np.ndarray], list[float]]:
    """Trial steps for a ladder of damping values (the first one is ``mu`` itself)."""
    steps: list[np.ndarray] = []
    mus: list[float] = []
    m = mu
    while len(steps) < opt.trial_steps:
        d = _box_step(H, g, m, dlo, dhi)
        if d is None:
            m = max(m * opt.mu_factor, opt.mu_min)
            if m > opt.mu_max:
                break
            continue
        steps.append(d)
        mus.append(m)
        m = max(m * _LADDER, opt.mu_min)
    return steps, mus


def _evaluate(
    residual: BatchResidual,
    st: _LMState,
    H: np.ndarray,
    g: np.ndarray,
    steps: list[np.ndarray],
    mus: list[float],
    bounds: tuple[np.ndarray, np.ndarray],
) -> _Trials:
    """The trial points in one batched call, and which of them pass the Armijo test."""
    lo, hi = bounds
    Z = steps[0][:, None] if len(steps) == 1 else np.stack(steps, axis=1)
    X = np.minimum(np.maximum(st.x[:, None] + st.D[:, None] * Z, lo[:, None]), hi[:, None])
    R = np.asarray(residual(X), dtype=np.float64).reshape(st.r.size, -1)
    st.spent += Z.shape[1]
    st.trials += Z.shape[1]
    costs = 0.5 * np.einsum("ij,ij->j", R, R)
    costs[~np.isfinite(costs)] = np.inf
    slope = g @ Z  # gᵀdz < 0 for a descent step
    predicted = -(slope + 0.5 * np.einsum("ij,ik,kj->j", Z, H, Z))
    ok = (costs < st.cost) & (st.cost - costs >= -_ARMIJO * slope)
    return _Trials(steps, mus, Z, X, R, costs, predicted, ok)


def _raise_damping(
    st: _LMState,
    H: np.ndarray,
    g: np.ndarray,
    trials: _Trials,
    dlo: np.ndarray,
    dhi: np.ndarray,
    opt: LMOptions,
) -> bool:
    """After every trial failed: ``μ`` for the next try; ``False`` once it exceeds ``mu_max``.

    Damping values that leave the rejected step almost as long are skipped: each would cost
    an evaluation (from ``μ = 0``, the first few steps of the ladder do).
    """
    mu = max(trials.mus[-1] * opt.mu_factor, opt.mu_min)
    target = _SHORTER * float(np.linalg.norm(trials.steps[-1]))
    while mu <= opt.mu_max:
        d = _box_step(H, g, mu, dlo, dhi)
        if d is None or float(np.linalg.norm(d)) <= target:
            break
        mu *= opt.mu_factor
    st.mu = mu
    return mu <= opt.mu_max


class _Accepted(NamedTuple):
    """An accepted step: ``s = x₊ − x``, ``dr = r₊ − r``, the costs before and after, the
    reduction ratio ``rho``, ``eff`` (ln-cost gain per evaluation), its damping and whether
    it was taken with a finite-difference Jacobian."""

    s: np.ndarray
    dr: np.ndarray
    old_cost: float
    new_cost: float
    rho: float
    eff: float
    mu: float
    was_fresh: bool


def _accept(st: _LMState, trials: _Trials, opt: LMOptions) -> _Accepted:
    """Moves to the first (smallest ``μ``) acceptable trial point."""
    k = int(np.argmax(trials.ok))  # (some trial is acceptable)
    new_cost = float(trials.costs[k])
    cost, predicted = st.cost, trials.predicted[k]
    rho = (cost - new_cost) / predicted if predicted > 0 else 0.0
    eff = math.log(cost / new_cost) / st.spent if new_cost > 0 else math.inf  # per evaluation
    st.mu = _damping_after(trials.mus[k], rho, st.trials == trials.Z.shape[1], opt)
    s = trials.X[:, k] - st.x
    r_new = trials.R[:, k].copy()
    step = _Accepted(s, r_new - st.r, cost, new_cost, rho, eff, trials.mus[k], st.fresh)
    st.x, st.r, st.cost = trials.X[:, k].copy(), r_new, new_cost
    st.Jtr = None
    st.nit += 1
    st.nsecant += 0 if step.was_fresh else 1
    st.spent = st.trials = 0
    return step


def _stop_test(st: _LMState, step: _Accepted, opt: LMOptions) -> str | None:
    """``"xtol"`` or ``"stalled"`` when that test is met after ``step`` (it ends the fit only
    on a finite-difference Jacobian), else ``None``; updates the stall count."""
    if _norm(step.s) < opt.xtol * (opt.xtol + _norm(st.x)):
        return "xtol"
    gain = step.old_cost - step.new_cost
    stuck = step.mu >= _STALL_MU and gain < _STALL_GAIN * step.old_cost
    st.stalled = st.stalled + 1 if stuck else 0
    return "stalled" if st.stalled >= _STALL_ITERS else None


def _keep_secant(st: _LMState, step: _Accepted, opt: LMOptions) -> bool:
    """Whether the next Jacobian is a Broyden update (see the module docstring)."""
    old_cost, new_cost = step.old_cost, step.new_cost
    if step.was_fresh:
        st.fresh_gain = math.log(old_cost / new_cost) if new_cost > 0 else math.inf
        st.fresh_base = old_cost
        tail = new_cost <= _TAIL_REDUCTION * old_cost and abs(step.rho - 1.0) <= _TAIL_RHO
        return opt.secant and tail
    # What a finite-difference step would gain now, if convergence is quadratic
    # (ln c₊ = 2 ln c + const, fitted to the last one), per evaluation it costs.
    fresh_eff = (st.fresh_gain + math.log(st.fresh_base / old_cost)) / (st.x.size + 1)
    return step.eff >= fresh_eff and _SECANT_RHO[0] < step.rho < _SECANT_RHO[1]


def _next_jacobian(st: _LMState, step: _Accepted, opt: LMOptions, jacobian: JacobianFn) -> None:
    """The Jacobian of the next iteration: Broyden's update while it pays
    (:func:`_keep_secant`), else a finite-difference one. Without ``confirm_stop`` the update
    is made anyway and kept ``stale``: the next iteration tests it for a stop and only then
    computes the finite-difference Jacobian."""
    keep = _keep_secant(st, step, opt)
    if (keep or not opt.confirm_stop) and float(step.s @ step.s) > 0.0:
        if not st.owned:
            st.J, st.owned = np.array(st.J, order="F"), True
        st.JtJ = _broyden(st.J, st.JtJ, step.s, step.dr)
        st.fresh, st.stale = False, not keep
    else:
        st.refresh(jacobian)


def _iterate(
    st: _LMState,
    residual: BatchResidual,
    jacobian: JacobianFn,
    bounds: tuple[np.ndarray, np.ndarray],
    opt: LMOptions,
    callback: StepCallback | None,
) -> str | None:
    """One pass of the loop: a step tried, maybe accepted; the status once the fit ends."""
    lo, hi = bounds
    H, g = _scaled_model(st, opt)
    held = ((st.x <= lo) & (g > 0)) | ((st.x >= hi) & (g < 0))
    if _norm(g[~held]) <= opt.gtol:
        if st.fresh or not opt.confirm_stop:
            return "gtol"
        st.refresh(jacobian)
        return None
    if st.stale:  # (no stop on the update: the step needs the finite-difference Jacobian)
        st.refresh(jacobian)
        return None
    dlo, dhi = (lo - st.x) / st.D, (hi - st.x) / st.D
    steps, mus = _ladder(H, g, st.mu, dlo, dhi, opt)
    if not steps:
        return "factorization_failed"
    trials = _evaluate(residual, st, H, g, steps, mus, bounds)
    if not trials.ok.any():
        if not st.fresh:  # the secant model failed: get a true Jacobian first
            st.refresh(jacobian)
            return None
        return None if _raise_damping(st, H, g, trials, dlo, dhi, opt) else "no_improvement"
    step = _accept(st, trials, opt)
    if callback is not None:
        callback(st.nit, st.x.copy(), st.cost)
    stop = _stop_test(st, step, opt)
    if stop is not None:
        if step.was_fresh or not opt.confirm_stop:
            return stop
        st.refresh(jacobian)
        return None
    _next_jacobian(st, step, opt, jacobian)
    return None


def levenberg_marquardt(
    residual: BatchResidual,
    jacobian: JacobianFn,
    x0: np.ndarray,
    r0: np.ndarray,
    J0: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    options: LMOptions | None = None,
    callback: StepCallback | None = None,
) -> LMResult:
    """Minimises ``½‖r(x)‖²`` within ``bounds`` from ``x0`` (see the module docstring).

    Args:
      residual: Batched residual, ``(p, k) -> (n, k)``.
      jacobian: Finite-difference Jacobian ``(x, r) -> (n, p)``.
      x0: ``(p,)`` start, within the bounds. r0: ``(n,)`` finite residual at ``x0``.
      J0: ``(n, p)`` Jacobian at ``x0``.
      bounds: ``(lo, hi)``, each ``(p,)``, finite or infinite.
      options: :class:`LMOptions` (defaults if ``None``).
      callback: Called after each accepted step; an exception it raises ends the fit.

    Returns:
      :class:`LMResult`.

    Raises:
      ValueError: Inputs of the wrong shape, non-finite, or a start outside the bounds.
    """
    opt = options if options is not None else LMOptions()
    x, r, J, lo, hi = _check_inputs(x0, r0, J0, bounds)
    p = x.size
    cost = 0.5 * float(r @ r)
    st = _LMState(x, r, cost, J, np.ones(p), fresh_base=cost, spent=p)
    if opt.x_scale is not None:
        st.D = np.broadcast_to(np.asarray(opt.x_scale, dtype=np.float64), (p,)).copy()
    while st.nit < opt.max_iters:
        status = _iterate(st, residual, jacobian, (lo, hi), opt, callback)
        if status is not None:
            st.status = status
            break
    return LMResult(st.x, st.r, st.cost, st.status, st.nit, st.njev, st.nsecant, st.mu)


def gauss_newton_step(
    J: np.ndarray, r: np.ndarray, x: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]
) -> np.ndarray | None:
    """``(p,)`` the Gauss-Newton step from ``x`` within the bounds (``None``: not solvable).

    With ``g = Jᵀr`` and ``H = JᵀJ`` over the free entries (those not held by an active bound:
    at the lower bound with ``g > 0`` or the upper with ``g < 0``; their step is 0), the step
    ``d = −(H + λI)⁻¹ g`` (``λ = 1e-12·tr H / p`` keeps a rank-deficient ``H`` solvable) cut
    to the largest ``α ≤ 1`` that stays in the box: ``s = α·d``.

    Args:
      J: ``(m, p)`` Jacobian at ``x``. r: ``(m,)`` residual. x: ``(p,)`` point.
      bounds: ``(lo, hi)``, each ``(p,)``.
    """
    lo, hi = bounds
    g = J.T @ r
    free = ~(((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0)))
    step = np.zeros(x.size)
    if not free.any():
        return step
    Jf, gf = J[:, free], g[free]
    H = Jf.T @ Jf
    lam = 1e-12 * max(float(np.trace(H)) / max(gf.size, 1), 1e-300)
    try:
        d = -np.linalg.solve(H + lam * np.eye(gf.size), gf)
    except np.linalg.LinAlgError:
        return None
    xf, lof, hif = x[free], lo[free], hi[free]
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(d > 0, (hif - xf) / d, np.where(d < 0, (lof - xf) / d, np.inf))
    alpha = max(float(min(1.0, np.min(room))), 0.0)
    step[free] = alpha * d
    return step


def predicted_decrease(
    J: np.ndarray, r: np.ndarray, x: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]
) -> float:
    """The cost decrease the Gauss-Newton model predicts from ``x`` within the bounds.

    With the step ``s`` of :func:`gauss_newton_step` (the Gauss-Newton step cut to the box),
    the model ``½‖r + αJd‖²`` decreases monotonically in ``α`` up to 1, so the result,
    ``½‖r‖² − ½‖r + Js‖² = −gᵀs − ½‖Js‖² ≥ 0``, is a decrease the linearised problem
    certainly offers (Nocedal & Wright, *Numerical Optimization*, 2nd ed., §10.3). Scale-free
    in the parameters; NaN when the step is not solvable.

    Args:
      J: ``(m, p)`` Jacobian at ``x``. r: ``(m,)`` residual. x: ``(p,)`` point.
      bounds: ``(lo, hi)``, each ``(p,)``.
    """
    return decrease_along(J, r, gauss_newton_step(J, r, x, bounds))


def decrease_along(J: np.ndarray, r: np.ndarray, step: np.ndarray | None) -> float:
    """``½‖r‖² − ½‖r + J·step‖²``: the linearised model's decrease along ``step`` (NaN for
    ``None``, a step that could not be solved)."""
    if step is None:
        return float("nan")
    Js = J @ step
    return float(-(r @ Js) - 0.5 * (Js @ Js))


def step_in_standard_errors(
    J: np.ndarray, r: np.ndarray, x: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """``(p,)`` the Gauss-Newton step from ``x`` in standard errors of each parameter,
    ``|d_i| / se_i``: how far the linearised model still moves each entry, measured against
    what the noise of the data allows.

    Over the free entries (those not held by an active bound, as in
    :func:`predicted_decrease`), with the column-scaled ``J_s = J D``, ``H_s = J_sᵀJ_s`` and
    its pseudo-inverse ``H_s⁺`` over the eigen-directions above ``1e-10·λ_max`` (a direction
    the data do not see moves nothing and has no standard error), the step is
    ``d = −D H_s⁺ J_sᵀ r`` (cut to the box like :func:`predicted_decrease`'s) and the
    standard error ``se_i = σ D_i √(H_s⁺)_ii``, ``σ² = ‖r‖²/(n − p)``. A fit whose step is
    below a fraction (0.3) of every standard error has converged as far as the data can
    tell (Bates & Watts, *Nonlinear Regression Analysis*, 1988, §2.2.3: the relative offset
    criterion). Held entries get 0; an entry with a zero standard error (an exact fit) and a
    non-zero step gets ``inf``.

    Args:
      J: ``(m, p)`` Jacobian at ``x``. r: ``(m,)`` residual. x: ``(p,)`` point.
      bounds: ``(lo, hi)``, each ``(p,)``.
    """
    lo, hi = bounds
    m, p = J.shape
    g = J.T @ r
    free = ~(((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0)))
    norms = np.linalg.norm(J, axis=0)
    free &= norms > 0
    out = np.zeros(p)
    if not free.any() or m <= p:
        return out
    D = 1.0 / norms[free]
    Js = J[:, free] * D
    lam, V = np.linalg.eigh(Js.T @ Js)
    keep = lam > 1e-10 * max(float(lam.max()), 0.0)
    Hp = (V[:, keep] / lam[keep]) @ V[:, keep].T
    d = -D * (Hp @ (Js.T @ r))
    xf, lof, hif = x[free], lo[free], hi[free]
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(d > 0, (hif - xf) / d, np.where(d < 0, (lof - xf) / d, np.inf))
    d = d * max(min(1.0, float(np.min(room))), 0.0)
    se = np.sqrt(float(r @ r) / (m - p) * np.maximum(np.diag(Hp), 0.0)) * D
    with np.errstate(divide="ignore", invalid="ignore"):
        out[free] = np.where(se > 0, np.abs(d) / se, np.where(d == 0, 0.0, np.inf))
    return out
