"""Horizon stages: fitting on growing parts of the data, e.g. the first 10 %, 30 %, then all.

A short horizon costs less per evaluation and its cost landscape has fewer local minima (a
trajectory drifts less), so an early stage brings the fit near the solution cheaply
(see ``horizons`` of :func:`mjsysid.fit.optimize.optimize`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mjsysid.fit.checkpoints import History
from mjsysid.fit.jacobian import CountedResidual, ResidualFn
from mjsysid.fit.options import check_horizons
from mjsysid.fit.stage import Stage, StagePlan, StageSettings, fit_stage
from mjsysid.fit.status import Status
from mjsysid.objective.protocols import HorizonResidualFn
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

# horizons="auto": the early stages, each used only if every sequence keeps this many samples
AUTO_HORIZONS = (0.1, 0.3)
_AUTO_MIN_SAMPLES = 20
# An early stage whose data holds less than this share of the whole data's cost at its start
# is skipped: it barely sees the misfit (a push whose first part is the box at rest), so
# fitting it can only lead the fit astray.
UNINFORMATIVE = 1e-3


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
    checked = check_horizons(horizons)
    if checked is None:
        return (1.0,)
    if isinstance(checked, str):
        return _auto_horizons(residual_fn, optimizer, params)
    hs = list(checked)
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


def _auto_horizons(
    residual_fn: Any, optimizer: str, params: ParameterDict | None
) -> tuple[float, ...]:
    if (
        optimizer not in ("lm", "mujoco")
        or not isinstance(residual_fn, HorizonResidualFn)
        or not residual_fn.supports_horizons(params)
    ):
        return (1.0,)
    early = [
        h for h in AUTO_HORIZONS if min(residual_fn.horizon_samples(h, params)) >= _AUTO_MIN_SAMPLES
    ]
    return (*early, 1.0)


@dataclass
class StagedFit:
    """What :func:`run_stages` did: every stage (``stages[-1]`` on the whole data), the
    horizon the fit ended in (an early one if interrupted there), the whole data's
    residual counter (``None`` for one stage) and its cost at the start."""

    stages: list[Stage] = field(default_factory=list)
    stopped_in: float = 1.0
    full: CountedResidual | None = None
    initial_cost: float = float("nan")


def run_stages(
    residual_fn: ResidualFn,
    params: ParameterDict,
    x0: np.ndarray,
    s: StageSettings,
    horizons: Sequence[float],
    start_iter: int,
    earlier: History | None = None,
) -> StagedFit:
    """Fits stage after stage, each from where the previous one ended (the first after
    the ``earlier`` iterations of a checkpoint written in it).

    An early stage is skipped when its data hold less than :data:`UNINFORMATIVE` of the
    whole data's cost at its start; an interrupted early stage is followed by the residual
    and Jacobian on the whole data at its point (no fit).
    """
    # every head is made (and a too-short sequence reported) before anything is simulated
    heads = (
        [residual_fn.head(h) for h in horizons[:-1]]
        if isinstance(residual_fn, HorizonResidualFn)
        else []
    )
    fns: list[ResidualFn] = [*heads, residual_fn]
    fit = StagedFit(full=CountedResidual(residual_fn, params) if len(horizons) > 1 else None)
    if fit.full is not None:  # the result's initial cost, the first stage's yardstick
        r_start = fit.full(x0)
        fit.initial_cost = 0.5 * float(r_start @ r_start)
    x, it0 = x0, start_iter
    allow = s.options.allow_no_effect
    for k, h in enumerate(horizons):
        last = k == len(horizons) - 1
        # parameters without effect are looked for on the whole data: on a head a
        # parameter may have none yet (the part of the data that excites it comes later)
        seed = earlier if k == 0 else None
        plan = StagePlan(
            h, last, it0, ("warn" if allow else "error") if last else None, earlier=seed,
            start_cost=fit.initial_cost if fit.full is not None else None,
        )  # fmt: skip
        if not last:
            assert fit.full is not None
            r_here = fit.full(x)  # (remembered by CountedResidual when a stage ends where it began)
            skip = UNINFORMATIVE * 0.5 * float(r_here @ r_here)
            plan = StagePlan(h, last, it0, None, skip, earlier=seed)
        stage = fit_stage(fns[k], params, x, s, plan)
        fit.stages.append(stage)
        x, it0 = stage.x, 0 if last else it0 + stage.nit
        if stage.status == Status.INTERRUPTED and not last:
            fit.stopped_in = h
            fit.stages.append(_evaluate_whole(residual_fn, params, x, s))
            break
    return fit


def _evaluate_whole(
    residual_fn: ResidualFn, params: ParameterDict, x: np.ndarray, s: StageSettings
) -> Stage:
    """The whole data at ``x``, no fit: the end of a fit interrupted in an early stage."""
    final = StageSettings(
        s.options.replace(max_iters=0), s.lm_options, s.names, s.bounds, s.out, s.ckpt
    )
    end = fit_stage(residual_fn, params, x, final, StagePlan(1.0, True, 0, None))
    end.status = Status.INTERRUPTED
    return end
