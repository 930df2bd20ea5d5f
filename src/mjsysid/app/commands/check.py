"""``mjsysid check``: the doctor-style checks of an experiment file, without a fit.

It loads the experiment (every error and warning ``mjsysid fit`` would give), then checks the
timing of the data:

* clock jitter: a recording whose time steps spread beyond ``jitter_tolerance`` (a
  :class:`~mjsysid.data.timing.TimingWarning` with the numbers and the fixes);
* command timing: a few iterations of the fit with the commands as declared, one row earlier
  and one row later (:func:`command_shift_check`); a shift whose cost is far lower says the
  declared ``command_timing`` is one sample out of step.

Exit status: 0 when nothing was found, 1 when any warning was printed (a check failed, or the
experiment loader warned) or the experiment does not load.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

import numpy as np

from mjsysid.app.commands.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXPERIMENT_HELP,
    describe,
    loading_progress,
)
from mjsysid.util.limits import check_count

if TYPE_CHECKING:
    from mjsysid.app.experiment import Experiment, ProgressFactory
    from mjsysid.data.timeseries import TimeSeries

NAME = "check"
HELP = "check an experiment file's data and timing (fits nothing)"

SHIFT_RATIO = 0.5
"""A shifted cost below this fraction of the declared one is reported."""

QUICK_ITERS = 3
QUICK_FRACTION = 0.3
"""The cheap check ``mjsysid fit`` runs before its fit (:func:`quick_shift_check`): this many
iterations on this first fraction of every sequence. On the bundled examples it costs well
under 2 s (about 0.7 s on dcmotor, 0.2 s on arm) and still finds a one-row shift of the
commands (shifted cost 0.04-0.4 times the declared one) without a false alarm on the right
timing (declared cost lowest)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment file and the options of the shift check."""
    describe(
        parser,
        (
            "Load an experiment file (or example:NAME), print its warnings and check the timing "
            "of its recordings (clock jitter, commands one sample out of step). Fits nothing. "
            "Exit status 0 when clean, 1 when a check failed."
        ),
        experiment=EXPERIMENT_HELP,
    )
    parser.add_argument(
        "--no-shift-check", action="store_true", help="skip the command-shift check"
    )
    parser.add_argument(
        "--shift-iters",
        type=int,
        default=10,
        help="iterations of each quick fit of the shift check (default 10)",
    )


@dataclass(frozen=True)
class ShiftCheck:
    """The costs of quick fits with the commands shifted by whole rows.

    Attributes:
      costs: ``{shift: cost}`` for shifts ``-1`` (one row earlier: ``command_timing:
        before`` relative to the declared timing), ``0`` (as declared), ``+1`` (one later).
      iterations: Iterations of each quick fit.
      fraction: The first fraction of every sequence they fitted (1: all of it).
    """

    costs: dict[int, float]
    iterations: int
    fraction: float = 1.0

    @property
    def best(self) -> int:
        """The shift with the lowest cost."""
        return min(self.costs, key=lambda s: self.costs[s])

    @property
    def ratio(self) -> float:
        """The best cost over the declared one (1 when the declared one is best)."""
        declared = self.costs[0]
        return self.costs[self.best] / declared if declared > 0 else 1.0

    def message(self, ratio: float = SHIFT_RATIO) -> str:
        """A warning when a shift fits markedly better (``ratio`` or less), else empty."""
        if self.best == 0 or self.ratio > ratio:
            return ""
        fix = (
            "command_timing: before (row k holds the command applied before sample k)"
            if self.best == -1
            else "commands one row later: row k's command acted from sample k+1 "
            "(command_timing: <latency> with one sample period, if the rig delays them)"
        )
        costs = ", ".join(f"{s:+d}: {c:.4g}" for s, c in sorted(self.costs.items()))
        part = (
            "" if self.fraction >= 1.0 else f" on the first {100 * self.fraction:g} % of the data"
        )
        return (
            f"command timing: with the commands one row {'earlier' if self.best < 0 else 'later'}"
            f" a quick fit ({self.iterations} iterations{part}) reaches {self.ratio:.3g} times the "
            f"cost of the declared timing (costs by shift {costs}): the commands are probably "
            f"one sample out of step. Fix: {fix}"
        )


def _shift_rows(control: TimeSeries | None, shift: int) -> TimeSeries | None:
    """``control`` with its rows moved ``shift`` rows later (edge row held)."""
    if control is None or shift == 0:
        return control
    from mjsysid.data.timeseries import TimeSeries

    d = np.asarray(control.data)
    data = np.concatenate([d[1:], d[-1:]]) if shift < 0 else np.concatenate([d[:1], d[:-1]])
    return TimeSeries(control.times, data, control.signal_mapping)


def command_shift_check(exp: Experiment, iterations: int = 10, fraction: float = 1.0) -> ShiftCheck:
    """Quick fits of ``exp`` with its commands as declared and moved one row either way.

    Each fit starts from the experiment's initial parameters and runs ``iterations``
    iterations in one stage, on the first ``fraction`` of every sequence where the residual
    supports horizons (else on all of it); the costs are compared (a one-sample timing error
    usually leaves a cost many times the right timing's). Too few iterations on the whole
    data can mislead: a shift can stand in for a lag the unconverged fit has not found yet
    (the bundled dcmotor example needs about 10 there; 3 on its first 30 % suffice).
    """
    from mjsysid.fit.optimize import optimize

    seqs = exp.sequences
    costs: dict[int, float] = {}
    for shift in (0, -1, 1):
        assert isinstance(seqs.control, list)
        shifted = dataclasses.replace(seqs, control=[_shift_rows(c, shift) for c in seqs.control])
        rf = dataclasses.replace(exp, sequences=shifted).build_residual_fn()
        try:
            part = fraction < 1.0 and rf.supports_horizons(exp.params)
            fn = rf.head(fraction) if part else rf
            _opt, result = optimize(
                exp.params, fn, optimizer="lm", max_iters=iterations, horizons=None
            )
        finally:
            rf.close()
        costs[shift] = float(result.cost)
    return ShiftCheck(costs, iterations, fraction)


def quick_shift_check(exp: Experiment) -> ShiftCheck:
    """The cheap :func:`command_shift_check` ``mjsysid fit`` runs before fitting
    (:data:`QUICK_ITERS` iterations on the first :data:`QUICK_FRACTION` of the data)."""
    return command_shift_check(exp, QUICK_ITERS, QUICK_FRACTION)


def load_with_timing_warnings(
    path: str, progress: ProgressFactory | None = None
) -> tuple[Experiment, list[str]]:
    """The experiment and every warning of loading it (its own and the TimingWarnings);
    ``progress``: :func:`~mjsysid.app.experiment.load_experiment`'s."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.data.timing import TimingWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TimingWarning)
        exp = load_experiment(path, progress=progress)
    timing = [str(w.message) for w in caught if issubclass(w.category, TimingWarning)]
    for w in caught:
        if not issubclass(w.category, TimingWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return exp, list(exp.warnings) + timing


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Loads the experiment, prints its warnings and the timing checks; fits nothing."""
    check_count("max_iterations", args.shift_iters, "--shift-iters")
    exp, found = load_with_timing_warnings(args.experiment, loading_progress(err))
    for line in found:
        print(f"warning: {line}", file=err)
    print(
        f"{exp.name}: {len(exp.sequences)} sequences, "
        f"{len(exp.params.get_non_frozen_parameter_names())} values to fit",
        file=out,
    )
    if not args.no_shift_check and exp.model.nu:
        check = command_shift_check(exp, args.shift_iters)
        costs = ", ".join(f"{s:+d}: {c:.4g}" for s, c in sorted(check.costs.items()))
        print(f"command shift check (cost by row shift): {costs}", file=out)
        message = check.message()
        if message:
            print(f"warning: {message}", file=err)
            found.append(message)
    print("ok" if not found else f"{len(found)} warning(s)", file=out)
    return EXIT_OK if not found else EXIT_ERROR
