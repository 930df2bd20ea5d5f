"""How a fit ended: the :class:`Status` values and their messages.

One table, :data:`MESSAGES`, says in words what each status means and what to do next; the
backends translate their own termination codes into a :class:`Status` here
(:func:`scipy_status`, :func:`mujoco_status`).
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """Why a fit (or one horizon stage of it) stopped.

    A ``str`` enum: a member equals its value (``Status.XTOL == "xtol"``) and ``str()`` gives
    the value, so results and files keep the plain words.
    """

    XTOL = "xtol"
    GTOL = "gtol"
    FTOL = "ftol"
    STALLED = "stalled"
    MAX_ITERS = "max_iters"
    NO_IMPROVEMENT = "no_improvement"
    FACTORIZATION_FAILED = "factorization_failed"
    INTERRUPTED = "interrupted"
    # an xtol/ftol stop that failed the honesty check (see honest_status)
    SMALL_STEP = "small_step"
    # early horizon stages only (see mjsysid.fit.horizons)
    SLOWED = "slowed"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


# a fit that ended with one of these met a convergence test
CONVERGED = frozenset({Status.XTOL, Status.GTOL, Status.FTOL, Status.STALLED})

MESSAGES: dict[Status, str] = {
    Status.XTOL: "Converged: the parameter step fell below xtol.",
    Status.GTOL: "Converged: the projected gradient fell below gtol.",
    Status.FTOL: "Converged: the relative cost reduction stayed below ftol.",
    Status.STALLED: (
        "Stopped: the cost stalled (three steps in a row were accepted only at a large "
        "damping and gained under 0.1 %): no nearby point is clearly better. Typical of a "
        "non-smooth cost (contacts, dry friction) or of a long simulation that drifts from "
        "the data; if the fit is poor, try another start, shorter horizons or multiple "
        "shooting (split_windows with initial_state_params). Impacts early in a recording "
        "(a robot set down or landing) do the most harm: start the data once the contacts "
        "have settled (time_range in an experiment file)."
    ),
    Status.MAX_ITERS: (
        "Stopped after max_iters={n} iterations before converging; raise max_iters or "
        "restart from this result (optimize accepts the returned parameters)."
    ),
    Status.NO_IMPROVEMENT: (
        "Stopped: no step reduced the cost further. This is a local minimum or a "
        "non-smooth residual (contacts, friction); check the fit, try another start "
        "or a larger finite-difference step (eps)."
    ),
    Status.FACTORIZATION_FAILED: (
        "Stopped: the Gauss-Newton system could not be factorised; some "
        "parameters are probably unidentifiable (see the confidence "
        "intervals) or badly scaled."
    ),
    Status.INTERRUPTED: "Interrupted by the user; the best parameters found so far are returned.",
    Status.SMALL_STEP: (
        "Not converged: the fit stopped on a small step (or a small cost reduction) while "
        "the linearised model still predicts a clear decrease of the cost, so this is not a "
        "minimum (a long simulation that drifts from the data, a non-smooth cost or a poor "
        "start); its confidence intervals are not meaningful. Remedies: multiple shooting "
        "(experiment file: shooting: {{window: 1.0, estimate_initial_state: true}}), horizon "
        "stages (horizons: auto, or --horizons 0.25,1), or a global stage before the local "
        "fit."
    ),
}

# honest_status: an xtol/ftol stop is convergence only when the Gauss-Newton model predicts a
# decrease below this fraction of the cost
SMALL_STEP_PREDICTED = 1e-2
# ... and over this fraction of the start cost (round-off at an exact fit is no decrease)
SMALL_STEP_FLOOR = 1e-10


def honest_status(status: Status, cost: float, predicted: float, cost0: float) -> Status:
    """``status``, or :attr:`Status.SMALL_STEP` for an ``xtol``/``ftol`` stop at which the
    linearised model still predicts a decrease ``predicted`` over ``SMALL_STEP_PREDICTED``
    of ``cost`` and over ``SMALL_STEP_FLOOR`` of the start cost ``cost0`` (a small step is
    not a minimum when the gradient is not small)."""
    if status not in (Status.XTOL, Status.FTOL):
        return status
    floor = max(SMALL_STEP_PREDICTED * max(cost, 0.0), SMALL_STEP_FLOOR * max(cost0, 0.0))
    if not predicted > floor:  # nan: not judged
        return status
    return Status.SMALL_STEP


def message(status: Status | str, max_iters: int) -> str:
    """The words for a fit's final ``status`` (``max_iters``: the limit it ran under)."""
    return MESSAGES[Status(status)].format(n=max_iters)


_SCIPY_STATUS = {
    0: Status.MAX_ITERS,
    1: Status.GTOL,
    2: Status.FTOL,
    3: Status.XTOL,
    4: Status.XTOL,
}


def scipy_status(code: int) -> Status:
    """The status of a ``scipy.optimize.least_squares`` result's ``status`` code."""
    return _SCIPY_STATUS.get(code, Status.MAX_ITERS)


# The final line mujoco.minimize.least_squares writes at Verbosity.FINAL, by fragment.
_MJ_STATUS = (
    ("factorization failed", Status.FACTORIZATION_FAILED),
    ("insufficient reduction", Status.NO_IMPROVEMENT),
    ("maximum iterations", Status.MAX_ITERS),
    ("norm(dx) < tol", Status.XTOL),
    ("norm(gradient) < tol", Status.GTOL),
)


def mujoco_status(log: str) -> Status:
    """The status of a ``mujoco.minimize.least_squares`` run, read from its final log.

    ``least_squares`` returns only ``(x, trace)``: its ``mujoco.minimize.Status`` is a local
    variable that reaches the caller only as words in the text it writes to ``output``
    (``_STATUS_MESSAGE``, private), and its trace (``IterLog``: candidate, objective,
    reduction, regularizer, ...) does not record why it stopped. So the text written at
    ``Verbosity.FINAL`` is searched for those words here, and nowhere else. A zero gradient
    at the start ends it before any of them ("Zero gradient"): ``gtol``; no words at all:
    ``max_iters``.
    """
    found = next((st for fragment, st in _MJ_STATUS if fragment in log), None)
    if found is not None:
        return found
    return Status.GTOL if "Zero gradient" in log else Status.MAX_ITERS
