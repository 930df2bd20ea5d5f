"""Populations on MuJoCo Warp against the CPU batch, in one run (issue #29).

Usage::

    python bench/warp_populations.py [--sizes 256,512,1024,2048,4096,8192] [--steps 500]
                                     [--repeats 3] [--threads N] [--device cuda:0]
                                     [--global-budget 800] [--furuta] [--json out.jsonl]

The problem: the DC motor of ``bench/global_search.py`` (deadband, friction loss, ``kv``,
gear; encoder only; ``--steps`` steps of 2 ms). For each population size ``k``: ``k``
candidates drawn in the parameter box (Latin hypercube), one batched residual call on the
CPU (``rollout="cpu"``: MuJoCo's rollout on ``--threads`` threads) and one on the device
(``rollout="warp"``: ``k`` MuJoCo Warp worlds), best of ``--repeats``, interleaved; the
costs of the two are compared (float32 on the device). Rows: seconds, candidates per
second, CPU / device, the largest relative cost difference, and whether both rank the same
best candidate.

Then the global stage end to end (``fit_global``: CMA-ES with ``--global-budget``
evaluations, then the local fit on the CPU) from the 3x-off start, ``rollout="cpu"`` against
``rollout="warp"``. ``--furuta``: the same for the bundled Furuta example (three force laws
and the pendulum's damping) from a far start (every law parameter 3x off its nominal, the
deadzones at 0, the windows' initial states held at their recorded values), with a
population of 256 per generation; only on a GPU unless
``--allow-cpu-device`` (Warp's CPU device is slow).

The device's name is printed first. Without a GPU Warp runs on its CPU device: the script
then says so, and its device figures are that device's, not a GPU's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from global_search import START, TRUTH, motor_problem

import mjsysid as ms
from mjsysid.fit.options import GlobalSearchOptions
from mjsysid.fit.search import fit_global, latin_hypercube
from mjsysid.sim.warp import import_warp


def device_line(device: str | None) -> tuple[str, bool]:
    """The device in words, and whether it is a GPU."""
    wp, _ = import_warp()
    d = wp.get_device(device)
    if d.is_cuda:
        return f"{d.alias} ({d.name}), a GPU", True
    return (
        f"{d.alias} ({d.name}): Warp's CPU device, NO GPU; device figures are not GPU figures",
        False,
    )


Emit = Callable[[dict[str, Any]], None]


def json_sink(path: Path | None, device: str) -> Emit:
    """Prints each row as a JSON line and appends it to ``path`` at once (with the device
    named): a run cut short, or failing in a later stage, keeps the rows it finished."""

    def emit(row: dict[str, Any]) -> None:
        print(json.dumps(row), flush=True)
        if path is not None:
            with path.open("a") as f:
                f.write(json.dumps({**row, "device": device}) + "\n")

    return emit


def _costs(rf: Any, X: np.ndarray, params: ms.ParameterDict) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    R = rf(X, params)
    wall = time.perf_counter() - t0
    c = 0.5 * np.sum(R * R, axis=0)
    return np.where(np.isfinite(c), c, np.inf), wall


def populations(args: argparse.Namespace, emit: Emit) -> list[dict[str, Any]]:
    rf, params = motor_problem(args.steps, args.threads)
    dev = rf.on_backend("warp")
    lo, hi = params.get_bounds()
    rng = np.random.default_rng(args.seed)
    dev(latin_hypercube(lo, hi, 2, rng), params)  # compiles the device's kernels
    rows = []
    for k in args.sizes:
        X = latin_hypercube(lo, hi, k, rng)
        best = {"cpu": np.inf, "warp": np.inf}
        out: dict[str, np.ndarray] = {}
        for _ in range(args.repeats):
            for name, fn in (("cpu", rf), ("warp", dev)):
                out[name], wall = _costs(fn, X, params)
                best[name] = min(best[name], wall)
        finite = np.isfinite(out["cpu"]) & np.isfinite(out["warp"])
        rel = np.abs(out["warp"] - out["cpu"]) / np.maximum(np.abs(out["cpu"]), 1e-300)
        rows.append(
            {
                "kind": "population",
                "size": k,
                "steps": args.steps,
                "cpu_s": best["cpu"],
                "device_s": best["warp"],
                "cpu_over_device": best["cpu"] / best["warp"],
                "max_rel_cost_diff": float(rel[finite].max()) if finite.any() else None,
                "same_best": bool(np.argmin(out["cpu"]) == np.argmin(out["warp"])),
                "diverged_cpu": int((~np.isfinite(out["cpu"])).sum()),
                "diverged_device": int((~np.isfinite(out["warp"])).sum()),
            }
        )
        emit(rows[-1])
    rf.close()
    return rows


def global_stage(
    rf: Any,
    start: ms.ParameterDict,
    budget: int,
    population: int | None,
    seed: int,
    emit: Emit,
    **kw: Any,
) -> list[dict[str, Any]]:
    rows = []
    for rollout in ("cpu", "warp"):
        options = ms.FitOptions(
            global_search=GlobalSearchOptions(budget=budget, population=population, seed=seed),
            rollout=rollout,
            **kw,
        )
        t0 = time.perf_counter()
        _, res = fit_global(start, rf, options)
        wall = time.perf_counter() - t0
        g = res.global_search
        assert g is not None
        rows.append(
            {
                "kind": "global",
                "rollout": rollout,
                "wall_s": wall,
                "global_evaluations": g.evaluations,
                "generations": g.generations,
                "global_cost": g.cost,
                "final_cost": res.cost,
                "x": res.x.tolist(),
            }
        )
        emit(rows[-1])
    return rows


FURUTA_POPULATION = 256
"""Candidates per generation of the Furuta far start's global stage."""


