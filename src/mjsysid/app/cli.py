"""The ``mjsysid`` command: a thin layer over the library.

Subcommands: ``fit`` an experiment file, ``report`` a results folder, ``simulate`` a synthetic
recording, ``examples`` to list the bundled examples, ``demo`` for the cart-pole planning demo.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import numpy as np
import yaml

from mjsysid.fit.optimize import OPTIMIZERS
from mjsysid.sim.rollout import RolloutDivergedError
from mjsysid.util.errors import must_be
from mjsysid.util.files import atomic_write_text, read_yaml

if TYPE_CHECKING:
    import mujoco

    from mjsysid.objective.control_transform import ControlTransform
    from mjsysid.params.parameter import ParameterDict

EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130


def _report_available() -> bool:
    from mjsysid.output.report import missing_dependencies

    return not missing_dependencies()


def _write_report(exp_or_seqs, params, opt_params, result, rf, out: Path, err: TextIO) -> None:
    if not _report_available():
        print("report skipped: install the report extra (pip install 'mjsysid[report]')", file=err)
        return
    from mjsysid.output.report import default_report

    try:
        path = default_report([exp_or_seqs], params, opt_params, result, rf, out)
    except ImportError as e:
        print(f"report skipped: {e}", file=err)
        return
    print(f"report: {path}", file=err)


def _table(result, conf, params) -> str:
    x0 = params.as_vector()
    side = conf.at_bound if conf.at_bound is not None else np.zeros(x0.size, int)
    lines = [f"{'parameter':<28} {'initial':>12} {'identified':>12} {'± 95 %':>12}"]
    for name, a, b, h, at in zip(
        result.parameter_names, x0, result.x, conf.half_widths, side, strict=True
    ):
        hw = f"{h:12.4g}" if np.isfinite(h) else f"{'unidentif.':>12}"
        flag = {-1: "  (at lower bound)", 1: "  (at upper bound)"}.get(int(at), "")
        lines.append(f"{name:<28} {a:12.6g} {b:12.6g} {hw}{flag}")
    return "\n".join(lines)


def cmd_fit(args: argparse.Namespace, out_stream: TextIO, err: TextIO) -> int:
    from mjsysid.app.experiment import load_experiment
    from mjsysid.fit.confidence import compute_confidence
    from mjsysid.fit.optimize import optimize, resolve_horizons
    from mjsysid.output.results import save_results

    exp = load_experiment(args.experiment)
    for warning in exp.warnings:
        print(f"warning: {warning}", file=err)
    out = Path(args.out) if args.out else Path("results") / exp.name
    optimizer = args.optimizer or exp.optimizer
    max_iters = exp.max_iters if args.max_iters is None else args.max_iters
    options = dict(exp.optimizer_options)
    if args.horizons is not None:
        options["horizons"] = _parse_horizons(args.horizons)
    rf = exp.build_residual_fn()
    print(
        f"fitting {len(exp.params.get_non_frozen_parameter_names())} values on "
        f"{len(exp.sequences)} sequences of {exp.name!r} with {optimizer} ...",
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
    hs = resolve_horizons(options.get("horizons", "auto"), rf, optimizer, exp.params)
    if len(hs) > 1:
        shares = ", ".join(f"{100 * h:g} %" for h in hs)
        print(
            f"  in stages on the first {shares} of every sequence (an early stage's cost is "
            "on its part of the data)",
            file=err,
        )
    checkpoint = out / "checkpoint.npz"
    try:
        opt_params, result = optimize(
            exp.params,
            rf,
            optimizer=optimizer,
            max_iters=max_iters,
            checkpoint=checkpoint,
            resume=args.resume,
            verbose=not args.quiet,
            output=err,
            **options,
        )
    except KeyboardInterrupt:
        print(
            f"interrupted before the first iteration finished; nothing to save "
            f"(checkpoint: {checkpoint})",
            file=err,
        )
        return EXIT_INTERRUPTED
    save_results(out, [exp.sequences], exp.params, opt_params, result, rf)
    atomic_write_text(
        out / "run.yaml",
        yaml.safe_dump(
            {
                "experiment": str(Path(exp.path).resolve()),
                "inputs": exp.fingerprints(),  # the report checks them
                "optimizer": optimizer,
                "max_iters": max_iters,
                "optimizer_options": {
                    k: list(v) if isinstance(v, tuple) else v for k, v in options.items()
                },
            },
            sort_keys=False,
        ),
    )
    conf = compute_confidence(result, rf, params=opt_params)
    if args.quiet:  # (otherwise optimize said it)
        print(result.message, file=err)
        print(f"cost {result.initial_cost:.6e} -> {result.cost:.6e}", file=err)
    print(f"{result.nit} iterations, {result.nfev} evaluations, {result.wall_time:.2f} s", file=err)
    print(_table(result, conf, exp.params), file=out_stream)
    if not conf.converged:
        print(f"warning: {conf.caveats()[0]}", file=err)
    if conf.at_bound is not None and conf.at_bound.any():
        print("warning: the intervals of parameters at a bound are not meaningful", file=err)
    print(f"results: {out}", file=err)
    if not args.no_report:
        _write_report(exp.sequences, exp.params, opt_params, result, rf, out, err)
    rf.close()
    return EXIT_INTERRUPTED if result.status == "interrupted" else EXIT_OK


def cmd_report(args: argparse.Namespace, out_stream: TextIO, err: TextIO) -> int:
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
    run = read_yaml(run_file)
    exp = load_experiment(run["experiment"])
    then, now = run.get("inputs"), exp.fingerprints()
    if isinstance(then, dict):  # (results of older versions have no fingerprints)
        changed = sorted(f for f in set(then) | set(now) if then.get(f) != now.get(f))
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
    if not _report_available():
        print("error: the report needs the report extra: pip install 'mjsysid[report]'", file=err)
        return EXIT_ERROR
    _write_report(exp.sequences, params, opt_params, results.result, rf, folder, err)
    return EXIT_OK


def _parse_horizons(items: Sequence[str]) -> str | tuple[float, ...] | None:
    if len(items) == 1 and items[0] in ("auto", "none"):
        return None if items[0] == "none" else "auto"
    try:
        return tuple(float(v) for v in items)
    except ValueError:
        raise ValueError(
            f"--horizons must be 'auto', 'none' or fractions in (0, 1] (e.g. 0.3 1), got "
            f"{' '.join(items)!r}"
        ) from None


def _parse_set(items: Sequence[str]) -> list[tuple[str, str, np.ndarray, str]]:
    """``(kind, target, values, item)`` of every ``--set KIND:TARGET=V[,V...]``."""
    out = []
    for item in items:
        try:
            left, value = item.split("=", 1)
            kind, target = left.split(":", 1)
            values = np.array([float(v) for v in value.split(",")])
        except ValueError:
            raise ValueError(
                f"--set must look like KIND:TARGET=VALUE (e.g. body_mass:pole=0.8, or "
                f"VALUE,VALUE,... for a parameter of several values), got {item!r}"
            ) from None
        if not np.all(np.isfinite(values)):
            raise ValueError(must_be(f"--set {item!r}: VALUE", "finite", values))
        out.append((kind.strip(), target.strip(), values, item))
    return out


def _check_simulate_args(args: argparse.Namespace) -> None:
    """Rejects bad numbers before anything is loaded or simulated."""
    if not (math.isfinite(args.duration) and args.duration > 0):
        raise ValueError(must_be("--duration", "a finite number of seconds > 0", args.duration))
    if args.amplitude is not None and not (math.isfinite(args.amplitude) and args.amplitude > 0):
        raise ValueError(must_be("--amplitude", "a finite number > 0", args.amplitude))
    if not (math.isfinite(args.noise) and args.noise >= 0):
        raise ValueError(must_be("--noise", "a finite standard deviation >= 0", args.noise))
    if args.seed < 0:
        raise ValueError(must_be("--seed", "an integer >= 0", args.seed))
    if args.rate is not None and not (math.isfinite(args.rate) and args.rate > 0):
        raise ValueError(must_be("--rate", "a finite rate in Hz > 0", args.rate))
    if Path(args.out).suffix.lower() not in (".npz", ".csv"):
        raise ValueError(must_be("--out", "a .npz or .csv file name", args.out))
    if not Path(args.model).is_file():
        raise FileNotFoundError(f"model: no such file {str(args.model)!r}")


def _log_every(rate: float | None, dt: float) -> int:
    """Simulation steps per logged sample for ``--rate`` (1 without one)."""
    if rate is None:
        return 1
    every = round(1.0 / (rate * dt))
    if every < 1 or abs(every * dt * rate - 1.0) > 1e-6:
        raise ValueError(
            must_be(
                "--rate",
                f"the simulation rate {1 / dt:g} Hz divided by a whole number (e.g. "
                f"{1 / dt:g}, {0.5 / dt:g}, {0.1 / dt:g} Hz)",
                rate,
            )
        )
    return every


def _command_effect(
    commands: ControlTransform,
    values_out: ParameterDict,
    model: mujoco.MjModel,
    kind: str,
    target: str,
    values: np.ndarray,
    item: str,
) -> None:
    """Adds ``--set control_*:PATTERN=V[,V]`` to the commands' transform (checked now)."""
    from mjsysid.objective.control_transform import ControlTransform
    from mjsysid.params.parameter import Parameter

    op = kind.split("_", 1)[1]
    sizes = (1,) if op == "offset" else (1, 2)
    if values.size not in sizes:
        expected = "one number" if op == "offset" else "one or two numbers (positive, negative)"
        raise ValueError(must_be(f"--set {item!r}: VALUE", expected, values))
    if op == "deadband" and np.any(values < 0):
        raise ValueError(must_be(f"--set {item!r}: VALUE", "a deadband >= 0", values))
    name = item  # the --set argument itself names it in any error
    inf = np.full(values.size, np.inf)
    values_out.add(Parameter(name, values, -inf, inf))
    one = getattr(ControlTransform(), op)(target, name)
    try:
        one.validate(model)
    except ValueError as e:
        raise ValueError(f"--set {item!r}: {str(e).split(': ', 1)[1]}") from None
    getattr(commands, op)(target, name)


