"""Coverage of mjsysid's 95 % intervals on three problems with a known truth (issue #20).

A benchmark, not a test. For every problem the truth is known and each draw adds fresh noise
to its data, refits from the start values and asks whether each parameter's interval
(:func:`mjsysid.fit.confidence.compute_confidence`) holds the truth. 95 % intervals should
hold it in about 95 % of the draws (90-99 % with 20-50 draws).

Problems:

* ``arm``: a 6-dof arm with the UR5e's kinematics (shoulder pan, shoulder lift, elbow, three
  wrist joints; link masses near the UR5e's), torque-driven, joint positions and velocities
  measured; 6 link masses and 6 joint dampings (smooth).
* ``quadruped``: problem 4 of ``run.py`` (a 12-kg quadruped standing on a floor with
  frictional feet, position-servoed joints): 5 masses, 8 dampings, 4 servo gains; contacts
  make the cost rough.
* ``misspecified``: the ``arm`` fitted with a model that misses physics: the data come from
  the arm with 3x the joint armature (0.15 instead of 0.05, not fitted). The target is the
  best approximating values (the fit to the noise-free data), as a misspecified fit can only
  estimate those; linearised intervals and the default (``auto``: HAC when the residual is
  not white) are scored on the same fits, with the share of fits that carry the "model
  cannot reproduce the data" caveat.
* ``deadzone``: a rotor driven through the Furuta document's motor model (its own loop in
  ``bench/truth/furuta_doc.py``) by a fresh random-hold integer PWM per draw, 15 s, the
  encoder's 1320 counts the only noise; ``robot_yaml_motor``'s gear, deadzone, damping and
  Coulomb friction per direction fitted from the truth; the deadzones' default intervals
  (widened to the PWM levels around them) against the same fits' without the widening.
* ``motor``: the bundled ``dcmotor`` example (deadbands, reverse gain, filter lag, back-EMF,
  a 20 s run cut into 2 s windows whose initial states are fitted too). Its truth is the fit
  to the bundled recording; each draw's data are the truth's prediction plus noise (the
  residual ``r'(θ) = r(θ) − r(θ*) − ε``).

Noise: Gaussian, independent per sample, 1 % of each sensor's standard deviation (one level
for all components of a 3-D sensor, the RMS of theirs; arm, quadruped) or of the encoder's
(motor). Usage::

    python bench/interval_coverage.py                      # all three, 20 draws each
    python bench/interval_coverage.py --problem arm --draws 50
    python bench/interval_coverage.py --problem motor --method bootstrap --draws 20
    python bench/interval_coverage.py --problem misspecified --draws 20
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

try:  # run as a script (bench/ on sys.path) or imported from tests/bench
    import problems as pb
    from adapters import ours_params
    from truth import furuta_doc as fd
except ImportError:  # pragma: no cover
    from bench.adapters import ours_params  # type: ignore[no-redef]
    from bench.truth import furuta_doc as fd  # type: ignore[no-redef]

    from bench import problems as pb  # type: ignore[no-redef]

import mjsysid as ms
from mjsysid.app.experiment import bundled_examples, load_experiment
from mjsysid.fit.confidence import compute_confidence
from mjsysid.sim.laws.core import force_law_params
from mjsysid.sim.laws.motors import RobotYamlMotor

NOISE = 0.01  # noise std as a fraction of each signal's std


@dataclass
class Case:
    """A problem ready for draws: ``fit(rng) -> (x̂, Confidence)`` and the truth."""

    name: str
    names: list[str]
    truth: np.ndarray
    groups: list[str]
    fit: Callable[[np.random.Generator], tuple[np.ndarray, Any, Any]]


# -- the arm ----------------------------------------------------------------------------------
UR5E_LINKS = (  # (name, joint axis, body offset, capsule end, mass): the UR5e's proportions
    ("shoulder", "0 0 1", "0 0 0.163", "0 0 0.1", 3.7),
    ("upper_arm", "0 1 0", "0 0.138 0", "0 0 0.425", 8.4),
    ("forearm", "0 1 0", "0 -0.131 0.425", "0 0 0.392", 2.3),
    ("wrist1", "0 1 0", "0 0 0.392", "0 0.127 0", 1.2),
    ("wrist2", "0 0 1", "0 0.127 0", "0 0 0.1", 1.2),
    ("wrist3", "0 1 0", "0 0 0.1", "0 0.1 0", 0.25),
)


def ur5e_like_xml(timestep: float = 0.002) -> str:
    """A torque-driven 6-dof arm with the UR5e's joint layout (capsule links)."""
    body, close = "", ""
    for name, axis, pos, end, mass in UR5E_LINKS:
        com = " ".join(f"{0.5 * float(v):g}" for v in end.split())
        body += (
            f'<body name="{name}" pos="{pos}">'
            f'<joint name="{name}_j" axis="{axis}" damping="{0.8 if mass > 2 else 0.2}" '
            'armature="0.05"/>'
            f'<inertial pos="{com}" mass="{mass}" '
            f'diaginertia="{0.01 * mass} {0.01 * mass} {0.004 * mass}"/>'
            f'<geom type="capsule" fromto="0 0 0 {end}" size="0.04"/>'
        )
        close += "</body>"
    acts = "".join(
        f'<motor name="{n}_m" joint="{n}_j" gear="1" ctrlrange="-60 60"/>' for n, *_ in UR5E_LINKS
    )
    sens = "".join(f'<jointpos name="{n}_q" joint="{n}_j"/>' for n, *_ in UR5E_LINKS)
    sens += "".join(f'<jointvel name="{n}_v" joint="{n}_j"/>' for n, *_ in UR5E_LINKS)
    return (
        f'<mujoco model="ur5e_like"><option timestep="{timestep}"/>'
        '<default><geom contype="0" conaffinity="0"/></default>'
        f"<worldbody>{body}{close}</worldbody><actuator>{acts}</actuator>"
        f"<sensor>{sens}</sensor></mujoco>"
    )


