"""``mjsysid check``: the doctor-style checks of an experiment file, without a fit.

It loads the experiment (every error, warning and note ``mjsysid fit`` would give), then
runs the timing check that ``mjsysid fit`` runs before it fits, with the same numbers
(:func:`~mjsysid.app.timing_check.timing_check`):

* the clock of every recording: jitter (a warning), rate changes and gaps (named, notes);
* command timing: quick fits on short windows with the commands as declared, one row
  earlier and one row later; a shift whose cost is far lower says the declared
  ``command_timing`` is one sample out of step;
* retime: for a jittering recording, a retime is tried only where it moves no row by more
  than 0.9 of a period and the clock has one rate, and suggested only if its quick fit is
  better.

Exit status (:data:`EXIT_CLEAN`, ...): 0 clean or notes only, 1 warnings, 2 errors (the
experiment does not load: bad keys, unreadable content, a damaged log; or a check fails;
argparse's usage errors also exit 2), 3 a file is missing or cannot be opened.
"""

from __future__ import annotations

import argparse
import warnings
from typing import TYPE_CHECKING, TextIO

from mjsysid.app.commands.common import EXPERIMENT_HELP, describe, loading_progress
from mjsysid.util.limits import check_count

if TYPE_CHECKING:
    from mjsysid.app.experiment import Experiment, ProgressFactory

NAME = "check"
HELP = "check an experiment file's data and timing (fits nothing)"

EXIT_CLEAN, EXIT_WARNINGS, EXIT_ERRORS, EXIT_UNREADABLE = 0, 1, 2, 3
"""``mjsysid check``'s exit status: clean (or notes only), warnings, errors, unreadable file."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment file and the options of the timing check."""
    describe(
        parser,
        (
            "Load an experiment file (or example:NAME), print its errors, warnings and notes and "
            "check the timing of its recordings (clock jitter, rate changes and gaps, commands "
            "one sample out of step, whether a retime helps) with the quick fits 'mjsysid fit' "
            "runs before fitting. Fits nothing. Exit status: 0 clean or notes only, 1 "
            "warnings, 2 errors (the experiment does not load, a check fails, or a usage "
            "error), 3 a file is missing or cannot be opened."
        ),
        experiment=EXPERIMENT_HELP,
    )
    parser.add_argument(
        "--no-shift-check",
        action="store_true",
        help="skip the timing check's quick fits (command shift and retime)",
    )
    parser.add_argument(
        "--shift-iters",
        type=int,
        default=None,
        help="iterations of each quick fit (default: the ones 'mjsysid fit' uses, 6)",
    )


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


def _timing(args: argparse.Namespace, exp: Experiment, out: TextIO) -> list[str]:
    """Runs the timing check; prints its numbers; returns its warnings."""
    from mjsysid.app.timing_check import ITERATIONS, timing_check

    iterations = ITERATIONS if args.shift_iters is None else args.shift_iters
    check = timing_check(exp, iterations=iterations)
    print(f"timing check: {check.describe()}", file=out)
    for r in check.retimes:
        state = (
            f"not tried: {r.refused}"
            if r.refused
            else f"cost {r.cost:.4g} against {r.declared:.4g} as logged"
        )
        print(f"retime of {r.sequence!r}: {state}", file=out)
    return check.messages()


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Loads the experiment, prints its messages and the timing check; fits nothing.
    Returns :data:`EXIT_CLEAN`, :data:`EXIT_WARNINGS`, :data:`EXIT_ERRORS` or
    :data:`EXIT_UNREADABLE`."""
    from mjsysid.app.experiment import resolve_experiment_path

    if args.shift_iters is not None:
        check_count("max_iterations", args.shift_iters, "--shift-iters")
    try:
        path = resolve_experiment_path(args.experiment)
    except ValueError as e:  # an unknown example
        print(f"error: {e}", file=err)
        return EXIT_UNREADABLE
    if not path.is_file():
        print(f"error: experiment {args.experiment!r} is not a readable file", file=err)
        return EXIT_UNREADABLE
    try:
        exp, found = load_with_timing_warnings(args.experiment, loading_progress(err))
    except OSError as e:
        print(f"error: {e}", file=err)
        return EXIT_UNREADABLE
    except (ValueError, KeyError, TypeError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=err)
        return EXIT_ERRORS
    for line in found:
        print(f"warning: {line}", file=err)
    for line in exp.notes:
        print(f"note: {line}", file=err)
    print(
        f"{exp.name}: {len(exp.sequences)} sequences, "
        f"{len(exp.params.get_non_frozen_parameter_names())} values to fit",
        file=out,
    )
    if not args.no_shift_check:
        try:
            timing = _timing(args, exp, out)
        except (ValueError, FloatingPointError) as e:
            print(f"error: the timing check failed: {e}", file=err)
            return EXIT_ERRORS
        for message in timing:
            print(f"warning: {message}", file=err)
        found += timing
    notes = f", {len(exp.notes)} note(s)" if exp.notes else ""
    print("ok" + notes if not found else f"{len(found)} warning(s){notes}", file=out)
    return EXIT_WARNINGS if found else EXIT_CLEAN
