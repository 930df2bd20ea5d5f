"""The source document's Furuta case, fitted by mjsysid from the document's own wrong guesses.

The truth is independent of the code it judges: ``bench/truth/furuta_doc.py`` simulates the
hobby project's rotary pendulum and its DC-motor model as document ``001`` writes them (its
own plain loop), and captures them as the project's ``capture.py`` does (integer PWM, the
command applied during the period that ends at the logged row, encoder quantisation, the
firmware's 20 ms clock beside a jittered host clock). mjsysid fits it with an experiment file
and its library law for that motor model (``robot_yaml_motor``: per-direction deadzone and
gear, Coulomb and viscous friction, quadratic drag, back-EMF gated by the command, limit
switch) plus the native first-order filter, rotor armature and pendulum joint friction,
starting from the document's own starting values (``INITIAL_GUESSES``: gear 0.064 for 0.424,
filter 30 ms for 5 ms, ...) within its search boxes.

Judged on a held-out capture (a multisine, another seed) cut into 0.5 s windows, each
simulated from the recorded state at its start (measured angles, velocities from the encoder
samples around it, as :func:`mjsysid.split_windows` does): the RMS angle error of the
identified model over the true model's (the truth's parameters in the same model, which the
law reproduces exactly: ``tests/bench/test_robot_yaml_motor.py``). Target: within 1.1x, in
<= 30 s on this 2-core machine.

Run ``python bench/furuta_doc_fit.py`` (``--keep DIR`` keeps the case's files).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np

import mjsysid as ms
from mjsysid.app.experiment import load_experiment
from mjsysid.fit.options import GlobalSearchOptions
from mjsysid.util.mjcf_text import spec_xml

try:  # run as a script (bench/ on sys.path) or imported from tests/bench
    from truth import furuta_doc as fd
except ImportError:  # pragma: no cover
    from bench.truth import furuta_doc as fd  # type: ignore[no-redef]

FIT = (("prbs", 0, 20.0),)  # (kind, seed, seconds) of the fitted captures
MORE = (("prbs", 0, 20.0), ("chirp", 1, 20.0))  # --more
HELD_OUT = ("multisine", 2, 20.0)
WINDOW = 0.5  # s, the held-out windows
G = fd.INITIAL_GUESSES
B = fd.SEARCH_BOUNDS


def _y(x: float) -> str:
    """A number as YAML reads it (YAML wants a dot in ``1.0e-06``)."""
    text = repr(float(x))
    return text if "e" not in text or "." in text else text.replace("e", ".0e")


def _pair(key: str) -> str:
    return f"[{_y(G[key + '_pos'])}, {_y(G[key + '_neg'])}]"


def _bounds(key: str) -> tuple[str, str]:
    lo = f"[{_y(B[key + '_pos'][0])}, {_y(B[key + '_neg'][0])}]"
    hi = f"[{_y(B[key + '_pos'][1])}, {_y(B[key + '_neg'][1])}]"
    return lo, hi


def experiment_yaml(
    captures: Sequence[str],
    held_out: str,
    window: float = 1.0,
    width: float = 0.008,
    estimate_starts: bool = True,
) -> str:
    """The experiment file a user writes for this case (the document's guesses and boxes)."""
    read = (
        "time: firmware_ms, time_scale: 0.001, control: {motor_joint_motor: action}, "
        "command_timing: before, ignore_columns: [time, pwm, motor_vel, pendulum_vel]"
    )
    indent = "\n" + " " * 8  # (the template's, which dedent removes)
    seqs = indent.join(f"  - {{name: {Path(c).stem}, file: {c}, {read}}}" for c in captures)
    law_lo = {k: _bounds(k)[0] for k in ("actuator_gear", "motor_deadzone", "motor_damping",
                                         "motor_frictionloss")}  # fmt: skip
    law_hi = {k: _bounds(k)[1] for k in law_lo}
    return textwrap.dedent(f"""\
        schema_version: 1
        name: furuta
        model: furuta.xml
        sequences:
        {seqs}
          - {{name: held_out, file: {held_out}, holdout: true, {read}}}
        force_laws:
          - law: robot_yaml_motor
            name: motor
            joint: motor_joint
            actuator: motor_joint_motor
            width: {_y(width)}   # the deadzone's edge as a ramp (PWM levels are 1/255 apart)
            nominal: {{gear: {_pair("actuator_gear")}, deadzone: {_pair("motor_deadzone")},
                       damping: {_pair("motor_damping")}, frictionloss: {_pair("motor_frictionloss")},
                       viscous_quadratic: {_y(G["viscous_quadratic"])}, back_emf_gain: {_y(G["back_emf_gain"])}}}
            min: {{gear: {law_lo["actuator_gear"]}, deadzone: {law_lo["motor_deadzone"]},
                   damping: {law_lo["motor_damping"]}, frictionloss: {law_lo["motor_frictionloss"]}}}
            max: {{gear: {law_hi["actuator_gear"]}, deadzone: {law_hi["motor_deadzone"]},
                   damping: {law_hi["motor_damping"]}, frictionloss: {law_hi["motor_frictionloss"]},
                   viscous_quadratic: {_y(B["viscous_quadratic"][1])}, back_emf_gain: {_y(B["back_emf_gain"][1])}}}
        parameters:
          - {{kind: actuator_filter_tau, target: motor_joint_motor, min: {_y(B["actuator_filter_tau"][0])}, max: {_y(B["actuator_filter_tau"][1])}}}
          - {{kind: joint_armature, target: motor_joint, min: {_y(B["motor_armature"][0])}, max: {_y(B["motor_armature"][1])}}}
          - {{kind: joint_damping, target: pendulum_joint, min: {_y(B["pendulum_damping"][0])}, max: {_y(B["pendulum_damping"][1])}}}
          - {{kind: joint_frictionloss, target: pendulum_joint, min: {_y(B["pendulum_frictionloss"][0])}, max: {_y(B["pendulum_frictionloss"][1])}}}
        shooting: {{window: {_y(window)}, estimate_initial_state: {str(estimate_starts).lower()}}}
        optimizer: {{method: lm, max_iters: 60}}
        """)  # noqa: E501


FITTED = (  # the truth's parameters the experiment fits (the rest: the CAD's links, exact)
    "actuator_gear_pos", "actuator_gear_neg", "motor_deadzone_pos", "motor_deadzone_neg",
    "motor_damping_pos", "motor_damping_neg", "motor_frictionloss_pos", "motor_frictionloss_neg",
    "actuator_filter_tau", "viscous_quadratic", "back_emf_gain", "motor_armature",
    "pendulum_damping", "pendulum_frictionloss", "ctrl_limit",
)  # fmt: skip


def model_xml() -> str:
    """The user's model: the document's MJCF with its guesses for what is fitted (and for
    ``ctrl_limit``, which these captures never reach), the CAD export's link inertials (the
    guesses' 3-4 digit roundings of them would make a different plant: a chaotic pendulum
    drifts from the truth within a second), and the two encoders."""
    spec = mujoco.MjSpec.from_string(fd.build_mjcf(fd.params_with(**{k: G[k] for k in FITTED})))
    spec.option.timestep = fd.DT_PHYSICS
    for joint in ("motor_joint", "pendulum_joint"):
        sensor = spec.add_sensor()
        sensor.name = joint.replace("_joint", "_angle")
        sensor.type = mujoco.mjtSensor.mjSENS_JOINTPOS
        sensor.objtype = mujoco.mjtObj.mjOBJ_JOINT
        sensor.objname = joint
    return spec_xml(spec)  # (MuJoCo's writer keeps 6 digits: a different plant)


def write_case(
    folder: Path,
    fit: Sequence[tuple[str, int, float]] = FIT,
    window: float = 2.0,
    width: float = 0.008,
    estimate_starts: bool = True,
) -> Path:
    """The captures, the model and the experiment file in ``folder``; returns the latter."""
    folder.mkdir(parents=True, exist_ok=True)
    captures = [fd.make_capture(seed, sec, kind, folder).name for kind, seed, sec in fit]
    kind, seed, sec = HELD_OUT
    held = fd.make_capture(seed, sec, kind, folder).name
    (folder / "furuta.xml").write_text(model_xml())
    path = folder / "experiment.yaml"
    path.write_text(experiment_yaml(captures, held, window, width, estimate_starts))
    return path


def true_values(params: ms.ParameterDict) -> ms.ParameterDict:
    """``params`` with the truth's values (the law's, the filter's, the joints')."""
    t = fd.TRUE_PARAMS
    out = params.copy()
    values = {
        "motor_gear": [t["actuator_gear_pos"], t["actuator_gear_neg"]],
        "motor_deadzone": [t["motor_deadzone_pos"], t["motor_deadzone_neg"]],
        "motor_damping": [t["motor_damping_pos"], t["motor_damping_neg"]],
        "motor_frictionloss": [t["motor_frictionloss_pos"], t["motor_frictionloss_neg"]],
        "motor_viscous_quadratic": [t["viscous_quadratic"]],
        "motor_back_emf_gain": [t["back_emf_gain"]],
        "motor_joint_motor_filter_tau": [t["actuator_filter_tau"]],
        "motor_joint_armature": [t["motor_armature"]],
        "pendulum_joint_damping": [t["pendulum_damping"]],
        "pendulum_joint_frictionloss": [t["pendulum_frictionloss"]],
    }
    for name, value in values.items():
        out[name].value = np.asarray(value, dtype=np.float64)
    return out


def held_out_rms(exp: object, params: ms.ParameterDict, cut: bool = False) -> dict[str, float]:
    """Per angle: the RMS error [rad] over the held-out capture's windows, each simulated
    from the recorded state at its start (``cut``: with the document's hard deadzone cut,
    for the true model, instead of the fitted ramp)."""
    assert exp.holdout is not None  # type: ignore[attr-defined]
    windows = ms.split_windows(exp.holdout, WINDOW)  # type: ignore[attr-defined]
    laws = list(dict(exp.residual_options).get("force_laws", []))  # type: ignore[attr-defined]
    if cut:
        laws = [dataclasses.replace(law, width=0.0) for law in laws]
    fn = ms.build_residual_fn([windows], force_laws=laws)
    physical = ms.ParameterDict(
        [p for p in params.values() if not p.meta.get("kind", "").startswith("initial_")]
    )
    errors: dict[str, list[np.ndarray]] = {}
    for pred in fn.predict(None, physical):
        diff = pred.predicted_at_measured.data - pred.measured_used.data
        for name, (_, cols) in pred.measured_used.signal_mapping.items():
            errors.setdefault(name, []).append(diff[:, cols].ravel())
    return {k: float(np.sqrt(np.mean(np.concatenate(v) ** 2))) for k, v in errors.items()}


FAR_GEAR = {"0.1": 0.1 * fd.TRUE_PARAMS["actuator_gear_pos"], "guess": G["actuator_gear_pos"]}


def far_start(params: ms.ParameterDict, gear: float) -> ms.ParameterDict:
    """The far start: the motor's gear (torque constant) at ``gear``, every other physical
    parameter at its lower bound (the window starts stay at their recorded values)."""
    out = params.copy()
    for name, p in out.items():
        if p.frozen or p.meta.get("kind", "").startswith("initial_"):
            continue
        p.value = np.full_like(p.value, gear) if name == "motor_gear" else p.min_value.copy()
    return out


def _fit(
    exp: object,
    start: ms.ParameterDict,
    far: bool,
    budget: int | None,
    profile: bool = True,
    rollout: str = "cpu",
) -> tuple:
    """The fit of ``exp`` from ``start`` (``far``: with the global stage, default budget
    unless ``budget``; ``profile``: the deadzones' profile after it; ``rollout``: where the
    populations run, ``FitOptions.rollout``); the identified parameters, the result and the
    wall time."""
    options = exp.fit_options.replace(rollout=rollout)  # type: ignore[attr-defined]
    if not profile:
        options = options.replace(threshold_profile=None)
    if far:
        options = options.replace(global_search=GlobalSearchOptions(budget=budget))
    fn = exp.build_residual_fn()  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    identified, result = ms.optimize(start, fn, options=options)
    return identified, result, time.perf_counter() - t0


def truth_with_fitted_starts(exp: object, options: object) -> tuple[float, str]:
    """The cost of the truth's physics with the window starts fitted (the physical values
    held within 1e-9 of the truth): the lowest cost the fitted model's structure reaches on
    this data, to set beside the fit's end cost (when the fit ends far above it, the search
    stopped short; when near it, the data do not tell the two apart). Its status too."""
    pinned = true_values(exp.params)  # type: ignore[attr-defined]
    for p in pinned.values():
        if not (p.frozen or p.meta.get("kind", "").startswith("initial_")):
            p.min_value, p.max_value = p.value * (1 - 1e-9), p.value * (1 + 1e-9)
    opts = options.replace(allow_no_effect=True, verbose=False)  # type: ignore[attr-defined]
    _, res = ms.optimize(pinned, exp.build_residual_fn(), options=opts)  # type: ignore[attr-defined]
    return float(res.cost), res.status.name


def level_limit(exp: object) -> tuple[list[object], dict[str, tuple[float, float]]]:
    """What the fitted captures' command levels leave open: the range around each of the
    truth's deadzone entries that drives the recorded PWM levels alike
    (:mod:`mjsysid.objective.levels`), and per angle the least and largest held-out RMS over
    the true model's with the deadzone moved within those ranges (every other value the
    truth's; 3 x 3 points: each range's two ends and middle). No estimator can do better
    than this range from these captures; where it is wide, a capture with commands at the
    levels in between is what narrows it."""
    truth = true_values(exp.params)  # type: ignore[attr-defined]
    brackets = exp.build_residual_fn().threshold_brackets(truth)  # type: ignore[attr-defined]
    base = held_out_rms(exp, truth, cut=True)
    ends = [np.linspace(b.below + 1e-9, b.above, 3) for b in brackets]  # type: ignore[attr-defined]
    ratios: dict[str, list[float]] = {}
    for pos in ends[0]:
        for neg in ends[1]:
            moved = truth.copy()
            moved["motor_deadzone"].value = np.array([pos, neg])
            for k, v in held_out_rms(exp, moved, cut=True).items():
                ratios.setdefault(k, []).append(v / base[k])
    return brackets, {k: (min(v), max(v)) for k, v in ratios.items()}


def sensitivity(exp: object, identified: ms.ParameterDict) -> list[tuple[str, dict[str, float]]]:
    """Held-out RMS over the true model's, per physical entry: the truth with that one entry
    at its identified value (how far each misfit alone moves the held-out error)."""
    truth = true_values(exp.params)  # type: ignore[attr-defined]
    base = held_out_rms(exp, truth, cut=True)
    rows = []
    for name, p in identified.items():
        if p.frozen or p.meta.get("kind", "").startswith("initial_"):
            continue
        for j in range(p.size):
            one = truth.copy()
            value = one[name].value.copy()
            value[j] = p.value[j]
            one[name].value = value
            rms = held_out_rms(exp, one)
            rows.append((f"{name}[{j}]", {k: rms[k] / base[k] for k in rms}))
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", help="write the case here (default: a temporary folder)")
    ap.add_argument("--window", type=float, default=2.0, help="shooting window (s)")
    ap.add_argument("--width", type=float, default=0.008, help="deadzone ramp (ctrl)")
    ap.add_argument("--more", action="store_true", help="fit a chirp capture too")
    ap.add_argument(
        "--far",
        choices=sorted(FAR_GEAR),
        help="far start: gear 0.1x the truth or the document's guess, the rest at the lower "
        "bounds, with the global stage (default budget)",
    )
    ap.add_argument("--budget", type=int, help="the global stage's budget (with --far)")
    ap.add_argument(
        "--rollout",
        choices=("cpu", "warp"),
        default="cpu",
        help="where the populations (the global stage) run: MuJoCo's CPU batch or MuJoCo "
        "Warp (pip install -e '.[warp]'; a GPU for speed); the local fit stays on the CPU",
    )
    ap.add_argument(
        "--no-profile",
        action="store_true",
        help="skip the deadzones' profile over the recorded levels after the fit",
    )
    ap.add_argument(
        "--recorded-starts",
        action="store_true",
        help="simulate every window from its recorded start (estimate_initial_state: false)",
    )
    ap.add_argument(
        "--diagnose",
        action="store_true",
        help="also fit the window starts at the truth's physics (the lowest cost within reach) "
        "and print each identified entry's effect alone on the held-out error",
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        fit = MORE if args.more else FIT
        path = write_case(folder, fit, args.window, args.width, not args.recorded_starts)
        exp = load_experiment(path)
        start = far_start(exp.params, FAR_GEAR[args.far]) if args.far else exp.params
        identified, result, seconds = _fit(
            exp, start, bool(args.far), args.budget, not args.no_profile, args.rollout
        )
        truth = true_values(exp.params)
        truth_cost = float(0.5 * np.sum(exp.build_residual_fn()(truth.as_vector(), truth) ** 2))
        label = "start (far)" if args.far else "start (guesses)"
        rms = {label: held_out_rms(exp, start),
               "identified": held_out_rms(exp, identified),
               "truth": held_out_rms(exp, truth, cut=True)}  # fmt: skip
        if args.diagnose:
            floor = truth_with_fitted_starts(exp, exp.fit_options)
            alone = sensitivity(exp, identified)
            brackets, spread = level_limit(exp)
    captures = "prbs+chirp" if args.more else "prbs"
    starts = "recorded" if args.recorded_starts else "estimated"
    print(f"window {args.window} s ({starts} starts), ramp {args.width}, captures {captures}")
    if args.far:
        g = result.global_search
        print(f"far start (gear {FAR_GEAR[args.far]:.4g}, the rest at the lower bounds)")
        print(
            f"global stage ({args.rollout}): {g.wall_time:.1f} s, {g.evaluations} evaluations, "
            f"{g.message}"
        )
    print(f"fit: {seconds:.1f} s, {result.nit} iterations, status {result.status.name}")
    tp = result.threshold_profile
    if tp is not None:
        print(f"threshold profile: {tp.wall_time:.1f} s, then the fit from its point "
              f"{tp.refit_wall_time:.1f} s: {tp.text()}")  # fmt: skip
    print(f"cost: start {result.initial_cost:.4g}, end {result.cost:.4g}, truth {truth_cost:.4g}")
    if args.diagnose:
        print(f"cost of the truth's physics with its window starts fitted: {floor[0]:.4g} "
              f"({floor[1]})")  # fmt: skip
    names = sorted(rms["truth"])
    print(f"{'held-out RMS [mrad]':22s}" + "".join(f"{n:>18s}" for n in names))
    for row, vals in rms.items():
        print(f"{row:22s}" + "".join(f"{1e3 * vals[n]:18.3f}" for n in names))
    ratio = {n: rms["identified"][n] / rms["truth"][n] for n in names}
    print(f"{'identified / truth':22s}" + "".join(f"{ratio[n]:18.3f}" for n in names))
    print("\nidentified vs true values:")
    t = true_values(exp.params)
    for name, p in identified.items():
        if p.meta.get("kind", "").startswith("initial_"):
            continue
        ours, true = (np.array2string(v, precision=6) for v in (p.value, t[name].value))
        print(f"  {name:34s} {ours:>28s}  truth {true}")
    if args.diagnose:
        print("\nwhat the fitted captures' PWM levels leave open of the true deadzone:")
        for b in brackets:
            print(f"  {b.name}: ({b.below:.5f}, {b.above:.5f}] = ({255 * b.below:.1f}, "
                  f"{255 * b.above:.1f}] PWM; truth {b.value:.5f}")  # fmt: skip
        print(
            "  held-out RMS / truth's with the deadzone anywhere there (the rest exact): "
            + ", ".join(f"{k} {lo:.2f}-{hi:.2f}x" for k, (lo, hi) in spread.items())
        )
        print("\nheld-out RMS / truth's with one entry at its identified value:")
        for entry, ratio in alone:
            print(f"  {entry:34s}" + "".join(f"{ratio[n]:10.3f}" for n in names))


if __name__ == "__main__":
    main()
