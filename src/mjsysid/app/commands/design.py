"""``mjsysid design``: a D-optimal excitation for an experiment's parameters.

At the nominal parameters and the first sequence's start state, the excitation's free
parameters (multisine amplitudes, band and phases; or PRBS amplitudes and hold times) are
chosen to maximise log det of the range-scaled ``JᵀJ`` within ``ctrlrange`` and the joint
range and velocity limits (:func:`mjsysid.fit.design.design_excitation`). The commands are
written in the recording format (with the nominal model's sensors), and the predicted
intervals are printed next to a plain PRBS and multisine of the same duration and amplitude.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TextIO

import numpy as np

from mjsysid.app.commands.common import EXIT_OK, EXPERIMENT_HELP, describe
from mjsysid.util.errors import must_be
from mjsysid.util.limits import check_count, check_limit, check_positive

NAME = "design"
HELP = "design a D-optimal excitation for an experiment (writes a command file)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment, the signal family, the duration, the limits and the output file."""
    describe(
        parser,
        (
            "Design an excitation that maximises log det of the range-scaled JᵀJ at the "
            "nominal model (D-optimality), within ctrlrange and the joint limits; write it as a "
            "recording and compare its predicted intervals with a plain PRBS and multisine."
        ),
        experiment=EXPERIMENT_HELP,
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds (default 10)")
    parser.add_argument("--signal", choices=("multisine", "prbs"), default="multisine")
    parser.add_argument("--noise", type=float, default=0.01, help="sensor noise std")
    parser.add_argument("--max-velocity", type=float, default=None, help="|qvel| limit")
    parser.add_argument("--generations", type=int, default=10, help="search generations")
    parser.add_argument("--popsize", type=int, default=8, help="candidates per generation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "-o",
        "--out",
        "--output",
        dest="out",
        default="design.npz",
        help="command file (.npz or .csv)",
    )


def check_args(args: argparse.Namespace) -> None:
    """Rejects bad numbers before anything is loaded: the duration, the search budget (each
    candidate is ``p + 1`` rollouts of ``--duration``), the noise and velocity limit."""
    check_positive("max_duration_s", args.duration, "--duration")
    check_count("max_candidates", args.popsize, "--popsize", minimum=4)  # design.MIN_POPSIZE
    check_count("max_iterations", args.generations, "--generations")
    if not (math.isfinite(args.noise) and args.noise >= 0):
        raise ValueError(must_be("--noise", "a finite sensor noise std >= 0", args.noise))
    if args.max_velocity is not None and not (
        math.isfinite(args.max_velocity) and args.max_velocity > 0
    ):
        raise ValueError(must_be("--max-velocity", "a finite |qvel| limit > 0", args.max_velocity))
    if args.seed < 0:
        raise ValueError(must_be("--seed", "an integer >= 0", args.seed))
    if Path(args.out).suffix.lower() not in (".npz", ".csv"):
        raise ValueError(must_be("--out", "a .npz or .csv file name", args.out))


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Loads the experiment, designs, writes the command file, prints the comparison."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.data.recording import write_recording
    from mjsysid.fit.design import DesignProblem, design_excitation, nominal_run
    from mjsysid.objective.initial_state import INITIAL_KINDS
    from mjsysid.params.parameter import ParameterDict

    check_args(args)
    exp = load_experiment(args.experiment)
    if exp.model.nu == 0:
        laws = [law.name for law in exp.residual_options.get("force_laws", ())]
        through = f" (through the force laws {laws} and their recorded inputs)" if laws else ""
        raise ValueError(
            f"mjsysid design shapes the commands of the model's actuators, and the model of "
            f"{args.experiment!r} has none: its joints are driven otherwise{through}; excite "
            "them with a signal of your own (mjsysid.data.excitation: chirp, multisine, prbs)"
        )
    dt = exp.model.opt.timestep
    check_limit(
        "max_steps", args.duration / dt, f"--duration {args.duration:g} s at timestep {dt:g} s"
    )
    x0 = np.asarray(exp.sequences.initial_state[0], dtype=np.float64)
    # the recordings' window starts are no parameters of a new excitation (its runs start
    # from the first recording's start): the design is about the physics
    physics = ParameterDict(
        [p for p in exp.params.values() if p.meta.get("kind") not in INITIAL_KINDS]
    )
    if len(physics) < len(exp.params):
        print(
            f"design: the {len(exp.params) - len(physics)} initial-state parameters of the "
            "recorded windows are left out (the design's runs start from the first "
            "recording's start)",
            file=err,
        )
    problem = DesignProblem(
        exp.spec,
        physics,
        x0,
        args.duration,
        max_velocity=args.max_velocity,
        noise=args.noise,
        force_laws=tuple(exp.residual_options.get("force_laws", ())),
        control_transform=exp.residual_options.get("control_transform"),
    )
    design = design_excitation(
        problem,
        args.signal,
        generations=args.generations,
        popsize=args.popsize,
        seed=args.seed,
    )
    _, sensors, _ = nominal_run(problem, [design.control], x0)  # (with the experiment's laws)
    path = write_recording(
        Path(args.out),
        problem.model,
        design.times,
        design.control,
        np.asarray(sensors[0].data),
    )
    for line in design.lines():
        print(line, file=out)
    print(f"wrote {path}", file=out)
    return EXIT_OK
