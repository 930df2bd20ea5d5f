"""``mjsysid report``: (re)write the HTML report of a results folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mjsysid.app.commands.common import (
    EXIT_ERROR,
    EXIT_OK,
    add_no_videos,
    describe,
    loading_progress,
    read_run_info,
    report_available,
    results_folder,
    write_report,
)
from mjsysid.util.results_files import PARAMS_X0, PARAMS_X_HAT

if TYPE_CHECKING:
    from mjsysid.app.experiment import Experiment

NAME = "report"
HELP = "(re)write the HTML report of a results folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The results folder."""
    describe(
        parser,
        "Write report.html again for a results folder of 'mjsysid fit' (the fit is rebuilt "
        "from its run.yaml; its input files must not have changed since).",
    )
    parser.add_argument("results", help="folder written by 'mjsysid fit'")
    add_no_videos(parser)
    parser.add_argument(
        "--standalone",
        action="store_true",
        help="copy plotly.js into the folder, so the report opens on another machine "
        "(by default it reads the installed plotly package's copy)",
    )


def changed_inputs(run_info: dict[str, Any], exp: Experiment) -> list[str]:
    """The input files whose fingerprint differs from the one recorded when the fit ran.

    Results of older versions recorded no fingerprints; nothing counts as changed for them.
    """
    then, now = run_info.get("inputs"), exp.fingerprints()
    if not isinstance(then, dict):
        return []
    return sorted(f for f in set(then) | set(now) if then.get(f) != now.get(f))


def _report_options(args: argparse.Namespace) -> dict[str, Any]:
    """The report's keywords from ``--no-videos`` and ``--standalone``."""
    return {
        "videos": not args.no_videos,
        "plotly_js": "copy" if args.standalone else "shared",
    }


def _demo_report(
    folder: Path, results: Any, quick: bool, err: TextIO, options: dict[str, Any]
) -> int:
    """The report of a folder written by ``mjsysid demo`` (its data are recorded again: the
    demo's excitation run is deterministic)."""
    from mjsysid.lab.demo import demo_problem

    if not _report_extra(err):
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
            **options,
        )
    return EXIT_OK


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Rebuilds the fit's experiment and writes the report into the results folder."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.output.results import load_results

    folder = Path(args.results)
    results = load_results(folder)
    try:
        run_info = read_run_info(folder, "report")
    except FileNotFoundError as e:
        print(f"error: {e}", file=err)
        return EXIT_ERROR
    if isinstance(run_info, dict) and isinstance(run_info.get("demo"), dict):
        quick = bool(run_info["demo"].get("quick"))
        return _demo_report(folder, results, quick, err, _report_options(args))
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
    params.load_values(folder / PARAMS_X0, strict=False)
    opt_params = params.copy()
    opt_params.load_values(folder / PARAMS_X_HAT, strict=False)
    if not _report_extra(err):
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
            **_report_options(args),
        )
    return EXIT_OK


def _validation(exp: Experiment, rf: Any, params: Any, opt_params: Any) -> Any:
    """The validation table of the fit (fitted and held-out sequences), computed again."""
    from mjsysid.fit.validation import validation_table

    hold_rf = exp.build_holdout_residual_fn()
    try:
        return validation_table(params, opt_params, rf, hold_rf)
    finally:
        if hold_rf is not None:
            hold_rf.close()


def _report_extra(err: TextIO) -> bool:
    """Whether the report extra is installed (an error on ``err`` if not)."""
    if report_available():
        return True
    print(
        "error: the report needs the report extra: pip install -e '.[report]' in the "
        "mjsysid checkout",
        file=err,
    )
    return False
