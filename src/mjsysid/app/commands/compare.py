"""``mjsysid compare``: two or more identified models side by side on the same held-out data.

Every model (native parameters, filter actuators, force laws, user laws: whatever its
results folder's experiment describes) is rebuilt from its folder (its experiment and
``params_x_hat``) and judged on held-out multi-step prediction from recorded states at several
horizons, on its own state layout, with information criteria on an effective sample size;
a verdict is given only when the difference exceeds its scatter over windows
(:mod:`mjsysid.lab.prediction`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from mjsysid.app.commands.common import (
    EXIT_OK,
    RUN_FILE,
    describe,
    parse_prediction_horizons,
    read_run_info,
)
from mjsysid.util.files import atomic_write_text
from mjsysid.util.results_files import PARAMS_X_HAT

if TYPE_CHECKING:
    from mjsysid.app.experiment import Experiment
    from mjsysid.data.sequences import ModelSequences
    from mjsysid.params.parameter import ParameterDict

NAME = "compare"
HELP = "compare identified models on held-out multi-step prediction (horizons, AIC, BIC)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The results folders, the data and the output file."""
    describe(
        parser,
        (
            "Simulate the models identified in two or more results folders (any kind: native "
            "parameters, filter actuators, force laws, user laws; state sizes may differ) on the "
            "same held-out data (the first folder's holdout: true sequences, or --data), in "
            "windows of each horizon started from the recorded states, and compare their mean "
            "window errors (with standard errors) and information criteria on an effective "
            "sample size. 'A is better than B' only when the difference exceeds 2 standard "
            "errors and 5 % at some horizon, no horizon disagrees and BIC agrees; otherwise "
            "'no clear difference'."
        ),
    )
    parser.add_argument("results", nargs="+", help="folders written by 'mjsysid fit'")
    parser.add_argument(
        "--data",
        metavar="EXPERIMENT",
        help="experiment file whose holdout: true sequences (all its sequences, if none is "
        "marked) are the comparison data (default: the first folder's held-out sequences)",
    )
    parser.add_argument(
        "--horizons",
        help="window lengths in seconds, comma-separated (default 0.1,0.5,2)",
    )
    parser.add_argument("-o", "--out", help="write the comparison to this .json or .yaml file")
    parser.add_argument(
        "--html",
        help="write a standalone page with the table, the verdicts and the curves (needs plotly)",
    )


@dataclass(frozen=True)
class _Fitted:
    """One results folder, rebuilt: its experiment and identified parameters."""

    label: str
    exp: Experiment
    params: ParameterDict


def rebuild(folder: Path, label: str, err: TextIO) -> _Fitted:
    """The experiment of a results folder and the parameters it identified (force laws and
    user laws come back with the experiment; their identified values with the parameters)."""
    from mjsysid.app.commands.report import changed_inputs
    from mjsysid.app.experiment import load_experiment
    from mjsysid.output.results import load_results

    run_info = read_run_info(folder, "compare", "folders")
    if not isinstance(run_info, dict) or "experiment" not in run_info:
        raise ValueError(f"{str(folder / RUN_FILE)!r} names no experiment (a demo folder?)")
    exp = load_experiment(run_info["experiment"])
    changed = changed_inputs(run_info, exp)
    if changed:
        print(f"warning: {label}: the inputs changed since the fit ran: {changed}", file=err)
    results = load_results(folder)  # a complete save (raises otherwise)
    params = exp.params.copy()
    params.load_values(folder / PARAMS_X_HAT, strict=False)
    if params.size != results.result.x.size:
        raise ValueError(
            f"{str(folder)!r}: its experiment now has {params.size} free values, the fit "
            f"had {results.result.x.size}; fit it again"
        )
    return _Fitted(label, exp, params)


def _comparison_data(args: argparse.Namespace, first: Experiment) -> ModelSequences:
    """The sequences every model is simulated on."""
    from mjsysid.app.experiment import load_experiment

    if args.data is None:
        if first.holdout is None:
            raise ValueError(
                f"the experiment of {args.results[0]!r} has no holdout: true sequence to "
                "compare on; mark one in its experiment file (and fit again) or give --data "
                "EXPERIMENT"
            )
        return first.holdout
    data = load_experiment(args.data)
    return data.holdout if data.holdout is not None else data.sequences


def _labels(folders: list[str]) -> list[str]:
    """The folders' names, or their paths where two names are alike."""
    names = [Path(f).name or f for f in folders]
    return names if len(set(names)) == len(names) else list(folders)


def _write(path: Path, payload: dict[str, Any]) -> None:
    if path.suffix.lower() in (".yaml", ".yml"):
        atomic_write_text(path, yaml.safe_dump(payload, sort_keys=False, allow_unicode=True))
    else:
        atomic_write_text(path, json.dumps(payload, indent=2) + "\n")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Rebuilds every folder's model, scores its multi-step prediction on the data and prints
    the comparison and the verdicts."""
    from mjsysid.lab.evaluate_report import prediction_dict, write_html
    from mjsysid.lab.prediction import DEFAULT_HORIZONS, format_scores, score_prediction, verdict

    if len(args.results) < 2:
        raise ValueError(f"compare needs two or more results folders, got {len(args.results)}")
    if args.out and Path(args.out).suffix.lower() not in (".json", ".yaml", ".yml"):
        raise ValueError(f"--out must be a .json or .yaml file, got {args.out!r}")
    horizons = parse_prediction_horizons(args.horizons) or DEFAULT_HORIZONS
    fitted = [
        rebuild(Path(f), label, err)
        for f, label in zip(args.results, _labels(args.results), strict=True)
    ]
    data = _comparison_data(args, fitted[0].exp)
    scores = [score_prediction(f.label, f.exp, f.params, data, horizons) for f in fitted]
    verdicts = verdict(scores)
    names = ", ".join(data.sequence_name)
    print(f"on {len(data.sequence_name)} held-out sequence(s): {names}", file=out)
    print(format_scores(scores), file=out)
    for v in verdicts:
        print(v.sentence(), file=out)
    if args.out:
        payload = {"data": list(data.sequence_name), **prediction_dict(scores, verdicts)}
        _write(Path(args.out), payload)
        print(f"comparison: {args.out}", file=err)
    if args.html:
        title = f"Comparison: {', '.join(f.label for f in fitted)}"
        scope = f"the held-out sequence(s) {names}"
        page = write_html(
            None, args.html, title=title, prediction=scores, verdicts=verdicts, data=scope
        )
        print(f"page: {page}", file=err)
    return EXIT_OK
