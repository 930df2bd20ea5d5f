"""``mjsysid evaluate``: models on an experiment's recordings, on separate axes.

Every model is judged on held-out multi-step prediction from recorded states at several
horizons (:mod:`mjsysid.lab.prediction`), simulated as its experiment describes it (force
laws, user laws, transforms and filter actuators included): ``nominal`` is the experiment at
its nominal values, a results folder of ``mjsysid fit`` is rebuilt from its experiment and
``params_x_hat`` (its laws with their identified values), an MJCF file replaces the
experiment's model (the experiment's force laws at their nominal values). Where every model
is a plain MuJoCo model (no force laws, no activations) the state-space table of
:mod:`mjsysid.lab.evaluate` (one-step and open-loop errors per state component) follows."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from mjsysid.app.commands.common import (
    EXIT_OK,
    add_quiet,
    describe,
    loading_progress,
    parse_prediction_horizons,
)
from mjsysid.util.limits import check_count

if TYPE_CHECKING:
    import mujoco

    from mjsysid.app.experiment import Experiment
    from mjsysid.lab.evaluate import EvaluationReport
    from mjsysid.lab.prediction import PairVerdict, PredictionScore
    from mjsysid.params.parameter import ParameterDict

NAME = "evaluate"
HELP = "multi-step prediction errors of models (any kind, force laws included) on recorded data"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment, the models and the outputs."""
    describe(
        parser,
        (
            "Simulates each model in windows of each horizon, each started from the recorded "
            "state, under the recorded commands, on the experiment's held-out sequences (all of "
            "them if none is held out), and reports the mean window error with its standard "
            "error and information criteria on an effective sample size, force laws and filter "
            "actuators included. For plain MuJoCo models it also reports the one-step error "
            "and the open-loop error against horizon per state component. A model is "
            "'nominal' (the experiment at its nominal values), an MJCF file (the experiment's "
            "laws and sensor transform at nominal values), or a results folder of 'mjsysid fit' "
            "(its experiment and "
            "identified values, laws included); LABEL=MODEL names it in the table."
        ),
        experiment="experiment file (or example:<name>)",
    )
    parser.add_argument("models", nargs="+", metavar="MODEL", help="nominal, file.xml or folder")
    parser.add_argument("-o", "--out", help="write the evaluation as JSON to this file")
    parser.add_argument("--html", help="write a standalone page with the curves (needs plotly)")
    parser.add_argument(
        "--starts", type=int, default=20, help="open-loop starts per recording (default 20)"
    )
    parser.add_argument(
        "--horizons",
        help="horizons in seconds, comma-separated (default: 0.1,0.5,2 for the multi-step "
        "prediction; 0.1,0.2,0.5,1,2,5,... for the open-loop table)",
    )
    add_quiet(parser, "progress lines")


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


@dataclass(frozen=True)
class _Model:
    """One model to evaluate: its label, experiment and parameters, and the MjModel of the
    state-space table (``None`` where that table does not apply: force laws, activations)."""

    label: str
    exp: Experiment
    params: ParameterDict
    mjmodel: mujoco.MjModel | None


def _plain(exp: Experiment, model: mujoco.MjModel) -> bool:
    """Whether the state-space table applies: no force laws, no activations."""
    return not exp.residual_options.get("force_laws") and not model.na


def _model(label: str, source: str, exp: Experiment, err: TextIO) -> _Model:
    """``nominal``, a results folder (with its run file: rebuilt; without: its MJCF) or an
    MJCF file, as a :class:`_Model`."""
    import dataclasses

    import mujoco

    from mjsysid.app.commands.common import RUN_FILE
    from mjsysid.app.commands.compare import rebuild
    from mjsysid.params.parameter import ParameterDict

    path = Path(source)
    if source == "nominal":
        return _Model(label, exp, exp.params, exp.model if _plain(exp, exp.model) else None)
    if path.is_dir() and (path / RUN_FILE).is_file():
        fitted = rebuild(path, label, err)
        xml = path / f"{fitted.exp.sequences.name}.xml"
        mj = mujoco.MjModel.from_xml_path(str(xml)) if xml.is_file() else None
        keep = mj if mj is not None and _plain(fitted.exp, mj) else None
        return _Model(label, fitted.exp, fitted.params, keep)
    mj = load_model(source, exp)
    spec = mujoco.MjSpec.from_file(str(_model_file(source, exp)))
    signal = set(exp.transform.parameter_names) if exp.transform is not None else set()
    kept = ParameterDict(  # what the MJCF does not hold: the laws' and the transform's values
        p.copy()
        for p in exp.params.values()
        if str(p.meta.get("kind", "")).startswith("law:") or p.name in signal
    )
    own = dataclasses.replace(exp, spec=spec, model=mj, params=kept)
    return _Model(label, own, kept, mj if _plain(exp, mj) else None)


