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
from pathlib import Path
from typing import TextIO

import numpy as np

from mjsysid.app.commands.common import EXIT_OK

NAME = "design"
HELP = "design a D-optimal excitation for an experiment (writes a command file)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment, the signal family, the duration, the limits and the output file."""
    parser.description = (
        "Design an excitation that maximises log det of the range-scaled JᵀJ at the "
        "nominal model (D-optimality), within ctrlrange and the joint limits; write it as a "
        "recording and compare its predicted intervals with a plain PRBS and multisine."
    )
    parser.add_argument("experiment", help="experiment YAML file, or example:NAME")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds (default 10)")
    parser.add_argument("--signal", choices=("multisine", "prbs"), default="multisine")
    parser.add_argument("--noise", type=float, default=0.01, help="sensor noise std")
    parser.add_argument("--max-velocity", type=float, default=None, help="|qvel| limit")
    parser.add_argument("--generations", type=int, default=10, help="search generations")
    parser.add_argument("--popsize", type=int, default=8, help="candidates per generation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", default="design.npz", help="command file (.npz or .csv)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Loads the experiment, designs, writes the command file, prints the comparison."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.data.recording import write_recording
    from mjsysid.fit.design import DesignProblem, design_excitation
    from mjsysid.sim.rollout import sysid_rollout

    exp = load_experiment(args.experiment)
    x0 = np.asarray(exp.sequences.initial_state[0], dtype=np.float64)
    problem = DesignProblem(
        exp.spec,
        exp.params,
        x0,
        args.duration,
        max_velocity=args.max_velocity,
        noise=args.noise,
    )
    design = design_excitation(
        problem,
        args.signal,
        generations=args.generations,
        popsize=args.popsize,
        seed=args.seed,
    )
    traj = sysid_rollout(problem.model, None, design.control, x0)[0]
    path = write_recording(
        Path(args.output),
        problem.model,
        design.times,
        design.control,
        np.asarray(traj.sensordata),
    )
    for line in design.lines():
        print(line, file=out)
    print(f"wrote {path}", file=out)
    return EXIT_OK