def arm_problem(duration: float = 1.0, nseq: int = 2) -> pb.Problem:
    rng = np.random.default_rng(20)
    xml = ur5e_like_xml()
    model = mujoco.MjModel.from_xml_string(xml)
    params = [pb._mass_def(model, n, float(pb.perturb(rng, m))) for n, _, _, _, m in UR5E_LINKS]
    params += [
        pb._damping_def(model, f"{n}_j", float(pb.perturb(rng, model.dof_damping[i])))
        for i, (n, *_) in enumerate(UR5E_LINKS)
    ]

    def make(model_true: mujoco.MjModel) -> tuple[list[np.ndarray], list[np.ndarray]]:
        r = np.random.default_rng(21)
        n = round(duration / model_true.opt.timestep)
        x0s = [pb.full_state(model_true, r.uniform(-0.5, 0.5, 6)) for _ in range(nseq)]
        scale = np.array([40.0, 60.0, 30.0, 8.0, 8.0, 2.0])
        ctrls = [pb.piecewise_constant(r, n, 25, scale) for _ in range(nseq)]
        return x0s, ctrls

    return pb._finish("arm", "UR5e-like arm", xml, params, make)


MISSPECIFIED_ARMATURE = 0.15  # the data's joint armature; the fitted model keeps 0.05


def misspecified_problem(duration: float = 1.0, nseq: int = 2) -> pb.Problem:
    """The arm, its data simulated with :data:`MISSPECIFIED_ARMATURE` (model: 0.05)."""
    prob = arm_problem(duration, nseq)
    wrong = prob.xml.replace('armature="0.05"', f'armature="{MISSPECIFIED_ARMATURE:g}"')
    model_true = pb.compile_with(wrong, prob.params, [p.truth for p in prob.params])
    seqs = [
        pb.SeqData(s.name, s.x0, s.times, s.ctrl, pb.simulate(model_true, s.x0, s.ctrl))
        for s in prob.sequences
    ]
    return pb.Problem("misspecified", "UR5e-like arm, armature 3x", prob.xml, prob.params, seqs)


