"""What a fit found: :class:`OptimizeResult` and the typed records it holds.

One result type for every way to fit (the local fit, in horizon stages, after a global stage,
from several starts, on a cluster): the solution and its residual and Jacobian, how the fit
ended (a :class:`~mjsysid.fit.status.Status` and a message in words), its history, and named
records of what else ran (:class:`StageSummary` per horizon stage, the prior rows of a MAP
fit, :class:`GlobalResult`, :class:`MultistartSummary`, the held-out validation table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mjsysid.fit.prior import PriorRows
from mjsysid.fit.status import Status, StepTrial
from mjsysid.fit.validation import ValidationTable
from mjsysid.util.errors import must_be

__all__ = [
    "FitHistory",
    "GlobalResult",
    "MultistartSummary",
    "OptimizeResult",
    "StageSummary",
    "StartRecord",
]


@dataclass(frozen=True)
class FitHistory:
    """The accepted iterations of a fit (of its last, whole-data horizon stage).

    Attributes:
      objective: ``k`` costs ``½‖r‖²``, the start's first.
      candidate: ``k`` ``(p,)`` parameter vectors (never Jacobians: memory stays flat).
      secant_steps: Iterations that used a secant Jacobian update instead of finite
        differences (``"lm"`` backend).
    """

    objective: list[float] = field(default_factory=list)
    candidate: list[np.ndarray] = field(default_factory=list)
    secant_steps: int = 0


@dataclass(frozen=True)
class TwoStarts:
    """The last horizon stage run from two points (the early stages' end fitted the whole
    data worse than the fit's start): which end was kept, ``"stages"`` (from the early
    stages' end) or ``"start"`` (from the fit's start), and the cost the other run ended at
    (on the whole data)."""

    kept: str
    other_cost: float

    def __post_init__(self) -> None:
        if self.kept not in ("stages", "start"):
            raise ValueError(must_be("kept", "'stages' or 'start'", self.kept))

    def text(self) -> str:
        """E.g. ``"also run from the fit's start, which ended at 0.874: the stages' end
        kept"``."""
        if self.kept == "stages":
            return (
                f"also run from the fit's start, which ended at {self.other_cost:.6g}: the "
                "stages' end kept"
            )
        return (
            f"also run from the fit's start; from the early stages' end it ended at "
            f"{self.other_cost:.6g}: the start's end kept"
        )


@dataclass(frozen=True)
class StageSummary:
    """One horizon stage of a fit (:mod:`mjsysid.fit.horizons`).

    Attributes:
      horizon: The fraction of every sequence fitted, ``(0, 1]``.
      status: How the stage ended. nit: Its iterations. nfev: Its candidate evaluations.
      initial_cost, cost: ``½‖r‖²`` on this stage's part of the data, at its start and end.
      objective: Its costs per accepted iteration (on its part of the data).
      held: The parameters it held, having no effect on its part of the data (released in
        the stage that excites them).
      two_starts: The last stage run from two points, which end was kept (``None``: one).
    """

    horizon: float
    status: Status
    nit: int
    nfev: int
    initial_cost: float
    cost: float
    objective: list[float]
    held: list[str] = field(default_factory=list)
    two_starts: TwoStarts | None = None

    def summary(self) -> dict[str, Any]:
        """Plain scalars and lists (for ``result.yaml``)."""
        return {
            "horizon": float(self.horizon),
            "status": self.status.value,
            "nit": int(self.nit),
            "nfev": int(self.nfev),
            "initial_cost": float(self.initial_cost),
            "cost": float(self.cost),
            "objective": [float(c) for c in self.objective],
            **({"held": list(self.held)} if self.held else {}),
            **(
                {}
                if self.two_starts is None
                else {
                    "two_starts": {
                        "kept": self.two_starts.kept,
                        "other_cost": float(self.two_starts.other_cost),
                    }
                }
            ),
        }

    @classmethod
    def from_summary(cls, data: dict[str, Any]) -> StageSummary:
        """The inverse of :meth:`summary`."""
        return cls(
            float(data["horizon"]), Status(data["status"]), int(data["nit"]), int(data["nfev"]),
            float(data["initial_cost"]), float(data["cost"]),
            [float(c) for c in data.get("objective", [])],
            [str(n) for n in data.get("held", [])],
            None if "two_starts" not in data else TwoStarts(
                str(data["two_starts"]["kept"]), float(data["two_starts"]["other_cost"])
            ),
        )  # fmt: skip