def cmd_simulate(args: argparse.Namespace, out_stream: TextIO, err: TextIO) -> int:
    import mujoco

    from mjsysid.app.experiment import ALL_KINDS, CONTROL_KINDS, INERTIA_KINDS
    from mjsysid.data.excitation import make_excitation
    from mjsysid.data.recording import write_recording
    from mjsysid.data.states import create_initial_state
    from mjsysid.objective.control_transform import ControlTransform
    from mjsysid.params.apply import apply_param_modifiers
    from mjsysid.params.inertia import body_inertia_param
    from mjsysid.params.kinds import KINDS, make_parameter
    from mjsysid.params.parameter import ParameterDict
    from mjsysid.sim.rollout import sysid_rollout
    from mjsysid.sim.sensor_effects import SIGNAL_EFFECTS, apply_sensor_effects

    _check_simulate_args(args)
    sets = _parse_set(args.set or [])
    spec = mujoco.MjSpec.from_file(str(args.model))
    model = spec.compile()
    dt = model.opt.timestep
    n = round(args.duration / dt)
    if n < 2:
        raise ValueError(
            must_be(
                "--duration",
                f"at least 2 timesteps of the model ({2 * dt:g} s at timestep {dt:g} s)",
                args.duration,
            )
        )
    truth = ParameterDict()
    effects = []
    commands, command_values = ControlTransform(), ParameterDict()
    for kind, target, values, item in sets:
        if kind not in ALL_KINDS:
            raise ValueError(must_be(f"--set {item!r}: KIND", f"one of {ALL_KINDS}", kind))
        if kind in SIGNAL_EFFECTS:
            effects.append((kind, target, values))
            continue
        if kind in CONTROL_KINDS:
            _command_effect(commands, command_values, model, kind, target, values, item)
            continue
        try:
            if kind in INERTIA_KINDS:
                p = body_inertia_param(spec, model, target, INERTIA_KINDS[kind])
                p.min_value[:] = -np.inf
                p.max_value[:] = np.inf
            else:
                p = make_parameter(kind, model, target, min_value=-np.inf, max_value=np.inf)
                lower = KINDS[kind].lower
                if lower is not None and np.any(values < lower):
                    raise ValueError(
                        must_be(
                            "VALUE",
                            f">= {lower:g} ({KINDS[kind].lower_reason})",
                            values.tolist() if values.size > 1 else float(values[0]),
                        )
                    )
            if values.size != p.size:
                raise ValueError(
                    must_be(
                        "VALUE",
                        "one number" if p.size == 1 else f"{p.size} comma-separated numbers",
                        values,
                    )
                )
            p.value = values
            truth.add(p)
        except (KeyError, ValueError) as e:
            msg = e.args[0] if isinstance(e, KeyError) else str(e)
            raise ValueError(f"--set {item!r}: {msg}") from None
    try:  # the sensor effects' patterns and values, checked before simulating
        apply_sensor_effects(model, np.arange(n) * dt, np.zeros((n, model.nsensordata)), effects)
    except ValueError as e:
        raise ValueError(f"--set {e}") from None
    true_model = apply_param_modifiers(truth, spec) if len(truth) else model
    amp = np.ones(model.nu) * (args.amplitude if args.amplitude is not None else 1.0)
    if args.amplitude is None:
        limited = model.actuator_ctrllimited.astype(bool)
        half = 0.5 * (model.actuator_ctrlrange[:, 1] - model.actuator_ctrlrange[:, 0])
        amp[limited] = 0.8 * half[limited]
    every = _log_every(args.rate, dt)
    n_log = -(-n // every)
    ctrl_log = make_excitation(
        args.signal, n_log, model.nu, dt * every, amplitude=1.0, seed=args.seed
    )
    ctrl_log = ctrl_log * amp
    ctrl = np.repeat(ctrl_log, every, axis=0)[:n]  # each logged command held until the next
    try:
        x0 = create_initial_state(model, np.array(args.qpos, dtype=float) if args.qpos else None)
    except (KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        raise ValueError(f"--qpos: {msg}") from None
    applied = commands.apply(command_values, ctrl, model)  # what the actuators receive
    try:
        traj = sysid_rollout(true_model, None, applied, x0)[0]
    except RolloutDivergedError as e:
        given = f" with --set {' '.join(args.set)}" if args.set else ""
        raise ValueError(
            f"the simulation of {str(args.model)!r}{given} diverged, nothing written: {e}"
        ) from None
    sens, delays = apply_sensor_effects(model, traj.times, traj.sensordata, effects)
    times, sens, ctrl = traj.times[::every], sens[::every], ctrl[::every]
    if args.noise:
        sens = sens + args.noise * np.random.default_rng(args.seed + 1).standard_normal(sens.shape)
    path = write_recording(
        args.out,
        model,
        times,
        ctrl,
        sens,
        initial_qpos=traj.qpos()[0],
        initial_qvel=traj.qvel()[0],
    )
    span = float(times[-1] - times[0])
    print(
        f"wrote {times.size} samples ({span:g} s, {args.signal}) of {model.nsensor} sensors and "
        f"{model.nu} controls to {path}",
        file=err,
    )
    for d in sorted(set(delays.values())):
        names = [k for k, v in delays.items() if v == d]
        held = int(np.count_nonzero(traj.times - d < traj.times[0]))
        held += int(np.count_nonzero(traj.times - d > traj.times[-1]))
        print(
            f"  {names} delayed by {d:g} s: {held} samples at the "
            f"{'start' if d > 0 else 'end'} repeat the {'first' if d > 0 else 'last'} reading "
            "(a fit whose delay bounds include the delay does not use them)",
            file=err,
        )
    return EXIT_OK


def cmd_examples(args: argparse.Namespace, out_stream: TextIO, err: TextIO) -> int:
    from mjsysid.app.experiment import bundled_examples

    for name, path in bundled_examples().items():
        first = path.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
        print(f"{name:<14} {first}   (mjsysid fit example:{name})", file=out_stream)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace, out_stream: TextIO, err: TextIO) -> int:
    from mjsysid.app.demo import run_demo

    run_demo(quick=args.quick, out=Path(args.out), stream=out_stream, report=not args.no_report)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    from mjsysid._version import __version__

    parser = argparse.ArgumentParser(
        prog="mjsysid", description="System identification for MuJoCo models."
    )
    parser.add_argument("--version", action="version", version=f"mjsysid {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    fit = sub.add_parser(
        "fit",
        help="identify parameters from an experiment file",
        description="Fit the parameters of an experiment file (or example:NAME) "
        "and write the results folder and report.",
    )
    fit.add_argument("experiment", help="experiment YAML file, or example:NAME for a bundled one")
    fit.add_argument("--out", help="results folder (default: results/<experiment name>)")
    fit.add_argument(
        "--optimizer",
        choices=list(OPTIMIZERS),
        help="override the experiment's optimizer",
    )
    fit.add_argument("--max-iters", type=int, help="override the iteration limit")
    fit.add_argument(
        "--horizons",
        nargs="+",
        metavar="FRACTION",
        help="fit in stages on growing parts of every sequence, e.g. --horizons 0.3 1; "
        "'auto' (default: 0.1 0.3 1 where the sequences are long enough) or 'none' (one "
        "stage); overrides the experiment's optimizer.horizons",
    )
    fit.add_argument(
        "--resume",
        action="store_true",
        help="continue from <out>/checkpoint.npz after an interruption",
    )
    fit.add_argument("--no-report", action="store_true", help="do not write report.html")
    fit.add_argument("-q", "--quiet", action="store_true", help="no per-iteration progress")
    fit.set_defaults(func=cmd_fit)

    rep = sub.add_parser("report", help="(re)write the HTML report of a results folder")
    rep.add_argument("results", help="folder written by 'mjsysid fit'")
    rep.set_defaults(func=cmd_report)

    sim = sub.add_parser(
        "simulate",
        help="make a synthetic recording from a model",
        description="Simulate MODEL under an excitation signal and write a "
        "recording (.npz or .csv) that 'mjsysid fit' can read.",
    )
    sim.add_argument("model", help="MJCF or URDF file")
    sim.add_argument("--out", required=True, help="output recording (.npz or .csv)")
    sim.add_argument("--duration", type=float, default=5.0, help="seconds (default 5)")
    sim.add_argument(
        "--signal",
        default="prbs",
        choices=["prbs", "chirp", "multisine", "steps"],
        help="excitation signal (default prbs)",
    )
    sim.add_argument(
        "--amplitude",
        type=float,
        help="peak control (default: 80 %% of each actuator's ctrlrange, else 1)",
    )
    sim.add_argument(
        "--noise", type=float, default=0.0, help="std of Gaussian sensor noise (default 0)"
    )
    sim.add_argument("--seed", type=int, default=0, help="random seed (>= 0, default 0)")
    sim.add_argument(
        "--rate",
        type=float,
        default=None,
        help="log rate in Hz, as a microcontroller would: commands held and sensors read "
        "every 1/rate s (must divide the simulation rate; default: every timestep)",
    )
    sim.add_argument("--qpos", type=float, nargs="+", help="initial joint positions")
    sim.add_argument(
        "--set",
        action="append",
        metavar="KIND:TARGET=VALUE",
        help="simulate a different 'true' system, e.g. body_mass:pole=0.8 (repeatable; "
        "VALUE,VALUE,... for a parameter of several values); sensor_delay, sensor_gain and "
        "sensor_bias with a sensor pattern change the written sensor columns: a sensor "
        "reports gain * value(t - delay) + bias, e.g. sensor_delay:*_pos=0.01; "
        "control_deadband, control_gain (V or V_POS,V_NEG) and control_offset with an "
        "actuator pattern change what the actuators receive, in the order given (the "
        "recording keeps the commands; use --signal multisine or chirp to identify them), "
        "e.g. control_deadband:motor=0.14,0.08",
    )
    sim.set_defaults(func=cmd_simulate)

    ex = sub.add_parser("examples", help="list the bundled examples")
    ex.set_defaults(func=cmd_examples)

    demo = sub.add_parser(
        "demo",
        help="cart-pole: identification makes a planner succeed",
        description="A predictive-sampling planner with a wrong pole mass fails "
        "to swing up the real cart-pole; mjsysid identifies the mass "
        "from an excitation run and the planner succeeds again.",
    )
    demo.add_argument("--quick", action="store_true", help="fewer starts and shorter episodes")
    demo.add_argument("--out", default="results/demo", help="results folder")
    demo.add_argument("--no-report", action="store_true", help="do not write report.html")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Runs the command line; returns the exit status (0 ok, 1 error, 130 interrupted)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=err,
    )
    try:
        return int(args.func(args, out, err))
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return EXIT_INTERRUPTED
    except (ValueError, KeyError, OSError, TypeError, RolloutDivergedError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"error: {msg}", file=err)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