def _model_file(source: str, exp: Experiment) -> Path:
    path = Path(source)
    return path / f"{exp.sequences.name}.xml" if path.is_dir() else path


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Loads the experiment and the models, evaluates them, prints and writes the results."""
    from mjsysid.app.experiment import load_experiment
    from mjsysid.lab.prediction import DEFAULT_HORIZONS as PREDICTION_HORIZONS
    from mjsysid.lab.prediction import format_scores, score_prediction, verdict

    check_count("max_starts", args.starts, "--starts")
    given = parse_prediction_horizons(args.horizons)
    exp = load_experiment(args.experiment, progress=loading_progress(err, args.quiet))
    models: dict[str, _Model] = {}
    for arg in args.models:
        label, source = _label_and_source(arg)
        if label in models:
            raise ValueError(f"two models are labelled {label!r}; name them LABEL=MODEL")
        models[label] = _model(label, source, exp, err)
    data = exp.holdout if exp.holdout is not None else exp.sequences
    which = "held-out" if exp.holdout is not None else "(no sequence is held out: all)"
    scores = []
    for m in models.values():
        _say(args, err, f"evaluating {m.label!r}: multi-step prediction ...")
        scores.append(
            score_prediction(m.label, m.exp, m.params, data, given or PREDICTION_HORIZONS)
        )
    scope = f"{which} sequences: {', '.join(data.sequence_name)}"
    print(f"multi-step prediction on {scope}", file=out)
    print(format_scores(scores), file=out)
    verdicts = verdict(scores) if len(scores) > 1 else []
    for v in verdicts:
        print(v.sentence(), file=out)
    report = _state_space(args, exp, models, given, out, err)
    _write(args, exp, report, scores, verdicts, f"the {scope}", err)
    return EXIT_OK


def _say(args: argparse.Namespace, err: TextIO, line: str) -> None:
    if not args.quiet:
        print(line.strip(), file=err, flush=True)


def _state_space(
    args: argparse.Namespace,
    exp: Experiment,
    models: dict[str, _Model],
    given: tuple[float, ...] | None,
    out: TextIO,
    err: TextIO,
) -> EvaluationReport | None:
    """The one-step and open-loop table of :mod:`mjsysid.lab.evaluate` where every model is a
    plain MuJoCo model of one state size (else a note and ``None``)."""
    from mjsysid.lab.evaluate import DEFAULT_HORIZONS, evaluate_models
    from mjsysid.lab.evaluate_report import format_table

    plain = {k: m.mjmodel for k, m in models.items() if m.mjmodel is not None}
    sizes = {(mj.nq, mj.nv, mj.nu) for mj in plain.values()}
    if len(plain) < len(models) or len(sizes) > 1:
        print(
            "note: the state-space table (one-step and open-loop errors per state component) "
            "is left out: it simulates bare MuJoCo models, and these have force laws, "
            "activations or different sizes; the multi-step prediction above covers them",
            file=out,
        )
        return None
    report = evaluate_models(
        plain,
        exp.sequences,
        horizons=given or DEFAULT_HORIZONS,
        starts=args.starts,
        progress=lambda line: _say(args, err, line),
    )
    print("", file=out)
    print(format_table(report), file=out)
    return report


def _write(
    args: argparse.Namespace,
    exp: Experiment,
    report: EvaluationReport | None,
    scores: list[PredictionScore],
    verdicts: list[PairVerdict],
    scope: str,
    err: TextIO,
) -> None:
    from mjsysid.lab.evaluate_report import write_html, write_json

    if args.out:
        path = write_json(report, args.out, prediction=scores, verdicts=verdicts)
        print(f"evaluation: {path}", file=err)
    if args.html:
        page = write_html(
            report,
            args.html,
            title=f"Evaluation: {exp.name}",
            prediction=scores,
            verdicts=verdicts,
            data=scope,
        )
        print(f"page: {page}", file=err)
