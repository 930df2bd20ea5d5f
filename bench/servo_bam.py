"""mjsysid on real servo logs, side by side with the outside project's own model.

Four real logs of a Feetech STS3250 smart servo on a pendulum bench, recorded and published
by Rhoban's BAM project (Apache-2.0: ``bench/data/bam_sts3250/README.md`` and ``LICENSE``),
fitted with mjsysid's library laws and no conversion code (the JSON logs read as they are,
the servo's goal and torque-enable flag as recorded inputs, its firmware gain and supply as
per-recording constants: the bundled ``example:servo``), and judged the way BAM judges its
models: the mean absolute error of the open-loop angle (MAE, from the first row, the servo
fed the logged goal), at the log's rows.

Side by side, in one process:

* **BAM M6**: BAM's own fit of its richest friction model for this servo
  (``bam_params_m6.json``), run through BAM's published equations as implemented
  independently in :mod:`bam_reference` (not mjsysid code);
* **mjsysid**, for each friction model (``--models``, in order; each richer model starts from
  the previous one's fit, its extra terms at their starting values): fitted on all four logs
  (in-sample, as the M6 file was fitted on BAM's logs), and leave-one-trajectory-out (fitted
  on three logs, the MAE of the fourth: held out).

Run ``python bench/servo_bam.py`` (about 15 min on a loaded 2-core machine; ``--quick``: the
in-sample fits only). Figures go in ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import mujoco
import numpy as np

import mjsysid as ms

try:  # run as a script (bench/ on sys.path) or imported from tests/bench
    import bam_reference as bam
except ImportError:  # pragma: no cover
    from bench import bam_reference as bam  # type: ignore[no-redef]

EXAMPLE = Path(str(resources.files("mjsysid") / "examples" / "servo"))
LOGS = {
    "sin_sin": "2024-10-26_12h23m27.json",
    "lift_and_drop": "2024-10-26_12h23m42.json",
    "sin_time_square": "2024-10-26_12h24m55.json",
    "up_and_down": "2024-10-26_12h27m27.json",
}
MAX_ITERS = 60  # the example's settings (one stage; --horizons auto: the default stages)


@dataclass(frozen=True)
class Variant:
    """One friction model: its law and its starting values."""

    name: str
    friction: ms.JointFriction
    nominal: dict[str, float]


VARIANTS = {
    "coulomb_viscous": Variant(
        "coulomb_viscous",
        ms.JointFriction("friction", "servo", directional=False, stick=True),
        {"coulomb": 0.1, "viscous": 0.05},
    ),
    "load": Variant(
        "load",
        ms.JointFriction(
            "friction",
            "servo",
            directional=False,
            stick=True,
            stribeck=True,
            load=True,
            load_external=True,
        ),
        {
            "coulomb": 0.1,
            "viscous": 0.05,
            "stribeck": 0.05,
            "stribeck_velocity": 0.1,
            "load": 0.05,
            "load_external": 0.1,
        },
    ),
}
SERVO = ms.PositionServo("servo", "servo")
SERVO_NOMINAL = {"kt": 2.0, "resistance": 2.0, "gain": 0.1}


def sequences(names: Sequence[str]) -> ms.ModelSequences:
    """The logs ``names`` of ``example:servo`` as read by ``mjsysid`` (no conversion)."""
    spec = mujoco.MjSpec.from_file(str(EXAMPLE / "servo.xml"))
    model = spec.compile()
    recs = [
        ms.load_recording(
            EXAMPLE / LOGS[n],
            model,
            time="timestamp",
            sensors={"angle": "position"},
            inputs=["goal_position", "torque_enable"],
            jitter_tolerance=0.3,
            ignore_columns=["speed", "load", "input_volts", "temp"],
        )
        for n in names
    ]
    x0 = [
        ms.create_initial_state(model, r.sensordata.data[0, :1], np.zeros(1), time=r.times[0])
        for r in recs
    ]
    return ms.ModelSequences(
        "servo", spec, list(names), x0, [r.control for r in recs], [r.sensordata for r in recs],
        inputs=[r.inputs for r in recs], constants=[r.constants for r in recs],
    )  # fmt: skip


def parameters(variant: Variant) -> ms.ParameterDict:
    model = mujoco.MjModel.from_xml_path(str(EXAMPLE / "servo.xml"))
    armature = ms.make_parameter(
        "joint_armature", model, "servo", nominal=0.002, min_value=0.0, max_value=0.02
    )
    return ms.ParameterDict(
        [
            armature,
            *ms.force_law_params(SERVO, SERVO_NOMINAL),
            *ms.force_law_params(variant.friction, variant.nominal),
        ]
    )


def fit(
    variant: Variant,
    names: Sequence[str],
    start_from: ms.ParameterDict | None = None,
    horizons: str | None = None,
) -> tuple[ms.ParameterDict, float]:
    """``(identified parameters, seconds)`` of a fit on the logs ``names``, from the
    variant's starting values, or from ``start_from``'s where it has the parameter (a richer
    model started from a simpler one's fit, its extra terms at their starting values), with
    the ``horizons`` of :func:`mjsysid.optimize` (``None``: one stage, as the example;
    ``"auto"``: the default stages)."""
    params = parameters(variant)
    if start_from is not None:
        for name in params:
            if name in start_from:
                params[name].value = start_from[name].value.copy()
    fn = ms.build_residual_fn([sequences(names)], force_laws=[SERVO, variant.friction])
    start = time.perf_counter()
    identified, _ = ms.optimize(params, fn, max_iters=MAX_ITERS, horizons=horizons)
    return identified, time.perf_counter() - start


def _values(params: ms.ParameterDict) -> str:
    return ", ".join(f"{n}={float(p.value[0]):.4g}" for n, p in params.items())


def maes(variant: Variant, params: ms.ParameterDict, names: Sequence[str]) -> dict[str, float]:
    """Per log: the open-loop MAE of the angle at the log's rows [mrad]."""
    fn = ms.build_residual_fn([sequences(names)], force_laws=[SERVO, variant.friction])
    out = {}
    for pred in fn.predict(None, params):
        diff = pred.predicted_at_measured.data - pred.measured_used.data
        out[pred.sequence_name] = 1e3 * float(np.mean(np.abs(diff)))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--quick", action="store_true", help="in-sample fits only")
    ap.add_argument(
        "--horizons",
        choices=["auto", "none"],
        default="none",
        help="the fit's horizon stages (none: one stage, as example:servo)",
    )
    args = ap.parse_args(argv)
    logs = {log.trajectory: log for log in bam.load_logs()}
    ref = bam.load_params()
    bam_rows = {n: 1e3 * float(bam.mae(logs[n], ref, "m6", "rows")) for n in LOGS}
    table: dict[str, dict[str, float]] = {"BAM M6 (its own fit)": bam_rows}
    seconds: dict[str, float] = {}
    simpler: dict[tuple[str, ...], ms.ParameterDict] = {}  # the previous model's fits
    for name in args.models:
        variant = VARIANTS[name]
        folds = [tuple(LOGS)] + (
            [] if args.quick else [tuple(n for n in LOGS if n != o) for o in LOGS]
        )
        fits = {}
        for logs_in in folds:
            horizons = None if args.horizons == "none" else args.horizons
            fits[logs_in] = fit(variant, logs_in, simpler.get(logs_in), horizons)
        simpler = {k: v[0] for k, v in fits.items()}
        params, sec = fits[tuple(LOGS)]
        table[f"mjsysid {name}, in-sample"] = maes(variant, params, list(LOGS))
        seconds[f"mjsysid {name}, in-sample"] = sec
        print(f"{name}: in-sample fit {sec:.1f} s: {_values(params)}", flush=True)
        if args.quick:
            continue
        held: dict[str, float] = {}
        total = 0.0
        for out in LOGS:
            params, sec = fits[tuple(n for n in LOGS if n != out)]
            held[out] = maes(variant, params, [out])[out]
            total += sec
        table[f"mjsysid {name}, held out"] = held
        seconds[f"mjsysid {name}, held out"] = total / len(LOGS)
    cols = list(LOGS)
    print(
        f"\n{'open-loop angle MAE [mrad]':40s}"
        + "".join(f"{c:>16s}" for c in cols)
        + f"{'mean':>9s}{'ratio':>7s}{'fit s':>7s}"
    )
    ref_mean = float(np.mean(list(bam_rows.values())))
    for row, vals in table.items():
        mean = float(np.mean([vals[c] for c in cols]))
        sec = f"{seconds[row]:7.1f}" if row in seconds else f"{'':7s}"
        print(
            f"{row:40s}" + "".join(f"{vals[c]:16.2f}" for c in cols)
            + f"{mean:9.2f}{mean / ref_mean:7.2f}{sec}"
        )  # fmt: skip
    print(
        "\nratio: the mean over BAM M6's mean (its own parameters, its equations, evaluated at "
        "the log's rows, bench/bam_reference.py). held out: leave one trajectory out (fitted "
        "on the other three). fit s: seconds of one fit (held out: mean over the four)."
    )


if __name__ == "__main__":
    main()
