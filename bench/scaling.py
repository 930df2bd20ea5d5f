"""How the cost of one Jacobian grows with parameters, sequences and steps: mjsysid vs floor.

Usage::

    python bench/scaling.py [--threads N] [--repeats 5] [--peer] [--json out.jsonl]

The model is problem 5's (24 hinges, no contacts). Starting from a base case (24 parameters,
2 sequences, 250 steps), one dimension varies at a time. For each case the table shows the time
of one batched evaluation of the ``p+1`` finite-difference candidates by mjsysid, the time of the
same rollouts done by one ``mujoco.rollout`` call (the floor), their ratio, and both times per
rollout step. "Cost grows no faster than the floor" means the ratio column stays flat.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import adapters as A
import problems as P
import run as R

BASE = {"p": 24, "C": 2, "steps": 250}
CASES = (
    [("params", {"p": p}) for p in (6, 12, 24, 48)]
    + [("sequences", {"C": c}) for c in (1, 2, 5)]
    + [("steps", {"steps": s}) for s in (125, 250, 500)]
)


def make_problem(p: int, C: int, steps: int) -> P.Problem:
    prob = P.problem5(nseq=C, duration=steps * 0.004)
    # Half masses, half dampings, interleaved by limb so every subset spans the model.
    masses = [d for d in prob.params if d.kind == "body_mass"]
    damps = [d for d in prob.params if d.kind == "joint_damping"]
    chosen = [x for pair in zip(masses, damps, strict=True) for x in pair][:p]
    prob.params = chosen
    prob.title = f"p={p} C={C} steps={steps}"
    return prob


def measure(prob: P.Problem, threads: int, repeats: int, peer: bool) -> dict[str, Any]:
    ours = A.ours_setup(prob, threads)
    X, _ = R.fd_candidates(prob)
    floor = R.Floor(prob, X, threads)
    next_X = R.alternating(X, R.moved_start(prob) - prob.start)
    fns = {"floor": floor, "ours": lambda: ours.residual(next_X(), ours.params)}
    if peer:
        ps = A.peer_setup(prob, threads)
        fns["peer"] = lambda: A.peer_residual_vector(ps, X)
    try:
        with A.silenced():
            t = R.interleaved_times(fns, repeats)
    finally:
        floor.close()
        ours.residual.close()
    steps = floor.nrollouts * floor.nstep
    out = {
        "kind": "scaling",
        "p": prob.nparam,
        "C": len(prob.sequences),
        "steps": floor.nstep,
        "rollouts": floor.nrollouts,
        "threads": threads,
        "ours_s": t["ours"],
        "floor_s": t["floor"],
        "ours_over_floor": t["ours"] / t["floor"],
        "cpu_ours_over_floor": t["ours_cpu"] / t["floor_cpu"],
        "ours_us_per_step": 1e6 * t["ours"] / steps,
        "floor_us_per_step": 1e6 * t["floor"] / steps,
    }
    if peer:
        out.update(peer_s=t["peer"], peer_over_floor=t["peer"] / t["floor"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--peer", action="store_true", help="add the peer's column (slow)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.peer and not A.peer_available()[0]:
        print("NOTE: peer column skipped, mujoco.sysid does not import")
        args.peer = False
    sink = args.json.open("w") if args.json else None
    rows = []
    cache: dict[tuple[int, int, int], dict[str, Any]] = {}
    for vary, change in CASES:
        case = {**BASE, **change}
        key = (case["p"], case["C"], case["steps"])
        if key not in cache:
            cache[key] = measure(make_problem(*key), args.threads, args.repeats, args.peer)
        rec = {"vary": vary, **cache[key]}
        R.emit(rec, sink)
        row = [
            vary,
            rec["p"],
            rec["C"],
            rec["steps"],
            rec["rollouts"],
            f"{rec['ours_s'] * 1e3:.1f}",
            f"{rec['floor_s'] * 1e3:.1f}",
            f"{rec['ours_over_floor']:.2f}",
            f"{rec['cpu_ours_over_floor']:.2f}",
            f"{rec['ours_us_per_step']:.2f}",
            f"{rec['floor_us_per_step']:.2f}",
        ]
        if args.peer:
            row += [f"{rec['peer_s'] * 1e3:.1f}", f"{rec['peer_over_floor']:.2f}"]
        rows.append(row)
    header = [
        "vary",
        "p",
        "C",
        "steps",
        "rollouts",
        "ours_ms",
        "floor_ms",
        "ours/floor",
        "cpu ours/floor",
        "ours_us/step",
        "floor_us/step",
    ]
    if args.peer:
        header += ["peer_ms", "peer/floor"]
    print()
    print(
        f"== One Jacobian ((p+1) candidates x C sequences), {args.threads} threads, best of "
        f"{args.repeats} =="
    )
    print(R.table(rows, header))
    if sink is not None:
        sink.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
