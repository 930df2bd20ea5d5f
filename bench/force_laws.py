"""What a force law costs in a Jacobian: the same problem with and without the law.

Usage::

    python bench/force_laws.py [--threads N] [--repeats 5] [--links 6] [--steps 1000] [--seq 2]
    python bench/force_laws.py --scan 4,8,14,26,52 [--threads 2] [--links 6] [--steps 1000]

A chain of hinges (no contacts) with recorded sequences. "built-in": the free parameters are
each joint's damping (a model parameter, MuJoCo's own damping). "law": the same model and the
same number of free parameters, the damping now a :class:`ViscousFriction` law per joint
(what a residual function runs: compiled when Numba is installed; "lock step": the NumPy
lock step, ``compiled_laws=False``). "law+coulomb": a smooth Coulomb law as well (twice the
parameters). Each row: the best time of one batched evaluation of the ``p+1``
finite-difference candidates, and its ratio to "built-in" with as many parameters.

``--scan``: the rollouts alone for batches of the given sizes (no residuals), the built-in
rollout with 1 and ``--threads`` threads against the lock step with the laws on 1 thread and
on ``--threads`` threads: automatic chunking (``auto``), every thread a chunk (``split``) and
one chunk (``one``); and the lock step on ``mujoco.batch.Batch`` (:mod:`mjsysid.sim.batch`)
on 1 thread, on the pool, and choosing between them (``batch auto``); the compiled loops
(:mod:`mjsysid.sim.compiled`, Numba) on 1 and ``--threads`` threads; the ratio is to the
built-in rollout with as many threads (``auto`` rows: ``--threads``); ``chosen``: what a
residual function runs (:class:`~mjsysid.sim.batch.LawRollout`: the compiled loops when
Numba is installed, else the faster lock step measured on its first calls; give
``--repeats`` >= 7).
"""

from __future__ import annotations

import argparse
import time

import mujoco
import numpy as np

import mjsysid as ms
from mjsysid.sim.batch import BatchLockstep, LawRollout
from mjsysid.sim.laws.core import force_law_params
from mjsysid.sim.laws.friction import CoulombFriction, ViscousFriction
from mjsysid.sim.lockstep import LockstepRollout
from mjsysid.sim.rollout import BatchRollout


def chain_xml(links: int) -> str:
    body, close = "", ""
    for i in range(links):
        body += (
            f'<body name="b{i}" pos="{0.2 if i else 0} 0 0"><joint name="j{i}" type="hinge" '
            f'axis="0 1 0" damping="0.05"/><geom type="capsule" fromto="0 0 0 0.2 0 0" '
            f'size="0.02" mass="0.3"/>'
        )
        close += "</body>"
    acts = "".join(f'<motor name="m{i}" joint="j{i}"/>' for i in range(links))
    sens = "".join(
        f'<jointpos name="q{i}" joint="j{i}"/><jointvel name="v{i}" joint="j{i}"/>'
        for i in range(links)
    )
    return (
        f'<mujoco><option timestep="0.002"/><worldbody>{body}{close}</worldbody>'
        f"<actuator>{acts}</actuator><sensor>{sens}</sensor></mujoco>"
    )


def sequences(spec: mujoco.MjSpec, nseq: int, steps: int) -> ms.ModelSequences:
    model = spec.compile()
    rng = np.random.default_rng(0)
    t = 0.002 * np.arange(steps)
    names, x0s, ctrls, sens = [], [], [], []
    for s in range(nseq):
        ctrl = 0.2 * np.sin(np.arange(steps)[:, None] * 0.01 * (1 + rng.random(model.nu)))
        x0 = ms.create_initial_state(model)
        (traj,) = ms.sysid_rollout(model, None, ctrl, x0)
        names.append(f"s{s}")
        x0s.append(x0)
        ctrls.append(ms.TimeSeries.from_control_names(t, ctrl, model))
        sens.append(ms.TimeSeries.from_names(t, traj.sensordata, model))
    return ms.ModelSequences("chain", spec, names, x0s, ctrls, sens)


def jacobian_call(rf: ms.ResidualFunction, params: ms.ParameterDict) -> float:
    """Seconds of one batched evaluation of the ``p+1`` forward-difference candidates."""
    x = params.as_vector()
    X = x[:, None] + 1e-6 * np.eye(x.size, x.size + 1, 1)
    rf.clear_cache()
    t0 = time.perf_counter()
    rf(X, params)
    return time.perf_counter() - t0


