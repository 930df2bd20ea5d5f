"""``mjsysid audit``: which parameters the experiment's data determine (fits nothing).

At the experiment's nominal parameters (the recorded commands), one batched finite-difference
Jacobian, column-scaled by the parameter ranges: the singular values and condition number,
per parameter its relative sensitivity, expected 95 % interval at the noise level and whether
it is determined, the weak combinations in words, and advice
(:func:`mjsysid.fit.audit.audit_residual`).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from mjsysid.app.commands.common import EXIT_OK, EXPERIMENT_HELP, describe, loading_progress

NAME = "audit"
HELP = "identifiability audit of an experiment at its nominal parameters (fits nothing)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment file, the noise level and the alpha."""
    describe(
        parser,
        (
            "Audit which parameters an experiment's data determine, at the nominal parameters: "
            "singular values, per-parameter sensitivity and expected intervals, the weak "
            "combinations (sums, products) in words, and what to freeze, tie or excite."
        ),
        experiment=EXPERIMENT_HELP,
    )
    parser.add_argument(
        "--noise",
        type=float,
        default=None,
        help="residual noise std (residual units; default: estimated from the recording)",
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="1 - alpha intervals")
    parser.add_argument(
        "--all",
        action="store_true",
        help="list every initial state (window start) too, not only their count",
    )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Loads the experiment, audits it, prints the audit."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.fit.audit import audit_residual

    exp = load_experiment(args.experiment, progress=loading_progress(err))
    for w in exp.warnings:
        print(f"warning: {w}", file=err)
    meas = exp.sequences.sensordata
    cols = int(meas[0].data.shape[1]) if isinstance(meas, list) and len(meas) == 1 else 1
    audit = audit_residual(
        exp.build_residual_fn(), exp.params, noise=args.noise, n_columns=cols, alpha=args.alpha
    )
    for line in audit.lines(every=args.all):
        print(line, file=out)
    return EXIT_OK