@dataclass
class GlobalResult:
    """What :func:`~mjsysid.fit.search.global_search` found.

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
        """Plain scalars and lists (for ``result.yaml``)."""
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
class StartRecord:
    """One start of :func:`~mjsysid.fit.search.multistart`.

    Attributes:
      x0: ``(p,)`` start. initial_cost: Cost there (``inf``: diverged, not fitted).
      x: ``(p,)`` where its local fit ended (``x0`` when not fitted). cost: Final cost.
      status: The local fit's status, ``"diverged_at_start"`` or ``"failed"``.
      nfev: Evaluations of its local fit. nominal: Whether this is the nominal start.
      error: Why a fit failed (the ``ValueError`` of the local fit), else ``""``.
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
    """What the starts of :func:`~mjsysid.fit.search.multistart` found together.

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
        """Plain scalars and lists (for ``result.yaml``)."""
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


@dataclass(frozen=True)
class RangeTrial:
    """One range of a threshold entry tried by the profile.

    Attributes:
      value: The entry's value tried (the middle of the range).
      below, above: The range ``(below, above]`` between neighbouring recorded levels.
      scan_cost: The cost there with the other values where they were.
      refit_cost: After the short refit of the other values (``None``: not refitted).
      current: Whether it is the entry's range when the profile reached it.
    """

    value: float
    below: float
    above: float
    scan_cost: float
    refit_cost: float | None
    current: bool


@dataclass(frozen=True)
class ThresholdSweep:
    """One entry profiled: ``name`` (``"motor_deadzone[0]"``), every range ``trials``, the
    value it ends at and whether it moved."""

    name: str
    trials: tuple[RangeTrial, ...]
    value: float
    moved: bool

    def summary(self) -> dict[str, Any]:
        """Plain types, for a results file."""
        return {
            "entry": self.name,
            "value": float(self.value),
            "moved": bool(self.moved),
            "refitted": [
                {
                    "range": [float(t.below), float(t.above)],
                    "scan_cost": float(t.scan_cost),
                    "refit_cost": float(t.refit_cost),
                    "current": bool(t.current),
                }
                for t in self.trials
                if t.refit_cost is not None
            ],
        }

    @classmethod
    def from_summary(cls, d: dict[str, Any]) -> ThresholdSweep:
        """From :meth:`summary` (the refitted ranges only)."""
        trials = tuple(
            RangeTrial(
                0.5 * (t["range"][0] + t["range"][1]),
                float(t["range"][0]),
                float(t["range"][1]),
                float(t["scan_cost"]),
                float(t["refit_cost"]),
                bool(t["current"]),
            )
            for t in d["refitted"]
        )
        return cls(str(d["entry"]), trials, float(d["value"]), bool(d["moved"]))


@dataclass
class ThresholdProfile:
    """What the profile did (:attr:`OptimizeResult.threshold_profile`).

    Attributes:
      sweeps: Every entry profiled, in order.
      evaluations: Candidate evaluations (columns of residual calls).
      wall_time: Seconds of the profile (the refit after it not included).
      fit_cost: The fit's cost before the profile.
      refit_cost: The local fit's cost from the profile's point (``None``: no entry moved,
        so none ran; or it failed, see ``kept``).
      kept: ``"refit"`` (the fit from the profile's point ended lower and is the result),
        ``"fit"`` (the first fit ended lower) or ``"unmoved"`` (every entry stayed).
      refit_wall_time: Seconds of that local fit.
    """

    sweeps: list[ThresholdSweep] = field(default_factory=list)
    evaluations: int = 0
    wall_time: float = 0.0
    fit_cost: float = float("nan")
    refit_cost: float | None = None
    kept: str = "unmoved"
    refit_wall_time: float = 0.0

    @property
    def moved(self) -> bool:
        """Whether an entry moved to another range."""
        return any(s.moved for s in self.sweeps)

    def text(self) -> str:
        """The outcome, in words (a sentence of the fit's message)."""
        names = sorted({s.name for s in self.sweeps})
        if not self.moved:
            return (
                f"Threshold profile ({', '.join(names)}): every entry stayed in its range "
                f"between recorded command levels ({self.evaluations} evaluations, "
                f"{self.wall_time:.1f} s)."
            )
        moved = {s.name: s.value for s in self.sweeps if s.moved}
        where = ", ".join(f"{k} to {v:.6g}" for k, v in moved.items())
        if self.kept == "refit":
            outcome = (
                f"the fit from there ended at cost {self.refit_cost:.6g}, below the first "
                f"fit's {self.fit_cost:.6g}, and is the result"
            )
        elif self.refit_cost is None:
            outcome = "the fit from there failed; the first fit is the result"
        else:
            outcome = (
                f"the fit from there ended at cost {self.refit_cost:.6g}, not below the "
                f"first fit's {self.fit_cost:.6g}, which is the result"
            )
        return (
            f"Threshold profile: moved {where} ({self.evaluations} evaluations, "
            f"{self.wall_time:.1f} s); {outcome}."
        )

    def summary(self) -> dict[str, Any]:
        """Plain types, for a results file."""
        return {
            "kept": self.kept,
            "fit_cost": float(self.fit_cost),
            "refit_cost": None if self.refit_cost is None else float(self.refit_cost),
            "evaluations": int(self.evaluations),
            "wall_time": float(self.wall_time),
            "refit_wall_time": float(self.refit_wall_time),
            "sweeps": [s.summary() for s in self.sweeps],
        }

    @classmethod
    def from_summary(cls, d: dict[str, Any]) -> ThresholdProfile:
        """From :meth:`summary` (``result.yaml``)."""
        refit = d.get("refit_cost")
        return cls(
            sweeps=[ThresholdSweep.from_summary(s) for s in d["sweeps"]],
            evaluations=int(d["evaluations"]),
            wall_time=float(d["wall_time"]),
            fit_cost=float(d["fit_cost"]),
            refit_cost=None if refit is None else float(refit),
            kept=str(d["kept"]),
            refit_wall_time=float(d.get("refit_wall_time", 0.0)),
        )


@dataclass
class OptimizeResult:
    """What :func:`~mjsysid.fit.optimize.optimize` found.

    Attributes:
      x: ``(p,)`` solution vector (non-frozen parameters, vector order).
      cost: ``½‖r(x)‖²`` at the solution. initial_cost: The same at the start.
      fun: ``(n,)`` residual at the solution.
      jac: ``(n, p)`` Jacobian there (used for confidence intervals).
      grad: ``(p,)`` gradient ``Jᵀr`` there.
      status: How the fit ended (:class:`~mjsysid.fit.status.Status`; a ``str`` enum, so
        ``result.status == "xtol"`` holds).
      success: Whether a convergence test was met.
      message: What happened and what to do next, in words.
      nfev: Candidate evaluations (columns of residual calls, Jacobian columns included).
      njev: Jacobian evaluations. nit: Iterations.
      wall_time: Seconds spent fitting.
      parameter_names: Label of every entry of ``x``.
      optimizer: Backend name.
      history: The accepted iterations (:class:`FitHistory`; after a resume, the ones before
        it too, kept in the checkpoint). With horizon stages, the last stage's, like ``cost``.
      stages: One :class:`StageSummary` per horizon stage when there were several (empty:
        one stage on the whole data). ``nfev`` and ``nit`` count every stage.
      prior: The prior rows of a MAP fit (``fun`` and ``jac`` end with them), else ``None``.
      global_search: The global stage (:class:`GlobalResult`), when one ran.
      multistart: The multi-start statistics (:class:`MultistartSummary`), when several
        starts ran.
      validation: The table of ``optimize(holdout=...)``, when held-out data was given
        (``None`` also when its simulation failed: the fit is kept, with a logged warning).
      step_trial: The Gauss-Newton step left at a stop, tried where it did not deliver what
        the linearised model predicts (:class:`~mjsysid.fit.status.StepTrial`: the stop
        stands, the linearised intervals are approximate), else ``None``.
      threshold_profile: The profile of the force laws' command thresholds after the local
        fit (:class:`ThresholdProfile`, :mod:`mjsysid.fit.thresholds`), when one ran.
    """

    x: np.ndarray
    cost: float
    fun: np.ndarray
    jac: np.ndarray
    grad: np.ndarray
    status: Status
    success: bool
    message: str
    nfev: int
    njev: int
    nit: int
    initial_cost: float
    wall_time: float
    parameter_names: list[str]
    optimizer: str
    history: FitHistory = field(default_factory=FitHistory)
    stages: list[StageSummary] = field(default_factory=list)
    prior: PriorRows | None = None
    global_search: GlobalResult | None = None
    multistart: MultistartSummary | None = None
    validation: ValidationTable | None = None
    step_trial: StepTrial | None = None
    threshold_profile: ThresholdProfile | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)  # a plain word ("xtol") becomes its member

    @property
    def extras(self) -> dict[str, list[Any]]:
        """The API specification's per-iteration record: ``{"objective": [...],
        "candidate": [...]}`` (costs, and ``(p,)`` parameter vectors), from :attr:`history`."""
        return {
            "objective": list(self.history.objective),
            "candidate": list(self.history.candidate),
        }
