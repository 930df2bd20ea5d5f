"""The cart-pole demo: identification makes a model-based planner succeed again.

1. The "real" cart-pole has a 0.8 kg pole; the planner's model (the bundled ``cartpole.xml``)
   believes 0.2 kg. A predictive-sampling planner swinging the pole up from hanging mostly
   fails with the wrong model.
2. An excitation run on the real cart-pole (multisine force, hanging pole, sensor noise) is
   recorded, and mjsysid identifies the pole mass and the two joint dampings, starting from
   the planner's belief, together with the initial state (the encoders' first reading is as
   noisy as the rest).
3. The wrong, identified (the MJCF written by ``save_results``) and true models are
   evaluated on three axes by :func:`mjsysid.lab.evaluate.evaluate_models`: one-step and
   open-loop prediction errors on a held-out excitation run, and the planner's swing-up
   success as the downstream task (:func:`mjsysid.lab.evaluate.planner_task`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import mujoco
import numpy as np
import yaml

from mjsysid.data.excitation import multisine
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import create_initial_state
from mjsysid.data.timeseries import TimeSeries
from mjsysid.fit.confidence import compute_confidence
from mjsysid.fit.optimize import optimize
from mjsysid.lab.evaluate import EvaluationReport, evaluate_models, planner_task
from mjsysid.lab.evaluate_report import format_table
from mjsysid.lab.planning import cartpole_model, cartpole_starts
from mjsysid.objective.initial_state import initial_state_params
from mjsysid.objective.residual import build_residual_fn
from mjsysid.output.results import save_results
from mjsysid.params.inertia import InertiaType, body_inertia_param
from mjsysid.params.kinds import make_parameter
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.rollout import sysid_rollout
from mjsysid.util.files import atomic_write_text

TRUE_POLE_MASS = 0.8
#: Encoder-like noise: 1 mrad / 1 mm on positions, 0.02 rad/s (m/s) on velocities.
SENSOR_NOISE = {"cart_pos": 1e-3, "pole_angle": 1e-3, "cart_vel": 2e-2, "pole_angvel": 2e-2}


@dataclass
class DemoResult:
    """Success counts per planner model, the identified mass and its interval, and the
    three-axis evaluation of the three models (:func:`mjsysid.lab.evaluate.evaluate_models`)."""

    successes: dict[str, int]
    starts: int
    identified_mass: float
    half_width: float
    wall_time: float
    evaluation: EvaluationReport | None = None


def _spec() -> mujoco.MjSpec:
    path = resources.files("mjsysid") / "examples" / "cartpole" / "cartpole.xml"
    return mujoco.MjSpec.from_string(path.read_text())


def _parameters(spec: mujoco.MjSpec, model: mujoco.MjModel) -> ParameterDict:
    params = ParameterDict()
    params.add(body_inertia_param(spec, model, "pole", InertiaType.Mass, mass_bounds=(0.25, 10.0)))
    params.add(make_parameter("joint_damping", model, "slider", max_value=1.0))
    params.add(make_parameter("joint_damping", model, "hinge", max_value=0.1))
    return params


def record_excitation(
    duration: float = 6.0, seed: int = 0
) -> tuple[TimeSeries, TimeSeries, np.ndarray]:
    """Runs the real cart-pole under a multisine force and returns noisy measurements.

    Returns:
      ``(sensordata, control, initial_state)``.
    """
    real = cartpole_model(TRUE_POLE_MASS)
    dt = real.opt.timestep
    n = round(duration / dt)
    ctrl = multisine(n, 1, dt, amplitude=3.0, f0=0.5, f1=3.0, seed=seed)
    x0 = create_initial_state(real, qpos=[0.0, np.pi - 0.3])
    traj = sysid_rollout(real, None, ctrl, x0)[0]
    rng = np.random.default_rng(seed + 1)
    sens = TimeSeries.from_names(traj.times, traj.sensordata, real)
    noisy = np.array(sens.data)
    for name, sigma in SENSOR_NOISE.items():
        c = sens.columns(name)
        noisy[:, c] += sigma * rng.standard_normal((n, c.size))
    measured = TimeSeries(traj.times, noisy, sens.signal_mapping)
    control = TimeSeries.from_control_names(traj.times, ctrl, real)
    # The initial state is read from the (noisy) encoders, as on hardware.
    x0_meas = create_initial_state(
        real,
        qpos=noisy[0, [measured.columns("cart_pos")[0], measured.columns("pole_angle")[0]]],
        qvel=noisy[0, [measured.columns("cart_vel")[0], measured.columns("pole_angvel")[0]]],
    )
    return measured, control, x0_meas


@dataclass(frozen=True)
class _Say:
    """Prints the demo's lines to ``stream`` (nowhere when it is ``None``)."""

    stream: TextIO | None

    def __call__(self, msg: str) -> None:
        if self.stream is not None:
            print(msg, file=self.stream, flush=True)


@dataclass(frozen=True)
class Identification:
    """Step 2 of the demo: the identified pole mass and the model the planner gets.

    Attributes:
        mass: Identified pole mass [kg].
        half_width: Half-width of its 95 % interval [kg].
        folder: The results folder (identified MJCF, parameters, report).
        model: The identified cart-pole, compiled from the written MJCF.
    """

    mass: float
    half_width: float
    folder: Path
    model: mujoco.MjModel


@dataclass
class DemoFit:
    """The demo's identification problem: the excitation run, the parameters, the residual."""

    seq: ModelSequences
    params: ParameterDict
    rf: Any


