"""The timing check of an experiment: ``mjsysid check`` and ``mjsysid fit`` run this one.

Two questions, answered by quick fits of the physical parameters on short windows:

1. **Command timing.** Is every command one row out of step? The commands (and the force
   laws' recorded inputs, which are commands too) are moved one row earlier and one row later
   than declared, and the three versions are fitted. The declaration is respected: after
   ``command_timing: before`` one row earlier still is not tried (:func:`plausible_shifts`).
   The windows are :data:`WINDOW_ROWS` rows long, each started from the recorded state at
   its first row (:func:`split_windows`), so the check does not depend on the experiment's
   own windows or horizon, and a one-row shift shows in every window instead of being
   absorbed by a drifting open-loop run. At most :data:`MAX_WINDOWS` windows, spread evenly
   over the recordings, are fitted: seconds. The initial-state parameters of the experiment
   (its shooting windows) are left out: every window starts from its measured state; the
   starts no sensor shows are fitted per window (activations of filter actuators, velocities
   that are not measured; :func:`physics_params`).
2. **Retime.** For a recording whose stamps jitter, is a regular grid better? Only a retime
   that :func:`~mjsysid.data.clock.retime_plan` allows (one rate, no row moved by more than
   :data:`~mjsysid.data.clock.RETIME_MAX_MOVE` periods) is tried, and it is suggested only if
   its quick fit ends below :data:`SHIFT_RATIO` times the cost of the stamps as logged.

A shift is reported when its cost is below :data:`SHIFT_RATIO` times the declared one's: a
one-row error leaves the declared timing's cost several times the right one's on short
windows, while noise, and parameters still off after the quick fits, move the costs less.
The physical parameters are first fitted with the timing as declared
(:data:`WARM_ITERATIONS`); every timing's fit starts from there (:data:`ITERATIONS`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

from mjsysid.data.clock import retime_plan
from mjsysid.data.recording import initial_state_from_sensors
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import state_slices
from mjsysid.data.timeseries import TimeSeries
from mjsysid.data.timing import jitter_stats
from mjsysid.objective.initial_state import (
    INITIAL_KINDS,
    LAW_STATE_KIND,
    initial_state_params,
    law_state_params,
)
from mjsysid.objective.windows import split_windows
from mjsysid.params.parameter import ParameterDict

if TYPE_CHECKING:
    from mjsysid.app.experiment import Experiment

__all__ = [
    "ITERATIONS",
    "MAX_WINDOWS",
    "SHIFT_RATIO",
    "WARM_ITERATIONS",
    "WINDOW_ROWS",
    "RetimeCheck",
    "TimingCheck",
    "plausible_shifts",
    "shift_rows",
    "timing_check",
]

WINDOW_ROWS = 12
"""Rows per window of the check."""

MAX_WINDOWS = 48
"""At most this many windows are fitted (spread evenly)."""

WARM_ITERATIONS = 6
"""Iterations of the first quick fit, with the timing as declared: its parameters start the
fits of every timing (so that a shift does not stand in for parameters still far off)."""

ITERATIONS = 4
"""Iterations of each timing's quick fit, from the first fit's parameters."""

SHIFT_RATIO = 0.7
"""A shift (or a retime) is reported when its cost is below this fraction of the declared
timing's: a one-row error leaves the declared timing's cost from 1.6 times (where a filter
actuator's lag absorbs part of it) to many times the right one's (the measured cases are in
docs/timing.md)."""


@dataclass(frozen=True)
class RetimeCheck:
    """A retime of one recording, tried.

    Attributes:
      sequence: The recording's name.
      period: The grid period (s).
      max_move: The largest row move (s).
      cost: The quick fit's cost with the recording retimed (the others as logged).
      declared: The cost with the stamps as logged.
      refused: Why the retime was not tried (then ``cost`` is ``nan``).
    """

    sequence: str
    period: float
    max_move: float
    cost: float
    declared: float
    refused: str = ""

    @property
    def helps(self) -> bool:
        """Whether the retime fits markedly better (below :data:`SHIFT_RATIO`)."""
        return not self.refused and self.cost < SHIFT_RATIO * self.declared

    def message(self) -> str:
        """The suggestion (empty unless :attr:`helps`)."""
        if not self.helps:
            return ""
        return (
            f"clock of {self.sequence!r}: with its rows retimed onto a {self.period * 1e3:.4g} ms "
            f"grid (largest row move {self.max_move * 1e3:.3g} ms) a quick fit reaches "
            f"{self.cost / self.declared:.3g} times the cost of the stamps as logged "
            f"({self.cost:.4g} against {self.declared:.4g}). Fix: retime: {self.period:.6g} on "
            "that sequence"
        )


@dataclass(frozen=True)
class TimingCheck:
    """The costs of quick fits with the commands shifted by whole rows.

    Attributes:
      costs: ``{shift: cost}`` for shifts ``-1`` (one row earlier than declared), ``0``
        (as declared) and ``+1`` (one row later).
      iterations: Iterations of each quick fit.
      windows: Windows fitted (``0``: the sequences themselves, no window could be cut).
      rows: Rows per window.
      retimes: The retimes tried or refused, one per jittering recording.
    """

    costs: dict[int, float]
    iterations: int
    windows: int
    rows: int = WINDOW_ROWS
    retimes: tuple[RetimeCheck, ...] = ()

    @property
    def best(self) -> int:
        """The shift with the lowest cost (0 when no shift was tried)."""
        return min(self.costs, key=lambda s: self.costs[s]) if self.costs else 0

    @property
    def ratio(self) -> float:
        """The best cost over the declared one (1 when the declared one is best)."""
        declared = self.costs.get(0, 0.0)
        return self.costs[self.best] / declared if declared > 0 else 1.0

    def describe(self) -> str:
        """``cost by row shift -1: 12.3, +0: 1.2, +1: 15.6 (6 iterations on 48 windows of 12
        rows)``."""
        if len(self.costs) < 2:
            return "no commands to shift" if not self.costs else f"cost {self.costs[0]:.4g}"
        costs = ", ".join(f"{s:+d}: {c:.4g}" for s, c in sorted(self.costs.items()))
        on = (
            f"{self.windows} windows of {self.rows} rows, each from its recorded state"
            if self.windows
            else "the sequences as declared"
        )
        return (
            f"cost by row shift {costs} ({WARM_ITERATIONS} iterations as declared, then "
            f"{self.iterations} for each timing, on {on})"
        )

    def message(self, ratio: float = SHIFT_RATIO) -> str:
        """A warning when a shift fits markedly better (``ratio`` or less), else empty."""
        if self.best == 0 or self.ratio > ratio:
            return ""
        if self.best == -1:
            fix = (
                "the commands acted one row earlier than declared: with command_timing held "
                "(the default), declare command_timing: before (row k holds the command applied "
                "before sample k)"
            )
        else:
            fix = (
                "the commands acted one row later than declared: if command_timing: before is "
                "declared, remove it; otherwise declare command_timing: <one sample period in "
                "s> (the rig delays them)"
            )
        return (
            f"command timing: with the commands one row {'earlier' if self.best < 0 else 'later'}"
            f" a quick fit reaches {self.ratio:.3g} times the cost of the declared timing "
            f"({self.describe()}). Fix: {fix}"
        )

    def messages(self) -> list[str]:
        """Every warning of the check (the command timing's, then the retimes')."""
        found = [self.message(), *(r.message() for r in self.retimes)]
        return [m for m in found if m]


def plausible_shifts(declared: dict[str, Any]) -> tuple[int, ...]:
    """The row shifts worth trying given the declared ``command_timing`` of every sequence:
    ``0``, ``+1`` and ``-1``, except ``-1`` where any sequence declares ``before`` (its
    commands then act two rows before their sample: no loop logs them that way, while a lag
    parameter still far from its value can make it look better)."""
    before = any(v == "before" for v in declared.values())
    return (0, 1) if before else (0, -1, 1)


def shift_rows(series: TimeSeries | None, shift: int) -> TimeSeries | None:
    """``series`` with its rows moved ``shift`` (``-1``, ``0``, ``+1``) rows later, the edge
    row held (``-1``: row ``k`` gets row ``k+1``'s values)."""
    if series is None or shift == 0:
        return series
    d = np.asarray(series.data)
    data = np.concatenate([d[1:], d[-1:]]) if shift < 0 else np.concatenate([d[:1], d[:-1]])
    return TimeSeries(series.times, data, series.signal_mapping)


def _rebuilt(ms: ModelSequences, rows: list[int], **lists: list[Any]) -> ModelSequences:
    """The sequences ``rows`` of ``ms`` as a new :class:`ModelSequences`; ``lists`` replace
    whole per-sequence lists (``control``, ``sensordata``, ``inputs``, ``initial_state``)."""
    assert isinstance(ms.control, list) and isinstance(ms.sensordata, list)
    assert isinstance(ms.initial_state, list) and isinstance(ms.sequence_name, list)
    assert isinstance(ms.inputs, list) and isinstance(ms.constants, list)
    full: dict[str, list[Any]] = {
        "initial_state": list(ms.initial_state),
        "control": list(ms.control),
        "sensordata": list(ms.sensordata),
        "inputs": list(ms.inputs),
    }
    full.update(lists)
    refs = ms.rms_reference
    return ModelSequences(
        ms.name,
        ms.spec,
        [ms.sequence_name[i] for i in rows],
        [full["initial_state"][i] for i in rows],
        [full["control"][i] for i in rows],
        [full["sensordata"][i] for i in rows],
        rms_reference=None if refs is None else [refs[i] for i in rows],
        inputs=[full["inputs"][i] for i in rows],
        constants=[ms.constants[i] for i in rows],
    )


def _windows(ms: ModelSequences, rows: int, max_windows: int) -> tuple[ModelSequences, int]:
    """Windows of ``rows`` rows from the recorded states, at most ``max_windows`` spread
    evenly; ``(ms, 0)`` when a window start cannot be read from the data."""
    period = float(np.median(np.concatenate([np.diff(m.times) for _, _, _, m in ms.sequences()])))
    try:
        cut = split_windows(ms, rows * period, min_samples=max(3, rows // 2))
    except (KeyError, ValueError):
        return ms, 0
    n = len(cut.sequence_name)
    keep = sorted({int(i) for i in np.linspace(0, n - 1, min(n, max_windows)).round()})
    return _rebuilt(cut, keep), len(keep)


def physics_params(
    params: ParameterDict,
    windows: ModelSequences | None = None,
    laws: Sequence[Any] = (),
) -> ParameterDict:
    """``params`` without the initial-state parameters (every window starts from its data),
    plus, with ``windows``, the window starts that no sensor shows: the activations of
    filter or integrator actuators (the nominal simulation that :func:`split_windows` reads
    them from would bias the check: a one-row shift of the commands stands in for a wrong
    start activation) and the velocities of hinge and slide joints whose velocity is not
    measured (a local fit to encoder steps is noisy enough to hide a one-row shift), and the
    force ``laws``' internal states where the experiment estimates them at its starts."""
    out = ParameterDict()
    for p in params.values():
        if p.meta.get("kind") not in INITIAL_KINDS:
            out.add(p.copy())
    if windows is None:
        return out
    model = windows.model
    unmeasured = _unmeasured_velocities(windows)
    if unmeasured:
        out.update(initial_state_params(windows, joints=unmeasured, qpos=False, act=False))
    if model.na:
        out.update(initial_state_params(windows, qpos=False, qvel=False, act=True))
    margins = _law_state_margins(params)
    if margins and laws:
        out.update(law_state_params(windows, laws, out, margins))
    return out


def _law_state_margins(params: ParameterDict) -> dict[str, dict[str, float]]:
    """``{law: {state: margin}}`` of the force laws' states the experiment estimates at its
    starts (``force_laws[i].estimate_states``), read back from their parameters' bounds."""
    out: dict[str, dict[str, float]] = {}
    for p in params.values():
        if p.meta.get("kind") == LAW_STATE_KIND:
            half = float(np.max(np.asarray(p.max_value) - np.asarray(p.min_value))) / 2
            law, state = str(p.meta["law"]), str(p.meta["state"])
            out.setdefault(law, {})[state] = max(out.get(law, {}).get(state, 0.0), half)
    return out


def _unmeasured_velocities(ms: ModelSequences) -> list[str]:
    """Hinge and slide joints whose velocity the first recording does not measure."""
    model = ms.model
    _qpos, qvel = initial_state_from_sensors(model, ms.sequences()[0][3], fill=np.nan)
    scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [
        model.joint(j).name
        for j in range(model.njnt)
        if int(model.jnt_type[j]) in scalar and np.isnan(qvel[model.jnt_dofadr[j]])
    ]


def _quick_fit(
    exp: Experiment, ms: ModelSequences, params: ParameterDict, iters: int
) -> tuple[ParameterDict, float]:
    """The parameters and cost after ``iters`` Levenberg-Marquardt iterations on ``ms``
    (built like the experiment's residual)."""
    from mjsysid.fit.optimize import optimize

    rf = exp.build_holdout_residual_fn(ms)
    assert rf is not None
    quiet = logging.getLogger("mjsysid.fit")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # (a window start without effect: the check's, not the user's)
    try:
        if not params.get_non_frozen_parameter_names():  # nothing to fit: the cost as it is
            return params, 0.5 * float(np.sum(np.square(rf(params.as_vector(), params))))
        fitted, result = optimize(  # (a quick fit: no deadzone profile after it)
            params, rf, optimizer="lm", max_iters=iters, horizons=None, allow_no_effect=True,
            threshold_profile=None,
        )  # fmt: skip
    finally:
        quiet.setLevel(level)
        rf.close()
    return fitted, float(result.cost)


def _quick_cost(exp: Experiment, ms: ModelSequences, params: ParameterDict, iters: int) -> float:
    """The cost of :func:`_quick_fit`."""
    return _quick_fit(exp, ms, params, iters)[1]


def _shifted(ms: ModelSequences, shift: int) -> ModelSequences:
    """``ms`` with its controls and recorded inputs moved ``shift`` rows."""
    assert isinstance(ms.control, list) and isinstance(ms.inputs, list)
    return dataclasses.replace(
        ms,
        control=[shift_rows(c, shift) for c in ms.control],
        inputs=[shift_rows(u, shift) for u in ms.inputs],
    )


def _moved(series: TimeSeries | None, old: np.ndarray, new: np.ndarray) -> TimeSeries | None:
    """``series`` with its times mapped by the retime ``old -> new`` (offsets interpolated,
    held beyond the ends)."""
    if series is None:
        return None
    t = np.asarray(series.times)
    return TimeSeries(t + np.interp(t, old, new - old), series.data, series.signal_mapping)


def _retimed(ms: ModelSequences, i: int, old: np.ndarray, new: np.ndarray) -> ModelSequences:
    """``ms`` with sequence ``i`` retimed (its sensors, controls, inputs and start time)."""
    assert isinstance(ms.control, list) and isinstance(ms.sensordata, list)
    assert isinstance(ms.inputs, list) and isinstance(ms.initial_state, list)
    ctrl, sens, inputs, x0 = (
        list(ms.control),
        list(ms.sensordata),
        list(ms.inputs),
        [x.copy() for x in ms.initial_state],
    )
    ctrl[i], inputs[i] = _moved(ctrl[i], old, new), _moved(inputs[i], old, new)
    moved = _moved(sens[i], old, new)
    assert moved is not None
    sens[i] = moved
    x0[i][state_slices(ms.model)["time"]] = moved.times[0]
    return _rebuilt(ms, list(range(len(sens))), control=ctrl, sensordata=sens, inputs=inputs,
                    initial_state=x0)  # fmt: skip


def _retime_checks(
    exp: Experiment, declared: float, rows: int, max_windows: int, iters: int
) -> tuple[RetimeCheck, ...]:
    """A :class:`RetimeCheck` per recording whose stamps jitter beyond 2 % of the step."""
    ms = exp.sequences
    out = []
    for i, (name, _x0, _c, meas) in enumerate(ms.sequences()):
        t = np.asarray(meas.times)
        if t.size < 3 or not jitter_stats(t).jittery:
            continue
        plan = retime_plan(t)
        if plan.refused or plan.times is None:
            out.append(
                RetimeCheck(name, plan.period, plan.max_move, np.nan, declared, plan.refused)
            )
            continue
        windows, n = _windows(_retimed(ms, i, t, plan.times), rows, max_windows)
        laws = exp.residual_options.get("force_laws") or ()
        params = physics_params(exp.params, windows if n else None, laws)
        cost = _quick_cost(exp, windows, params, iters)
        out.append(RetimeCheck(name, plan.period, plan.max_move, cost, declared))
    return tuple(out)


def timing_check(
    exp: Experiment,
    *,
    rows: int = WINDOW_ROWS,
    max_windows: int = MAX_WINDOWS,
    iterations: int = ITERATIONS,
    retime: bool = True,
) -> TimingCheck:
    """The command-timing and retime check of ``exp`` (see the module docstring).

    Args:
      exp: The loaded experiment (its sequences as declared: command timing applied).
      rows: Rows per window. max_windows: Windows fitted at most.
      iterations: Iterations of each quick fit.
      retime: Whether to try retiming the jittering recordings.
    """
    commands = bool(exp.model.nu) or any(u is not None for u in _inputs(exp.sequences))
    jitter = any(
        len(m) > 2 and jitter_stats(np.asarray(m.times)).jittery
        for _, _, _, m in exp.sequences.sequences()
    )
    if not (commands or (retime and jitter)):
        return TimingCheck({}, iterations, 0, rows)
    windows, n = _windows(exp.sequences, rows, max_windows)
    laws = exp.residual_options.get("force_laws") or ()
    params = physics_params(exp.params, windows if n else None, laws)
    # first the declared timing (the parameters near their values), then every timing from there
    warm, _cost = _quick_fit(exp, windows, params, WARM_ITERATIONS)
    costs: dict[int, float] = {}
    for shift in plausible_shifts(exp.command_timing) if commands else (0,):
        costs[shift] = _quick_cost(exp, _shifted(windows, shift), warm, iterations)
    total = WARM_ITERATIONS + iterations  # (a retimed recording: as many in one fit)
    retimes = _retime_checks(exp, costs[0], rows, max_windows, total) if retime else ()
    return TimingCheck(costs, iterations, n, rows, retimes)


def _inputs(ms: ModelSequences) -> list[TimeSeries | None]:
    assert isinstance(ms.inputs, list)
    return list(ms.inputs)
