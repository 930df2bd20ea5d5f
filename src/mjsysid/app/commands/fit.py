"""``mjsysid fit``: identify the parameters of an experiment file."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import yaml

from mjsysid.app.commands.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    RUN_FILE,
    Phases,
    add_no_report,
    add_no_videos,
    describe,
    loading_progress,
    results_folder,
    write_report,
)
from mjsysid.fit.checkpoints import (
    FitOrigin,
    checkpoint_iteration,
    origin_path,
    read_origin,
    write_origin,
)
from mjsysid.fit.options import OPTIMIZERS, FitOptions
from mjsysid.fit.status import MessageContext, model_context
from mjsysid.util.files import atomic_write_text
from mjsysid.util.results_files import ASSETS_DIR, PARAMS_X_HAT

if TYPE_CHECKING:
    from mjsysid.app.experiment import Experiment
    from mjsysid.params.parameter import ParameterDict

NAME = "fit"
HELP = "identify parameters from an experiment file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment file and the flags overriding its optimizer settings."""
    describe(
        parser,
        (
            "Fit the parameters of an experiment file (or example:NAME) "
            "and write the results folder and report."
        ),
        experiment="experiment YAML file, or example:NAME for a bundled one",
    )
    parser.add_argument("-o", "--out", help="results folder (default: results/<experiment name>)")
    parser.add_argument(
        "--optimizer",
        choices=list(OPTIMIZERS),
        help="override the experiment's optimizer",
    )
    parser.add_argument("--max-iters", type=int, help="override the iteration limit")
    parser.add_argument(
        "--horizons",
        nargs="+",
        metavar="FRACTION",
        help="fit in stages on growing parts of every sequence, e.g. --horizons 0.3 1; "
        "'auto' (default: 0.1 0.3 1 where the sequences are long enough) or 'none' (one "
        "stage); overrides the experiment's optimizer.horizons",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from <out>/checkpoint.npz after an interruption",
    )
    parser.add_argument(
        "--assets",
        choices=["copy", "absolute"],
        help="how the identified model names its meshes, textures and height fields: copy "
        "them into <out>/assets (default: the folder loads wherever it is moved) or name "
        "them by their absolute paths; overrides the experiment's export.assets",
    )
    _add_search_arguments(parser)
    add_no_report(parser)
    add_no_videos(parser)
    parser.add_argument(
        "--no-timing-check",
        action="store_true",
        help="skip the timing check before the fit (quick fits on short windows: commands one "
        "sample out of step, whether a retime helps; the same as mjsysid check's)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="the answer only: the status, the identified parameters with their intervals "
        "and where the results are (no progress, no validation table)",
    )


def _add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """The outer stages (``--global`` / ``--starts``) and where candidates are evaluated."""
    search = parser.add_mutually_exclusive_group()
    search.add_argument(
        "--global",
        dest="global_search",
        choices=["cmaes"],
        help="a global CMA-ES stage before the local fit (pip install -e '.[global]' in the "
        "mjsysid checkout); "
        "overrides the experiment's optimizer.global",
    )
    search.add_argument(
        "--starts",
        type=int,
        metavar="N",
        help="local fits from N starts (the nominal and points drawn in the bounds)",
    )
    parser.add_argument("--budget", type=int, help="the global stage's evaluation budget")
    parser.add_argument("--population", type=int, help="the global stage's population")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="evaluate candidates on a local Dask cluster of N worker processes "
        "(pip install -e '.[distributed]' in the mjsysid checkout); overrides the "
        "experiment's executor",
    )
    where.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="evaluate candidates on the Dask cluster at ADDRESS (e.g. tcp://host:8786)",
    )


@dataclass(frozen=True)
class FitSettings:
    """The experiment's optimizer settings with the command line's overrides applied.

    Attributes:
        out: Results folder.
        optimizer: Optimizer name (a key of ``OPTIMIZERS``).
        max_iters: Iteration limit.
        options: Further keyword arguments of ``optimize`` (``horizons`` among them), as
            ``run.yaml`` records them.
        fit: The same settings as the one validated options object the fit runs with.
        search: The outer stages: ``{"global_search": {...}}``, ``{"starts": N}`` or ``{}``.
    """

    out: Path
    optimizer: str
    max_iters: int
    options: dict[str, Any]
    fit: FitOptions
    search: dict[str, Any]


