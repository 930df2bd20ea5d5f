"""``mjsysid evaluate``: models on an experiment's recordings, on separate axes."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from mjsysid.app.commands.common import EXIT_OK, add_quiet, describe, loading_progress
from mjsysid.util.limits import check_count, check_limit

if TYPE_CHECKING:
    import mujoco

    from mjsysid.app.experiment import Experiment

NAME = "evaluate"
HELP = "one-step and open-loop prediction errors of models on recorded data"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment, the models and the outputs."""
    describe(
        parser,
        (
            "Simulates each model from the recorded states under the recorded commands and "
            "reports separately its one-step error and its open-loop error against horizon (0.1 s "
            "to the whole recording). A model is 'nominal' (the experiment's model), an MJCF "
            "file, or a results folder of 'mjsysid fit' (its identified <name>.xml); "
            "LABEL=MODEL names it in the table."
        ),
        experiment="experiment file (or example:<name>)",
    )
    parser.add_argument("models", nargs="+", metavar="MODEL", help="nominal, file.xml or folder")
    parser.add_argument("--out", help="write the evaluation as JSON to this file")
    parser.add_argument("--html", help="write a standalone page with the curves (needs plotly)")
    parser.add_argument(
        "--starts", type=int, default=20, help="open-loop starts per recording (default 20)"
    )
    parser.add_argument(
        "--horizons",
        help="open-loop horizons in seconds, comma-separated (default 0.1,0.2,0.5,1,2,5,...)",
    )
    add_quiet(parser, "progress lines")


def parse_horizons(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(
            f"--horizons must be seconds separated by commas (0.1,0.5,1), got {text!r}"
        ) from None
    if not values or any(not (math.isfinite(v) and v > 0) for v in values):
        raise ValueError(f"--horizons must be positive finite seconds, got {text!r}")
    for v in values:
        check_limit("max_duration_s", v, "--horizons")
    return values


def _label_and_source(arg: str) -> tuple[str, str]:
    """``LABEL=MODEL`` or ``MODEL`` (labelled by its file or folder name)."""
    if "=" in arg:
        label, source = arg.split("=", 1)
        if label and source:
            return label, source
    if arg == "nominal":
        return arg, arg
    path = Path(arg)
    return (path.name if path.is_dir() else path.stem), arg


def load_model(source: str, exp: Experiment) -> mujoco.MjModel:
    """The model ``source`` names: ``nominal``, an MJCF file or a results folder.

    Raises:
        ValueError: A folder without the identified model.
        OSError: A missing file.
    """
    import mujoco

    if source == "nominal":
        return exp.model
    path = Path(source)
    if path.is_dir():
        candidate = path / f"{exp.sequences.name}.xml"
        if not candidate.is_file():
            found = sorted(p.name for p in path.glob("*.xml"))
            raise ValueError(
                f"results folder {str(path)!r} must hold the identified "
                f"{candidate.name!r}, got {found or 'no .xml file'}; pass the model file itself"
            )
        path = candidate
    if not path.is_file():
        raise FileNotFoundError(f"model {source!r} is not a file, a folder or 'nominal'")
    return mujoco.MjModel.from_xml_path(str(path))


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Loads the experiment and the models, evaluates them, prints and writes the results."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.lab.evaluate import DEFAULT_HORIZONS, evaluate_models
    from mjsysid.lab.evaluate_report import format_table, write_html, write_json

    check_count("max_starts", args.starts, "--starts")
    horizons = parse_horizons(args.horizons) or DEFAULT_HORIZONS
    exp = load_experiment(args.experiment, progress=loading_progress(err, args.quiet))
    models = {}
    for arg in args.models:
        label, source = _label_and_source(arg)
        if label in models:
            raise ValueError(f"two models are labelled {label!r}; name them LABEL=MODEL")
        models[label] = load_model(source, exp)

    def progress(line: str) -> None:
        if not args.quiet:
            print(line.strip(), file=err, flush=True)

    report = evaluate_models(
        models, exp.sequences, horizons=horizons, starts=args.starts, progress=progress
    )
    print(format_table(report), file=out)
    if args.out:
        print(f"evaluation: {write_json(report, args.out)}", file=err)
    if args.html:
        print(f"page: {write_html(report, args.html, title=f'Evaluation: {exp.name}')}", file=err)
    return EXIT_OK