def misspecified_case(max_iters: int) -> tuple[Case, dict[str, list[np.ndarray]], list[bool]]:
    """The misspecified arm: ``(case, hits, caveat said)``; the case scores the default
    intervals against the best approximating values; ``hits`` holds the linearised
    intervals' hits of those (``"linear"``) and both methods' hits of the data's own truth
    (``"linear truth"``, ``"auto truth"``)."""
    prob = misspecified_problem()
    spec = prob.spec()
    model = spec.compile()
    names = ours_params(prob, spec, model).get_non_frozen_parameter_names()
    std = [_sensor_std(model, s.sensordata) for s in prob.sequences]

    def data(noisy: list[np.ndarray]) -> Any:
        seqs = prob.sequences
        return ms.build_residual_fn([ms.ModelSequences(
            prob.key, spec, [s.name for s in seqs], [s.x0 for s in seqs],
            [ms.TimeSeries.from_control_names(s.times, s.ctrl, model) for s in seqs],
            [ms.TimeSeries.from_names(s.times, y, model) for s, y in zip(seqs, noisy, strict=True)],
        )])  # fmt: skip

    best = ours_params(prob, spec, model)
    best.update_from_vector(prob.truth)
    _, res0 = ms.optimize(best, data([s.sensordata for s in prob.sequences]), max_iters=300)
    target = res0.x.copy()
    hits: dict[str, list[np.ndarray]] = {"linear": [], "linear truth": [], "auto truth": []}
    flagged: list[bool] = []
    truth = prob.truth

    def fit(rng: np.random.Generator) -> tuple[np.ndarray, Any, Any]:
        noisy = [
            s.sensordata + NOISE * sd * rng.standard_normal(s.sensordata.shape)
            for s, sd in zip(prob.sequences, std, strict=True)
        ]
        rf = data(noisy)
        opt, res = ms.optimize(ours_params(prob, spec, model), rf, max_iters=max_iters)
        auto = compute_confidence(res, rf, params=opt)
        lin = compute_confidence(res, rf, params=opt, method="linear")
        for key, conf, point in (
            ("linear", lin, target),
            ("linear truth", lin, truth),
            ("auto truth", auto, truth),
        ):
            lo, hi = conf.ends().T
            hits[key].append((lo <= point) & (point <= hi))
        flagged.append(any("cannot reproduce the data" in c for c in auto.caveats()))
        return res.x, auto, res

    case = Case("misspecified", names, target, [_group(n) for n in names], fit)
    return case, hits, flagged


def _group(name: str) -> str:
    for key, label in (
        ("mass", "masses"),
        ("damping", "dampings"),
        ("_kp", "servo gains"),
        ("qpos0", "window starts"),
        ("qvel0", "window starts"),
        ("act0", "window starts"),
    ):
        if key in name:
            return label
    return "physics"


def _sensor_std(model: mujoco.MjModel, data: np.ndarray) -> np.ndarray:
    """``(nsensordata,)`` one standard deviation per sensor (the RMS of its components'),
    as a sensor's noise is one level for all its components (mjsysid estimates one
    variance per measured signal)."""
    sd = np.std(data, axis=0)
    out = np.empty_like(sd)
    for i in range(model.nsensor):
        a, d = int(model.sensor_adr[i]), int(model.sensor_dim[i])
        out[a : a + d] = np.sqrt(np.mean(sd[a : a + d] ** 2))
    return out