def parse_horizons(items: Sequence[str]) -> str | tuple[float, ...] | None:
    """``--horizons`` as ``optimize`` takes it: ``"auto"``, ``None`` or fractions."""
    if len(items) == 1 and items[0] in ("auto", "none"):
        return None if items[0] == "none" else "auto"
    try:
        return tuple(float(v) for v in items)
    except ValueError:
        raise ValueError(
            f"--horizons must be 'auto', 'none' or fractions in (0, 1] (e.g. 0.3 1), got "
            f"{' '.join(items)!r}"
        ) from None


def settings(args: argparse.Namespace, exp: Experiment) -> FitSettings:
    """The settings of this run: the experiment's, overridden by the flags given."""
    options = dict(exp.optimizer_options)
    if args.horizons is not None:
        options["horizons"] = parse_horizons(args.horizons)
    optimizer = args.optimizer or exp.optimizer
    max_iters = exp.max_iters if args.max_iters is None else args.max_iters
    changes: dict[str, Any] = {"optimizer": optimizer, "max_iters": max_iters}
    if args.horizons is not None:
        changes["horizons"] = options["horizons"]
    return FitSettings(
        out=Path(args.out) if args.out else Path("results") / exp.name,
        optimizer=optimizer,
        max_iters=max_iters,
        options=options,
        fit=(exp.fit_options or FitOptions()).replace(**changes),
        search=search_settings(args, exp),
    )


def search_settings(args: argparse.Namespace, exp: Experiment) -> dict[str, Any]:
    """The experiment's outer stages, overridden by ``--global`` / ``--starts`` and with
    ``--budget`` / ``--population`` for the global stage."""
    search = dict(exp.search)
    if args.starts is not None:
        if args.starts < 1:
            raise ValueError(f"--starts must be a positive integer, got {args.starts}")
        search = {"starts": args.starts}
    elif args.global_search is not None:
        search = {"global_search": {"global": args.global_search}}
    tuning = {k: v for k, v in (("budget", args.budget), ("population", args.population)) if v}
    if tuning:
        if "global_search" not in search:
            raise ValueError("--budget and --population tune the global stage: add --global cmaes")
        search = {"global_search": {**search["global_search"], **tuning}}
    return search