def cases(links: int, seqs: ms.ModelSequences, nthread: int | None) -> dict[str, tuple]:
    model = seqs.spec.compile()
    joints = [f"j{i}" for i in range(links)]
    built = ms.ParameterDict(
        [ms.make_parameter("joint_damping", model, j, nominal=0.05) for j in joints]
    )
    spec0 = seqs.spec.copy()
    for j in spec0.joints:
        j.damping = np.zeros_like(j.damping)
    viscous = [ViscousFriction(f"v{j}", j, directional=False) for j in joints]
    coulomb = [CoulombFriction(f"c{j}", j, directional=False, width=0.05) for j in joints]
    law_seqs = ms.ModelSequences(
        "chain", spec0, seqs.sequence_name, seqs.initial_state, seqs.control, seqs.sensordata
    )
    p_visc = ms.ParameterDict(
        [p for law in viscous for p in force_law_params(law, {"damping": 0.05})]
    )
    p_both = p_visc.copy()
    for law in coulomb:
        for p in force_law_params(law, {"friction": 0.01}):
            p_both.add(p)
    built2 = built.copy()
    for j in joints:
        built2.add(ms.make_parameter("joint_armature", model, j, nominal=0.01))
    kw = {"nthread": nthread}
    both = [*viscous, *coulomb]
    return {
        "built-in": (ms.build_residual_fn(seqs, **kw), built, None),
        "law": (ms.build_residual_fn(law_seqs, force_laws=viscous, **kw), p_visc, "built-in"),
        "law lock step": (
            ms.build_residual_fn(law_seqs, force_laws=viscous, compiled_laws=False, **kw),
            p_visc,
            "built-in",
        ),
        "built-in 2p": (ms.build_residual_fn(seqs, **kw), built2, None),
        "law+coulomb": (
            ms.build_residual_fn(law_seqs, force_laws=both, **kw),
            p_both,
            "built-in 2p",
        ),
        "l+c lock step": (
            ms.build_residual_fn(law_seqs, force_laws=both, compiled_laws=False, **kw),
            p_both,
            "built-in 2p",
        ),
    }


def scan(links: int, steps: int, batches: list[int], nthread: int, repeats: int) -> None:
    """Rollout times per batch size (see the module docstring), best of ``repeats``."""
    model = mujoco.MjModel.from_xml_string(chain_xml(links))
    laws = [ViscousFriction(f"v{i}", f"j{i}", directional=False) for i in range(links)]
    x0 = ms.create_initial_state(model)
    one, many = BatchRollout(1), BatchRollout(nthread)
    runs = {
        "built-in 1t": lambda m, x, u, _v: one.run(m, x, u),
        f"built-in {nthread}t": lambda m, x, u, _v: many.run(m, x, u),
        "law 1t": LockstepRollout(one, laws).run,
        f"law {nthread}t auto": LockstepRollout(many, laws).run,
        f"law {nthread}t split": LockstepRollout(many, laws, chunk_work=0.0).run,
        f"law {nthread}t one": LockstepRollout(many, laws, chunk_work=np.inf).run,
        "batch 1t": BatchLockstep(many, laws, threads=1).run,
        f"batch {nthread}t": BatchLockstep(many, laws, threads=nthread).run,
        "batch auto": BatchLockstep(many, laws).run,
        "compiled 1t": LawRollout(one, laws, compiled=True).run,
        f"compiled {nthread}t": LawRollout(many, laws, compiled=True).run,
        "chosen": LawRollout(many, laws).run,
    }
    best = {(n, name): np.inf for n in batches for name in runs}
    for _ in range(repeats + 1):  # interleaved, best of
        for n in batches:
            k = np.arange(steps)[None, :, None] * (1 + np.arange(n)[:, None, None] / n)
            ctrl = 0.2 * np.sin(0.01 * k * (1 + np.arange(model.nu)))
            args = (
                [model] * n,
                np.repeat(x0[None], n, 0),
                ctrl,
                [{"damping": np.full((n, 1), 0.05)}] * links,
            )
            for name, run in runs.items():
                t0 = time.perf_counter()
                run(*args)
                best[n, name] = min(best[n, name], time.perf_counter() - t0)
    print(f"links={links} steps={steps} threads={nthread}: ms (ratio to built-in, same threads)")
    print(f"{'batch':>5} " + " ".join(f"{name:>18}" for name in runs))
    for n in batches:
        cells = []
        for name, t in ((name, best[n, name]) for name in runs):
            ref = best[n, "built-in 1t" if name.endswith(" 1t") else f"built-in {nthread}t"]
            cells.append(f"{1e3 * t:9.1f}" + ("" if "built-in" in name else f" ({t / ref:.2f})"))
        print(f"{n:>5} " + " ".join(f"{c:>18}" for c in cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--links", type=int, default=6)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seq", type=int, default=2)
    ap.add_argument("--scan", default="", help="batch sizes, e.g. 4,8,14,26,52")
    args = ap.parse_args()
    if args.scan:
        sizes = [int(n) for n in args.scan.split(",")]
        scan(args.links, args.steps, sizes, args.threads or 2, args.repeats)
        return
    spec = mujoco.MjSpec.from_string(chain_xml(args.links))
    seqs = sequences(spec, args.seq, args.steps)
    todo = cases(args.links, seqs, args.threads)
    times = {name: np.inf for name in todo}
    for _ in range(args.repeats + 1):  # interleaved (a loaded machine drifts); best of
        for name, (rf, params, _ref) in todo.items():
            times[name] = min(times[name], jacobian_call(rf, params))
    print(f"links={args.links} steps={args.steps} sequences={args.seq} threads={args.threads}")
    print(f"{'case':<14} {'p':>3} {'rollouts':>8} {'time (ms)':>10} {'ratio':>6}")
    for name, (_rf, params, ref) in todo.items():
        ratio = "" if ref is None else f"{times[name] / times[ref]:.2f}"
        n = (params.size + 1) * args.seq
        print(f"{name:<14} {params.size:>3} {n:>8} {1e3 * times[name]:>10.1f} {ratio:>6}")


if __name__ == "__main__":
    main()
