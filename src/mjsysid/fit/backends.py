"""The optimizer backends of :func:`mjsysid.fit.optimize.optimize`, behind one signature.

Each backend runs one horizon stage from :class:`BackendCall` and returns a
:class:`BackendResult`. All use the Gauss-Newton model ``H ≈ JᵀJ``, ``g = Jᵀr``:

* ``"lm"`` (default): :func:`mjsysid.fit.lm.levenberg_marquardt`, projected
  Levenberg-Marquardt steps; once the fit converges fast, Broyden updates replace the
  finite-difference Jacobians (each costs ``p`` evaluations) until they stop paying off; every
  convergence test uses a finite-difference Jacobian.
* ``"mujoco"``: ``mujoco.minimize.least_squares`` (Levenberg-Marquardt with projected steps
  and column scaling), one batched Jacobian per iteration.
* ``"scipy"``: ``scipy.optimize.least_squares`` (trust-region reflective) with its own
  sequential 2-point differences, one residual evaluation per column.
* ``"scipy_parallel_fd"``: the same TRF outer loop, Jacobians from
  :func:`~mjsysid.fit.jacobian.fd_jacobian`; the residual at the current point is cached, so
  no evaluation is wasted.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import mujoco.minimize
import numpy as np
import scipy.optimize

from mjsysid.fit.jacobian import CountedResidual, JacobianCache
from mjsysid.fit.lm import LMOptions, levenberg_marquardt
from mjsysid.fit.options import FitOptions
from mjsysid.fit.status import Status, mujoco_status, scipy_status


class IterationRecorder(Protocol):
    """Records an accepted iteration ``(iteration, x, cost)``; ``best_cost`` so far."""

    best_cost: float

    def __call__(self, iteration: int, x: np.ndarray, cost: float, /) -> None: ...


@dataclass
class BackendCall:
    """What a backend needs to run one stage.

    Attributes:
      fn: The counted residual, ``(p, k) -> (n, k)``. jacobian: Finite-difference Jacobians.
      x0: ``(p,)`` start. r0: ``(n,)`` residual there. J0: ``(n, p)`` Jacobian there.
      bounds: ``(lo, hi)``, each ``(p,)``.
      options: The fit's options. lm_options: Those of the ``"lm"`` backend.
      max_iters: Iterations left to this stage (> 0).
      on_iter: Told every accepted iteration; may raise to end the stage.
    """

    fn: CountedResidual
    jacobian: JacobianCache
    x0: np.ndarray
    r0: np.ndarray
    J0: np.ndarray
    bounds: tuple[np.ndarray, np.ndarray]
    options: FitOptions
    lm_options: LMOptions
    max_iters: int
    on_iter: IterationRecorder


@dataclass
class BackendResult:
    """How a backend ended: ``x`` ``(p,)``, ``status``, ``nit`` iterations, ``nsecant``
    Broyden steps (``"lm"``), ``njev`` Jacobians it computed itself (``"scipy"``)."""

    x: np.ndarray
    status: Status
    nit: int
    nsecant: int = 0
    njev: int = 0


def run_lm(call: BackendCall) -> BackendResult:
    res = levenberg_marquardt(
        call.fn,
        call.jacobian,
        call.x0,
        call.r0,
        call.J0,
        call.bounds,
        dataclasses.replace(call.lm_options, max_iters=call.max_iters),
        call.on_iter,
    )
    return BackendResult(res.x, Status(res.status), res.nit, nsecant=res.nsecant)


def run_mujoco(call: BackendCall) -> BackendResult:
    capture = io.StringIO()
    s = call.options

    def mj_callback(trace: list[Any]) -> None:
        if len(trace) > 1:  # trace[0] is the start point, already recorded
            log = trace[-1]
            call.on_iter(
                len(trace) - 1, np.asarray(log.candidate).reshape(-1), float(log.objective)
            )

    x_hat, trace = mujoco.minimize.least_squares(
        call.x0,
        call.fn,
        bounds=call.bounds,
        jacobian=call.jacobian,
        xtol=float(s.xtol),
        gtol=float(s.gtol),
        max_iter=call.max_iters,
        verbose=mujoco.minimize.Verbosity.FINAL,
        output=capture,
        iter_callback=mj_callback,
        x_scale=s.x_scale,
        mu_factor=float(s.damping_growth),
        **s.backend_options,
    )
    x = np.asarray(x_hat, dtype=np.float64).reshape(-1)
    return BackendResult(x, mujoco_status(capture.getvalue()), max(len(trace) - 1, 0))


class _ScipyIterations:
    """Turns scipy's residual and Jacobian calls into iterations for the recorder:
    ``"scipy"`` counts a residual call that improved on the best cost, ``"scipy_parallel_fd"``
    a Jacobian call (one per TRF iteration)."""

    def __init__(self, call: BackendCall) -> None:
        self.call, self.n = call, 0
        self.count_residuals = call.options.optimizer == "scipy"

    def fun(self, x: np.ndarray) -> np.ndarray:
        r = self.call.fn(x)
        cost = 0.5 * float(r @ r)
        if self.count_residuals and np.isfinite(cost) and cost < self.call.on_iter.best_cost:
            self.n += 1
            self.call.on_iter(self.n, x, cost)
        return r

    def jac(self, x: np.ndarray) -> np.ndarray:
        r = self.call.fn(x)
        J = self.call.jacobian(x, r)
        self.n += 1
        self.call.on_iter(self.n, x, 0.5 * float(r @ r))
        return J


def run_scipy(call: BackendCall) -> BackendResult:
    s = call.options
    iters = _ScipyIterations(call)
    scale: Any = "jac" if isinstance(s.x_scale, str) else s.x_scale
    res = scipy.optimize.least_squares(
        iters.fun,
        call.x0,
        jac="2-point" if iters.count_residuals else iters.jac,
        bounds=call.bounds,
        xtol=float(s.xtol),
        gtol=float(s.gtol),
        ftol=max(float(s.ftol), np.finfo(float).eps),
        x_scale=scale,
        max_nfev=max(call.max_iters, 1),
        verbose=0,
        **{"method": "trf", **s.backend_options},
    )
    x = np.asarray(res.x, dtype=np.float64)
    if iters.count_residuals:
        return BackendResult(x, scipy_status(res.status), int(res.nfev), njev=int(res.njev or 0))
    return BackendResult(x, scipy_status(res.status), iters.n)


BACKENDS: dict[str, Callable[[BackendCall], BackendResult]] = {
    "lm": run_lm,
    "mujoco": run_mujoco,
    "scipy": run_scipy,
    "scipy_parallel_fd": run_scipy,
}