def _count(n: int, noun: str) -> str:
    """``"1 sequence"``, ``"3 sequences"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _data_count(exp: Experiment, windowed: bool) -> str:
    """``"3 sequences"``, or with shooting windows ``"10 windows of 1 recording"`` (the
    sequences of a windowed experiment are its windows, named ``<recording>#<k>``)."""
    n = len(exp.sequences)
    if not windowed:
        return _count(n, "sequence")
    recordings = {name.rsplit("#", 1)[0] for name in exp.sequences.sequence_name}
    return f"{_count(n, 'window')} of {_count(len(recordings), 'recording')}"


def _announce(exp: Experiment, rf: Any, fs: FitSettings, err: TextIO) -> None:
    """Says what is fitted on what, how the data are cut and in which stages."""
    from mjsysid.fit.horizons import resolve_horizons

    windowed = exp.shooting is not None and exp.shooting["window"] is not None
    print(
        f"fitting {len(exp.params.get_non_frozen_parameter_names())} values on "
        f"{_data_count(exp, windowed)} of {exp.name!r} with {fs.optimizer} ...",
        file=err,
    )
    if exp.shooting is not None:
        sh = exp.shooting
        cut = (
            f"windows of {sh['window']:g} s (overlap {sh['overlap']:g} s)"
            if sh["window"] is not None
            else "whole sequences"
        )
        start = (
            "initial states estimated"
            if sh["estimate_initial_state"]
            else "initial states from the data"
        )
        print(f"  multiple shooting: {len(exp.sequences)} {cut}, {start}", file=err)
    hs = resolve_horizons(fs.fit.horizons, rf, fs.optimizer, exp.params)
    if len(hs) > 1:
        shares = ", ".join(f"{100 * h:g} %" for h in hs)
        print(
            f"  in stages on the first {shares} of every {'window' if windowed else 'sequence'}"
            " (an early stage's cost is on its part of the data)",
            file=err,
        )


def _save_run(exp: Experiment, fs: FitSettings) -> None:
    """Writes ``run.yaml``: what ``mjsysid report`` needs to rebuild the fit."""
    run_info = {
        "experiment": str(Path(exp.path).resolve()),
        "inputs": exp.fingerprints(),  # the report checks them
        "optimizer": fs.optimizer,
        "max_iters": fs.max_iters,
        "optimizer_options": {
            k: list(v) if isinstance(v, tuple) else v for k, v in fs.options.items()
        },
    }
    if fs.search:
        run_info["search"] = fs.search
    atomic_write_text(fs.out / RUN_FILE, yaml.safe_dump(run_info, sort_keys=False))


def table(result: Any, conf: Any, params: ParameterDict) -> str:
    """The identified values and their 95 % half-widths, one parameter value a line; with
    bootstrap intervals (``conf.method``) their ends ``[lower, upper]`` as they are
    (asymmetric), under a header that names the method. Window starts (initial states of
    shooting windows) are one line, their count: they are in ``params_x_hat.yaml``."""
    from mjsysid.output.report.format import interval_method

    x0 = params.as_vector()
    side = conf.at_bound if conf.at_bound is not None else np.zeros(x0.size, int)
    by = conf.determined_by or [""] * x0.size
    boot = conf.method == "bootstrap"
    ends = conf.ends() if boot else np.zeros((x0.size, 2))
    head = interval_method(conf) if boot else f"{'± 95 %':>12}"
    lines = [f"{'parameter':<28} {'initial':>12} {'identified':>12} {head}"]
    starts = window_starts(params)
    for k, (name, a, b, h, at, src) in enumerate(
        zip(result.parameter_names, x0, result.x, conf.half_widths, side, by, strict=True)
    ):
        if starts[k]:
            continue
        if not np.isfinite(h):
            hw = f"{'unidentif.':>12}"
        else:
            hw = f"[{ends[k, 0]:.4g}, {ends[k, 1]:.4g}]" if boot else f"{h:12.4g}"
        flag = {-1: "  (at lower bound)", 1: "  (at upper bound)"}.get(int(at), "")
        flag += {"prior": "  (set by its prior)", "data and prior": "  (prior and data)"}.get(
            src, ""
        )
        lines.append(f"{name:<28} {a:12.6g} {b:12.6g} {hw}{flag}")
    n_starts = int(np.count_nonzero(starts))
    if n_starts:
        lines.append(f"{_count(n_starts, 'window-start parameter')} (see {PARAMS_X_HAT})")
    return "\n".join(lines)


def window_starts(params: ParameterDict) -> np.ndarray:
    """``(p,)`` bools: which free entries are initial states (window starts), the nuisance
    the table summarises in one line."""
    from mjsysid.objective.initial_state import INITIAL_KINDS

    flags = [[p.meta.get("kind") in INITIAL_KINDS] * p.size for p in params.non_frozen()]
    return np.array([f for group in flags for f in group], dtype=bool)


MAX_CAVEATS = 8
"""What limits the intervals is said line by line up to this many (a fit with hundreds of
window starts at their bounds would fill the screen); the rest are in the results."""


def _summarise(
    args: argparse.Namespace, result: Any, conf: Any, exp: Experiment, out: TextIO, err: TextIO
) -> None:
    """Prints the outcome: the table on ``out``, counts and caveats on ``err``; with ``-q``
    the answer only: the status and the table (the caveats are in ``confidence.yaml``)."""
    if args.quiet:  # (otherwise optimize said it)
        print(f"{result.message} (status {result.status.value})", file=out)
    else:
        print(
            f"{_count(result.nit, 'iteration')}, {_count(result.nfev, 'evaluation')}, "
            f"optimizer {result.wall_time:.2f} s",
            file=err,
        )
        if result.threshold_profile is not None:  # (the deadzones' ranges after the fit)
            print(result.threshold_profile.text(), file=err)
    print(table(result, conf, exp.params), file=out)
    if not args.quiet:
        say_caveats(conf.caveats(), err)


def say_caveats(caveats: list[str], err: TextIO) -> None:
    """What limits the intervals, one warning each, the first :data:`MAX_CAVEATS`."""
    for caveat in caveats[:MAX_CAVEATS]:
        print(f"warning: {caveat}", file=err)
    if len(caveats) > MAX_CAVEATS:
        print(
            f"warning: and {len(caveats) - MAX_CAVEATS} more about the intervals: "
            "confidence.yaml and the report list them all",
            file=err,
        )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Loads the experiment, fits, saves the results folder, prints the table and reports."""
    from mjsysid.app.experiment import load_experiment

    ph = Phases(err, quiet=args.quiet)
    with ph("loading"):
        exp = load_experiment(args.experiment, progress=loading_progress(err, args.quiet))
    for warning in exp.warnings:
        print(f"warning: {warning}", file=err)
    for note in exp.notes:
        print(f"note: {note}", file=err)
    fs = settings(args, exp)
    with results_folder(fs.out, err):
        with ph("loading"):
            rf = exp.build_residual_fn()
        if not args.quiet:
            _announce(exp, rf, fs, err)
        _timing_check(args, exp, ph, err)
        context = message_context(exp, fs, rf)
        with _evaluator(args, exp, rf, err) as fit_rf:
            fitted = _fit(args, exp, fs, fit_rf, ph, err, context)
        if fitted is None:
            return EXIT_INTERRUPTED
        if fitted[1].status == "interrupted":
            return _save_interrupted(exp, fs, rf, fitted, err)
        code = _save_and_report(args, exp, fs, rf, fitted, ph, out, err)
    if not args.quiet:
        print(ph.summary(), file=err)
    return code


INTERRUPTED_NOTE = "INTERRUPTED.txt"
"""What a results folder holds after Ctrl-C: why there is nothing but the parameters."""


def _save_interrupted(
    exp: Experiment, fs: FitSettings, rf: Any, fitted: tuple[ParameterDict, Any], err: TextIO
) -> int:
    """After Ctrl-C: the best parameters so far and a note, nothing computed (no Jacobian,
    intervals, validation or report: Ctrl-C means stop now); ``result.yaml`` of an earlier
    run is removed, since the folder no longer holds that run's parameters. Exit 130."""
    opt_params, result = fitted
    checkpoint = fs.out / "checkpoint.npz"
    note = (
        f"mjsysid fit {exp.path} was interrupted after {_count(result.nit, 'iteration')} "
        f"(cost {result.initial_cost:.6e} -> {result.cost:.6e}).\n"
        f"{PARAMS_X_HAT} holds the best parameters so far; there are no intervals, validation "
        "or report.\n"
        f"Continue with: mjsysid fit {exp.path} --out {fs.out} --resume\n"
    )
    (fs.out / "result.yaml").unlink(missing_ok=True)  # (an earlier run's, now out of date)
    atomic_write_text(fs.out / PARAMS_X_HAT, yaml.safe_dump(opt_params.to_dict(), sort_keys=False))
    atomic_write_text(fs.out / INTERRUPTED_NOTE, note)
    rf.close()
    print(
        f"interrupted: the best parameters so far are in {fs.out / PARAMS_X_HAT}; continue "
        f"with --resume (checkpoint {checkpoint})",
        file=err,
    )
    return EXIT_INTERRUPTED


def _timing_check(args: argparse.Namespace, exp: Experiment, ph: Phases, err: TextIO) -> None:
    """The timing check of ``mjsysid check`` (the same quick fits, the same numbers), before
    the fit: its warnings, with the costs and the fix. Skipped with ``--no-timing-check`` and
    on ``--resume`` (the first run checked)."""
    from mjsysid.app.timing_check import timing_check

    if args.no_timing_check or args.resume:
        return
    try:
        with ph("timing check"):
            messages = timing_check(exp).messages()
    except (ValueError, FloatingPointError) as e:  # the fit itself reports a real problem
        print(f"note: the timing check was skipped: {e}", file=err)
        return
    for message in messages:
        print(f"warning: {message} (skip this check with --no-timing-check)", file=err)


@contextlib.contextmanager
def _evaluator(args: argparse.Namespace, exp: Experiment, rf: Any, err: TextIO) -> Iterator[Any]:
    """The residual the fit calls: ``rf`` itself, or ``rf`` spread over a Dask cluster
    (``--workers`` / ``--scheduler`` / the experiment's ``executor:``), closed afterwards."""
    opts = exp.executor
    if args.workers is not None or args.scheduler is not None:  # (Dask: only when asked for)
        from mjsysid.fit.distributed import executor_options

        if args.workers is not None:
            opts = executor_options({"workers": args.workers}, "--workers")
        else:
            opts = executor_options({"scheduler": args.scheduler}, "--scheduler")
    if opts is None:
        yield rf
        return
    from mjsysid.fit.distributed import distribute, make_executor

    client = make_executor(**opts)
    try:
        where = opts.get("scheduler") or f"a local cluster of {opts['workers']} workers"
        print(f"  evaluating candidates on {where}", file=err)
        remote = distribute(rf, client, timeout=opts.get("timeout"))
        try:
            yield remote
        finally:
            remote.close()
    finally:
        client.close()


def message_context(exp: Experiment, fs: FitSettings, rf: Any) -> MessageContext:
    """What the messages of this fit may advise, in the experiment file's words: the
    causes its model can have (contacts, dry friction) and the remedies it does not use
    already (windows, horizon stages, a global stage or several starts)."""
    from mjsysid.fit.horizons import resolve_horizons

    stages = resolve_horizons(fs.fit.horizons, rf, fs.optimizer, exp.params)
    return model_context(
        [exp.model],
        language="file",
        windowed=exp.shooting is not None and exp.shooting.get("window") is not None,
        staged=len(stages) > 1,
        searched=bool(fs.search),
    )


@dataclass(frozen=True)
class _Earlier:
    """The runs before a ``--resume``: the iterations in the checkpoint and their totals
    (``None`` when the last of them was killed before it could write them)."""

    iterations: int
    origin: FitOrigin | None


def _earlier_runs(args: argparse.Namespace, checkpoint: Path, err: TextIO) -> _Earlier | None:
    """What a ``--resume`` continues (says so on ``err``); ``None`` for a fresh fit."""
    if args.resume and not checkpoint.is_file():
        print(
            f"note: --resume: there is no checkpoint {str(checkpoint)!r}; starting afresh", file=err
        )
    if not args.resume or not checkpoint.is_file():
        origin_path(checkpoint).unlink(missing_ok=True)  # (a fresh fit's totals start at 0)
        return None
    done, origin = checkpoint_iteration(checkpoint), read_origin(checkpoint)
    print(f"  resuming from {checkpoint} after {done} iterations", file=err)
    if origin is None:
        print(
            "note: the run before was stopped before it could record its totals: the initial "
            "cost, evaluations and time count from the checkpoint",
            file=err,
        )
    return _Earlier(done, origin)


def _inputs(exp: Experiment) -> dict[str, str]:
    """The fingerprints a checkpoint keeps for ``--resume``: the model's files and the
    recordings (the experiment file's own options are compared one by one, and its
    residual settings through the cost at the checkpoint's point)."""
    own = str(Path(exp.path).resolve())
    return {k: v for k, v in exp.fingerprints().items() if k != own}


def _totals(result: Any, earlier: _Earlier | None) -> Any:
    """The result of the whole fit: a resumed part counted on from the runs before it."""
    if earlier is None:
        return result
    changes: dict[str, Any] = {"nit": earlier.iterations + result.nit}
    o = earlier.origin
    if o is not None:
        changes.update(
            initial_cost=o.initial_cost,
            nfev=o.nfev + result.nfev,
            njev=o.njev + result.njev,
            wall_time=o.wall_time + result.wall_time,
        )
    return dataclasses.replace(result, **changes)


def _fit(
    args: argparse.Namespace,
    exp: Experiment,
    fs: FitSettings,
    fit_rf: Any,
    ph: Phases,
    err: TextIO,
    context: MessageContext,
) -> tuple[ParameterDict, Any] | None:
    """Fits with ``fit_rf``: ``(opt_params, result)`` with the totals of the runs a
    ``--resume`` continues, its message in ``context``'s words; ``None`` when interrupted
    before the first iteration ended."""
    from mjsysid.fit.optimize import optimize

    checkpoint = fs.out / "checkpoint.npz"
    earlier = _earlier_runs(args, checkpoint, err)
    try:
        run_options = fs.fit.replace(
            checkpoint=checkpoint,
            resume=args.resume,
            inputs=_inputs(exp),
            verbose=not args.quiet,
            output=err,
            messages=context,
            **fs.search,
        )
        with ph("fitting", announce=False):  # (its iteration lines show it going on)
            opt_params, result = optimize(exp.params, fit_rf, options=run_options)
    except KeyboardInterrupt:
        print(
            f"interrupted before the first iteration finished; nothing to save "
            f"(checkpoint: {checkpoint})",
            file=err,
        )
        return None
    result = _totals(result, earlier)
    if checkpoint.is_file():  # the totals a later --resume counts on from
        write_origin(
            checkpoint, FitOrigin(result.initial_cost, result.nfev, result.njev, result.wall_time)
        )
    return opt_params, result


def _save_and_report(
    args: argparse.Namespace,
    exp: Experiment,
    fs: FitSettings,
    rf: Any,
    fitted: tuple[ParameterDict, Any],
    ph: Phases,
    out: TextIO,
    err: TextIO,
) -> int:
    """Computes the intervals once, saves, summarises and reports with the local ``rf``."""
    from mjsysid.fit.confidence import compute_confidence
    from mjsysid.output.results import save_results

    opt_params, result = fitted
    with ph("intervals"):
        conf = compute_confidence(result, rf, params=opt_params, **exp.confidence)
    with ph("saving"):
        earlier = _owned_files(fs.out)
        save_results(
            fs.out,
            [exp.sequences],
            exp.params,
            opt_params,
            result,
            rf,
            confidence=conf,
            model_files={exp.sequences.name: exp.export_urdf or exp.files[1]},
            assets=args.assets or exp.export_assets,
        )
        _save_run(exp, fs)
        _remove_stale(fs.out, earlier - _owned_files(fs.out), err)
        (fs.out / INTERRUPTED_NOTE).unlink(missing_ok=True)  # (a resumed fit has finished)
    _summarise(args, result, conf, exp, out, err)
    with ph("validation"):
        validation = _validate(exp, rf, opt_params, fs.out, None if args.quiet else out, err)
    print(f"results: {fs.out}", file=out if args.quiet else err)
    if not args.no_report:
        with ph("report"):
            write_report(
                exp.sequences,
                exp.params,
                opt_params,
                result,
                rf,
                fs.out,
                err,
                confidence=conf,
                validation=validation,
                quiet=args.quiet,
                videos=not args.no_videos,
            )
    else:  # a report of an earlier run would describe other results
        _remove_stale(fs.out, {"report.html", "report_assets"}, err)
    rf.close()
    return EXIT_INTERRUPTED if result.status == "interrupted" else EXIT_OK


def _owned_files(folder: Path) -> set[str]:
    """The per-model files the results of ``folder`` name: ``<name>.xml`` (``models`` of
    ``result.yaml``) and the exports of each model (``<name>.urdf``, ``<name>.robot.yaml``,
    ``<name>.identified.yaml``) and the ``assets`` folder of their copied asset files;
    empty when there are no readable results."""
    from mjsysid.util.files import read_yaml

    try:
        summary = read_yaml(folder / "result.yaml") if (folder / "result.yaml").is_file() else {}
    except (OSError, ValueError):
        return set()  # not results of ours: nothing of it is ours to remove
    models = (summary or {}).get("models")
    if not isinstance(models, dict):
        return set()
    owned: set[str] = set()
    for name, file in models.items():
        owned.update(
            (
                str(file),
                f"{name}.urdf",
                f"{name}.robot.xml",
                f"{name}.robot.yaml",
                f"{name}.identified.yaml",
            )
        )
    files = (summary or {}).get("files")
    if isinstance(files, list) and any(str(f).startswith(f"{ASSETS_DIR}/") for f in files):
        owned.add(ASSETS_DIR)  # the copied assets (--assets copy)
    return {f for f in owned if f and Path(f).name == f and not f.startswith(".")}


def _remove_stale(folder: Path, names: set[str], err: TextIO) -> None:
    """Removes files (and the report's assets folder) an earlier run left in ``folder`` that
    this run did not write; a link is removed, never followed."""
    import shutil

    removed = []
    for name in sorted(names):
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.is_file() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append(name)
    if removed:
        print(f"note: removed what an earlier run left in {folder}: {removed}", file=err)


def _validate(
    exp: Experiment,
    rf: Any,
    opt_params: ParameterDict,
    folder: Path,
    out: TextIO | None,
    err: TextIO,
) -> Any:
    """Simulates the fitted and the held-out sequences with the start and the identified
    model, prints the table on ``out`` (not with ``None``) and writes ``validation.yaml`` (a
    simulation that fails is a warning: the results are saved already); the table, or
    ``None``."""
    from mjsysid.fit.validation import validation_table
    from mjsysid.sim.rollout import RolloutDivergedError

    hold_rf = exp.build_holdout_residual_fn()
    try:
        validation = validation_table(exp.params, opt_params, rf, hold_rf)
    except (RolloutDivergedError, ValueError, KeyError) as e:
        print(f"warning: validation skipped: {e}", file=err)
        (folder / "validation.yaml").unlink(missing_ok=True)  # (not an older run's)
        return None
    finally:
        if hold_rf is not None:
            hold_rf.close()
    atomic_write_text(
        folder / "validation.yaml",
        yaml.safe_dump(validation.as_dict(), sort_keys=False, allow_unicode=True),
    )
    if out is not None:
        print(validation_text(validation), file=out)
    return validation


def validation_text(validation: Any) -> str:
    """The validation table as the terminal shows it: a fit in shooting windows (sequences
    named ``<recording>#<k>``) gets one line per recording and signal, its windows' median
    and worst fit, instead of one line per window; held-out sequences line by line
    (``validation.yaml`` and the report have every window)."""
    from mjsysid.fit.validation import ValidationTable

    fitted = [r for r in validation.rows if not r.held_out]
    if not any("#" in r.sequence for r in fitted):
        return str(validation.format())
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in fitted:
        groups.setdefault((r.sequence.rsplit("#", 1)[0], r.signal), []).append(r)
    lines = [
        "fitted windows (median and worst window):",
        f"{'recording':<24} {'signal':<18} {'windows':>7} {'fit start':>10} {'fit ident.':>10} "
        f"{'worst':>8}",
    ]
    for (recording, signal), rows in groups.items():
        start = float(np.nanmedian([r.fit_start for r in rows]))
        ident = [r.fit_identified for r in rows]
        lines.append(
            f"{recording:<24} {signal:<18} {len(rows):7d} {start:9.1f}% "
            f"{float(np.nanmedian(ident)):9.1f}% {float(np.nanmin(ident)):7.1f}%"
        )
    held = ValidationTable(tuple(r for r in validation.rows if r.held_out)).format()
    return "\n".join(lines + ([held] if held else []))