def bench_case(prob: pb.Problem, start: str, max_iters: int, rough: bool = True) -> Case:
    """A :mod:`problems` problem whose draws add noise to its sensor data."""
    spec = prob.spec()
    model = spec.compile()
    template = ours_params(prob, spec, model)
    names = template.get_non_frozen_parameter_names()
    std = [_sensor_std(model, s.sensordata) for s in prob.sequences]

    def fit(rng: np.random.Generator) -> tuple[np.ndarray, Any, Any]:
        seqs = prob.sequences
        noisy = [
            s.sensordata + NOISE * sd * rng.standard_normal(s.sensordata.shape)
            for s, sd in zip(seqs, std, strict=True)
        ]
        data = ms.ModelSequences(
            prob.key,
            spec,
            [s.name for s in seqs],
            [s.x0 for s in seqs],
            [ms.TimeSeries.from_control_names(s.times, s.ctrl, model) for s in seqs],
            [ms.TimeSeries.from_names(s.times, y, model) for s, y in zip(seqs, noisy, strict=True)],
        )
        rf = ms.build_residual_fn([data])
        params = ours_params(prob, spec, model)
        if start == "truth":
            params.update_from_vector(prob.truth)
        opt, res = ms.optimize(params, rf, max_iters=max_iters)
        return res.x, compute_confidence(res, rf, params=opt, rough=rough), res

    return Case(prob.key, names, prob.truth, [_group(n) for n in names], fit)


@dataclass
class _Shifted:
    """``r'(θ) = r(θ) − r(θ*) − ε``: the residual of data that are the truth's prediction
    plus the noise ``ε``; the rest (signal groups, blocks) is the wrapped function's."""

    fn: Any
    offset: np.ndarray

    def __call__(self, x: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        r = np.asarray(self.fn(x, params))
        return r - (self.offset if r.ndim == 1 else self.offset[:, None])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)


def motor_case(start: str, max_iters: int, method: str, draws: int) -> Case:
    """The dcmotor example with synthetic data around its fit to the bundled recording."""
    exp = load_experiment(bundled_examples()["dcmotor"])
    rf = exp.build_residual_fn()
    truth_params, res = ms.optimize(exp.params, rf, max_iters=100)
    truth = res.x.copy()
    r_star = np.asarray(rf(truth, truth_params))
    meas = np.concatenate([np.asarray(m.data_2d).ravel() for *_, m in exp.sequences.sequences()])
    sigma = NOISE * float(np.std(meas))
    names = list(res.parameter_names)

    def fit(rng: np.random.Generator) -> tuple[np.ndarray, Any, Any]:
        shifted = _Shifted(rf, r_star + sigma * rng.standard_normal(r_star.size))
        params = exp.params.copy() if start == "cad" else truth_params.copy()
        opt, res = ms.optimize(params, shifted, max_iters=max_iters)
        kw = {"method": method, "draws": draws} if method == "bootstrap" else {}
        return res.x, compute_confidence(res, shifted, params=opt, **kw), res

    return Case("motor", names, truth, [_group(n) for n in names], fit)


# -- a deadzone on integer PWM -----------------------------------------------------------------
ROTOR_XML = """
<mujoco model="rotor">
  <option timestep="0.002"/>
  <worldbody>
    <body name="arm">
      <joint name="motor_joint" type="hinge" axis="0 0 1" armature="0.002773"/>
      <geom type="capsule" fromto="0 0 0 0.08 0 0" size="0.006" mass="0.021"/>
    </body>
  </worldbody>
  <actuator>
    <general name="motor" joint="motor_joint" dyntype="filter" dynprm="0.005035"
             gear="0.4246065" ctrlrange="-0.592 0.592" ctrllimited="true"/>
  </actuator>
  <sensor><jointpos name="motor_angle" joint="motor_joint"/></sensor>
</mujoco>
"""
DEADZONE_FITTED = ("gear", "deadzone", "damping", "frictionloss")  # the law's, per direction


