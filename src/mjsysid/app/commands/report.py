"""``mjsysid report``: (re)write the HTML report of a results folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mjsysid.app.commands.common import (
    EXIT_ERROR,
    EXIT_OK,
    loading_progress,
    report_available,
    results_folder,
    write_report,
)
from mjsysid.util.files import read_yaml

if TYPE_CHECKING:
    from mjsysid.app.experiment import Experiment

NAME = "report"
HELP = "(re)write the HTML report of a results folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The results folder."""
    parser.add_argument("results", help="folder written by 'mjsysid fit'")


def changed_inputs(run_info: dict[str, Any], exp: Experiment) -> list[str]:
    """The input files whose fingerprint differs from the one recorded when the fit ran.

    Results of older versions recorded no fingerprints; nothing counts as changed for them.
    """
    then, now = run_info.get("inputs"), exp.fingerprints()
    if not isinstance(then, dict):
        return []
    return sorted(f for f in set(then) | set(now) if then.get(f) != now.get(f))


def _demo_report(folder: Path, results: Any, quick: bool, err: TextIO) -> int:
    """The report of a folder written by ``mjsysid demo`` (its data are recorded again: the
    demo's excitation run is deterministic)."""
    from mjsysid.app.demo import demo_problem

    if not report_available():
        print("error: the report needs the report extra: pip install 'mjsysid[report]'", file=err)
        return EXIT_ERROR
    problem = demo_problem(quick)
    with results_folder(folder, err):
        write_report(
            problem.seq,
            results.initial_params,
            results.opt_params,
            results.result,
            problem.rf,
            folder,
            err,
            confidence=results.confidence,
        )
    return EXIT_OK


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Rebuilds the fit's experiment and writes the report into the results folder."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.output.results import load_results

    folder = Path(args.results)
    results = load_results(folder)
    run_file = folder / "run.yaml"
    if not run_file.is_file():
        print(
            f"error: {str(run_file)!r} is missing; 'mjsysid report' needs a folder written by "
            "'mjsysid fit'",
            file=err,
        )
        return EXIT_ERROR
    run_info = read_yaml(run_file)
    if isinstance(run_info, dict) and isinstance(run_info.get("demo"), dict):
        return _demo_report(folder, results, bool(run_info["demo"].get("quick")), err)
    exp = load_experiment(run_info["experiment"], progress=loading_progress(err))
    changed = changed_inputs(run_info, exp)
    if changed:
        print(
            f"error: the inputs of this fit changed since it ran: {changed}; the report "
            "would show other data or parameters than were fitted: run 'mjsysid fit' "
            "again (or restore those files)",
            file=err,
        )
        return EXIT_ERROR
    rf = exp.build_residual_fn()
    params = exp.params
    params.load_values(folder / "params_x_0.yaml", strict=False)
    opt_params = params.copy()
    opt_params.load_values(folder / "params_x_hat.yaml", strict=False)
    if not report_available():
        print("error: the report needs the report extra: pip install 'mjsysid[report]'", file=err)
        return EXIT_ERROR
    with results_folder(folder, err):
        write_report(
            exp.sequences,
            params,
            opt_params,
            results.result,
            rf,
            folder,
            err,
            confidence=results.confidence,  # the saved intervals: as confidence.yaml says
            validation=_validation(exp, rf, params, opt_params),
        )
    return EXIT_OK


def _validation(exp: Experiment, rf: Any, params: Any, opt_params: Any) -> Any:
    """The validation table of the fit (fitted and held-out sequences), computed again."""
    from mjsysid.output.validation import validation_table

    hold_rf = exp.build_holdout_residual_fn()
    try:
        return validation_table(params, opt_params, rf, hold_rf)
    finally:
        if hold_rf is not None:
            hold_rf.close()
