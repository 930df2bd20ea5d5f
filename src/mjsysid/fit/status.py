"""How a fit ended: the :class:`Status` values and their messages.

One table, :data:`MESSAGES`, says in words what each status means and what to do next; the
backends translate their own termination codes into a :class:`Status` here
(:func:`scipy_status`, :func:`mujoco_status`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import mujoco
import numpy as np

from mjsysid.util.errors import must_be


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
    # the whole data's cost ended above its value at the start (horizon stages led away)
    COST_ROSE = "cost_rose"
    # early horizon stages only (see mjsysid.fit.horizons)
    SLOWED = "slowed"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


# a fit that ended with one of these met a convergence test (a stall is no convergence: the
# cost stopped falling at a point the Gauss-Newton model does not call a minimum)
CONVERGED = frozenset({Status.XTOL, Status.GTOL, Status.FTOL})

MESSAGES: dict[Status, str] = {
    Status.XTOL: "Converged: the parameter step fell below xtol.",
    Status.GTOL: "Converged: the projected gradient fell below gtol.",
    Status.FTOL: "Converged: the relative cost reduction stayed below ftol.",
    Status.STALLED: (
        "Not converged: the cost stalled (three steps in a row were accepted only at a large "
        "damping and gained under 0.1 %): no nearby point is clearly better."
    ),
    Status.MAX_ITERS: "Stopped after max_iters={n} iterations before converging",
    Status.NO_IMPROVEMENT: (
        "Stopped: no step reduced the cost further. This is a local minimum or a "
        "non-smooth residual."
    ),
    Status.FACTORIZATION_FAILED: (
        "Stopped: the Gauss-Newton system could not be factorised; some parameters are "
        "probably unidentifiable or badly scaled."
    ),
    Status.INTERRUPTED: "Interrupted by the user; the best parameters found so far are returned.",
    Status.SMALL_STEP: (
        "Not converged: the fit stopped on a small step (or a small cost reduction) while "
        "the linearised model still predicts a clear decrease of the cost, so this is not a "
        "minimum; its confidence intervals are not meaningful."
    ),
    Status.COST_ROSE: (
        "Not converged: the cost on the whole data ended above its value at the start (the "
        "early horizon stages, fitted on the start of the data, led the fit away from it); "
        "the result is worse than the start."
    ),
}
"""What each status means (the first sentences of :func:`message`; the remedies follow
from :data:`REMEDIES`, in the reader's words and only those that can apply)."""


# -- remedies, in the reader's words --------------------------------------------------------------
LANGUAGES = ("both", "python", "file")


@dataclass(frozen=True)
class MessageContext:
    """Who reads a fit's messages and which causes and remedies can apply to the fit.

    Attributes:
      language: ``"python"``: remedies as :func:`~mjsysid.fit.optimize.optimize` keywords
        and functions; ``"file"``: as experiment-file keys and ``mjsysid`` flags; ``"both"``
        (the default of a bare result): each remedy in both forms.
      contacts: Whether the model can make contacts (``None``: unknown, named as a cause).
      dry_friction: Whether a joint has dry friction, ``frictionloss`` (``None``: unknown).
      windowed: The fit ran in shooting windows already (no window advice, no drift).
      staged: The fit ran in horizon stages already (no horizon advice).
      searched: The fit had a global stage or several starts already.
    """

    language: str = "both"
    contacts: bool | None = None
    dry_friction: bool | None = None
    windowed: bool = False
    staged: bool = False
    searched: bool = False

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(must_be("language", f"one of {list(LANGUAGES)}", self.language))

    def say(self, python: str, file: str) -> str:
        """``python`` or ``file``, or both labelled, in this context's language."""
        if self.language == "python":
            return python
        if self.language == "file":
            return file
        return f"experiment file: {file}; Python: {python}"


def model_context(
    models: Iterable[Any],
    *,
    language: str = "both",
    windowed: bool = False,
    staged: bool = False,
    searched: bool = False,
) -> MessageContext:
    """The :class:`MessageContext` of a fit of ``models`` (``mujoco.MjModel``): contacts
    when two geoms of different bodies can collide (``contype``/``conaffinity``) or a
    contact pair is declared; dry friction when a dof has ``frictionloss > 0``."""
    contacts = friction = False
    for m in models:
        contacts = contacts or _can_collide(m)
        friction = friction or bool(np.any(np.asarray(m.dof_frictionloss) > 0))
    return MessageContext(language, contacts, friction, windowed, staged, searched)


def fit_context(
    models: Iterable[Any],
    sequence_names: Iterable[str],
    language: str,
    *,
    staged: bool = False,
    searched: bool = False,
) -> MessageContext:
    """The :class:`MessageContext` of a finished fit: its models, whether its sequences
    are shooting windows (names ``"<name>#k"``), whether it ran in horizon stages
    (``staged``: ``result.stages``) or had a global stage or several starts (``searched``)."""
    windowed = any(re.fullmatch(r".*#\d+", str(n)) for n in sequence_names)
    return model_context(
        models, language=language, windowed=windowed, staged=staged, searched=searched
    )


def reworded(result_message: str, status: Status | str, context: MessageContext) -> str:
    """A result's ``message`` in ``context``'s words (the iteration limit read from it);
    unchanged for a status this module does not know."""
    try:
        st = Status(status)
    except ValueError:
        return result_message
    found = re.search(r"max_iters=(\d+)", result_message)
    text = message(st, int(found.group(1)) if found else 0, context)
    if result_message.startswith(_NOT_TO_THE_DATA) and text.startswith("Converged: "):
        text = _NOT_TO_THE_DATA + text[len("Converged: ") :].rstrip(".") + ")."
    at = result_message.find(DIAGNOSIS)
    return text + (result_message[at:] if at >= 0 else "")


def _can_collide(m: Any) -> bool:
    """Whether the model declares a contact pair, or two geoms can collide by their
    ``contype``/``conaffinity`` bits: on different weld bodies and, unless the model turns
    the parent filter off, not a parent and its child (the world excepted), as MuJoCo's
    broad phase filters them. Geometry is not looked at: a structural over-approximation."""
    if getattr(m, "npair", 0) > 0:
        return True
    ct = np.asarray(m.geom_contype, dtype=np.int64)
    ca = np.asarray(m.geom_conaffinity, dtype=np.int64)
    if ct.size < 2:
        return False
    weld = np.asarray(m.body_weldid)[np.asarray(m.geom_bodyid)]
    bits = ((ct[:, None] & ca[None, :]) | (ca[:, None] & ct[None, :])) != 0
    apart = weld[:, None] != weld[None, :]
    if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT:
        parent = np.asarray(m.body_weldid)[np.asarray(m.body_parentid)][weld]
        child_of = (parent[:, None] == weld[None, :]) | (parent[None, :] == weld[:, None])
        world = (weld[:, None] == 0) | (weld[None, :] == 0)
        apart &= ~child_of | world
    return bool(np.any(bits & apart))


def _windows(c: MessageContext) -> str:
    return (
        "multiple shooting ("
        + c.say(
            "split_windows(sequences, 1.0) with initial_state_params",
            "shooting: {window: 1.0, estimate_initial_state: true}",
        )
        + ")"
    )


def _horizons(c: MessageContext) -> str:
    return (
        "horizon stages ("
        + c.say(
            "optimize(..., horizons='auto') or horizons=[0.25, 1.0]",
            "optimizer: {horizons: auto}, or --horizons 0.25 1",
        )
        + ")"
    )


def _search(c: MessageContext) -> str:
    return (
        "a global stage before the local fit, or several starts ("
        + c.say(
            "optimize(..., global_search='cmaes') or starts=8",
            "optimizer: {global: cmaes} or optimizer: {starts: 8}; --global cmaes or --starts 8",
        )
        + ")"
    )


def _causes(c: MessageContext) -> list[str]:
    """The sources of a non-smooth cost that can apply to the fit."""
    named = (("contacts", c.contacts), ("dry friction", c.dry_friction))
    return [name for name, can in named if can is not False]


def _non_smooth(c: MessageContext) -> str:
    """``"a non-smooth cost (contacts, dry friction)"`` with the causes that can apply
    (empty when none can)."""
    causes = _causes(c)
    return f"a non-smooth cost ({', '.join(causes)})" if causes else ""


def _drift(c: MessageContext) -> str:
    """Drift over a long simulation: not a cause in short shooting windows."""
    return "" if c.windowed else "a long simulation that drifts from the data"


def _typical(c: MessageContext) -> str:
    """The sentence naming the usual causes of a stop short of a minimum."""
    causes = [x for x in (_non_smooth(c), _drift(c)) if x]
    return f" Typical of {' or of '.join(causes)}." if causes else ""


def _remedies(c: MessageContext) -> list[str]:
    """The fit-level remedies that can apply: another start, horizons, windows."""
    out = []
    if not c.searched:
        out.append(_search(c))
    if not c.staged:
        out.append(_horizons(c))
    if not c.windowed:
        out.append(_windows(c))
    return out


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _stalled(c: MessageContext) -> str:
    text = _typical(c)
    remedies = _remedies(c)
    if remedies:
        text += f" If the fit is poor, try {_joined(remedies)}."
    if c.contacts is not False:
        text += (
            " Impacts early in a recording (a robot set down or landing) do the most harm: "
            "start the data once the contacts have settled ("
            + c.say(
                "load_recording(..., time_range=(start, None))",
                "time_range: [start, null] on the sequence",
            )
            + ")."
        )
    return text


def _small_step(c: MessageContext) -> str:
    causes = [x for x in (_drift(c), _non_smooth(c), "a poor start") if x]
    remedies = _remedies(c)
    text = f" Likely causes: {_joined(causes)}."
    return text + (f" Remedies: {_joined(remedies)}." if remedies else "")


def _no_improvement(c: MessageContext) -> str:
    eps = (
        "a larger finite-difference step ("
        + c.say("optimize(..., eps=1e-6)", "optimizer: {eps: 1e-6}")
        + ")"
    )
    causes = _causes(c)
    text = f" Here it can come from {' and '.join(causes)}." if causes else ""
    return text + " Check the fit; try " + _joined([*_remedies(c)[:1], eps]) + "."


def _max_iters(c: MessageContext) -> str:
    return (
        "; "
        + c.say(
            "raise max_iters or restart from this result (optimize accepts the returned "
            "parameters)",
            "raise optimizer: {max_iters: N} (or --max-iters N)",
        )
        + "."
    )


def _cost_rose(c: MessageContext) -> str:
    one = c.say("horizons=None", "optimizer: {horizons: none}, or --horizons none")
    out = [f"one stage on the whole data ({one})"]
    if not c.windowed:
        out.insert(0, _windows(c))
    return f" Try {_joined(out)}."


def _factorization(c: MessageContext) -> str:
    return (
        " See "
        + c.say(
            "the confidence intervals or mjsysid.fit.audit.audit_residual",
            "the intervals, or run mjsysid audit on the experiment",
        )
        + " for the parameters to freeze or rescale."
    )


REMEDIES: dict[Status, Callable[[MessageContext], str]] = {
    Status.STALLED: _stalled,
    Status.SMALL_STEP: _small_step,
    Status.NO_IMPROVEMENT: _no_improvement,
    Status.MAX_ITERS: _max_iters,
    Status.FACTORIZATION_FAILED: _factorization,
    Status.COST_ROSE: _cost_rose,
}
"""What to do after a stop, per status: the text after :data:`MESSAGES`' meaning."""


# honest_status: an xtol/ftol stop is convergence only when the Gauss-Newton model predicts a
# decrease below this fraction of the cost
SMALL_STEP_PREDICTED = 1e-2
# ... and over this fraction of the start cost (round-off at an exact fit is no decrease)
SMALL_STEP_FLOOR = 1e-10


STEP_SE = 0.3  # a converged fit's Gauss-Newton step is below this many standard errors

# The fractions of the Gauss-Newton step a stop that fails honest_status tries (one batched
# residual call), and the share of the predicted decrease that confirms the model there.
TRIAL_FRACTIONS = (1.0, 0.5, 0.25)
CONFIRMED_SHARE = 0.5


@dataclass(frozen=True)
class StepTrial:
    """The Gauss-Newton step of a stop that failed :func:`honest_status`, tried on the
    residual: is the decrease the linearised model promises there?

    Attributes:
      cost: ``½‖r‖²`` at the stop.
      fractions: ``(k,)`` the fractions of the step tried (:data:`TRIAL_FRACTIONS`).
      predicted: ``(k,)`` the linearised model's costs there, ``½‖r + f·Js‖²``.
      actual: ``(k,)`` the residual's costs there (``inf`` where the simulation diverged).
      step_se: The step's largest entry in standard errors.
    """

    cost: float
    fractions: tuple[float, ...]
    predicted: tuple[float, ...]
    actual: tuple[float, ...]
    step_se: float

    @property
    def confirmed(self) -> bool:
        """Whether the stop is no minimum after all: at some fraction the cost falls by at
        least :data:`CONFIRMED_SHARE` of the predicted decrease, or by a clear share of the
        cost (:data:`SMALL_STEP_PREDICTED`) whatever the prediction."""
        for want, got in zip(self.predicted, self.actual, strict=True):
            fall, promised = self.cost - got, self.cost - want
            if fall > 0 and (
                fall >= CONFIRMED_SHARE * promised or fall > SMALL_STEP_PREDICTED * self.cost
            ):
                return True
        return False

    def summary(self) -> dict[str, Any]:
        """Plain scalars and lists (for ``result.yaml``; a diverged cost is ``.inf``)."""
        return {
            "cost": float(self.cost),
            "fractions": [float(f) for f in self.fractions],
            "predicted": [float(c) for c in self.predicted],
            "actual": [float(c) for c in self.actual],
            "step_se": float(self.step_se),
        }

    @classmethod
    def from_summary(cls, data: Mapping[str, Any]) -> StepTrial:
        """The inverse of :meth:`summary`."""
        return cls(
            float(data["cost"]),
            tuple(float(f) for f in data["fractions"]),
            tuple(float(c) for c in data["predicted"]),
            tuple(float(c) for c in data["actual"]),
            float(data["step_se"]),
        )

    def text(self) -> str:
        """The trial in words, for a stop it did not confirm."""
        tried = ", ".join(
            f"{_relative(got, self.cost)} at {_FRACTION_WORDS.get(f, f'{f:g} of it')}"
            for f, got in zip(self.fractions, self.actual, strict=True)
        )
        return (
            f"the Gauss-Newton step the linearised model still proposes ({self.step_se:.3g} "
            f"standard errors, a predicted decrease of "
            f"{100.0 * (self.cost - self.predicted[0]) / self.cost:.3g} %) does not lower the "
            f"cost ({tried}): the cost is not quadratic at the scale of the standard errors, so "
            "the stop stands and the linearised intervals are approximate (a bootstrap does "
            "not rely on that scale)"
        )


_FRACTION_WORDS = {1.0: "the whole step", 0.5: "half of it", 0.25: "a quarter"}


def _relative(cost: float, base: float) -> str:
    """``cost`` against ``base`` in words: "+12.3 %", "−0.03 %", "diverged"."""
    if not math.isfinite(cost):
        return "diverged"
    return f"{100.0 * (cost - base) / base:+.3g} %"


def honest_status(
    status: Status, cost: float, predicted: float, cost0: float, step_se: float = 0.0
) -> Status:
    """``status``, or :attr:`Status.SMALL_STEP` for an ``xtol``/``ftol``/``gtol`` stop that
    is no minimum: the linearised model still predicts a decrease ``predicted`` over
    ``SMALL_STEP_PREDICTED`` of ``cost``, or a Gauss-Newton step of ``step_se`` (the largest
    over the parameters, :func:`~mjsysid.fit.lm.step_in_standard_errors`) above
    :data:`STEP_SE` standard errors. A predicted decrease under ``SMALL_STEP_FLOOR`` of the
    start cost ``cost0`` is round-off at an exact fit: converged whatever the step."""
    if status not in (Status.XTOL, Status.FTOL, Status.GTOL):
        return status
    if not predicted > SMALL_STEP_FLOOR * max(cost0, 0.0):  # nan: not judged
        return status
    if predicted > SMALL_STEP_PREDICTED * max(cost, 0.0) or step_se > STEP_SE:
        return Status.SMALL_STEP
    return status


@dataclass(frozen=True)
class Diagnosis:
    """What a finished fit's end point says beyond its status, for its message.

    Attributes:
      step: ``(name, k)``: the parameter the Gauss-Newton step still moves the most, by
        ``k`` standard errors (``None``: not judged).
      noise_ratio: The residual's variance over its sample-to-sample (white) part, ``2/d``
        with ``d`` the pooled Durbin-Watson figure (1 for white noise;
        :mod:`mjsysid.fit.whiteness`).
      signals: The worst signals' Durbin-Watson figures, in words.
      trial: The Gauss-Newton step tried where it did not deliver what the linearised
        model predicts (:class:`StepTrial`; the stop then stands).
    """

    step: tuple[str, float] | None = None
    noise_ratio: float = float("nan")
    signals: str = ""
    trial: StepTrial | None = None

    @property
    def far_from_noise(self) -> bool:
        """Whether the residual is far above the noise (``noise_ratio`` over 10)."""
        return self.noise_ratio > FAR_ABOVE_NOISE


FAR_ABOVE_NOISE = 10.0
DIAGNOSIS = " At the end:"  # the start of the diagnosis, kept when a message is reworded
_NOT_TO_THE_DATA = (
    "Stopped at a minimum that does not reproduce the data (the optimizer's test was met: "
)


def _diagnosed(text: str, st: Status, c: MessageContext, d: Diagnosis | None) -> str:
    """``text`` with the :class:`Diagnosis` said after it (and a converged fit far above
    the noise not called converged)."""
    if d is None:
        return text
    out = []
    if d.step is not None and st is Status.SMALL_STEP:
        name, k = d.step
        out.append(f"the Gauss-Newton step still moves {name} by {k:.3g} standard errors")
    if d.trial is not None:
        out.append(d.trial.text())
    if d.far_from_noise:
        remedies = ([] if c.windowed else [_windows(c)]) + ([] if c.staged else [_horizons(c)])
        remedies = [r for r in remedies if r not in text]  # (the status's words may name them)
        hint = f"; try {_joined(remedies)}" if remedies else ""
        sig = f" ({d.signals})" if d.signals else ""
        out.append(
            f"the residual is {d.noise_ratio:.3g} times its sample-to-sample noise{sig}: the "
            "simulation does not follow the data (a long recording drifts, the fit is in a "
            f"local minimum, or the model misses physics){hint}"
        )
        if st in CONVERGED and text.startswith("Converged: "):
            text = _NOT_TO_THE_DATA + text[len("Converged: ") :].rstrip(".") + ")."
    return text + (DIAGNOSIS + " " + "; ".join(out) + "." if out else "")


def message(
    status: Status | str,
    max_iters: int,
    context: MessageContext | None = None,
    diagnosis: Diagnosis | None = None,
) -> str:
    """The words for a fit's final ``status``: what it means and what to do next.

    Args:
      status: How the fit ended. max_iters: The iteration limit it ran under.
      context: The reader's language and what can apply to this fit (default: both
        languages, every cause; see :class:`MessageContext`).
      diagnosis: What the end point says beyond the status (:class:`Diagnosis`): the step
        left in standard errors, a residual far above the noise (then a converged fit is not
        called converged, and windows and horizons are suggested).
    """
    st = Status(status)
    c = context or MessageContext()
    text = MESSAGES[st].format(n=max_iters)
    remedy = REMEDIES.get(st)
    return _diagnosed(text + (remedy(c) if remedy is not None else ""), st, c, diagnosis)


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