def rotor_capture(seed: int, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """A rotor driven by the Furuta document's motor model (``bench/truth/furuta_doc.py``'s
    ``transform_ctrl`` and ``motor_force`` in a plain loop of its own, 10 steps of 2 ms per
    20 ms command) under the capture's random-hold integer PWM (seed ``seed``): ``(pwm (N,),
    encoder angle (N + 1,))``, the angle at each tick quantised to 1320 counts."""
    model = mujoco.MjModel.from_xml_string(ROTOR_XML)
    data = mujoco.MjData(model)
    pwm = fd.prbs_pwm(round(seconds / fd.DT_CONTROL), np.random.default_rng([seed, 7]))
    angle = np.zeros(pwm.size + 1)
    for k, u in enumerate(pwm):
        data.ctrl[0] = float(fd.transform_ctrl(u / fd.PWM_FULL_SCALE, fd.TRUE_PARAMS))
        for _ in range(fd.SUBSTEPS):
            data.qfrc_applied[0] = float(fd.motor_force(data.qvel[0], data.ctrl[0], fd.TRUE_PARAMS))
            mujoco.mj_step(model, data)
        angle[k + 1] = data.qpos[0]
    return pwm, fd.quantize_angle(angle, fd.MOTOR_COUNTS_PER_REV)


def deadzone_case(max_iters: int) -> tuple[Case, dict[str, list[np.ndarray]]]:
    """The rotor's motor model fitted on a fresh 15 s capture per draw (the law
    ``robot_yaml_motor``, its edge a 0.008 ramp; gear, deadzone, damping and Coulomb friction
    per direction, from the truth): ``(case, hits)``. The case scores the default intervals
    (a deadzone's widened to the PWM levels around it); ``hits["unwidened"]`` the same
    fits' intervals without that widening (``compute_confidence(levels=False)``)."""
    spec = mujoco.MjSpec.from_string(ROTOR_XML)
    model = spec.compile()
    law = RobotYamlMotor("motor", "motor_joint", actuator="motor", width=0.008)
    t = fd.TRUE_PARAMS
    pair = {"gear": "actuator_gear", "deadzone": "motor_deadzone", "damping": "motor_damping",
            "frictionloss": "motor_frictionloss"}  # fmt: skip
    nominal = {k: [t[f"{v}_pos"], t[f"{v}_neg"]] for k, v in pair.items()}
    nominal |= {"viscous_quadratic": t["viscous_quadratic"], "back_emf_gain": t["back_emf_gain"]}
    frozen = ("viscous_quadratic", "back_emf_gain")
    high = {"deadzone": [0.3, 0.3], "gear": [1.0, 1.0]}

    def params() -> ms.ParameterDict:
        new = force_law_params(law.bind(model), nominal, max_value=high, frozen=frozen)
        return ms.ParameterDict(new)

    names = params().get_non_frozen_parameter_names()
    truth = params().as_vector()
    hits: dict[str, list[np.ndarray]] = {"unwidened": [], "unwidened infinite": []}

    def fit(rng: np.random.Generator) -> tuple[np.ndarray, Any, Any]:
        pwm, angle = rotor_capture(int(rng.integers(1 << 30)), 15.0)
        times = np.arange(angle.size) * fd.DT_CONTROL
        # row k holds the command that acts from tick k to k + 1 (the capture's row k + 1)
        ctrl = np.append(pwm, pwm[-1])[:, None] / fd.PWM_FULL_SCALE
        x0 = ms.create_initial_state(model)
        rf = ms.build_residual_fn(
            [ms.ModelSequences(
                "rotor", spec, ["prbs"], [x0],
                [ms.TimeSeries.from_control_names(times, ctrl, model)],
                [ms.TimeSeries.from_names(times, angle[:, None], model)],
            )],
            force_laws=[law],
        )  # fmt: skip
        opt, res = ms.optimize(params(), rf, max_iters=max_iters, allow_no_effect=True)
        plain = compute_confidence(res, rf, params=opt, levels=False)
        lo, hi = plain.ends().T
        hits["unwidened"].append((lo <= truth) & (truth <= hi))
        hits["unwidened infinite"].append(~np.isfinite(plain.half_widths))
        return res.x, compute_confidence(res, rf, params=opt), res

    groups = ["deadzones" if "deadzone" in n else "motor" for n in names]
    return Case("deadzone", names, truth, groups, fit), hits


def run(case: Case, ndraw: int, seed: int) -> dict[str, Any]:
    """Coverage of ``case`` over ``ndraw`` draws."""
    rng = np.random.default_rng(seed)
    hits, infinite, widths, conv, notes = [], [], [], 0, set()
    t0 = time.perf_counter()
    for _ in range(ndraw):
        _, conf, res = case.fit(rng)
        lo, hi = conf.ends().T
        hits.append((lo <= case.truth) & (case.truth <= hi))
        infinite.append(~np.isfinite(conf.half_widths))
        widths.append(conf.half_widths)
        conv += bool(res.success)
        notes.update(c.split(":")[0] for c in conf.caveats())
    return {
        "hits": np.array(hits),
        "infinite": np.array(infinite),
        "widths": np.array(widths),
        "converged": conv,
        "wall": time.perf_counter() - t0,
        "notes": sorted(notes),
    }


def print_report(case: Case, out: dict[str, Any], ndraw: int) -> None:
    hits, inf = out["hits"], out["infinite"]
    print(f"\n== {case.name}: {ndraw} draws, {out['wall']:.0f} s, {out['converged']} converged")
    print(
        f"  all parameters: {100 * hits.mean():.1f} % covered ({100 * inf.mean():.1f} % infinite)"
    )
    for g in dict.fromkeys(case.groups):
        cols = [i for i, gi in enumerate(case.groups) if gi == g]
        finite = ~inf[:, cols]
        rate = hits[:, cols].mean()
        fin = hits[:, cols][finite].mean() if finite.any() else float("nan")
        print(
            f"  {g:14s} ({len(cols):2d}): {100 * rate:5.1f} % covered, "
            f"{100 * fin:5.1f} % of the finite ones, {100 * (1 - finite.mean()):4.1f} % infinite"
        )
    if len(case.names) <= 20:
        for i, n in enumerate(case.names):
            print(f"    {n:30s} {100 * hits[:, i].mean():5.1f} %")
    if out["notes"]:
        print("  caveats seen: " + "; ".join(out["notes"][:8]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--problem",
        choices=["arm", "quadruped", "motor", "misspecified", "deadzone", "all"],
        default="all",
    )
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", choices=["cad", "truth"], default="cad")
    ap.add_argument("--max-iters", type=int, default=100)
    ap.add_argument("--method", choices=["linear", "bootstrap"], default="linear")
    ap.add_argument("--boot-draws", type=int, default=100)
    ap.add_argument(
        "--no-rough", action="store_true", help="keep the fit's Jacobian (no larger steps)"
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    todo = (
        ["arm", "quadruped", "motor", "misspecified", "deadzone"]
        if args.problem == "all"
        else [args.problem]
    )
    for name in todo:
        if name == "deadzone":
            case, hits = deadzone_case(args.max_iters)
            print_report(case, run(case, args.draws, args.seed), args.draws)
            plain, inf = np.array(hits["unwidened"]), np.array(hits["unwidened infinite"])
            print("  without the widening to the PWM levels (levels=False), the same fits:")
            for i, n in enumerate(case.names):
                print(
                    f"    {n:30s} {100 * plain[:, i].mean():5.1f} % "
                    f"({100 * inf[:, i].mean():.0f} % infinite)"
                )
            continue
        if name == "arm":
            case = bench_case(arm_problem(), args.start, args.max_iters)
        elif name == "quadruped":
            prob = pb.problem4(nseq=2, duration=1.0)
            case = bench_case(prob, args.start, args.max_iters, not args.no_rough)
            case.name = "quadruped"
        elif name == "misspecified":
            case, hits, flagged = misspecified_case(args.max_iters)
            print_report(case, run(case, args.draws, args.seed), args.draws)
            rate = {k: 100 * np.array(v).mean() for k, v in hits.items()}
            print(
                f"  linearised (method: linear) on the same fits: {rate['linear']:.1f} % "
                f"covered; the caveat on {sum(flagged)} of {len(flagged)} fits; the data's "
                f"own truth (armature aside): linear {rate['linear truth']:.1f} %, default "
                f"{rate['auto truth']:.1f} %"
            )
            continue
        else:
            case = motor_case(args.start, args.max_iters, args.method, args.boot_draws)
        print_report(case, run(case, args.draws, args.seed), args.draws)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
