"""Residual evaluations on a Dask LocalCluster: throughput against workers, overhead against
the local threads at the same core count.

Usage::

    python bench/dask_scaling.py [--workers 1,2] [--repeats 5] [--json out.jsonl]

The model is the scaling benchmark's base case (problem 5's 24-hinge model, 24 parameters, 2
sequences of 250 steps). For each batch (the ``p+1`` finite-difference candidates of a
Jacobian, and a 4x larger population as in CMA-ES) and each worker count ``W`` the table shows
candidate rollouts per second on ``W`` single-threaded worker processes, the same for the local
:class:`ResidualFunction` with ``W`` rollout threads, their ratio (``dist/local`` time: the
overhead of the distributed path: pickling, transfers, scheduling) and the speed-up over one
worker. The distributed residual is checked to equal the local one bit for bit. Every number is
measured in one run, round-robin (best of ``--repeats``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import adapters as A
import numpy as np
import run as R
import scaling as S

from mjsysid.fit.distributed import distribute, make_executor


def population(X: np.ndarray, factor: int, seed: int = 0) -> np.ndarray:
    """``factor`` copies of the candidates ``X (p, k)``, each moved by a relative 1e-4."""
    rng = np.random.default_rng(seed)
    reps = np.repeat(X, factor, axis=1)
    return reps * (1 + 1e-4 * rng.uniform(-1, 1, size=reps.shape))


def measure(workers: list[int], repeats: int) -> list[dict[str, Any]]:
    """One row per (batch, workers): times, rollouts per second and ratios."""
    prob = S.make_problem(**S.BASE)
    X, _ = R.fd_candidates(prob)
    lo = np.concatenate([p.lo for p in prob.params])
    hi = np.concatenate([p.hi for p in prob.params])
    batches = {"jacobian": X, "population": np.clip(population(X, 4), lo[:, None], hi[:, None])}
    rows: list[dict[str, Any]] = []
    rate1: dict[str, float] = {}
    for w in workers:
        local = A.ours_setup(prob, w)
        client = make_executor(workers=w, threads_per_worker=1)
        client.wait_for_workers(w, timeout=120)
        dist = distribute(A.ours_setup(prob, 1).residual, client)
        try:
            for name, B in batches.items():
                shift = R.moved_start(prob) - prob.start
                next_B = R.alternating(B, shift)
                params = local.params
                assert np.array_equal(dist(B, params), local.residual(B, params))
                t = R.interleaved_times(
                    {
                        "local": lambda nb=next_B, f=local.residual, q=params: f(nb(), q),
                        "dist": lambda nb=next_B, f=dist, q=params: f(nb(), q),
                    },
                    repeats,
                )
                k = B.shape[1] * len(prob.sequences)  # candidate rollouts per call
                rate = k / t["dist"]
                rate1.setdefault(name, rate)
                rows.append(
                    {
                        "kind": "distributed",
                        "batch": name,
                        "candidates": B.shape[1],
                        "rollouts": k,
                        "workers": w,
                        "local_s": t["local"],
                        "dist_s": t["dist"],
                        "local_rollouts_per_s": k / t["local"],
                        "dist_rollouts_per_s": rate,
                        "dist_over_local": t["dist"] / t["local"],
                        "speedup_vs_1_worker": rate / rate1[name],
                    }
                )
        finally:
            dist.close()
            local.residual.close()
            client.close()  # (and its LocalCluster)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| batch | candidates | rollouts | workers | local (s) | dask (s) | local rollouts/s "
        "| dask rollouts/s | dask/local | speed-up vs 1 worker |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [
        f"| {r['batch']} | {r['candidates']} | {r['rollouts']} | {r['workers']} "
        f"| {r['local_s']:.4f} | {r['dist_s']:.4f} | {r['local_rollouts_per_s']:.0f} "
        f"| {r['dist_rollouts_per_s']:.0f} | {r['dist_over_local']:.2f} "
        f"| {r['speedup_vs_1_worker']:.2f} |"
        for r in rows
    ]
    return "\n".join([head, *lines])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rows = measure([int(w) for w in args.workers.split(",")], args.repeats)
    print(table(rows))
    if args.json is not None:
        with args.json.open("a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