def demo_problem(quick: bool) -> DemoFit:
    """Records the excitation run on the real cart-pole (deterministic) and sets up the fit;
    ``mjsysid report`` rebuilds a demo folder's report from it."""
    spec = _spec()
    model = spec.compile()
    measured, control, x0 = record_excitation(duration=4.0 if quick else 6.0)
    seq = ModelSequences("cartpole", spec, "excitation", x0, control, measured)
    params = _parameters(spec, model)
    params.update(initial_state_params(seq))  # the encoders' start reading is noisy too
    return DemoFit(seq, params, build_residual_fn([seq]))


def identify(out: Path, *, quick: bool, report: bool, say: _Say) -> Identification:
    """Records an excitation run on the real cart-pole and identifies its pole mass.

    Args:
      out: Results folder (with a ``run.yaml`` for ``mjsysid report``).
      quick: A 4 s excitation run instead of 6 s.
      report: Write the HTML report when the report extra is installed.
      say: Where the progress lines go.
    """
    problem = demo_problem(quick)
    seq, params, rf = problem.seq, problem.params, problem.rf
    opt_params, result = optimize(params, rf, max_iters=50)
    conf = compute_confidence(result, rf, params=opt_params)
    folder = save_results(out, [seq], params, opt_params, result, rf, confidence=conf)
    atomic_write_text(folder / "run.yaml", yaml.safe_dump({"demo": {"quick": quick}}))
    mass = float(opt_params["pole_mass"].value[0])
    hw = float(conf.half_widths[conf.names.index("pole_mass")])
    say(f"    identified pole mass {mass:.4f} kg ± {hw:.4f} (95 %), {result.message}")
    if report:
        say("    writing the report ...")
        try:
            from mjsysid.output.report import default_report

            path = default_report([seq], params, opt_params, result, rf, folder, confidence=conf)
            say(f"    report: {path}")
        except ImportError as e:
            say(f"    (no report: {e})")
    identified = mujoco.MjModel.from_xml_path(str(folder / "cartpole.xml"))
    return Identification(mass, hw, folder, identified)


def held_out_run(quick: bool) -> ModelSequences:
    """A second excitation run on the real cart-pole (another multisine, other noise), for
    the one-step and open-loop errors: data the fit did not see."""
    measured, control, x0 = record_excitation(duration=4.0 if quick else 6.0, seed=7)
    return ModelSequences("cartpole", _spec(), "held-out", x0, control, measured)


def run_demo(
    *,
    quick: bool = False,
    out: Path | str = "results/demo",
    stream: TextIO | None = None,
    report: bool = True,
    starts: int | None = None,
    progress: TextIO | None = None,
) -> DemoResult:
    """Runs the demo and prints the evaluation and success tables to ``stream``.

    Args:
      quick: 4 starts of 8 s instead of 10 starts of 10 s.
      out: Results folder (identified model, parameters, report).
      stream: Where to print the steps and tables (default: nowhere).
      report: Write the HTML report when the report extra is installed.
      starts: Override the number of starts.
      progress: Where to print a line per model and per planner episode (default: nowhere;
        ``mjsysid demo`` uses stderr unless ``-q``).
    """
    t0 = time.perf_counter()
    say, tell = _Say(stream), _Say(progress)
    nstart = starts if starts is not None else (4 if quick else 10)
    duration = 8.0 if quick else 10.0
    real = cartpole_model(TRUE_POLE_MASS)
    believed = cartpole_model()
    say(
        f"The real cart-pole's pole weighs {TRUE_POLE_MASS} kg; the planner's model says "
        f"{believed.body('pole').mass[0]:.1f} kg."
    )
    say("1/2 recording an excitation run on the real cart-pole and identifying ...")
    found = identify(Path(out), quick=quick, report=report, say=say)
    say(
        "2/2 evaluating the wrong, identified and true models: one-step and open-loop errors "
        f"on a held-out run, then {nstart} planner swing-ups of {duration:g} s each ..."
    )
    task = planner_task(real, cartpole_starts(nstart, seed=0), duration=duration, progress=tell)
    evaluation = evaluate_models(
        {"wrong": believed, "identified": found.model, "true": real},
        held_out_run(quick),
        downstream=task,
        progress=tell,
    )
    successes = {m.name: m.downstream.successes for m in evaluation.models if m.downstream}
    say("")
    say(format_table(evaluation))
    _print_table(say, successes, nstart, found.mass)
    wall = time.perf_counter() - t0
    mass, hw = found.mass, found.half_width
    say(
        f"\nidentified pole mass: {mass:.4f} kg, 95 % interval [{mass - hw:.4f}, {mass + hw:.4f}] "
        f"(true {TRUE_POLE_MASS} kg); results in {found.folder}; {wall:.0f} s"
    )
    return DemoResult(successes, nstart, mass, hw, wall, evaluation)


def _print_table(say: _Say, successes: dict[str, int], nstart: int, mass: float) -> None:
    """The success count of each planner model, one line each."""
    labels = {
        "wrong": "wrong (0.2 kg)",
        "identified": f"identified ({mass:.3f} kg)",
        "true": f"true ({TRUE_POLE_MASS} kg)",
    }
    say("")
    say(f"{'planner model':<26} {'swing-up success':>18}")
    for key, k in successes.items():
        say(f"{labels[key]:<26} {k:>10d}/{nstart}")