def furuta_problem() -> tuple[Any, ms.ParameterDict]:
    from mjsysid.app.experiment.loader import load_experiment, resolve_experiment_path

    exp = load_experiment(resolve_experiment_path("example:furuta"))
    start = exp.params.copy()
    for name, p in start.items():
        if "#" in name:  # a window's initial state: held at its recorded value
            p.frozen = True
        elif name.startswith("motor_deadzone"):
            p.value = np.zeros_like(p.value)
        elif not p.frozen:
            p.min_value = np.where(np.isfinite(p.min_value), p.min_value, 0.0)  # a finite box
            p.value = np.clip(3.0 * np.asarray(p.value), p.min_value, p.max_value)
    return exp.build_residual_fn(), start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512,1024,2048,4096,8192")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--device", default=None, help="a Warp device (default: Warp's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--global-budget", type=int, default=800, help="0: no global-stage rows")
    ap.add_argument("--furuta", action="store_true")
    ap.add_argument("--allow-cpu-device", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.furuta and args.global_budget < FURUTA_POPULATION + 1:
        ap.error(
            f"--furuta needs --global-budget >= {FURUTA_POPULATION + 1} (one generation of "
            f"{FURUTA_POPULATION} and the start), got {args.global_budget}"
        )
    if args.device is not None:
        wp, _ = import_warp()
        wp.set_device(args.device)
    line, gpu = device_line(args.device)
    print(f"# device: {line}; CPU batch: {args.threads} threads; load {os.getloadavg()[0]:.1f}")
    emit = json_sink(args.json, line)
    rows = populations(args, emit)
    if args.global_budget:
        rf, start = motor_problem(args.steps, args.threads)
        print(f"# motor global stage from {START} (truth {TRUTH})")
        rows += global_stage(
            rf, start, args.global_budget, None, args.seed, emit, allow_no_effect=True
        )
        rf.close()
    if args.furuta:
        if gpu or args.allow_cpu_device:
            rf, start = furuta_problem()
            print("# Furuta far start: law parameters 3x off, deadzones 0")
            rows += global_stage(
                rf, start, args.global_budget, FURUTA_POPULATION, args.seed, emit, max_iters=100
            )
            rf.close()
        else:
            print("# Furuta far start skipped: no GPU (--allow-cpu-device runs it on Warp's CPU)")
    print(f"# load {os.getloadavg()[0]:.1f}")
    print(f"{'size':>6} {'cpu_s':>9} {'device_s':>9} {'cpu/device':>10} {'max rel cost diff':>18}")
    for r in rows:
        if r["kind"] == "population":
            diff = r["max_rel_cost_diff"]
            print(
                f"{r['size']:>6} {r['cpu_s']:>9.3f} {r['device_s']:>9.3f} "
                f"{r['cpu_over_device']:>10.2f} {diff if diff is None else f'{diff:.2e}':>18}"
            )


if __name__ == "__main__":
    main()
